"""A leading ``~`` in a path the user typed is a home folder, as a shell makes it.

The shell expands ``~/runs`` on the command line, but not in every spelling a user types:
``--output=~/runs`` and ``"~/runs"`` (quoted) reach the command as they are, and so does every
path in a config file. Taken literally, such a path made a folder named ``~`` in the working
folder (``elmo embed in.txt '~/out.hdf5'`` wrote ``./~/out.hdf5``), the folder that a later
``rm -rf ~`` meant for it deletes the user's home instead.

The rule, the same for every command: a path given on the command line (:func:`expand_args`;
the ``python -m`` scripts under :mod:`elmo` too, which parse their own arguments)
or in a config file (a job's ``--config``, an experiment's config) has its leading ``~`` or
``~user`` expanded as a shell would (:func:`os.path.expanduser`); a ``~user`` of no such user is
an error rather than a folder of that name. A folder really named ``~`` is spelled ``./~``.
No variable is expanded: a path that begins with ``$`` (``"$HOME/runs"`` in a config file) is
an error, not a folder named ``$HOME`` (``./$HOME`` names one). The Python API takes its paths
as :func:`open` does, as they are.
"""
from __future__ import annotations

import argparse
import os
from pathlib import PurePath
from typing import Any, Dict, MutableMapping

__all__ = ["PATH_SETTINGS", "PathSettingError", "expand_args", "expand_home", "expand_settings"]

#: The argparse destinations (the elmo command's and the scripts') and job-config settings that hold paths (files, folders, globs,
#: or a model that may be a folder). A value that does not begin with "~" is never changed,
#: so a model's or a corpus's name among them is kept as it is.
PATH_SETTINGS = frozenset({
    "bilm", "candidate", "config", "config_file", "contrast_file", "corpus", "counts", "dest", "glove",
    "heldout", "index_dir", "init_from", "input", "log", "mix_weights", "model", "neighbors_corpus",
    "options", "out", "output", "reference", "results", "similarity_corpus", "src", "text", "train",
    "valid", "vocab",
})


def expand_home(value: Any) -> Any:
    """``value`` (a path as text or a :class:`~pathlib.PurePath`, or a list of them) with a leading ``~`` or ``~user`` expanded; any
    other value as it is. Raises ValueError for a ``~user`` of no such user and for a path
    that begins with ``$`` (either would be a folder of that name in the working folder)."""
    if isinstance(value, list):
        return [expand_home(v) for v in value]
    if isinstance(value, PurePath):   # (a script's argparse type=Path: Path("~/x") is still "~/x")
        return type(value)(expand_home(str(value)))
    if isinstance(value, str) and value.startswith("$"):
        # (a config file's "$HOME/runs" made a folder named "$HOME", as "~/runs" made one "~")
        raise ValueError(f"{value}: a shell variable, which no shell expanded here (a config file's, or a "
                         f"quoted one); write the path itself (~ is the home folder), or ./{value} for a "
                         f"folder of that name")
    if not isinstance(value, str) or not value.startswith("~"):
        return value
    expanded = os.path.expanduser(value)
    if expanded.startswith("~"):   # (expanduser leaves an unknown user's ~name as it is)
        user = value[1:].split("/", 1)[0]
        raise ValueError(f"{value}: no user {user!r} for '~{user}' to stand for; write ./{value} for a "
                         f"folder of that name in the working folder")
    return expanded


class PathSettingError(ValueError):
    """A path setting that :func:`expand_home` refuses; ``name`` is the setting's."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name


def expand_settings(values: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """``values`` (settings by name) with the paths among them expanded (:func:`expand_home`),
    in place; returned for convenience. A refused one raises :class:`PathSettingError` naming
    the setting, for the caller to say where its value came from."""
    for name in sorted(PATH_SETTINGS.intersection(values)):
        try:
            values[name] = expand_home(values[name])
        except ValueError as e:
            raise PathSettingError(name, str(e)) from None
    return values


def expand_args(args: argparse.Namespace) -> argparse.Namespace:
    """The parsed command line with its paths expanded (:func:`expand_home`), in place."""
    values: Dict[str, Any] = vars(args)
    expand_settings(values)
    return args
