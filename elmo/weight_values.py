"""Checks of weight values that both layouts share: :class:`WeightFileError`, the error every
loader raises for a file it cannot use, and the search for NaN and inf in an array or tensor
(:func:`non_finite`, :func:`check_finite`), which loaders, savers and training all run."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import torch


class WeightFileError(ValueError):
    """A weight file that is unreadable, truncated or does not fit the options."""


#: The exponent bits of the 16-bit floats: all set in NaN and inf, and in no other value.
_EXPONENT_BITS = {torch.bfloat16: 0x7F80, torch.float16: 0x7C00}


def check_finite(array: np.ndarray | torch.Tensor, where: str) -> None:
    """Raise WeightFileError naming ``where`` if ``array`` (numpy or torch) holds NaN or inf:
    such a weight makes every output NaN, silently (:func:`non_finite`)."""
    found = non_finite(array)
    if found is not None:
        count, first = found
        raise WeightFileError(f"{where} holds {count} non-finite values (NaN or inf), "
                              f"the first at index {first}")


def non_finite(array: np.ndarray | torch.Tensor) -> Optional[Tuple[int, Tuple[int, ...]]]:
    """(how many values of ``array`` are NaN or inf, the index of the first) where it holds
    any, else None; an array of no floating type holds none.

    A tensor on the CPU is checked through numpy (a view, no copy): ``torch.isfinite`` took
    about 20 times as long on a CPU, over half a second for a large model's weights
    (*scratch*). The 16-bit floats are checked by their bits (numpy lacks bfloat16, and its
    float16 check is slow): NaN and inf are the values whose exponent bits are all set."""
    if isinstance(array, torch.Tensor) and array.device.type != "cpu":
        if not array.is_floating_point():
            return None
        on_device = ~torch.isfinite(array)
        if not on_device.any():
            return None
        bad = on_device.cpu().numpy()
    elif isinstance(array, torch.Tensor):
        if not array.is_floating_point():
            return None
        tensor = array.detach()
        if tensor.dtype in _EXPONENT_BITS:
            exponent = _EXPONENT_BITS[tensor.dtype]
            bad = (tensor.view(torch.int16).numpy() & exponent) == exponent
        elif tensor.dtype in (torch.float32, torch.float64):
            bad = ~np.isfinite(tensor.numpy())
        else:   # (a float numpy lacks, float8 say: its values as float32)
            bad = ~np.isfinite(tensor.float().numpy())
    else:
        if array.dtype.kind != "f":
            return None
        bad = ~np.isfinite(array)
    bad = np.asarray(bad)   # (of a 0-dim value, numpy gives a scalar)
    if not bad.any():
        return None
    return int(bad.sum()), (tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ())
