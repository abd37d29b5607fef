"""elmo.allocator: freed blocks stay mapped under keep_freed_memory, and go back under
return_freed_memory (glibc on Linux only)."""
from __future__ import annotations

import sys

import pytest
import torch

from elmo.allocator import keep_freed_memory, return_freed_memory


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2 ** 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_freed_blocks_are_kept_then_returned():
    if not return_freed_memory():
        pytest.skip("not glibc")
    block = torch.ones(4 * 2 ** 20)            # 16 MiB: mapped on its own, given back when freed
    del block
    returned = _rss_mib()
    assert keep_freed_memory()
    block = torch.ones(4 * 2 ** 20)            # now from the heap, which is not trimmed
    del block
    kept = _rss_mib()
    return_freed_memory()
    after = _rss_mib()
    assert kept - returned > 12 and kept - after > 12


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_blocks_above_glibcs_largest_mmap_threshold_are_kept_too():
    # glibc caps the mmap threshold at 32 MiB: a 48 MiB block stays only because mapping is off
    if not return_freed_memory():
        pytest.skip("not glibc")
    block = torch.ones(12 * 2 ** 20)
    del block
    returned = _rss_mib()
    assert keep_freed_memory(mmap_threshold=2 ** 30)   # more than glibc accepts: capped, not refused
    block = torch.ones(12 * 2 ** 20)
    del block
    kept = _rss_mib()
    return_freed_memory()
    after = _rss_mib()
    assert kept - returned > 40 and kept - after > 40
