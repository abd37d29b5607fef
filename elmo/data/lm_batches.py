"""Language-model batches, as the original trainer builds them, and evaluation batches.

Every sentence is wrapped in ``<S>`` ... ``</S>``. Two training layouts:

* **packed, stateful** (the original): the wrapped sentences are laid end to end in each of
  the B rows of the batch; a batch is the next ``unroll_steps`` (T) positions of every row.
  Row b of batch n+1 continues row b of batch n, so the LSTM state carries over (detached:
  backprop stops at the batch boundary). When a row runs out it takes the next sentence of
  the stream (rows share one stream, filled in row order, as the original does).
* **bucketed, stateless**: one sentence a row, sentences of similar length batched together,
  every row starting from a zero state.

The forward model reads a row left to right and predicts the next token. The backward model
reads the text reversed and predicts the token before: its row is built from the same
sentences, each reversed and wrapped as ``</S>`` w_n ... w_1 ``<S>``, so position t of the
backward row holds the token at distance t in reading order, and its target is the next one
in that order, which is the previous token in the text.

Word ids (targets) map unknown words to ``<UNK>``; the character ids (inputs) always spell the
actual word, so the character CNN sees out-of-vocabulary words as they are.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import torch

from ..chars import word_to_char_ids
from ..host_copy import to_device
from ..vocab import BOS, EOS, Vocabulary
from .corpus import CorpusStream, Sentence


@dataclass
class LMBatch:
    """One batch for both directions. B rows, T positions, C characters per token.

    fwd_chars, bwd_chars: (B, T, C) long character ids of the input tokens (zero = padding).
    fwd_targets, bwd_targets: (B, T) long word ids of the tokens to predict.
    fwd_mask, bwd_mask: (B, T) bool, the positions that hold a real target.
    lengths: (B,) long, valid positions per row (the same for both directions).

    A batch built here also holds its lengths as Python ints (:attr:`host_lengths`), which
    :meth:`to` carries over: the LSTM's packing reads them instead of a GPU's ``lengths``. Its
    masks are each row's first ``lengths[b]`` positions (:attr:`masks_follow_lengths`), so the
    targets' positions need no read of a GPU either.
    """

    fwd_chars: torch.Tensor
    bwd_chars: torch.Tensor
    fwd_targets: torch.Tensor
    bwd_targets: torch.Tensor
    fwd_mask: torch.Tensor
    bwd_mask: torch.Tensor
    lengths: torch.Tensor

    def __post_init__(self) -> None:
        # (not a field: the fields are the tensors, which concat, to and callers iterate over)
        self._host: Optional[Tuple[torch.Tensor, int, Tuple[int, ...]]] = None
        self._masks: Optional[Tuple[torch.Tensor, int, torch.Tensor, int]] = None   # (see masks_follow_lengths)

    def keep_host_lengths(self, lengths: Sequence[int], masks_follow: bool = False) -> "LMBatch":
        """This batch, holding ``lengths`` (the B ints ``self.lengths`` holds: taken on trust,
        as checking them would read the device) as :attr:`host_lengths` until ``self.lengths``
        is replaced or changed in place. ``masks_follow``: both masks are True exactly at each
        row's first ``lengths[b]`` positions (taken on trust too), until a mask is replaced or
        changed in place (:attr:`masks_follow_lengths`)."""
        if len(lengths) != self.lengths.shape[0]:
            raise ValueError(f"{len(lengths)} host lengths for a batch of {self.lengths.shape[0]} rows")
        # (an inference tensor counts no in-place change)
        if not any(t.is_inference() for t in (self.lengths, self.fwd_mask, self.bwd_mask)):
            self._host = (self.lengths, self.lengths._version, tuple(int(n) for n in lengths))
            if masks_follow:
                self._masks = (self.fwd_mask, self.fwd_mask._version, self.bwd_mask, self.bwd_mask._version)
        return self

    @property
    def masks_follow_lengths(self) -> bool:
        """Whether both masks are known, without reading them, to be True exactly at each
        row's first ``lengths[b]`` positions, as the batch iterators here make them (then the
        targets' positions are :func:`elmo.modules.bilm.token_positions` of
        :attr:`host_lengths`): False for a batch made by hand, or whose lengths or masks have
        been replaced or changed in place since."""
        if self.host_lengths is None or self._masks is None:
            return False
        fwd, fwd_version, bwd, bwd_version = self._masks
        return _unchanged(self.fwd_mask, fwd, fwd_version) and _unchanged(self.bwd_mask, bwd, bwd_version)

    @property
    def host_lengths(self) -> Optional[Tuple[int, ...]]:
        """``lengths`` as Python ints where the host holds them without reading a device (the
        batch iterators here keep them, and :meth:`to` and :meth:`concat` carry them over),
        else None: a batch made by hand, or one whose ``lengths`` has been replaced or changed
        in place since (then read ``lengths``)."""
        if self._host is None:
            return None
        tensor, version, values = self._host
        return values if _unchanged(self.lengths, tensor, version) else None

    def to(self, device) -> "LMBatch":
        """The batch on ``device``; to a GPU through pinned memory, queued without a wait.
        Its :attr:`host_lengths` and :attr:`masks_follow_lengths` come along."""
        moved = LMBatch(*(to_device(getattr(self, f), device) for f in self.__dataclass_fields__))
        host = self.host_lengths
        return moved if host is None else moved.keep_host_lengths(host, self.masks_follow_lengths)

    @property
    def n_tokens(self) -> int:
        """Input positions of one direction (from :attr:`host_lengths` where the batch has
        them: no read of a GPU)."""
        host = self.host_lengths
        return sum(host) if host is not None else int(self.lengths.sum())

    @staticmethod
    def concat(batches: Sequence["LMBatch"]) -> "LMBatch":
        """Stack the rows of batches that have the same T (e.g. the ranks' parts of a global batch)."""
        joined = LMBatch(*(torch.cat([getattr(b, f) for b in batches]) for f in LMBatch.__dataclass_fields__))
        hosts = [b.host_lengths for b in batches]
        return joined if any(h is None for h in hosts) else joined.keep_host_lengths(
            [n for h in hosts if h is not None for n in h], all(b.masks_follow_lengths for b in batches))


def _unchanged(now: torch.Tensor, held: torch.Tensor, version: int) -> bool:
    """Whether ``now`` is still the tensor ``held`` at the in-place version it had then."""
    return now is held and held._version == version


def wrap(sentence: Sentence) -> Tuple[List[str], List[str]]:
    """The forward and backward token sequences of one sentence."""
    return [BOS, *sentence, EOS], [EOS, *reversed(sentence), BOS]


class _Encoder:
    """Words -> word ids and character ids.

    Each distinct word's character ids are made once, into a row of a table; a batch is then
    its words' row numbers, (B, T), gathered from the table into (B, T, C). Building the
    (B, T, C) tensor from Python tuples, token by token, took most of a batch's time (about
    30 of 38 ms for 128 x 20 on a 2-core Zen 4, *scratch*; ``python benchmarks/lm_batches.py``
    compares the two), which a GPU step would wait for. Row 0 is the padding, all zeros.
    The table starts again before a batch once it holds ``cache_size`` words (bounded memory
    on corpora with huge vocabularies; never within a batch, whose row numbers point into it);
    its ids are int16 (every id is below 262)."""

    def __init__(self, vocab: Vocabulary, max_chars: int, cache_size: int = 200_000):
        self.vocab, self.max_chars, self.cache_size = vocab, max_chars, cache_size
        self._start_table()

    def _start_table(self) -> None:
        self._row_of: Dict[str, int] = {}
        self._table = torch.zeros(min(self.cache_size, 1024) + 1, self.max_chars, dtype=torch.int16)
        self._used = 1                                   # (row 0: padding)

    def _row(self, word: str) -> int:
        row = self._row_of.get(word)
        if row is None:
            if self._used == len(self._table):              # grow: double the rows
                grown = torch.zeros(2 * len(self._table), self.max_chars, dtype=torch.int16)
                grown[:self._used] = self._table[:self._used]
                self._table = grown
            row = self._used
            self._table[row] = torch.tensor(word_to_char_ids(word, self.max_chars), dtype=torch.int16)
            self._row_of[word] = row
            self._used += 1
        return row

    def char_rows(self, rows: Sequence[Sequence[str]], steps: int) -> torch.Tensor:
        """Rows of words (each at most ``steps``) -> character ids (B, steps, C) long, zeros at padding."""
        if self._used > self.cache_size:
            self._start_table()
        index = [[self._row(w) for w in row] + [0] * (steps - len(row)) for row in rows]
        return self._table[torch.tensor(index, dtype=torch.long).reshape(len(rows), steps)].long()

    def word_ids(self, rows: Sequence[Sequence[str]], steps: int) -> torch.Tensor:
        """Rows of words (each at most ``steps``) -> word ids (B, steps) long, zeros at padding."""
        ids = [self.vocab.ids(row) + [0] * (steps - len(row)) for row in rows]
        return torch.tensor(ids, dtype=torch.long).reshape(len(rows), steps)


def _make_batch(enc: _Encoder, fwd_rows, bwd_rows, lengths: List[int], steps: int) -> LMBatch:
    """Rows hold length + 1 tokens: positions 0..length-1 are inputs, 1..length targets."""
    fwd_chars = enc.char_rows([r[:-1] for r in fwd_rows], steps)
    bwd_chars = enc.char_rows([r[:-1] for r in bwd_rows], steps)
    fwd_targets = enc.word_ids([r[1:] for r in fwd_rows], steps)
    bwd_targets = enc.word_ids([r[1:] for r in bwd_rows], steps)
    lengths_t = torch.tensor(lengths, dtype=torch.long)
    mask = torch.arange(steps)[None, :] < lengths_t[:, None]
    return LMBatch(fwd_chars, bwd_chars, fwd_targets, bwd_targets, mask, mask.clone(),
                   lengths_t).keep_host_lengths(lengths, masks_follow=True)


class _StreamBatches:
    """What both batch layouts share: endless iteration and the stream's epoch."""

    stream: CorpusStream

    def next_batch(self) -> LMBatch:
        raise NotImplementedError

    def __iter__(self) -> Iterator[LMBatch]:
        while True:
            yield self.next_batch()

    @property
    def epoch(self) -> int:
        return self.stream.epoch


class PackedLMBatches(_StreamBatches):
    """The original's stateful batches: B rows of T positions, sentences packed end to end.

    Iterating yields :class:`LMBatch` forever (the stream runs over epochs).
    ``state_dict()`` holds the stream position and each row's unread tokens, so a resumed run
    produces exactly the batches an uninterrupted run would.
    """

    def __init__(self, stream: CorpusStream, vocab: Vocabulary, batch_size: int,
                 unroll_steps: int = 20, max_chars: int = 50):
        self.stream, self.batch_size, self.unroll_steps = stream, batch_size, unroll_steps
        self.encoder = _Encoder(vocab, max_chars)
        # Row b's tokens not yet consumed, forward and backward (always the same length).
        self.fwd: List[List[str]] = [[] for _ in range(batch_size)]
        self.bwd: List[List[str]] = [[] for _ in range(batch_size)]

    def next_batch(self) -> LMBatch:
        steps = self.unroll_steps
        fwd_rows, bwd_rows = [], []
        for b in range(self.batch_size):
            # T inputs and T targets need T + 1 tokens; the last target is the next input.
            while len(self.fwd[b]) < steps + 1:
                f, r = wrap(self.stream.next_sentence())
                self.fwd[b].extend(f)
                self.bwd[b].extend(r)
            fwd_rows.append(self.fwd[b][:steps + 1])
            bwd_rows.append(self.bwd[b][:steps + 1])
            del self.fwd[b][:steps], self.bwd[b][:steps]
        return _make_batch(self.encoder, fwd_rows, bwd_rows, [steps] * self.batch_size, steps)

    def state_dict(self) -> dict:
        return {"stream": self.stream.state_dict(), "fwd": [list(r) for r in self.fwd],
                "bwd": [list(r) for r in self.bwd]}

    def load_state_dict(self, state: dict) -> None:
        if len(state["fwd"]) != self.batch_size:
            raise ValueError(f"the checkpoint has {len(state['fwd'])} rows, this run {self.batch_size}")
        if not all(isinstance(w, str) for rows in (state["fwd"], state["bwd"]) for r in rows for w in r):
            # (a damaged checkpoint's word that is a number failed steps later, in the encoder)
            raise ValueError("the checkpoint's unread words are not all words (strings)")
        self.stream.load_state_dict(state["stream"])
        self.fwd = [list(r) for r in state["fwd"]]
        self.bwd = [list(r) for r in state["bwd"]]


#: The bucketed layout's longest row, in words: a longer sentence is cut into pieces this long
#: (an epoch of that layout is its pieces, which ``count_tokens(piece_length=...)`` counts).
MAX_PIECE_LENGTH = 200


class BucketedLMBatches(_StreamBatches):
    """Stateless batches: one wrapped sentence a row, similar lengths together.

    The stream is read ``pool_batches`` batches at a time; a pool is sorted by length, cut
    into batches, and the batches are shuffled (seeded). Sentences longer than
    ``max_length`` tokens are cut into pieces of that length.
    """

    def __init__(self, stream: CorpusStream, vocab: Vocabulary, batch_size: int,
                 max_chars: int = 50, pool_batches: int = 50, max_length: int = MAX_PIECE_LENGTH,
                 seed: int = 0):
        self.stream, self.batch_size = stream, batch_size
        self.pool_batches, self.max_length, self.seed = pool_batches, max_length, seed
        self.encoder = _Encoder(vocab, max_chars)
        self._pool_start = stream.state_dict()  # stream position where the current pool begins
        self._pool_index = 0                    # pools read so far (seeds the batch order)
        self._pool: List[List[Sentence]] = []
        self._next = 0                          # next batch of the pool

    def _fill_pool(self) -> None:
        self._pool_start = self.stream.state_dict()
        sentences: List[Sentence] = []
        while len(sentences) < self.batch_size * self.pool_batches:
            s = self.stream.next_sentence()
            sentences.extend(s[i:i + self.max_length] for i in range(0, len(s), self.max_length))
        sentences.sort(key=len)
        batches = [sentences[i:i + self.batch_size] for i in range(0, len(sentences), self.batch_size)]
        random.Random(f"{self.seed}:pool:{self._pool_index}").shuffle(batches)
        self._pool, self._next = batches, 0

    def next_batch(self) -> LMBatch:
        if self._next >= len(self._pool):
            if self._pool:
                self._pool_index += 1
            self._fill_pool()
        rows = self._pool[self._next]
        self._next += 1
        wrapped = [wrap(s) for s in rows]
        lengths = [len(f) - 1 for f, _ in wrapped]
        return _make_batch(self.encoder, [f for f, _ in wrapped], [r for _, r in wrapped], lengths, max(lengths))

    def state_dict(self) -> dict:
        return {"pool_start": dict(self._pool_start), "pool_index": self._pool_index,
                "next": self._next, "has_pool": bool(self._pool)}

    def load_state_dict(self, state: dict) -> None:
        self.stream.load_state_dict(state["pool_start"])
        self._pool_index = state["pool_index"]
        self._pool = []
        if state["has_pool"]:
            self._fill_pool()  # re-reads the same pool from its start: same batches, same order
            self._next = state["next"]


def sentence_batches(sentences: Iterable[Sentence], vocab: Vocabulary, batch_size: int = 32,
                     max_chars: int = 50) -> Iterator[LMBatch]:
    """Held-out batches of one wrapped sentence a row, in order, for stateless perplexity
    (every sentence from a zero state, as a bucketed-trained model and stateless ELMo see it)."""
    encoder = _Encoder(vocab, max_chars)
    rows: List[Sentence] = []
    for s in list(sentences) + [None]:
        if s is not None:
            rows.append(s)
        if rows and (len(rows) == batch_size or s is None):
            wrapped = [wrap(r) for r in rows]
            lengths = [len(f) - 1 for f, _ in wrapped]
            yield _make_batch(encoder, [f for f, _ in wrapped], [b for _, b in wrapped], lengths, max(lengths))
            rows = []


def stream_batches(sentences: Iterable[Sentence], vocab: Vocabulary, unroll_steps: int = 100,
                   max_chars: int = 50) -> Iterator[LMBatch]:
    """Held-out text as one stream, for a carried-state perplexity: one row, the wrapped
    sentences end to end in their order, cut into windows of ``unroll_steps`` inputs (the last
    one shorter); window n + 1 continues window n, so the LSTM state carries over. The backward
    row holds each sentence reversed, in the same order, as training's packed rows do."""
    if unroll_steps < 1:
        raise ValueError(f"unroll_steps must be at least 1, got {unroll_steps}")
    encoder = _Encoder(vocab, max_chars)
    fwd: List[str] = []
    bwd: List[str] = []
    for sentence in sentences:
        f, r = wrap(sentence)
        fwd.extend(f)
        bwd.extend(r)
        while len(fwd) >= unroll_steps + 1:  # T inputs and their T targets
            yield _make_batch(encoder, [fwd[:unroll_steps + 1]], [bwd[:unroll_steps + 1]],
                              [unroll_steps], unroll_steps)
            del fwd[:unroll_steps], bwd[:unroll_steps]
    if len(fwd) > 1:
        yield _make_batch(encoder, [fwd], [bwd], [len(fwd) - 1], len(fwd) - 1)
