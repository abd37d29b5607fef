"""Class labels that are whole numbers written as floats ("1.0", as pandas writes a column of
whole numbers with a value missing) are the whole number, as JSON's 1.0 already was: "1.0"
was a class of its own beside "1", or a test label no training example had."""
from __future__ import annotations

import pytest

from elmo.tasks.datasets import load_task
from elmo.tasks.files import check_format, read_examples

TSV = {"type": "tsv", "text": "text", "label": "label"}


def _labels(tmp_path, text: str, fmt: dict = TSV, kind: str = "classification"):
    path = tmp_path / "f.txt"
    path.write_text(text, encoding="utf-8")
    return [ex.label for ex in read_examples(path, kind, check_format(fmt, kind, "t"))]


@pytest.mark.parametrize("written, label", [
    ("1.0", "1"), ("1", "1"), (" 2.00 ", "2"), ("-3.0", "-3"), ("4.", "4"), ("10", "10"),
    ("1.5", "1.5"), ("1.05", "1.05"), ("0.0", "0"), ("v1.0", "v1.0"), ("1.0a", "1.0a"),
    ("pos", "pos")])
def test_a_whole_number_with_a_decimal_point_is_the_whole_number(tmp_path, written, label):
    assert _labels(tmp_path, f"text\tlabel\na b\t{written}\n") == [label]


def test_json_strings_and_numbers_give_one_class(tmp_path):
    fmt = {"type": "jsonl", "text": "t", "label": "l"}
    got = _labels(tmp_path, '{"t": "a", "l": 1}\n{"t": "b", "l": 1.0}\n{"t": "c", "l": "1.0"}\n', fmt)
    assert got == ["1", "1", "1"]


def test_tags_are_kept_as_written(tmp_path):
    fmt = {"type": "tsv", "text": "text", "label": "tags"}
    assert _labels(tmp_path, "text\ttags\na b\t1.0 O\n", fmt, "tagging") == [["1.0", "O"]]


def test_a_test_file_of_floats_scores_the_classes_trained_on(tmp_path):
    train = "text\tlabel\n" + "".join(f"w{i} x\t{i % 2}\n" for i in range(10))
    test = "text\tlabel\nw1 x\t1.0\nw2 x\t0.0\n"
    for name, text in (("train", train), ("test", test), ("mixed", train + "w9 y\t1.0\n")):
        (tmp_path / f"{name}.tsv").write_text(text, encoding="utf-8")
    spec = {"task": "classification", "name": "c", "format": TSV, "dev_fraction": 0,
            "files": {"train": str(tmp_path / "train.tsv"), "test": str(tmp_path / "test.tsv")}}
    data = load_task(spec)
    assert data.labels == ["0", "1"] and data.unseen_labels() == {}
    spec["files"]["train"] = str(tmp_path / "mixed.tsv")     # "1" and "1.0" in one file
    assert load_task(spec).labels == ["0", "1"]
