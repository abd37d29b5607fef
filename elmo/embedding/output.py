"""The HDF5 files of ``elmo embed``: segment files while running, one merged file at the end.

The merged file has the layout of the original ELMo command (AllenNLP ``elmo``):

* one dataset per input line, named by its 0-based line number ``"0"``, ``"1"``, ... holding
  (L + 1, n_tokens, D) for ``layers="all"`` and (n_tokens, D) otherwise, float32 (or float16);
* ``sentence_to_index``: shape (1,), a variable-length string holding the JSON object
  {sentence: line number as a string} (a repeated sentence maps to its last line), unless
  sentences are forgotten;
* with sentence keys, datasets are named by the sentence itself and there is no
  ``sentence_to_index``. As in the original, a ``/`` in a sentence makes nested groups, so read
  it back with ``f[sentence]``.

Root attributes added here: ``model_config`` (options JSON), ``command_line``, ``layers``,
``stateful`` and ``settings`` (JSON of everything that determines the values; a resumed run
must match it).

Crash safety: nothing is ever written in place. Each segment (a block of consecutive lines) is
written to a temporary file in ``OUTPUT.parts/`` and renamed when complete; the merged file is
written to a temporary file and renamed over OUTPUT. A killed run therefore leaves complete
segments plus at most one temporary file per process, which the next run deletes. Temporary
files are only deleted by the holder of the lock of the file they are for (``OUTPUT.lock``,
``segment-K.hdf5.lock``, see :mod:`elmo.io`), so a live writer's file is never deleted; a
failed write (a full disk) deletes its own temporary file.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import sys
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional

import h5py
import numpy as np

from ..io import process_temporary as _temporary
from ..io import remove_temporaries

SENTENCE_TO_INDEX = "sentence_to_index"


class SettingsMismatch(ValueError):
    """Existing parts or output were written with other settings; the message names them."""


def parts_dir(output: Path) -> Path:
    """The folder that holds a run's segment files while it runs: ``OUTPUT.parts``."""
    return output.with_name(output.name + ".parts")


def segment_path(parts: Path, k: int) -> Path:
    return parts / f"segment-{k:08d}.hdf5"


class NonFiniteOutput(ValueError):
    """The model gave NaN or inf for a line; the message names the input file and line."""


def compare_settings(found: Optional[str], settings: Dict, where: Path) -> None:
    """Raise SettingsMismatch unless ``found`` (JSON) equals ``settings``."""
    old = json.loads(found) if found else {}
    differing = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
    if differing:
        raise SettingsMismatch(f"{where} was written by a different command (it differs in: "
                               f"{', '.join(differing)}); rerun the same command to resume, or "
                               f"pass --overwrite to start again")


@contextmanager
def hdf5_errors() -> Iterator[None]:
    """Make every HDF5 write error of the body an OSError with its errno, raised.

    HDF5 also writes when a handle is freed, and h5py can only report an error there (a full
    disk) as "unraisable": printed twice as a traceback, and the program carries on as if the
    data were written. Here such errors are collected instead and the first is raised at the
    end of the body; h5py's RuntimeError for a failed write (e.g. a copy) becomes an OSError.
    """
    caught: List[BaseException] = []
    try:
        with _h5py_unraisable_to(caught):
            yield
    except RuntimeError as e:
        raise _as_os_error(e) from None
    if caught:
        raise _as_os_error(caught[0])


@contextmanager
def _h5py_unraisable_to(caught: List[BaseException]) -> Iterator[None]:
    """Collect h5py's unraisable errors into ``caught`` instead of printing them: Cython prints
    them through ``sys.excepthook``, then reports them to ``sys.unraisablehook``; both hooks
    are swapped for the body."""
    previous_unraisable, previous_except = sys.unraisablehook, sys.excepthook

    def from_h5py(error: BaseException, where: str) -> bool:
        return isinstance(error, RuntimeError) and "h5py" in where

    def unraisable_hook(unraisable) -> None:
        if from_h5py(unraisable.exc_value, f"{unraisable.err_msg} {unraisable.object!r}"):
            caught.append(unraisable.exc_value)
        else:
            previous_unraisable(unraisable)

    def except_hook(kind, value, tb) -> None:
        if not from_h5py(value, tb.tb_frame.f_code.co_filename if tb is not None else ""):
            previous_except(kind, value, tb)

    sys.unraisablehook, sys.excepthook = unraisable_hook, except_hook
    try:
        yield
    finally:
        sys.unraisablehook, sys.excepthook = previous_unraisable, previous_except


def _as_os_error(e: BaseException) -> BaseException:
    """h5py's RuntimeError about a failed write, as an OSError with the errno HDF5 reports."""
    found = re.search(r"errno = (\d+)", str(e))
    return OSError(int(found.group(1)), str(e)) if found else e


#: HDF5 files whose writing failed: closed only when the process ends (see :func:`discard`).
_ABANDONED: List[h5py.File] = []


@atexit.register
def _close_abandoned() -> None:
    """At exit, close the files :func:`discard` left open, their errors unprinted (they were
    deleted; only h5py's bookkeeping remains)."""
    with _h5py_unraisable_to([]):
        while _ABANDONED:
            with suppress(Exception):
                _ABANDONED.pop().close()


def discard(handle: Optional[h5py.File], tmp: Path, failed: bool = True) -> None:
    """Delete a temporary HDF5 file that will not be used; ``failed``: after a write error.

    A file whose write failed (a full disk) is not closed: HDF5 would try to flush it again,
    and after such a failure its close can leave the library in a state that crashes later
    calls (seen with h5py 3.16). Instead the file is emptied (which frees its space at once,
    though it stays open) and deleted, and its handle is closed when the process ends.
    """
    try:
        if handle is not None and handle.id.valid:
            if not failed:
                handle.close()
                return
            with suppress(OSError):
                os.truncate(tmp, 0)
            _ABANDONED.append(handle)
    finally:
        tmp.unlink(missing_ok=True)


class SegmentWriter:
    """Writes the datasets of lines [first, stop) into a temporary file, renamed by :meth:`commit`.

    Datasets are named by line number and created with their full shape on first write; each
    write fills a slice of tokens, so a long sentence never needs to be held in memory whole.
    """

    def __init__(self, path: Path, first: int, stop: int, settings_json: str):
        self.path, self.first, self.stop = path, first, stop
        remove_temporaries(path)   # the caller holds the segment's lock: these are a dead run's
        self._tmp = _temporary(path)
        self._file = None
        self._failed = False   # a write error happened: the file is abandoned, not closed
        try:
            with self._writing():
                self._file = h5py.File(self._tmp, "w")
                self._file.attrs["first_line"] = first
                self._file.attrs["stop_line"] = stop
                self._file.attrs["settings"] = settings_json
        except BaseException:
            self.abort()
            raise

    @contextmanager
    def _writing(self) -> Iterator[None]:
        try:
            with hdf5_errors():
                yield
        except OSError:
            self._failed = True
            raise

    def create(self, line: int, shape, dtype) -> None:
        """Create line ``line``'s dataset of ``shape``: (K, n_tokens, D) or (n_tokens, D)."""
        with self._writing():
            self._file.create_dataset(str(line), shape=shape, dtype=dtype)

    def write(self, line: int, offset: int, vectors: np.ndarray) -> None:
        """Put (..., n, D) vectors at tokens [offset, offset + n) of line ``line``."""
        n = vectors.shape[-2]
        if n:
            with self._writing():
                self._file[str(line)][..., offset:offset + n, :] = vectors

    def commit(self) -> None:
        """Check that every line is present, close, and rename into place."""
        missing = [line for line in range(self.first, self.stop) if str(line) not in self._file]
        if missing:
            raise RuntimeError(f"segment {self.path.name}: lines {missing[:5]} were not written")
        with self._writing():
            self._file.attrs["complete"] = True
            self._file.close()
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        """Close and delete the temporary file (also after a failed write, e.g. a full disk)."""
        discard(self._file, self._tmp, self._failed)


def segment_done(path: Path, first: int, stop: int, settings: Dict) -> bool:
    """True if ``path`` is a complete segment of lines [first, stop) with these settings.

    An unreadable file is deleted (False); a readable one with other settings raises
    SettingsMismatch.
    """
    if not path.exists():
        return False
    try:
        with h5py.File(path, "r") as f:
            found = f.attrs.get("settings")
            span = (int(f.attrs.get("first_line", -1)), int(f.attrs.get("stop_line", -1)))
            complete = bool(f.attrs.get("complete", False))
    except OSError:
        path.unlink(missing_ok=True)
        return False
    compare_settings(found, settings, path)
    if not complete or span != (first, stop):
        path.unlink(missing_ok=True)
        return False
    return True


def segment_ready(path: Path, settings_json: str) -> bool:
    """True if ``path`` exists and was written with exactly these settings (no side effects)."""
    try:
        with h5py.File(path, "r") as f:
            return bool(f.attrs.get("complete", False)) and f.attrs.get("settings") == settings_json
    except (OSError, FileNotFoundError):
        return False


def merge_segments(parts: Path, n_segments: int, output: Path, sentences: Iterable[str], *,
                   sentence_keys: bool = False, forget_sentences: bool = False,
                   attrs: Optional[Dict] = None) -> None:
    """Copy the segments, in line order, into one file in the original layout; rename over ``output``.

    ``sentences`` yields the stripped text of every line, in order (for the keys and for
    ``sentence_to_index``).
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    remove_temporaries(output)
    tmp = _temporary(output)
    dst, failed = None, False
    try:
        with hdf5_errors():
            dst = h5py.File(tmp, "w")
            _copy_segments(parts, n_segments, dst, sentences, sentence_keys, forget_sentences, attrs)
            dst.close()   # an error before this point discards the file (finally)
        os.replace(tmp, output)
    except OSError:
        failed = True
        raise
    finally:
        discard(dst, tmp, failed)   # after an error (a full disk): not left behind, space freed


def _copy_segments(parts: Path, n_segments: int, dst: h5py.File, sentences: Iterable[str],
                   sentence_keys: bool, forget_sentences: bool, attrs: Optional[Dict]) -> None:
    sentence_to_index: Dict[str, str] = {}
    lines = iter(sentences)
    for key, value in (attrs or {}).items():
        dst.attrs[key] = value
    for k in range(n_segments):
        with h5py.File(segment_path(parts, k), "r") as src:
            first, stop = int(src.attrs["first_line"]), int(src.attrs["stop_line"])
            for line in range(first, stop):
                sentence = next(lines)
                name = sentence if sentence_keys else str(line)
                if not sentence_keys and not forget_sentences:
                    sentence_to_index[sentence] = name
                src.copy(src[str(line)], dst, name=name)
    if not sentence_keys and not forget_sentences:
        ds = dst.create_dataset(SENTENCE_TO_INDEX, (1,), dtype=h5py.string_dtype())
        ds[0] = json.dumps(sentence_to_index)


def output_complete(output: Path, settings: Dict) -> bool:
    """True if ``output`` is a finished file with these settings; raises SettingsMismatch if it
    is a finished file with other settings or not one of ours."""
    if not output.exists():
        return False
    try:
        with h5py.File(output, "r") as f:
            found = f.attrs.get("settings")
    except OSError:
        raise SettingsMismatch(f"{output} exists and is not an HDF5 file; pass --overwrite to replace it") from None
    compare_settings(found, settings, output)
    return True


def remove_parts(parts: Path) -> None:
    shutil.rmtree(parts, ignore_errors=True)
