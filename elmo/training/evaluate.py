"""Perplexity of a language model on held-out text, always with the full softmax.

The definition is **stateless**: every sentence is wrapped in ``<S>`` ... ``</S>`` and read
from a zero LSTM state, alone in its batch row, the way ELMo embeds it (stateless by default).
So the figure depends on the model and the text only, not on the batch size (to float
rounding: batches change the order of the sums, about 1e-6 relative) nor on the order of the
sentences. Sentences are sorted by length before batching, which only saves padding; a long
text is read :data:`PART_SENTENCES` sentences at a time (each part sorted), so its memory stays
that of a part, whatever the text's size; the full softmax's logits are taken a chunk of
positions at a time (:meth:`~elmo.modules.softmax.SharedSoftmax.full_nll`), whatever the
sentences' length.

Each direction predicts every word plus one sentence boundary per sentence (``</S>``
forward, ``<S>`` backward); the targets that are given (``<S>`` after ``</S>`` forward and
``</S>`` after ``<S>`` backward, only in a text read as one stream) do not exist here. This is
the usual count of the Penn Treebank LM set (words + end of sentence).

Words outside the model's vocabulary are ``<UNK>`` targets, predicted as that one class: a
text with many of them gets a lower perplexity than an open-vocabulary figure of its words
would be. ``unk_targets`` says how many targets (per direction) were ``<UNK>``.

Reported: forward and backward perplexity, and their average ``exp((loss_f + loss_b) / 2)``
(the geometric mean, the quantity the training loss estimates).

**Carried state** (``carry_state=True``, ``elmo perplexity --carry-state``): the text is read
as one stream instead, sentence after sentence in its order, one row, with the LSTM state
carried through the whole text from a zero state at its start: the usual protocol of the Penn
Treebank LM results (e.g. Kim et al. 2016), where every sentence has the ones before it as
context. The targets are the same (the given ones are skipped; so is the ``<S>`` of a
sentence's own words ``</S> <S>``, which read as such a join), so the two figures compare;
the result depends on the order of the sentences, not on the window length (to float
rounding). The backward model reads each sentence reversed with the state carried in the
same sentence order, as it was trained on packed rows. A model trained with
``--state-reset-every N`` has seen contexts of at most N batches.

Before these definitions, text was read as contiguous rows with the state carried from batch to
batch; the rows' starting points (mid-sentence, from a zero state) moved with the batch size,
and so did the figure (506.8 at batch 32 against 315.6 at batch 1 on 10 sentences).
"""
from __future__ import annotations

import math
from itertools import islice
from typing import Any, Dict, Iterable, Iterator, List, Optional

import torch

from ..checks import require_count
from ..data.corpus import Sentence
from ..data.lm_batches import sentence_batches, stream_batches
from ..host_copy import to_device
from ..vocab import Vocabulary
from ..modules.lstm import LayerState
from .model import LanguageModel

#: Sentences read (and length-sorted) at a time by a stateless :func:`perplexity`: the whole
#: text was listed first, and a large held-out text was held in memory as Python lists.
PART_SENTENCES = 50_000


def reset_rows(state: List[LayerState], step: int, every: int, first_row: int = 0) -> List[LayerState]:
    """Zero the carried state of the rows due for a reset at ``step``: global row g
    (``first_row`` + b) is reset when (step + g) is a multiple of ``every``. Staggered over the
    rows, so at any time the rows' contexts have every age from 0 to ``every`` batches.

    Why: a state carried forever lets the LSTM build up slowly integrating cells that then act as
    fixed features; a model that relies on them fails from a zero state, which is how ELMo is
    used (and how any evaluation starts). Bounded context age keeps zero states in training.
    """
    rows = state[0][0].shape[1]
    # decided in Python, so that a state on a GPU is not waited for (nor a CPU tensor read); only
    # the mask of a step that resets rows is copied there (made on the CPU: named, not torch's default device)
    due = [(row + first_row + step) % every == 0 for row in range(rows)]
    if not any(due):
        return state
    keep = torch.tensor([0.0 if d else 1.0 for d in due], dtype=state[0][0].dtype, device="cpu")
    keep = to_device(keep, state[0][0].device)[None, :, None]
    return [(c * keep, h * keep) for c, h in state]


def perplexity(model: LanguageModel, sentences: Iterable[Sentence], vocab: Vocabulary,
               batch_size: int = 32, device=None, autocast_dtype=None, carry_state: bool = False,
               window: int = 100, progress: bool = False, progress_total: Optional[int] = None) -> Dict[str, float]:
    """Full-softmax perplexity of ``sentences``, each from a zero state, or with
    ``carry_state`` as one stream with the state carried through it (see the module).

    ``batch_size``: sentences per batch (stateless only); it changes the speed, not the result.
    ``window``: positions per forward call of the carried-state stream (speed only).
    ``autocast_dtype``: e.g. ``torch.bfloat16`` to evaluate under autocast (None: exact).
    ``progress``: a tqdm bar on stderr over the forward targets (words plus one boundary a
    sentence), out of ``progress_total`` where the caller knows it (the text is read as it
    goes, so it cannot count them first); ``elmo perplexity`` draws it on a terminal only.

    Returns ``ppl_fwd``, ``ppl_bwd``, ``ppl`` (average), ``loss_fwd``, ``loss_bwd`` (mean
    negative log-likelihoods in nats), ``targets`` (per direction), ``unk_targets`` (how many
    of them are ``<UNK>``: words outside the vocabulary) and ``sentences``.
    Raises FloatingPointError where the model's outputs give a NaN log-likelihood.
    """
    from tqdm import tqdm

    seen = _Seen(sentences, vocab)      # read once, as the sums are made (a generator too)
    # (a full softmax over a large vocabulary takes minutes a million words: it said nothing until the end)
    with tqdm(total=progress_total, unit="tok", desc="perplexity", disable=not progress) as bar:
        if carry_state:   # one stream: the state runs through the whole text
            sums = likelihood_sums(model, seen, vocab, batch_size, device, autocast_dtype, carry_state, window, bar)
        else:
            sums = [0.0, 0.0, 0.0, 0.0]
            while part := list(islice(seen, PART_SENTENCES)):
                sums = [a + b for a, b in zip(sums, likelihood_sums(model, part, vocab, batch_size, device,
                                                                     autocast_dtype, False, window, bar))]
    if math.isnan(sums[0]) or math.isnan(sums[1]):
        # (an infinite loss is a defined result, an infinite perplexity; NaN is none at all)
        raise FloatingPointError("the model's log-likelihood of the text is NaN: its outputs are not finite "
                                 "(weights from a diverged run?)")
    return {**perplexity_from_sums(sums, seen.sentences), "unk_targets": seen.unk_targets}


class _Seen:
    """The sentences of an iterable, passed on one by one while counting them and their
    ``<UNK>`` targets (:func:`unk_targets`), so that the text is read once and never listed."""

    def __init__(self, sentences: Iterable[Sentence], vocab: Vocabulary):
        self._it, self._vocab = iter(sentences), vocab
        self.sentences = self.unk_targets = 0

    def __iter__(self) -> Iterator[Sentence]:
        return self

    def __next__(self) -> Sentence:
        sentence = next(self._it)
        self.sentences += 1
        self.unk_targets += unk_targets([sentence], self._vocab)
        return sentence


def unk_targets(sentences: Iterable[Sentence], vocab: Vocabulary) -> int:
    """How many targets of one direction are ``<UNK>``: the words of ``sentences`` outside
    ``vocab`` (the boundaries never are)."""
    return sum(vocab.id(w) == vocab.unk for sentence in sentences for w in sentence)


def perplexity_from_sums(sums: List[float], n_sentences: int) -> Dict[str, float]:
    """The result of :func:`perplexity` from :func:`likelihood_sums` (added up over parts of
    the text: the stateless figure of a text is that of its parts together)."""
    nll_f, nll_b, n_f, n_b = sums
    if n_f == 0 or n_b == 0:
        raise ValueError("no text to evaluate")
    loss_f, loss_b = nll_f / n_f, nll_b / n_b
    return {"ppl_fwd": _exp(loss_f), "ppl_bwd": _exp(loss_b),
            "ppl": _exp(0.5 * (loss_f + loss_b)), "loss_fwd": loss_f, "loss_bwd": loss_b,
            "targets": int(n_f), "sentences": n_sentences}


def _exp(loss: float) -> float:
    """exp(loss), infinity where it passes the largest float: a model that puts next to no
    probability on the text (a mean loss above 709 nats, diverged weights) has an infinite
    perplexity, not an OverflowError at the end of its run."""
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf


@torch.no_grad()
def likelihood_sums(model: LanguageModel, sentences: Iterable[Sentence], vocab: Vocabulary, batch_size: int = 32,
                    device=None, autocast_dtype=None, carry_state: bool = False,
                    window: int = 100, bar: Optional[Any] = None) -> List[float]:
    """[forward NLL, backward NLL (nats), forward targets, backward targets] of ``sentences``,
    summed, as :func:`perplexity` reads them (the arguments are its own); zeros for none.
    With ``carry_state`` they are read one by one as the stream goes (an iterator is not listed).
    ``bar``: a tqdm bar advanced by each batch's forward targets."""
    batch_size = require_count("batch_size", batch_size)
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    nll_f = nll_b = 0.0
    n_f = n_b = 0
    max_chars = model.options.char_cnn.max_characters_per_token
    if carry_state:
        batches = stream_batches(sentences, vocab, window, max_chars)  # the text's order is the context
    else:
        ordered = sorted(sentences, key=len)  # less padding; a stateless result does not depend on order
        batches = sentence_batches(ordered, vocab, batch_size, max_chars)
    state = None
    try:
        for batch in batches:
            with torch.autocast(torch.device(device).type, dtype=autocast_dtype or torch.bfloat16,
                                enabled=autocast_dtype is not None):
                # (a row of its own per sentence gives no target away: asked to skip them, a
                # sentence's own words "</S> <S>" were taken for a join and one target left out)
                out = model(batch.to(device), state, None, skip_given_targets=carry_state)
            if carry_state:
                state = out["state"]
            nll_f += float(out["nll_fwd"])
            nll_b += float(out["nll_bwd"])
            n_f += out["n_fwd"]
            n_b += out["n_bwd"]
            if bar is not None:
                bar.update(int(out["n_fwd"]))
    finally:
        model.train(was_training)
    return [nll_f, nll_b, float(n_f), float(n_b)]
