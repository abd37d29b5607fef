"""The task-kind table: every kind-specific step looks its kind up in ``TASK_KINDS``, unknown
kinds fail with a one-line error, and a new kind is one subclass plus one table entry."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from elmo.tasks.batching import make_batch
from elmo.tasks.datasets import Example
from elmo.tasks.embeddings import WordVocab
from elmo.tasks.files import TaskDataError, check_format, read_examples
from elmo.tasks.kinds import TASK_KINDS, ClassificationKind, task_kind
from elmo.tasks.saved import to_examples

ROOT = Path(__file__).resolve().parents[1]


def test_table_names_the_kinds_with_their_metrics():
    assert list(TASK_KINDS) == ["tagging", "classification", "pair", "regression", "pair_regression",
                                "span_qa"]
    assert TASK_KINDS["tagging"].metrics == ("token_accuracy", "span_f1")
    assert TASK_KINDS["regression"].metrics == TASK_KINDS["pair_regression"].metrics == ("pearson", "spearman")
    assert TASK_KINDS["span_qa"].metrics == ("f1", "exact_match")
    assert [k.pair for k in TASK_KINDS.values()] == [False, False, True, False, True, True]
    assert [k.token_labels for k in TASK_KINDS.values()] == [True, False, False, False, False, False]
    assert [k.graded for k in TASK_KINDS.values()] == [False, False, False, True, True, False]
    assert [k.classes for k in TASK_KINDS.values()] == [True, True, True, False, False, False]
    assert [k.span_answers for k in TASK_KINDS.values()] == [False] * 5 + [True]


def test_unknown_kind_is_one_clear_error_everywhere():
    vocab = WordVocab(["a"])
    for call in (lambda: task_kind("spans"),
                 lambda: make_batch([Example(["a"], "x")], "spans", vocab, {"x": 0}, 50),
                 lambda: check_format({"type": "tsv", "text": 0, "label": 1}, "spans", "task t"),
                 lambda: to_examples(["a b"], "spans")):
        with pytest.raises(TaskDataError, match=r"unknown task kind 'spans'; known: tagging, "
                                                r"classification, pair"):
            call()


def test_the_word_pad_in_a_text_is_unknown_not_padding():
    """A text's literal "<pad>" (or "<PAD>") took id 0, the padding's vector, in training and predict."""
    vocab = WordVocab(["a", "<pad>"])
    assert len(vocab) == 3 and vocab.ids(["<pad>", "a", "<PAD>", "zzz", "<unk>"]) == [1, 2, 1, 1, 1]


def test_labels_unseen_in_training_get_the_kinds_fallback_id():
    vocab = WordVocab(["a", "b"])
    tags = make_batch([Example(["a", "b"], ["N", "Q"]), Example(["a"], ["V"])], "tagging",
                      vocab, {"N": 1, "V": 2}, 50)
    assert tags.labels.tolist() == [[1, 0], [2, 0]]
    classes = make_batch([Example(["a"], "pos"), Example(["b"], "odd")], "classification",
                         vocab, {"pos": 0}, 50)
    assert classes.labels.tolist() == [0, -1] and len(classes.texts) == 1
    pairs = make_batch([Example(["a"], "yes", ["b", "a"])], "pair", vocab, {"yes": 1}, 50)
    assert pairs.labels.tolist() == [1] and pairs.texts[1].words.tolist() == [[3, 2]]


def test_a_pair_example_without_its_second_text_is_one_clear_error():
    """make_batch for a pair task read ``tokens_b`` of every example: one without it (an
    Example built by hand, given to predict_examples) failed in list(None) with "'NoneType'
    object is not iterable", naming nothing. It now says which example lacks what."""
    vocab = WordVocab(["a", "b"])
    with pytest.raises(ValueError, match=r"^a pair task's example has no second text \(tokens_b\): "
                                         r"\['b'\]$"):
        make_batch([Example(["a"], "yes", ["b"]), Example(["b"], "yes")], "pair", vocab, {"yes": 1}, 50)


def test_predictions_are_decoded_and_written_per_kind():
    labels = ["A", "B"]
    assert TASK_KINDS["tagging"].decode([1, 0], labels) == ["B", "A"]
    assert TASK_KINDS["classification"].decode(1, labels) == "B"
    assert TASK_KINDS["tagging"].tsv_line("x y", ["x", "y"], ["B", "A"]) == "x y\tB A"
    assert TASK_KINDS["pair"].tsv_line(("x", "y"), ["x"], "B") == "x\ty\tB"
    assert TASK_KINDS["classification"].json_record("x y", ["x", "y"], "A", (1, None)) == {
        "text": "x y", "tokens": ["x", "y"], "label": "A", "tokens_read": 1}
    assert TASK_KINDS["tagging"].tsv_line("x y", ["x", "y"], ["B", None]) == "x y\tB _"
    assert TASK_KINDS["pair"].json_record(("x", "y z"), ["x"], "B", (1, 1)) == {
        "text_a": "x", "text_b": "y z", "label": "B", "tokens_read_a": 1, "tokens_read_b": 1}
    assert to_examples([["x", "y"]], "tagging")[0].label == ["", ""]
    assert TASK_KINDS["regression"].decode(0.25, []) == 0.25
    assert TASK_KINDS["regression"].tsv_line("x y", ["x", "y"], -1.5) == "x y\t-1.5"
    assert TASK_KINDS["pair_regression"].json_record(("x", "y"), ["x"], 3.0, (1, 1))["label"] == 3.0
    graded = make_batch(to_examples([("x", "y")], "pair_regression") + [Example(["x"], 3e6 + 0.1, ["y"])],
                        "pair_regression", WordVocab(["x", "y"]), {}, 50)
    # float64: float32 held 3e6 + 0.1 as 3e6 (its spacing there is 0.25)
    assert graded.labels.dtype == torch.float64 and graded.labels[1] == 3e6 + 0.1
    assert math.isnan(graded.labels[0])      # (an example to predict has no target)


def test_a_new_kind_is_one_subclass_and_one_entry(tmp_path, monkeypatch):
    class Sentiment(ClassificationKind):
        name = "sentiment"
        metrics = ("accuracy",)

    monkeypatch.setitem(TASK_KINDS, "sentiment", Sentiment())
    path = tmp_path / "train.tsv"
    path.write_text("good film\tpos\nbad film\tneg\n", encoding="utf-8")
    fmt = check_format({"type": "tsv", "text": 0, "label": 1}, "sentiment", "task s")
    examples = read_examples(path, "sentiment", fmt)
    assert [ex.label for ex in examples] == ["pos", "neg"]
    batch = make_batch(examples, "sentiment", WordVocab(["good", "bad", "film"]),
                       {"neg": 0, "pos": 1}, 50)
    assert torch.equal(batch.labels, torch.tensor([1, 0]))


def test_no_kind_name_is_compared_outside_the_table():
    """Kind-specific behaviour lives in elmo/tasks/kinds.py, not in string if-chains."""
    pattern = re.compile(r"""[!=]= ?["'](tagging|classification|pair|regression|pair_regression)["']""")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "elmo").rglob("*.py"))
             if p.name != "kinds.py"
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1)
             if pattern.search(line)]
    assert not found, found


def test_texts_to_label_in_no_order_or_with_a_bad_token_are_clear_errors():
    """predict of a set of texts labelled them in its hash order (the labels could not be matched
    to the texts) and of a dict its keys; a token that was no string printed the whole text (a
    10,000-token one filled the screen) without saying where; TaskModel.load(None) was
    pathlib's TypeError, naming no argument."""
    from elmo.tasks.models import TaskModel
    for texts in ({"a b", "c"}, {"a b": "label"}, frozenset({("a", "b")})):
        with pytest.raises(TypeError, match=r"predict expects a list of texts, got a \w+, which has "
                                            r"no order of its own; pass a list"):
            to_examples(texts, "tagging")
    with pytest.raises(TypeError) as caught:
        to_examples([["a"], ["w"] * 10_000 + [None]], "classification")
    assert str(caught.value) == "text 1, token 10000: tokens must be strings, got NoneType: None"
    with pytest.raises(TypeError, match=r"^text 0, text_b, token 1: tokens must be strings, got int: 3$"):
        to_examples([(["a"], ["b", 3])], "pair")
    with pytest.raises(TypeError, match=r"^text 0: a text must be a string or a list of token strings, "
                                        r"got bytes: b'a b'$"):
        to_examples([b"a b"], "classification")
    assert [ex.tokens for ex in to_examples(iter([("a", "b"), "c d"]), "tagging")] == [["a", "b"], ["c", "d"]]
    with pytest.raises(TypeError, match="folder must be a path"):
        TaskModel.load(None)
