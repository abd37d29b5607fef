"""Word-sense disambiguation by the nearest sense centroid per layer (the paper's Table 5).

Data: WordNet's example sentences, each attached to a synset. An example shows one sense of
each of its synset's lemmas that occurs in it; :func:`find_target` finds that occurrence
(the lemma itself or a regular inflection of it; irregular forms are missed and the example
is dropped).

Protocol, per part-of-speech-tagged lemma (``bank/n``) with examples in two or more synsets:

1. split: each example goes to *test* with probability ``test_fraction``, drawn from
   ``random.Random(f"{seed}:{lemma}/{pos}")`` (fixed seed, independent of other lemmas);
   copies of one sentence go together, so no test sentence is also a train sentence;
2. each sense of a lemma is represented by its centroid, the mean of layer j's vectors at
   the target token of its train examples (train examples only), as in the paper's 5.3; a
   test occurrence, by layer j at its target token, gets the sense whose centroid has the
   highest cosine similarity with it among the senses of the same lemma (ties, as layer 0
   gives every occurrence of one word form: the most frequent sense of step 3 when it is one
   of them, else the lowest synset id). :func:`nearest_neighbour` on the train examples
   themselves (1-NN) is what earlier reports measured (no ``method`` in their results);
3. where the lemma has no train example, it backs off to the lemma's most frequent sense by
   SemCor counts (``cntlist``; ties: the lower WordNet sense number);
4. F1 from precision (correct / predicted) and recall (correct / test items); with the
   backoff every item gets a prediction, so the three are equal unless a lemma has no sense
   in the sense index.

The most-frequent-sense baseline predicts step 3's sense for every test item.
"""
from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ..checks import require_count, require_seed, shown
from .datasets import Sense, SenseExample
from .stats import bootstrap_interval, paired_bootstrap, verdict
from .vectors import gathered_layers, progress_bar, unit_rows

LemmaKey = Tuple[str, str]                                          # (lemma, pos)


def inflections(lemma: str, pos: str) -> set:
    """Regular inflected forms of a one-word lemma (lower case), the lemma included."""
    forms = {lemma}
    if pos == "n":
        forms |= {lemma + "s", lemma + "es"}
        if lemma.endswith("y"):
            forms.add(lemma[:-1] + "ies")
    elif pos == "v":
        forms |= {lemma + "s", lemma + "es", lemma + "ed", lemma + "d", lemma + "ing"}
        if lemma.endswith("e"):
            forms.add(lemma[:-1] + "ing")
        if lemma.endswith("y"):
            forms |= {lemma[:-1] + "ies", lemma[:-1] + "ied"}
        if len(lemma) >= 3 and lemma[-1] not in "aeiouwxy" and lemma[-2] in "aeiou":
            forms |= {lemma + lemma[-1] + "ed", lemma + lemma[-1] + "ing"}   # stop: stopped
    elif pos == "a":
        forms |= {lemma + "er", lemma + "est", lemma + "r", lemma + "st"}
        if lemma.endswith("y"):
            forms |= {lemma[:-1] + "ier", lemma[:-1] + "iest"}
    return forms


def clean_lemma(lemma: str) -> str:
    """A data-file lemma as the sense index writes it: lower case, without the adjective
    marker (``galore(ip)`` -> ``galore``)."""
    return lemma.split("(", 1)[0].lower()


def find_target(tokens: Sequence[str], lemma: str, pos: str) -> Optional[int]:
    """Index of the first token that is ``lemma`` or a regular inflection of it, else None."""
    forms = inflections(lemma, pos)
    for i, tok in enumerate(tokens):
        if tok.lower() in forms:
            return i
    return None


@dataclass(frozen=True)
class Instance:
    """One occurrence of a lemma in an example sentence, labelled with its synset."""

    lemma: str
    pos: str
    synset: str
    tokens: Tuple[str, ...]
    index: int

    @property
    def key(self) -> LemmaKey:
        return self.lemma, self.pos


def instances(examples: Iterable[SenseExample]) -> List[Instance]:
    """The occurrence of each example's first one-word lemma found in it (multi-word lemmas
    such as ``physical_object`` are skipped); examples with no lemma found are dropped."""
    out = []
    for ex in examples:
        for raw in ex.lemmas:
            lemma = clean_lemma(raw)
            if "_" in lemma or "-" in lemma:
                continue
            i = find_target(ex.tokens, lemma, ex.pos)
            if i is not None:
                out.append(Instance(lemma, ex.pos, ex.synset, ex.tokens, i))
                break
    return out


def ambiguous(items: Iterable[Instance]) -> Dict[LemmaKey, List[Instance]]:
    """Instances grouped by lemma, keeping the lemmas with examples in >= 2 synsets."""
    by_key: Dict[LemmaKey, List[Instance]] = defaultdict(list)
    for it in items:
        by_key[it.key].append(it)
    return {k: v for k, v in sorted(by_key.items()) if len({i.synset for i in v}) >= 2}


def split_by_lemma(groups: Dict[LemmaKey, List[Instance]], test_fraction: float = 0.5,
                   seed: int = 0) -> Tuple[List[Instance], List[Instance]]:
    """(train, test): each example to test with probability ``test_fraction``, drawn from a
    generator seeded by the seed and the lemma, so one lemma's split never depends on
    which other lemmas are included. Examples of a lemma with the same sentence (WordNet
    repeats some) all go to the side of the first."""
    train: List[Instance] = []
    test: List[Instance] = []
    for (lemma, pos), items in groups.items():
        rng = random.Random(f"{seed}:{lemma}/{pos}")
        side: Dict[Tuple[str, ...], bool] = {}      # sentence -> goes to test
        for it in items:
            # copies of one sentence go where the first went: split apart, a test occurrence
            # met its own vector in train (cosine 1) and took that example's synset
            to_test = side.setdefault(it.tokens, rng.random() < test_fraction)
            (test if to_test else train).append(it)
    return train, test


def most_frequent_senses(senses: Iterable[Sense]) -> Dict[LemmaKey, str]:
    """(lemma, pos) -> the synset with the highest SemCor count (ties: lower sense number)."""
    best: Dict[LemmaKey, Tuple[int, int, str]] = {}
    for s in senses:
        rank = (-s.semcor_count, s.sense_number, s.synset)
        key = (s.lemma, s.pos)
        if key not in best or rank < best[key]:
            best[key] = rank
    return {k: v[2] for k, v in best.items()}


def sense_centroids(vecs: np.ndarray, labels: Sequence[str], keys: Sequence[LemmaKey]
                    ) -> Tuple[np.ndarray, List[str], List[LemmaKey]]:
    """The mean train vector of each sense of each lemma (the paper's sense representation).

    Args:
        vecs: (N, D) train vectors; labels, keys: their N synsets and (lemma, pos) keys.

    Returns:
        (S, D) float64 centroids, one per distinct (key, label), with their S labels and keys,
        ordered by (key, label) so that no tie depends on the order of the examples file.
    """
    x = np.asarray(vecs, dtype=np.float64)
    if len(x) != len(labels) or len(x) != len(keys):
        raise ValueError(f"{len(x)} vectors for {len(labels)} labels and {len(keys)} keys")
    rows: Dict[Tuple[LemmaKey, str], List[int]] = defaultdict(list)
    for i, (k, label) in enumerate(zip(keys, labels)):
        rows[(k, label)].append(i)
    order = sorted(rows)
    centroids = (np.stack([x[rows[g]].mean(axis=0) for g in order]) if order
                 else np.zeros((0,) + x.shape[1:]))
    return centroids, [label for _, label in order], [k for k, _ in order]


def nearest_neighbour(train_vecs: np.ndarray, train_labels: Sequence[str],
                      train_keys: Sequence[LemmaKey], test_vecs: np.ndarray,
                      test_keys: Sequence[LemmaKey],
                      backoff: Optional[Dict[LemmaKey, str]] = None) -> List[Optional[str]]:
    """1-NN by cosine among the train items of the same key; backoff where there are none.
    Ties (see :data:`TIE`) go to the label most of the tied items have, then to the backoff's.

    Args:
        train_vecs: (N, D); test_vecs: (M, D).
        train_labels, train_keys: N labels and keys; test_keys: M keys.
        backoff: key -> label for keys without train items (missing: None, no prediction).

    Returns:
        M predicted labels (None where no prediction was possible).
    """
    by_key: Dict[LemmaKey, List[int]] = defaultdict(list)
    for i, k in enumerate(train_keys):
        by_key[k].append(i)
    train_u, test_u = unit_rows(np.asarray(train_vecs)), unit_rows(np.asarray(test_vecs))
    preds: List[Optional[str]] = []
    for m, k in enumerate(test_keys):
        rows = by_key.get(k)
        if not rows:
            preds.append((backoff or {}).get(k))
            continue
        sims = train_u[rows] @ test_u[m]
        tied = [train_labels[rows[i]] for i in np.flatnonzero(sims >= sims.max() - TIE)]
        preds.append(_break_tie(tied, (backoff or {}).get(k)))
    return preds


#: Cosines this close to the best are a tie (layer 0 gives every occurrence of a word form the
#: same vector, so all its train occurrences tie, up to the last bits of float32).
TIE = 1e-6


def _break_tie(labels: List[str], most_frequent: Optional[str]) -> str:
    """The label of the nearest train items (in train order): the one most of them have; among
    equals the lemma's most frequent sense, when it is one of them; else the first. (The first
    alone made a tie, all of layer 0's decisions, depend on the order of the examples file.)"""
    counts = Counter(labels)
    top = max(counts.values())
    best = [label for label in counts if counts[label] == top]          # first-seen order
    return most_frequent if most_frequent in best else best[0]


def f1_score(predictions: Sequence[Optional[str]], gold: Sequence[str]) -> Dict[str, float]:
    """Precision (correct / predicted), recall (correct / all) and their harmonic mean."""
    correct = sum(p is not None and p == g for p, g in zip(predictions, gold))
    predicted = sum(p is not None for p in predictions)
    p = correct / predicted if predicted else 0.0
    r = correct / len(gold) if gold else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def wsd_eval(model, examples: Sequence[SenseExample], senses: Sequence[Sense],
             test_fraction: float = 0.5, seed: int = 0, max_lemmas: Optional[int] = None,
             batch_size: int = 32, progress: bool = False) -> dict:
    """F1 of the nearest sense centroid per layer and of the most frequent sense on WordNet
    examples.

    ``max_lemmas``: evaluate at most this many ambiguous lemmas, drawn with the seed.
    Returns a dict: ``layers`` (F1 per layer), ``mfs``, ``layers_interval`` /
    ``mfs_interval`` (95% bootstrap intervals of F1 over lemmas, ``[low, high]``), counts, ``finding`` (layer 2 vs 1, by
    a paired bootstrap that resamples lemmas, since one lemma's test items are related),
    ``layers_seen_senses`` / ``mfs_seen_senses``: accuracy on the test items whose sense
    has a train example (the only ones a sense centroid can get right), and ``method``.
    ``progress``: a bar on stderr over the tokens of the examples embedded (minutes for all
    lemmas).
    """
    # (checked before any vector: a negative seed failed in the bootstrap after all of them, a
    # negative max_lemmas in random.sample, and a test_fraction of 1 or more put every example
    # in the test set, where each layer then scored what the most frequent sense does)
    seed = require_seed(seed)
    if max_lemmas is not None:
        max_lemmas = require_count("max_lemmas", max_lemmas, least=0)
    if isinstance(test_fraction, (bool, str, bytes)) or not isinstance(test_fraction, (int, float, np.number)) \
            or not 0.0 < float(test_fraction) < 1.0:
        raise ValueError(f"test_fraction must be a number between 0 and 1 (both excluded: both sides of "
                         f"the split need examples), got {shown(test_fraction)}")
    groups = ambiguous(instances(examples))
    if max_lemmas is not None and len(groups) > max_lemmas:
        keys = sorted(random.Random(seed).sample(sorted(groups), max_lemmas))
        groups = {k: groups[k] for k in keys}
    train, test = split_by_lemma(groups, test_fraction, seed)
    if not test:
        # (it blamed "test_fraction 0", which is refused above)
        raise ValueError(f"no test examples: the split put all {len(train)} examples of the {len(groups)} "
                         f"lemma(s) with examples in 2 or more senses on the train side; give more "
                         f"examples or lemmas (max_lemmas), or a larger test_fraction")
    mfs = most_frequent_senses(senses)
    items = train + test
    with progress_bar(sum(len(it.tokens) for it in items), "wsd: example tokens", progress) as bar:
        vecs = gathered_layers(model, [list(it.tokens) for it in items], [it.index for it in items],
                               batch_size, bar)   # (L+1, N, D)
    tr, te = vecs[:, :len(train)], vecs[:, len(train):]
    gold = [it.synset for it in test]
    keys_tr, keys_te = [it.key for it in train], [it.key for it in test]
    labels_tr = [it.synset for it in train]
    train_senses = {(t.key, t.synset) for t in train}
    seen = np.array([(it.key, it.synset) in train_senses for it in test])
    lemma_ids = {k: i for i, k in enumerate(sorted(set(keys_te)))}
    by_lemma = [lemma_ids[k] for k in keys_te]

    def interval(preds):     # F1's 95% interval, resampling lemmas
        b = bootstrap_interval([p == g for p, g in zip(preds, gold)], by_lemma,
                               predicted=[p is not None for p in preds], seed=seed)
        return [b["low"], b["high"]]

    per_layer, per_layer_seen, correct, predicted, intervals = [], [], [], [], []
    for j in range(vecs.shape[0]):
        # nearest of the senses' train centroids (1-NN over the examples themselves let one
        # stray train example of a sense outvote all the others of another)
        centroids, c_labels, c_keys = sense_centroids(tr[j], labels_tr, keys_tr)
        preds = nearest_neighbour(centroids, c_labels, c_keys, te[j], keys_te, backoff=mfs)
        per_layer.append(f1_score(preds, gold)["f1"])
        intervals.append(interval(preds))
        correct.append(np.array([p == g for p, g in zip(preds, gold)], dtype=float))
        predicted.append(np.array([p is not None for p in preds], dtype=float))
        per_layer_seen.append(float(correct[-1][seen].mean()) if seen.any() else None)
    mfs_preds = [mfs.get(k) for k in keys_te]
    mfs_correct = np.array([p == g for p, g in zip(mfs_preds, gold)], dtype=float)
    train_keys = set(keys_tr)
    result = {
        "method": "sense_centroid",     # (results without it are of 1-NN over train examples)
        "layers": per_layer,
        "layers_interval": intervals,
        "mfs": f1_score(mfs_preds, gold)["f1"],
        "mfs_interval": interval(mfs_preds),
        "layers_seen_senses": per_layer_seen,
        "mfs_seen_senses": float(mfs_correct[seen].mean()) if seen.any() else None,
        "n_lemmas": len(groups), "n_train": len(train), "n_test": len(test),
        "n_backoff": sum(k not in train_keys for k in keys_te),
        "n_test_sense_unseen": int((~seen).sum()),
    }
    if len(correct) >= 3:
        # a difference of F1, the figures of the table (an accuracy difference differed from
        # theirs wherever test items went unpredicted: a lemma with no sense to back off to)
        boot = paired_bootstrap(correct[2], correct[1], by_lemma, seed=seed,
                                predicted_a=predicted[2], predicted_b=predicted[1])
        # (of F1: results written before it was say nothing, and their difference is of accuracy)
        result["layer2_minus_layer1"] = {**boot, "metric": "f1"}
        result["finding"] = verdict("layer 2", "layer 1", boot)
        if seen.any():     # the same difference where 1-NN can be right, in its own points
            result["layer2_minus_layer1_seen_senses"] = paired_bootstrap(
                correct[2][seen], correct[1][seen], np.asarray(by_lemma)[seen], seed=seed)
    return result
