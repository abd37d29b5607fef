"""Nearest tokens in context across a corpus (the paper's Table 4), from a cached index.

The index holds, for every token of a corpus, its unit-length vector at every layer:
``vectors`` (L + 1, N, D) float16, ``positions`` (N, 2) as (sentence, token), and the
sentences. It is built once per (model, corpus, sentence cap) and saved under the cache
folder, so later queries only embed the query sentence. Search is exact: one matrix product
of the query with all N vectors of the chosen layer (fine for a few million tokens; nothing
approximate, so results equal brute force).

Static neighbours for comparison: layer 0 (the character CNN gives a word one vector in every
context) over the corpus vocabulary, and GloVe over its own vocabulary.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ..checks import require_count
from ..io import no_empty_folder_on_failure
from ..folder_swap import atomic_folder
from ..model_digest import model_digest
from ..output_checks import writing
from .vectors import as_embedder, embed_layers, progress_bar, unit_rows

INDEX_VERSION = "1"
#: Tokens embedded at a time while an index is built (float32, all layers: 3 KiB a token for the
#: default model, so about 50 MiB); the index's memory is its float16 vectors and this.
BUILD_CHUNK_TOKENS = 16_384


@dataclass
class Hit:
    """One neighbour: its score (cosine), word, and where it is (sentence, token)."""

    score: float
    word: str
    sentence: int = -1
    token: int = -1


@dataclass
class CorpusIndex:
    """Unit vectors of every corpus token at every layer.

    ``sentences``: the tokenized corpus; ``positions`` (N, 2) int64; ``vectors``
    (L + 1, N, D) float16, rows of unit length.
    """

    sentences: List[List[str]]
    positions: np.ndarray
    vectors: np.ndarray
    _by_word: Optional[Dict[str, List[int]]] = field(default=None, init=False, repr=False)

    @classmethod
    def build(cls, model, sentences: Sequence[Sequence[str]], batch_size: int = 32,
              progress: bool = False) -> "CorpusIndex":
        """The index of the non-empty ``sentences``, embedded :data:`BUILD_CHUNK_TOKENS` tokens
        at a time, each chunk's unit rows written as float16 into the index's array.
        ``progress``: a tqdm bar on stderr over the tokens (minutes on a large corpus).

        All float32 layers at once, then their concatenation and its unit rows, took about six
        times the index's own memory at the peak (for a few million tokens of the default
        model, tens of GB); a chunk's float32 arrays are all that is held beside it now."""
        rows = [list(s) for s in sentences if len(s) > 0]
        embedder = as_embedder(model, batch_size)
        positions = token_positions([len(r) for r in rows])
        vectors = np.empty((embedder.num_layers, len(positions), embedder.dim), dtype=np.float16)
        done = first = 0
        with progress_bar(len(positions), "index", progress) as bar:
            while first < len(rows):
                stop, tokens = first, 0
                while stop < len(rows) and (stop == first or tokens + len(rows[stop]) <= BUILD_CHUNK_TOKENS):
                    tokens, stop = tokens + len(rows[stop]), stop + 1
                arrays = embed_layers(embedder, rows[first:stop], batch_size, bar)
                vectors[:, done:done + tokens] = unit_rows(np.concatenate(arrays, axis=1))
                done, first = done + tokens, stop
        return cls(rows, positions, vectors)

    @property
    def num_layers(self) -> int:
        return self.vectors.shape[0]

    def word(self, i: int) -> str:
        s, t = self.positions[i]
        return self.sentences[s][t]

    def search(self, query: np.ndarray, layer: int, k: int = 10,
               word: Optional[str] = None, exclude: Sequence[int] = ()) -> List[Hit]:
        """The ``k`` corpus tokens most similar (cosine) to ``query`` (D,) at ``layer``;
        ties go to the earlier token. With ``word``, only occurrences of that word (any case)
        are candidates, as in the paper's Table 4 (nearest uses of the same word).
        ``exclude``: token ids that are no candidates (the query's own occurrence,
        :meth:`copies`)."""
        _check_k(k)
        query = self._check_query(query, layer)
        candidates = None if word is None else self.occurrences(word)
        if candidates is not None and len(candidates) == 0:
            return []
        rows = self.vectors[layer] if candidates is None else self.vectors[layer][candidates]
        q = torch.from_numpy(unit_rows(query))
        # Rows are stored in float16, so their norms are only close to 1: divide them out.
        rows = torch.from_numpy(np.asarray(rows, dtype=np.float32))                  # (N, D)
        scores = (rows @ q) / rows.norm(dim=1).clamp_min(1e-12)                       # (N,)
        left_out = self._excluded(exclude)
        if len(left_out):   # (masked, not removed: a copy of the rows would double the memory)
            where = left_out if candidates is None else np.flatnonzero(np.isin(candidates, left_out))
            scores[torch.from_numpy(where)] = -float("inf")
            k = min(k, len(scores) - len(where))
        k = min(k, len(scores))
        # A stable sort makes the order of equal scores deterministic (earlier token first).
        order = torch.sort(scores, descending=True, stable=True).indices[:k].tolist()
        ids = order if candidates is None else [int(candidates[i]) for i in order]
        return [Hit(float(scores[o]), self.word(i), *map(int, self.positions[i]))
                for o, i in zip(order, ids)]

    def _check_query(self, query: np.ndarray, layer: int) -> np.ndarray:
        """``query`` as a float32 (D,) vector of this index's width, and ``layer`` one it holds:
        another width (a query from another model) was a size mismatch from inside PyTorch, a
        layer past the last an IndexError, and a NaN query listed k hits of score NaN."""
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer < self.num_layers:
            raise ValueError(f"layer {layer!r}: the index holds layers 0..{self.num_layers - 1}")
        q = np.asarray(query, dtype=np.float32)
        width = self.vectors.shape[-1]
        if q.shape != (width,):
            raise ValueError(f"the query must be one vector of the index's width ({width},), got shape "
                             f"{q.shape}; was it embedded by another model than the index?")
        if not np.isfinite(q).all():
            raise ValueError("the query vector holds NaN or infinite values")
        return q

    def _excluded(self, exclude: Sequence[int]) -> np.ndarray:
        """``exclude`` as distinct token ids (ascending int64). An id listed twice cut a hit from
        the k listed, a negative one left out a token counted from the end, a fraction the
        token it truncates to (all in silence), and one past the last was torch's IndexError."""
        ids = np.asarray(exclude).reshape(-1)
        if len(ids) == 0:
            return np.zeros(0, dtype=np.int64)
        n = len(self.positions)
        if ids.dtype == bool or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"exclude takes token ids (whole numbers from 0 to {n - 1}), got {ids[:3].tolist()}")
        if ids.min() < 0 or ids.max() >= n:
            raise ValueError(f"exclude: token id {int(ids.min() if ids.min() < 0 else ids.max())} is not one of "
                             f"the index's {n:,} tokens (0 to {n - 1})")
        return np.unique(ids).astype(np.int64)

    def occurrences(self, word: str) -> np.ndarray:
        """Token ids (ascending) whose word equals ``word`` ignoring case."""
        if self._by_word is None:                       # built on first use
            self._by_word = {}
            for i, (s, t) in enumerate(self.positions):
                self._by_word.setdefault(self.sentences[s][t].lower(), []).append(i)
        return np.array(self._by_word.get(word.lower(), []), dtype=np.int64)

    def copies(self, tokens: Sequence[str], token: int) -> List[int]:
        """Token ids of position ``token`` in every corpus sentence equal to ``tokens``: the
        query itself, where the query sentence is a corpus sentence (its own best neighbour,
        at cosine 1, one hit per copy)."""
        tokens = list(tokens)
        same = [s for s, sent in enumerate(self.sentences) if sent == tokens]
        if not same:
            return []
        hit = np.isin(self.positions[:, 0], same) & (self.positions[:, 1] == token)
        return [int(i) for i in np.flatnonzero(hit)]

    def word_types(self) -> Tuple[List[str], np.ndarray]:
        """Distinct words (first-seen order) and their layer-0 unit vectors (V, D)."""
        first: Dict[str, int] = {}
        for i, (s, t) in enumerate(self.positions):
            first.setdefault(self.sentences[s][t], i)
        words = list(first)
        return words, self.vectors[0, list(first.values())].astype(np.float32)

    # ------------------------------------------------------------------ storage
    def save(self, folder: Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "vectors.npy", self.vectors)
        np.save(folder / "positions.npy", self.positions)
        (folder / "sentences.txt").write_text("".join(_sentence_line(s, i) + "\n"
                                                      for i, s in enumerate(self.sentences, start=1)),
                                              encoding="utf-8")
        (folder / "index.json").write_text(json.dumps({"version": INDEX_VERSION}) + "\n")

    @classmethod
    def load(cls, folder: Path) -> "CorpusIndex":
        """The index :meth:`save` wrote into ``folder``. A damaged one (a file missing,
        truncated or not fitting the others) is a :class:`DamagedIndex`: its vectors were an
        mmap error, or worse, positions past a sentence's end labelled hits with other words."""
        folder = Path(folder)
        try:
            sentences = [ln.split() for ln in
                         (folder / "sentences.txt").read_text(encoding="utf-8").splitlines()]
            positions = np.load(folder / "positions.npy")
            vectors = np.load(folder / "vectors.npy", mmap_mode="r")
        except (OSError, ValueError, EOFError) as e:   # (a decoding error is a ValueError)
            raise DamagedIndex(f"{folder}: a damaged neighbour index ({type(e).__name__}: {e})") from None
        expected = token_positions([len(s) for s in sentences])
        n = len(expected)
        if (vectors.ndim != 3 or positions.shape != (n, 2) or vectors.shape[1] != n
                or not np.array_equal(positions, expected)):
            raise DamagedIndex(f"{folder}: a damaged neighbour index (its vectors {vectors.shape}, its token "
                               f"positions {positions.shape} and the {n:,} tokens of its {len(sentences):,} "
                               f"sentences do not agree)")
        return cls(sentences, positions, vectors)


def _sentence_line(tokens: Sequence[str], number: int) -> str:
    """Sentence ``number`` (from 1) of an index as its line of ``sentences.txt``: its tokens
    separated by spaces. A token that is empty or holds whitespace (a ``str.splitlines`` line
    end among it: U+2028, ``\\x85``) is a ValueError naming it: :meth:`CorpusIndex.load`
    would read other sentences back, which a saved index built from Python token lists did."""
    line = " ".join(tokens)
    if line.split() != list(tokens):
        bad = next(t for t in tokens if not t or t.split() != [t])
        raise ValueError(f"sentence {number}: the token {bad!r} is empty or holds whitespace, which "
                         f"an index's tokens may not (its sentences are saved one a line, tokens "
                         f"separated by spaces)")
    return line


def token_positions(lengths: Sequence[int]) -> np.ndarray:
    """(sentence, token) of every token of sentences of ``lengths`` tokens, in order: (N, 2)
    int64 (made by numpy: a tuple per token took more memory than the index's vectors)."""
    counts = np.asarray(lengths, dtype=np.int64).reshape(-1)
    starts = np.cumsum(counts) - counts                             # each sentence's first token
    return np.stack([np.repeat(np.arange(len(counts)), counts),
                     np.arange(int(counts.sum())) - np.repeat(starts, counts)], axis=1)


class DamagedIndex(ValueError):
    """A saved index whose files are missing, truncated or do not fit each other."""


def _check_k(k: int) -> None:
    """A negative k would slice from the end (every hit but the last few): refuse it."""
    require_count("k (neighbours to list)", k)


def brute_force(vectors: np.ndarray, query: np.ndarray, k: int) -> List[Tuple[float, int]]:
    """Reference search for tests: cosine with every row by a Python loop, best first."""
    scored = []
    q = np.asarray(query, dtype=np.float64)
    for i, v in enumerate(np.asarray(vectors, dtype=np.float64)):
        denom = np.linalg.norm(v) * np.linalg.norm(q)
        scored.append((float(v @ q / denom) if denom else 0.0, i))
    scored.sort(key=lambda p: (-p[0], p[1]))
    return scored[:k]


def static_neighbors(words: Sequence[str], vectors: np.ndarray, word: str, k: int = 10,
                     query: Optional[np.ndarray] = None) -> List[Hit]:
    """Nearest other words to ``word`` in a static table (V, D); the word's own row is the
    query unless ``query`` is given. Empty when the word is unknown and no query is given."""
    _check_k(k)
    vectors = np.asarray(vectors)
    # (else an IndexError from inside, or NaN scores ranked as if they were scores)
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise ValueError(f"static_neighbors takes one vector row per word: {len(words)} words, vectors of "
                         f"shape {vectors.shape}")
    if not np.isfinite(vectors).all() or (query is not None and not np.isfinite(np.asarray(query)).all()):
        raise ValueError("static_neighbors: the vectors hold NaN or infinite values")
    lookup = {w: i for i, w in enumerate(words)}
    if query is None:
        if word not in lookup:
            return []
        query = vectors[lookup[word]]
    q = unit_rows(np.asarray(query, dtype=np.float32))
    scores = unit_rows(np.asarray(vectors, dtype=np.float32)) @ q
    order = np.argsort(-scores, kind="stable")
    return [Hit(float(scores[i]), words[i]) for i in order if words[i] != word][:k]


# ----------------------------------------------------------------------------- cache
def read_corpus(path: Path, max_sentences: Optional[int] = None) -> List[List[str]]:
    """Tokenized sentences of a text file (one sentence a line, tokens separated by spaces;
    blank lines are skipped), at most ``max_sentences`` from the start (None or 0: all).

    Bytes that are not UTF-8 are an error naming the file, line and byte, as for every corpus
    (they were replaced by U+FFFD, and the index held words the text does not have); a negative
    cap is a ValueError (it kept one sentence).
    """
    from ..data.corpus import iter_file_sentences

    if max_sentences is not None and max_sentences < 0:
        raise ValueError(f"--max-sentences must be 0 (all) or more, got {max_sentences}")
    out = []
    for toks in iter_file_sentences([path]):
        out.append(toks)
        if max_sentences and len(out) >= max_sentences:
            break
    return out


def cached_index(model, corpus: Path, cache_dir: Path, max_sentences: Optional[int] = None,
                 batch_size: int = 32, log=print,
                 writable_hint: str = "give a writable folder for the index (--index-dir)",
                 full_disk_hint: Optional[str] = None, progress: bool = False,
                 digest: Optional[str] = None) -> CorpusIndex:
    """The index of ``corpus`` for ``model``: loaded from ``cache_dir`` when it was built
    before with the same weights, corpus text, cap and windows (the embedder's ``max_tokens``
    and ``overlap``); else built and saved. ``writable_hint``:
    what the error of a ``cache_dir`` that cannot be written suggests; ``full_disk_hint``:
    what it suggests where the disk (or quota) is full, when that differs. ``progress``: a
    bar while the index is built (:meth:`CorpusIndex.build`). ``digest``: the
    :func:`~elmo.model_digest.model_digest` of ``model``'s biLM as it is now, where the caller
    has just computed it (hashing a large model takes a while); else it is computed here."""
    embedder = as_embedder(model, batch_size)
    corpus = Path(corpus)
    if max_sentences is not None and max_sentences < 0:   # before the key: an index is not looked up
        raise ValueError(f"--max-sentences must be 0 (all) or more, got {max_sentences}")
    max_sentences = max_sentences or None               # 0 means all, as None does
    from ..data.corpus import file_fingerprint

    # Keyed by what the vectors depend on: the weights, the text itself (its path, size and
    # mtime kept an index of text since replaced, as a copy with `cp -p` or `tar x` leaves
    # them), the cap, and the embedder's windows (long sentences are cut into windows of
    # max_tokens: an index of other windows held other vectors). (An index cached under the
    # model's earlier fingerprint is simply built again, once; the old one stays until deleted
    # by hand, as the README says: a query reads an index without a lock, so none is deleted here.)
    key = hashlib.sha1(json.dumps([INDEX_VERSION, digest or model_digest(embedder.bilm),
                                   file_fingerprint(corpus), max_sentences,
                                   embedder.max_tokens, embedder.overlap]).encode()).hexdigest()[:16]
    folder = Path(cache_dir) / key
    index = _saved_index(folder)
    if index is not None:
        return index
    sentences = read_corpus(corpus, max_sentences)
    if not sentences:
        raise ValueError(f"{corpus}: no sentences")
    from ..data.fetch import cache_entry_lock

    # Two processes building one index (two queries on a new corpus) wrote into one temporary
    # folder and the second rename met the first's index ('Directory not empty'); now the
    # second waits and loads the first's. A build that fails leaves no empty index folder.
    with no_empty_folder_on_failure(Path(cache_dir)), cache_entry_lock(folder, log, writable_hint, full_disk_hint):
        index = _saved_index(folder, log)
        if index is not None:
            return index
        log(f"building the index of {len(sentences):,} sentences of {corpus} (once) ...")
        index = CorpusIndex.build(embedder, sentences, batch_size, progress=progress)
        # Its files reach the disk before the folder takes its name (they were renamed unsynced:
        # after a power cut the folder could name empty files, and every later query failed on
        # them); a failed write (a full disk) leaves no partial folder.
        with writing(folder, "neighbour index", writable_hint, full_disk_hint), atomic_folder(folder) as tmp:
            index.save(tmp)
    log(f"index saved in {folder}")
    return CorpusIndex.load(folder)


def _saved_index(folder: Path, log=None) -> Optional[CorpusIndex]:
    """The index saved in ``folder``, or None where there is none or it is damaged (built
    again then: it is a cache, and a damaged one failed every query until deleted by hand).
    ``log``: where to say that a damaged one is rebuilt (only under the entry's lock)."""
    if not (folder / "index.json").exists():
        return None
    try:
        return CorpusIndex.load(folder)
    except DamagedIndex as e:
        if log is not None:
            log(f"{e}; building it again")
        return None


def query_vectors(model, tokens: Sequence[str], word: str, occurrence: int = 1) -> Tuple[int, np.ndarray]:
    """Position of occurrence ``occurrence`` (from 1: the first) of ``word`` in ``tokens`` and
    its vectors (L + 1, D). An occurrence the sentence does not have is a ValueError (a word
    that occurs twice could only ever be queried at its first use)."""
    if isinstance(tokens, str):  # `word in tokens` would test for a substring
        raise TypeError(f"tokens must be a list of tokens, not a string; e.g. {tokens!r}.split()")
    occurrence = require_count("occurrence", occurrence)
    where = [i for i, token in enumerate(tokens) if token == word]
    if not where:
        raise ValueError(f"{word!r} is not a token of the sentence {' '.join(tokens)!r}")
    if occurrence > len(where):
        raise ValueError(f"occurrence {occurrence} of {word!r}: the sentence {' '.join(tokens)!r} has "
                         f"{len(where)}")
    i = where[occurrence - 1]
    return i, embed_layers(model, [list(tokens)])[0][:, i]


def occurrences_in(tokens: Sequence[str], word: str) -> int:
    """How many tokens of ``tokens`` are ``word`` (exactly, as :func:`query_vectors` matches)."""
    return sum(token == word for token in tokens)


def context(sentence: Sequence[str], token: int, width: int = 8) -> str:
    """The words around ``token`` with the token in brackets."""
    lo, hi = max(0, token - width), min(len(sentence), token + width + 1)
    words = list(sentence[lo:hi])
    words[token - lo] = f"[{words[token - lo]}]"
    return ("... " if lo else "") + " ".join(words) + (" ..." if hi < len(sentence) else "")
