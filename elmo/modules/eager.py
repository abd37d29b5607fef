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
import wrapt

F = TypeVar("F", bound=Callable)


def eager_under_compile(forward: F) -> F:
    """The method ``forward``, and everything it calls, skipped by TorchDynamo (run as plain
    Python). For methods only (a decorator inside a class body).

    ``torch.compiler.disable`` imports TorchDynamo, which took about 0.9 s of the 2.1 s that
    ``import elmo`` took on a 2-core CPU, for every user and command, though few compile. So the
    class keeps the plain method until TorchDynamo is imported (``torch.compile`` imports it
    before it traces anything), and the disabled one from then on; where it was imported
    before this module, from the start. A wrapper of our own that checked at each call was
    not enough: TorchDynamo then compiled the wrapper's own frame, with a graph break in it (a
    compiled task model over ``Elmo``, four batch shapes: 23 frames compiled against 16)."""
    return _DisabledWhenDynamoLoads(forward)  # type: ignore[return-value]


class _DisabledWhenDynamoLoads:
    """Stands in the class body only until the class exists: it puts ``forward`` back in its
    place, and has it replaced by its disabled form when TorchDynamo is (or was) imported."""

    def __init__(self, forward: Callable):
        self.forward = forward

    def __set_name__(self, owner: type, name: str) -> None:
        forward = self.forward
        setattr(owner, name, forward)

        def disable(_module) -> None:
            # (a method replaced meanwhile, say by a test's patch, is left as it was set)
            if owner.__dict__.get(name) is forward:
                setattr(owner, name, _disabled(forward, f"{owner.__name__}.{name}"))

        wrapt.register_post_import_hook(disable, "torch._dynamo")  # now, if already imported


#: Why the forwards are not traced: TorchDynamo shows it where it cannot go on without them,
#: ``torch.compile(model, fullgraph=True)``, whose error said only "reason: None" and hinted to
#: remove the ``torch.compiler.disable`` call.
EAGER_REASON = ("elmo's biLM forwards run eagerly: they choose their work from the data; "
                "compile without fullgraph=True, and the task's own layers are compiled around them")


def _disabled(forward: Callable, name: str) -> Callable:
    """``torch.compiler.disable(forward)``, with :data:`EAGER_REASON` where this PyTorch takes
    a reason (2.7 on)."""
    import inspect
    if "reason" in inspect.signature(torch.compiler.disable).parameters:
        return torch.compiler.disable(forward, reason=f"{name}: {EAGER_REASON}")
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
