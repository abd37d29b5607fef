"""``elmo demo``: what a contextual representation changes, measured on a few sentences.

Layer 0 (the character CNN) gives a word the same vector in every sentence; the LSTM layers
make it depend on the context. The demo prints, per layer, the cosine similarity of the word
"bank" between sentences of the same sense and of different senses.
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
    from . import batch_to_ids

    tokens = [s.split() for s in sentences]
    with torch.no_grad():
        layers = bilm(batch_to_ids(tokens, bilm.options.char_cnn.max_characters_per_token))["activations"]
    stacked = torch.stack(layers, dim=1)  # (B, L+1, T, 2P)
    return [stacked[b, :, toks.index(word)] for b, toks in enumerate(tokens)]


def sense_similarity(bilm, word: str = "bank", groups: Optional[Dict[str, Sequence[str]]] = None):
    """Mean cosine similarity within and across sense groups, per layer.

    Returns a list over layers of dicts with ``within``, ``across`` and ``max_layer0_diff``.
    """
    groups = groups or {"money": MONEY, "river": RIVER}
    labelled = [(name, v) for name, sents in groups.items() for v in word_vectors(bilm, sents, word)]
    results = []
    for layer in range(bilm.num_layers):
        within, across = [], []
        for (na, va), (nb, vb) in combinations(labelled, 2):
            cos = float(torch.nn.functional.cosine_similarity(va[layer], vb[layer], dim=0))
            (within if na == nb else across).append(cos)
        diff = max(float((va[layer] - vb[layer]).abs().max()) for (_, va), (_, vb) in combinations(labelled, 2))
        results.append({"layer": layer, "within": sum(within) / len(within),
                        "across": sum(across) / len(across), "max_diff": diff})
    return results


def run_demo(model: Optional[str] = None) -> None:
    from . import DEFAULT_MODEL, from_pretrained

    name = model or DEFAULT_MODEL
    bilm = from_pretrained(name)
    print(f"model: {name} ({sum(p.numel() for p in bilm.parameters()):,} parameters, "
          f"{bilm.num_layers} layers of width {bilm.output_dim})")
    print('"bank" in money sentences vs river sentences, cosine similarity per layer:')
    print(f"{'layer':>5}  {'within sense':>12}  {'across senses':>13}  {'max |diff|':>10}")
    for row in sense_similarity(bilm):
        print(f"{row['layer']:>5}  {row['within']:>12.4f}  {row['across']:>13.4f}  {row['max_diff']:>10.3g}")
    print("Layer 0 is context-free, so every occurrence gets the same vector (max |diff| = 0).")
