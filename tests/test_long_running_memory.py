"""Long-running use: a model dropped after use is freed, and what is cached per word is
bounded (a service embedding requests for hours, a loop of load, embed, drop)."""
from __future__ import annotations

import gc
import weakref

import torch

from elmo import Elmo, Embedder
from elmo.chars import batch_to_ids, word_to_char_ids
from tests.conftest import random_bilm


def _used_and_dropped(stateful: bool) -> weakref.ref:
    bilm = random_bilm()
    bilm.stateful = stateful
    elmo = Elmo(module=bilm, dropout=0.0, vocab_to_cache=["the", "cat"])
    with torch.no_grad():
        elmo(batch_to_ids([["the", "cat", "sat"], ["a"]]))
    embedder = Embedder(bilm, batch_size=1)
    embedder.build_token_cache([["the", "cat"], ["the", "cat"]], min_count=1)
    embedder.embed_sentences([["the", "cat", "sat"], ["on", "a", "mat", "today"]])
    return weakref.ref(bilm)


def test_a_model_dropped_after_use_is_freed():
    """Nothing the forward passes, the token caches or the stateful locks keep holds the model
    (a process loading and dropping models kept every one otherwise)."""
    refs = [_used_and_dropped(stateful) for stateful in (False, True)]
    gc.collect()
    assert [r() for r in refs] == [None, None]


def test_the_character_ids_kept_per_word_are_bounded():
    """Every distinct word a long run meets goes through word_to_char_ids: its cache has a
    bound, so a run over an open vocabulary does not keep every word it saw."""
    limit = word_to_char_ids.cache_info().maxsize
    assert limit is not None and limit <= 1 << 16
    word_to_char_ids.cache_clear()
    for i in range(limit + 10):
        word_to_char_ids(f"w{i}")
    assert word_to_char_ids.cache_info().currsize == limit
