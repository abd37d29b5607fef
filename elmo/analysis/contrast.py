"""Contrast pairs: the same words, a swapped relation. Does a layer notice, and how much?

Each item is a pair of sentences with the same multiset of words (``the dog chased the cat``
/ ``the cat chased the dog``), a target word in both, and the target's label in each
(``agent`` / ``patient``). Two measurements per layer:

* **movement**: the cosine distance ``1 - cos`` between a word's vector in sentence A and the
  same word's vector in sentence B (words matched by their occurrence number), averaged over
  the words of each pair and then over the pairs (``words``: each pair counts once, however
  long), and over the targets; and between the mean-pooled sentence vectors. For scale,
  ``spread`` is the mean distance between random tokens of different sentences. Layer 0 is
  context-free, so its movement is 0.
* **probe**: per category, the pairs are split into two halves (seeded; pairs that share a
  sentence stay on one side, so no held-out vector was trained on); a linear probe
  (:func:`elmo.analysis.probes.train_probe`) is trained on the targets of one half and tested
  on the other, then the halves swap; the accuracy is over every held-out target of the two
  rounds (each target is held out once, so halves of unequal size weigh by size). Since every
  training word occurs with both labels, word identity cannot help: layer 0 labels a pair's
  two targets alike, so it gets at most one right, exactly chance where a category has two
  labels (with more, 0 or 50% of each pair's, not 1 / labels). ``pair_accuracy`` asks the easier question of whether the probe ranks the two
  sentences of a held-out pair the right way round (a tie counts one half).

Clustering by topic is not understanding: the sentences of a pair share their topic and
words, so only what a layer encodes about the relation can separate them.
"""
from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..text_files import decode_text, text_lines
from .probes import check_probe_settings, train_probe
from .stats import chance_range
from .vectors import embed_layers, progress_bar, unit_rows


@dataclass(frozen=True)
class ContrastItem:
    """A target word in a sentence pair, with its label in each sentence."""

    category: str
    a: Tuple[str, ...]
    b: Tuple[str, ...]
    target: str
    label_a: str
    label_b: str


def parse_pairs(text: str, source: str = "<text>") -> List[ContrastItem]:
    """Items of a tab-separated contrast file (see :mod:`.contrast_pairs` for the format)."""
    items = []
    # lines end at \n only (str.splitlines also ends one at a form feed, U+2028, ...: a
    # sentence holding one lost its other fields, and the lines after it were misnumbered)
    lines = text_lines(text, lambda n, what: ValueError(f"{source}:{n}: {what}"))
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 6:
            raise ValueError(f"{source}:{n}: expected 6 tab-separated fields, got {len(parts)}")
        cat, a, b, target, la, lb = (p.strip() for p in parts)
        a_t, b_t = tuple(a.split()), tuple(b.split())
        if target not in a_t or target not in b_t:
            raise ValueError(f"{source}:{n}: target {target!r} is not a token of both sentences")
        if la == lb:  # word identity would then predict the label: layer 0 above chance
            raise ValueError(f"{source}:{n}: the target's label is {la!r} in both sentences; a "
                             "contrast pair's target changes its label between them")
        if a_t == b_t:  # nothing is swapped: the probe would get one vector with two labels
            raise ValueError(f"{source}:{n}: the two sentences are the same; a pair needs two "
                             "sentences that differ")
        items.append(ContrastItem(cat, a_t, b_t, target, la, lb))
    if not items:
        raise ValueError(f"{source}: no contrast pairs")
    return items


def load_pairs(path: Optional[Path] = None) -> List[ContrastItem]:
    """The items of a user's file, or the built-in set."""
    if path is None:
        from .contrast_pairs import BUILTIN
        return parse_pairs(BUILTIN, "built-in")
    text = decode_text(Path(path).read_bytes(), path, ValueError,
                       expected="contrast pairs are a UTF-8 tab-separated file")
    return parse_pairs(text, str(path))


def pairs_record(path: Optional[Path] = None, items: Optional[Sequence[ContrastItem]] = None) -> dict:
    """What the results of a contrast run record of its pairs (those of ``path``, or the
    built-in set; ``items``: the pairs as loaded from it, read again when not given):
    ``source`` (the file, or ``built-in``), the built-in set's ``version``
    (:data:`.contrast_pairs.VERSION`; None for a file) and ``sha256``, a digest of the pairs as
    parsed (comment lines, blank lines and line ends do not count). Results kept in a report
    folder are checked against it: a file edited under the same name, or a new version of the
    built-in set, gives other numbers."""
    from .contrast_pairs import VERSION

    items = load_pairs(path) if items is None else items
    canonical = json.dumps([[it.category, list(it.a), list(it.b), it.target, it.label_a, it.label_b]
                            for it in items], ensure_ascii=False)
    return {"source": "built-in" if path is None else str(path),
            "version": VERSION if path is None else None,
            "sha256": hashlib.sha256(canonical.encode("utf-8")).hexdigest()}


def different_words(items: Sequence[ContrastItem]) -> List[ContrastItem]:
    """Items whose two sentences do not have the same multiset of words."""
    return [it for it in items if sorted(it.a) != sorted(it.b)]


def sentence_pairs(items: Sequence[ContrastItem]) -> List[Tuple[Tuple[str, ...], Tuple[str, ...]]]:
    """The distinct pairs of sentences of ``items``, each once however many targets it has
    and in whichever order its lines give the two sentences (sorted, each pair in sorted
    order): a pair written again with its sentences swapped is the same pair."""
    return sorted({(it.a, it.b) if it.a <= it.b else (it.b, it.a) for it in items})


def align(a: Sequence[str], b: Sequence[str]) -> List[Tuple[int, int]]:
    """Index pairs (i in a, k in b) of the same word with the same occurrence number."""
    where: Dict[Tuple[str, int], int] = {}
    seen: Dict[str, int] = defaultdict(int)
    for k, w in enumerate(b):
        where[(w, seen[w])] = k
        seen[w] += 1
    seen.clear()
    out = []
    for i, w in enumerate(a):
        match = where.get((w, seen[w]))
        seen[w] += 1
        if match is not None:
            out.append((i, match))
    return out


def _cos_dist(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """1 - cosine of matching rows of (..., D) arrays."""
    return 1.0 - (unit_rows(x) * unit_rows(y)).sum(-1)


def movement(vecs: Dict[Tuple[str, ...], np.ndarray], items: Sequence[ContrastItem],
             n_spread: int = 2000, seed: int = 0) -> Dict[str, List[float]]:
    """Per layer: mean movement of all words, of the targets, of the sentence vector, and the
    spread of random token pairs. ``vecs``: sentence -> (L + 1, n, D)."""
    pairs = sentence_pairs(items)     # (a pair in both orders weighed twice in the mean)
    words, targets, sents = [], [], []
    for a, b in pairs:
        idx = align(a, b)
        va, vb = vecs[a], vecs[b]
        words.append(_cos_dist(va[:, [i for i, _ in idx]], vb[:, [k for _, k in idx]]).mean(-1))
        sents.append(_cos_dist(va.mean(1), vb.mean(1)))
    for a, b, target in sorted({sentence_pairs([it])[0] + (it.target,)
                                for it in items}):   # each target of a pair once
        targets.append(_cos_dist(vecs[a][:, a.index(target)], vecs[b][:, b.index(target)]))
    sentences = sorted(vecs)
    rng = random.Random(seed)
    spread = []
    for _ in range(n_spread):
        s1, s2 = rng.sample(sentences, 2)
        spread.append(_cos_dist(vecs[s1][:, rng.randrange(len(s1))],
                                vecs[s2][:, rng.randrange(len(s2))]))
    mean = lambda rows: [float(x) for x in np.mean(rows, axis=0)]
    return {"words": mean(words), "targets": mean(targets), "sentence": mean(sents),
            "spread": mean(spread)}


def _question(it: ContrastItem) -> tuple:
    """What an item asks, the same for the item written with its sentences (and labels)
    swapped."""
    if it.a <= it.b:
        return it.category, it.a, it.b, it.target, it.label_a, it.label_b
    return it.category, it.b, it.a, it.target, it.label_b, it.label_a


def distinct_rankings(items: Sequence[ContrastItem]) -> int:
    """How many different questions the pair rankings of ``items`` ask: an item written again
    with its sentences (and labels) swapped, or twice, is the same ranking of the same two
    vectors, decided the same way, so it adds no evidence to the chance range."""
    return len({_question(it) for it in items})


def distinct_items(items: Sequence[ContrastItem]) -> List[ContrastItem]:
    """``items`` without those that ask again what an earlier one asked (:func:`_question`),
    in their order."""
    seen: set = set()
    out = []
    for it in items:
        if _question(it) not in seen:
            seen.add(_question(it))
            out.append(it)
    return out


def split_halves(pairs: Sequence[Tuple[Tuple[str, ...], Tuple[str, ...]]],
                 seed: int = 0) -> Tuple[set, set]:
    """Two halves of ``pairs`` (seeded) such that no sentence is in both.

    Pairs that share a sentence (a pair written in both orders, or one sentence contrasted
    with two others) are kept together: split apart, the held-out half would hold a target
    vector the probe was trained on, with the same label, and memorising it would score.
    Without shared sentences every pair is a group of its own (the split is the plain one).
    """
    parent: Dict[Tuple[str, ...], Tuple[str, ...]] = {}

    def root(s):
        while parent.setdefault(s, s) != s:
            s = parent[s]
        return s

    for a, b in pairs:
        parent[root(a)] = root(b)
    linked: Dict[Tuple[str, ...], list] = defaultdict(list)
    for pair in sorted(pairs):
        linked[root(pair[0])].append(pair)
    groups = sorted(tuple(g) for g in linked.values())
    if len(groups) < 2:
        raise ValueError(f"the probe needs at least two pairs that share no sentence; "
                         f"got {len(pairs)} pair(s) in {len(groups)} group(s) linked by their sentences")
    random.Random(seed).shuffle(groups)
    half = len(groups) // 2
    return ({p for g in groups[:half] for p in g}, {p for g in groups[half:] for p in g})


def _category_halves(items: Sequence[ContrastItem], seed: int) -> Tuple[set, set]:
    """:func:`split_halves` of one category's pairs; a category it cannot split is a
    ValueError naming the category."""
    try:
        return split_halves(sorted({(it.a, it.b) for it in items}), seed)
    except ValueError as e:
        name = items[0].category if items else "?"
        raise ValueError(f"contrast category {name!r}: {e}") from None


def check_categories(items: Sequence[ContrastItem]) -> None:
    """Refuse, before any model runs, a category whose pairs the probe cannot split into
    two halves (:func:`split_halves`; whether it can does not depend on the seed)."""
    by_cat: Dict[str, List[ContrastItem]] = defaultdict(list)
    for it in items:
        by_cat[it.category].append(it)
    for cat_items in by_cat.values():
        _category_halves(cat_items, 0)


def probe_halves(vecs: Dict[Tuple[str, ...], np.ndarray], items: Sequence[ContrastItem],
                 layer: int, seed: int = 0, l2: float = 1e-2) -> Dict[str, float]:
    """Accuracy of a probe trained on half of the pairs, tested on the other (and back).

    Returns ``accuracy`` (held-out targets), ``pair_accuracy`` (held-out pairs ranked the
    right way round), ``n_pairs``, and the number of decisions behind each accuracy
    (``n_targets``, ``n_rankings``).
    """
    pairs = sentence_pairs(items)
    halves = _category_halves(items, seed)
    labels = sorted({it.label_a for it in items} | {it.label_b for it in items})
    lid = {label: i for i, label in enumerate(labels)}
    acc, pair_acc = [], []
    for train_half, test_half in ((halves[0], halves[1]), (halves[1], halves[0])):
        x, y = [], []
        for it in items:
            if (it.a, it.b) in train_half:
                x += [vecs[it.a][layer, it.a.index(it.target)], vecs[it.b][layer, it.b.index(it.target)]]
                y += [lid[it.label_a], lid[it.label_b]]
        probe = train_probe(np.stack(x), y, len(labels), l2=l2, seed=seed)
        for it in items:
            if (it.a, it.b) not in test_half:
                continue
            s = probe.scores(np.stack([vecs[it.a][layer, it.a.index(it.target)],
                                       vecs[it.b][layer, it.b.index(it.target)]]))
            pred = s.argmax(1)
            acc += [pred[0] == lid[it.label_a], pred[1] == lid[it.label_b]]
            la, lb = lid[it.label_a], lid[it.label_b]
            margin_a, margin_b = s[0, la] - s[0, lb], s[1, la] - s[1, lb]
            pair_acc.append(1.0 if margin_a > margin_b else 0.5 if margin_a == margin_b else 0.0)
    return {"accuracy": float(np.mean(acc)), "pair_accuracy": float(np.mean(pair_acc)),
            "n_pairs": len(pairs), "n_targets": len(acc), "n_rankings": len(pair_acc)}


def contrast_eval(model, items: Sequence[ContrastItem], seed: int = 0, l2: float = 1e-2,
                  batch_size: int = 32, progress: bool = False) -> dict:
    """Movement and probe accuracy per layer, per category and overall; ``progress``: a bar on
    stderr over the tokens of the sentences embedded.

    Returns ``{"categories": {name: {"movement": {...}, "probe": [per layer], "n_pairs",
    "chance", "chance_range"}}, "movement": {...} over all items, "n_items", "different_words"}``
    (``different_words``: the pairs whose sentences do not have the same words). An item that
    repeats an earlier one, or is it with the sentences swapped, is left out (``n_items``
    counts the rest).
    """
    check_probe_settings(l2, seed)   # (before the vectors are computed)
    if isinstance(items, (str, bytes)) or not all(isinstance(it, ContrastItem) for it in items):
        # (else an AttributeError from deep inside: "'str' object has no attribute 'a'")
        raise TypeError("contrast_eval takes ContrastItem pairs: contrast.load_pairs(path) or "
                        "contrast.parse_pairs(text)")
    if not items:  # (else an IndexError below)
        raise ValueError("contrast_eval needs contrast pairs; got none")
    # an item written again with its sentences swapped (or twice) asks the same question of
    # the same vectors: kept, it was trained on and scored twice, and weighed double
    items = distinct_items(items)
    sentences = sorted({it.a for it in items} | {it.b for it in items})
    with progress_bar(sum(len(s) for s in sentences), "contrast: tokens", progress) as bar:
        arrays = embed_layers(model, [list(s) for s in sentences], batch_size, bar)
    vecs = dict(zip(sentences, arrays))
    n_layers = arrays[0].shape[0]
    by_cat: Dict[str, List[ContrastItem]] = defaultdict(list)
    for it in items:
        by_cat[it.category].append(it)
    cats = {}
    for cat, cat_items in sorted(by_cat.items()):
        n_labels = len({it.label_a for it in cat_items} | {it.label_b for it in cat_items})
        cats[cat] = {
            "movement": movement(vecs, cat_items, seed=seed),
            "probe": [probe_halves(vecs, cat_items, j, seed, l2) for j in range(n_layers)],
            "n_pairs": len(sentence_pairs(cat_items)),     # (both orders: one pair)
            "n_items": len(cat_items), "chance": 1.0 / n_labels,
            # what a coin flip scores on as many distinct rankings: accuracies inside are not a signal
            "chance_range": list(chance_range(distinct_rankings(cat_items))),
        }
    return {"categories": cats, "movement": movement(vecs, items, seed=seed),
            # pairs, as the report says (the items counted each two-target pair twice)
            "n_items": len(items), "different_words": len(sentence_pairs(different_words(items)))}
