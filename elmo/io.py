"""Writing files safely: atomic writes and their temporaries, the one-line OS errors of a write.

* :func:`atomic_target` / :func:`atomic_commit` / :func:`atomic_write_text`: a file is written
  to a temporary name beside it and renamed over it when complete, so readers (and a killed
  run) see the old file or the new one, never a part. The temporary's name holds its writer's
  host and PID, so the next write of the same file deletes those that killed runs left.
  :func:`no_empty_folder_on_failure` removes the empty folders a failed command made.
* Replacing a whole folder so (a model, a report) is :mod:`elmo.folder_swap`, which uses
  :func:`fsync` (a file, or a folder's entries, flushed to the disk) from here.
* :func:`fitting_name`: the names derived from an output's (temporaries, ``OUTPUT.lock``,
  ``OUTPUT.parts``) fit the folder's name limit: a long name is cut, with a hash of it.
* :func:`refuse_bundled`: no output inside the folder of a model bundled with the package
  (``from_pretrained("default")`` for every program of the installation); every checker,
  lock and atomic writer applies it, so each command's outputs get it. Only
  :func:`shipping_into` (``python -m elmo.training.ship``) writes such a folder.
* :class:`OutputError` and :func:`os_error_reason`: one-line messages for a full disk, a
  read-only or missing folder, a directory where a file belongs.
* :func:`os_errors_naming`: an OSError that names no file (a full disk met by a temporary
  file) names the file or folder given.
* The checks of an output before any work (a directory in the way, an input about to be
  replaced, a write's OSError as one line) are :mod:`elmo.output_checks`; the lock on an output
  being written is :mod:`elmo.output_lock`; HDF5 files that survive a full disk are
  :mod:`elmo.hdf5_writer`. The reading of text files a user hands over (UTF-8, NUL bytes, line
  ends, JSON, TOML) is :mod:`elmo.text_files`.
"""
from __future__ import annotations

import errno
import functools
import glob
import hashlib
import os
import re
import shutil
import socket
import tempfile
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from pathlib import Path
from typing import Dict, Iterator, Optional, TextIO


class OutputError(OSError):
    """An output that cannot be written (a directory in the way, no permission, a full disk, or
    another process writing it); the message names the path and the reason in one line."""


class OutputBusy(OutputError):
    """Another live process is writing the same output (it holds the output's lock file).
    ``who``: the message without its advice ("OUTPUT is already being written by PID 123 on
    HOST (lock file FILE)"), for a caller that waits for the writer instead of stopping."""

    who: str = ""


#: The errnos of a write that found no room: a full disk, a full quota, a file-size limit.
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


#: numpy's error of a write that was cut short (``tofile``, ``np.save`` to a path), which drops the errno.
_SHORT_WRITE = re.compile(r"(\d+) requested and (\d+) written")


def found_no_room(e: OSError) -> bool:
    """Whether ``e`` is a write that found no room (:data:`NO_ROOM`), numpy's short write
    among them: its errno is lost, and a full disk was advised to be "a writable folder"."""
    return e.errno in NO_ROOM or (not e.errno and _SHORT_WRITE.fullmatch(str(e).strip()) is not None)


def os_error_reason(e: OSError) -> str:
    """The short reason of an OSError, one line: ``No space left on device`` rather than h5py's
    multi-line report with buffer addresses."""
    if e.errno:
        return os.strerror(e.errno)
    text = str(e).strip()
    short = _SHORT_WRITE.fullmatch(text)   # numpy's tofile, which drops the errno
    if short:
        return f"only {int(short[2]):,} of {int(short[1]):,} bytes were written (is the disk full?)"
    return text.splitlines()[0] if text else type(e).__name__


# ---------------------------------------------------------------------- derived names
#: The longest file name, in bytes, where a folder's file system does not say (most allow 255).
NAME_MAX = 255
#: The bytes a PID takes in a derived name, at most (Linux's are up to 7 digits): a fixed room,
#: so that every process shortens an output's derived names alike.
_PID_ROOM = 10


def name_limit(folder: Path) -> int:
    """The most bytes a file name may have in ``folder`` (in the nearest folder above it that
    exists, where it does not yet): ``PC_NAME_MAX``, else :data:`NAME_MAX`."""
    for known in (folder, *folder.parents):
        try:
            limit = os.pathconf(known, "PC_NAME_MAX")
        except (FileNotFoundError, NotADirectoryError):
            continue
        except (OSError, ValueError, AttributeError):   # (no pathconf, or the system does not say)
            break
        return limit if limit > 0 else NAME_MAX
    return NAME_MAX


def fitting_name(path: Path, suffix: str, room: int = 0) -> str:
    """The name of a file derived from ``path`` (its temporary, its lock file): ``NAME+suffix``
    where that leaves ``room`` bytes (for a PID, a random part put after it) within the folder's
    name limit; else the start of NAME (whole characters, counted in UTF-8 bytes), ``~`` and 16
    hex digits of NAME's SHA-256, then ``suffix``. The same output always gets the same derived
    names: a second writer finds the lock file, the next writer a killed one's temporaries.
    A name of 246-255 bytes is legal, and the write failed with "File name too long" naming a
    temporary the user never typed. Raises :class:`OutputError` where NAME itself is too long."""
    name = path.name
    limit = name_limit(path.parent)
    size = len(os.fsencode(name))
    if size > limit:
        raise OutputError(f"{path}: the file name is {size} bytes long, and {path.parent} takes names "
                          f"of at most {limit} bytes; give a shorter name")
    if size + len(os.fsencode(suffix)) + room <= limit:
        return name + suffix
    mark = "~" + hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    keep, head = limit - room - len(os.fsencode(suffix)) - len(mark), ""
    for char in name:   # (whole characters: a name cut inside one is no valid UTF-8)
        keep -= len(os.fsencode(char))
        if keep < 0:
            break
        head += char
    return head + mark + suffix


# ---------------------------------------------------------------------- atomic writes
#: This host's name as it appears in temporary file names (letters, digits, ``_`` and ``-``).
_HOST = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:40] or "host"


def _temporary_prefix(path: Path, suffix: str) -> str:
    """The start of the names of :func:`atomic_target`'s (``suffix`` ``.tmp``) and
    :func:`temporary_folder`'s temporaries for ``path``: ``.NAME.HOST-``, NAME shortened
    (:func:`fitting_name`) to leave room for the PID, ``-``, mkstemp's 8 random characters,
    ``suffix`` and a ``.lock`` (a temporary folder's lock file: :func:`remove_dead_temporaries`)."""
    return "." + fitting_name(path, f".{_HOST}-", room=1 + _PID_ROOM + 1 + 8 + len(suffix) + len(".lock"))


def write_target(path: Path) -> Path:
    """The file that a write to ``path`` replaces: ``path``, or for a symbolic link the file it
    names (through every link, relative ones from the link's folder). The link stays and
    names the new file; replaced itself, it became a plain file and its target was left stale."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


def atomic_target(path: Path) -> Path:
    """A fresh temporary file beside ``path`` (beside the file it names, for a symbolic link:
    :func:`write_target`): write it, then :func:`atomic_commit` it.

    Its name, ``.NAME.HOST-PID-RANDOM.tmp`` (NAME shortened where long: :func:`fitting_name`),
    says which process writes it: the temporaries
    that killed runs on this host left for ``path`` (a checkpoint's can be hundreds of MB)
    are deleted here, and a live writer's never are."""
    refuse_bundled(path)
    refuse_special(path)
    path = write_target(path)
    prefix = _temporary_prefix(path, ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_temporaries(path)
        fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}-", suffix=".tmp", dir=path.parent)
    except OSError as e:  # (mkstemp's message names the temporary, not the user's path)
        raise OutputError(f"{path}: cannot write in {path.parent}: {os_error_reason(e)}") from None
    os.close(fd)
    return Path(tmp)


def refuse_special(path: Path) -> None:
    """Refuse a path taken by something that is neither a file nor a folder: renaming a new
    file onto ``/dev/full`` or a named pipe would replace the device or the pipe itself."""
    if path.exists() and not path.is_file() and not path.is_dir():
        raise OutputError(f"{path}: is not a regular file (a device, a pipe or a socket); "
                          f"write the output to a file path")


def remove_dead_temporaries(path: Path, suffix: str = ".tmp") -> None:
    """Delete :func:`atomic_target`'s temporaries (or :func:`temporary_folder`'s, by their
    ``suffix``) for ``path`` whose process, on this host, has ended. Another host's (a shared
    file system) and unnamed ones are left: their writer may live."""
    prefix = _temporary_prefix(path, suffix)
    # (and the lock files beside them: a temporary folder written by save_pretrained, which
    # locks the folder it writes, keeps its TEMPORARY.lock when the process is killed)
    pattern = glob.escape(prefix) + "*" + glob.escape(suffix)
    for tmp in [*path.parent.glob(pattern), *path.parent.glob(pattern + ".lock")]:
        pid = tmp.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not process_alive(int(pid)):
            if tmp.is_dir() and not tmp.is_symlink():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                with suppress(OSError):
                    tmp.unlink()


def temporary_folder(path: Path, suffix: str) -> Path:
    """A fresh folder beside ``path`` (``.NAME.HOST-PID-RANDOM{suffix}``) to write files in
    before they move to ``path``; those that killed runs left for ``path`` are deleted here."""
    refuse_bundled(path)
    remove_dead_temporaries(path, suffix)
    prefix = _temporary_prefix(path, suffix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", suffix=suffix, dir=path.parent))


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (one of another user counts as running)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def atomic_commit(tmp: Path, path: Path) -> None:
    """Move a finished temporary file onto ``path`` in one step, with the permissions an
    ordinary new file gets (temporary files are created readable by their owner only). A
    symbolic link ``path`` stays: the file it names is replaced (:func:`write_target`).

    The file's data reaches the disk before the rename, and the rename before this returns:
    otherwise a power cut soon after could leave ``path`` naming an empty or partial file
    (file systems may write the rename before delayed data), which a rerun would take as done.
    """
    give_ordinary_mode(tmp)
    # (a file system that finds the disk full only when the data is flushed fails here; the
    # bare "[Errno 28] No space left on device" named no file)
    with os_errors_naming(path):
        fsync(tmp)
    refuse_special(path)  # (it may have appeared while the file was written)
    path = write_target(path)
    try:
        os.replace(tmp, path)
    except OSError as e:
        if e.errno != errno.EXDEV:
            if not e.errno:
                raise
            # (a folder that must grow on a full disk: ENOSPC, which named the temporary; the
            # file meant is ``path``)
            raise OSError(e.errno, os.strerror(e.errno), str(path)) from None
        # A temporary staged in a folder of its own (ship's, a report's) and a link naming a
        # file on another file system: copied beside that file first, and renamed there.
        near = atomic_target(path)
        try:
            shutil.copyfile(tmp, near)
            atomic_commit(near, path)
        finally:
            near.unlink(missing_ok=True)
        tmp.unlink()
        return
    fsync(path.parent, folder=True)


def give_ordinary_mode(path: Path) -> None:
    """Give ``path`` the permissions an ordinary new file (or folder) gets under the umask:
    temporaries (``mkstemp``'s, ``mkdtemp``'s) are made for their owner only, and kept that
    mode when renamed into place."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~umask)


def fsync(path: Path, folder: bool = False) -> None:
    """Flush ``path`` (a file, or a folder's entries) to the disk. A folder that cannot be
    opened or synced (some network and FUSE file systems) is left to the file system."""
    try:
        fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if folder else 0))
    except OSError:
        if folder:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as e:
        if not folder or e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write a text file so that readers see the old or the new content, never a part."""
    with atomic_text_file(path) as f:
        f.write(text)


@contextmanager
def atomic_text_file(path: str | Path) -> Iterator[TextIO]:
    """A text file (UTF-8) to write ``path`` in parts: the block writes into a temporary beside
    ``path``, committed (:func:`atomic_commit`) when the block ends without an error; an error
    deletes it, so readers see the old file or the whole new one, never a part. An OSError in
    the block that names no file (a full disk) is given ``path``'s name."""
    path = Path(path)
    tmp = atomic_target(path)
    try:
        with os_errors_naming(path):
            with open(tmp, "w", encoding="utf-8") as f:
                yield f
            atomic_commit(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def copy_file(source: Path, path: Path) -> None:
    """Copy ``source`` onto ``path`` atomically (readers see the old or the whole new file)."""
    tmp = atomic_target(path)
    try:
        with os_errors_naming(path):
            shutil.copyfile(source, tmp)
            atomic_commit(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def os_errors_naming(path: str | Path) -> Iterator[None]:
    """Give a plain OSError of the block that names no file (``e.filename`` None) ``path``:
    a write to a temporary file (whose name the user never saw, and which is deleted anyway)
    that met a full disk read "[Errno 28] No space left on device", naming no file. Give the
    file (or folder) the user would know: the output, or the folder that is full::

        with os_errors_naming(output):
            tmp.write(text)      # OSError: [Errno 28] No space left on device: 'OUTPUT'

    An OSError subclass (FileNotFoundError, ...) or one that names its file passes as is."""
    try:
        yield
    except OSError as e:
        if type(e) is OSError and e.errno and e.filename is None:
            raise OSError(e.errno, os.strerror(e.errno), str(path)) from None
        raise


@contextmanager
def no_empty_folder_on_failure(folder: Path) -> Iterator[None]:
    """Run a block that writes into ``folder`` and may create it (and the folders above it).
    If the block fails, the folders it created that hold no file are removed again: a failed
    command left an empty output or run folder behind, to be taken for one that had begun.
    A folder that existed before the block is kept, and so is every file; and nothing is
    removed when the block is refused as :class:`OutputBusy` (the folders are another's)."""
    folder = Path(folder)
    new = [p for p in (folder, *folder.parents) if not os.path.lexists(p)]   # (deepest first)
    try:
        yield
    except OutputBusy:
        # Another process writes there: it made the folders since (between this block's start
        # and its lock), and its empty ones are its work in progress (an analysis's picture
        # folder, an embedding's OUTPUT.parts), which the refused second writer deleted under it.
        raise
    except BaseException:
        if new:
            _remove_empty_folders(new[-1])
        raise


def _remove_empty_folders(top: Path) -> None:
    """Remove ``top`` and the folders below it that hold no file (after their empty ones go)."""
    if top.is_symlink() or not top.is_dir():
        return
    for folder, _, _ in os.walk(top, topdown=False):   # (links to folders are not followed)
        with suppress(OSError):   # not empty: kept
            os.rmdir(folder)


def process_temporary(path: Path) -> Path:
    """This process's temporary name for ``path``: ``.NAME.tmp-PID`` in the same folder (that
    of the file a symbolic link names: :func:`write_target`).

    Only the holder of ``path``'s lock may delete such files (:func:`remove_temporaries`).
    """
    path = write_target(path)
    return path.with_name(f"{_process_prefix(path)}{os.getpid()}")


def _process_prefix(path: Path) -> str:
    """``.NAME.tmp-``, NAME shortened (:func:`fitting_name`) to leave room for a PID."""
    return "." + fitting_name(path, ".tmp-", room=1 + _PID_ROOM)


def remove_temporaries(path: Path) -> None:
    """Delete the temporary files that killed runs left for ``path``. Call it only while holding
    ``path``'s lock (:func:`elmo.output_lock.output_lock`): a live writer's file is then never among them."""
    # (the name escaped: "out[12].h5" matched, and deleted, the live temporary files of
    # out1.h5 and out2.h5, whose locks it does not hold, and left its own)
    path = write_target(path)
    prefix = _process_prefix(path)
    for tmp in path.parent.glob(glob.escape(prefix) + "*"):
        if tmp.name[len(prefix):].isdigit():   # (a PID: not ".NAME.tmp-1.h5.tmp-2", another's)
            tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------------- the bundled models' folders
#: The bundled model's folder (resolved) that the running ship may write: :func:`shipping_into`.
_SHIPPING: ContextVar[Optional[str]] = ContextVar("elmo_io_shipping", default=None)


@functools.lru_cache(maxsize=1)
def bundled_folders() -> Dict[str, Path]:
    """The folder of each model bundled with the package (``elmo.BUNDLED_MODELS``), by name.
    Found once: every output check, lock and atomic write asks (the package does not move)."""
    from . import BUNDLED_MODELS, which_model

    named = {name: which_model(name, warn=False).path for name in BUNDLED_MODELS}
    return {name: path for name, path in named.items() if path is not None}


def refuse_bundled(path: Path, what: str = "output", *, replaces: bool = False) -> None:
    """Refuse an output ``path`` in (or that is) the folder of a model bundled with the package;
    with ``replaces`` (a folder written whole, replacing what was there) also one that holds it.

    Written there, a file replaced or shadowed ``from_pretrained("default")`` for every program
    of the installation, without a word (a vocabulary, an embedding file, a converted model).
    Paths are compared as the files they name (through links and ``..``). Shipping the bundled
    model itself (:func:`shipping_into`) is the one writer let through."""
    where = os.path.realpath(path)
    for name, folder in bundled_folders().items():
        bundled = os.path.realpath(folder)
        if bundled == _SHIPPING.get():
            continue
        inside = os.path.commonpath([where, bundled]) == bundled
        if inside or (replaces and os.path.commonpath([where, bundled]) == where):
            how = "is inside the folder of" if inside else "holds the folder of"
            raise OutputError(f"{path}: {how} the bundled model {name!r} (in the package, read by "
                              f"from_pretrained({name!r})); write the {what} elsewhere")


@contextmanager
def shipping_into(folder: Path) -> Iterator[None]:
    """Let the block write ``folder`` where it is a bundled model's folder: how a maintainer ships
    that model (``python -m elmo.training.ship SRC elmo/resources/default``). For ship's own code
    path only; no command offers it. Another bundled model's folder stays refused, and so does a
    folder inside one."""
    token = _SHIPPING.set(os.path.realpath(folder))
    try:
        yield
    finally:
        _SHIPPING.reset(token)
