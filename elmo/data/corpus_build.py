"""Build the language-model training corpus from the raw-text sources.

Steps, in order, for each source of :data:`LM_SOURCES`:

1. **Clean**: keep sentences of 3 to 250 tokens where at least half the tokens are words, at
   least 90% of the letters are Latin, and which are not written all in capitals (headings,
   lists of persons).
2. **Exclude task text**: drop every sentence that equals a sentence of a labelled task, or
   shares any run of :data:`NGRAM` tokens with one (case-insensitive). The task text is
   *all* of every task (Twitter NER, movie-review sentiment, BBC topic, VitaminC, SQuAD
   dev, the WordNet example sentences) plus the Brown *dev* and *test* files; only the Brown
   *train* files enter the LM corpus.
3. **Hold out** whole blocks of up to :data:`BLOCK` consecutive sentences, chosen by a hash
   of (source, document, block), until the source's held-out part reaches
   ``min(HELDOUT_FRACTION * tokens, HELDOUT_MAX_TOKENS)`` tokens.
4. **Deduplicate** (case-insensitive, exact sentence): held-out sentences first, then the
   training sentences; a sentence seen before anywhere is dropped.

Output under ``$ELMO_DATA/corpus/``: ``train.txt`` (all training sentences, shuffled with
``seed``), ``heldout/<source>.txt`` (in source order) and ``stats.json``.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import time
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..io import atomic_commit, atomic_target, atomic_write_text, no_empty_folder_on_failure, os_error_reason
from ..output_checks import check_output_dir, writing
from ..output_lock import output_lock
from . import readers
from .corpus_sources import LM_SOURCES, TASK_SOURCES, source_names
from .fetch import DataError, PackageWithdrawn, data_home
from .sources import count_words, get, source_dir

NGRAM = 13
BLOCK = 20
HELDOUT_FRACTION = 0.05
HELDOUT_MAX_TOKENS = 30_000
MIN_TOKENS, MAX_TOKENS = 3, 250


# ----------------------------------------------------------------------------- cleaning
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
_LETTER = re.compile(r"[^\W\d_]")


def keep_sentence(tokens: Sequence[str]) -> bool:
    """The cleaning rule of step 1."""
    n = len(tokens)
    if n < MIN_TOKENS or n > MAX_TOKENS:
        return False
    if count_words(tokens) * 2 < n:
        return False
    text = "".join(tokens)
    letters = _LETTER.findall(text)
    if not letters:
        return False
    if len(_LATIN.findall(text)) < 0.9 * len(letters):
        return False
    if len(letters) >= 8 and all(c.isupper() for c in letters if c.isalpha()):
        return False
    return True


# ----------------------------------------------------------------------------- task text
def task_sentences(name: str, path: Path) -> Iterator[List[str]]:
    """Token lists of the text in one standard-form task file (see :mod:`.sources`)."""
    if path.suffix == ".txt":
        for doc in readers.read_documents(path):
            yield from doc
    elif path.suffix == ".conll":
        for sent in readers.read_conll(path):
            yield [cols[0] for cols in sent]
    elif path.suffix == ".tsv":
        with open(path, encoding="utf-8") as f:
            header = name == "wordnet"
            for i, line in enumerate(f):
                if header and i == 0:
                    continue
                yield line.rstrip("\n").split("\t")[-1].split()
    elif path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                for key in ("title", "claim", "evidence", "question"):
                    if isinstance(rec.get(key), list) and rec[key]:
                        yield rec[key]
                for sent in rec.get("sentences", []):
                    yield sent
                if rec.get("context"):
                    yield from split_on_stops(rec["context"])
    else:
        raise ValueError(f"no task reader for {path}")


def split_on_stops(tokens: Sequence[str]) -> Iterator[List[str]]:
    """Cut a token list after each ``.``, ``!`` or ``?`` (for paragraph-level task text)."""
    cur: List[str] = []
    for t in tokens:
        cur.append(t)
        if t in (".", "!", "?"):
            yield cur
            cur = []
    if cur:
        yield cur


def _key(tokens: Sequence[str]) -> bytes:
    return hashlib.blake2b(" ".join(tokens).lower().encode("utf-8"), digest_size=8).digest()


def _ngram_hashes(tokens: Sequence[str], n: int = NGRAM) -> List[int]:
    low = [t.lower() for t in tokens]
    return [int.from_bytes(hashlib.blake2b("\x00".join(low[i:i + n]).encode("utf-8"),
                                          digest_size=8).digest(), "little")
            for i in range(len(low) - n + 1)]


class TaskFilter:
    """Whole-sentence keys and :data:`NGRAM`-gram hashes of all task text."""

    def __init__(self, sentences: Iterable[Sequence[str]]) -> None:
        keys: Set[bytes] = set()
        grams: List[int] = []
        self.sentences = 0
        for sent in sentences:
            if not sent:
                continue
            keys.add(_key(sent))
            grams.extend(_ngram_hashes(sent))
            self.sentences += 1
        self.keys = keys
        self.grams = np.unique(np.asarray(grams, dtype=np.uint64))

    def overlaps(self, tokens: Sequence[str]) -> bool:
        if _key(tokens) in self.keys:
            return True
        hashes = _ngram_hashes(tokens)
        if not hashes or not len(self.grams):
            return False
        h = np.asarray(hashes, dtype=np.uint64)
        idx = np.searchsorted(self.grams, h)
        idx[idx >= len(self.grams)] = 0
        return bool(np.any(self.grams[idx] == h))


# ----------------------------------------------------------------------------- held-out
def choose_heldout(source: str, docs: Sequence[Sequence[Sequence[str]]],
                   fraction: float = HELDOUT_FRACTION, max_tokens: int = HELDOUT_MAX_TOKENS
                   ) -> Set[Tuple[int, int]]:
    """(document, sentence) positions of the held-out blocks of one source (step 3)."""
    blocks = []
    total = 0
    for d, doc in enumerate(docs):
        for b in range(0, len(doc), BLOCK):
            n = sum(len(s) for s in doc[b:b + BLOCK])
            total += n
            rank = hashlib.sha1(f"{source}:{d}:{b // BLOCK}".encode()).hexdigest()
            blocks.append((rank, d, b, min(b + BLOCK, len(doc)), n))
    target = min(fraction * total, max_tokens)
    chosen: Set[Tuple[int, int]] = set()
    got = 0
    for _, d, start, end, n in sorted(blocks):
        if got >= target:
            break
        chosen.update((d, i) for i in range(start, end))
        got += n
    return chosen


# ----------------------------------------------------------------------------- build
def build_corpus(home: Optional[Path] = None, out: Optional[Path] = None, seed: int = 1234,
                 sources: Optional[Sequence[str]] = None, log=print,
                 skip_unavailable: bool = False) -> dict:
    """Build the corpus (fetching every needed source first) and return its statistics.

    The output folder is made and locked before anything is fetched, so a folder that cannot
    be written, or that another build is writing, fails at once rather than after the
    downloads. Every file is written under a temporary name first, so a failed write (a full
    disk) leaves the earlier build whole; ``stats.json`` is then removed, the files renamed into
    place, and ``stats.json`` written last, so a folder without it holds no finished build. A rebuild deletes the
    held-out files of sources an earlier build had and this one has not, so the folder holds
    the files of this build only, as ``stats.json`` describes them.

    ``skip_unavailable``: a corpus whose pinned package the registry no longer offers
    (:class:`~.fetch.PackageWithdrawn`) is left out, with a warning line, instead of failing
    the build: a raw-text source is not built, and a task corpus's text cannot be excluded.
    ``stats.json`` records both (``left_out``, ``task_text_not_excluded``: name -> reason). Any
    other fetch failure (offline, unreachable registry) still fails, since a rerun may work."""
    names = source_names(sources)   # (before anything is made or fetched)
    home = home or data_home()
    out = out or home / "corpus"
    check_output_dir(out, "corpus folder")
    with no_empty_folder_on_failure(out / "heldout"):   # (a fetch that failed, offline, left it empty)
        with writing(out, "corpus folder"):
            (out / "heldout").mkdir(parents=True, exist_ok=True)
        with output_lock(out / "train.txt", name=out):
            return _build(home, out, seed, names, log, skip_unavailable)


def _fetch_sources(home: Path, names: Sequence[str], skip_unavailable: bool, log) -> Dict[str, str]:
    """Fetch the LM sources ``names`` and every task corpus; return those whose package the
    registry no longer offers (name -> why), each announced in one warning line. Without
    ``skip_unavailable`` the first of them is an error that names the option."""
    unavailable: Dict[str, str] = {}
    for name in sorted(set(names) | set(TASK_SOURCES)):
        try:
            get(name, home, log=log)
        except PackageWithdrawn as e:
            if not skip_unavailable:
                raise PackageWithdrawn(
                    f"{name}: {e}; --skip-unavailable (skip_unavailable=True in Python) builds the "
                    f"corpus without the corpora that can no longer be fetched") from None
            unavailable[name] = str(e)
    if all(name in unavailable for name in names):
        raise DataError("none of the sources " + ", ".join(names) + " can be fetched: no corpus to build")
    for name, why in unavailable.items():
        if name in names:
            log(f"warning: {name} is left out of the corpus: {why}")
        if name in TASK_SOURCES:
            log(f"warning: the text of task {name} is not excluded, so it may be in this corpus; "
                f"experiments on {name} would be contaminated if its data is obtained later by "
                f"hand ({why})")
    return unavailable


def _read_source(name: str, home: Path, task_filter: TaskFilter) -> Tuple[List[List[List[str]]], dict]:
    """Steps 1 and 2 for one source: its documents (lists of kept sentences) and counts."""
    docs = []
    st = {"raw_sentences": 0, "raw_tokens": 0, "raw_words": 0, "dropped_cleaning": 0,
          "dropped_task_overlap": 0}
    for f in LM_SOURCES[name]:
        for doc in readers.read_documents(source_dir(name, home) / f):
            kept = []
            for sent in doc:
                st["raw_sentences"] += 1
                st["raw_tokens"] += len(sent)
                st["raw_words"] += count_words(sent)
                if not keep_sentence(sent):
                    st["dropped_cleaning"] += 1
                elif task_filter.overlaps(sent):
                    st["dropped_task_overlap"] += 1
                else:
                    kept.append(sent)
            if kept:
                docs.append(kept)
    return docs, st


def _build(home: Path, out: Path, seed: int, names: List[str], log, skip_unavailable: bool) -> dict:
    started = time.time()
    unavailable = _fetch_sources(home, names, skip_unavailable, log)
    left_out = {n: unavailable[n] for n in names if n in unavailable}
    not_excluded = {n: unavailable[n] for n in TASK_SOURCES if n in unavailable}
    names = [n for n in names if n not in unavailable]
    excluded = {k: list(v) for k, v in TASK_SOURCES.items() if k not in unavailable}

    log("collecting task text to exclude ...")
    task_files = [(name, source_dir(name, home) / f) for name, files in excluded.items() for f in files]
    task_filter = TaskFilter(s for name, p in task_files for s in task_sentences(name, p))
    log(f"  {task_filter.sentences:,} task sentences, {len(task_filter.grams):,} distinct "
        f"{NGRAM}-grams")

    per_source: Dict[str, dict] = {}
    heldout: Dict[str, List[List[str]]] = {}
    train: Dict[str, List[List[str]]] = {}
    for name in names:
        docs, st = _read_source(name, home, task_filter)
        held = choose_heldout(name, docs)
        heldout[name] = [s for d, doc in enumerate(docs) for i, s in enumerate(doc)
                         if (d, i) in held]
        train[name] = [s for d, doc in enumerate(docs) for i, s in enumerate(doc)
                       if (d, i) not in held]
        per_source[name] = {"files": list(LM_SOURCES[name]), **st}
        log(f"  {name}: {st['raw_words']:,} words read, {st['dropped_cleaning']:,} sentences "
            f"cleaned away, {st['dropped_task_overlap']:,} overlapping task text")

    # Step 4: deduplicate, held-out parts first so no held-out sentence is trained on.
    seen: Set[bytes] = set()
    for part in (heldout, train):
        for name in names:
            unique = []
            for sent in part[name]:
                k = _key(sent)
                if k not in seen:
                    seen.add(k)
                    unique.append(sent)
            dropped = len(part[name]) - len(unique)
            which = "heldout" if part is heldout else "train"
            per_source[name][f"dropped_duplicates_{which}"] = dropped
            part[name] = unique

    _write_build(out, names, heldout, train, seed, log)
    for name in names:
        for which, part in (("train", train), ("heldout", heldout)):
            per_source[name][f"{which}_sentences"] = len(part[name])
            per_source[name][f"{which}_tokens"] = sum(len(s) for s in part[name])
            per_source[name][f"{which}_words"] = sum(count_words(s) for s in part[name])

    totals = {k: sum(st[k] for st in per_source.values())
              for k in ("raw_words", "train_sentences", "train_tokens", "train_words",
                        "heldout_sentences", "heldout_tokens", "heldout_words")}
    stats = {
        "description": "LM training corpus built by `elmo data build-corpus`",
        "seed": seed,
        "rules": {"min_tokens": MIN_TOKENS, "max_tokens": MAX_TOKENS, "ngram": NGRAM,
                  "block": BLOCK, "heldout_fraction": HELDOUT_FRACTION,
                  "heldout_max_tokens": HELDOUT_MAX_TOKENS,
                  "word": "a token containing a letter or a digit"},
        "excluded_task_text": excluded,
        "task_sentences": task_filter.sentences,
        "left_out": left_out,
        "task_text_not_excluded": not_excluded,
        "totals": totals,
        "sources": per_source,
        "seconds": round(time.time() - started, 1),
    }
    with writing(out / "stats.json", "corpus statistics"):
        atomic_write_text(out / "stats.json", json.dumps(stats, indent=2) + "\n")
    log(f"wrote {out}/train.txt: {totals['train_sentences']:,} sentences, "
        f"{totals['train_tokens']:,} tokens, {totals['train_words']:,} words; held out "
        f"{totals['heldout_tokens']:,} tokens in {len(names)} files{_gaps(left_out, not_excluded)}")
    return stats


def _gaps(left_out: Dict[str, str], not_excluded: Dict[str, str]) -> str:
    """What the summary line adds about corpora that could not be fetched ("" where none)."""
    parts = []
    if left_out:
        parts.append("left out (cannot be fetched): " + ", ".join(left_out))
    if not_excluded:
        parts.append("task text NOT excluded (cannot be fetched): " + ", ".join(not_excluded))
    return "".join("; " + p for p in parts)


def _write_build(out: Path, names: Sequence[str], heldout: Dict[str, List[List[str]]],
                 train: Dict[str, List[List[str]]], seed: int, log) -> None:
    """Write ``heldout/<source>.txt`` for each of ``names`` and the shuffled ``train.txt`` into
    ``out``, and remove ``stats.json`` (rewritten by the caller when the build is complete).

    Every file is written in full under a temporary name before any replaces the earlier
    build's: a full disk while writing (train.txt is the largest) left this build's held-out
    files beside the earlier build's train.txt, which may hold their sentences."""
    staged: List[Tuple[Path, Path]] = []
    try:
        for name in names:
            staged.append(_stage(out / "heldout" / f"{name}.txt", (" ".join(s) for s in heldout[name])))
        lines = [" ".join(s) for name in names for s in train[name]]
        random.Random(seed).shuffle(lines)
        staged.append(_stage(out / "train.txt", lines))
        # From here until stats.json is written the folder holds no finished build (the renames
        # take no space, but a kill may come between them).
        (out / "stats.json").unlink(missing_ok=True)
        _remove_stale_heldout(out / "heldout", names, log)
        for tmp, path in staged:
            with writing(path, "corpus file"):
                atomic_commit(tmp, path)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)


def _remove_stale_heldout(folder: Path, names: Sequence[str], log) -> None:
    """Delete the held-out files an earlier build of other sources left in ``folder``.

    A rebuild with fewer sources left them beside the new ones, and whatever reads
    ``heldout/*.txt`` (the perplexity and sample scripts) took them for part of this build.
    Only files named after an LM source are this builder's; any other file is kept and named."""
    for path in sorted(folder.glob("*.txt")):
        if path.stem in names:
            continue     # (rewritten below)
        if path.stem in LM_SOURCES:
            path.unlink()
            log(f"  removed {path}: held-out text of an earlier build ({path.stem} is not built now)")
        else:
            log(f"  kept {path}: not a file of this builder (no source {path.stem!r}); "
                f"move it out of heldout/ if it is not held-out text of this corpus")


def _stage(path: Path, lines: Iterable[str], source: Optional[Path] = None) -> Tuple[Path, Path]:
    """Write ``lines``, one a line, to a temporary file beside ``path``; returns (the
    temporary, ``path``) for :func:`elmo.io.atomic_commit`. A failed write deletes it.

    ``lines`` may be read lazily from an input file (``source``, where the error does not name
    it): an OSError while reading it is a DataError naming the input it could not read, and only
    a write's names ``path`` (a read error was "cannot write the corpus file")."""
    tmp = atomic_target(path)
    try:
        with writing(path, "corpus file"):
            with open(tmp, "w", encoding="utf-8") as f:
                for line in _read(lines, path, source):
                    f.write(line + "\n")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp, path


def _read(lines: Iterable[str], path: Path, source: Optional[Path]) -> Iterator[str]:
    """``lines`` as they are, with an OSError raised while taking the next one (reading an input
    file) as a one-line DataError naming the input file (the error's, else ``source``)."""
    try:
        yield from lines
    except OSError as e:
        named = e.filename if e.filename is not None else source
        what = f"{named}: cannot read the input" if named is not None else f"cannot read the input of {path}"
        raise DataError(f"{what}: {os_error_reason(e)}") from None
