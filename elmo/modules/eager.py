"""The biLM's forwards run eagerly inside ``torch.compile``.

Why: they decide their work from the data (which positions hold tokens, the distinct words of
a batch, how many rows are still running at each step), call oneDNN's operators directly and
run hand-written autograd functions. TorchDynamo cannot trace that as one graph: it breaks it
into dozens of pieces and compiles them again for every new batch shape (about 5 s each on a
2-core CPU), and Inductor fails on oneDNN's linear operator. So ``torch.compile(model)`` of a
task model that holds :class:`elmo.Elmo` compiles the task's own layers and calls ours as they
are, already batched and fused where that pays (benchmarks/RESULTS.md).
"""
from __future__ import annotations

from typing import Callable, TypeVar

import torch

F = TypeVar("F", bound=Callable)


def eager_under_compile(forward: F) -> F:
    """``forward``, and everything it calls, skipped by TorchDynamo (run as plain Python)."""
    return torch.compiler.disable(forward)
