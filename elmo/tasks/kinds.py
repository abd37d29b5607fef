"""Task kinds: what differs between tagging, classification, pair and regression tasks, in
one place.

A :class:`TaskKind` says, for one kind:

* ``name`` and ``metrics`` (the first is the default);
* ``token_labels``: one label per token (tags) instead of one per example;
* ``pair``: two texts per example (``text_b`` in files, ``(a, b)`` pairs to predict);
* ``graded``: one number per example instead of a class (``regression``,
  ``pair_regression``): no label set, a float target, a correlation as the metric;
* ``classes``: whether the kind has a label set (not the graded kinds, nor ``span_qa``);
* ``span_answers``: the label is the gold answers to a question as token spans of a context
  (``span_qa``, extractive reading comprehension as SQuAD): the example's first text is the
  question, its second the context, and a prediction is a span of the context;
* how labels become a tensor for a batch (:meth:`TaskKind.label_tensor`), how the model is
  built from the ``model`` settings (:meth:`TaskKind.build_model`), how predicted ids become
  labels (:meth:`TaskKind.decode`) and how a prediction is written (:meth:`TaskKind.tsv_line`,
  :meth:`TaskKind.json_record`).

A saved model reads only the first ``max_tokens`` tokens of a text (``max_tokens_b`` of a
pair's second), as its training and test texts were cut: a JSON record says how many it read
(``tokens_read``; ``tokens_read_a``/``tokens_read_b`` for a pair), and a tagger's tokens past
them keep their place with no tag (``null`` in JSON, :data:`UNREAD_TAG` in CoNLL and TSV).

:data:`TASK_KINDS` maps names to kinds; :func:`task_kind` looks one up with a clear error.
A new kind is one subclass plus one entry in that table.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple, cast

import numpy as np
import torch

from ..record_lines import tsv_field
from .datasets import Answer, Example

#: What ``elmo predict`` writes in CoNLL and TSV for a token the model did not read (past
#: ``max_tokens``): it has no tag (``null`` in JSON lines, None from ``predict``).
UNREAD_TAG = "_"


class TaskKind:
    """A task with one label per example and one text (see the module docstring); subclasses
    change what differs."""

    name: str = ""
    metrics: Tuple[str, ...] = ("accuracy",)
    token_labels: bool = False
    pair: bool = False
    graded: bool = False
    classes: bool = True
    span_answers: bool = False

    def label_set(self, examples: Sequence[Example]) -> List[str]:
        """The sorted labels seen in ``examples``."""
        # One label per example here: Example.label is a str (a list only for tagging).
        return sorted({cast(str, ex.label) for ex in examples})

    def label_tensor(self, examples: Sequence[Example], label_index: Dict[str, int],
                     shape: torch.Size) -> torch.Tensor:
        """(B,) class ids; a label missing from ``label_index`` gets -1. ``shape`` is the
        (B, T) shape of the first text's word ids."""
        return torch.tensor([label_index.get(cast(str, ex.label), -1) for ex in examples],
                            dtype=torch.long)

    def unlabelled(self, tokens: List[str], tokens_b: Optional[List[str]] = None) -> Example:
        """An example to predict: the text(s) with an empty label."""
        return Example(tokens, "", tokens_b)

    def decode(self, pred, labels: Sequence[str]):
        """The predicted ids of one example (one id, or one per token) -> label(s)."""
        return labels[pred]

    def build_model(self, encoder, n_labels: int, settings, lam: float):
        """The :class:`~elmo.tasks.models.TaskModel` on ``encoder`` (``settings``: the
        :class:`~elmo.tasks.experiment_config.ModelSettings` of the ``model`` block)."""
        raise NotImplementedError

    def batch_length(self, example: Example) -> int:
        """The length that training batches group examples by (examples of similar length
        share a batch, so little padding is computed): the first text's tokens."""
        return len(example.tokens)

    def fit_targets(self, model, train: Sequence[Example]) -> None:
        """Set what ``model`` needs to know of the training targets before training (a graded
        kind's mean and standard deviation); nothing for classes and tags."""

    def tsv_line(self, text, tokens: List[str], label) -> str:
        """One prediction as a TSV line (``elmo predict --format tsv``); a text's tabs and line
        breaks are spaces there (:func:`elmo.record_lines.tsv_field`: the same tokens)."""
        return f"{tsv_field(text)}\t{label}"

    def json_record(self, text, tokens: List[str], label, read: Tuple[int, Optional[int]]) -> dict:
        """One prediction as a JSON object (``elmo predict --format jsonl``); ``read``: how
        many tokens of the text (and of a pair's second text) the model read."""
        return {"text": text, "tokens": tokens, "label": label, "tokens_read": read[0]}


class TaggingKind(TaskKind):
    """One tag per token (:class:`~elmo.tasks.models.Tagger`)."""

    name = "tagging"
    metrics = ("token_accuracy", "span_f1")
    token_labels = True

    def label_set(self, examples: Sequence[Example]) -> List[str]:
        return sorted({t for ex in examples for t in cast(List[str], ex.label)})

    def label_tensor(self, examples, label_index, shape):
        """(B, T) tag ids, 0 where masked; an unknown tag gets id 0 (it still counts as an
        error when scored, since scoring compares label strings)."""
        labels = torch.zeros(shape, dtype=torch.long)
        for i, ex in enumerate(examples):
            labels[i, :len(ex.label)] = torch.tensor([label_index.get(t, 0) for t in ex.label])
        return labels

    def unlabelled(self, tokens, tokens_b=None):
        return Example(tokens, [""] * len(tokens))

    def decode(self, pred, labels):
        return [labels[i] for i in pred]

    def build_model(self, encoder, n_labels, settings, lam):
        from .models import Tagger
        return Tagger(encoder, n_labels, crf=settings.crf, dropout=settings.dropout,
                      lam=lam)

    def tsv_line(self, text, tokens, label):
        return " ".join(tokens) + "\t" + " ".join(UNREAD_TAG if t is None else t for t in label)

    def json_record(self, text, tokens, label, read):
        return {"tokens": tokens, "tags": label, "tokens_read": read[0]}


class ClassificationKind(TaskKind):
    """One class per text (:class:`~elmo.tasks.models.SentenceClassifier`)."""

    name = "classification"

    def build_model(self, encoder, n_labels, settings, lam):
        from .models import SentenceClassifier
        return SentenceClassifier(encoder, n_labels, pooling=settings.pooling,
                                  hidden=settings.classifier_hidden,
                                  dropout=settings.dropout, lam=lam)


class PairKind(TaskKind):
    """One class per pair of texts (:class:`~elmo.tasks.models.PairClassifier`)."""

    name = "pair"
    pair = True

    def build_model(self, encoder, n_labels, settings, lam):
        from .models import PairClassifier
        return PairClassifier(encoder, n_labels, hidden=settings.classifier_hidden,
                              dropout=settings.dropout, lam=lam)

    def tsv_line(self, text, tokens, label):
        return f"{tsv_field(text[0])}\t{tsv_field(text[1])}\t{label}"

    def json_record(self, text, tokens, label, read):
        return {"text_a": text[0], "text_b": text[1], "label": label,
                "tokens_read_a": read[0], "tokens_read_b": read[1]}


class GradedKind(TaskKind):
    """What the graded kinds share: an example's label is a float target (no label set), the
    model predicts a float in the targets' units, scored by correlation (Pearson's r first)."""

    metrics = ("pearson", "spearman")
    graded = True
    classes = False

    def label_set(self, examples: Sequence[Example]) -> List[str]:
        return []     # no classes: nothing to index, to miss in training, or to warn about

    def label_tensor(self, examples, label_index, shape):
        """(B,) float64 targets (NaN for an unlabelled example to predict): float32 kept only
        the 0.25 steps of a target near 3e6, before the model standardised it (in float64)."""
        return torch.tensor([float(cast(float, ex.label)) for ex in examples], dtype=torch.float64)

    def unlabelled(self, tokens, tokens_b=None):
        return Example(tokens, float("nan"), tokens_b)

    def decode(self, pred, labels):
        return float(pred)      # (the model's number, already in the targets' units)

    def fit_targets(self, model, train):
        model.set_target_scale(*target_scale(train))


#: The largest target magnitude a graded task takes (float32's range, halved): the mean, the
#: std and the correlations square targets in float64, which 1e300 overflowed (then a deep
#: torch error); this bound keeps them well inside it.
MAX_TARGET = float(np.finfo(np.float32).max) / 2


def standardised_distinct(values: Sequence[float]) -> int:
    """How many distinct values ``values`` has once standardised by their own mean and std
    (:func:`target_scale`, in float64) and rounded to float32, as a graded model trains on
    them: 100000001 and 100000002 are two (-1 and 1), 0 and 5e-324 one (no spread float64
    can divide by)."""
    x = np.asarray(values, dtype=np.float64)
    mean, std = _scale(x)
    return len(set(((x - mean) / std).astype(np.float32).tolist()))


def _scale(values: np.ndarray) -> Tuple[float, float]:
    """(mean, population std) of float64 ``values``; std 1 where it is 0 (or there are none)."""
    std = float(values.std()) if len(values) else 0.0
    return (float(values.mean()) if len(values) else 0.0), (std if std > 0 else 1.0)


def target_scale(examples: Sequence[Example]) -> Tuple[float, float]:
    """(mean, population standard deviation) of graded examples' targets, in float64; a
    constant set gets std 1 (nothing to scale; load_task refuses one for training)."""
    return _scale(np.asarray([cast(float, ex.label) for ex in examples], dtype=np.float64))


class RegressionKind(GradedKind, ClassificationKind):
    """One number per text (:class:`~elmo.tasks.models.SentenceRegressor`)."""

    name = "regression"

    def build_model(self, encoder, n_labels, settings, lam):
        from .models import SentenceRegressor
        return SentenceRegressor(encoder, pooling=settings.pooling, hidden=settings.classifier_hidden,
                                 dropout=settings.dropout, lam=lam)


class PairRegressionKind(GradedKind, PairKind):
    """One number per pair of texts, e.g. their similarity (STS-B)
    (:class:`~elmo.tasks.models.PairRegressor`)."""

    name = "pair_regression"

    def build_model(self, encoder, n_labels, settings, lam):
        from .models import PairRegressor
        return PairRegressor(encoder, hidden=settings.classifier_hidden, dropout=settings.dropout,
                             lam=lam)


class SpanQAKind(PairKind):
    """Extractive question answering (SQuAD): a question (the first text) and a context (the
    second), labelled with the gold answers as token spans of the context
    (:class:`~elmo.tasks.datasets.Answer`); the model (:class:`~elmo.tasks.models.SpanExtractor`)
    points at the answer's first and last token, and the prediction is that span with its text,
    read from the context as written (:func:`located_answer`; the tokens joined by spaces for
    a context given as tokens), scored by SQuAD v1.1's F1 and exact match
    (:mod:`.metrics`). A context is read up to ``max_tokens_b`` tokens: a prediction is a span of
    what was read, and a training example none of whose answers lies inside it is dropped
    (:func:`~elmo.tasks.datasets.load_task` counts them)."""

    name = "span_qa"
    metrics = ("f1", "exact_match")
    classes = False
    span_answers = True

    def label_set(self, examples: Sequence[Example]) -> List[str]:
        return []     # the answers are spans of each context, not classes

    def label_tensor(self, examples, label_index, shape):
        """(B, 2) long: the [start, end) of each example's first answer that lies inside its
        context as read (``tokens_b``, cut); -1, -1 for an example without one (unlabelled, or
        every answer past the cut), which the loss leaves out."""
        return torch.tensor([first_answer_inside(ex) or (-1, -1) for ex in examples],
                            dtype=torch.long).reshape(len(examples), 2)

    def unlabelled(self, tokens, tokens_b=None):
        return Example(tokens, (), tokens_b)

    def batch_length(self, example):
        """The context's tokens: it is the long text (a question's length left contexts of every
        length in one batch, each padded to the longest)."""
        return len(example.tokens_b or ())

    def decode(self, pred, labels):
        return pred       # the span's {"text", "start", "end"}, as the model gives it

    def build_model(self, encoder, n_labels, settings, lam):
        from .models import SpanExtractor
        return SpanExtractor(encoder, hidden=settings.classifier_hidden, dropout=settings.dropout,
                             lam=lam)

    def tsv_line(self, text, tokens, label):
        # (the answer is the context's text between its tokens, which may hold a line break)
        return "\t".join([tsv_field(text[0]), tsv_field(text[1]), tsv_field(label["text"]),
                          str(label["start"]), str(label["end"])])

    def json_record(self, text, tokens, label, read):
        return {"question": text[0], "context": text[1], "answer": label["text"],
                "start": label["start"], "end": label["end"],
                "char_start": label.get("char_start"), "char_end": label.get("char_end"),
                "tokens_read_question": read[0], "tokens_read_context": read[1]}


def first_answer_inside(example: Example) -> Optional[Tuple[int, int]]:
    """(start, end) of the first gold answer of a ``span_qa`` example that lies inside its
    context as read (``end <= len(tokens_b)``), or None: the answer training learns to point at."""
    n = len(example.tokens_b or [])
    answers = cast(Tuple[Answer, ...], example.label)
    return next(((a.start, a.end) for a in answers if a.end <= n), None)


def located_answer(example: Example, pred: dict) -> dict:
    """A predicted span ``{"text", "start", "end"}`` of ``example``'s context with its text as
    the context wrote it, ``context[char_start:char_end]``: ``"3-1"`` where the tokens read
    ``3 - 1``, the curly quotes of a quotation. A context given as tokens keeps its tokens
    joined by spaces, and ``char_start`` and ``char_end`` are None."""
    if example.source_b is None:
        return {**pred, "char_start": None, "char_end": None}
    text, start, end = example.source_b.span(int(pred["start"]), int(pred["end"]))
    return {**pred, "text": text, "char_start": start, "char_end": end}


def answer_texts(examples: Sequence[Example], pred: Sequence[dict]) -> Tuple[List[List[str]], List[str]]:
    """What SQuAD's metrics compare for ``span_qa`` examples and their predicted spans: each
    question's gold answer texts, and each predicted span's text as its context wrote it."""
    return ([[a.text for a in cast(Tuple[Answer, ...], ex.label)] for ex in examples],
            [str(located_answer(ex, p)["text"]) for ex, p in zip(examples, pred)])


#: The task kinds by name (the order is the one error messages list them in).
TASK_KINDS: Dict[str, TaskKind] = {k.name: k for k in (TaggingKind(), ClassificationKind(),
                                                       PairKind(), RegressionKind(),
                                                       PairRegressionKind(), SpanQAKind())}


def task_kind(name: str) -> TaskKind:
    """The kind called ``name``, or a :class:`~elmo.tasks.files.TaskDataError` naming it."""
    try:
        return TASK_KINDS[name]
    except (KeyError, TypeError):
        from .files import TaskDataError
        raise TaskDataError(f"unknown task kind {name!r}; known: {', '.join(TASK_KINDS)}") from None
