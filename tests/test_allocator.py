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
