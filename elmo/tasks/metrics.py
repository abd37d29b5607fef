"""Task metrics: accuracy, entity-span F1 for BIO tags, and Pearson / Spearman correlation
for graded (regression) tasks.

Span F1 follows the CoNLL evaluation script (``conlleval``), which is also what ``seqeval``
computes in its default mode:

* a span starts at ``B-X``, or at ``I-X`` when the previous tag is ``O`` or of another type
  (a stray ``I-`` is read as the start of a span, not dropped);
* a span ends before ``O``, before any ``B-``, and before an ``I-`` of another type;
* a predicted span counts as correct only when its type, start and end all equal a gold span.

Precision, recall and F1 are micro-averaged over all spans of all sentences.

The correlations wrap :mod:`elmo.correlation` (float64; Spearman with average ranks for
ties). Either is NaN where undefined (fewer than two items, a constant side, or a prediction
that is not finite); :func:`correlation_undefined` says why, for the log and the results.
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Set, Tuple

from .. import correlation

Span = Tuple[str, int, int]          # (type, start, end) with end exclusive


def accuracy(gold: Sequence, predicted: Sequence) -> float:
    """Fraction of equal items (labels, or the tags of flattened sentences); NaN for no
    items (there is nothing to be right about: 0 read as a model that is always wrong)."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    if not gold:
        return float("nan")
    return sum(g == p for g, p in zip(gold, predicted)) / len(gold)


def token_accuracy(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    """Accuracy over all tokens of all sentences (NaN for no token)."""
    flat_gold = [t for sent in gold for t in sent]
    flat_pred = [t for sent in predicted for t in sent]
    if any(len(g) != len(p) for g, p in zip(gold, predicted)) or len(gold) != len(predicted):
        raise ValueError("gold and predicted sentences differ in length")
    return accuracy(flat_gold, flat_pred)


def _split_tag(tag: str) -> Tuple[str, str]:
    """``B-PER`` -> (``B``, ``PER``); ``O`` -> (``O``, ``""``)."""
    if tag == "O" or not tag:
        return "O", ""
    prefix, _, kind = tag.partition("-")
    if prefix not in ("B", "I") or not kind:
        raise ValueError(f"not a BIO tag: {tag!r}")
    return prefix, kind


def bio_tag(tag: str) -> str:
    """``tag`` if it is ``O``, ``B-TYPE`` or ``I-TYPE``; else a ValueError saying so."""
    _split_tag(tag)
    return tag


def bio_spans(tags: Sequence[str]) -> Set[Span]:
    """The entity spans of one sentence's BIO tags, conlleval rules (module docstring)."""
    spans: Set[Span] = set()
    start, kind = None, ""
    for i, tag in enumerate(tags):
        prefix, this_kind = _split_tag(tag)
        continues = prefix == "I" and start is not None and this_kind == kind
        if start is not None and not continues:
            spans.add((kind, start, i))
            start = None
        if prefix != "O" and not continues:
            start, kind = i, this_kind
    if start is not None:
        spans.add((kind, start, len(tags)))
    return spans


def span_prf(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> Dict[str, float]:
    """Micro precision, recall and F1 of entity spans over sentences of BIO tags.

    Returns ``{"precision", "recall", "f1", "gold", "predicted", "correct"}``; a score with a
    zero denominator is 0.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    n_gold = n_pred = n_correct = 0
    for g, p in zip(gold, predicted):
        if len(g) != len(p):
            raise ValueError("gold and predicted sentences differ in length")
        gs, ps = bio_spans(g), bio_spans(p)
        n_gold += len(gs)
        n_pred += len(ps)
        n_correct += len(gs & ps)
    precision = n_correct / n_pred if n_pred else 0.0
    recall = n_correct / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1,
            "gold": n_gold, "predicted": n_pred, "correct": n_correct}


def span_f1(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    """Micro span F1 (see :func:`span_prf`)."""
    return span_prf(gold, predicted)["f1"]


#: The metrics of graded tasks: gold and predicted values are numbers, not labels.
CORRELATIONS = ("pearson", "spearman")


def correlation_undefined(gold: Sequence[float], predicted: Sequence[float]) -> Optional[str]:
    """Why a correlation of ``gold`` and ``predicted`` is undefined (NaN), or None."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold values but {len(predicted)} predictions")
    if not all(math.isfinite(v) for v in predicted):
        return "a prediction is not finite (NaN or inf)"
    return correlation.undefined_reason(gold, predicted)


def pearson(gold: Sequence[float], predicted: Sequence[float]) -> float:
    """Pearson's r of gold and predicted values; NaN where :func:`correlation_undefined`."""
    if correlation_undefined(gold, predicted):
        return float("nan")
    return correlation.pearson(gold, predicted)


def spearman(gold: Sequence[float], predicted: Sequence[float]) -> float:
    """Spearman's rho (average ranks for ties); NaN where :func:`correlation_undefined`."""
    if correlation_undefined(gold, predicted):
        return float("nan")
    return correlation.spearman(gold, predicted)


#: Metric name -> function of (gold, predicted) for each task kind's outputs.
METRICS = {"accuracy": accuracy, "token_accuracy": token_accuracy, "span_f1": span_f1,
           "pearson": pearson, "spearman": spearman}
