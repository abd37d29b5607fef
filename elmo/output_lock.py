"""The lock on an output being written, one writer at a time.

* :func:`output_lock`: while a process writes an output it holds ``OUTPUT.lock``
  (:func:`lock_path`; a ``flock`` through the ``filelock`` package, held by the kernel: a
  killed process releases it). The lock file holds the writer's PID and host, so a second
  writer is told who has it (:class:`elmo.io.OutputBusy`). The file is removed on release.
  A file of that name that holds anything else is someone's own (``poetry.lock`` beside an
  output named ``poetry``): the lock is refused rather than empty and delete it.
* :func:`writer_of` tells a reader, which takes no lock, who writes an output now.
"""
from __future__ import annotations

import errno
import os
import re
import socket
import stat
import tempfile
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterator, Optional

from .io import OutputBusy, OutputError, fitting_name, os_error_reason, process_alive, refuse_bundled, write_target


def lock_path(path: Path) -> Path:
    """The lock file of an output: ``OUTPUT.lock`` beside it (OUTPUT shortened where the name
    would be too long: :func:`elmo.io.fitting_name`). An output named ``.`` or ``..``
    (the current folder, its parent) is locked by its absolute path: it has no name of its own
    to put ``.lock`` after (``elmo convert MODEL .`` was pathlib's "has an empty name")."""
    if path.name in ("", ".."):
        path = Path(os.path.abspath(path))
    return path.with_name(fitting_name(path, ".lock"))


#: What a lock file holds: nothing (made, not yet marked), or its holder's "PID HOST" line.
_LOCK_RECORD = re.compile(rb"\s*(\d+(\s+\S+)?\s*)?")
#: The longest such record: a PID, a space, a host name of at most 255 bytes and a newline.
_RECORD_LIMIT = 512


def _not_a_lock_file(file: Path) -> bool:
    """Whether ``file`` is a regular file that holds something other than a lock record: a file
    of the user's that has the lock's name, which taking the lock would empty (filelock opens
    it with O_TRUNC) and releasing it delete. A missing, unreadable or special file is left to
    the lock's own open, which says why it fails."""
    try:
        if not stat.S_ISREG(os.stat(file).st_mode):
            return False
        with open(file, "rb") as f:
            head = f.read(_RECORD_LIMIT + 1)
    except OSError:
        return False
    return len(head) > _RECORD_LIMIT or _LOCK_RECORD.fullmatch(head) is None


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
    """Hold ``path``'s lock file while the body runs; raise :class:`elmo.io.OutputBusy` at once if
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
    if _not_a_lock_file(file):
        raise OutputError(f"{name}: its lock file's name, {file}, is taken by a file that is no lock (it "
                          f"holds more than a writer's PID and host), which locking would empty and "
                          f"delete; move or rename it, or write the output to another path")
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
        who = f"{name} is already being written by {holder} (lock file {file})"
        busy = OutputBusy(f"{who}; wait for it to finish, or stop it and run again")
        busy.who = who
        raise busy from None
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
    made once it has let go of the lock (:func:`elmo.io.no_empty_folder_on_failure`), the lock's folder
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
