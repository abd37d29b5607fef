"""A 1-d convolution followed by a max over positions, as matrix multiplies (the CPU path of
the character CNN).

For token ``t``, filter ``f`` of width ``w`` and bias ``b``::

    pooled[t, f] = max_p ( b_f + sum_{c, k} W[f, c, k] x[t, p + k, c] ),  p = 0 .. L - w

Why not ``nn.Conv1d``: on the CPU its kernel for these shapes (16 input channels, a few
dozen positions) runs at about 40% of the machine's matrix-multiply rate, forward and
backward. Here the windows are laid out as rows (N * P, d * w) and every product is one
large matrix multiply. The backward knows that the max passes each filter's gradient to one
position per token, so the gradient of the convolution output is that scattered, and the
input's gradient is the windows' gradient added back at their offsets.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from .autocast import autocast_dtype
from .dense import bf16_autocast_in_onednn, rows_rounded


def max_with_first_index(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The maximum over dim 1 and the first position holding it, as ``x.max(dim=1)`` gives them.

    x: (N, P, F) -> values (N, F), indices (N, F) long.

    Why not ``x.max(dim=1)``: on the CPU its kernel with indices is not vectorised; for the
    character CNN's maps (a few hundred tokens, 8 to 16 positions, 512 to 2048 filters) it ran
    1.1 to 3.4 times as slowly as this (``amax``, one comparison, and an ``amax`` over small
    integers that rank each position holding the maximum, the first ranked highest), and 15
    to 28 times as slowly as ``amax`` alone (Zen 4, ``python benchmarks/max_pool.py``).
    NaN is never equal to the maximum it makes, so those maps take ``x.max`` itself.
    """
    positions = x.shape[1]
    values = x.amax(dim=1)
    holds_max = torch.eq(x, values.unsqueeze(1))                                   # (N, P, F) bool
    if positions < 256:  # a bool is one byte, 0 or 1: read it as uint8 without a copy
        ranks = torch.arange(positions, 0, -1, dtype=torch.uint8, device=x.device)
        ranked = holds_max.view(torch.uint8).mul_(ranks.view(1, positions, 1))
    else:
        ranks = torch.arange(positions, 0, -1, dtype=torch.int32, device=x.device)
        ranked = holds_max * ranks.view(1, positions, 1)
    best = ranked.amax(dim=1)                                                       # P - first
    if x.numel() and not bool(best.amin() > 0):  # a NaN in some map: no position equals it
        return x.max(dim=1)
    return values, positions - best.long()


def _convolved(chars: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, round_rows: bool):
    """chars (N, L, d), weight (n, d, w), bias (n,) -> the convolution at every position
    (N, P, n), P = L - w + 1, with the windows' rows (R, d * w) and the weight as (n, d * w)
    that made it. ``round_rows``: run the product over the N * P windows' rows rounded up to
    ``dense.ROW_MULTIPLE`` (R; zero rows, so that oneDNN sees few distinct row counts)."""
    n_tokens, length, dim = chars.shape
    n_filters, _, width = weight.shape
    positions = length - width + 1
    # (N, P, d, w) view of every window, copied to rows that match weight's (d, w) order
    windows = chars.unfold(1, width, 1).reshape(n_tokens * positions, dim * width)
    rows = n_tokens * positions
    if round_rows:
        windows = F.pad(windows, (0, 0, 0, rows_rounded(rows) - rows))
    flat_weight = weight.reshape(n_filters, dim * width)
    out = torch.addmm(bias, windows, flat_weight.t())[:rows].view(n_tokens, positions, n_filters)
    return out, windows, flat_weight


class _ConvMaxPool(torch.autograd.Function):
    """:func:`conv_max_pool` with gradients: the backward reuses the forward's windows and
    keeps, per (token, filter), only the position of the maximum."""

    @staticmethod
    def forward(ctx, chars, weight, bias, round_rows: bool):
        """chars (N, L, d), weight (n, d, w), bias (n,) -> pooled (N, n) (see :func:`_convolved`)."""
        out, windows, flat_weight = _convolved(chars, weight, bias, round_rows)
        pooled, where = max_with_first_index(out)                         # (N, n)
        n_tokens, length, dim = chars.shape
        width = weight.shape[2]
        ctx.shape = (n_tokens, length, dim, width, length - width + 1)
        ctx.save_for_backward(windows, flat_weight, where)
        return pooled

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        """grad (N, n) -> gradients of chars (N, L, d) (None unless needed), weight (n, d, w),
        bias (n,); None for round_rows."""
        windows, flat_weight, where = ctx.saved_tensors
        n_tokens, length, dim, width, positions = ctx.shape
        n_filters = flat_weight.shape[0]
        grad = grad.contiguous()
        # the max passes each (token, filter) gradient to its one winning position
        rows = n_tokens * positions
        d_out = grad.new_zeros(windows.shape[0], n_filters)  # the padded rows stay zero
        d_out[:rows].view(n_tokens, positions, n_filters).scatter_(1, where.unsqueeze(1), grad.unsqueeze(1))
        d_weight = torch.mm(d_out.t(), windows).view(n_filters, dim, width)
        d_bias = grad.sum(dim=0)
        d_chars = None
        if ctx.needs_input_grad[0]:
            d_windows = torch.mm(d_out, flat_weight)[:rows].view(n_tokens, positions, dim, width)
            d_chars = grad.new_zeros(n_tokens, length, dim)
            for k in range(width):  # window p's offset k is position p + k
                d_chars[:, k:k + positions] += d_windows[..., k]
        return d_chars, d_weight, d_bias, None


def conv_max_pool(chars: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """max over positions of conv1d(chars, weight, bias), before any activation.

    Args:
        chars: (N, L, d) embedded characters, position-major (not conv1d's (N, d, L)).
        weight: (n, d, w) as ``nn.Conv1d`` stores it; bias: (n,) or None. Needs L >= w.
    Returns:
        (N, n). Under autocast the products run in autocast's dtype, as conv1d's would.
    """
    if chars.shape[1] < weight.shape[2]:
        raise ValueError(f"{chars.shape[1]} positions are fewer than the filter width {weight.shape[2]}")
    if bias is None:
        bias = weight.new_zeros(weight.shape[0])
    dtype = autocast_dtype(chars.device.type)
    round_rows = dtype is not None and bf16_autocast_in_onednn(chars)
    with torch.autocast(chars.device.type, enabled=False):
        if dtype is not None:
            chars, weight, bias = chars.to(dtype), weight.to(dtype), bias.to(dtype)
        if torch.is_grad_enabled() and (chars.requires_grad or weight.requires_grad or bias.requires_grad):
            return _ConvMaxPool.apply(chars, weight, bias, round_rows)
        # nothing to differentiate (inference): the maximum alone, no positions to keep
        return _convolved(chars, weight, bias, round_rows)[0].amax(dim=1)
