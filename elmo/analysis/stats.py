"""Uncertainty of the analysis numbers: a paired bootstrap over groups (sentences, lemmas) for
"is one layer really above another", a grouped bootstrap interval of one score, and the range
of accuracies that chance alone gives on a small test set, and a percentile interval of any
statistic over resampled items (a correlation over word pairs)."""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from ..tasks.paired import signed

#: Per-item numbers (0/1 or scores), as a list or a NumPy array (each is read with np.asarray).
Values = Union[Sequence[float], np.ndarray]
#: Per-item group ids, as a list or a NumPy array.
GroupIds = Union[Sequence[int], np.ndarray]


def paired_bootstrap(correct_a: Values, correct_b: Values,
                     groups: Optional[GroupIds] = None, n_resamples: int = 1000,
                     seed: int = 0, predicted_a: Optional[Values] = None,
                     predicted_b: Optional[Values] = None) -> Dict[str, float]:
    """Difference of mean accuracy ``a - b`` (or of F1) with a 95% percentile interval.

    Args:
        correct_a, correct_b: per-item 0/1 (or scores) of two systems on the same N items.
        groups: per-item group id (e.g. the sentence); whole groups are resampled, because
            tokens of one sentence are not independent. Default: every item its own group.
        predicted_a, predicted_b: per-item 0/1, whether the system gave a prediction at all.
            Given, the difference is of F1 = 2 * correct / (predicted + items), as
            :func:`bootstrap_interval` scores, so that it is the difference of the F1 figures
            (an accuracy difference is another number wherever items went unpredicted).

    Returns:
        ``{"diff", "low", "high", "p_b_ge_a", "n_groups"}``: the observed difference, the
        interval, the share of resamples in which ``b`` was at least as good as ``a``, and
        the number of groups resampled.
    """
    a = np.asarray(correct_a, dtype=np.float64)
    b = np.asarray(correct_b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError("correct_a and correct_b must be equal-length non-empty 1-d sequences")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):   # (a NaN difference and interval)
        raise ValueError("correct_a and correct_b must be finite numbers")
    g = _groups(groups, len(a))
    _check_resamples(n_resamples)
    ids, inverse = np.unique(g, return_inverse=True)
    count = np.bincount(inverse, minlength=len(ids)).astype(np.float64)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(ids), size=(n_resamples, len(ids)))
    if predicted_a is None and predicted_b is None:
        d_sum = np.bincount(inverse, weights=a - b, minlength=len(ids))     # per group
        diffs = d_sum[picks].sum(axis=1) / count[picks].sum(axis=1)
        diff = float((a - b).mean())
    else:
        pa, pb = (np.ones_like(a) if p is None else np.asarray(p, dtype=np.float64)
                  for p in (predicted_a, predicted_b))
        if pa.shape != a.shape or pb.shape != a.shape:
            raise ValueError("predicted_a and predicted_b must have the shape of correct_a")
        _check_correct_predicted(a, pa, "correct_a", "predicted_a")
        _check_correct_predicted(b, pb, "correct_b", "predicted_b")
        sums = [np.bincount(inverse, weights=w, minlength=len(ids)) for w in (a, b, pa, pb)]
        f1 = lambda c, p, n: 2 * c / np.maximum(p + n, 1e-12)
        n = count[picks].sum(axis=1)
        ca, cb, pa_s, pb_s = (s_[picks].sum(axis=1) for s_ in sums)
        diffs = f1(ca, pa_s, n) - f1(cb, pb_s, n)
        diff = float(f1(a.sum(), pa.sum(), len(a)) - f1(b.sum(), pb.sum(), len(a)))
    return {"diff": diff, "low": float(np.percentile(diffs, 2.5)),
            "high": float(np.percentile(diffs, 97.5)), "p_b_ge_a": float((diffs <= 0).mean()),
            "n_groups": int(len(ids))}


def _groups(groups: Optional[GroupIds], n: int) -> np.ndarray:
    """The per-item group ids (default: one group per item); another length than the items'
    is a ValueError (numpy's bincount said only that "the weights and list" differ)."""
    if groups is None:
        return np.arange(n)
    g = np.asarray(groups)
    if g.shape != (n,):
        raise ValueError(f"groups must give one group id per item: {n} items, groups of shape {g.shape}")
    return g


def _check_correct_predicted(correct: np.ndarray, predicted: np.ndarray, name: str, pname: str) -> None:
    """An item is correct only where it was predicted (``correct <= predicted``, both (N,)):
    one counted correct without a prediction made F1 = 2 * correct / (predicted + items) come
    out above 1 (two arrays of the items in different orders, say), with nothing to say so."""
    wrong = np.flatnonzero(correct > predicted)
    if len(wrong):
        raise ValueError(f"{name} counts {len(wrong)} item(s) correct that {pname} says got no prediction "
                         f"(the first: item {int(wrong[0])}); an item can only be correct where it was "
                         f"predicted")


def _check_resamples(n_resamples: int) -> None:
    """At least one resample (none was an IndexError from the percentile of nothing)."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a whole number of at least 1, got {n_resamples!r}")


#: Fewer groups than this and a grouped bootstrap cannot say how far the difference could
#: move: one group resamples to itself (an interval of width 0 around any difference), a
#: few give a handful of distinct values.
MIN_GROUPS = 10


def verdict(better: str, worse: str, boot: Dict[str, float]) -> str:
    """A plain sentence: does ``better`` beat ``worse`` (the difference's interval above 0)?
    Below :data:`MIN_GROUPS` groups (test sentences, lemmas) it says the sample is too small."""
    d = 100 * boot["diff"]
    span = f"{signed(d, 1)} points, 95% interval {100 * boot['low']:+.1f} to {100 * boot['high']:+.1f}"
    groups = boot.get("n_groups")
    if groups is not None and groups < MIN_GROUPS:
        return (f"not shown: {int(groups)} test group(s) (sentences or lemmas) are too few for the "
                f"bootstrap to compare {better} and {worse}; give at least {MIN_GROUPS} ({span})")
    if boot["low"] > 0:
        return f"holds: {better} beats {worse} ({span})"
    if boot["high"] < 0:
        return f"does not hold: {worse} beats {better} ({span})"
    return f"not shown: the difference between {better} and {worse} is within noise ({span})"


def bootstrap_interval(correct: Values, groups: Optional[GroupIds] = None,
                       predicted: Optional[Values] = None, n_resamples: int = 1000,
                       seed: int = 0) -> Dict[str, float]:
    """A score with a 95% percentile interval from resampling whole groups.

    Args:
        correct: per-item 0/1.
        groups: per-item group id (e.g. the sentence or the lemma); default: one per item.
        predicted: per-item 0/1, whether the item got a prediction at all. Given, the score
            is F1 = 2 * correct / (predicted + items) (precision correct / predicted, recall
            correct / items); without it, accuracy.

    Returns:
        ``{"value", "low", "high", "n"}`` (``n``: items).
    """
    c = np.asarray(correct, dtype=np.float64)
    if c.ndim != 1 or len(c) == 0:
        raise ValueError("correct must be a non-empty 1-d sequence")
    p = np.ones_like(c) if predicted is None else np.asarray(predicted, dtype=np.float64)
    if p.shape != c.shape:
        raise ValueError("predicted must have the shape of correct")
    if not (np.isfinite(c).all() and np.isfinite(p).all()):
        raise ValueError("correct and predicted must be finite numbers")
    _check_correct_predicted(c, p, "correct", "predicted")
    g = _groups(groups, len(c))
    _check_resamples(n_resamples)
    _, inverse = np.unique(g, return_inverse=True)
    sums = [np.bincount(inverse, weights=w) for w in (c, p, np.ones_like(c))]
    score = lambda cs, ps, ns: 2 * cs / np.maximum(ps + ns, 1e-12)
    picks = np.random.default_rng(seed).integers(0, len(sums[0]), size=(n_resamples, len(sums[0])))
    boot = score(*(s[picks].sum(axis=1) for s in sums))
    return {"value": float(score(c.sum(), p.sum(), len(c))), "low": float(np.percentile(boot, 2.5)),
            "high": float(np.percentile(boot, 97.5)), "n": int(len(c))}


def chance_range(n: int, p: float = 0.5, level: float = 0.95) -> Tuple[float, float]:
    """The central ``level`` range of the accuracy of a coin-flip classifier on ``n`` items
    (exact binomial): accuracies inside it are what chance alone gives."""
    if n <= 0:
        raise ValueError("n must be positive")
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be between 0 and 1 (both excluded), got {p}")
    if not 0.0 < level <= 1.0:   # (1.5 gave accuracies up to 133%)
        raise ValueError(f"level must be above 0 and at most 1, got {level}")
    if level == 1.0:
        # every accuracy (searched for in the summed pmf, which misses 1 or reaches it early by
        # rounding, it came out as 0 to 110% for n = 10, and 0 to 93.75% for n = 64)
        return 0.0, 1.0
    # in logs: comb(n, k) * p ** k overflowed a float from n = 1030 on (a contrast category of
    # that many targets failed after its probes had run)
    k = np.arange(n + 1)
    log_comb = np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                         for i in range(n + 1)])
    pmf = np.exp(log_comb + k * math.log(p) + (n - k) * math.log1p(-p))
    cdf = np.cumsum(pmf)
    tail = (1 - level) / 2
    low = int(np.searchsorted(cdf, tail, side="right"))           # P(X < low) <= tail
    high = int(np.searchsorted(cdf, 1 - tail, side="left"))       # P(X <= high) >= 1 - tail
    return low / n, high / n


def resampled_interval(statistic: Callable[[np.ndarray], float], n_items: int,
                       n_resamples: int = 1000, seed: int = 0) -> Dict[str, Any]:
    """A 95% percentile interval of ``statistic`` over items resampled with replacement.

    Args:
        statistic: takes (n_items,) int indices of the items drawn and gives a number (NaN
            where it is undefined for that draw, e.g. a correlation of a constant side).
        n_items: N; each resample draws N of them. The same ``seed`` draws the same indices,
            so statistics of one item set (one per layer) are resampled alike.

    Returns:
        ``{"low", "high", "n_undefined"}``: the interval over the resamples where the
        statistic is defined (None, None when it is in none), and how many were not.
    """
    if isinstance(n_items, bool) or not isinstance(n_items, (int, np.integer)) or n_items < 1:
        raise ValueError(f"n_items must be a whole number of at least 1, got {n_items!r}")
    _check_resamples(n_resamples)
    picks = np.random.default_rng(seed).integers(0, n_items, size=(n_resamples, n_items))
    values = np.array([statistic(p) for p in picks], dtype=np.float64)
    defined = values[np.isfinite(values)]
    if len(defined) == 0:
        return {"low": None, "high": None, "n_undefined": int(n_resamples)}
    return {"low": float(np.percentile(defined, 2.5)), "high": float(np.percentile(defined, 97.5)),
            "n_undefined": int(n_resamples - len(defined))}
