"""The "play" measurement of ``elmo demo``, after Table 4 of the paper.

For a sports sentence and a theatre sentence, the occurrences of "play" in the bundled corpus
sample whose top-layer vectors are nearest (cosine) to the query's, beside the static
neighbours of "play": layer 0 of the same biLM (its character CNN, one vector per word) and
GloVe 6B 50d, both searched over the same bundled list of frequent words.
"""
from __future__ import annotations

from typing import Dict, Sequence

import numpy as np
import torch

from ..analysis.neighbors import CorpusIndex, context, query_vectors, static_neighbors
from ..embedding import Embedder
from .data import WORD, DemoData

QUERIES = {
    "sports": "The shortstop made a brilliant play to end the inning .",
    "theatre": "Her new play opened at the theatre last night to excellent reviews .",
}


def layer0_vectors(bilm, words: Sequence[str]) -> np.ndarray:
    """The character-CNN vector of each word (N, P): layer 0 is [x; x] of these, so cosines agree."""
    ids = bilm.token_encoder.require_id_scheme().token_rows(list(words))    # the model's own ids
    device = next(bilm.parameters()).device
    with torch.no_grad():
        return bilm.token_encoder.encode_tokens(ids.to(device)).float().cpu().numpy()


def printable(text: str) -> str:
    """``text`` with control characters (the corpus has a few, e.g. U+0096) written as escapes."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def play_neighbors(embedder: Embedder, data: DemoData, k: int = 3, k_static: int = 6) -> Dict:
    """``contextual``: per query, the ``k`` nearest occurrences at the top layer (score,
    context); ``layer0`` and ``glove``: the ``k_static`` nearest other words."""
    embedder.build_token_cache(data.sentences)
    index = CorpusIndex.build(embedder, data.sentences, batch_size=embedder.batch_size)
    top = index.num_layers - 1
    contextual = {}
    for name, sentence in QUERIES.items():
        tokens = sentence.split()
        position, vectors = query_vectors(embedder, tokens, WORD)
        # where the corpus holds the query sentence itself, that copy is no neighbour of its own
        own = index.copies(tokens, position)
        hits = index.search(vectors[top], top, k=k, word=WORD, exclude=own)
        contextual[name] = {"query": sentence,
                            "hits": [(h.score, context(index.sentences[h.sentence], h.token, 9)) for h in hits]}
    words = data.static_words
    layer0 = layer0_vectors(embedder.bilm, words)
    query0 = layer0_vectors(embedder.bilm, [WORD])[0]
    return {
        "contextual": contextual, "layer": top,
        "occurrences": len(index.occurrences(WORD)),
        "layer0": [(h.score, h.word) for h in static_neighbors(words, layer0, WORD, k_static, query=query0)],
        "glove": [(h.score, h.word) for h in static_neighbors(words, data.glove_vectors, WORD, k_static)],
    }


def print_neighbors(result: Dict, data: DemoData) -> None:
    print(f'2. Nearest neighbours of "{WORD}" (after Table 4 of the paper)')
    print(f"   Contextual (cosine at layer {result['layer']}): the nearest of {data.description}:")
    for name, entry in result["contextual"].items():
        print(f"   [{name}] {entry['query']}")
        for score, ctx in entry["hits"]:
            print(f"      {score:.3f}  {printable(ctx)}")
    n = len(data.static_words)
    fmt = lambda hits: ", ".join(f"{w} ({s:.2f})" for s, w in hits)  # noqa: E731
    print(f"   Static (one vector per word, searched over {n:,} frequent lower-case words):")
    print(f"      layer 0 (char CNN): {fmt(result['layer0'])}")
    print(f"      GloVe 6B 50d:       {fmt(result['glove'])}")
