"""``elmo demo``: load the model and the bundled data, run the three measurements, print them."""
from __future__ import annotations

import time
from typing import Optional

import torch


def run_demo(model: Optional[str] = None, threads: Optional[int] = 1) -> None:
    """Print the demo for ``model`` (default: the bundled default model) with ``threads`` torch
    threads (None: leave torch's setting)."""
    from .. import DEFAULT_MODEL, from_pretrained
    from ..embedding import Embedder
    from ..runtime import set_threads
    from . import data as demo_data
    from .neighbors import play_neighbors, print_neighbors
    from .relations import print_relations, relation_vs_topic
    from .senses import print_senses, sense_similarity

    start = time.perf_counter()
    set_threads(threads)
    name = model or DEFAULT_MODEL
    bilm = from_pretrained(name)
    embedder = Embedder(bilm, batch_size=64)
    from ..redact import redact_url
    # (a model URL given with a login: its password is not shown)
    print(f"model: {redact_url(name)} ({sum(p.numel() for p in bilm.parameters()):,} parameters, "
          f"{bilm.num_layers} layers of width {bilm.output_dim})")
    if name == "fixture":
        print("(the fixture's weights are untrained test weights: the numbers show the mechanics only)")
    print()
    print_senses(sense_similarity(bilm))
    print()
    data = demo_data.load()
    print_neighbors(play_neighbors(embedder, data), data)
    print()
    print_relations(relation_vs_topic(embedder))
    print()
    n_threads = torch.get_num_threads()
    print(f"({time.perf_counter() - start:.1f} s, {n_threads} torch thread{'' if n_threads == 1 else 's'})")
