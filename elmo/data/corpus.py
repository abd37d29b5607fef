"""Streaming text corpora: one tokenized sentence a line, from files, globs or shard folders.

A corpus is a list of files ("shards"); ``.gz`` files are decompressed on the fly. Only one
shard sits in memory at a time, so a billion-word corpus split into shards (the 1B Word
Benchmark layout) streams in bounded memory.

Each epoch is reproducible from the seed: the shard order is shuffled with
``Random((seed, epoch))`` and the sentences of each shard with ``Random((seed, epoch, shard))``.
A :class:`CorpusStream` position is (epoch, shard position, sentence position), small enough to
checkpoint and resume exactly.

With several processes (``rank``/``world_size``) each reads its own part: whole shards
(``shards[rank::world_size]`` of the epoch's order) when there are at least as many shards as
processes, otherwise a part of each shard's sentences: shuffled, every ``world_size``-th one
(a new draw each epoch); in the files' order, one block of consecutive lines each, the blocks
cut where they hold about the same tokens (or lines, see :data:`LINE_WEIGHTS`).
"""
from __future__ import annotations

import fnmatch
import glob
import gzip
import hashlib
import io
import os
import random
import zlib
from bisect import bisect_left
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from ..text_files import first_bad_utf8, first_nul_byte

Sentence = List[str]


def expand_paths(patterns: Sequence[str | os.PathLike]) -> List[Path]:
    """Files named by paths, globs (``news.en-*``) or folders (all files below, recursively,
    except hidden ones: names starting with a dot, or inside a folder whose name does, such as
    ``.git/``, a temporary ``.NAME.tmp`` file or an editor's swap file).

    The result is sorted and free of duplicates so every process sees the same list: a file
    named twice, by another path (relative and absolute) or through a link (symbolic or
    hard), is listed once, under the first of its names in that order (it was read twice:
    counted twice by vocab build, trained on twice, and held out by finetune beside its own
    copy).
    Raises FileNotFoundError when a pattern matches nothing.
    """
    files: List[Path] = []
    for pattern in patterns:
        p = Path(pattern)
        if p.is_dir():
            found = [q for q in p.rglob("*") if q.is_file()
                     and not any(part.startswith(".") for part in q.relative_to(p).parts)]
        elif p.is_file():
            found = [p]
        else:
            found = [Path(q) for q in glob.glob(str(pattern), recursive=True) if Path(q).is_file()]
        if not found and p.is_dir():   # it exists: "no such folder" misled
            raise FileNotFoundError(f"{pattern}: a folder without files (hidden ones are skipped)")
        if not found:
            raise FileNotFoundError(f"{pattern}: no such file, folder or matching glob")
        files.extend(found)
    return _once_each(sorted(set(files)))


def _once_each(files: Sequence[Path]) -> List[Path]:
    """``files`` with each file at its first name only (one file: the same device and inode,
    which a symbolic or a hard link shares)."""
    seen: set = set()
    kept = []
    for path in files:
        st = os.stat(path)
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            kept.append(path)
    return kept


def expand_paths_in_order(patterns: Sequence[str | os.PathLike]) -> List[Path]:
    """The files of :func:`expand_paths`, in the order the patterns are given (a folder's or a
    glob's own files sorted), a file named again read at its first place only: for a text
    whose sentences' order counts (a carried-state perplexity), not a corpus of shards."""
    return _once_each([path for pattern in patterns for path in expand_paths([pattern])])


def would_find(pattern: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether :func:`expand_paths` ``([pattern])`` lists the file ``path`` once it is there
    (it need not be yet): ``pattern`` is a folder above it with no hidden folder between them,
    that very file, or a glob that matches it. Paths are compared with their links resolved
    (a folder's walk does not enter links below it) and, for a glob (which does), also as
    written, made absolute."""
    p = Path(pattern)
    if p.is_file():
        return os.path.exists(path) and os.path.samefile(p, path)
    if p.is_dir():   # every file below it, hidden ones left out
        root, rest, forms = p, ["**"], [(p.resolve(), Path(path).resolve())]
    else:
        parts = p.parts
        literal = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))
        root, rest = Path(*parts[:literal]) if literal else Path("."), list(parts[literal:])
        forms = [(root.resolve(), Path(path).resolve()), (Path(os.path.abspath(root)), Path(os.path.abspath(path)))]
    for base, target in forms:
        if target != base and target.is_relative_to(base) and _glob_match(rest, target.relative_to(base).parts):
            return True
    return False


def _glob_match(pattern: Sequence[str], names: Sequence[str]) -> bool:
    """Whether the path ``names`` matches the glob ``pattern`` (both split into their parts) as
    ``glob.glob(recursive=True)`` matches: ``**`` is any number of folders, and a wildcard
    does not match a hidden name (one starting with a dot) unless its pattern starts with one."""
    if not pattern:
        return not names
    head = pattern[0]
    if head == "**":
        return _glob_match(pattern[1:], names) or (
            bool(names) and not names[0].startswith(".") and _glob_match(pattern, names[1:]))
    if not names:
        return False
    name = names[0]
    if glob.has_magic(head):
        matches = fnmatch.fnmatchcase(name, head) and (head.startswith(".") or not name.startswith("."))
    else:
        matches = name == head
    return matches and _glob_match(pattern[1:], names[1:])


class CorpusError(ValueError):
    """Text a corpus cannot use; the message names the file and the line (1-based)."""


def open_text(path: str | Path) -> io.TextIOBase:
    """Open a text file for reading, decompressing ``.gz``. A UTF-8 byte-order mark opening
    the text (as some Windows editors save) is dropped: it would stay on the first word, a
    word of its own in the vocabulary and the vectors."""
    path = Path(path)
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig")
    return open(path, encoding="utf-8-sig")


def _open_bytes(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _undecodable(path: Path) -> CorpusError:
    """Find the first line of ``path`` that is not UTF-8 (called only once decoding failed,
    so the common case pays nothing) and say where it is."""
    with _open_bytes(path) as f:
        where = first_bad_utf8(f)
    if where is None:
        return CorpusError(f"{path}: not valid UTF-8 (text must be UTF-8)")
    of = " of the decompressed text" if path.suffix == ".gz" else ""
    return CorpusError(f"{path}: {where}{of} is not valid UTF-8 (text must be UTF-8)")


def _nul_byte(path: Path) -> CorpusError:
    """Where the first NUL byte of ``path`` is (called only once a line held one)."""
    with _open_bytes(path) as f:
        where = first_nul_byte(f)
    of = "; the line and offset are the decompressed text's" if path.suffix == ".gz" else ""
    return CorpusError(f"{path}: {where or 'a NUL byte (0x00)'}{of}")


def file_lines(path: str | Path) -> Iterator[str]:
    """The lines of one file as text (``.gz`` decompressed, a byte-order mark dropped; a line
    ends at ``\\n``, ``\\r\\n`` or a lone ``\\r``, unlike :func:`elmo.text_files.text_lines`);
    undecodable bytes or a broken ``.gz`` raise :class:`CorpusError` naming the file (and the
    line and byte offset for bad UTF-8), as does a NUL byte (:func:`elmo.text_files.nul_byte`: UTF-16
    text without a byte-order mark is valid UTF-8, a NUL between its letters)."""
    path = Path(path)
    try:
        with open_text(path) as f:
            for line in f:
                if "\0" in line:   # (about 5 ms in 400,000 lines, *scratch*)
                    raise _nul_byte(path)
                yield line
    except UnicodeDecodeError:
        raise _undecodable(path) from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise CorpusError(f"{path}: not a readable gzip file ({e})") from None


def read_sentences(path: str | Path) -> List[Sentence]:
    """All non-empty lines of one shard, split on whitespace."""
    return [line.split() for line in file_lines(path) if line.strip()]


def iter_file_sentences(paths: Sequence[str | Path]) -> Iterator[Sentence]:
    """Every sentence of the files in order, one line at a time (constant memory)."""
    for path in paths:
        for line in file_lines(path):
            tokens = line.split()
            if tokens:
                yield tokens


def file_fingerprint(path: str | Path) -> str:
    """sha256 of a file's bytes (hex), to record exactly which text a model saw: the one hash
    of a file the package has, :func:`elmo.hub.file_checks.sha256_file`."""
    from ..hub.file_checks import sha256_file   # (elmo.hub is loaded where a file is hashed only)
    return sha256_file(Path(path))


def _seeded(*parts) -> random.Random:
    # Random() seeded from a string is stable across processes and Python versions
    # (unlike hash() of a tuple, which is salted for strings).
    return random.Random(":".join(str(p) for p in parts))


#: What the blocks of a file's lines that unshuffled processes read hold about equal amounts of:
#: ``tokens``, the positions of the packed layout (a sentence's words and its ``<S>`` and
#: ``</S>``), which reads as many a step on every process; ``lines``, the rows of the bucketed one.
#: (Every ``world_size``-th line held equal lines but not tokens: a file alternating 3- and
#: 18-word sentences gave one process 250 tokens and the other 1,000, so that an epoch read one
#: part 2.4 times and the other's 63%.)
LINE_WEIGHTS: Dict[str, Callable[[Sentence], int]] = {"tokens": lambda s: len(s) + 2, "lines": lambda s: 1}


def balanced_cuts(weights: Sequence[int], parts: int) -> List[int]:
    """Where to cut items of non-negative ``weights`` into ``parts`` consecutive blocks of
    about equal weight: ``parts + 1`` indices from 0 to ``len(weights)``, block r being
    ``[cuts[r], cuts[r + 1])``. Each inner cut is the boundary nearest the r-th ``parts``-quantile of
    the total (a tie goes to the later one); integer arithmetic, the same on every machine."""
    cum = [0]
    for w in weights:
        cum.append(cum[-1] + w)
    total, cuts = cum[-1], [0]
    for r in range(1, parts):
        goal = r * total   # (the quantile times parts: cum[i] * parts is compared with it)
        i = bisect_left(cum, -(-goal // parts), lo=cuts[-1])
        if i > cuts[-1] and goal - cum[i - 1] * parts < cum[i] * parts - goal:
            i -= 1
        cuts.append(i)
    return cuts + [len(weights)]


def line_blocks(sentences: List[Sentence], parts: int, balance: str) -> List[List[Sentence]]:
    """One file's ``sentences`` cut into ``parts`` consecutive blocks of about the same
    ``balance`` (a key of :data:`LINE_WEIGHTS`): block r is rank r's part. The one cut both
    :meth:`CorpusStream.my_lines` and :func:`line_shares` make, so that they cannot differ."""
    weigh = LINE_WEIGHTS[balance]
    cuts = balanced_cuts([weigh(s) for s in sentences], parts)
    return [sentences[cuts[r]:cuts[r + 1]] for r in range(parts)]


@dataclass
class StreamPosition:
    """Where a stream stands: the next sentence is sentence ``sentence`` of the shard at
    position ``shard`` of epoch ``epoch``'s shard order (both counted in this rank's part)."""

    epoch: int = 0
    shard: int = 0
    sentence: int = 0


class CorpusStream:
    """An endless, reproducible stream of sentences over the epochs of a sharded corpus.

    Args:
        paths: files, globs or folders.
        seed: the shuffling seed.
        shuffle: shuffle shards and sentences each epoch (off: the files' own order).
        rank, world_size: this process's part of the corpus.
        balance: where processes share a file's lines unshuffled, what their blocks hold about
            equal amounts of (a key of :data:`LINE_WEIGHTS`).
    """

    def __init__(self, paths: Sequence[str | os.PathLike], seed: int = 0, shuffle: bool = True,
                 rank: int = 0, world_size: int = 1, balance: str = "tokens"):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, {world_size})")
        if balance not in LINE_WEIGHTS:
            raise ValueError(f"balance must be one of {', '.join(LINE_WEIGHTS)}, got {balance!r}")
        self.balance = balance
        self.files = expand_paths(paths)
        self.seed, self.shuffle = seed, shuffle
        self.rank, self.world_size = rank, world_size
        self.split_by_shard = len(self.files) >= world_size
        self.position = StreamPosition()
        self._loaded: Optional[tuple] = None  # ((epoch, shard), sentences)

    # ------------------------------------------------------------------ epoch layout
    def shard_order(self, epoch: int) -> List[Path]:
        """This rank's shards for ``epoch``, in reading order."""
        order = list(self.files)
        if self.shuffle:
            _seeded(self.seed, epoch, "shards").shuffle(order)
        if self.split_by_shard and self.world_size > 1:
            order = order[self.rank::self.world_size]
        return order

    def _shard_sentences(self, epoch: int, index: int) -> List[Sentence]:
        key = (epoch, index)
        if self._loaded is None or self._loaded[0] != key:
            path = self.shard_order(epoch)[index]
            sentences = read_sentences(path)
            if self.shuffle:
                _seeded(self.seed, epoch, "sentences", path.name, index).shuffle(sentences)
            if self.line_split is not None:
                sentences = self.my_lines(sentences)
            self._loaded = (key, sentences)
        return self._loaded[1]

    @property
    def line_split(self) -> Optional[str]:
        """How this stream's processes share each file's lines: ``turns`` (every
        ``world_size``-th of the shuffled lines), or blocks of about equal ``tokens`` or
        ``lines`` (unshuffled); None where they read whole files, or there is one process."""
        if self.split_by_shard or self.world_size == 1:
            return None
        return "turns" if self.shuffle else self.balance

    def my_lines(self, sentences: List[Sentence]) -> List[Sentence]:
        """This rank's part of one file's ``sentences`` (every process's parts: all of them,
        once each), where the processes share each file's lines (:attr:`line_split`)."""
        if self.line_split == "turns":
            return sentences[self.rank::self.world_size]
        return line_blocks(sentences, self.world_size, self.balance)[self.rank]

    # ------------------------------------------------------------------ reading
    #: Whole epochs in a row without a sentence for this rank after which it gives up, where its
    #: share changes from epoch to epoch (shuffled shards or lines over several processes; an
    #: epoch may then give it only empty files). Where it cannot change, one such epoch is enough.
    MAX_EMPTY_EPOCHS = 100

    def next_sentence(self) -> Sentence:
        """The next sentence; moves to the next shard and the next epoch as needed, over empty
        files too. Raises ValueError when this rank's part holds no sentence."""
        share_varies = self.shuffle and self.world_size > 1
        # epoch ends passed in this call: the first ends the current epoch, each later one an
        # epoch that held nothing for this rank
        ends, most = 0, 1 + (self.MAX_EMPTY_EPOCHS if share_varies else 1)
        while ends < most:
            pos = self.position
            shards = self.shard_order(pos.epoch)
            if pos.shard >= len(shards):
                self.position = StreamPosition(pos.epoch + 1, 0, 0)
                ends += 1
                continue
            sentences = self._shard_sentences(pos.epoch, pos.shard)
            if pos.sentence >= len(sentences):
                self.position = StreamPosition(pos.epoch, pos.shard + 1, 0)
                continue
            self.position = StreamPosition(pos.epoch, pos.shard, pos.sentence + 1)
            return sentences[pos.sentence]
        part = ""
        if self.world_size > 1:   # (how the parts are made, so that the fix is plain)
            shared = ("whole files, and those it is given hold none" if self.split_by_shard
                      else f"each file's sentences in turn, and no file has {self.rank + 1}"
                      if self.line_split == "turns" else
                      f"a block of each file's lines, cut where the blocks hold about the same {self.balance}, "
                      f"and its blocks hold none")
            part = (f" for rank {self.rank} of {self.world_size} (each process reads {shared}); give more "
                    f"text, or start fewer processes")
        raise ValueError(f"the corpus {', '.join(map(str, self.files))} holds no sentence{part}")

    def __iter__(self) -> Iterator[Sentence]:
        while True:
            yield self.next_sentence()

    @property
    def epoch(self) -> int:
        return self.position.epoch

    def state_dict(self) -> Dict[str, int]:
        return asdict(self.position)

    def load_state_dict(self, state: Dict[str, int]) -> None:
        self.position = StreamPosition(**state)


def shard_shares(paths: Sequence[str | os.PathLike], world_size: int, seed: int = 0, shuffle: bool = True,
                 epoch: int = 0) -> Optional[List[int]]:
    """Bytes of text (of the files as stored) that each of ``world_size`` processes reads in
    ``epoch`` where :class:`CorpusStream` gives them whole shards (at least as many files as
    processes); None where it splits every file's lines among them (:func:`line_shares`)."""
    files = expand_paths(paths)
    streams = [CorpusStream(files, seed=seed, shuffle=shuffle, rank=r, world_size=world_size)
               for r in range(world_size)]
    if world_size < 2 or not streams[0].split_by_shard:
        return None
    return [sum(path.stat().st_size for path in stream.shard_order(epoch)) for stream in streams]


def line_shares(paths: Sequence[str | os.PathLike], world_size: int, shuffle: bool = True,
                balance: str = "tokens") -> Optional[List[int]]:
    """Tokens (or lines: ``balance``) of each of ``world_size`` processes' part of an epoch
    where :class:`CorpusStream` cuts every file's unshuffled lines into blocks for them (fewer
    files than processes), each file read once; None elsewhere (whole shards:
    :func:`shard_shares`; shuffled lines are dealt anew each epoch, even on average)."""
    stream = CorpusStream(paths, shuffle=shuffle, world_size=world_size, balance=balance)
    if stream.line_split not in LINE_WEIGHTS:
        return None
    weigh, shares = LINE_WEIGHTS[balance], [0] * world_size
    for path in stream.files:
        for rank, block in enumerate(line_blocks(read_sentences(path), world_size, balance)):
            shares[rank] += sum(weigh(s) for s in block)
    return shares


def count_tokens(paths: Sequence[str | os.PathLike], boundaries: bool = True,
                 piece_length: Optional[int] = None) -> Dict[str, int]:
    """Sentences and tokens of a corpus in one streaming pass.

    ``tokens`` counts ``<S>`` and ``</S>`` around each sentence when ``boundaries`` is set
    (the number of positions a language-model epoch has). With ``piece_length``, ``pieces``
    also counts the pieces of at most that many words the sentences are cut into (the rows
    of the bucketed layout, which cuts long sentences).
    """
    n_sentences = n_tokens = n_pieces = 0
    for sentence in iter_file_sentences(expand_paths(paths)):
        n_sentences += 1
        n_tokens += len(sentence) + (2 if boundaries else 0)
        if piece_length is not None:
            n_pieces += -(-len(sentence) // piece_length)
    counts = {"sentences": n_sentences, "tokens": n_tokens}
    if piece_length is not None:
        counts["pieces"] = n_pieces
    return counts


#: Bytes that :func:`sample_digest` reads at each of its places in a file.
SAMPLE_BYTES = 1 << 16


def corpus_files(paths: Sequence[str | os.PathLike]) -> List[List[Any]]:
    """[path, size in bytes, :func:`sample_digest`] of every file of a corpus, in
    :func:`expand_paths` order: a cheap record of which text a count or a stream position
    belongs to (a rebuilt, extended, replaced or reshuffled file changes it)."""
    return [[str(p), p.stat().st_size, sample_digest(p)] for p in expand_paths(paths)]


def sample_digest(path: str | Path) -> str:
    """SHA-256 of :data:`SAMPLE_BYTES` bytes at a file's start, quarters, middle and end (as
    stored; at most 320 KiB read, whatever its size). The size alone missed a file rewritten
    with the same size: a corpus rebuilt with another seed, or its lines shuffled, on which a
    resume went on at its old position in other text. A change of the same size outside those
    places goes unseen (a full digest would read the whole corpus at every resume)."""
    size = os.stat(path).st_size
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for offset in sorted({0, size // 4, size // 2, 3 * size // 4, max(size - SAMPLE_BYTES, 0)}):
            f.seek(offset)
            h.update(f.read(SAMPLE_BYTES))
    return h.hexdigest()


def same_corpus_files(recorded: Any, now: Sequence[Sequence[Any]]) -> bool:
    """Whether ``recorded`` (a :func:`corpus_files` record read back from a file, maybe of an
    earlier version, whose entries were [path, size] only) describes the files ``now``."""
    return isinstance(recorded, list) and len(recorded) == len(now) and all(
        isinstance(then, list) and len(then) >= 2 and then == list(current[:len(then)])
        for then, current in zip(recorded, now))


def count_words(paths: Sequence[str | os.PathLike], progress: bool = False) -> Dict[str, int]:
    """Word counts of a corpus in one streaming pass, with ``<S>`` and ``</S>`` counted once
    per sentence (the counts a vocabulary file keeps). ``progress``: a tqdm counter of the
    sentences read on stderr (the total is not known before the pass)."""
    from collections import Counter

    from tqdm import tqdm

    counts: Counter = Counter()
    n_sentences = 0
    sentences = iter_file_sentences(expand_paths(paths))
    for sentence in tqdm(sentences, unit="sent", unit_scale=True, desc="counting", disable=not progress):
        counts.update(sentence)
        n_sentences += 1
    counts["<S>"] += n_sentences
    counts["</S>"] += n_sentences
    return dict(counts)
