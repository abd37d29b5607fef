"""The checks of an output before any work, and a write's OSError as one line naming the output.

* :func:`check_output_file` / :func:`check_output_dir`: an output path that cannot become a
  file (a directory, a device) or a folder (a file, a link to nothing), or that is a bundled
  model's (:func:`elmo.io.refuse_bundled`), is refused before the command starts its work.
* :func:`check_replaceable`: an existing file that is not what the command writes (a text file
  given to ``-o`` by mistake) is kept.
* :func:`refuse_replacing_inputs` / :func:`same_file`: an output that names one of the
  command's inputs (through a symbolic link, a relative path or a hard link) is refused.
* :func:`writing`: an OSError of a write (a full disk, a read-only folder) as one
  :class:`elmo.io.OutputError` naming the output; :func:`make_folder` likewise for a folder.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Optional, Tuple

from .io import OutputError, found_no_room, os_error_reason, refuse_bundled, refuse_special


def check_output_file(path: Path, what: str = "output") -> None:
    """Refuse, before any work, an output path that cannot become a file: a directory, or a
    folder that is a file, or a bundled model's file. (Write permission is found out by taking the lock.)"""
    refuse_bundled(path, what)
    if path.is_dir():
        raise OutputError(f"{path}: is a directory; the {what} must be a file path")
    refuse_special(path)
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
    one-line :class:`elmo.io.OutputError` naming ``path``, ``what`` was being written and the reason.
    ``hint`` ends the line; ``full_hint`` instead where the disk (or quota) had no room
    (:data:`elmo.io.NO_ROOM`): "a writable folder" points the wrong way for a full one."""
    try:
        yield
    except OutputError:
        raise
    except OSError as e:
        if full_hint is not None and found_no_room(e):
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
