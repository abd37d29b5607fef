"""Training checkpoints: one file per saved step, written atomically, the last K kept.

A checkpoint ``checkpoint-00001200.pt`` holds everything an exact resume needs, as plain
data only (tensors, dicts, lists, strings and numbers), so it loads with
``torch.load(..., weights_only=True)`` and a crafted file cannot run code:

* ``format``: :data:`FORMAT` (absent in the first format, which held the same data);
* ``model``, ``optimizer``: the state dicts (one copy: data parallelism keeps them equal);
* ``step``, ``tokens``, ``elapsed``: progress;
* ``config``: the run's :class:`~elmo.training.config.TrainConfig` as JSON text;
* ``vocab_sha256``: the digest of the vocabulary's words, so a resume refuses a vocabulary
  file rebuilt under the same name (absent in checkpoints written before it was recorded);
* ``ranks``: for every rank, its batch iterator (stream position and unread tokens of each
  row), its carried LSTM state, its random generators as uint8 tensors (torch CPU/CUDA
  for dropout, the negative sampler), and ``log_window``: the sums of the steps since its
  last log line (absent in older checkpoints; ``loss_since_resume`` where its loss leaves out
  an older checkpoint's steps, see ``run_log.weighted_window``);
* ``nonfinite_in_a_row``: the skipped steps the checkpoint's step ends (absent: 0);

Files are written to a temporary name and renamed, so a kill or a full disk at any moment
leaves either the previous set of checkpoints or the new one, never a partial file under the
real name. A failed write raises :class:`CheckpointWriteError` naming the path and the cause.
Loading checks the zip file's records (their CRC-32, headers and flags), which torch.load does
not (:mod:`elmo.zip_records`).
"""
from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import pickle
import re
import zipfile
from pathlib import Path
from typing import IO, Any, Dict, List, Optional, cast

import torch

from ..io import NO_ROOM, OutputError, atomic_commit, atomic_target
from ..zip_records import zip_damage

FORMAT = 2
_NAME = re.compile(r"^checkpoint-(\d{8})\.pt$")
_REQUIRED = ("step", "tokens", "elapsed", "model", "optimizer", "ranks")


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message names the file and why."""


class RunWriteError(OSError):
    """Writing a file of a run folder failed (e.g. no space left); the message names the file."""

    def __str__(self) -> str:
        # (OSError's own began "[Errno 28] cannot write ...", a number that tells a user nothing)
        return self.strerror or super().__str__()


class CheckpointWriteError(RunWriteError):
    """Writing a checkpoint failed (e.g. no space left); the previous checkpoints are intact."""


@contextlib.contextmanager
def writing(path: str | Path):
    """Turn a failed write inside the block into a one-line :class:`RunWriteError` naming
    ``path`` (an OSError raised by ``write`` does not name its file)."""
    try:
        yield
    except RunWriteError:
        raise
    except OutputError as e:   # (already one line naming the file inside ``path``)
        raise RunWriteError(e.errno or errno.EIO, str(e)) from e
    except OSError as e:
        code = e.errno or errno.EIO
        reason = "no space left on device" if code == errno.ENOSPC else os.strerror(code)
        raise RunWriteError(code, f"cannot write {path}: {reason}") from e


def checkpoint_path(folder: str | Path, step: int) -> Path:
    return Path(folder) / f"checkpoint-{step:08d}.pt"


def list_checkpoints(folder: str | Path) -> List[Path]:
    """Complete checkpoints in ``folder``, oldest first (temporary files are ignored)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(folder: str | Path) -> Optional[Path]:
    found = list_checkpoints(folder)
    return found[-1] if found else None


class _RecordingFile:
    """A binary file whose write errors are remembered: torch.save reports a failed write of
    its own as an opaque RuntimeError ("enforce fail at inline_container.cc"), losing errno.
    So it does with an interrupt raised in a write (a second Ctrl-C or SIGTERM while a stopping
    run writes its checkpoint, which a large model spends most of its time in): that came out
    as "cannot write checkpoint ...: [enforce fail ...] unexpected pos", exit status 1, where
    the interrupt's own is due (130, 143). It is remembered too, and raised again."""

    def __init__(self, f) -> None:
        self.f = f
        self.error: Optional[BaseException] = None

    def write(self, data) -> int:
        try:
            return self.f.write(data)
        except BaseException as e:
            self.error = e
            raise

    def flush(self) -> None:
        try:
            self.f.flush()
        except BaseException as e:
            self.error = e
            raise


def _open_for_writing(path: Path):
    """The file a checkpoint is written to (a seam for fault-injection tests)."""
    return open(path, "wb")


def _write_error(target: Path, cause: BaseException, recorded: Optional[OSError],
                 keep: int = 0) -> CheckpointWriteError:
    err = recorded if recorded is not None else (cause if isinstance(cause, OSError) else None)
    code = getattr(err, "errno", None) or errno.EIO
    reason = "no space left on device" if code == errno.ENOSPC else (
        os.strerror(code) if err is not None else str(cause).splitlines()[0])
    advice = ""
    if code in NO_ROOM and keep > 0:
        # The oldest is deleted only once the new one is whole (a failed write keeps every one),
        # so a disk with room for exactly K checkpoints fails at the next: say how many must fit.
        advice = (f"; with --keep-checkpoints {keep}, {keep + 1} checkpoints must fit (the oldest is "
                  f"deleted after the new one is written): free space"
                  + (" or lower --keep-checkpoints" if keep > 1 else ""))
    return CheckpointWriteError(code, f"cannot write checkpoint {target}: {reason} "
                                      f"(the previous checkpoints are intact){advice}")


def save_checkpoint(folder: str | Path, step: int, payload: Dict[str, Any], keep: int = 3) -> Path:
    """Write ``payload`` as the checkpoint of ``step`` atomically; keep the newest ``keep``.

    Raises :class:`CheckpointWriteError` (an OSError: errno ENOSPC when the disk is full)
    naming the checkpoint; nothing under the real name is changed then.
    """
    folder = Path(folder)
    target = checkpoint_path(folder, step)
    tmp = None
    recorder = None
    if keep > 0:
        # Those past the newest ``keep`` (a run resumed with a lower --keep-checkpoints, as a
        # full disk's error advises) go before the write, which they would not outlive: kept
        # until after it, they filled the disk again and the advice made no room.
        for old in list_checkpoints(folder)[:-keep]:
            old.unlink(missing_ok=True)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = atomic_target(target)
        with _open_for_writing(tmp) as f:
            recorder = _RecordingFile(f)
            # (torch.save needs only write and flush of its file, which the recorder has)
            torch.save({"format": FORMAT, **payload}, cast(IO[bytes], recorder))
            recorder.flush()
            os.fsync(f.fileno())
        atomic_commit(tmp, target)
    except (OSError, RuntimeError) as e:
        recorded = recorder.error if recorder else None
        if recorded is not None and not isinstance(recorded, Exception):   # an interrupt: itself
            raise recorded from None
        raise _write_error(target, e, recorded if isinstance(recorded, OSError) else None, keep) from e
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    if keep > 0:
        for old in list_checkpoints(folder)[:-keep]:
            old.unlink(missing_ok=True)
    return target


def _first_line(e: BaseException) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


def _refused_object(e: BaseException) -> str:
    """The weights-only unpickler's own line naming what it refused (its first line only
    advises loading the file unsafely, which must not be repeated to a user)."""
    for line in str(e).splitlines():
        if "GLOBAL" in line or "nsupported" in line:
            return line.strip().rstrip(".")
    return "an object the weights-only loader does not accept"


def load_checkpoint(path: str | Path) -> Dict[str, Any]:
    """Read a checkpoint with the weights-only unpickler; ``config`` comes back as a dict.

    Raises :class:`CheckpointError` naming the file for anything else: a file holding other
    objects (crafted, or not written by this library: it is never unpickled), a truncated or
    corrupt file, or one without the keys a checkpoint has.
    """
    path = Path(path)
    damage = zip_damage(path)   # (torch.load checks none of it: see elmo.zip_records)
    if damage is not None:
        raise CheckpointError(f"{path}: not a readable checkpoint, truncated or corrupt: {damage}; "
                              f"delete it to resume from the one before")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointError(
            f"{path}: refused to load: it holds objects other than tensors, numbers, strings and "
            f"containers ({_refused_object(e)}). elmo's checkpoints never do; if an older version wrote it, "
            f"the checkpoint format changed: delete it or use a new run folder") from None
    except OSError as e:
        if e.filename is not None:   # (the OS's own error, which names the file: unreadable, say)
            raise
        # (torch's reader of a zip cut short says "[Errno 22] Invalid argument", naming nothing)
        raise CheckpointError(f"{path}: not a readable checkpoint, truncated or corrupt ({_first_line(e)}); "
                              f"delete it to resume from the one before") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError) as e:
        raise CheckpointError(f"{path}: not a readable checkpoint, truncated or corrupt ({_first_line(e)}); "
                              f"delete it to resume from the one before") from None
    if not isinstance(ckpt, dict):
        raise CheckpointError(f"{path}: not a checkpoint (it holds a {type(ckpt).__name__}, not a dict)")
    missing = [k for k in _REQUIRED if k not in ckpt]
    if missing:
        raise CheckpointError(f"{path}: not a checkpoint of elmo train (missing {', '.join(missing)})")
    version = ckpt.get("format", 1)
    if version not in (1, FORMAT):
        raise CheckpointError(f"{path}: checkpoint format {version}; this version reads formats 1 and {FORMAT}")
    config = ckpt.get("config")
    if isinstance(config, str):
        try:
            ckpt["config"] = json.loads(config)
        except json.JSONDecodeError as e:
            raise CheckpointError(f"{path}: its config is not valid JSON ({e})") from None
    return ckpt


def rng_state(device: torch.device) -> Dict[str, torch.Tensor]:
    """The random generators' states, as uint8 tensors."""
    state = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: Dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def contents_problem(saved: Any, template: Any, where: str) -> Optional[str]:
    """Where ``saved``, a part of a loaded checkpoint, is not of the form of ``template``, the
    same part as this run writes it (its batches' position, its generators' states): what is
    wrong at which key, else None. A damaged or hand-edited value (a word that is a number, a
    generator state of another size) was restored as it was and failed steps later in a
    traceback of the code that used it, naming no file.

    Dicts must hold the template's keys (more are let be); the items of a list are held to the
    template's first item; tensors to its dtype and shape; numbers, strings and switches to its
    type (a float may be given as an int, never as NaN or inf). A None in the template says
    nothing."""
    if template is None:
        return None
    if isinstance(template, dict):
        if not isinstance(saved, dict):
            return f"{where} is {type(saved).__name__}, expected a dict"
        for key, value in template.items():
            if key not in saved:
                return f"{where}[{key!r}] is missing"
            problem = contents_problem(saved[key], value, f"{where}[{key!r}]")
            if problem is not None:
                return problem
        return None
    if isinstance(template, (list, tuple)):
        if not isinstance(saved, (list, tuple)):
            return f"{where} is {type(saved).__name__}, expected a list"
        for i, item in enumerate(saved if template else ()):
            problem = contents_problem(item, template[0], f"{where}[{i}]")
            if problem is not None:
                return problem
        return None
    return _leaf_problem(saved, template, where)


def _leaf_problem(saved: Any, template: Any, where: str) -> Optional[str]:
    """:func:`contents_problem` of a tensor, number, string or switch."""
    if isinstance(template, torch.Tensor):
        if not isinstance(saved, torch.Tensor) or saved.dtype != template.dtype or saved.shape != template.shape:
            got = (f"a {saved.dtype} tensor of shape {tuple(saved.shape)}" if isinstance(saved, torch.Tensor)
                   else type(saved).__name__)
            return f"{where} is {got}, expected a {template.dtype} tensor of shape {tuple(template.shape)}"
        return None
    kinds = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}
    allowed = next((k for t, k in kinds.items() if type(template) is t), None)
    if allowed is None:
        return None
    if type(saved) not in allowed or isinstance(saved, float) and not math.isfinite(saved):
        return f"{where} is {saved!r}, expected {'a number' if allowed[-1] is float else allowed[0].__name__}"
    return None
