"""How many CPU threads torch uses: the one place the library and its commands set it.

torch runs one operation on several threads (intra-op parallelism). The commands take a
``--threads`` option; tests and small models use one thread, where starting and joining more
costs more than it saves.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional

import torch


def set_threads(n: Optional[int]) -> int:
    """Use ``n`` torch threads from now on; None or 0 keeps torch's current setting.

    Returns the number of threads in use afterwards. A negative ``n`` is a ValueError.
    """
    if n:
        if n < 0:
            raise ValueError(f"threads: must be a positive number, got {n}")
        torch.set_num_threads(int(n))
    return torch.get_num_threads()


@contextmanager
def threads(n: Optional[int]) -> Iterator[int]:
    """Run the block with ``n`` torch threads (None or 0: unchanged), then restore the previous
    number, also when the block raises. Yields the number in use inside the block."""
    before = torch.get_num_threads()
    try:
        yield set_threads(n)
    finally:
        torch.set_num_threads(before)
