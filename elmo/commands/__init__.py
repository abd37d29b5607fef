"""Subcommands of the ``elmo`` CLI, grouped by the library area they drive (see elmo/cli.py)."""
from __future__ import annotations

import sys


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
    (``"file"`` or ``"folder"``)."""
    if value is not None and str(value) == "-":
        raise ValueError(f"{name} '-': {why} (./- names a {kind} called '-')")
