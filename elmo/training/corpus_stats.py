"""The size of a run's training text (sentences, tokens, the bucketed layout's pieces), which
plans its steps: kept in ``OUTPUT/corpus_stats.json`` with the files it was counted on, read
back when they are the same, and refused on resume when the text changed since the run began."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..data.corpus import corpus_files, count_tokens, same_corpus_files
from ..data.lm_batches import MAX_PIECE_LENGTH
from ..io import atomic_write_text
from ..text_files import read_json
from .checkpoint import writing
from .resume import ResumeMismatch, within_run

#: The counts the file keeps (an earlier version's lacks ``pieces``).
COUNTS = ("sentences", "tokens", "pieces")


@dataclass
class CorpusStats:
    """What :func:`read_corpus_stats` found. ``counts``: ``sentences``, ``tokens`` and
    ``pieces``; ``files``: the text's files as they are now (paths, sizes and sampled bytes,
    :func:`~elmo.data.corpus.corpus_files`); ``recorded_files``: those the stats file was
    counted on (None: no record); ``begun_counting_sentences``: the run was begun when a
    bucketed epoch counted sentences, not pieces. ``path``: the stats file; ``damage``: why
    it holds no usable record of the files though it is there (one line naming it), else None."""

    counts: Dict[str, int]
    files: List[Any]
    recorded_files: Any
    begun_counting_sentences: bool
    path: Optional[Path] = None
    damage: Optional[str] = None


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _files_record(recorded: Any, path: Path) -> Tuple[Optional[List[Any]], Optional[str]]:
    """(the record of the files in ``recorded``, the stats file's contents read back, or None;
    why it is no record, or None). A record of an earlier version is a list of [path, size]."""
    if not isinstance(recorded, dict):
        return None, (f"{path}: not the record of the run's corpus (a JSON object is needed, got "
                      f"{type(recorded).__name__})")
    files = recorded.get("files")
    if files is None:   # (a run begun before the files were recorded)
        return None, None
    if isinstance(files, list) and all(isinstance(e, list) and len(e) >= 2 and isinstance(e[0], str)
                                       and _is_count(e[1]) for e in files):
        return files, None
    return None, f"{path}: its \"files\" is not the record of the training files (a list of [path, size, digest])"


def read_corpus_stats(train: Sequence[str], stats_path: Path) -> CorpusStats:
    """The corpus's sentences and tokens: from ``stats_path`` when it was counted on these very
    files (paths, sizes and sampled bytes, :func:`corpus_files`) and holds counts, else counted
    again. (A stale file, left by an earlier attempt on another text, set the epochs' step
    count.) A damaged file is counted again too; :func:`check_text_unchanged` refuses to resume
    on it, as it cannot tell whether the text changed."""
    files = corpus_files(train)
    damage = None
    try:   # (a cache for a new run: absent, a folder, damaged or another tool's, it is counted again)
        recorded = read_json(stats_path) if stats_path.exists() or stats_path.is_symlink() else {}
    except ValueError as e:
        recorded, damage = None, str(e)
    recorded_files, shape = _files_record(recorded, stats_path) if damage is None else (None, None)
    damage = damage or shape
    recorded = recorded if isinstance(recorded, dict) else {}
    # A run begun before the pieces were counted planned its bucketed epochs in sentences:
    # resumed, it keeps that step count (see TrainingRun._keep_epoch_rows), recorded by
    # write_corpus_stats as epoch_rows so that its later sessions keep it too.
    same_files = same_corpus_files(recorded_files, files)
    begun_counting_sentences = same_files and (
        "pieces" not in recorded or recorded.get("epoch_rows") == "sentences")
    # (a file of an earlier version, without the bucketed layout's pieces, is counted again; so
    # are counts edited into no counts: a string, a NaN, a negative number)
    if same_files and all(_is_count(recorded.get(k)) for k in COUNTS):
        counts = {k: recorded[k] for k in COUNTS}
    else:
        counts = count_tokens(train, piece_length=MAX_PIECE_LENGTH)
    if not counts["sentences"]:   # (found at the first batch: after a config and a log were written)
        raise ValueError(f"training text {' '.join(train)}: holds no sentence to train on (only empty "
                         f"or blank lines)")
    return CorpusStats(counts, files, recorded_files, begun_counting_sentences, stats_path, damage)


def write_corpus_stats(stats_path: Path, stats: CorpusStats, epoch_rows: str) -> None:
    """``stats_path`` (``corpus_stats.json``): the counts and the files they were counted on,
    and ``epoch_rows`` where a run's epochs count sentences (see :func:`read_corpus_stats`)."""
    with writing(stats_path):
        kept = {"epoch_rows": "sentences"} if epoch_rows == "sentences" else {}
        atomic_write_text(stats_path, json.dumps({**stats.counts, **kept, "files": stats.files}) + "\n")


def check_text_unchanged(stats: CorpusStats, out_dir: Path, is_main: bool = True, began_in: Any = None) -> None:
    """Refuse to resume on training text that changed since the run recorded it: the
    stream's position (shard, sentence) would point into other text, silently. A stats file
    that is there but holds no record of the files (damaged, edited, another tool's) is
    refused too, naming it: whether the text changed cannot be told. One that is not there, or
    a run's begun before the files were recorded, resumes with a note (rank 0, ``is_main``,
    says it). ``began_in``: the run folder as the run's settings name it (``output``): files
    recorded inside it are the files of the folder where it is now (finetune's text, of a run
    folder moved elsewhere)."""
    if stats.damage is not None:
        raise ResumeMismatch(f"cannot resume {out_dir}: {stats.damage}, so whether the training text changed "
                             f"since the run began cannot be checked; put back the run's own file, or delete it "
                             f"to resume without that check")
    if stats.recorded_files is None:
        if is_main:
            print(f"note: {stats.path}: holds no record of the training files (deleted, or written by an "
                  f"earlier version), so whether the text changed since the run began cannot be checked; "
                  f"the run goes on at its checkpoint's position in the text as it is now",
                  file=sys.stderr, flush=True)
        return
    recorded = [_moved(entry, began_in, out_dir) for entry in stats.recorded_files]
    if same_corpus_files(recorded, stats.files):
        return
    then = {entry[0]: entry[1:] for entry in recorded}
    now = {path: rest[:len(then.get(path, rest))] for path, *rest in stats.files}
    path = next(p for p in sorted(set(then) | set(now)) if then.get(p) != now.get(p))
    what = (f"{then[path][0]:,} bytes then, {now[path][0]:,} now" if path in then and path in now
            and then[path][0] != now[path][0]
            else "the same size, other bytes: rewritten or reshuffled" if path in then and path in now
            else "a file added since" if path in now
            # (a run begun when a file named twice was read twice: it is read once now)
            else "the same file as another one named, read once now" if _named_now(path, now)
            else "a file of the text then, not named now" if Path(path).exists()
            else "no longer there")
    raise ResumeMismatch(f"cannot resume {out_dir}: the training text has changed since the run "
                         f"began ({path}: {what}), as {stats.path} records it; rerun with the text it was "
                         f"started with, or use another --output")


def _moved(entry: List[Any], began_in: Any, out_dir: Path) -> List[Any]:
    """A recorded file's ``entry`` with its path inside the run folder ``began_in`` made the
    same path inside ``out_dir``, where the folder is now."""
    rel = within_run(entry[0], began_in)
    return entry if rel is None else [str(out_dir / rel), *entry[1:]]


def _named_now(path: str, now: Dict[str, Any]) -> bool:
    """Whether ``path`` is the same file as one of the files read now (``now``'s keys), by
    another name (a link). (Another run's record, copied in, named a file that is still there
    but no part of this text: it was said to be "the same file as another one named".)"""
    if not Path(path).is_file():
        return False
    try:
        return any(os.path.samefile(path, other) for other in now)
    except OSError:   # (a file of the text gone meanwhile)
        return False
