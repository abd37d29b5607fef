"""``embed_file`` refuses an input file edited while it runs: the vectors and the keys of
``sentence_to_index`` come from re-reading it, and must belong to the text that was indexed."""
import pytest

from elmo import embed_file
from elmo.embedding import InputError
from elmo.embedding import run as run_module
from elmo.embedding.reader import InputChanged
from tests.conftest import random_bilm


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def bilm():
    return random_bilm(seed=5)


LINES = ["the bank is near", "a river bank", "money in the bank", "the end"]
# the same number of lines and bytes, other words: only the content tells them apart
EDITED = ["the bank is far.", "a river bank", "money in the bank", "the end"]


def test_an_input_edited_before_the_merge_is_refused_not_keyed_by_the_new_text(tmp_path, bilm, monkeypatch):
    """The merge read the file again for ``sentence_to_index``: edited after its lines were
    embedded, the keys were the new text's and the vectors the old one's, without a word."""
    text = write_lines(tmp_path / "in.txt", LINES)
    out = tmp_path / "out.hdf5"
    wait = run_module._wait_for_segments

    def edit_then_wait(*args, **kwargs):
        write_lines(text, EDITED)
        return wait(*args, **kwargs)
    monkeypatch.setattr(run_module, "_wait_for_segments", edit_then_wait)
    with pytest.raises(InputChanged, match=f"{text}: changed while it was being embedded"):
        embed_file(text, out, bilm, layers="top", segment_lines=2)
    assert not out.exists()


def test_an_input_edited_after_it_was_indexed_is_refused_before_it_is_embedded(tmp_path, bilm, monkeypatch):
    """A segment is read again to embed it: its vectors were another text's than the digest
    recorded for the run (and a resumed run took them as this text's)."""
    text = write_lines(tmp_path / "in.txt", LINES)
    out = tmp_path / "out.hdf5"
    index_input = run_module.index_input

    def index_then_edit(*args, **kwargs):
        index = index_input(*args, **kwargs)
        write_lines(text, EDITED)
        return index
    monkeypatch.setattr(run_module, "index_input", index_then_edit)
    with pytest.raises(InputError, match="lines 1-2 are not what they were"):
        embed_file(text, out, bilm, layers="top", segment_lines=2)
    assert not out.exists()


def test_lines_added_to_the_input_during_a_run_are_refused(tmp_path, bilm, monkeypatch):
    """Lines appended meanwhile were left out of the output, which looked complete."""
    text = write_lines(tmp_path / "in.txt", LINES)
    out = tmp_path / "out.hdf5"
    wait = run_module._wait_for_segments

    def append_then_wait(*args, **kwargs):
        with open(text, "a", encoding="utf-8") as f:
            f.write("one more line\n")
        return wait(*args, **kwargs)
    monkeypatch.setattr(run_module, "_wait_for_segments", append_then_wait)
    with pytest.raises(InputChanged, match="changed while it was being embedded"):
        embed_file(text, out, bilm, layers="top", segment_lines=2)
    assert not out.exists()
    monkeypatch.undo()      # as the message says, once nothing writes to it
    assert embed_file(text, out, bilm, layers="top", segment_lines=2, overwrite=True) == out
