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
