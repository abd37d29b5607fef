"""Copies of host tensors to the device that do not make the host wait for the device.

A copy from ordinary (pageable) host memory to a GPU is staged by the driver and, without
``non_blocking``, waits for the stream: the host cannot queue the next work until the GPU has
drained what came before. From page-locked (pinned) memory with ``non_blocking=True`` it is a
transfer queued like any kernel. The CPU path is a plain ``.to`` (no pinning: there is no GPU
to pin for, and pinning needs a CUDA driver).
"""
from __future__ import annotations

import functools
from typing import Tuple

import torch


def to_device(t: torch.Tensor, device: "str | torch.device") -> torch.Tensor:
    """``t`` (any shape and dtype, on the host) on ``device``: to a GPU through pinned memory
    without waiting, or by a plain (waiting) copy where pinning is refused (a driver or
    container without page-locked memory); elsewhere ``t.to(device)``.

    A view that is not contiguous (a slice of a batch's columns, say) is made contiguous before
    it is pinned: pinned as it is, its strides came along, and PyTorch copied it to a GPU through
    an ordinary contiguous host copy, from which the transfer waits for the GPU's queue."""
    if torch.device(device).type != "cuda" or t.device.type != "cpu":
        return t.to(device)
    try:
        pinned = t.contiguous().pin_memory()
    except RuntimeError:
        return t.to(device)
    return pinned.to(device, non_blocking=True)


@functools.lru_cache(maxsize=64)
def device_constant(values: Tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A tensor of ``values`` (a tuple of numbers, or of tuples of them: hashable, for the
    cache) in ``dtype`` on ``device``, made and copied there once per (values, dtype, device) and shared by every
    caller after: do not write to it. (A small constant such as a token's ids, made anew on
    every call, was a copy from ordinary host memory each time: a wait for a GPU.)"""
    return torch.tensor(values, dtype=dtype, device="cpu").to(device)
