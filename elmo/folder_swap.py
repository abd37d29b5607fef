"""Replacing a whole folder: a model, a report, a cached index written whole or not at all.

* :func:`atomic_folder`: the caller's block writes the new files into ``FOLDER.partial``
  (:func:`partial_folder`), which then takes ``folder``'s place. A reader finds the old folder
  or the whole new one, never none, a half-written one or a half-deleted one.
* How the two change places: on Linux they swap in one step (``renameat2`` with
  ``RENAME_EXCHANGE``, :func:`_exchange`) and the old one, now beside, is deleted. Where the
  system or file system cannot (another system, NFS), :func:`_replace_by_renames` renames the
  old folder aside to ``FOLDER.replaced`` (:func:`set_aside_folder`), the new one into its
  name, and deletes the old one. A folder not there yet is the new one renamed into its name.
* What a kill leaves: while the block writes, the old folder as it was and an unfinished
  ``FOLDER.partial``, which the next writer deletes; after the swap, the new folder in place
  and the old one as ``FOLDER.partial``, likewise deleted; in the fallback's two renames, the
  old folder aside, which :func:`finish_replace` (called by the next writer) puts back where
  the folder is missing and deletes where the new one is in place. What cannot be deleted is
  one :class:`elmo.io.OutputError` naming it (:func:`remove_leftover`), before the next write.
  The old folder set aside holds a mark (:data:`SET_ASIDE_MARK`), so that a folder of the
  user's named ``FOLDER.replaced`` is left alone: neither deleted nor renamed into FOLDER.
* The writer's lock: one writer at a time, holding a lock that is not inside the folder
  (``FOLDER.lock`` beside it: :func:`elmo.output_lock.output_lock` of the folder) from before
  :func:`finish_replace` until the old folder is deleted. A lock file inside goes aside with the
  old folder in the fallback's renames: a second writer then finds neither folder nor lock,
  puts the old folder back, and the first one's rename fails, its finished folder left as
  ``FOLDER.partial`` for the next writer to delete; and where the new folder gets a copy of it
  (no hard links: :func:`keep_other_entries`), the copy is unlocked.
* A new folder that keeps the old one's other files (:func:`keep_other_entries`, with their
  owner: :func:`copy_owner`), and the checks that refuse, before any work, a folder that cannot
  be swapped or whose copy would lose files: a mount point (:func:`renames_stop_at`,
  :func:`refuse_mounts_below`) or a sticky folder above it that is another's
  (:func:`sticky_holds`).
* :func:`naming_as`: an error naming a file in a staging folder names it where it was going.

Writing single files safely (atomic writes, their temporaries, one-line OS errors) is
:mod:`elmo.io`.
"""
from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import sys
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Callable, Iterator, List, Optional

from .io import OutputError, fitting_name, fsync, os_error_reason, os_errors_naming, refuse_bundled


@contextmanager
def atomic_folder(folder: Path, staging: Optional[Path] = None) -> Iterator[Path]:
    """Write a folder whole or not at all: the block writes its files into the yielded
    ``FOLDER.partial`` (or ``staging``, a path beside the folder that the caller names, where
    ``FOLDER.partial`` may be another's: the model cache's), which then replaces ``folder``. A kill while writing leaves the earlier
    ``folder`` as it was (files of two versions side by side would load as one model); the next
    writer deletes the partial folder. On Linux the two folders swap in one step, so a reader
    finds the old folder or the new one, never none or a half-deleted one; elsewhere the old
    folder is renamed aside just before the new one is renamed (:func:`_replace_by_renames`).
    A symbolic link to a folder stays: the folder it names is replaced. The caller must be the
    folder's only writer, holding a lock beside the folder, not in it (``FOLDER.lock``: see the
    module's notes), until this returns."""
    refuse_bundled(folder, "folder", replaces=True)
    named = folder
    if folder.is_symlink() and folder.is_dir():
        # (the link could be neither swapped nor deleted with rmtree: the write ended in a bare
        # "Cannot call rmtree on a symbolic link", the new files left in LINK.partial)
        folder = folder.resolve()
    finish_replace(folder)   # (before the partial folder goes: a kill may have left the old one aside)
    tmp = staging if staging is not None else partial_folder(folder)
    # what a killed writer left there, or the old folder that a swap could not wholly delete
    if tmp.is_dir() and not tmp.is_symlink():
        remove_leftover(tmp, f"what an earlier write of {named} left")
    try:
        tmp.mkdir(parents=True)
        with naming_as(tmp, named):
            yield tmp
        for path in tmp.iterdir():   # on the disk before the folder takes the name (atomic_commit)
            if path.is_file():
                with os_errors_naming(named / path.name):   # (a failed flush named no file)
                    fsync(path)
        with os_errors_naming(named):
            fsync(tmp, folder=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)   # (a full disk: free what it took; the old folder stays)
        raise
    # The new folder takes the old one's place in one step, and the old one is deleted after:
    # deleting it first left, for a reader (predict, from_pretrained) or after a kill, no folder
    # or a half-deleted one (weights without their config) where a complete model belongs.
    if folder.is_dir() and not folder.is_symlink() and _exchange(tmp, folder):   # (a link: not swapped away)
        # (the old folder now: a kill here, or a file in it that cannot be deleted (another
        # user's), leaves it to the next writer, and the write that has succeeded stands)
        _remove_entry(tmp, ignore_errors=True)
    else:
        _replace_by_renames(tmp, folder)
    fsync(folder.parent, folder=True)


def renames_stop_at(folder: Path) -> bool:
    """Whether ``folder`` is a mount point (another file system, or a bind mount, even of the
    same one), so that nothing can be renamed between it and the folder above: tried with an
    empty file made in the folder above and renamed into ``folder`` (:func:`atomic_folder` swaps
    a folder with one made beside it, which ended in "Device or resource busy" there)."""
    fd, probe = tempfile.mkstemp(dir=folder.parent, prefix=".elmo-probe-")
    os.close(fd)
    inside = folder / Path(probe).name
    try:
        os.rename(probe, inside)
    except OSError as e:
        if e.errno == errno.EXDEV:
            return True
        raise
    finally:
        for path in (probe, inside):
            with suppress(OSError):
                os.unlink(path)
    return False


def sticky_holds(folder: Path) -> bool:
    """Whether the folder above ``folder`` has the sticky bit (as /tmp) and lets this process
    neither rename nor delete ``folder``: only the owner of one of the two, or root, may (a
    swap with a folder made beside it ended in "Operation not permitted")."""
    if not hasattr(os, "geteuid"):
        return False
    above, st = os.stat(folder.parent), os.stat(folder)
    return bool(above.st_mode & stat.S_ISVTX) and os.geteuid() not in (0, st.st_uid, above.st_uid)


def mounts_below(folder: Path) -> List[Path]:
    """The mount points inside ``folder``, at any depth (not ``folder`` itself): from Linux's
    ``/proc/self/mountinfo`` (bind mounts of the same file system too), elsewhere the folders of
    another device."""
    real = os.path.realpath(folder)
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            fields = [line.split(b" ")[4] for line in f if line.count(b" ") >= 4]
    except OSError:
        top, found = os.stat(real).st_dev, []
        for root, folders, _ in os.walk(real):
            for name in list(folders):
                if os.lstat(os.path.join(root, name)).st_dev != top:
                    found.append(Path(root, name))
                    folders.remove(name)
        return sorted(found)
    # (a space, a tab, a newline or a backslash in a mount point is written as \040, \011, ...)
    points = [os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), p)) for p in fields]
    inside = real.rstrip(os.sep) + os.sep
    return sorted({Path(p) for p in points if p.startswith(inside)})


def refuse_mounts_below(folder: Path, named: Optional[Path] = None) -> None:
    """Refuse a ``folder`` with a mount point inside it (:func:`mounts_below`) as one whose
    entries are carried into a new folder (:func:`keep_other_entries`): a mounted file system was
    copied whole into the new folder, and the deletion of the old one then deleted every file
    on it. ``named``: the folder the user gave (default ``folder``)."""
    mounts = mounts_below(folder)
    if mounts:
        raise OutputError(f"{mounts[0]}: is a mount point inside {named or folder}, whose files are carried "
                          f"into a new folder that replaces it; unmount it or move it out of the folder")


def set_aside_folder(folder: Path) -> Path:
    """``FOLDER.replaced``: where :func:`_replace_by_renames` puts the old ``folder`` while the
    new one takes its name (see :func:`finish_replace`)."""
    return folder.with_name(fitting_name(folder, ".replaced"))


#: The file that :func:`_replace_by_renames` puts in the old folder it set aside: what tells its
#: ``FOLDER.replaced`` from a folder of the user's of that name, which was deleted (or, where
#: FOLDER was missing, renamed into its place and written into) by every later write of FOLDER.
SET_ASIDE_MARK = ".elmo-set-aside"


def mark_set_aside(aside: Path) -> None:
    """Mark ``aside`` as an old folder that a swap set aside (:data:`SET_ASIDE_MARK`)."""
    (aside / SET_ASIDE_MARK).touch()


def _set_aside_by_a_swap(aside: Path) -> bool:
    """Whether ``aside`` is an old folder that :func:`_replace_by_renames` set aside (marked)."""
    return aside.is_dir() and not aside.is_symlink() and (aside / SET_ASIDE_MARK).is_file()


def _remove_set_aside(aside: Path, ignore_errors: bool = False) -> None:
    """Delete the old folder ``aside`` set aside, its mark last: a file in it that cannot be
    deleted (another user's) leaves it marked, for the next writer to name; a kill after the
    mark went leaves it empty (:func:`_remove_if_empty`)."""
    if not aside.is_dir() or aside.is_symlink():
        return
    for entry in list(aside.iterdir()):
        if entry.name != SET_ASIDE_MARK:
            _remove_entry(entry, ignore_errors)
    if any(entry.name != SET_ASIDE_MARK for entry in aside.iterdir()):   # (ignore_errors: what stays)
        return
    (aside / SET_ASIDE_MARK).unlink(missing_ok=True)
    _remove_if_empty(aside)


def _remove_if_empty(folder: Path) -> None:
    """Delete ``folder`` if it is an empty folder (nothing in it to lose: a set-aside folder a kill
    left without its mark, or anyone's), else leave it."""
    if folder.is_dir() and not folder.is_symlink():
        with suppress(OSError):   # (not empty)
            folder.rmdir()


def _replace_by_renames(new: Path, folder: Path) -> None:
    """Put the folder ``new`` in ``folder``'s place where the two cannot swap in one step (no
    ``renameat2``: another system, NFS): the old folder is renamed aside
    (:func:`set_aside_folder`) and marked, the new one renamed in, and the old one deleted.
    Deleting the old folder first left, after a kill before the rename, no folder and the whole
    new one as ``FOLDER.partial``, which the next writer deleted as unfinished: the files of the
    old folder that the new one had carried (a report's kept pictures, a user's own files) were
    lost. A folder of the user's at ``FOLDER.replaced`` (unmarked) is refused, not deleted."""
    aside = set_aside_folder(folder)
    if folder.is_dir() and not folder.is_symlink():   # (a file or a link there: refused by the rename, as before)
        if os.path.lexists(aside):   # (a killed writer's was dealt with by finish_replace)
            raise OutputError(f"{aside}: is in the way of {folder}'s old copy while the new one takes its place "
                              f"(this file system cannot swap two folders), and no write set it aside; "
                              f"move or rename it and run again (the new files are left in {new})")
        folder.rename(aside)
        mark_set_aside(aside)   # (a kill before this leaves it unmarked: the next writer refuses it)
    new.rename(folder)
    _remove_set_aside(aside, ignore_errors=True)   # (the new folder is in place: what stays goes next time)


def finish_replace(folder: Path) -> None:
    """Undo what a writer killed in :func:`_replace_by_renames` left: where ``folder`` (through
    a symbolic link, the folder it names) is missing and its old copy was set aside, the old copy
    goes back (the next write then replaces it again); an old copy beside a folder in place is
    what a kill while deleting it left, and goes (one that cannot be deleted is an
    :class:`OutputError` naming it, before the write). Call it under the folder's lock, which is
    beside the folder (a second writer between another's two renames put the old folder back
    and failed that writer's rename), and before anything makes ``folder`` anew."""
    folder = folder.resolve() if folder.is_symlink() else Path(os.path.abspath(folder))   # (``.``: no name)
    aside = set_aside_folder(folder)
    _remove_if_empty(aside)
    if not _set_aside_by_a_swap(aside):   # (none, or a folder or file of the user's: left alone)
        return
    if not os.path.lexists(folder):
        aside.rename(folder)
        (folder / SET_ASIDE_MARK).unlink(missing_ok=True)
        return
    remove_leftover(aside, f"the old copy of {folder} that an earlier write set aside", remove=_remove_set_aside)



@contextmanager
def writer_lock(folder: Path) -> Iterator[None]:
    """Hold the lock of ``folder``, a folder its writer replaces whole (``FOLDER.lock`` beside
    it: :func:`elmo.output_lock.output_lock`; a second writer is :class:`elmo.io.OutputBusy`),
    having first put back what a writer killed in a fallback swap left (:func:`finish_replace`):
    the caller's checks then look at the folder, not at its absence."""
    from .output_lock import output_lock
    with output_lock(folder, name=folder):
        finish_replace(folder)
        yield

def remove_leftover(path: Path, what: str, remove: Optional[Callable[[Path], None]] = None) -> None:
    """Delete ``path`` (a folder, a file or a link), ``what`` an earlier writer left, if it is
    there (with ``remove``, default :func:`_remove_entry`). One that cannot be deleted (a file
    another user owns) is an :class:`OutputError`: "PATH: WHAT cannot be deleted (why); remove
    it and run again" (the write that followed failed with a bare "File exists")."""
    try:
        (_remove_entry if remove is None else remove)(path)
    except OSError as e:
        if os.path.lexists(path):   # (else another process deleted it meanwhile)
            raise OutputError(f"{path}: {what} cannot be deleted ({os_error_reason(e)}); "
                              f"remove it and run again") from None


def _remove_entry(path: Path, ignore_errors: bool = False) -> None:
    """Delete ``path`` (a folder with what it holds, a file, or a link: not what it names) if it
    is there; with ``ignore_errors``, as much of it as can be."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=ignore_errors)
    elif os.path.lexists(path):
        try:
            path.unlink()
        except OSError:
            if not ignore_errors:
                raise


def partial_folder(folder: Path) -> Path:
    """``FOLDER.partial``, where :func:`atomic_folder` writes ``folder``'s new files (that of the
    folder a symbolic link names); a killed writer leaves it, for the next writer to delete."""
    if folder.is_symlink() and folder.is_dir():
        folder = folder.resolve()
    return folder.with_name(fitting_name(folder, ".partial"))


def keep_other_entries(old: Path, new: Path) -> None:
    """Give ``new`` (a folder about to replace ``old``: :func:`atomic_folder`) each entry of
    ``old`` it lacks: files as hard links (copies where the file system has none), folders
    likewise file by file, symbolic links as links. A copied folder or file keeps its owner and
    mode as far as this process may give them (:func:`copy_owner`). A mount point inside ``old``
    is refused (:func:`refuse_mounts_below`)."""
    refuse_mounts_below(old)
    def link_or_copy(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)
            copy_owner(Path(source), Path(target))

    for entry in old.iterdir():
        target = new / entry.name
        if os.path.lexists(target):
            continue   # written by the caller
        if entry.is_symlink():
            os.symlink(os.readlink(entry), target)
        elif entry.is_dir():
            shutil.copytree(entry, target, symlinks=True, copy_function=link_or_copy)
            for folder, _, _ in os.walk(target):   # (copytree gives each folder its mode, not its owner)
                copy_owner(entry / Path(folder).relative_to(target), Path(folder))
        else:
            link_or_copy(str(entry), str(target))


def copy_owner(source: Path, target: Path) -> None:
    """Give ``target`` (a copy of ``source``) ``source``'s owner, group and mode, as far as this
    process may: root gives both, another user the group where they are in it. A folder that
    root (``sudo``) copied was root's, and one of mode 700 then shut to its own user; one of
    another user's group lost that group (and its members their access)."""
    st = os.stat(source, follow_symlinks=False)
    now = os.stat(target, follow_symlinks=False)
    if (now.st_uid, now.st_gid) != (st.st_uid, st.st_gid):
        for uid in (st.st_uid, -1):
            try:
                os.chown(target, uid, st.st_gid, follow_symlinks=False)
                break
            except OSError:   # (not allowed: as it is)
                continue
    with suppress(OSError):   # (after chown, which may clear a set-group-ID bit)
        os.chmod(target, stat.S_IMODE(st.st_mode))


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux's ``renameat2`` with ``RENAME_EXCHANGE``);
    False where the system or file system cannot, and nothing was changed."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:   # (a C library older than glibc 2.28)
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


@contextmanager
def naming_as(stage: Path, final: Path) -> Iterator[None]:
    """A one-line :class:`OutputError` of the block that names a file in the temporary folder
    ``stage`` names it in ``final``, where it was going (the temporary folder is deleted); so
    does an OSError whose file is in ``stage`` (a copied model card that met a full disk
    named the deleted folder)."""
    try:
        yield
    except OutputError as e:
        if str(stage) not in str(e):
            raise
        error = OutputError(str(e).replace(str(stage), str(final)))
        error.errno = e.errno
        raise error from e
    except OSError as e:
        if not isinstance(e.filename, str) or not Path(e.filename).is_relative_to(stage):
            raise
        raise OSError(e.errno, e.strerror, str(final / Path(e.filename).relative_to(stage))) from e
