"""The "bank" measurement of ``elmo demo``: one word, two senses, every layer.

Layer 0 (the character CNN) gives a word the same vector in every sentence; the LSTM layers
make it depend on the context. Per layer: the mean cosine similarity of "bank" between
sentences of the same sense and of different senses, and the largest difference between any
two occurrences (exactly 0 at layer 0).
"""
from __future__ import annotations

from itertools import combinations
from typing import Dict, List, Optional, Sequence

import torch

MONEY = ["I deposited the cheque at the bank this morning .",
         "The bank raised its interest rates again .",
         "She opened a savings account at a local bank ."]
RIVER = ["We had a picnic on the bank of the river .",
         "The boat drifted towards the muddy bank .",
         "Fishermen lined the grassy bank of the stream ."]


def word_vectors(bilm, sentences: Sequence[str], word: str) -> List[torch.Tensor]:
    """For each sentence, the L + 1 layer vectors of the first occurrence of ``word``: (L+1, 2P)."""
    tokens = [s.split() for s in sentences]
    with torch.no_grad():
        layers = bilm(bilm.token_ids(tokens))["activations"]
    stacked = torch.stack(layers, dim=1)  # (B, L+1, T, 2P)
    return [stacked[b, :, toks.index(word)] for b, toks in enumerate(tokens)]


def sense_similarity(bilm, word: str = "bank", groups: Optional[Dict[str, Sequence[str]]] = None):
    """Mean cosine similarity within and across sense groups, per layer.

    Returns a list over layers of dicts with ``layer``, ``within``, ``across`` and
    ``max_diff`` (the largest absolute difference between two occurrences' vectors).
    """
    groups = groups or {"money": MONEY, "river": RIVER}
    labelled = [(name, v) for name, sents in groups.items() for v in word_vectors(bilm, sents, word)]
    results = []
    for layer in range(bilm.num_layers):
        within: List[float] = []
        across: List[float] = []
        for (na, va), (nb, vb) in combinations(labelled, 2):
            cos = float(torch.nn.functional.cosine_similarity(va[layer], vb[layer], dim=0))
            (within if na == nb else across).append(cos)
        diff = max(float((va[layer] - vb[layer]).abs().max()) for (_, va), (_, vb) in combinations(labelled, 2))
        results.append({"layer": layer, "within": sum(within) / len(within),
                        "across": sum(across) / len(across), "max_diff": diff})
    return results


def print_senses(results, word: str = "bank") -> None:
    print(f'1. "{word}" in money sentences vs river sentences: cosine similarity per layer')
    for s in MONEY + RIVER:
        print(f"     {s}")
    print(f"   {'layer':>5}  {'within sense':>12}  {'across senses':>13}  {'max |diff|':>10}")
    for row in results:
        print(f"   {row['layer']:>5}  {row['within']:>12.4f}  {row['across']:>13.4f}  {row['max_diff']:>10.3g}")
    top = results[-1]
    print(f"   Layer 0 is context-free: every occurrence gets the same vector (max |diff| = "
          f"{results[0]['max_diff']:.3g}).")
    print(f"   Top layer: within-sense {top['within']:.3f} vs across-sense {top['across']:.3f}"
          + (" (the senses separate)." if top["within"] > top["across"] else " (the senses do NOT separate)."))
