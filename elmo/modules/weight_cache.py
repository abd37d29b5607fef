"""A value derived from some parameters, kept until one of them changes.

The LSTM keeps weights in other forms for inference: W_hh re-laid for one-row products, int8
rows, oneDNN's own layout. Each is made when first needed and made again when a weight it was
made from has changed (an optimizer step or ``load_state_dict`` changes it in place and bumps
its version; ``.to()`` replaces it), so it never goes stale.

What it cannot see is a write that PyTorch does not count either: through ``param.data``
(``param.data.copy_(w)``), which bypasses the version counter as it bypasses autograd's own
checks, and a fused optimizer's step (``torch.optim.Adagrad(..., fused=True)``, which
``elmo train`` uses on the CPU, leaves the version as it was). After such a write, call
:meth:`elmo.modules.lstm.BiLSTMStack.clear_inference_caches` (or write under
``torch.no_grad()`` instead, which is counted); the trainer does so after every step.
"""
from __future__ import annotations

from typing import Any, Callable, Generic, Optional, Sequence, Tuple, TypeVar

import torch

T = TypeVar("T")


class WeightCache(Generic[T]):
    """Holds ``make()``'s value for the current state of ``params`` (see :meth:`get`).

    A module's deep copy or pickle gets an empty cache: the value is made again on first use
    (oneDNN's packed tensors cannot be copied or saved, and a copy would double the memory).
    """

    def __init__(self) -> None:
        # (key, value) in one attribute, so that a reader never pairs one key with another value
        self._entry: Optional[Tuple[Tuple[Any, ...], T]] = None

    def get(self, params: Sequence[torch.Tensor], make: Callable[[], T]) -> T:
        """The value made from ``params`` in their current state; ``make()`` runs when there is
        none yet or a parameter has changed since (address, in-place version, device, dtype)."""
        key = tuple((p.data_ptr(), p._version, p.device, p.dtype) for p in params)
        entry = self._entry
        if entry is None or entry[0] != key:
            entry = (key, make())
            self._entry = entry
        return entry[1]

    @property
    def value(self) -> Optional[T]:
        """The value last made, or None (for tests and memory accounting)."""
        return None if self._entry is None else self._entry[1]

    def clear(self) -> None:
        """Drops the value (its memory is freed once no one else holds it)."""
        self._entry = None

    def __deepcopy__(self, memo: dict) -> "WeightCache[T]":
        return WeightCache()

    def __getstate__(self) -> dict:
        return {"_entry": None}
