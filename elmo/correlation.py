"""Correlation coefficients for graded tasks and word similarity: Pearson's r and Spearman's rho.

Both are computed in float64 with NumPy (SciPy is not a dependency). Spearman's rho is
Pearson's r of the ranks, ties given their average rank, which is what the usual references
(``scipy.stats.spearmanr``, R's ``cor(method = "spearman")``) compute.

A coefficient is undefined (NaN) for fewer than two items or when one side is constant; use
:func:`undefined_reason` to say why in a report instead of printing a bare NaN.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import numpy as np

#: Numbers of one side, as a list or a NumPy array (read with np.asarray as float64).
Values = Union[Sequence[float], np.ndarray]


def _pair(x: Values, y: Values) -> "tuple[np.ndarray, np.ndarray]":
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"correlation needs two 1-d sequences of one length, got shapes {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("correlation of values that are not all finite (NaN or inf)")
    return a, b


def undefined_reason(x: Values, y: Values) -> Optional[str]:
    """Why the correlation of ``x`` and ``y`` is undefined, or None when it is defined."""
    a, b = _pair(x, y)
    if len(a) < 2:
        return f"{len(a)} item{'' if len(a) == 1 else 's'}: a correlation needs at least 2"
    if a.min() == a.max() or b.min() == b.max():      # (np.ptp overflowed past 1.8e308)
        return "one side is constant: a correlation needs variation on both"
    return None


def pearson(x: Values, y: Values) -> float:
    """Pearson's r of two equal-length sequences, in [-1, 1]; NaN where undefined."""
    a, b = _pair(x, y)
    if undefined_reason(a, b):
        return float("nan")
    # Scale before centring, by a power of two (exact): the sum behind the mean of values
    # near the float64 maximum overflowed to inf, and r became NaN, then +1 (the clamp below).
    a = np.ldexp(a, -np.frexp(np.abs(a).max())[1])
    b = np.ldexp(b, -np.frexp(np.abs(b).max())[1])
    a = a - a.mean()
    b = b - b.mean()
    # and again after: products of tiny differences would underflow before the division
    a /= np.abs(a).max()
    b /= np.abs(b).max()
    r = float(np.dot(a, b) / math.sqrt(float(np.dot(a, a)) * float(np.dot(b, b))))
    return float(np.clip(r, -1.0, 1.0))   # rounding can step a hair past +-1 (NaN stays NaN)


def average_ranks(x: Values) -> np.ndarray:
    """(N,) float64 ranks 1..N of ``x``; equal values share the mean of their ranks."""
    a = np.asarray(x, dtype=np.float64)
    order = np.argsort(a, kind="mergesort")
    sorted_a = a[order]
    # Runs of equal values: each run's members get the mean of the positions it spans.
    starts = np.flatnonzero(np.r_[True, sorted_a[1:] != sorted_a[:-1]])
    ends = np.r_[starts[1:], len(a)]
    mean_rank = (starts + ends + 1) / 2.0          # mean of (start+1 .. end), 1-based
    ranks = np.empty(len(a), dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def spearman(x: Values, y: Values) -> float:
    """Spearman's rho: Pearson's r of the average ranks; NaN where undefined."""
    a, b = _pair(x, y)
    if undefined_reason(a, b):
        return float("nan")
    return pearson(average_ranks(a), average_ranks(b))
