"""Training checkpoints: one file per saved step, written atomically, the last K kept.

A checkpoint ``checkpoint-00001200.pt`` holds everything an exact resume needs:

* ``model``, ``optimizer``: the state dicts (one copy: data parallelism keeps them equal);
* ``step``, ``tokens``, ``elapsed``: progress;
* ``ranks``: for every rank, its batch iterator (stream position and unread tokens of each
  row), its carried LSTM state, and its random generators (torch CPU/CUDA for dropout, the
  negative sampler).

Files are written to a temporary name and renamed, so a kill at any moment leaves either the
previous set of checkpoints or the new one, never a partial file under the real name.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from ..weights import atomic_commit, atomic_target

_NAME = re.compile(r"^checkpoint-(\d{8})\.pt$")


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


def save_checkpoint(folder: str | Path, step: int, payload: Dict[str, Any], keep: int = 3) -> Path:
    """Write ``payload`` as the checkpoint of ``step`` atomically; keep the newest ``keep``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = checkpoint_path(folder, step)
    tmp = atomic_target(target)
    try:
        with open(tmp, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        atomic_commit(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    if keep > 0:
        for old in list_checkpoints(folder)[:-keep]:
            old.unlink(missing_ok=True)
    return target


def load_checkpoint(path: str | Path) -> Dict[str, Any]:
    # Our own files; they hold plain containers, tensors and numbers.
    return torch.load(path, map_location="cpu", weights_only=False)


def rng_state(device: torch.device) -> Dict[str, Any]:
    state = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: Dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)
