"""Keep freed memory in the process during CPU training (glibc only).

By default glibc gives large freed blocks (above a threshold that adapts up to 32 MiB) back to
the system at once, and returns the top of the heap whenever it grows free. A training step
allocates and frees the same tens of megabytes of activations and gradients every time, so
each step then pays page faults for memory it just gave away. Raising the mmap threshold and
disabling trimming keeps those pages mapped: the process's resident memory stays at its peak
instead of breathing, and the steps get faster. It is what ``MALLOC_MMAP_THRESHOLD_`` and
``MALLOC_TRIM_THRESHOLD_`` do from the environment, set from inside the process.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        return libc
    except (OSError, AttributeError):
        return None


def keep_freed_memory(mmap_threshold: int = 32 * 1024 * 1024) -> bool:
    """Set glibc's mmap threshold to ``mmap_threshold`` bytes and turn trimming off.

    Blocks of ``mmap_threshold`` bytes and more are still mapped and unmapped on their own.
    The default, 32 MiB, is the cap of glibc's own adaptive threshold, and it is what keeps a
    long run's memory flat: with 64 MiB, the small model's 32 MiB highway weight gradients came
    from the heap, but the heap did not reuse their freed blocks, and the training process
    grew by about 32 MiB a step (benchmarks/RESULTS.md, Zen 4 section). A larger threshold
    suits bounded work only (``elmo analyze``'s probes).

    Returns False (and changes nothing) where the C library is not glibc."""
    libc = _libc()
    if libc is None:
        return False
    ok = libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1
    return ok and libc.mallopt(_M_TRIM_THRESHOLD, 2 ** 31 - 1) == 1


def return_freed_memory() -> bool:
    """The opposite, for measuring memory: blocks of 128 KiB and more are mapped on their own
    and given back when freed, and what is free now is given back, so that the resident size
    follows what is live. Returns False where the C library is not glibc."""
    libc = _libc()
    if libc is None:
        return False
    libc.mallopt(_M_MMAP_THRESHOLD, 128 * 1024)
    libc.mallopt(_M_TRIM_THRESHOLD, 128 * 1024)
    libc.malloc_trim(0)
    return True
