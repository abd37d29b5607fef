"""Turning task examples into padded tensors.

A :class:`TextBatch` holds one text per row (a sentence, or one side of a pair):

* ``tokens``: the B token lists, as given;
* ``words`` (B, T) word ids (0 = padding), ``chars`` (B, T, C) character ids from
  :func:`elmo.batch_to_ids`, ``mask`` (B, T) bool;
* ``layers``: the frozen biLM's L + 1 layers, each (B, T, D), when a :class:`LayerCache`
  supplies them (else None and the model runs the biLM itself);
* ``extra``: (N, E) vectors of the words with ids past the model's vocabulary, when the
  vocabulary is an :class:`~elmo.tasks.embeddings.ExtendedVocab` (a saved model's GloVe
  words at prediction; else None).

A :class:`Batch` has one or two texts and the labels: (B,) class ids, or (B, T) tag ids
(0 where masked; the mask of the first text tells which are real).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Union

import torch

from ..chars import batch_to_ids
from .datasets import Example
from .embeddings import ExtendedVocab, WordVocab
from .kinds import task_kind


@dataclass
class TextBatch:
    tokens: List[List[str]]
    words: torch.Tensor
    chars: torch.Tensor
    mask: torch.Tensor
    layers: Optional[List[torch.Tensor]] = None
    extra: Optional[torch.Tensor] = None

    def to(self, device) -> "TextBatch":
        layers = None if self.layers is None else [layer.to(device) for layer in self.layers]
        extra = None if self.extra is None else self.extra.to(device)
        return TextBatch(self.tokens, self.words.to(device), self.chars.to(device),
                         self.mask.to(device), layers, extra)


@dataclass
class Batch:
    texts: List[TextBatch]
    labels: torch.Tensor

    def to(self, device) -> "Batch":
        return Batch([t.to(device) for t in self.texts], self.labels.to(device))


def text_batch(sentences: Sequence[Sequence[str]], vocab: Union[WordVocab, ExtendedVocab], max_chars: int,
               layer_cache=None) -> TextBatch:
    """Pad B token lists into a :class:`TextBatch` (see the module docstring)."""
    rows = [list(s) for s in sentences]
    longest = max((len(s) for s in rows), default=0)
    words = torch.zeros(len(rows), longest, dtype=torch.long)
    for i, s in enumerate(rows):
        words[i, :len(s)] = torch.tensor(vocab.ids(s), dtype=torch.long)
    chars = batch_to_ids(rows, max_chars)
    mask = words.new_zeros(words.shape, dtype=torch.bool)
    for i, s in enumerate(rows):
        mask[i, :len(s)] = True
    layers = layer_cache.layers(rows) if layer_cache is not None else None
    extra = vocab.vectors if isinstance(vocab, ExtendedVocab) else None
    return TextBatch(rows, words, chars, mask, layers, extra)


def make_batch(examples: Sequence[Example], kind: str, vocab: Union[WordVocab, ExtendedVocab],
               label_index: Dict[str, int], max_chars: int, layer_cache=None) -> Batch:
    """A :class:`Batch` of examples of a task ``kind`` (a name in
    :data:`~elmo.tasks.kinds.TASK_KINDS`). Labels missing from ``label_index`` (seen only
    outside training) get id -1 for classes; for tags they get id 0 (they still count as
    errors when scored, since scoring compares label strings)."""
    spec = task_kind(kind)
    first = text_batch([ex.tokens for ex in examples], vocab, max_chars, layer_cache)
    texts = [first]
    if spec.pair:
        texts.append(text_batch(_second_texts(examples), vocab, max_chars, layer_cache))
    return Batch(texts, spec.label_tensor(examples, label_index, first.words.shape))


def _second_texts(examples: Sequence[Example]) -> List[List[str]]:
    """The second texts of pair examples; the readers and ``to_examples`` always give a pair
    task's examples one, so a missing one is a caller's mistake, said in one line."""
    out = []
    for ex in examples:
        if ex.tokens_b is None:
            raise ValueError(f"a pair task's example has no second text (tokens_b): {ex.tokens!r}")
        out.append(ex.tokens_b)
    return out
