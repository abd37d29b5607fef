"""Packing a batch of sequences by length for the LSTM, computed on the host.

The packing (which rows run at each step, and where each packed slot comes from) depends only
on the B lengths. It is computed on the host with numpy and copied to the device in one
queued transfer: on a GPU, computing it there read the device three times (a boolean-mask
index, a ``tolist``, a ``nonzero``), each a wait for all queued work. Lengths given as Python
ints cost no read at all; a lengths tensor on a GPU is read once (``tolist``).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

import numpy as np
import torch

from ..host_copy import to_device

#: Sequence lengths as :meth:`Packing.from_lengths` and
#: :meth:`~elmo.modules.lstm.BiLSTMStack.forward` take them: a (B,) integer tensor on any
#: device, or the B lengths as Python (or numpy) ints in a list or tuple.
Lengths = Union[torch.Tensor, Sequence[int]]


def _integer_dtype(dtype: torch.dtype) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


def host_lengths(lengths: Lengths, max_len: int, rows: Optional[int] = None) -> np.ndarray:
    """``lengths`` as a (B,) int64 array on the host, checked.

    Args:
        lengths: a (B,) integer tensor (read once, with ``tolist``: on a GPU the one wait for
            the device) or a list or tuple of B ints (no read).
        max_len: T, the positions of each row: every length must be 0 to T.
        rows: B where the caller knows it (the inputs' rows), to check the count against.
    Raises:
        ValueError: not a 1-D integer tensor or a list or tuple of ints (bools and floats are
            refused), another count than ``rows``, or a length below 0 or above ``max_len``.
            (Unchecked, a length above T packed positions of the next row, and a wrong count
            ran silently with the wrong rows' lengths.)
    """
    if isinstance(lengths, torch.Tensor):
        if lengths.dim() != 1 or not _integer_dtype(lengths.dtype):
            raise ValueError(f"lengths must be a (B,) tensor of integers (torch.long), got shape "
                             f"{tuple(lengths.shape)} of {lengths.dtype}")
        values: Sequence[int] = lengths.tolist()
    elif isinstance(lengths, (list, tuple)):
        wrong = [v for v in lengths if isinstance(v, bool) or not isinstance(v, numbers.Integral)]
        if wrong:
            raise ValueError(f"lengths must be ints, got {wrong[0]!r} ({type(wrong[0]).__name__})")
        values = lengths
    else:
        raise ValueError(f"lengths must be a (B,) integer tensor or a list or tuple of ints, "
                         f"got {type(lengths).__name__}")
    if rows is not None and len(values) != rows:
        raise ValueError(f"lengths has {len(values)} entries for {rows} rows of inputs")
    # (Python ints are range-checked before numpy, which would overflow on one beyond int64)
    outside = [(i, v) for i, v in enumerate(values) if not 0 <= v <= max_len]
    if outside:
        raise ValueError(f"lengths must each be 0 to {max_len} (the inputs' positions), got "
                         f"{outside[0][1]} for row {outside[0][0]}")
    return np.asarray(values, dtype=np.int64)


@dataclass
class Packing:
    """Where each packed slot comes from, for a batch of B sequences of lengths ``lengths``.

    Packed slots are time-major over the rows sorted by length (longest first), as in
    ``torch.nn.utils.rnn.PackedSequence``: the first ``batch_sizes[0]`` slots are time step 0.
    """

    order: torch.Tensor          # (B,) row index of each sorted position
    batch_sizes: List[int]       # rows still running at each step
    forward_index: torch.Tensor  # (N,) flat index b * T + t of each slot, read left to right
    backward_index: torch.Tensor  # (N,) flat index b * T + (len_b - 1 - t): read right to left

    @classmethod
    def from_lengths(cls, lengths: Lengths, max_len: int,
                     device: Union[str, torch.device, None] = None) -> "Packing":
        """The packing of B rows of ``lengths`` (each 0 to ``max_len``, T) into N slots, N the
        sum of the lengths; rows of length 0 get no slot. The rows are sorted by length,
        longest first, ties in row order (a stable sort).

        ``lengths``: see :data:`Lengths` and :func:`host_lengths` (checked; a tensor is read
        once). The index tensors (int64) are put on ``device``: by default the lengths
        tensor's, the CPU for host lengths."""
        if device is None:
            device = lengths.device if isinstance(lengths, torch.Tensor) else torch.device("cpu")
        return cls.from_host_lengths(host_lengths(lengths, max_len), max_len, device)

    @classmethod
    def from_host_lengths(cls, lengths: np.ndarray, max_len: int,
                          device: Union[str, torch.device]) -> "Packing":
        """:meth:`from_lengths` for lengths :func:`host_lengths` has checked: (B,) int64,
        each 0 to ``max_len``. Computed on the host, then one copy to ``device`` (queued
        without a wait on a GPU; none on the CPU)."""
        order = np.argsort(-lengths, kind="stable")
        longest = int(lengths.max()) if lengths.size else 0
        # running[t]: rows longer than t, for t < the longest (all of them non-zero)
        running = len(lengths) - np.cumsum(np.bincount(lengths, minlength=longest + 1))[:longest]
        step = np.repeat(np.arange(longest), running)                   # (N,) t of each slot
        starts = np.cumsum(running) - running
        rows = order[np.arange(step.size) - np.repeat(starts, running)]  # sorted position -> row
        flat_row = rows * max_len
        host = torch.from_numpy(np.concatenate([order, flat_row + step, flat_row + lengths[rows] - 1 - step]))
        order_t, forward_index, backward_index = to_device(host, device).split([len(order), step.size, step.size])
        return cls(order_t, running.tolist(), forward_index, backward_index)
