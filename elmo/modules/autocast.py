"""Which dtype autocast would compute a matrix multiply in, for hand-written autograd functions.

A custom ``torch.autograd.Function`` runs its own ops, so autocast cannot cast them one by
one as it does for plain PyTorch code: such a function asks :func:`autocast_dtype` once, casts
its inputs, and runs with autocast off.
"""
from __future__ import annotations

from typing import Optional

import torch


def autocast_dtype(device_type: str) -> Optional[torch.dtype]:
    """The autocast dtype on ``device_type`` ("cpu", "cuda"), or None where autocast is off."""
    if not torch.is_autocast_enabled(device_type):
        return None
    if hasattr(torch, "get_autocast_dtype"):
        return torch.get_autocast_dtype(device_type)
    return torch.get_autocast_cpu_dtype() if device_type == "cpu" else torch.get_autocast_gpu_dtype()
