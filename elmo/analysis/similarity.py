"""Word similarity per layer: Spearman's rho between the cosine of two words' vectors and
human similarity scores (WordSim-353, SimLex-999, or any file of scored word pairs).

    pairs = read_pairs("pairs.tsv")
    res = similarity_eval("fixture", {"mine": pairs})
    res["sets"]["mine"]["layers"]        # rho per layer, layer 0 first

Each word is embedded *alone*, as a one-token sentence. Layer 0 is then exactly the character
CNN's context-free token vector of the word. Layers 1..L are the biLSTM's vectors of the word
read between the sentence boundary tokens only: a fixed function of the word type too, but
one of a context that no real use of the word has, so they say what the LSTM layers make of a
word in isolation, not what they hold of its uses in text.

With a corpus, each word is also the *type average* of its contextual vectors: the mean of
its vectors over every occurrence in the corpus (tokens matched exactly, case included). Only
pairs both of whose words occur can be scored that way; how many is reported, with the
lone-word rho on those same pairs beside it.

Uncertainty: a 95% percentile interval from resampling pairs (1000 times, one seed; every
layer on the same draws). GloVe, when given, is a baseline on the pairs it covers (both of
whose words it has); ELMo's character CNN has no unknown words, so its rho is on every pair,
and again on GloVe's pairs for the comparison.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..correlation import spearman, undefined_reason
from .stats import resampled_interval
from .vectors import as_embedder, embed_layers, gather, progress_bar, unit_rows

#: (word 1, word 2, human score).
Pair = Tuple[str, str, float]
#: GloVe as :func:`elmo.tasks.embeddings.load_glove` gives it, and whether it is cased.
Glove = Tuple[Sequence[str], np.ndarray, bool]

#: Resamples of the bootstrap intervals.
N_RESAMPLES = 1000

#: Below this many pairs the report warns that an interval says little: resampling so few
#: pairs draws the same few again and again (3 pairs can give the interval [1, 1]).
MIN_PAIRS = 10


def read_pairs(path: Union[str, Path]) -> List[Pair]:
    """The scored word pairs of a file (tab or comma separated ``word1 word2 score``, ``#``
    comments, a header row skipped; :func:`elmo.data.readers.read_word_pairs`). A file with no
    pair, an empty word or a score that is not a finite number is a ValueError naming it."""
    from ..data.readers import read_word_pairs

    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory; word pairs are a file (word1, word2, score)")
    pairs = []
    for number, (a, b, score) in enumerate(read_word_pairs(path), 1):
        a, b = a.strip(), b.strip()
        if not a or not b:
            raise ValueError(f"{path}: pair {number} has an empty word")
        spaced = next((w for w in (a, b) if any(c.isspace() for c in w)), None)
        if spaced is not None:
            # (embedded as one token with a space in it, a thing no text holds, and never
            # found in a corpus's tokens)
            raise ValueError(f"{path}: pair {number} has {spaced!r}, which holds a space; each side of a "
                             f"pair is one word, embedded alone as one token")
        if not math.isfinite(score):
            raise ValueError(f"{path}: pair {number} ({a}, {b}) has the score {score}; scores must be "
                             f"finite numbers")
        pairs.append((a, b, float(score)))
    if len(pairs) < 2:
        raise ValueError(f"{path}: {len(pairs)} word pair(s) (lines of word1, word2, score); a correlation "
                         f"needs at least 2")
    return pairs


def words_alone(model, words: Sequence[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
    """Every layer's vector of each word embedded as a one-token sentence: (L + 1, W, D)
    float32, in the order of ``words``. ``progress``: a bar on stderr over the words."""
    with progress_bar(len(words), "similarity: words", progress, unit="word") as bar:
        arrays = embed_layers(model, [[w] for w in words], batch_size, bar)
    return gather(arrays, [(i, 0) for i in range(len(words))])


#: Sentences embedded at a time for the type averages (bounds the memory of their vectors).
CHUNK_SENTENCES = 1000


def type_averages(model, sentences: Sequence[Sequence[str]], words: Sequence[str],
                  batch_size: int = 32, progress: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """The mean vector per layer of each word over its occurrences in ``sentences``:
    ((L + 1, W, D) float64 means, (W,) occurrence counts). A word that does not occur gets a
    zero vector and count 0. Only sentences holding one of the words are embedded;
    ``progress``: a bar on stderr over their tokens."""
    embedder = as_embedder(model, batch_size)
    index = {w: i for i, w in enumerate(words)}
    keep = [list(s) for s in sentences if any(t in index for t in s)]
    sums = np.zeros((embedder.num_layers, len(words), embedder.dim))
    counts = np.zeros(len(words), dtype=np.int64)
    with progress_bar(sum(len(s) for s in keep), "similarity: corpus tokens", progress) as bar:
        for start in range(0, len(keep), CHUNK_SENTENCES):
            chunk = keep[start:start + CHUNK_SENTENCES]
            for sentence, array in zip(chunk, embed_layers(embedder, chunk, batch_size, bar)):
                for t, token in enumerate(sentence):
                    i = index.get(token)
                    if i is not None:
                        sums[:, i] += array[:, t]
                        counts[i] += 1
    return sums / np.maximum(counts, 1)[None, :, None], counts


def pair_cosines(vectors: np.ndarray, index: Mapping[str, int], pairs: Sequence[Pair]) -> np.ndarray:
    """Cosine of each pair's two word vectors per layer, in float64: (L + 1, N) from
    ``vectors`` (L + 1, W, D) whose column ``index[word]`` is the word's. A zero vector has
    cosine 0 with everything."""
    unit = unit_rows(np.asarray(vectors, dtype=np.float64))
    first = unit[:, [index[a] for a, _, _ in pairs]]
    second = unit[:, [index[b] for _, b, _ in pairs]]
    return np.einsum("lnd,lnd->ln", first, second)


def rho_with_interval(cosines: np.ndarray, scores: np.ndarray, seed: int,
                      n_resamples: int = N_RESAMPLES) -> Dict[str, Any]:
    """Spearman's rho of ``cosines`` (N,) against ``scores`` (N,), its 95% interval from
    resampling pairs (none with ``n_resamples`` 0), how many of those draws left rho undefined
    (the interval is over the others; None without draws), and why rho is undefined where it
    is (a constant side, under 2 pairs)."""
    if len(scores) == 0:
        return {"rho": None, "interval": None, "undefined_draws": None, "undefined": "no pairs"}
    reason = undefined_reason(cosines, scores)
    if reason:
        return {"rho": None, "interval": None, "undefined_draws": None, "undefined": reason}
    interval, undefined_draws = None, None
    if n_resamples:
        boot = resampled_interval(lambda i: spearman(cosines[i], scores[i]), len(scores), n_resamples, seed)
        interval = None if boot["low"] is None else [boot["low"], boot["high"]]
        undefined_draws = boot["n_undefined"]
    return {"rho": spearman(cosines, scores), "interval": interval, "undefined_draws": undefined_draws,
            "undefined": None}


def glove_coverage(glove: Glove, pairs: Sequence[Pair]) -> Tuple[List[int], np.ndarray, List[str]]:
    """Which pairs GloVe covers (both words found, looked up as the task models look words
    up: :func:`elmo.tasks.embeddings.lookup_key`), their cosines (n_covered,), and the
    distinct missing words, sorted."""
    from ..tasks.embeddings import lookup_key

    words, vectors, cased = glove
    index = {w: i for i, w in enumerate(words)}
    keys = {w: lookup_key(w, index, cased) for a, b, _ in pairs for w in (a, b)}
    missing = sorted(w for w, k in keys.items() if k not in index)
    covered = [i for i, (a, b, _) in enumerate(pairs) if keys[a] in index and keys[b] in index]
    found = {w: index[k] for w, k in keys.items() if k in index}
    cos = pair_cosines(np.asarray(vectors)[None], found, [pairs[i] for i in covered])[0]
    return covered, cos, missing


def repeated_pairs(pairs: Sequence[Pair]) -> List[List[str]]:
    """The pairs that repeat an earlier one (the same two words, in either order), in file
    order: each counts in rho as often as it is listed."""
    seen, out = set(), []
    for a, b, _ in pairs:
        key = frozenset((a, b))
        if key in seen:
            out.append([a, b])
        seen.add(key)
    return out


def evaluate_set(vectors: np.ndarray, index: Mapping[str, int], pairs: Sequence[Pair],
                 glove: Optional[Glove], seed: int, n_resamples: int = N_RESAMPLES) -> Dict[str, Any]:
    """One pair set: rho per layer on every pair (with intervals), and with ``glove`` GloVe's
    rho and each layer's on the pairs GloVe covers, with its coverage."""
    scores = np.array([s for _, _, s in pairs], dtype=np.float64)
    cos = pair_cosines(vectors, index, pairs)
    layers = [rho_with_interval(c, scores, seed, n_resamples) for c in cos]
    res: Dict[str, Any] = {"n_pairs": len(pairs), "n_words": len({w for a, b, _ in pairs for w in (a, b)}),
                           "repeated_pairs": repeated_pairs(pairs),
                           "layers": [r["rho"] for r in layers],
                           "layers_interval": [r["interval"] for r in layers],
                           "layers_undefined_draws": [r["undefined_draws"] for r in layers],
                           "layers_undefined": [r["undefined"] for r in layers]}
    if glove is not None:
        covered, glove_cos, missing = glove_coverage(glove, pairs)
        on = rho_with_interval(glove_cos, scores[covered], seed, n_resamples)
        res["glove"] = {"n_pairs": len(covered), "n_missing_words": len(missing),
                        "missing_words": missing[:20], "rho": on["rho"], "interval": on["interval"],
                        "undefined_draws": on["undefined_draws"], "undefined": on["undefined"],
                        **_rhos("layers", [rho_with_interval(c[covered], scores[covered], seed, 0)
                                           for c in cos])}
    return res


def evaluate_type_average(averages: np.ndarray, counts: np.ndarray, alone: np.ndarray,
                          index: Mapping[str, int], pairs: Sequence[Pair], seed: int,
                          n_resamples: int = N_RESAMPLES) -> Dict[str, Any]:
    """One pair set scored with type averages (L + 1, W, D) on the pairs both of whose words
    occur (``counts`` (W,) > 0), with the lone-word vectors' rho on those pairs beside it."""
    covered = [p for p in pairs if counts[index[p[0]]] and counts[index[p[1]]]]
    absent = sorted({w for a, b, _ in pairs for w in (a, b) if not counts[index[w]]})
    res = evaluate_set(averages, index, covered, None, seed, n_resamples)
    scores = np.array([s for _, _, s in covered], dtype=np.float64)
    res.update(n_missing_words=len(absent), missing_words=absent[:20],
               **_rhos("alone_layers", [rho_with_interval(c, scores, seed, 0)
                                        for c in pair_cosines(alone, index, covered)]))
    return res


def _rhos(name: str, results: Sequence[Dict[str, Any]]) -> Dict[str, List[Any]]:
    """``{name: the rhos, name + "_undefined": why each is undefined (None where defined)}`` of
    :func:`rho_with_interval` results, one per layer (a report showed their ``-`` unexplained)."""
    return {name: [r["rho"] for r in results], f"{name}_undefined": [r["undefined"] for r in results]}


def similarity_eval(model, sets: Mapping[str, Sequence[Pair]], glove: Optional[Glove] = None,
                    seed: int = 0, batch_size: int = 32, n_resamples: int = N_RESAMPLES,
                    corpus: Optional[Sequence[Sequence[str]]] = None, progress: bool = False) -> Dict[str, Any]:
    """Word similarity per layer on each named pair set, every word embedded alone.

    Args:
        model: anything :func:`elmo.analysis.vectors.as_embedder` takes.
        sets: name -> scored pairs (:func:`read_pairs`).
        glove: ``(words, (V, D) vectors, cased)`` for the GloVe baseline, or None.
        seed: of the bootstrap's draws; ``n_resamples``: their number (0: no intervals).
        corpus: tokenized sentences; given, each set is scored with type averages too.
        progress: bars on stderr over the words and the corpus's tokens embedded.

    Returns:
        ``{"method": "alone", "sets": {name: {"n_pairs", "n_words", "repeated_pairs", "layers", "layers_interval",
        "layers_undefined_draws", "layers_undefined", ["glove"]}}}``; a rho is None where it is
        undefined (the reason in ``layers_undefined``); ``layers_undefined_draws``: how many of
        the bootstrap's draws left rho undefined (their interval is over the rest); with a corpus, ``"type_average"``: {name: the same keys on the
        pairs whose words occur, ``n_missing_words``, ``missing_words``, ``alone_layers``,
        ``alone_layers_undefined``}. ``"glove"``'s ``layers`` (each layer on GloVe's pairs) have
        their reasons in its ``layers_undefined`` as well.
    """
    if not sets:
        raise ValueError("no word pair sets to evaluate")
    model = as_embedder(model, batch_size)              # (a model name: loaded once)
    words = sorted({w for pairs in sets.values() for a, b, _ in pairs for w in (a, b)})
    vectors = words_alone(model, words, batch_size, progress)   # each distinct word once, batched
    index = {w: i for i, w in enumerate(words)}
    res: Dict[str, Any] = {"method": "alone",
                           "sets": {name: evaluate_set(vectors, index, pairs, glove, seed, n_resamples)
                                    for name, pairs in sets.items()}}
    if corpus is not None:
        averages, counts = type_averages(model, corpus, words, batch_size, progress)
        res["type_average"] = {name: evaluate_type_average(averages, counts, vectors, index, pairs, seed,
                                                           n_resamples)
                               for name, pairs in sets.items()}
    return res
