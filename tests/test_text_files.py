"""The shared rules for reading a user's text file (elmo.text_files.decode_text), and the
readers that now hold to all of them: a vocabulary file's line ends, a JSON or TOML config in
UTF-16, a hand-written report note with a NUL byte."""
import codecs
import re

import pytest

from elmo.text_files import UTF16_HINT, decode_text, read_json, read_toml
from elmo.vocab import Vocabulary

SPECIAL = "<S>\n</S>\n<UNK>\n"


def test_decode_text_drops_a_utf8_mark_and_counts_offsets_in_the_file(tmp_path):
    mark = codecs.BOM_UTF8
    assert decode_text(mark + b"caf\xc3\xa9\n", "f.txt", ValueError) == "caf\u00e9\n"
    assert decode_text(mark + b"a", "f.txt", ValueError, bom=False) == "\ufeffa"   # (JSON's rule)
    with pytest.raises(ValueError, match=r"^f\.txt: not UTF-8 text \(line 2: byte 0xe9 at byte offset 8\); do X$"):
        decode_text(mark + b"a\ncaf\xe9", "f.txt", ValueError, expected="do X")    # (3 + 2 + 3: the mark counts)
    with pytest.raises(ValueError, match=r"^f\.txt: line 2: a NUL byte \(0x00\) at byte offset 7 "):
        decode_text(mark + b"a\nbc\0", "f.txt", ValueError)


def test_decode_text_names_utf16_and_utf32_with_and_without_a_mark():
    for encoding, name in [("utf-16", "UTF-16"), ("utf-16-le", "UTF-16"), ("utf-16-be", "UTF-16"),
                           ("utf-32", "UTF-32"), ("utf-32-le", "UTF-32"), ("utf-32-be", "UTF-32")]:
        with pytest.raises(KeyError) as info:
            decode_text("the cat sat\non the mat\n".encode(encoding), "f.txt", KeyError)
        assert f"looks like {name}" in str(info.value), (encoding, str(info.value))


def _vocab(tmp_path, body: bytes):
    path = tmp_path / "vocab.txt"
    path.write_bytes(SPECIAL.encode() + body)
    return Vocabulary.load(path)


def test_a_vocabulary_line_with_a_lone_carriage_return_is_refused_naming_it(tmp_path):
    """Read with universal newlines, ``ab\\rcd`` was two words, ``ab`` and ``cd``, silently."""
    with pytest.raises(ValueError, match=r"vocab\.txt: line 5: a carriage return \(\\r\) inside the line"):
        _vocab(tmp_path, b"the\nab\rcd\n")


def test_a_vocabulary_with_windows_line_ends_or_a_mark_reads_as_with_unix_ones(tmp_path):
    unix = _vocab(tmp_path, b"the\ncat\n")
    windows = _vocab(tmp_path, b"the\r\ncat\r\n")
    path = tmp_path / "vocab.txt"
    path.write_bytes(codecs.BOM_UTF8 + (SPECIAL + "the\ncat\n").replace("\n", "\r\n").encode())
    marked = Vocabulary.load(path)
    assert unix.words == windows.words == marked.words == ["<S>", "</S>", "<UNK>", "the", "cat"]


@pytest.mark.parametrize("reader, name, text", [(read_json, "job.json", '{"batch_size": 3}'),
                                                (read_toml, "job.toml", "batch_size = 3\n")])
def test_a_config_saved_as_utf16_without_a_mark_is_named_as_utf16(tmp_path, reader, name, text):
    """It was "not readable JSON (Expecting property name ...)", or TOML's word for a NUL."""
    path = tmp_path / name
    path.write_bytes(text.encode("utf-16-le"))
    with pytest.raises(ValueError) as info:
        reader(path)
    assert str(info.value).startswith(f"{path}: line 1: a NUL byte (0x00) at byte offset 1 ")
    assert UTF16_HINT in str(info.value)


def test_a_report_note_with_a_nul_byte_is_refused_naming_it(tmp_path):
    from elmo.analysis.markdown import INTERPRETATION, read_interpretation
    (tmp_path / INTERPRETATION).write_bytes(b"# Reading\n\nThe POS\0 probe ...\n")
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / INTERPRETATION}: line 3: a NUL byte")):
        read_interpretation(tmp_path)
    (tmp_path / INTERPRETATION).write_bytes(codecs.BOM_UTF8 + b"# Reading\n")
    assert read_interpretation(tmp_path) == "# Reading"    # (the mark is no part of the heading)


@pytest.mark.parametrize("data, what", [
    ("cat\tdog\t7.5\n".encode("utf-16-le"), "looks like UTF-16"),
    (b"cat\tdog\t7.5\ncar\tauto\t8\rbus\ttram\t6\n", r"line 2: a carriage return \(\\r\) inside the line"),
], ids=["utf16", "lone-cr"])
def test_a_word_pair_file_in_utf16_or_with_a_lone_carriage_return_is_refused(tmp_path, data, what):
    """UTF-16 without a mark was read as pairs of nonsense words with NUL bytes in them, and a
    lone \\r was a line end, so the pairs after it were read by another rule than the file's."""
    from elmo.data.readers import read_word_pairs
    path = tmp_path / "pairs.tsv"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=what):
        list(read_word_pairs(path))
