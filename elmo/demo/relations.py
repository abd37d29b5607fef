"""The warning of ``elmo demo``, measured: seeing context is not understanding relations.

The sentence pairs are the ``role`` items of the built-in contrast set
(:mod:`elmo.analysis.contrast_pairs`, written before any model was run on them) plus "the dog
bit the man" / "the man bit the dog"; each sentence gets a capital first letter, as in the
training text. Two kinds of pair:

* **roles swapped**: the two sentences of a role pair: the same words, who did what to whom
  reversed;
* **topic changed**: the first sentences of two different role pairs (other nouns and verb,
  often another structure too).

Per layer, mean cosine distance ``1 - cos``: of the words the two sentences share (matched
by word and occurrence number, :func:`elmo.analysis.contrast.align`), and of the mean-pooled
sentence vectors. Layer 0 is context-free, so a shared word never moves there, and a role
swap leaves the pooled sentence vector unchanged.
"""
from __future__ import annotations

from itertools import permutations
from typing import Dict, List, Sequence, Tuple

import numpy as np

from ..analysis.contrast import align, load_pairs
from ..analysis.vectors import unit_rows

EXTRA_PAIR = ("the dog bit the man .", "the man bit the dog .")


def _capitalised(sentence: Sequence[str]) -> Tuple[str, ...]:
    return (sentence[0][:1].upper() + sentence[0][1:], *sentence[1:])


def role_pairs() -> List[Tuple[Tuple[str, ...], Tuple[str, ...]]]:
    pairs = [tuple(s.split()) for s in EXTRA_PAIR]
    out = [(_capitalised(pairs[0]), _capitalised(pairs[1]))]
    for item in load_pairs():
        if item.category == "role":
            pair = (_capitalised(item.a), _capitalised(item.b))
            if pair not in out:
                out.append(pair)
    return out


def _distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.maximum(1.0 - (unit_rows(x) * unit_rows(y)).sum(-1), 0.0)   # no -0.0000 from rounding


def _pair_distances(va: np.ndarray, vb: np.ndarray, a, b) -> Tuple[np.ndarray, np.ndarray]:
    """Per layer: mean distance of the shared words, and of the mean-pooled sentences."""
    idx = align(a, b)
    words = _distance(va[:, [i for i, _ in idx]], vb[:, [k for _, k in idx]]).mean(-1)
    return words, _distance(va.mean(1), vb.mean(1))


def relation_vs_topic(embedder) -> Dict:
    pairs = role_pairs()
    sentences = sorted({s for p in pairs for s in p})
    vecs = dict(zip(sentences, embedder.embed_sentences([list(s) for s in sentences], layers="all")))
    swap = [_pair_distances(vecs[a], vecs[b], a, b) for a, b in pairs]
    firsts = [a for a, _ in pairs]
    topic = [_pair_distances(vecs[a], vecs[b], a, b) for a, b in permutations(firsts, 2) if a < b]
    mean = lambda rows, j: np.mean([r[j] for r in rows], axis=0)  # noqa: E731
    return {"n_swap": len(swap), "n_topic": len(topic), "example": pairs[0],
            "swap_words": mean(swap, 0).tolist(), "swap_sentence": mean(swap, 1).tolist(),
            "topic_words": mean(topic, 0).tolist(), "topic_sentence": mean(topic, 1).tolist()}


def print_relations(r: Dict) -> None:
    a, b = (" ".join(s) for s in r["example"])
    print("3. A warning, measured: does swapping who did what to whom move the vectors as much as")
    print(f"   changing the topic? Mean cosine distance 1 - cos over {r['n_swap']} role-swap pairs")
    print(f'   ("{a}" / "{b}", ...) and {r["n_topic"]} topic-change pairs (the first')
    print("   sentences of two different role pairs; the words these share are mostly 'the' and '.',")
    print("   while a swap pair shares all its words):")
    print(f"   {'layer':>5}  {'shared words: swap':>18}  {'topic':>7}  {'ratio':>6}   "
          f"{'sentence mean: swap':>19}  {'topic':>7}  {'ratio':>6}")
    ratio = lambda x, y: f"{x / y:6.2f}" if y > 1e-6 else f"{'-':>6}"  # noqa: E731
    for j in range(len(r["swap_words"])):
        sw, tw, ss, ts = r["swap_words"][j], r["topic_words"][j], r["swap_sentence"][j], r["topic_sentence"][j]
        print(f"   {j:>5}  {sw:>18.4f}  {tw:>7.4f}  {ratio(sw, tw)}   {ss:>19.4f}  {ts:>7.4f}  {ratio(ss, ts)}")
    top = len(r["swap_words"]) - 1
    sw, tw = r["swap_words"][top], r["topic_words"][top]
    ss, ts = r["swap_sentence"][top], r["topic_sentence"][top]
    print(f"   At the top layer a role swap moves the shared words {sw / tw:.2f}x as far as a topic change, "
          f"and the mean")
    print(f"   sentence vector {ss / ts:.2f}x as far. A vector that moves when the roles swap has seen the "
          f"word order; it")
    print("   is no proof that the model represents who did what to whom")
    print("   (`elmo analyze MODEL --only contrast` probes for that).")
