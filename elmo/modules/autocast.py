"""Which dtype autocast would compute a matrix multiply in, for hand-written autograd functions.

A custom ``torch.autograd.Function`` runs its own ops, so autocast cannot cast them one by
one as it does for plain PyTorch code: such a function asks :func:`autocast_dtype` once, casts
its inputs, and runs with autocast off. (Both calls take a device type from PyTorch 2.4 on,
the oldest version the package allows.)
"""
from __future__ import annotations

import contextlib
from typing import ContextManager, Optional

import torch


def autocast_on(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` ("cpu", "cuda")."""
    return torch.is_autocast_enabled(device_type)


def autocast_dtype(device_type: str) -> Optional[torch.dtype]:
    """The autocast dtype on ``device_type``, or None where autocast is off."""
    return torch.get_autocast_dtype(device_type) if autocast_on(device_type) else None


def autocast_off(device_type: str) -> ContextManager[object]:
    """A block with autocast off on ``device_type``; nothing to turn off on the meta device,
    where ``torch.autocast`` itself raises."""
    if device_type == "meta":
        return contextlib.nullcontext()
    return torch.autocast(device_type, enabled=False)
