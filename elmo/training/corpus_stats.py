"""The size of a run's training text (sentences, tokens, the bucketed layout's pieces), which
plans its steps: kept in ``OUTPUT/corpus_stats.json`` with the files it was counted on, read
back when they are the same, and refused on resume when the text changed since the run began."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence

from ..data.corpus import corpus_files, count_tokens, same_corpus_files
from ..data.lm_batches import MAX_PIECE_LENGTH
from ..io import atomic_write_text
from ..text_files import read_json
from .checkpoint import writing
from .resume import ResumeMismatch


@dataclass
class CorpusStats:
    """What :func:`read_corpus_stats` found. ``counts``: ``sentences``, ``tokens`` and
    ``pieces``; ``files``: the text's files as they are now (paths, sizes and sampled bytes,
    :func:`~elmo.data.corpus.corpus_files`); ``recorded_files``: those the stats file was
    counted on (None: no record); ``begun_counting_sentences``: the run was begun when a
    bucketed epoch counted sentences, not pieces."""

    counts: Dict[str, int]
    files: List[Any]
    recorded_files: Any
    begun_counting_sentences: bool


def read_corpus_stats(train: Sequence[str], stats_path: Path) -> CorpusStats:
    """The corpus's sentences and tokens: from ``stats_path`` when it was counted on these very
    files (paths, sizes and sampled bytes, :func:`corpus_files`), else counted again. (A stale
    file, left by an earlier attempt on another text, set the epochs' step count.)"""
    files = corpus_files(train)
    try:   # (a cache, tolerated: absent, a folder, damaged or another tool's, it is counted again)
        recorded = read_json(stats_path)
    except ValueError:  # none yet, or not ours: counted again, and rewritten
        recorded = {}
    recorded_files = recorded.get("files") if isinstance(recorded, dict) else None
    # A run begun before the pieces were counted planned its bucketed epochs in sentences:
    # resumed, it keeps that step count (see TrainingRun._keep_epoch_rows), recorded by
    # write_corpus_stats as epoch_rows so that its later sessions keep it too.
    same_files = same_corpus_files(recorded_files, files)
    begun_counting_sentences = same_files and (
        "pieces" not in recorded or recorded.get("epoch_rows") == "sentences")
    # (a file of an earlier version, without the bucketed layout's pieces, is counted again)
    if same_files and "pieces" in recorded:
        counts = {k: recorded[k] for k in ("sentences", "tokens", "pieces")}
    else:
        counts = count_tokens(train, piece_length=MAX_PIECE_LENGTH)
    if not counts["sentences"]:   # (found at the first batch: after a config and a log were written)
        raise ValueError(f"training text {' '.join(train)}: holds no sentence to train on (only empty "
                         f"or blank lines)")
    return CorpusStats(counts, files, recorded_files, begun_counting_sentences)


def write_corpus_stats(stats_path: Path, stats: CorpusStats, epoch_rows: str) -> None:
    """``stats_path`` (``corpus_stats.json``): the counts and the files they were counted on,
    and ``epoch_rows`` where a run's epochs count sentences (see :func:`read_corpus_stats`)."""
    with writing(stats_path):
        kept = {"epoch_rows": "sentences"} if epoch_rows == "sentences" else {}
        atomic_write_text(stats_path, json.dumps({**stats.counts, **kept, "files": stats.files}) + "\n")


def check_text_unchanged(stats: CorpusStats, out_dir: Path) -> None:
    """Refuse to resume on training text that changed since the run recorded it: the
    stream's position (shard, sentence) would point into other text, silently."""
    if stats.recorded_files is None or same_corpus_files(stats.recorded_files, stats.files):
        return  # (a run begun before the files were recorded: not known)
    then = {entry[0]: entry[1:] for entry in stats.recorded_files}
    now = {path: rest[:len(then.get(path, rest))] for path, *rest in stats.files}
    path = next(p for p in sorted(set(then) | set(now)) if then.get(p) != now.get(p))
    what = (f"{then[path][0]:,} bytes then, {now[path][0]:,} now" if path in then and path in now
            and then[path][0] != now[path][0]
            else "the same size, other bytes: rewritten or reshuffled" if path in then and path in now
            else "a file added since" if path in now
            # (a run begun when a file named twice was read twice: it is read once now)
            else "the same file as another one named, read once now" if Path(path).is_file()
            else "no longer there")
    raise ResumeMismatch(f"cannot resume {out_dir}: the training text has changed since the run "
                         f"began ({path}: {what}); rerun with the text it was started with, or use "
                         f"another --output")
