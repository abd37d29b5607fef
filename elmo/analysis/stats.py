"""Paired bootstrap over groups (sentences): is one system's accuracy really above another's?"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np


def paired_bootstrap(correct_a: Sequence[float], correct_b: Sequence[float],
                     groups: Optional[Sequence[int]] = None, n_resamples: int = 1000,
                     seed: int = 0) -> Dict[str, float]:
    """Difference of mean accuracy ``a - b`` with a 95% percentile interval.

    Args:
        correct_a, correct_b: per-item 0/1 (or scores) of two systems on the same N items.
        groups: per-item group id (e.g. the sentence); whole groups are resampled, because
            tokens of one sentence are not independent. Default: every item its own group.

    Returns:
        ``{"diff", "low", "high", "p_b_ge_a"}``: the observed difference, the interval, and
        the share of resamples in which ``b`` was at least as good as ``a``.
    """
    a = np.asarray(correct_a, dtype=np.float64)
    b = np.asarray(correct_b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError("correct_a and correct_b must be equal-length non-empty 1-d sequences")
    g = np.arange(len(a)) if groups is None else np.asarray(groups)
    ids, inverse = np.unique(g, return_inverse=True)
    d_sum = np.bincount(inverse, weights=a - b, minlength=len(ids))     # per group
    count = np.bincount(inverse, minlength=len(ids)).astype(np.float64)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(ids), size=(n_resamples, len(ids)))
    diffs = d_sum[picks].sum(axis=1) / count[picks].sum(axis=1)
    return {"diff": float((a - b).mean()), "low": float(np.percentile(diffs, 2.5)),
            "high": float(np.percentile(diffs, 97.5)), "p_b_ge_a": float((diffs <= 0).mean())}


def verdict(better: str, worse: str, boot: Dict[str, float]) -> str:
    """A plain sentence: does ``better`` beat ``worse`` (the difference's interval above 0)?"""
    d = 100 * boot["diff"]
    span = f"{d:+.1f} points, 95% interval {100 * boot['low']:+.1f} to {100 * boot['high']:+.1f}"
    if boot["low"] > 0:
        return f"holds: {better} beats {worse} ({span})"
    if boot["high"] < 0:
        return f"does not hold: {worse} beats {better} ({span})"
    return f"not shown: the difference between {better} and {worse} is within noise ({span})"
