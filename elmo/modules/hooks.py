"""Submodules whose parameters the fast paths read directly, and the hooks on them.

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

The CNN's modules with hooks are now called as modules (PyTorch's own products for them, the
same function up to float rounding); the LSTM's layers cannot be, and refuse hooks
(``torch.nn.utils.parametrize`` works on all of them: it computes the weight where it is read).
"""
from __future__ import annotations

from torch import nn


def has_hooks(module: nn.Module) -> bool:
    """Whether calling ``module`` would run hooks registered on it (forward, forward pre-,
    backward ones; global hooks, which profilers register for every module, are not counted)."""
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks)


def refuse_hooks(module: nn.Module, name: str) -> None:
    """RuntimeError where ``module``, which is never called, has hooks that would never run."""
    if has_hooks(module):
        raise RuntimeError(f"{name} has hooks, which never run: its weights are read by the "
                           f"module that holds it, it is never called (torch.nn.utils.prune and "
                           f"the old weight_norm work through such hooks; use "
                           f"torch.nn.utils.parametrize instead, or a hook on the module above)")
