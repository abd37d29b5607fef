"""HDF5 files that survive a full disk: written at a temporary path through :class:`GuardedFile`,
which keeps every OS error of a write from HDF5 (:class:`HDF5Writer`, :func:`new_hdf5`), and
renamed onto the output when complete (:func:`elmo.io.atomic_commit`)."""
from __future__ import annotations

from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Iterator, Optional

from .io import atomic_commit, atomic_target
from .output_checks import writing


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
        import h5py   # here, so that importing this module stays light

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
    onto ``path`` when the block ends; a failed write (a full disk) is one :class:`elmo.io.OutputError`
    naming ``path`` and ``what``, and the temporary file is deleted."""
    with writing(path, what):
        out = HDF5Writer(atomic_target(path))
        try:
            yield out.file
            out.commit(path)
        except BaseException:
            out.abort()
            raise
