"""Counting the reads of tensor values into Python: each is a device-to-host sync on a GPU.

On the CPU nothing syncs, so the count is what a GPU would wait for, as far as it can be seen
from Python: the reads in Python (``int(t)``, ``t.tolist()``, ``bool(t)``, ...) and the ATen
operators whose output size depends on the data (``nonzero``, boolean-mask indexing,
``unique``, ...), which read the device before they can allocate.
"""
from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from typing import Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

PYTHON_READS = {"tolist", "item", "__int__", "__float__", "__bool__", "__index__", "numpy"}
SIZE_FROM_DATA = {"nonzero", "masked_select", "_unique2", "unique_dim", "unique_consecutive",
                  "repeat_interleave", "bincount", "equal", "_local_scalar_dense"}


class _PythonReads(TorchFunctionMode):
    def __init__(self, counts: Counter, paused: list):
        super().__init__()
        self.counts, self.paused = counts, paused

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in PYTHON_READS and not self.paused:
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


class _OperatorReads(TorchDispatchMode):
    def __init__(self, counts: Counter, paused: list):
        super().__init__()
        self.counts, self.paused = counts, paused

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.split("::")[-1]
        if self.paused:
            pass
        elif name in SIZE_FROM_DATA:
            self.counts[f"aten.{name}"] += 1
        elif name.startswith(("index", "_index_put")) and len(args) > 1 and isinstance(args[1], (list, tuple)):
            if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1]):
                self.counts[f"aten.{name} by a mask"] += 1
        return func(*args, **(kwargs or {}))


class HostReads:
    """``with HostReads() as reads: ...`` then ``reads.counts`` (a Counter by kind) and
    ``reads.total``. (An ``item()`` is counted twice: in Python and as the ATen read.)
    ``with reads.paused(): ...`` leaves out the reads made inside."""

    def __init__(self):
        self.counts: Counter = Counter()
        self._paused: list = []   # (shared with the modes: non-empty while paused)
        self._modes = (_PythonReads(self.counts, self._paused), _OperatorReads(self.counts, self._paused))

    @contextmanager
    def paused(self) -> Iterator[None]:
        self._paused.append(True)
        try:
            yield
        finally:
            self._paused.pop()

    def __enter__(self) -> "HostReads":
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)

    @property
    def total(self) -> int:
        return sum(self.counts.values())
