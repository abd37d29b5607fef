"""A NUL byte in user text, and UTF-16 text, are refused by every reader of text in one line.

UTF-16 text without a byte-order mark is valid UTF-8 (ASCII letters with a NUL byte between
them): it was embedded and trained on as tokens like ``"t\\x00h\\x00e\\x00"``. Each message
names the file, the line and the byte offset, and says UTF-16 where the text looks like it.
"""
from __future__ import annotations

import codecs
import gzip
import re

import pytest

from elmo.cli import main
from elmo.text_files import UTF16_HINT, nul_byte_where
from training_helpers import write_toy_corpus

TEXT = "the cat sees a dog .\nno bird !\n"


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_corpus(tmp_path_factory.mktemp("toy"), n_train=40, n_heldout=10)


def test_nul_byte_where_says_utf16_only_where_the_text_looks_like_it():
    assert nul_byte_where(b"the dog", 1) is None
    # a stray NUL in UTF-8 text: where it is, no UTF-16 hint
    stray = nul_byte_where(b"the\0dog barks", 4, offset=100)
    assert stray is not None and stray.startswith("line 4: a NUL byte (0x00) at byte offset 103 (")
    assert "UTF-16" not in stray
    # little- and big-endian ASCII (a line after the first begins with the NUL of "\n\0")
    for data in ("the dog".encode("utf-16-le"), "\nthe dog".encode("utf-16-le")[1:],
                 "the dog".encode("utf-16-be")):
        assert UTF16_HINT in (nul_byte_where(data, 1) or ""), data


def _corpus_files(folder):
    """(file, its line 1 message) for UTF-16 text without and with a byte-order mark."""
    le, bom = folder / "le.txt", folder / "bom.txt"
    le.write_bytes(TEXT.encode("utf-16-le"))
    bom.write_bytes(TEXT.encode("utf-16"))
    return [(le, f"{le}: line 1: a NUL byte (0x00) at byte offset 1 ({UTF16_HINT})"),
            (bom, f"{bom}: line 1: byte 0xff at byte offset 0 (a UTF-16 byte-order mark; {UTF16_HINT}) "
                  f"is not valid UTF-8")]


def test_corpus_reader_refuses_nul_and_utf16(tmp_path):
    from elmo.data.corpus import CorpusError, count_words, read_sentences

    stray = tmp_path / "stray.txt"
    stray.write_bytes(b"a cat\nthe\0dog barks\n")
    with pytest.raises(CorpusError, match=re.escape(f"{stray}: line 2: a NUL byte (0x00) at byte offset 9 (")):
        read_sentences(stray)
    packed = tmp_path / "stray.txt.gz"
    packed.write_bytes(gzip.compress(stray.read_bytes()))
    with pytest.raises(CorpusError, match=re.escape(f"{packed}: line 2: a NUL byte (0x00) at byte offset 9 (")
                       + ".*the decompressed text's"):
        read_sentences(packed)
    for path, message in _corpus_files(tmp_path):
        for read in (read_sentences, lambda p: count_words([p])):
            with pytest.raises(CorpusError, match=re.escape(message)):
                read(path)


def test_train_refuses_utf16_text_in_one_line(tmp_path, toy, capsys):
    _, _, vocab_txt = toy
    for path, message in _corpus_files(tmp_path):
        assert main(["train", str(path), "--vocab", str(vocab_txt), "-o", str(tmp_path / "run"),
                     "--dim", "16", "--projection-dim", "8", "--filters", "1:4", "--batch-size", "2",
                     "--max-steps", "1", "--negatives", "0", "--no-progress", "--device", "cpu"]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err


def test_embed_refuses_nul_and_utf16_in_one_line(tmp_path, capsys):
    le, bom, stray = tmp_path / "le.txt", tmp_path / "bom.txt", tmp_path / "stray.txt"
    le.write_bytes(TEXT.encode("utf-16-le"))
    bom.write_bytes(TEXT.encode("utf-16"))
    stray.write_bytes(b"a cat\nthe\0dog barks\n")
    cases = [(le, [], f"{le}: line 1: a NUL byte (0x00) at byte offset 1 ({UTF16_HINT})"),
             # replacing bytes that are not UTF-8 does not let a NUL through
             (le, ["--errors", "replace"], f"{le}: line 1: a NUL byte (0x00) at byte offset 1 ({UTF16_HINT})"),
             (bom, [], f"{bom}: line 1: byte 0xff at byte offset 0 (a UTF-16 byte-order mark; {UTF16_HINT})"),
             (bom, ["--errors", "replace"], f"{bom}: line 1: a NUL byte (0x00) at byte offset 3 ({UTF16_HINT})"),
             (stray, [], f"{stray}: line 2: a NUL byte (0x00) at byte offset 9 (")]
    for path, extra, message in cases:
        out = tmp_path / "out.hdf5"
        assert main(["embed", str(path), str(out), "--model", "fixture", "--quiet", *extra]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
        assert not out.exists()


def test_predict_input_refuses_nul_and_utf16(tmp_path):
    from elmo.commands.predict import _input_lines

    le, bom = tmp_path / "le.txt", tmp_path / "bom.txt"
    le.write_bytes(TEXT.encode("utf-16-le"))
    bom.write_bytes(TEXT.encode("utf-16"))
    with pytest.raises(ValueError, match=re.escape(f"{le}:1: a NUL byte (0x00) at byte offset 1 ({UTF16_HINT})")):
        list(_input_lines(str(le)))
    with pytest.raises(ValueError, match=re.escape(f"{bom}: line 1: byte 0xff at byte offset 0 "
                                                   f"(a UTF-16 byte-order mark; {UTF16_HINT})")):
        list(_input_lines(str(bom)))


def test_neighbors_corpus_refuses_utf16(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes("the bank raised its rates .\n".encode("utf-16-le"))
    assert main(["neighbors", "the bank .", "--word", "bank", "--model", "fixture", "--corpus", str(corpus),
                 "--index-dir", str(tmp_path / "ix"), "--no-glove"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{corpus}: line 1: a NUL byte (0x00) at byte offset 1" in err, err


def test_utf32_is_named_utf32_not_utf16():
    """UTF-32 text was said to look like UTF-16 (its bytes at even positions are half NUL too)."""
    from elmo.text_files import UTF32_HINT, wide_encoding

    for data in ("the dog".encode("utf-32-le"), "the dog".encode("utf-32-be"),
                 "\nthe dog".encode("utf-32-le")[1:], "\nthe dog".encode("utf-32-be")[4:]):
        where = nul_byte_where(data, 1) or ""
        assert UTF32_HINT in where and "UTF-16" not in where, data
    for data in ("the dog".encode("utf-16-le"), "the dog".encode("utf-16-be")):
        assert wide_encoding(data) == "UTF-16", data
    assert wide_encoding(b"the dog") is None and wide_encoding(b"the\0dog barks") is None


def test_utf32_byte_order_marks_are_named():
    """FF FE 00 00 was called a UTF-16 mark; 00 00 FE FF fails at its third byte, and got no hint."""
    from elmo.text_files import UTF32_HINT, utf8_error_where

    for data, byte, at in ((codecs.BOM_UTF32_LE + "the".encode("utf-32-le"), 0xff, 0),
                           (codecs.BOM_UTF32_BE + "the".encode("utf-32-be"), 0xfe, 2)):
        with pytest.raises(UnicodeDecodeError) as e:
            data.decode("utf-8")
        assert utf8_error_where(data, e.value) == (f"line 1: byte 0x{byte:02x} at byte offset {at} "
                                                   f"(a UTF-32 byte-order mark; {UTF32_HINT})")
    # only where the mark opens the file: the same bytes later are bad UTF-8, no more
    data = b"ab\n" + codecs.BOM_UTF32_LE
    with pytest.raises(UnicodeDecodeError) as e:
        data.decode("utf-8")
    assert "mark" not in utf8_error_where(data, e.value)


def test_embed_suggests_converting_not_errors_replace_for_utf16_and_utf32(tmp_path, capsys):
    """A file opening with a UTF-16 or UTF-32 byte-order mark, or UTF-16 text whose letters are
    not all ASCII, was told to pass --errors replace, which only led to the NUL byte error."""
    from elmo.text_files import UTF32_HINT

    bom16, bom32, bom32be, cafe = (tmp_path / f"{n}.txt" for n in ("bom16", "bom32", "bom32be", "cafe"))
    bom16.write_bytes(TEXT.encode("utf-16"))
    bom32.write_bytes(codecs.BOM_UTF32_LE + TEXT.encode("utf-32-le"))
    bom32be.write_bytes(codecs.BOM_UTF32_BE + TEXT.encode("utf-32-be"))
    cafe.write_bytes("café au lait\n".encode("utf-16-le"))    # (0xe9 0x00 is not UTF-8)
    cases = [(bom16, f"(a UTF-16 byte-order mark; {UTF16_HINT}) is not valid UTF-8"),
             (bom32, f"line 1: byte 0xff at byte offset 0 (a UTF-32 byte-order mark; {UTF32_HINT})"),
             (bom32be, f"line 1: byte 0xfe at byte offset 2 (a UTF-32 byte-order mark; {UTF32_HINT})"),
             (cafe, f"{cafe}: line 1: a NUL byte (0x00) at byte offset 1 ({UTF16_HINT})")]
    for path, message in cases:
        assert main(["embed", str(path), str(tmp_path / "out.hdf5"), "--model", "fixture", "--quiet"]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err and "--errors" not in err, err
    # bytes that are not UTF-8 in UTF-8 text are still told about --errors replace
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café au lait\n".encode("latin-1"))
    assert main(["embed", str(latin), str(tmp_path / "out.hdf5"), "--model", "fixture", "--quiet"]) == 1
    assert "pass --errors replace" in capsys.readouterr().err


def test_vocabulary_file_refuses_nul_utf16_and_utf32(tmp_path):
    """A NUL byte in a vocabulary file was kept inside a word ("the\\x00cat", which no token
    is), and UTF-16 or UTF-32 without a byte-order mark was said to lack <S>, </S> and <UNK>."""
    from elmo.text_files import UTF32_HINT
    from elmo.vocab import Vocabulary

    words = "<S>\n</S>\n<UNK>\nthe\ncat\n"
    stray, le16, be16, le32 = (tmp_path / f"{n}.txt" for n in ("stray", "le16", "be16", "le32"))
    stray.write_bytes(b"<S>\n</S>\n<UNK>\nthe\0cat\n")
    le16.write_bytes(words.encode("utf-16-le"))
    be16.write_bytes(words.encode("utf-16-be"))
    le32.write_bytes(words.encode("utf-32-le"))
    cases = [(stray, f"{stray}: line 4: a NUL byte (0x00) at byte offset 18 (text holds none"),
             (le16, f"{le16}: line 1: a NUL byte (0x00) at byte offset 1 ({UTF16_HINT})"),
             (be16, f"{be16}: line 1: a NUL byte (0x00) at byte offset 0 ({UTF16_HINT})"),
             (le32, f"{le32}: line 1: a NUL byte (0x00) at byte offset 1 ({UTF32_HINT})")]
    for path, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            Vocabulary.load(path)
    bom = tmp_path / "bom.txt"     # (refused before, as not UTF-8: still so, naming the mark)
    bom.write_bytes(words.encode("utf-16"))
    with pytest.raises(ValueError, match=re.escape(f"(a UTF-16 byte-order mark; {UTF16_HINT})")):
        Vocabulary.load(bom)


def test_train_refuses_a_utf16_vocabulary_in_one_line(tmp_path, toy, capsys):
    train, _, vocab_txt = toy
    vocab = tmp_path / "vocab16.txt"
    vocab.write_bytes(vocab_txt.read_text(encoding="utf-8").encode("utf-16-le"))
    assert main(["train", str(train), "--vocab", str(vocab), "-o", str(tmp_path / "run"),
                 "--dim", "16", "--projection-dim", "8", "--filters", "1:4", "--batch-size", "2",
                 "--max-steps", "1", "--negatives", "0", "--no-progress", "--device", "cpu"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{vocab}: line 1: a NUL byte (0x00) at byte offset 1 ({UTF16_HINT})" in err, err


def test_contrast_pairs_and_wordnet_files_refuse_utf16(tmp_path):
    """UTF-16 without a byte-order mark decoded as UTF-8 into words with a NUL between their
    letters: contrast pairs of such words, which no model knows, were probed silently."""
    from elmo.analysis import contrast, datasets
    from elmo.data.fetch import DataError

    pairs = tmp_path / "pairs.tsv"
    # (no final newline: else its last line, a lone NUL, was refused as 1 field, not 6)
    pairs.write_bytes("role\tthe dog saw a cat\tthe cat saw a dog\tdog\tA0\tA1".encode("utf-16-le"))
    with pytest.raises(ValueError, match=re.escape(f"{pairs}: line 1: a NUL byte (0x00) at byte offset 1 ({UTF16_HINT})")):
        contrast.load_pairs(pairs)
    examples = tmp_path / "examples.tsv"
    examples.write_bytes("synset\tlemmas\texample\n09213565-n\tbank\tthe bank\n".encode("utf-16-le"))
    with pytest.raises(DataError, match=re.escape(f"{examples}: line 1: a NUL byte (0x00) at byte offset 1 ({UTF16_HINT})")):
        datasets.wordnet_examples(tmp_path)


# (bytes of a file, the line and the byte offset of its first NUL): UTF-8 text with one stray NUL
STRAY = [(b"a\0\n", 1, 1), (b"hel\0\n", 1, 3), (b"hello\0\n", 1, 5), (b"the cat\na\0\n", 2, 9),
         (b"x " * 100 + b"\0" + b" y" * 100 + b"\n", 1, 200)]


def _readers():
    """(name, a function that reads a file and raises its NUL message) for each way a NUL is found:
    ``elmo embed``'s line reader, the training corpus's, a whole file's (decode_text) and predict's."""
    from elmo.data.corpus import CorpusError, read_sentences
    from elmo.embedding.reader import InputError, read_sentences as embed_lines
    from elmo.text_files import decode_text, utf8_lines

    def whole(path):
        decode_text(path.read_bytes(), path, ValueError)

    def by_line(path):
        with open(path, "rb") as f:
            list(utf8_lines(f, lambda n, what: ValueError(f"{path}: line {n}: {what}"), ValueError))

    return [("embed", InputError, lambda p: list(embed_lines(p))), ("corpus", CorpusError, read_sentences),
            ("decode_text", ValueError, whole), ("utf8_lines", ValueError, by_line)]


def test_a_stray_nul_in_utf8_text_is_not_called_utf16(tmp_path, capsys):
    """One NUL in a short UTF-8 line (``a\\0``) is most of the line's odd bytes: it was said to
    look like UTF-16, with an iconv line that would have turned the text into nonsense."""
    for k, (data, line, at) in enumerate(STRAY):
        path = tmp_path / f"stray{k}.txt"
        path.write_bytes(data)
        message = f"{path}: line {line}: a NUL byte (0x00) at byte offset {at} (text holds none; is it a binary file?)"
        for name, error, read in _readers():
            with pytest.raises(error) as e:
                read(path)
            assert str(e.value) == message, (name, data)
        assert main(["embed", str(path), str(tmp_path / "out.hdf5"), "--model", "fixture", "--quiet"]) == 1
        err = capsys.readouterr().err.strip()
        assert err.endswith(message) and "UTF-" not in err, err


def test_utf16_with_a_one_word_first_line_is_still_named(tmp_path):
    """A first line too short to tell by itself (``I``: one code unit) is judged with the lines
    after it, so UTF-16 and UTF-32 without a byte-order mark keep their hint."""
    from elmo.text_files import UTF32_HINT

    text = "I\nsaw the bank .\n"
    for encoding, hint in (("utf-16-le", UTF16_HINT), ("utf-16-be", UTF16_HINT), ("utf-32-le", UTF32_HINT)):
        path = tmp_path / f"{encoding}.txt"
        path.write_bytes(text.encode(encoding))
        at = 0 if encoding.endswith("be") else 1
        for name, error, read in _readers():
            with pytest.raises(error, match=re.escape(f"line 1: a NUL byte (0x00) at byte offset {at} ({hint})")):
                read(path)


def test_utf8_lines_reads_no_line_past_a_nul_from_a_stream():
    """From stdin or a pipe the next line may not be written yet: the error waits for nothing."""
    from elmo.text_files import utf8_lines

    def stream():
        yield b"a\0\n"
        raise AssertionError("a line after the NUL was read")

    with pytest.raises(ValueError, match=re.escape("a NUL byte (0x00) at byte offset 1 (text holds none")):
        list(utf8_lines(stream(), lambda n, what: ValueError(what), ValueError))
