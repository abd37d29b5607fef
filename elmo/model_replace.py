"""Saving a model into a folder that already holds files: the whole new folder or the old one.

:func:`elmo.save_pretrained` writes two to four files (weights, options, an ELMoForManyLangs
model's dictionaries) and updates the SHA-256 record of the folder's ``metadata.json``. Written
one by one into the folder, a process killed between two of them left one model's weights
beside another's options or record: the next load refused the folder as damaged, or loaded a
model that was never saved. :func:`replacing_model_folder` writes them into a new folder beside
it instead (:func:`elmo.folder_swap.atomic_folder`), which gets the old folder's other entries
(a model card, notes, task models below it: :func:`elmo.folder_swap.keep_other_entries`) and
the updated record, and then takes the old folder's place in one step.

:func:`swappable` says where that cannot be done (a mount point, a folder another user holds
in a sticky folder, ...): :func:`elmo.save_pretrained` then writes the files in place, as
before; a kill between the weights and their options is named by the next load (the weights
record the digest of their options), and their SHA-256 entries are out of the record meanwhile
(:func:`elmo.folder_checksums.replacing_recorded`). A dictionary model's new dictionaries
beside its old weights (killed after the dictionaries, of the same sizes) are not named there.
"""
from __future__ import annotations

import os
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Iterable, Iterator

from .folder_checksums import METADATA_NAME, RECORD_LOCK_WAIT, update_record
from .folder_swap import (atomic_folder, copy_owner, keep_other_entries, mounts_below, partial_folder,
                          renames_stop_at, sticky_holds)
from .io import refuse_bundled, remove_dead_temporaries
from .output_lock import lock_path, output_lock


def swappable(folder: Path) -> bool:
    """Whether the existing ``folder`` can be replaced by a new folder made beside it: the
    folder above takes new entries, lets this process rename ``folder`` (no sticky folder of
    another's, as /tmp), is on the same mount (``folder`` is no mount point) and holds no
    bundled model; no mount point lies inside ``folder`` (its files would be copied, then
    deleted with the old folder); ``FOLDER.partial`` is free or a folder (what a killed
    writer left)."""
    real = folder.resolve()
    partial = partial_folder(real)
    if not os.access(real.parent, os.W_OK | os.X_OK) or sticky_holds(real):
        return False
    if os.path.lexists(partial) and (partial.is_symlink() or not partial.is_dir()):
        return False
    try:
        refuse_bundled(real, replaces=True)
        return not renames_stop_at(real) and not mounts_below(real)
    except OSError:   # (OutputError too: the bundled model's folder is inside it)
        return False


@contextmanager
def replacing_model_folder(folder: Path, names: Iterable[str]) -> Iterator[Path]:
    """The folder to write the model files ``names`` in; once the block ends without an error
    it gets ``folder``'s other entries and, where ``folder``'s ``metadata.json`` records its
    files' SHA-256, that record with the new files' digests, and takes ``folder``'s place
    (a link to a folder stays, the folder it names is replaced). A kill or an error at any point
    leaves ``folder`` as it was, or whole and new; the next writer removes what was left beside
    it. The caller holds the folder's lock (``FOLDER.lock``, beside it) and has checked it
    :func:`swappable`; the record's own lock is held here, as :func:`update_record` holds it.

    A process working in ``folder`` (this one) is moved into the new folder: it stayed in
    the old one, deleted."""
    names = tuple(names)
    real = folder.resolve()
    here = _working_folder()
    for name in names:   # (a killed in-place save's: else carried into the new folder)
        remove_dead_temporaries(real / name)
    # (an update of the record meanwhile, by save_original of other files here, was lost)
    with output_lock(real / METADATA_NAME, wait=RECORD_LOCK_WAIT):
        with atomic_folder(real) as stage:
            copy_owner(real, stage)   # (the folder stays its owner's, with its mode)
            yield stage
            keep_other_entries(real, stage)
            for lock in (lock_path(real / n) for n in (METADATA_NAME, *names)):
                # (the locks this save holds: no file of the model, and a copy would outlive them)
                (stage / lock.name).unlink(missing_ok=True)
            update_record(stage / n for n in names)
    if here is not None and (here == real or real in here.parents):
        with suppress(OSError):
            os.chdir(here)


def _working_folder() -> Path | None:
    try:
        return Path(os.getcwd())
    except OSError:   # (its folder deleted already)
        return None

