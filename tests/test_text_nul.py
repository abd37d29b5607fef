"""A NUL byte in user text, and UTF-16 text, are refused by every reader of text in one line.

UTF-16 text without a byte-order mark is valid UTF-8 (ASCII letters with a NUL byte between
them): it was embedded and trained on as tokens like ``"t\\x00h\\x00e\\x00"``. Each message
names the file, the line and the byte offset, and says UTF-16 where the text looks like it.
"""
from __future__ import annotations

import gzip
import re

import pytest

from elmo.cli import main
from elmo.io import UTF16_HINT, nul_byte_where
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
