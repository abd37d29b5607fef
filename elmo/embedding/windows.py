"""Splitting a long sentence into overlapping windows and stitching the vectors back.

The biLM's cost and memory grow with the longest sentence of a batch, and a pathological line
(thousands of tokens) would need one huge batch row. A sentence of more than ``max_tokens``
tokens is therefore cut into windows of ``max_tokens`` tokens that overlap by ``overlap``
tokens, each window is embedded as a sentence of its own (with its own ``<S>`` and ``</S>``),
and every token takes its vectors from exactly one window.

Windows start every ``max_tokens - overlap`` tokens; the last one is moved left so that it ends
at the end of the sentence (so every window is full). Token i of window [s, e) has

    left(i)  = i - s        (or unlimited when s == 0: the window sees the real sentence start)
    right(i) = e - 1 - i    (or unlimited when e == n: the window sees the real sentence end)

and takes its vectors from the window with the largest ``min(left, right)``, the window that
gives it the most context on both sides; on a tie, the earlier window. With this rule every
token keeps at least ``overlap // 2`` tokens of context on each side (or all there is).

A sentence of at most ``max_tokens`` tokens is a single window and is not changed.

An overlap that is not given (None) follows ``max_tokens``: ``min(DEFAULT_OVERLAP,
max_tokens // 2)`` (:func:`default_overlap`), so a lower ``max_tokens`` works without naming
an overlap too, and the default ``max_tokens`` keeps the overlap of 64 it always had.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ..checks import require_count

#: Default window length: longer than nearly every real sentence (Brown's longest is 180
#: tokens), so ordinary text is never split, while a runaway line cannot make a batch huge.
DEFAULT_MAX_TOKENS = 256
#: Default overlap of consecutive windows: each token keeps >= 32 tokens of context each side.
#: It is the most the default overlap can be; a shorter ``max_tokens`` gets half of it
#: (:func:`default_overlap`).
DEFAULT_OVERLAP = 64


def default_overlap(max_tokens: int) -> int:
    """The overlap used when none is given: ``min(DEFAULT_OVERLAP, max_tokens // 2)``.

    Half the window at most, so that an overlap the user did not choose is always valid
    (below ``max_tokens``) and windows still advance by at least half their length."""
    return min(DEFAULT_OVERLAP, max_tokens // 2)


@dataclass(frozen=True)
class Window:
    """Tokens [start, stop) are run together; of their outputs, [keep_start, keep_stop) are kept.

    All indices are positions in the whole sentence; start <= keep_start <= keep_stop <= stop.
    """

    start: int
    stop: int
    keep_start: int
    keep_stop: int


def window_starts(n_tokens: int, max_tokens: int, overlap: Optional[int] = None) -> List[int]:
    """Start positions of the windows of a sentence of ``n_tokens`` tokens (see the module doc)."""
    max_tokens, overlap = check_window_args(max_tokens, overlap)
    if n_tokens <= max_tokens:
        return [0]
    stride = max_tokens - overlap
    starts = list(range(0, n_tokens - max_tokens, stride))
    starts.append(n_tokens - max_tokens)  # the last window ends at the sentence's end
    return starts


def check_window_args(max_tokens: int, overlap: Optional[int] = None) -> Tuple[int, int]:
    """(max_tokens, overlap) as ints, checked: a count of 1 or more, and 0 <= overlap < max_tokens.

    ``overlap`` None is :func:`default_overlap` of ``max_tokens``; one that is given is
    checked as it is (one of ``max_tokens`` or more is an error, not lowered)."""
    max_tokens = require_count("max_tokens", max_tokens)
    if overlap is None:
        return max_tokens, default_overlap(max_tokens)
    overlap = require_count("overlap", overlap, least=0)
    if not overlap < max_tokens:
        raise ValueError(f"overlap must be in [0, max_tokens), got {overlap} with max_tokens={max_tokens}")
    return max_tokens, overlap


def context_score(i: int, start: int, stop: int, n_tokens: int) -> float:
    """min(left, right) context of token i inside window [start, stop) of an n-token sentence."""
    left = float("inf") if start == 0 else i - start
    right = float("inf") if stop == n_tokens else stop - 1 - i
    return min(left, right)


def plan_windows(n_tokens: int, max_tokens: int = DEFAULT_MAX_TOKENS,
                 overlap: Optional[int] = None) -> List[Window]:
    """The windows of a sentence and the tokens each one supplies.

    The kept ranges partition [0, n_tokens) in order. An empty sentence has one empty window.
    ``overlap`` None: :func:`default_overlap` of ``max_tokens``.
    """
    # (-1 gave no window at all, where an empty sentence has one; 5.0 a bare TypeError of range)
    n_tokens = require_count("n_tokens", n_tokens, least=0)
    max_tokens, overlap = check_window_args(max_tokens, overlap)
    starts = window_starts(n_tokens, max_tokens, overlap)
    if n_tokens == 0:
        return [Window(0, 0, 0, 0)]
    spans = [(s, min(s + max_tokens, n_tokens)) for s in starts]
    # Owner of each token: the best-scoring window among those that contain it (windows are
    # sorted by start, so they are found by bisection).
    owner = []
    for i in range(n_tokens):
        first = bisect.bisect_right(starts, i - max_tokens)  # first window with start + max > i
        last = bisect.bisect_right(starts, i)                # windows [first, last) contain i
        owner.append(max(range(first, last),
                         key=lambda w: (context_score(i, *spans[w], n_tokens), -w)))
    # Each run of tokens with the same owner becomes one piece to compute.
    windows = []
    run_start = 0
    for i in range(1, n_tokens + 1):
        if i == n_tokens or owner[i] != owner[run_start]:
            s, e = spans[owner[run_start]]
            windows.append(Window(s, e, run_start, i))
            run_start = i
    return windows
