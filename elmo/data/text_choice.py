"""Checks of the text a command is given, before it reads it: a folder or glob that takes in
a whole corpus folder (``train.txt`` beside its held-out text, the layout ``elmo data
build-corpus`` writes), and held-out text that is also training text.

Every file below a folder, or matching a glob, is read as text (:func:`.corpus.expand_paths`),
so ``elmo train corpus/`` on a built corpus trained on its held-out sentences (a perplexity
measured on them later was on training text) and on ``stats.json``'s lines as sentences.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from .corpus import expand_paths

#: The files of a corpus folder that ``elmo data build-corpus`` writes (see :mod:`.corpus_build`).
TRAIN_FILE, HELDOUT_FOLDER, STATS_FILE = "train.txt", "heldout", "stats.json"
#: What a command's message suggests instead, for its kind of text (the root is filled in).
TRAINING_HINT = "give {root}/train.txt as the training text (and {root}/heldout/ files as held-out text)"
HELDOUT_HINT = "give {root}/heldout/ or its files as held-out text ({root}/train.txt is training text)"


def _corpus_part(path: Path) -> Optional[Tuple[Path, str]]:
    """(corpus folder, part) where ``path`` is the training text, a held-out file or the
    statistics of a corpus folder: one with a ``train.txt`` and a ``stats.json`` or a
    ``heldout/`` folder beside it (an unfinished build has no ``stats.json`` yet). Else None."""
    parent = path.parent
    if parent.name == HELDOUT_FOLDER and _is_corpus_folder(parent.parent):
        return parent.parent, HELDOUT_FOLDER
    if path.name in (TRAIN_FILE, STATS_FILE) and _is_corpus_folder(parent):
        return parent, path.name
    return None


def _is_corpus_folder(folder: Path) -> bool:
    return (folder / TRAIN_FILE).is_file() and ((folder / STATS_FILE).is_file() or (folder / HELDOUT_FOLDER).is_dir())


def check_not_whole_corpus(option: str, patterns: Sequence[str | os.PathLike], hint: str = TRAINING_HINT) -> None:
    """Refuse a folder or glob of ``patterns`` that takes in a corpus folder's ``stats.json``,
    or its ``train.txt`` together with held-out files, naming it (``option``) and the corpus
    folder; ``hint`` says what to give instead. A file named on its own is taken as it is."""
    for pattern in patterns:
        if Path(pattern).is_file():
            continue
        parts: Dict[Path, Set[str]] = {}
        for path in expand_paths([pattern]):   # (a pattern that finds nothing is named there)
            found = _corpus_part(path)
            if found is not None:
                parts.setdefault(found[0], set()).add(found[1])
        for root, kinds in parts.items():
            if STATS_FILE in kinds or {TRAIN_FILE, HELDOUT_FOLDER} <= kinds:
                raise ValueError(f"{option} {pattern}: takes in the whole corpus folder {root} (its train.txt, "
                                 f"held-out text in heldout/ and stats.json, every file read as text); "
                                 f"{hint.format(root=root)}")


def check_heldout_not_training(option: str, train_files: Sequence[Path], held_files: Sequence[Path]) -> None:
    """Refuse held-out text (``option``'s files) that is also training text: the same file by
    any path or link (a folder or glob of training text that holds it included). Its perplexity
    was reported as held-out though the model had trained on it."""
    trained = {_identity(path): path for path in train_files}
    for held in held_files:
        also = trained.get(_identity(held))
        if also is not None:
            raise ValueError(f"{option} {held}: is also training text (the training file {also}); a held-out "
                             f"perplexity needs text the model does not train on")


def _identity(path: Path) -> Tuple[int, int]:
    """One file's identity, shared by its links and its other paths."""
    st = os.stat(path)
    return st.st_dev, st.st_ino


def trained_files(files: Sequence[Path], metadata: Mapping[str, Any]) -> List[Path]:
    """The files of ``files`` that a model's ``metadata.json`` says its weights trained on
    (:func:`trained_text`)."""
    # (a shipped model records its files under the home folder as "~/...": elmo.training.ship)
    named = {str(Path(p).expanduser().resolve()) if p.startswith("~/") else p for p in trained_text(metadata)}
    return [path for path in files if str(Path(path).resolve()) in named]


def trained_text(metadata: Mapping[str, Any]) -> Set[str]:
    """Every text file (absolute paths) that a model's ``metadata.json`` says its weights
    trained on, in every phase: its ``trained_on``, the files of its ``adapted_on`` records,
    and those of the model it started from, which ``elmo finetune`` keeps in
    ``base_metadata`` and a warm start (``train --from``) in ``warm_start``'s ``trained_on``.
    (Only this phase's were taken: an adapted model's perplexity on its start model's
    training text was shown as held-out.) What is not a list of paths is passed over."""
    named: Set[str] = set()
    todo: List[Any] = [metadata]
    while todo:
        meta = todo.pop()
        if not isinstance(meta, Mapping):
            continue
        named.update(_paths(meta.get("trained_on")))
        for record in _listed(meta.get("adapted_on")):
            if isinstance(record, Mapping):
                named.update(_paths(record.get("files")))
        todo += [meta.get("base_metadata"), meta.get("warm_start")]
    return named


def _listed(value: Any) -> List[Any]:
    """``value`` where it is a list, else none (a damaged record names nothing)."""
    return value if isinstance(value, list) else []


def _paths(value: Any) -> List[str]:
    """The strings of ``value`` where it is a list."""
    return [path for path in _listed(value) if isinstance(path, str)]
