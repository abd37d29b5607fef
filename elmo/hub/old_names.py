"""The model cache's own files under the names they had before a ``+`` marked them.

Beside a cached file ``NAME`` the cache kept ``NAME.lock``, ``NAME.part``, ``NAME.part.json``
and ``.NAME.staging/``; beside an unpacked folder ``DEST``: ``DEST.lock``, ``DEST.sha256``,
``DEST.partial/`` (with unpack's ``.DEST.partial.XXXXXXXX.tmp/``) and, older still,
``DEST.unpacking``. They are now ``NAME+.lock`` and so on (:func:`~.cache_entry.helper_file`), and
the old ones were orphaned: a download cut under the old names started over from zero, and its
bytes stayed in the cache for good.

Each old name is also the cached name of a URL ending so (``/m/elmo.part``), so a file is taken
for an old helper only when the cache never fetched that name as a URL's file (no lock of its
own, old or new, is beside it), and only while this process holds the old lock ``NAME.lock``
(an older version of the package downloading ``NAME`` holds it, and its files are then left
alone). An old part that is provably of the same download (the version of the file it began
with is recorded, or the download is pinned) becomes the new part and is resumed; any other
old helper file is removed. Callers hold the new lock (``NAME+.lock``) throughout.
"""
from __future__ import annotations

import json
import re
import shutil
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Callable, Iterator, List

from .cache_entry import helper_file

def old_file(dest: Path, suffix: str) -> Path:
    """``NAME.SUFFIX``, the old name of ``dest``'s helper file ``suffix``."""
    return dest.with_name(dest.name + suffix)


def _fetched_as_url(path: Path) -> bool:
    """Whether ``path`` was ever fetched as a URL's own file or folder: a lock of its own (old
    or new name) lies beside it. Every fetch takes one, and lock files are never deleted."""
    return helper_file(path, ".lock").exists() or old_file(path, ".lock").exists()


def _own(path: Path) -> bool:
    """Whether ``path`` is a plain file that no URL owns (an old helper file, if anything)."""
    return path.is_file() and not path.is_symlink() and not _fetched_as_url(path)


def left_beside(dest: Path) -> bool:
    """Whether old helper files may lie beside ``dest`` (a cached file or an unpacked folder):
    the old lock that every download of an older version made is there. A cheap look, for each
    load from the cache; the first load that finds it tidies, and later ones find none."""
    lock = old_file(dest, ".lock")
    try:
        return lock.stat().st_size == 0 and lock.is_file() and not _fetched_as_url(lock)
    except OSError:
        return False


def _old_staging(dest: Path) -> Path:
    return dest.with_name(f".{dest.name}.staging")


@contextmanager
def _holding_old_lock(dest: Path) -> Iterator[bool]:
    """Hold ``dest``'s old lock ``NAME.lock`` if it is an old lock (empty, no URL's file) and no
    process holds it; yields whether it does. The lock file is removed before it is released:
    only an older version of the package takes it, and a process of it that opened the file
    meanwhile finds it deleted and makes a new one (filelock checks)."""
    from filelock import FileLock, Timeout

    path = old_file(dest, ".lock")
    lock = FileLock(str(path))
    try:
        # (an old lock is empty: truncating it, as taking it does, loses nothing)
        held = _own(path) and path.stat().st_size == 0
        if held:
            lock.acquire(timeout=0)
    except (Timeout, OSError):
        held = False
    if not held:
        yield False
        return
    try:
        yield True
        with suppress(OSError):     # (a system that cannot delete an open file keeps it)
            path.unlink(missing_ok=True)
    finally:
        lock.release()


def _old_validator(meta: Path) -> bool:
    """Whether ``meta`` is what the old code wrote for a part: ``{"validator": "..."}``."""
    try:
        record = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and list(record) == ["validator"] and isinstance(record["validator"], str)


def tidy_file(dest: Path, pinned: bool, log: Callable[[str], None]) -> None:
    """Adopt or remove the old helper files of the cached file ``dest`` (its new lock held).

    An old ``NAME.part`` becomes ``NAME+.part`` (with ``NAME.part.json``, the version it began
    with) where no new part exists, ``dest`` is not cached yet, and the part can be resumed:
    its version is recorded, or ``pinned`` (the SHA-256 checks the result); the server's
    ``If-Range`` answer then confirms it is still that file. Otherwise it is removed."""
    with suppress(OSError):     # (best effort: what cannot be tidied stays, as it was)
        _tidy_file(dest, pinned, log)


def _tidy_file(dest: Path, pinned: bool, log: Callable[[str], None]) -> None:
    part, meta, staging = old_file(dest, ".part"), old_file(dest, ".part.json"), _old_staging(dest)
    with _holding_old_lock(dest) as held:
        if not held:
            return
        new_part = helper_file(dest, ".part")
        if (_own(part) and not dest.exists() and not new_part.exists()
                and (pinned or (_own(meta) and _old_validator(meta)))):
            if _own(meta) and _old_validator(meta):
                meta.replace(helper_file(dest, ".part.json"))
            else:
                helper_file(dest, ".part.json").unlink(missing_ok=True)
            part.replace(new_part)
            log(f"{dest}: resuming from the {new_part.stat().st_size:,} bytes an earlier version "
                f"left in {part.name}")
        for path in (part, meta):
            if _own(path) and (path is part or _old_validator(path)):
                path.unlink()
        if _old_staging_folder(staging, dest):
            shutil.rmtree(staging, ignore_errors=True)


def _old_staging_folder(staging: Path, dest: Path) -> bool:
    """Whether ``staging`` is the old code's folder for ``dest``'s download: a folder (not a
    URL's) holding only plain files, each ``NAME.download`` or one of pooch's ``tmpXXXXXXXX``."""
    if not staging.is_dir() or staging.is_symlink() or _fetched_as_url(staging):
        return False
    entries = list(staging.iterdir())
    return all(p.is_file() and not p.is_symlink()
               and (p.name == dest.name + ".download" or re.fullmatch(r"tmp[a-z0-9_]{8}", p.name))
               for p in entries)


def old_digest(dest: Path) -> Path:
    """``DEST.sha256``, the old name of an unpacked folder's archive digest."""
    return old_file(dest, ".sha256")


def is_old_digest(path: Path) -> bool:
    """Whether ``path`` is an old digest file: a plain file of one SHA-256 in hex (in the
    unpacked cache a URL's entry is a folder, never such a file)."""
    try:
        return (path.is_file() and not path.is_symlink() and path.stat().st_size <= 80
                and re.fullmatch(r"[0-9a-f]{64}\s*", path.read_text(encoding="ascii")) is not None)
    except (OSError, ValueError):
        return False


def _unpack_temporaries(dest: Path, stage: str) -> List[Path]:
    """unpack's temporary folders for the staging folder ``DEST{stage}``:
    ``.DEST{stage}.XXXXXXXX.tmp`` (mkdtemp's 8 characters; a looser pattern matched another
    URL's live folder: ``.a.zip.partial.*.tmp`` is also ``.a.zip.partial.zip.partial.*.tmp``)."""
    pattern = re.compile(re.escape(f".{dest.name}{stage}.") + r"[a-z0-9_]{8}\.tmp")
    try:
        return [p for p in dest.parent.iterdir() if pattern.fullmatch(p.name)]
    except OSError:
        return []


def remove_unpack_temporaries(dest: Path, stage: str) -> None:
    """Remove what a killed unpack into ``DEST{stage}`` left (its new lock held)."""
    for tmp in _unpack_temporaries(dest, stage):
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)


def tidy_folder(dest: Path, digest: Path) -> None:
    """Adopt or remove the old helper files of the unpacked folder ``dest`` (its new lock held):
    ``DEST.sha256`` becomes ``digest`` where that is missing; the old lock and what a killed
    run of the old code left (``DEST.partial``, ``DEST.unpacking`` and their temporaries) go."""
    with suppress(OSError):     # (best effort: what cannot be tidied stays, as it was)
        _tidy_folder(dest, digest)


def _tidy_folder(dest: Path, digest: Path) -> None:
    with _holding_old_lock(dest) as held:
        if not held:
            return
        old = old_digest(dest)
        if is_old_digest(old) and not _fetched_as_url(old):
            if dest.is_dir() and not digest.exists():
                old.replace(digest)
            else:
                old.unlink()
        for stage in (".partial", ".unpacking"):
            folder = old_file(dest, stage)
            if folder.is_dir() and not folder.is_symlink() and not _fetched_as_url(folder):
                shutil.rmtree(folder, ignore_errors=True)
            remove_unpack_temporaries(dest, stage)
