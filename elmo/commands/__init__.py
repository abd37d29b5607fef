"""Subcommands of the ``elmo`` CLI, grouped by the library area they drive (see elmo/cli.py)."""
from __future__ import annotations

import os
import sys

from ..jobconfig import DEVICE_CHOICES


def progress_bar_wanted(asked: bool) -> bool:
    """Whether a command shows its progress bar: asked for (no --quiet / --no-progress) and
    stderr a terminal. Written to a log file or a pipe, a bar is a line that grows by a redrawn
    copy of itself ten times a second (megabytes of carriage returns in an overnight run's
    log); the command's other notes are still written there. The library's own ``progress``
    settings do not look at the terminal (a notebook's stderr is no terminal)."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(asked and isatty is not None and isatty())


def refuse_dash(value, name: str, why: str, kind: str = "file") -> None:
    """Refuse ``-`` (stdin or stdout by the usual convention) where a command needs a file or
    folder: it was taken as a path and wrote a file or folder named ``-``. ``./-`` still names
    one. ``why`` says why and what to give instead; ``kind`` is what a path names there
    (``"file"`` or ``"folder"``).

    A file's name that ends in "/" is refused too: it names a folder, which the shell and the
    OS refuse as a file (``cat in.txt/``), but :class:`pathlib.Path` drops the "/", and
    ``elmo embed in.txt vectors/`` wrote a file named ``vectors``."""
    if value is not None and str(value) == "-":
        raise ValueError(f"{name} '-': {why} (./- names a {kind} called '-')")
    if kind == "file" and isinstance(value, str) and value.endswith(("/", os.sep)):
        raise ValueError(f"{name} {value!r}: ends in '/', which names a folder; give the file's name")


#: What ``--device`` takes, as every command that has it says (embed's help comes from
#: EmbedConfig and experiment's adds its own default: all from the one DEVICE_CHOICES)
DEVICE_HELP = f"{DEVICE_CHOICES} (default auto)"


#: ``default`` of :func:`threads_help` where the command leaves the count to torch
TORCH_CHOICE = "torch's choice"


def threads_help(default: str, why: str = "") -> str:
    """The help of a command's ``--threads``: every command reads 0 as torch's choice (its
    default thread count), which no help said, and the defaults differ (``default``)."""
    if default == TORCH_CHOICE:
        return f"torch CPU threads (default and 0: {TORCH_CHOICE}){why}"
    return f"torch CPU threads (default {default}; 0: {TORCH_CHOICE}){why}"


def set_cli_threads(threads) -> None:
    """Use ``--threads`` torch threads (None or 0: torch's choice); a bad count is an error
    naming ``--threads`` (the library's names the parameter, ``threads``)."""
    from ..runtime import set_threads
    set_threads(threads, "--threads")


def cli_device(device: str):
    """``--device`` as a torch device (:func:`elmo.runtime.resolve_device`): a name torch does
    not know, or a device this machine lacks, is one line naming ``--device``.

    For the single-process commands (predict, analyze, neighbors, perplexity, experiment): a
    bare ``cuda`` and ``auto`` are ``cuda:0`` (local rank 0), the first GPU that
    ``CUDA_VISIBLE_DEVICES`` leaves, which is also torch's current GPU in a fresh process.
    LOCAL_RANK is not read: these commands do not shard their work across torchrun's ranks."""
    from ..runtime import resolve_device
    return resolve_device(device, what="--device")   # (local_rank 0: see above)
