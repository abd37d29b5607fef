"""Every output line of ``elmo predict`` reads back as one record, as written, whatever the
input text holds: a raw U+2028, U+2029, ``\\x85``, ``\\x0b``, ``\\x0c`` or ``\\x1c``-``\\x1e``
(each of which ``str.splitlines`` ends a line at) broke a JSON lines record or a TSV line in
two for such a reader. The readers are the documented ones: ``json.loads`` of each line of
``str.splitlines()``, and for TSV ``line.split("\\t")`` or csv with a tab delimiter and no
quoting."""
from __future__ import annotations

import csv
import io
import json

import pytest

from elmo.cli import main
from elmo.record_lines import LINE_BREAKS, json_line, tsv_field
from elmo.tasks.kinds import TASK_KINDS
from tests.test_tasks_files import _saved_baseline

#: Every line break str.splitlines knows that an input line can hold (\n ends the line and a
#: lone \r is refused), between words the models know.
BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
LINES = ["the big cat sat", "the\u2028cat\u2029sat", "a\x85dog\x0bran\x0con\x1cthe\x1dmat\x1e",
         '"the cat" sat', "\u2028", "dog"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("lines")
    out = {}
    for kind in ("classification", "tagging", "pair"):
        (root / kind).mkdir()
        out[kind] = _saved_baseline(root / kind, kind)
    return out


def _predict(model, lines, tmp_path, capsys, *options) -> str:
    path = tmp_path / "in.txt"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert main(["predict", str(model), str(path), "--quiet", *options]) == 0
    return capsys.readouterr().out


def test_json_line_is_one_line_that_reads_back_as_the_value():
    value = {"text": "a" + LINE_BREAKS + "\t\x1f\u00e9\u4e2d\U0001f600", "tokens": [BREAKS]}
    line = json_line(value)
    assert line.splitlines() == [line] and "\n" not in line
    assert json.loads(line) == value
    assert "\u00e9\u4e2d\U0001f600" in line       # other text stays readable UTF-8


def test_tsv_field_keeps_its_columns_and_its_tokens():
    text = "a\tb" + LINE_BREAKS + "c\u00a0d"
    field = tsv_field(text)
    assert field.splitlines() == [field] and "\t" not in field
    assert field.split() == text.split()


def test_jsonl_records_read_back_as_written(saved, tmp_path, capsys):
    out = _predict(saved["classification"], LINES, tmp_path, capsys, "--format", "jsonl")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["text"] for r in records] == LINES


def test_tsv_lines_keep_two_columns_and_the_tokens(saved, tmp_path, capsys):
    out = _predict(saved["classification"], LINES, tmp_path, capsys)
    rows = [line.split("\t") for line in out.splitlines()]
    assert [len(row) for row in rows] == [2] * len(LINES)
    assert [row[0].split() for row in rows] == [line.split() for line in LINES]
    assert list(csv.reader(io.StringIO(out, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)) == rows


def test_a_taggers_outputs_read_back_as_written(saved, tmp_path, capsys):
    lines = [line for line in LINES if line.split()]      # (an empty one has no CoNLL block)
    conll = _predict(saved["tagging"], lines, tmp_path, capsys)
    blocks = [[row.split("\t") for row in block.splitlines()] for block in conll.split("\n\n") if block]
    assert [[w for w, _ in block] for block in blocks] == [line.split() for line in lines]
    tsv = _predict(saved["tagging"], lines, tmp_path, capsys, "--format", "tsv", "--overwrite")
    rows = [row.split("\t") for row in tsv.splitlines()]
    assert [row[0].split() for row in rows] == [line.split() for line in lines]
    assert [len(row[1].split()) for row in rows] == [len(line.split()) for line in lines]
    assert [b[1] for block in blocks for b in block] == [t for row in rows for t in row[1].split()]
    jsonl = _predict(saved["tagging"], lines, tmp_path, capsys, "--format", "jsonl")
    assert [json.loads(line)["tokens"] for line in jsonl.splitlines()] == [line.split() for line in lines]


def test_a_pair_models_outputs_read_back_as_written(saved, tmp_path, capsys):
    pairs = [("the\u2028cat", "a\x85dog"), ("big\u2029dog\x0b", "the cat"), ("a", "b")]
    lines = [f"{a}\t{b}" for a, b in pairs]
    rows = [row.split("\t") for row in _predict(saved["pair"], lines, tmp_path, capsys).splitlines()]
    assert [(a.split(), b.split()) for a, b, _ in rows] == [(a.split(), b.split()) for a, b in pairs]
    jsonl = _predict(saved["pair"], lines, tmp_path, capsys, "--format", "jsonl")
    assert [(r["text_a"], r["text_b"]) for r in map(json.loads, jsonl.splitlines())] == pairs


def test_a_span_answers_tsv_line_keeps_its_five_columns():
    """A predicted answer is the context's text between its first and last token, which may
    hold a line break (the context's own)."""
    answer = {"text": "cat\u2028sat", "start": 1, "end": 3, "char_start": 4, "char_end": 11}
    line = TASK_KINDS["span_qa"].tsv_line(("who\u2029sat?", "the cat\u2028sat"), ["who", "sat?"], answer)
    assert line.splitlines() == [line]
    assert line.split("\t") == ["who sat?", "the cat sat", "cat sat", "1", "3"]
