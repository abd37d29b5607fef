"""The biLM's forwards run eagerly inside ``torch.compile``, and refuse ``torch.func``'s transforms.

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


def refuse_function_transforms(module: str) -> None:
    """RuntimeError inside ``torch.func``'s transforms (``vmap``, ``grad``, ``jacrev``, ...; also
    ``torch.vmap``): for the same reasons (ids read back to choose the work, oneDNN's operators,
    autograd functions without the transforms' ``setup_context``) the forwards cannot run there,
    and failed deep inside PyTorch ("Cannot access data pointer of Tensor that doesn't have
    storage" under vmap). ``module`` names the module in the message."""
    peek = getattr(torch._C._functorch, "peek_interpreter_stack", None)
    if peek is not None and peek() is not None:
        raise RuntimeError(f"{module} does not run inside torch.func transforms (vmap, grad, jacrev, "
                           f"...): call it on the whole batch (any leading shape works) and take "
                           f"gradients with torch.autograd (torch.func.functional_call alone works)")
