"""Writing files safely: atomic writes, the lock on an output being written, clear OS errors.

* :func:`atomic_target` / :func:`atomic_commit` / :func:`atomic_write_text`: a file is written
  to a temporary name beside it and renamed over it when complete, so readers (and a killed
  run) see the old file or the new one, never a part. The temporary's name holds its writer's
  host and PID, so the next write of the same file deletes those that killed runs left.
* :func:`fitting_name`: the names derived from an output's (temporaries, ``OUTPUT.lock``,
  ``OUTPUT.parts``) fit the folder's name limit: a long name is cut, with a hash of it.
* :func:`refuse_bundled`: no output inside the folder of a model bundled with the package
  (``from_pretrained("default")`` for every program of the installation); every checker,
  lock and atomic writer here applies it, so each command's outputs get it. Only
  :func:`shipping_into` (``python -m elmo.training.ship``) writes such a folder.
* :func:`output_lock`: while a process writes an output it holds ``OUTPUT.lock`` (a ``flock``
  through the ``filelock`` package, held by the kernel: a killed process releases it). The lock
  file holds the writer's PID and host, so a second writer is told who has it. The file is
  removed on release. :func:`writer_of` tells a reader who writes an output now.
* :class:`OutputError` and :func:`os_error_reason`: one-line messages for a full disk, a
  read-only or missing folder, a directory where a file belongs.
* :func:`os_errors_naming`: an OSError that names no file (a full disk met by a temporary
  file) names the file or folder given.
* The reading of text files a user hands over (UTF-8, NUL bytes, line ends, JSON, TOML)
  is :mod:`elmo.text_files`.
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
import sys
import tempfile
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, Optional, TextIO, Tuple


class OutputError(OSError):
    """An output that cannot be written (a directory in the way, no permission, a full disk, or
    another process writing it); the message names the path and the reason in one line."""


class OutputBusy(OutputError):
    """Another live process is writing the same output (it holds the output's lock file)."""


#: The errnos of a write that found no room: a full disk, a full quota, a file-size limit.
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def os_error_reason(e: OSError) -> str:
    """The short reason of an OSError, one line: ``No space left on device`` rather than h5py's
    multi-line report with buffer addresses."""
    if e.errno:
        return os.strerror(e.errno)
    text = str(e).strip()
    short = re.fullmatch(r"(\d+) requested and (\d+) written", text)   # numpy's tofile, which drops the errno
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
    _refuse_special(path)
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


def _refuse_special(path: Path) -> None:
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
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    # (a file system that finds the disk full only when the data is flushed fails here; the
    # bare "[Errno 28] No space left on device" named no file)
    with os_errors_naming(path):
        _fsync(tmp)
    _refuse_special(path)  # (it may have appeared while the file was written)
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
    _fsync(path.parent, folder=True)


def _fsync(path: Path, folder: bool = False) -> None:
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
def atomic_folder(folder: Path, staging: Optional[Path] = None) -> Iterator[Path]:
    """Write a folder whole or not at all: the block writes its files into the yielded
    ``FOLDER.partial`` (or ``staging``, a path beside the folder that the caller names, where
    ``FOLDER.partial`` may be another's: the model cache's), which then replaces ``folder``. A kill while writing leaves the earlier
    ``folder`` as it was (files of two versions side by side would load as one model); the next
    writer deletes the partial folder. On Linux the two folders swap in one step, so a reader
    finds the old folder or the new one, never none or a half-deleted one; elsewhere the old
    folder is deleted just before the new one is renamed. A symbolic link to a folder stays:
    the folder it names is replaced. The caller must be the folder's only writer."""
    refuse_bundled(folder, "folder", replaces=True)
    named = folder
    if folder.is_symlink() and folder.is_dir():
        # (the link could be neither swapped nor deleted with rmtree: the write ended in a bare
        # "Cannot call rmtree on a symbolic link", the new files left in LINK.partial)
        folder = folder.resolve()
    tmp = staging if staging is not None else folder.with_name(fitting_name(folder, ".partial"))
    shutil.rmtree(tmp, ignore_errors=True)   # what a killed writer left
    try:
        tmp.mkdir(parents=True)
        with naming_as(tmp, named):
            yield tmp
        for path in tmp.iterdir():   # on the disk before the folder takes the name (atomic_commit)
            if path.is_file():
                with os_errors_naming(named / path.name):   # (a failed flush named no file)
                    _fsync(path)
        with os_errors_naming(named):
            _fsync(tmp, folder=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)   # (a full disk: free what it took; the old folder stays)
        raise
    # The new folder takes the old one's place in one step, and the old one is deleted after:
    # deleting it first left, for a reader (predict, from_pretrained) or after a kill, no folder
    # or a half-deleted one (weights without their config) where a complete model belongs.
    if folder.is_dir() and not folder.is_symlink() and _exchange(tmp, folder):   # (a link: not swapped away)
        shutil.rmtree(tmp)   # (the old folder now; a kill here leaves it to the next writer)
    else:
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    _fsync(folder.parent, folder=True)


def keep_other_entries(old: Path, new: Path) -> None:
    """Give ``new`` (a folder about to replace ``old``: :func:`atomic_folder`) each entry of
    ``old`` it lacks: files as hard links (copies where the file system has none), folders
    likewise file by file, symbolic links as links."""
    def link_or_copy(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    for entry in old.iterdir():
        target = new / entry.name
        if os.path.lexists(target):
            continue   # written by the caller
        if entry.is_symlink():
            os.symlink(os.readlink(entry), target)
        elif entry.is_dir():
            shutil.copytree(entry, target, symlinks=True, copy_function=link_or_copy)
        else:
            link_or_copy(str(entry), str(target))


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
    ``path``'s lock (:func:`output_lock`): a live writer's file is then never among them."""
    # (the name escaped: "out[12].h5" matched, and deleted, the live temporary files of
    # out1.h5 and out2.h5, whose locks it does not hold, and left its own)
    path = write_target(path)
    prefix = _process_prefix(path)
    for tmp in path.parent.glob(glob.escape(prefix) + "*"):
        if tmp.name[len(prefix):].isdigit():   # (a PID: not ".NAME.tmp-1.h5.tmp-2", another's)
            tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------------- output checks
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


def check_output_file(path: Path, what: str = "output") -> None:
    """Refuse, before any work, an output path that cannot become a file: a directory, or a
    folder that is a file, or a bundled model's file. (Write permission is found out by taking the lock.)"""
    refuse_bundled(path, what)
    if path.is_dir():
        raise OutputError(f"{path}: is a directory; the {what} must be a file path")
    _refuse_special(path)
    _check_parents(path)


def check_replaceable(path: Path, starts: bytes, what: str) -> None:
    """Refuse to replace an existing ``path`` unless it begins with ``starts``, the first bytes
    of every ``what`` this command writes: re-running a command replaces its own earlier output,
    while a text file given to ``-o`` by mistake is kept (it was replaced without a word)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(starts))
    except FileNotFoundError:
        return
    except OSError as e:
        raise OutputError(f"{path}: cannot read what is there: {os_error_reason(e)}") from None
    if head and head != starts:  # (an empty file holds nothing to lose)
        raise OutputError(f"{path}: exists and is not a {what}; it is kept: remove it or write "
                          f"the {what} to another path")


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file (through links or relative paths too)."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def refuse_replacing_inputs(path: Path, inputs: Iterable[Tuple[str, Path]], what: str = "output") -> None:
    """Refuse an output ``path`` that names one of the command's inputs, given as (what it is,
    its path): the same file through a symbolic link, a relative path or a hard link, or an
    input folder itself. Written, the output replaced the input, which was lost."""
    for name, source in inputs:
        if same_file(path, Path(source)):
            raise OutputError(f"{path}: is {name}; write the {what} to another path")


def check_output_dir(path: Path, what: str = "folder") -> None:
    """Refuse, before any work, a folder path that is taken by a file, or that is a symbolic
    link to nothing (its mkdir raised a bare 'File exists', or a rename named a temporary), or
    that is (or is in) a bundled model's folder."""
    refuse_bundled(path, what)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path}: is a file, but the {what} must be a folder; move it away")
    if path.is_symlink() and not path.exists():
        raise OutputError(f"{path}: is a symbolic link to {os.readlink(path)}, which does not exist; "
                          f"make that folder or remove the link")
    _check_parents(path)


def _check_parents(path: Path) -> None:
    """The nearest existing folder above ``path`` must be a folder (missing ones are created)."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise OutputError(f"{path}: {parent} is not a directory")
            return


@contextmanager
def writing(path: Path, what: str = "output", hint: str = "", full_hint: Optional[str] = None) -> Iterator[None]:
    """Turn an OSError raised while writing ``path`` (a full disk, a read-only folder) into a
    one-line :class:`OutputError` naming ``path``, ``what`` was being written and the reason.
    ``hint`` ends the line; ``full_hint`` instead where the disk (or quota) had no room
    (:data:`NO_ROOM`): "a writable folder" points the wrong way for a full one."""
    try:
        yield
    except OutputError:
        raise
    except OSError as e:
        if full_hint is not None and e.errno in NO_ROOM:
            hint = full_hint
        error = OutputError(f"{path}: cannot write the {what}: {os_error_reason(e)}"
                            + (f"; {hint}" if hint else ""))
        error.errno = e.errno   # (a full disk stays ENOSPC for the callers that tell it apart)
        raise error from e


def make_folder(path: Path) -> None:
    """``path`` and the folders above it that are missing made, an OSError as the one line the
    atomic writers give: ``PATH: cannot write in FOLDER: reason``, FOLDER the one in which a
    folder could not be made (a training run's folder said only ``PATH: Operation not
    permitted``, where every other command named the folder it could not write in)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        where = Path(e.filename).parent if e.filename else path.parent
        raise OutputError(f"{path}: cannot write in {where}: {os_error_reason(e)}") from None


# ---------------------------------------------------------------------- HDF5 that survives a full disk
class GuardedFile:
    """A file for h5py's file-object driver that records the first OS error of a write
    instead of letting HDF5 see it; :meth:`check` raises it.

    HDF5 handles a failed write (a full disk) badly: some writes happen when a handle is freed,
    where h5py can only print the error and carry on as if the data were written, and a file
    whose flush failed cannot be closed cleanly (later HDF5 calls may crash). With this file
    HDF5 never sees the error: writes after it are dropped, the file closes normally, and the
    writer raises the recorded error (an OSError with its errno) and deletes the file.
    """

    def __init__(self, path: Path):
        self._file = open(path, "w+b", buffering=0)   # unbuffered: errors come at each write
        self.error: Optional[OSError] = None

    # After close (an aborted writer, whose temporary is deleted), HDF5 may still write or
    # truncate when it frees a handle, at exit say: those calls are dropped. They raised
    # "I/O operation on closed file", which h5py printed as an ignored exception's traceback
    # after a SIGTERM's one-line message.
    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        size = len(view)
        if self.error is None and not self._file.closed:
            try:
                while view:   # a write near a full disk may be partial
                    view = view[self._file.write(view):]
            except OSError as e:
                self.error = e
        return size

    def truncate(self, size: Optional[int] = None) -> int:
        if self._file.closed:
            return size or 0
        try:
            return self._file.truncate(size)
        except OSError as e:
            self.error = self.error or e
            return self._file.tell() if size is None else size

    def readinto(self, buffer) -> int:
        return 0 if self._file.closed else self._file.readinto(buffer)

    def read(self, size: int = -1) -> bytes:
        return b"" if self._file.closed else self._file.read(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return 0 if self._file.closed else self._file.seek(offset, whence)

    def tell(self) -> int:
        return 0 if self._file.closed else self._file.tell()

    def flush(self) -> None:   # unbuffered: nothing waits
        pass

    def close(self) -> None:
        self._file.close()

    def check(self) -> None:
        """Raise the first write error, if there was one."""
        if self.error is not None:
            raise self.error


class HDF5Writer:
    """A new HDF5 file at a temporary path, renamed onto its target by :meth:`commit` or
    deleted by :meth:`abort`; write errors (a full disk) are raised as OSError."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        import h5py   # here, so that importing elmo.io stays light

        self._raw = GuardedFile(tmp)
        try:
            self.file = h5py.File(self._raw, "w")
        except BaseException:
            self._raw.close()
            tmp.unlink(missing_ok=True)
            raise

    def check(self) -> None:
        self._raw.check()

    def commit(self, path: Path) -> None:
        self.file.close()
        self._raw.close()
        self.check()
        atomic_commit(self.tmp, path)   # with an ordinary file's permissions

    def abort(self) -> None:
        """Close and delete the temporary file (also after a failed write)."""
        try:
            with suppress(Exception):
                self.file.close()
            self._raw.close()
        finally:
            self.tmp.unlink(missing_ok=True)


@contextmanager
def new_hdf5(path: Path, what: str) -> Iterator:
    """A new HDF5 file for the block to fill, written through :class:`HDF5Writer` and renamed
    onto ``path`` when the block ends; a failed write (a full disk) is one :class:`OutputError`
    naming ``path`` and ``what``, and the temporary file is deleted."""
    with writing(path, what):
        out = HDF5Writer(atomic_target(path))
        try:
            yield out.file
            out.commit(path)
        except BaseException:
            out.abort()
            raise


# ---------------------------------------------------------------------- the output lock
def lock_path(path: Path) -> Path:
    """The lock file of an output: ``OUTPUT.lock`` beside it (OUTPUT shortened where the name
    would be too long: :func:`fitting_name`). An output named ``.`` or ``..``
    (the current folder, its parent) is locked by its absolute path: it has no name of its own
    to put ``.lock`` after (``elmo convert MODEL .`` was pathlib's "has an empty name")."""
    if path.name in ("", ".."):
        path = Path(os.path.abspath(path))
    return path.with_name(fitting_name(path, ".lock"))


def _holder(lock_file: Path) -> Optional[str]:
    """'PID 123 on host h' from a held lock file, or None when it cannot be read yet."""
    try:
        text = lock_file.read_text(encoding="utf-8").split()
    except OSError:
        return None
    if len(text) >= 1 and text[0].isdigit():
        return f"PID {text[0]}" + (f" on {text[1]}" if len(text) > 1 else "")
    return None


def writer_of(path: Path) -> Optional[str]:
    """Who is writing ``path`` now ('PID 123 on host h', from its lock file: :func:`output_lock`),
    or None. For readers, which take no lock: a lock file of a process of this host that has
    ended (killed with SIGKILL, which leaves it) names no writer."""
    try:
        file = lock_path(write_target(path))
        pid, host = (file.read_text(encoding="utf-8").split() + [""])[:2]
    except (OSError, ValueError):
        return None
    if not pid.isdigit() or (host == socket.gethostname() and not process_alive(int(pid))):
        return None
    return _holder(file)


def _cannot_create_in(folder: Path) -> Optional[str]:
    """Why no file can be created in ``folder``, or None when one can (made and deleted).

    filelock takes a lock file it cannot create in an existing folder ("no such file", as in
    /proc) for one its holder has just deleted, and retries until it times out: without this
    the output was said to be "being written by another process"."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".elmo-probe-"):
            return None
    except OSError as e:
        if e.errno == errno.ENOENT and folder.is_dir():
            return "it takes no new files, as /proc and /sys do"
        return os_error_reason(e)


#: The lock files (real paths) held by an ``output_lock(..., reentrant=True)`` of this thread
#: or task: an :func:`output_lock` of one of them in its body is that lock, not a second writer.
_REENTRANT: ContextVar[frozenset] = ContextVar("elmo_io_reentrant_locks", default=frozenset())


@contextmanager
def output_lock(path: Path, name: Optional[Path] = None, wait: float = 1.0,
                reentrant: bool = False) -> Iterator[Path]:
    """Hold ``path``'s lock file while the body runs; raise :class:`OutputBusy` at once if
    another process holds it.

    Args:
        path: the file the lock is for (its lock file is ``path.lock``; for a symbolic link,
            that of the file or folder it names).
        name: the output named in the messages (default ``path``; a segment's lock names the
            whole output).
        reentrant: an ``output_lock`` of the same file in the body (this thread or task) is
            this lock and passes: for a caller that must know the output is its own before it
            consumes something (a stream read once), and then hands the output to a function
            that locks it itself. Without it, a second lock of the same file in one process is
            refused as another writer's (the tests rely on that to stand for another process).

    The lock is a kernel ``flock`` (released when the process dies, even by SIGKILL, so a
    killed run leaves no stale lock). The lock file is deleted before the lock is released; a
    process that had opened it then finds it deleted and tries the new one (``filelock`` checks),
    so two processes never both hold it. A busy lock is retried for ``wait`` seconds.
    """
    from filelock import FileLock, Timeout

    name = path if name is None else name
    refuse_bundled(path)
    # An output given through a symbolic link is locked as the file or folder it names: LINK.lock
    # and TARGET.lock let one writer through the link and one by the target's path write the one
    # output (the atomic writers write through a link to its target: write_target).
    file = lock_path(write_target(path))
    key = os.path.realpath(file)
    if key in _REENTRANT.get():
        yield file
        return
    fds = []

    def mark(fd: int) -> None:  # who holds it, for the message a second writer gets
        fds.append(fd)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        except OSError:  # (a full disk: the lock holds, unnamed; the output's own write says why it fails)
            pass

    try:
        lock = FileLock(file, timeout=wait, on_acquired=mark)
        marked_by_lock = True
    except TypeError:  # a filelock before 4.3 (an older environment, a GPU image): no hook
        lock, marked_by_lock = FileLock(file, timeout=wait), False
    try:
        _acquire(lock, file)
        if not marked_by_lock:  # the same record, through a descriptor of our own
            try:
                mark(os.open(file, os.O_WRONLY))
            except OSError:  # (only the messages of a second writer lose the holder's name)
                pass
    except Timeout:
        problem = _cannot_create_in(file.parent)
        if problem is not None:
            raise OutputError(f"{name}: cannot create a file in {file.parent} ({problem}); "
                              f"write the output to another folder") from None
        holder = _holder(file) or "another process"
        raise OutputBusy(f"{name} is already being written by {holder} (lock file {file}); "
                         f"wait for it to finish, or stop it and run again") from None
    except OSError as e:
        if e.errno == errno.ENOSYS:
            raise OutputError(f"{file}: the file system does not support locks (flock); "
                              f"write the output to another file system") from None
        if file.is_dir():   # (said as "cannot write in FOLDER: Is a directory": which file, and why?)
            raise OutputError(f"{name}: its lock file {file} is a folder; remove it (no writer makes one) "
                              f"and run again") from None
        raise OutputError(f"{name}: cannot write in {file.parent}: {os_error_reason(e)}") from None
    token = _REENTRANT.set(_REENTRANT.get() | {key}) if reentrant else None
    try:
        yield file
    finally:
        if token is not None:
            _REENTRANT.reset(token)
        try:  # delete while still holding it: a process waiting on this inode then retries
            if fds and os.path.samestat(os.stat(file), os.fstat(fds[-1])):
                file.unlink()
        except OSError:
            pass
        if not marked_by_lock and fds:
            os.close(fds[-1])
        lock.release()


def _acquire(lock: Any, file: Path, tries: int = 3) -> None:
    """``lock.acquire()``, again (each try making the lock file's folder anew) where the folder
    was removed while this process waited: a writer that failed removes the empty folders it
    made once it has let go of the lock (:func:`no_empty_folder_on_failure`), the lock's folder
    among them, and the second writer, about to write there, stopped with "cannot write in
    FOLDER: No such file or directory"."""
    for _ in range(tries - 1):
        try:
            lock.acquire()
            return
        except FileNotFoundError:
            if file.parent.exists():
                raise
    lock.acquire()
