"""Task metrics: accuracy, entity-span F1 for BIO tags, Pearson / Spearman correlation
for graded (regression) tasks, and SQuAD v1.1's exact match and F1 for extractive question
answering (``span_qa``).

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

Question answering compares answer texts after SQuAD v1.1's normalisation
(:func:`normalize_answer`: lower case, punctuation removed, the articles a/an/the removed,
whitespace collapsed): ``exact_match`` is whether the normalised texts are equal, ``f1`` the
harmonic mean of precision and recall of their words (as multisets); each question scores
the best over its gold answers, and the metric is the mean over questions (NaN for none).
The predicted text is read from the context as written, from the span's first token to its
last (:func:`~elmo.tasks.kinds.located_answer`), as the gold texts are: "3-1" stays "3-1"
where the tokens read "3 - 1". Only a context given as tokens has no text but its tokens
joined by spaces, so there a gold answer whose punctuation was split off a word inside it
("3-1" against "3 - 1": removing the hyphen leaves "31" against "3 1") can score below 1
even for the right span.
"""
from __future__ import annotations

import math
import re
import string
from collections import Counter
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


#: The metrics of span_qa tasks: gold is each question's answer texts, predicted one text.
ANSWER_METRICS = ("f1", "exact_match")

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's answer normalisation: lower case, ASCII punctuation removed, the words
    a, an and the removed, runs of whitespace made one space (none at either end)."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_f1(gold: str, predicted: str) -> float:
    """Word-overlap F1 of one predicted and one gold answer, normalised; the overlap counts a
    word as often as both have it. No word in common is 0, also where both answers normalise to
    nothing (as SQuAD v1.1's evaluation scores it, though their exact match is then 1; v2.0's
    counts it 1, for its unanswerable questions, which v1.1 has none of)."""
    g, p = normalize_answer(gold).split(), normalize_answer(predicted).split()
    common = sum((Counter(g) & Counter(p)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def answer_exact(gold: str, predicted: str) -> float:
    """1.0 when the normalised answers are equal, else 0.0."""
    return float(normalize_answer(gold) == normalize_answer(predicted))


def _best_over_gold(score, gold: Sequence[Sequence[str]], predicted: Sequence[str]) -> float:
    """Mean over questions of the best ``score(gold_text, predicted)`` over each question's gold
    answers; NaN for no question. A question without a gold answer is refused (SQuAD v1.1's
    always have one, and task files are checked for one)."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} questions but {len(predicted)} predicted answers")
    if not gold:
        return float("nan")
    if any(not answers for answers in gold):
        raise ValueError("a question without a gold answer cannot be scored")
    return sum(max(score(g, p) for g in answers) for answers, p in zip(gold, predicted)) / len(gold)


def squad_f1(gold: Sequence[Sequence[str]], predicted: Sequence[str]) -> float:
    """SQuAD v1.1 F1: the mean over questions of the best word-overlap F1 over the gold answers."""
    return _best_over_gold(answer_f1, gold, predicted)


def exact_match(gold: Sequence[Sequence[str]], predicted: Sequence[str]) -> float:
    """SQuAD v1.1 exact match: the share of questions whose answer equals a gold one, normalised."""
    return _best_over_gold(answer_exact, gold, predicted)


#: Metric name -> function of (gold, predicted) for each task kind's outputs.
METRICS = {"accuracy": accuracy, "token_accuracy": token_accuracy, "span_f1": span_f1,
           "pearson": pearson, "spearman": spearman, "f1": squad_f1, "exact_match": exact_match}
