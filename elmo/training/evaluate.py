"""Perplexity of a language model on held-out text, always with the full softmax.

The text is read once, in order, in contiguous rows with the LSTM state carried from batch to
batch (see :func:`elmo.data.lm_batches.evaluation_batches`). Targets that are given by the
layout are left out: ``<S>`` after ``</S>`` (forward) and ``</S>`` after ``<S>`` (backward).
So each direction predicts every word plus one sentence boundary per sentence (``</S>``
forward, ``<S>`` backward): the usual count of the Penn Treebank LM set (words + end of
sentence), which makes the numbers comparable with the literature.

Reported: forward and backward perplexity, and their average ``exp((loss_f + loss_b) / 2)``
(the geometric mean, the quantity the training loss estimates).
"""
from __future__ import annotations

import math
from typing import Dict, Iterable, List

import torch

from ..data.corpus import Sentence
from ..data.lm_batches import evaluation_batches, sentence_batches
from ..vocab import Vocabulary
from ..modules.lstm import LayerState
from .model import LanguageModel


def reset_rows(state: List[LayerState], step: int, every: int, first_row: int = 0) -> List[LayerState]:
    """Zero the carried state of the rows due for a reset at ``step``: global row g
    (``first_row`` + b) is reset when (step + g) is a multiple of ``every``. Staggered over the
    rows, so at any time the rows' contexts have every age from 0 to ``every`` batches.

    Why: a state carried forever lets the LSTM build up slowly integrating cells that then act as
    fixed features; a model that relies on them fails from a zero state, which is how ELMo is
    used (and how any evaluation starts). Bounded context age keeps zero states in training.
    """
    rows = state[0][0].shape[1]
    due = ((torch.arange(rows) + first_row + step) % every == 0).to(state[0][0].device)
    if not bool(due.any()):
        return state
    keep = (~due).to(state[0][0].dtype)[None, :, None]
    return [(c * keep, h * keep) for c, h in state]


@torch.no_grad()
def perplexity(model: LanguageModel, sentences: Iterable[Sentence], vocab: Vocabulary,
               batch_size: int = 32, unroll_steps: int = 20, device=None,
               autocast_dtype=None, state_reset_every: int = 0,
               per_sentence: bool = False) -> Dict[str, float]:
    """Full-softmax perplexity of ``sentences``.

    ``per_sentence``: every sentence from a zero state, alone in its row (for models trained
    with the bucketed, stateless layout); otherwise contiguous rows with the state carried.

    ``state_reset_every``: reset the rows' state as in training (:func:`reset_rows`); 0 carries
    it through the whole text.

    Returns ``ppl_fwd``, ``ppl_bwd``, ``ppl`` (average), ``loss_fwd``, ``loss_bwd`` (mean
    negative log-likelihoods in nats) and ``targets`` (per direction).
    """
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    state = None
    nll_f = nll_b = 0.0
    n_f = n_b = 0
    max_chars = model.options.char_cnn.max_characters_per_token
    try:
        batches = (sentence_batches(sentences, vocab, batch_size, max_chars) if per_sentence
                   else evaluation_batches(sentences, vocab, batch_size, unroll_steps, max_chars))
        for index, batch in enumerate(batches):
            if per_sentence:
                state = None
            elif state_reset_every and state is not None:
                state = reset_rows(state, index, state_reset_every)
            with torch.autocast(torch.device(device).type, dtype=autocast_dtype or torch.bfloat16,
                                enabled=autocast_dtype is not None):
                out = model(batch.to(device), state, None, skip_given_targets=True)
            state = out["state"]
            nll_f += float(out["nll_fwd"])
            nll_b += float(out["nll_bwd"])
            n_f += out["n_fwd"]
            n_b += out["n_bwd"]
    finally:
        model.train(was_training)
    if n_f == 0 or n_b == 0:
        raise ValueError("no text to evaluate")
    loss_f, loss_b = nll_f / n_f, nll_b / n_b
    return {"ppl_fwd": math.exp(loss_f), "ppl_bwd": math.exp(loss_b),
            "ppl": math.exp(0.5 * (loss_f + loss_b)), "loss_fwd": loss_f, "loss_bwd": loss_b,
            "targets": n_f}
