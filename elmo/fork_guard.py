"""One torch thread in each forked child: registered by ``import elmo``, which imports no
torch itself (the package's names load when first used), so this module does not either."""
from __future__ import annotations

import functools
import os
import sys


def _one_thread_in_a_forked_child() -> None:
    """After ``fork``, torch runs on one thread in the child.

    PyTorch's CPU build runs its parallel operations on GNU OpenMP, whose thread pool does not
    survive ``fork``: once the parent has run a parallel operation, the child's first one waits
    forever for threads it does not have. A ``multiprocessing`` pool (fork is Linux's default
    start method) or spaCy's ``nlp.pipe(n_process=2)`` over a loaded model hung that way. One
    thread in each child is what PyTorch's own DataLoader workers use; a child may set more
    with :func:`elmo.runtime.set_threads` where its parent never ran parallel work. A parent
    that had not imported torch ran nothing on its threads: its child starts torch afresh."""
    if "torch" in sys.modules:
        from .runtime import set_threads   # (torch's thread count is set there only)
        set_threads(1)


@functools.lru_cache(maxsize=None)
def guard_forked_children() -> None:
    """Register :func:`_one_thread_in_a_forked_child` to run in every forked child (once a
    process; ``import elmo`` does it)."""
    if hasattr(os, "register_at_fork"):                 # (not on Windows, which does not fork)
        os.register_at_fork(after_in_child=_one_thread_in_a_forked_child)
