"""The SHA-256 of each file of a model folder, recorded in its ``metadata.json`` when the folder
is written and checked when the files are loaded.

A weight file damaged on disk (a flipped bit, a block of another file written over it) that
still parses as HDF5 gave other vectors without a word, and so did an edited ``vocab.txt`` or
``options.json``: :mod:`elmo.checksums` covers only the weights the package writes, and the
bundled default model's files predate it. So every model folder the package writes (``elmo
train``'s export, ``elmo finetune``, ``python -m elmo.training.ship``, ``elmo convert``) records
in ``metadata.json``, under :data:`RECORD_KEY`, each file it holds, name -> SHA-256 (its weights
and options in either layout, the softmax, the vocabulary and its counts, an ELMoForManyLangs
model's dictionaries; never ``metadata.json`` itself, nor a model card), and
:func:`elmo.save_pretrained` or :func:`elmo.save_original` over a recorded folder's files
updates their entries (:func:`update_record`). The bundled models' folders carry the record too.

Every load of such a folder hashes the files it reads and compares them with the record
(:func:`checked_reads`, :class:`LoadChecks`): a file that differs is one
:class:`ModelFileChanged` line naming it, which says how to get the model again or, for a file
edited on purpose, how to accept it (delete its entry from the record). A folder without a
record (the released AllenNLP files, runs exported before the record was kept) loads as
before, and so does a file the record does not name. One load reads each folder's
``metadata.json`` once, however many loaders it calls (a language model's biLM, softmax and
vocabulary), and again only where a file differs from it: a record replaced since (the folder
written whole during the load) makes that file one that changed while it was loaded.

A file is hashed once per process while its size, times and inode (its state) stay the same
(:data:`_VERIFIED`), so a program that loads a model many times pays once; a file whose times
were within :data:`RACY_NS` of the clock when it was hashed is hashed again at each check (a
write in the same tick of a coarse clock leaves its state as it was).

A loader opens a file again by path after it was hashed: a file renamed over it or rewritten
in place between the two gave bytes never checked. So once the load has read its files, each
must still have the state in which it was checked (a rename gives another inode, a write other
times), and one whose state was racy is hashed again; else the load is one
:class:`ModelFileChanged` line saying the file changed while it was loaded (not loaded again:
a writer at work on the folder, half-way through its files, is better waited for by the
caller). Not covered (the path is stat'ed, not the handle read through): a path that named
another file only while it was read, and the checked one again by the confirmation (two
renames, the checked file kept by another link meanwhile).
"""
from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from .weight_values import WeightFileError

#: The key of ``metadata.json`` that holds the record: an object, file name -> SHA-256 (hex).
RECORD_KEY = "files_sha256"
METADATA_NAME = "metadata.json"
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
#: Nanoseconds a file's mtime and ctime must lie before the clock, when it is hashed, for its
#: digest to be kept: file systems with times in whole seconds (ext3, HFS+, NFS) or two (FAT)
#: give a file rewritten in place within that tick the size, times and inode it had.
RACY_NS = 2_000_000_000
#: Seconds :func:`update_record` waits for another writer of the same ``metadata.json``.
RECORD_LOCK_WAIT = 60.0

#: What a file looked like when this process last hashed it: resolved path -> (size,
#: mtime_ns, ctime_ns, inode, device) and the SHA-256 it had then (a file not written in the
#: :data:`RACY_NS` before it was hashed).
_VERIFIED: Dict[str, Tuple[Tuple[int, ...], str]] = {}


class ModelFileChanged(WeightFileError):
    """A model file whose bytes are not those its folder's record says were written."""


def record_files(folder: Path, names: Iterable[str]) -> Dict[str, str]:
    """name -> SHA-256 of each of ``names`` that is a file in ``folder`` (sorted by name): the
    value a writer puts under :data:`RECORD_KEY` once the files are written."""
    from .hub.file_checks import sha256_file
    folder = Path(folder)
    return {name: sha256_file(folder / name) for name in sorted(set(names))
            if name != METADATA_NAME and (folder / name).is_file()}


def _read_metadata(folder: Path) -> Optional[dict]:
    """``folder``'s ``metadata.json``, None where it has none; a file that is not a JSON object
    is a :class:`WeightFileError` naming it."""
    import json
    from .text_files import read_json

    path = Path(folder) / METADATA_NAME
    if not path.is_file():
        return None
    meta = read_json(path, WeightFileError, expected="a model's metadata")
    if not isinstance(meta, dict):
        raise WeightFileError(f"{path}: expected a JSON object, got {json.dumps(meta)[:60]}")
    return meta


def read_record(folder: Path) -> Optional[Dict[str, str]]:
    """The record of ``folder``'s ``metadata.json``; None where it has no such file or the file
    no such key. A ``metadata.json`` that is not a JSON object, or a record that is not an
    object of the folder's file names (no path: not ``../x``, ``/x`` or ``a/b``) to SHA-256
    digests, is a :class:`WeightFileError` naming the file."""
    import json

    record = (_read_metadata(folder) or {}).get(RECORD_KEY)
    if record is None:
        return None
    # (a name with a separator, "..", or an absolute path named a file outside the folder,
    # which elmo info hashed and reported on)
    if not isinstance(record, dict) or not all(
            _plain_name(k) and isinstance(v, str) and _HEX_DIGEST.fullmatch(v) for k, v in record.items()):
        raise WeightFileError(f"{Path(folder) / METADATA_NAME}: '{RECORD_KEY}' must be an object of file "
                              f"names (in the folder, without a path) to SHA-256 digests (64 lowercase "
                              f"hex digits), got {json.dumps(record)[:80]}")
    return record


def _plain_name(name: str) -> bool:
    """Whether ``name`` names a file of the folder itself: no separator, not "." or ".."."""
    return name not in ("", ".", "..") and "\0" not in name and not any(
        sep in name for sep in (os.sep, os.altsep, "/") if sep)


def update_record(paths: Iterable[Path]) -> None:
    """Put the SHA-256 of ``paths`` (files just saved) into the record of their folder's
    ``metadata.json``, where it has one: a model saved over a recorded folder's files
    (:func:`elmo.save_pretrained`, :func:`elmo.save_original`) was refused at its next load as
    damaged. A folder without a record is left without one. One writer at a time reads and
    writes a record (it holds ``metadata.json.lock``, waiting :data:`RECORD_LOCK_WAIT` seconds)."""
    _edit_records(paths, lambda record, folder, names: {**record, **record_files(folder, names)})


def forget_recorded(paths: Iterable[Path]) -> None:
    """Take ``paths`` (files about to be replaced one by one) out of the record of their
    folder's ``metadata.json``, where it names them; :func:`update_record` puts them back once
    written. A save killed between its files (``save_original``'s two, which may lie in two
    folders) left new files beside their old SHA-256, and the next load called them damaged
    or edited; unrecorded, they load unchecked, and a pair of two saves is named by the
    options digest its weights record."""
    def without(record: Dict[str, str], folder: Path, names: List[str]) -> Optional[Dict[str, str]]:
        return None if not set(names) & set(record) else {k: v for k, v in record.items() if k not in names}
    _edit_records(paths, without)


@contextmanager
def replacing_recorded(paths: Iterable[Path]) -> Iterator[None]:
    """Replace the files ``paths`` in the block: their entries leave their folders' records
    first (:func:`forget_recorded`) and come back with the digests of what is there after it
    (:func:`update_record`), after an error too (a full disk: the old files, or a new one
    beside an old one, which the options digest names), unless that fails as well."""
    paths = [Path(p) for p in paths]
    forget_recorded(paths)
    try:
        yield
    except BaseException:
        with suppress(Exception):   # (the block's error is the one to see)
            update_record(paths)
        raise
    update_record(paths)


def _edit_records(paths: Iterable[Path], change) -> None:
    """Replace the record of each folder of ``paths`` (where it has one) with ``change(record,
    folder, names of its paths)``; None leaves it as it was."""
    from . import strict_json
    from .io import atomic_write_text
    from .output_lock import output_lock

    by_folder: Dict[Path, List[str]] = {}
    for path in map(Path, paths):
        by_folder.setdefault(path.parent, []).append(path.name)
    for folder, names in by_folder.items():
        if read_record(folder) is None:
            continue
        # one writer at a time reads and writes it: the files' own locks (save_original's) let
        # two writers of other files of one folder both read the record, and the second to
        # write it dropped the first's entries, whose files the next load refused as damaged
        with output_lock(folder / METADATA_NAME, wait=RECORD_LOCK_WAIT):
            record = change(read_record(folder) or {}, folder, names)
            if record is None:
                continue
            meta = _read_metadata(folder) or {}
            meta[RECORD_KEY] = dict(sorted(record.items()))
            atomic_write_text(folder / METADATA_NAME, strict_json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _file_state(path: Path) -> Tuple[int, ...]:
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def file_identity(path: Path) -> Optional[Tuple[int, ...]]:
    """Which file ``path`` names now, and its content's state: (size, mtime, inode, device); None
    where it names none. A loader that opens a file's path more than once compares it before
    and after (:func:`replaced_while_read`): a save's rename over the file meanwhile gives
    another. (Not the ctime of :func:`_file_state`: a new link to the file, or a chmod, changes
    it and leaves the bytes.)"""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


def replaced_while_read(path: Path) -> "ModelFileChanged":
    """The error of a loader that opened ``path`` more than once and found it another file the
    second time (:func:`file_identity`): what it read may be two files' (with or without a
    record of the folder's files)."""
    return ModelFileChanged(f"{path}: replaced while it was being read (a save meanwhile?); nothing was "
                            f"loaded: load it again once whatever writes it has finished")


def _hashed(path: Path) -> Tuple[str, Tuple[int, ...], bool]:
    """``path``'s SHA-256, the :func:`_file_state` it had when hashed (or when found unchanged
    since this process hashed it), and whether that state is racy: times within
    :data:`RACY_NS` of the clock, so that a rewrite in place may leave it as it was."""
    from .hub.file_checks import sha256_file
    key = os.path.realpath(path)
    now = time.time_ns()   # (before the stat: a later write's times are at most a tick before it)
    state = _file_state(path)
    seen = _VERIFIED.get(key)
    if seen is not None and seen[0] == state:
        return seen[1], state, False
    digest = sha256_file(path)
    racy = now - max(state[1], state[2]) <= RACY_NS
    if racy:   # (a later write in the same tick would look the same)
        _VERIFIED.pop(key, None)
    else:
        _VERIFIED[key] = (state, digest)
    return digest, state, racy


def current_sha256(path: Path) -> str:
    """``path``'s SHA-256, hashed again only where the file changed (size, times, inode) since
    this process last hashed it, or was written within :data:`RACY_NS` before that."""
    return _hashed(path)[0]


def _way_out(folder: Path, name: str) -> str:
    """How to get past a changed file ``name`` of ``folder``, in words."""
    from .io import bundled_folders
    if any(os.path.realpath(folder) == os.path.realpath(f) for f in bundled_folders().values()):
        return "the package's copy is damaged: reinstall the package"
    return (f"get the model again (download, export, ship or convert it again), or, if you changed "
            f"the file on purpose, delete \"{name}\" from '{RECORD_KEY}' in {folder / METADATA_NAME} "
            f"to load it unchecked")


class LoadChecks:
    """The checks of one load (which may read files through several loaders: a language
    model's biLM, softmax and vocabulary): each folder's record, read from its
    ``metadata.json`` once, and the state (:func:`_file_state`) in which each file was found
    to match it, which :meth:`confirm` compares with the file once the load has read it."""

    def __init__(self) -> None:
        self._records: Dict[Path, Optional[Dict[str, str]]] = {}
        #: path -> (its state when checked, whether that state was racy, its recorded SHA-256)
        self._checked: Dict[Path, Tuple[Tuple[int, ...], bool, str]] = {}

    def record(self, folder: Path) -> Optional[Dict[str, str]]:
        """:func:`read_record` of ``folder``, read once per load (:meth:`verify` reads it again
        only where a file differs from it: a record replaced meanwhile is a folder written
        during the load, not a damaged file)."""
        if folder not in self._records:
            self._records[folder] = read_record(folder)
        return self._records[folder]

    def verify(self, paths: Iterable[Path]) -> List[Path]:
        """Check each of ``paths`` against its folder's record: :func:`verify_files`."""
        checked: List[Path] = []
        for path in map(Path, paths):
            folder = path.parent
            recorded = (self.record(folder) or {}).get(path.name)
            if recorded is None or not path.is_file():
                continue   # (a missing file is the loader's to name)
            digest, state, racy = _hashed(path)
            if digest != recorded and read_record(folder) != self._records[folder]:
                # (the record this load read first was replaced meanwhile: the folder swapped
                # whole by a save or convert, not a damaged file to delete from the record)
                raise ModelFileChanged(
                    f"{path}: changed while it was being loaded ({folder / METADATA_NAME} was replaced "
                    f"after this load read it: the folder was written meanwhile); nothing was loaded: "
                    f"load it again once whatever writes it has finished")
            if digest != recorded:
                raise ModelFileChanged(
                    f"{path}: differs from the file that was written there (SHA-256 {digest[:16]}..., "
                    f"{folder / METADATA_NAME} records {recorded[:16]}...): it is damaged or was edited "
                    f"since; {_way_out(folder, path.name)}")
            self._checked[path] = (state, racy, recorded)
            checked.append(path)
        return checked

    def confirm(self, paths: Iterable[Path]) -> None:
        """After the load has read ``paths`` (checked by :meth:`verify`): each is still the file
        that was checked, else :class:`ModelFileChanged`. The bytes read were those hashed where
        the file kept its state (a rename over it gives another inode, a write other times),
        and where that state was racy (a write in the same tick keeps it) they are hashed again."""
        for path in paths:
            state, racy, recorded = self._checked[path]
            try:
                now = _file_state(path)
            except OSError:   # (deleted or renamed away since)
                now = None
            if now != state or (racy and current_sha256(path) != recorded):
                raise ModelFileChanged(
                    f"{path}: changed while it was being loaded (replaced or rewritten after its SHA-256 "
                    f"was checked against {path.parent / METADATA_NAME}); nothing was loaded: load it "
                    f"again once whatever writes it has finished")


#: The checks of the load in progress in this thread (or task): loaders nested in one load
#: (load_language_model's) share its records.
_LOAD: ContextVar[Optional[LoadChecks]] = ContextVar("elmo_model_load", default=None)


@contextmanager
def checked_reads(paths: Iterable[Path]) -> Iterator[List[Path]]:
    """Check ``paths`` (files the block reads) against their folders' records, run the block,
    and then confirm that what it read was what was checked (:meth:`LoadChecks.confirm`;
    hashed, then opened again by path, a file renamed over or rewritten between the two loaded
    bytes never checked). Gives the paths checked. An error of the block is raised as it is,
    unless a file changed meanwhile: then the change is (the error its parser raised chained).
    Nested in another (one load of several files' loaders), it reads no ``metadata.json`` the
    outer one has read."""
    checks = _LOAD.get()
    token = None
    if checks is None:
        checks = LoadChecks()
        token = _LOAD.set(checks)
    try:
        checked = checks.verify(paths)
        try:
            yield checked
        except Exception as error:
            # (a file swapped in mid-read that its parser refused was named by the parser's
            # complaint, as if damaged: the change is the cause to name; the parser's is chained)
            try:
                checks.confirm(checked)
            except ModelFileChanged as changed:
                raise changed from error
            raise
        checks.confirm(checked)
    finally:
        if token is not None:
            _LOAD.reset(token)


def verify_files(paths: Iterable[Path]) -> List[Path]:
    """Check each of ``paths`` (files a loader reads, in any folders) against the record of its
    folder's ``metadata.json``; the paths that the record names, all checked. A file whose
    SHA-256 is not the recorded one raises :class:`ModelFileChanged`, one line naming it; a
    file not recorded, or in a folder without a record, passes unchecked. (A loader reads
    them in :func:`checked_reads`, which also confirms that they did not change meanwhile.)"""
    return (_LOAD.get() or LoadChecks()).verify(paths)


def folder_report(folder: Path, model_names: Iterable[str]) -> Tuple[List[str], bool]:
    """Lines for ``elmo info`` saying which files of ``folder`` match its record, which differ
    (a line each, not raised: info describes a damaged folder too) or are missing (a loader
    that needs one names it), and which model files (of ``model_names``) it does not name; and
    whether no file differs."""
    record = read_record(folder)
    present = sorted(n for n in set(model_names) if n != METADATA_NAME and (folder / n).is_file())
    if record is None:
        return ([f"SHA-256: no '{RECORD_KEY}' record in {METADATA_NAME} (its files load unchecked)"]
                if present else []), True
    matching, differing, missing = [], [], []
    for name in sorted(record):
        path = folder / name
        if not path.is_file():
            missing.append(f"{name}: named by '{RECORD_KEY}' but missing")
        elif current_sha256(path) == record[name]:
            matching.append(name)
        else:
            differing.append(f"{name}: DIFFERS from its SHA-256 in {METADATA_NAME} (damaged or edited; "
                             f"its loads are refused)")
    head = f"SHA-256 verified against {METADATA_NAME} '{RECORD_KEY}': {', '.join(matching) or 'no file'}"
    unrecorded = [n for n in present if n not in record]
    tail = [f"not in '{RECORD_KEY}' (loaded unchecked): {', '.join(unrecorded)}"] if unrecorded else []
    return [head, *differing, *missing, *tail], not differing
