"""CoNLL-U word lines read as plain CoNLL's are: a word and a label lose surrounding spaces
(' NOUN ' was a tag of its own beside 'NOUN', 'dog ' a word of its own), and an empty FORM
is refused, naming its line (it was an empty word)."""
from __future__ import annotations

import pytest

from elmo.tasks.files import TaskDataError, check_format, read_examples


def _line(n: int, form: str, upos: str) -> str:
    return "\t".join([str(n), form, "x", upos, "_", "_", "0", "root", "_", "_"]) + "\n"


def _read(tmp_path, text: str):
    path = tmp_path / "t.conllu"
    path.write_text(text, encoding="utf-8")
    fmt = check_format({"type": "conllu"}, "tagging", "t")
    return [(ex.tokens, ex.label) for ex in read_examples(path, "tagging", fmt)]


def test_spaces_around_a_form_or_a_label_are_no_part_of_it(tmp_path):
    got = _read(tmp_path, _line(1, "dog ", " NOUN ") + _line(2, " ran", "VERB "))
    assert got == [(["dog", "ran"], ["NOUN", "VERB"])]


@pytest.mark.parametrize("form", ["", " "])
def test_an_empty_form_is_refused_naming_its_line(tmp_path, form):
    with pytest.raises(TaskDataError, match=r"t.conllu:3: empty form column"):
        _read(tmp_path, "# text = a\n" + _line(1, "a", "X") + _line(2, form, "X"))
