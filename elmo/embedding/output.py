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
``stateful`` and ``settings`` (JSON of everything that determines the values under the run's
mode, :func:`value_settings`; a resumed run must match it). With ``--tokenize en`` the settings
hold ``tokenizer_revision`` (:data:`elmo.tokenize.TOKENIZER_REVISION`), with ``--tokenize zh``
``jieba_version`` (:func:`elmo.tokenize.jieba_version`): a resume under another revision or
jieba version is refused.

Crash safety: nothing is ever written in place. Each segment (a block of consecutive lines) is
written to a temporary file in ``OUTPUT.parts/`` and renamed when complete; the merged file is
written to a temporary file and renamed over OUTPUT. A killed run therefore leaves complete
segments plus at most one temporary file per process, which the next run deletes. Temporary
files are only deleted by the holder of the lock of the file they are for (``OUTPUT.lock``,
``segment-K.hdf5.lock``, see :mod:`elmo.output_lock`), so a live writer's file is never
deleted. A failed write (a full disk, see :class:`elmo.hdf5_writer.GuardedFile`) raises an
OSError and deletes its own temporary file; the finished segments stay for a rerun.
"""
from __future__ import annotations

import json
import re
from contextlib import suppress
from pathlib import Path
from typing import Dict, Iterable, List, Optional

import h5py
import numpy as np

from ..io import process_temporary as _temporary
from ..io import fitting_name, remove_temporaries
from ..hdf5_writer import GuardedFile, HDF5Writer  # noqa: F401  (GuardedFile: re-exported)

SENTENCE_TO_INDEX = "sentence_to_index"


class SettingsMismatch(ValueError):
    """Existing parts or output were written with other settings; the message names them."""


def parts_dir(output: Path) -> Path:
    """The folder that holds a run's segment files while it runs: ``OUTPUT.parts``."""
    return output.with_name(fitting_name(output, ".parts"))


def segment_path(parts: Path, k: int) -> Path:
    return parts / f"segment-{k:08d}.hdf5"


def recorded_settings(output: Path) -> List[Dict]:
    """The ``settings`` records of ``output`` and of the segments in its parts folder (files
    that cannot be read, or record none, are passed over)."""
    found = []
    parts = parts_dir(output)
    for path in [output, *(sorted(parts.glob("segment-*.hdf5")) if parts.is_dir() else [])]:
        if not path.is_file():
            continue
        try:
            with h5py.File(path, "r") as f:
                record = json.loads(f.attrs.get("settings") or "{}")
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            found.append(record)
    return found


def recorded_model_digests(output: Path) -> set:
    """The ``model_digest`` values recorded by ``output`` and by the segments in its parts
    folder (:func:`recorded_settings`)."""
    return {r["model_digest"] for r in recorded_settings(output) if isinstance(r.get("model_digest"), str)}


class NonFiniteOutput(ValueError):
    """The model gave NaN or inf for a line; the message names the input file and line."""


def value_settings(settings: Dict) -> Dict:
    """``settings`` less those that cannot change a vector under the run's mode, as they are
    recorded and compared: a stateful run keeps its batches in input order, so it records no
    ``sort_by_length``; ``errors`` never changes a vector (``strict`` refuses, before any work,
    the only input on which ``replace`` would differ), so it is not recorded. Applied to a
    record written before they were left out, it drops them there too, so such a run resumes
    with the same command."""
    dropped = {"errors"} | ({"sort_by_length"} if settings.get("stateful") else set())
    return {k: v for k, v in settings.items() if k not in dropped}


def same_settings(found: Optional[str], settings: Dict) -> bool:
    """Whether the recorded ``found`` (JSON) has the values of ``settings`` that count."""
    try:
        old = json.loads(found) if found else None
    except ValueError:
        return False
    return isinstance(old, dict) and value_settings(old) == value_settings(settings)


def differing_settings(old: Dict, settings: Dict) -> List[str]:
    """The names of the settings that count (:func:`value_settings`) whose values differ
    between the recorded ``old`` and ``settings``, sorted."""
    old, settings = value_settings(old), value_settings(settings)
    return sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))


def compare_settings(found: Optional[str], settings: Dict, where: Path) -> None:
    """Raise SettingsMismatch unless ``found`` (JSON) records the values of ``settings`` that
    count (see :func:`value_settings`)."""
    old = json.loads(found) if found else {}
    differing = differing_settings(old, settings)
    if old.get("tokenize") == settings.get("tokenize"):
        # the same command cannot resume it: this version's tokenizer splits some texts otherwise
        if "tokenizer_revision" in differing:
            raise SettingsMismatch(f"{where} holds tokens of tokenizer revision {old.get('tokenizer_revision')}, "
                                   f"this version's --tokenize gives revision {settings.get('tokenizer_revision')} "
                                   f"(elmo.tokenize.TOKENIZER_REVISION), whose tokens of some lines differ; "
                                   f"pass --overwrite to start again with this one")
        if "jieba_version" in differing:
            raise SettingsMismatch(f"{where} holds text segmented by jieba {old.get('jieba_version')}, this run's "
                                   f"jieba is {settings.get('jieba_version')}, which may segment some lines "
                                   f"otherwise; install jieba {old.get('jieba_version')} to resume, or pass "
                                   f"--overwrite to start again with this one")
    if differing:
        named = ", ".join(f"{key} ({_RECORD_ONLY_KEYS[key]})" if key in _RECORD_ONLY_KEYS else key
                          for key in differing)
        raise SettingsMismatch(f"{where} was written by a different command (it differs in: "
                               f"{named}); rerun the same command to resume, or "
                               f"pass --overwrite to start again")


#: Recorded settings that are no option of the command, said in words where a mismatch names
#: them (the key alone, "model_digest", left a user guessing that the model differed).
_RECORD_ONLY_KEYS = {"model_digest": "another model, or other weights", "input_digest": "another input text"}


class SegmentWriter:
    """Writes the datasets of lines [first, stop) into a temporary file, renamed by :meth:`commit`.

    Datasets are named by line number and created with their full shape on first write; each
    write fills a slice of tokens, so a long sentence never needs to be held in memory whole.
    """

    def __init__(self, path: Path, first: int, stop: int, settings_json: str):
        self.path, self.first, self.stop = path, first, stop
        remove_temporaries(path)   # the caller holds the segment's lock: these are a dead run's
        self._out = HDF5Writer(_temporary(path))
        self._file = self._out.file
        try:
            self._file.attrs["first_line"] = first
            self._file.attrs["stop_line"] = stop
            self._file.attrs["settings"] = settings_json
            self._out.check()
        except BaseException:
            self.abort()
            raise

    def create(self, line: int, shape, dtype) -> None:
        """Create line ``line``'s dataset of ``shape``: (K, n_tokens, D) or (n_tokens, D)."""
        self._file.create_dataset(str(line), shape=shape, dtype=dtype)
        self._out.check()

    def write(self, line: int, offset: int, vectors: np.ndarray) -> None:
        """Put (..., n, D) vectors at tokens [offset, offset + n) of line ``line``."""
        n = vectors.shape[-2]
        if n:
            self._file[str(line)][..., offset:offset + n, :] = vectors
            self._out.check()

    def commit(self) -> None:
        """Check that every line is present, close, and rename into place."""
        missing = [line for line in range(self.first, self.stop) if str(line) not in self._file]
        if missing:
            raise RuntimeError(f"segment {self.path.name}: lines {missing[:5]} were not written")
        self._file.attrs["complete"] = True
        self._out.commit(self.path)

    def abort(self) -> None:
        self._out.abort()


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


def segment_ready(path: Path, settings: Dict, refuse_other: bool = False) -> bool:
    """True if ``path`` exists and was written with these settings (no side effects).

    ``refuse_other``: a complete segment written with other settings raises SettingsMismatch
    (another rank's command or model differs, or its rank will refuse that segment itself:
    it will not be written again with these settings, and the wait for it ran out its whole
    timeout, then asked whether a rank had stopped)."""
    try:
        with h5py.File(path, "r") as f:
            complete, found = bool(f.attrs.get("complete", False)), f.attrs.get("settings")
    except OSError:   # (none yet)
        return False
    if complete and refuse_other:
        compare_settings(found, settings, path)
    return complete and same_settings(found, settings)


def merge_segments(parts: Path, n_segments: int, output: Path, sentences: Iterable[str], *,
                   sentence_keys: bool = False, forget_sentences: bool = False,
                   attrs: Optional[Dict] = None) -> None:
    """Copy the segments, in line order, into one file in the original layout; rename over ``output``.

    ``sentences`` yields the stripped text of every line, in order (for the keys and for
    ``sentence_to_index``).
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    remove_temporaries(output)
    out = HDF5Writer(_temporary(output))
    try:
        _copy_segments(parts, n_segments, out, sentences, sentence_keys, forget_sentences, attrs)
        out.commit(output)
    except BaseException:
        out.abort()   # after a full disk too: nothing left behind
        raise


def _copy_segments(parts: Path, n_segments: int, out: HDF5Writer, sentences: Iterable[str],
                   sentence_keys: bool, forget_sentences: bool, attrs: Optional[Dict]) -> None:
    dst = out.file
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
            out.check()
    # (drawn to the end: an indexed file's reader checks there that no line was added)
    if next(lines, None) is not None:
        raise ValueError("more sentences than lines in the segments")
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
    if found is None:   # (was "written by a different command (it differs in: <every setting>)")
        raise SettingsMismatch(f"{output} exists and is not an output of elmo embed (it records no settings); "
                               f"pass --overwrite to replace it, or write to another file")
    compare_settings(found, settings, output)
    return True


#: The names of the files that runs write in OUTPUT.parts: segments, their lock files and
#: temporaries, --overwrite marks and theirs.
_RUN_FILE = re.compile(r"\.?(segment-\d+\.hdf5|overwrite-rank-\d+-of-\d+\.json)(\..+)?")


def remove_parts(parts: Path) -> None:
    """Delete the files that runs wrote in ``parts``, then the folder if that empties it.

    Only those: the whole folder was deleted, so a folder of the user's that happened to be
    named OUTPUT.parts lost every file in it when the output was merged."""
    try:
        entries = list(parts.iterdir())
    except OSError:   # (none: nothing to do)
        return
    for path in entries:
        if _RUN_FILE.fullmatch(path.name) and not path.is_dir():
            with suppress(OSError):
                path.unlink()
    with suppress(OSError):   # (not empty: the other files are kept, and so is the folder)
        parts.rmdir()
