"""cuDNN's float32 convolutions in full float32 (not TF32) for the blocks that ask for it.

cuDNN runs float32 convolutions in TF32 by default (10-bit mantissas), which moves the
character CNN's token vectors far beyond the conformance tolerance. PyTorch has no per-call
switch, only process-wide flags, so :func:`full_precision_convolutions` turns TF32 off while
any block that asked for it runs, and puts the flags back when the last one ends.

Counted, not saved and restored by each block: several threads may run one model at once
(see :class:`elmo.embedding.Embedder`), and a block that ended while another thread's was
still running put TF32 back under that thread's convolutions, whose vectors then silently
came out in TF32.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator, Optional

import torch

_LOCK = threading.Lock()
#: Blocks inside :func:`full_precision_convolutions` now, all threads together.
_holders = 0
#: Puts the flags back as they were before the first of those blocks; None when there is none.
_restore: Optional[Callable[[], None]] = None


def _tf32_off() -> Callable[[], None]:
    """Turn TF32 off for cuDNN's float32 convolutions; returns what puts the flags back.

    From PyTorch 2.9 on, cuDNN's convolutions and RNNs have flags of their own
    (``torch.backends.cudnn.conv.fp32_precision``); once a program sets them apart from the
    old flag, reading ``torch.backends.cudnn.allow_tf32`` raises a RuntimeError. Then only
    the convolutions' own flag is set (and put back): otherwise every float32 forward on CUDA
    would fail."""
    cudnn = torch.backends.cudnn
    try:
        before = cudnn.allow_tf32
    except RuntimeError:  # the per-operator flags were set apart from the old one
        conv = cudnn.conv  # type: ignore[attr-defined]  # (set at import by torch)
        before_conv = conv.fp32_precision
        conv.fp32_precision = "ieee"
        return lambda: setattr(conv, "fp32_precision", before_conv)
    cudnn.allow_tf32 = False
    return lambda: setattr(cudnn, "allow_tf32", before)


@contextlib.contextmanager
def full_precision_convolutions(x: torch.Tensor) -> Iterator[None]:
    """On CUDA, float32 convolutions of ``x`` in full float32 inside the block; other devices
    and dtypes are left alone. The flags come back as they were once no block (of any thread)
    is running."""
    global _holders, _restore
    if x.device.type != "cuda" or x.dtype != torch.float32:
        yield
        return
    with _LOCK:
        if _holders == 0:
            _restore = _tf32_off()
        _holders += 1
    try:
        yield
    finally:
        with _LOCK:
            _holders -= 1
            if _holders == 0 and _restore is not None:
                restore, _restore = _restore, None
                restore()
