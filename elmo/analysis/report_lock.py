"""The lock an ``elmo analyze`` run (and ``--report-only``) holds on its report folder.

* :func:`report_lock`: ``OUT.lock`` beside the folder, held from before anything in it is
  touched until the new folder has been swapped in and the old one deleted; under it, the
  lock earlier versions held inside the folder, ``OUT/results.json.lock``, too: ``elmo
  experiment`` holds it in its results folder, and a run of an earlier version may still
  write there. It is not carried into the new folder (:func:`elmo.analysis.report.swap_in`).
  ``--report-only`` in a folder whose folder above cannot be written (where no run can swap
  it) holds the inside one only.
* Why beside and not inside: the run writes its report as a new folder and swaps it for OUT
  (:func:`elmo.analysis.report.swap_in`, :func:`elmo.folder_swap.atomic_folder`). A lock file
  inside OUT went with the old folder: without ``renameat2`` the old folder is renamed aside
  before the new one takes its name, and a second run meanwhile found neither OUT nor a lock,
  put the old folder back (:func:`elmo.folder_swap.finish_replace`), and the first run's rename
  then failed, its finished report left as ``OUT.partial`` for the next run to delete. Without
  hard links the lock file was copied into the new folder, unlocked, and a second run took it
  while the first deleted the old folder.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def report_lock(out: Path, swaps: bool = True) -> Iterator[None]:
    """Hold the report folder ``out``'s lock for the block: ``OUT.lock`` beside it
    (:func:`elmo.output_lock.output_lock`), which does not move while the folder is swapped;
    a second writer is refused (after a second's tries) with :class:`elmo.io.OutputBusy` naming
    the holder.
    Under it, what a run killed in its swap left is put back or deleted
    (:func:`elmo.folder_swap.finish_replace`: done before the lock, a second run put the old
    folder back while the first was between its two renames), and ``OUT/results.json.lock``
    (``results.json``'s) is taken: one that a killed run left is taken over and deleted,
    one that a live process holds (an earlier version's run, an experiment) refuses the run.
    Makes ``out`` where it is missing (the lock file in it makes it).

    ``swaps=False`` (``--report-only``, which writes inside ``out`` only): where the folder above
    cannot be written, only ``OUT/results.json.lock`` is held; no run can swap the folder there
    (each is refused here first), and the lock beside it cannot be made."""
    from ..folder_swap import writer_lock
    from ..io import OutputError
    from ..output_lock import output_lock

    parent = Path(out).resolve().parent   # (a link's: that of the folder it names, swapped there)
    if parent.is_dir() and not os.access(parent, os.W_OK | os.X_OK):
        if not swaps:
            with output_lock(out / "results.json", name=out):
                yield
            return
        # (the lock's own error, "cannot write in PARENT", did not say why the folder above)
        raise OutputError(f"{out}: the report is written whole beside it and then swapped in, but {parent} "
                          f"cannot be written (nor the lock file beside it); give --out a folder in a "
                          f"writable folder")
    with writer_lock(out), output_lock(out / "results.json", name=out):
        yield
