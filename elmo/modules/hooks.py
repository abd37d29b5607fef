"""Submodules whose parameters the fast paths read directly, the hooks on them, and modules
put in their place.

The character CNN multiplies by its highway layers', projection's and convolutions'
weights itself (oneDNN's products, convolutions as matrix multiplies: see
:mod:`elmo.modules.dense` and :mod:`elmo.modules.conv_pool`), and the LSTM stack runs the
weights of its :class:`~elmo.modules.lstm.BiLSTMLayer` s, which have no forward of their own.
So those modules are never called, and hooks on them never ran: a forward hook on a
convolution or a highway layer saw nothing on the CPU (and everything on a GPU), and
``torch.nn.utils.prune`` or the old ``weight_norm``, which compute the weight in a forward
pre-hook, left the weight of the moment they were applied in place (a second training step
then failed with "Trying to backward through the graph a second time"; inference after the
underlying weight changed used the old one, silently).

The same holds for a module put in the place of one of the CNN's layers: a LoRA-style
wrapper whose ``weight`` is its base layer's had its own forward skipped (the layer computed
without its adapter, silently), and one without a ``weight`` tensor (``quantize_dynamic``'s
``Linear``) failed deep in the CNN.

The CNN's modules with hooks, and modules of any class but the plain PyTorch one, are now
called as modules (:func:`called_as_module`; PyTorch's own products for a plain one, the same
function up to float rounding); the LSTM's layers cannot be, and refuse hooks
(``torch.nn.utils.parametrize`` works on all of them: it computes the weight where it is read).
"""
from __future__ import annotations

from torch import nn


def has_hooks(module: nn.Module) -> bool:
    """Whether calling ``module`` would run hooks registered on it (forward, forward pre-,
    backward ones; global hooks, which profilers register for every module, are not counted)."""
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks)


def called_as_module(module: nn.Module, plain: type) -> bool:
    """Whether the fast path must call ``module`` instead of reading its ``weight`` and
    ``bias``: it has hooks, or its class is not exactly ``plain`` (``nn.Linear``,
    ``nn.Conv1d``), so that its forward may compute something else."""
    return type(module) is not plain or has_hooks(module)


def refuse_hooks(module: nn.Module, name: str) -> None:
    """RuntimeError where ``module``, which is never called, has hooks that would never run."""
    if has_hooks(module):
        raise RuntimeError(f"{name} has hooks, which never run: its weights are read by the "
                           f"module that holds it, it is never called (torch.nn.utils.prune and "
                           f"the old weight_norm work through such hooks; use "
                           f"torch.nn.utils.parametrize instead, or a hook on the module above)")
