"""Batched embedding of tokenized sentences: the engine behind ``elmo embed``.

    embedder = Embedder("fixture", batch_size=64)
    arrays = embedder.embed_sentences([["The", "bank", "."], []], layers="all")
    arrays[0].shape == (L + 1, 3, D); arrays[1].shape == (L + 1, 0, D)

How a list of sentences is computed:
  1. every sentence becomes one or more pieces (see :mod:`elmo.embedding.windows`): one piece
     unless it is longer than ``max_tokens``;
  2. pieces are sorted by length, longest first (``sort_by_length``), so that a batch holds
     sentences of similar length and little padding is computed; in stateful mode they keep
     their order instead, because each batch row carries its state to the next batch;
  3. batches of ``batch_size`` pieces go through the biLM; each piece's kept tokens are
     reduced to the requested layers and handed back with their sentence index and offset,
     so callers can write them wherever they belong (results come in batch order).

With a stateless model (the default) a sentence's vectors do not depend on its neighbours,
so the results equal embedding each sentence alone, up to float rounding.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np
import torch

from ..chars import check_tokenized, tokenized
from ..checks import require_count, require_switch, shown
from ..modules import BiLM
from ..modules.bilm import stateful_calls
from ..host_copy import to_device
from ..modules.dropout_off import dropout_off
from ..runtime import resolve_device
from .config import DEFAULT_BATCH_SIZE
from .layers import LayerSelection
from .output import NonFiniteOutput
from .windows import DEFAULT_MAX_TOKENS, Window, check_window_args, plan_windows

#: What :func:`output_dtype` takes: a numpy floating type, its name or dtype, or a torch dtype.
DTypeSpec = Union[str, np.dtype, "type[np.floating]", torch.dtype]

Sentence = Sequence[str]


@dataclass(frozen=True)
class Piece:
    """Tokens ``window.start:window.stop`` of sentence ``sentence`` (an index), run together."""

    sentence: int
    window: Window

    @property
    def n_tokens(self) -> int:
        return self.window.stop - self.window.start


@dataclass(frozen=True)
class PieceOutput:
    """Vectors of tokens [offset, offset + n) of sentence ``sentence``.

    ``vectors``: (K, n, D), K = L + 1 for ``layers="all"`` and 1 otherwise.
    """

    sentence: int
    offset: int
    vectors: np.ndarray


class Embedder:
    """Embed tokenized sentences with a biLM, in sorted batches, windowing long sentences.

    Args:
        model: a :class:`~elmo.BiLM`, or a bundled model name or model folder to load.
        batch_size: pieces (sentences or windows) per biLM call.
        max_tokens: sentences longer than this are split into overlapping windows.
        overlap: tokens shared by consecutive windows; None (the default) is
            ``min(64, max_tokens // 2)``, so 64 with the default ``max_tokens`` (see
            :func:`~elmo.embedding.windows.default_overlap`). The value used is ``self.overlap``.
        sort_by_length: batch pieces of similar length together (ignored when stateful).
        device: where to run; default: the model's device (or CPU when loading).

    Each batch runs without dropout, but no module's ``training`` flag is switched (that flag
    is shared by all threads): a model still being trained keeps training with its dropout, and
    several threads may embed with one model at the same time. A stateful model serves one call
    at a time (:func:`stateful_calls`).
    """

    def __init__(self, model: Union[BiLM, str, Path, None] = None, *, batch_size: int = DEFAULT_BATCH_SIZE,
                 max_tokens: int = DEFAULT_MAX_TOKENS, overlap: Optional[int] = None,
                 sort_by_length: bool = True, device: Union[str, torch.device, None] = None):
        if isinstance(model, torch.nn.Module) and not isinstance(model, BiLM):
            # (an Elmo is the usual one: it was "a model is named by a string" and its repr)
            inner = " (an Elmo's biLM is its .bilm)" if isinstance(getattr(model, "bilm", None), BiLM) else ""
            raise TypeError(f"Embedder takes a BiLM, a model's name or a folder, got {type(model).__name__}{inner}")
        # (checked before a model is loaded, which may be a download)
        batch_size = require_count("batch_size", batch_size)
        max_tokens, overlap = check_window_args(max_tokens, overlap)
        # ("no" is true to Python: it sorted; embed_file's config refused it, this did not)
        sort_by_length = require_switch("sort_by_length", sort_by_length)
        if not isinstance(model, BiLM):
            from .. import DEFAULT_MODEL, from_pretrained
            model = from_pretrained(model if model is not None else DEFAULT_MODEL, device=device)
        elif device is not None:
            model = model.to(resolve_device(device, None, "device"))
        # not model.eval(): that switched the caller's model for good (a model still being
        # trained lost its LSTM dropout); each batch runs with dropout off instead (dropout_off)
        self.bilm = model
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.sort_by_length = sort_by_length

    @property
    def device(self) -> torch.device:
        return next(self.bilm.parameters()).device

    @property
    def num_layers(self) -> int:
        return self.bilm.num_layers

    @property
    def dim(self) -> int:
        return self.bilm.output_dim

    # ------------------------------------------------------------------ token cache
    def build_token_cache(self, sentences: Iterable[Sentence], min_count: int = 2,
                          max_words: int = 50_000) -> int:
        """Cache the character-CNN vectors of the frequent words of ``sentences``.

        Words seen at least ``min_count`` times (at most ``max_words`` of them, most frequent
        first) skip the CNN afterwards; other words still go through it, so results do not
        change. Returns the number of cached words.
        """
        min_count, max_words = require_count("min_count", min_count), require_count("max_words", max_words)
        words = frequent_words(tokenized(sentences, "build_token_cache", ordered=False), min_count, max_words)
        if words:
            self.bilm.token_encoder.build_token_cache(words)
        return len(words)

    def clear_token_cache(self) -> None:
        self.bilm.token_encoder.clear_token_cache()

    # ------------------------------------------------------------------ embedding
    def plan(self, sentences: Sequence[Sentence]) -> List[List[Piece]]:
        """The batches of pieces that :meth:`run` computes, in the order it computes them."""
        check_tokenized(sentences, "Embedder")
        pieces = [Piece(i, w) for i, s in enumerate(sentences)
                  for w in plan_windows(len(s), self.max_tokens, self.overlap)]
        if self.sort_by_length and not self.bilm.stateful:
            pieces.sort(key=lambda p: -p.n_tokens)  # stable: equal lengths keep input order
        return [pieces[i:i + self.batch_size] for i in range(0, len(pieces), self.batch_size)]

    def run(self, sentences: Sequence[Sentence], layers: Union[str, LayerSelection] = "all",
            dtype: DTypeSpec = np.float32) -> Iterator[List[PieceOutput]]:
        """Embed ``sentences`` batch by batch; yields, per batch, the outputs of its pieces.

        Every token of every sentence is covered by exactly one :class:`PieceOutput`.
        A stateful model is held by this call from its first batch to its last (or until the
        generator is closed): another thread's call on the model waits (:func:`stateful_calls`).
        """
        selection = LayerSelection.parse(layers)
        selection.check(self.num_layers)
        dtype = output_dtype(dtype)
        check_tokenized(sentences, "Embedder")
        sentences = token_lists(sentences)
        with stateful_calls(self.bilm):
            for batch in self.plan(sentences):
                yield self._run_batch(sentences, batch, selection, dtype)

    @torch.inference_mode()
    def _run_batch(self, sentences: Sequence[Sentence], batch: List[Piece],
                   selection: LayerSelection, dtype: np.dtype) -> List[PieceOutput]:
        with dropout_off():  # (not eval(): a flag shared by every thread using the model)
            return self._run_batch_eval(sentences, batch, selection, dtype)

    def _run_batch_eval(self, sentences: Sequence[Sentence], batch: List[Piece],
                        selection: LayerSelection, dtype: np.dtype) -> List[PieceOutput]:
        tokens = [list(sentences[p.sentence][p.window.start:p.window.stop]) for p in batch]
        n_kept = self.num_layers if selection.keeps_all else 1
        if max(len(t) for t in tokens) == 0:  # only empty sentences: nothing to run
            empty = np.zeros((n_kept, 0, self.dim), dtype=dtype)
            return [PieceOutput(p.sentence, 0, empty) for p in batch]
        ids = self.bilm.token_ids(tokens)                            # the model's own ids
        ids = to_device(ids, self.device)   # (pinned to a GPU: the copy waits for nothing)
        activations = self.bilm(ids)["activations"]                 # L + 1 of (B, T, D)
        reduced = selection.reduce(torch.stack(activations))        # (K, B, T, D)
        # float32 at least (numpy has no bfloat16), not at most: a float64 model's vectors
        # asked for as float64 were rounded to float32 on the way
        wide = torch.promote_types(reduced.dtype, torch.float32)
        with np.errstate(over="ignore"):  # float16's overflow is an inf that the caller names
            array = reduced.to(wide).cpu().numpy().astype(dtype, copy=False)
        outputs = []
        for b, piece in enumerate(batch):
            w = piece.window
            lo, hi = w.keep_start - w.start, w.keep_stop - w.start
            outputs.append(PieceOutput(piece.sentence, w.keep_start, array[:, b, lo:hi]))
        return outputs

    def embed_sentences(self, sentences: Sequence[Sentence], layers: Union[str, LayerSelection] = "all",
                        dtype: DTypeSpec = np.float32,
                        on_batch: Optional[Callable[[int], object]] = None) -> List[np.ndarray]:
        """One numpy array per sentence, in input order, of ``dtype`` (float32 by default).

        ``layers="all"`` gives (L + 1, n_tokens, D); ``top``, ``average`` and ``mix:...``
        give (n_tokens, D). An empty sentence gives a zero-length array of the same layout.
        A sentence that is a string is refused (TypeError): tokenize it first.
        In stateful mode the model's carried state is used and updated (the batches follow the
        input order); call ``embedder.bilm.reset_states()`` to start over.
        NaN or inf in a sentence's vectors (float16 overflow past 65504, a broken model) is a
        :class:`~elmo.embedding.output.NonFiniteOutput` (a ValueError) naming the sentence,
        as ``embed_file`` refuses them. ``on_batch``: called with the number of tokens of each
        batch once it is computed (a progress bar's ``update``).
        """
        check_tokenized(sentences, "embed_sentences")
        if on_batch is not None and not callable(on_batch):  # (else a bare TypeError after the first batch)
            raise TypeError(f"on_batch must be a function of the number of tokens (or None), got "
                            f"{type(on_batch).__name__}: {shown(on_batch)}")
        sentences = token_lists(sentences)   # (the arrays' lengths are those of the tokens run)
        dtype = output_dtype(dtype)
        selection = LayerSelection.parse(layers)
        shape = lambda n: (selection.shape(n, self.num_layers, self.dim) if selection.keeps_all
                           else (1, n, self.dim))
        results = [np.empty(shape(len(s)), dtype=dtype) for s in sentences]
        for batch in self.run(sentences, selection, dtype):
            for out in batch:
                results[out.sentence][:, out.offset:out.offset + out.vectors.shape[1]] = out.vectors
            if on_batch is not None:
                on_batch(sum(out.vectors.shape[1] for out in batch))
        for i, array in enumerate(results):  # (one pass over the output: cheap beside the model)
            if not np.isfinite(array).all():
                hint = (" (float16 holds at most 65504 in magnitude: use dtype float32)"
                        if np.dtype(dtype) == np.float16 else " (check the model's weights)")
                raise NonFiniteOutput(f"sentence {i}: the model gave non-finite values (NaN or "
                                      f"inf){hint}")
        return results if selection.keeps_all else [r[0] for r in results]


def token_lists(sentences: Sequence[Sentence]) -> List[List[str]]:
    """The sentences and their tokens as lists, taken by iteration, as the plain reference
    ``batch_to_ids`` takes them. By position, not by ``sentences[i]`` or a window's
    ``sentence[a:b]``: a pandas Series reads both by label, so a sorted or filtered one gave
    its sentences each other's vectors, and a sentence of such tokens (or a deque, which has
    no slices) was run with other tokens than its own, or stopped with a bare TypeError."""
    return [list(sentence) for sentence in sentences]


def output_dtype(dtype) -> np.dtype:
    """The numpy dtype of the arrays handed back: a numpy floating type or its name
    ("float32", "float16"), or the torch dtype of one. None was numpy's default, float64, and
    a torch dtype numpy's "Cannot interpret" TypeError, neither naming the argument; an
    integer type would silently truncate every vector."""
    if isinstance(dtype, torch.dtype):
        numpy_name = str(dtype).replace("torch.", "")
        if dtype.is_floating_point and hasattr(np, numpy_name):  # (numpy has no bfloat16)
            dtype = numpy_name
    try:
        result = np.dtype(dtype) if dtype is not None else None
    except TypeError:
        result = None
    if result is None or result.kind != "f":
        raise (ValueError if result is not None else TypeError)(
            f"dtype must be a floating-point type (float32, float16), got {dtype!r}")
    return result


def frequent_words(sentences: Iterable[Sentence], min_count: int = 2, max_words: int = 50_000) -> List[str]:
    """The words occurring at least ``min_count`` times, most frequent first (ties: first seen),
    at most ``max_words`` of them."""
    # (max_words -1 gave no words, and 1.5 a bare TypeError of a slice, after the counting)
    min_count, max_words = require_count("min_count", min_count), require_count("max_words", max_words)
    counts = Counter(token for sentence in tokenized(sentences, "frequent_words", ordered=False) for token in sentence)
    return [w for w, c in counts.most_common(max_words) if c >= min_count]


def masked_pool(vectors: torch.Tensor, mask: torch.Tensor, pooling: str = "mean") -> torch.Tensor:
    """Pool token vectors into sentence vectors, ignoring padded positions (whatever they
    hold, NaN or inf too).

    Args:
        vectors: (B, T, D); mask: (B, T) bool, True at real tokens.
        pooling: ``mean`` or ``max``.

    Returns:
        (B, D) in the dtype of ``vectors`` (a mean is summed in float32 at least); a sentence
        without tokens gets zeros.
    """
    if pooling not in ("mean", "max"):
        raise ValueError(f"pooling must be 'mean' or 'max', got {pooling!r}")
    # integer vectors: a mean cast back to their type was cut to a whole number, no error
    if not (isinstance(vectors, torch.Tensor) and vectors.is_floating_point()):
        raise TypeError(f"masked_pool takes floating-point vectors (B, T, D), got "
                        f"{getattr(vectors, 'dtype', type(vectors).__name__)}")
    if not isinstance(mask, torch.Tensor):  # (a numpy mask: "'numpy.ndarray' object has no attribute 'bool'")
        raise TypeError(f"masked_pool takes a mask tensor (B, T), got {type(mask).__name__}")
    if mask.device != vectors.device:
        raise ValueError(f"masked_pool: the mask is on {mask.device} and the vectors on {vectors.device}; "
                         f"move the mask with mask.to(vectors.device)")
    # a (B, 1) mask would broadcast over the tokens: wrong means, no error
    if vectors.dim() != 3 or tuple(mask.shape) != tuple(vectors.shape[:2]):
        raise ValueError(f"masked_pool takes vectors (B, T, D) and a mask (B, T); got "
                         f"{tuple(vectors.shape)} and {tuple(mask.shape)}")
    mask = mask.bool()  # (a 0/1 float mask too; ~ below needs booleans)
    if vectors.shape[1] == 0:  # no positions at all: every sentence is empty
        return vectors.new_zeros(vectors.shape[0], vectors.shape[2])
    keep = mask.unsqueeze(-1)
    counts = keep.sum(dim=1)                                        # (B, 1)
    if pooling == "mean":
        # summed in float32 at least: float16 vectors of 10,000 tokens of 10.0 summed to inf
        # in float16, so their mean was inf; the mean itself fits the input's type
        wide = torch.promote_types(vectors.dtype, torch.float32)
        # (filled, not multiplied by the mask: NaN or inf padding times 0 is NaN in every mean)
        total = vectors.to(wide).masked_fill(~keep, 0).sum(dim=1)
        return (total / counts.clamp(min=1).to(wide)).to(vectors.dtype)
    filled = vectors.masked_fill(~keep, float("-inf")).amax(dim=1)
    return torch.where(counts > 0, filled, torch.zeros_like(filled))


def sentence_vectors(model: Union[Embedder, BiLM, str, Path, None], sentences: Sequence[Sentence], *,
                     layers: Union[str, LayerSelection] = "average", pooling: str = "mean",
                     batch_size: int = DEFAULT_BATCH_SIZE) -> np.ndarray:
    """One vector per sentence: the mean or max over its tokens of the chosen layer output.

    Args:
        model: an :class:`Embedder`, a :class:`~elmo.BiLM`, or a model name or folder.
        sentences: N token lists (a sentence that is a string is refused: tokenize it first).
        layers: ``top``, ``average`` or ``mix:...`` (one vector per token); not ``all``.
        pooling: ``mean`` or ``max``; padding never takes part, and an empty sentence gets zeros.
        batch_size: sentences per biLM call where ``model`` is not an :class:`Embedder` (an
            Embedder runs with its own).

    Returns:
        float32 array (N, D).
    """
    check_tokenized(sentences, "sentence_vectors")
    batch_size = require_count("batch_size", batch_size)  # (0 passed unchecked with an Embedder)
    # (checked before a model is loaded and every sentence embedded: a wrong pooling failed
    # only in masked_pool, after all of it)
    if pooling not in ("mean", "max"):
        raise ValueError(f"pooling must be 'mean' or 'max', got {pooling!r}")
    selection = LayerSelection.parse(layers)
    if selection.keeps_all:
        raise ValueError("sentence_vectors needs one vector per token: layers='top', 'average' or 'mix:...'")
    embedder = model if isinstance(model, Embedder) else Embedder(model, batch_size=batch_size)
    arrays = embedder.embed_sentences(sentences, selection)
    # one row per sentence embedded: a len() that disagreed with the sentences left rows of
    # zeros that looked like empty sentences, or stopped with numpy's IndexError
    out = np.zeros((len(arrays), embedder.dim), dtype=np.float32)
    for i, array in enumerate(arrays):
        t = torch.from_numpy(array).unsqueeze(0)                      # (1, n, D)
        mask = torch.ones(1, t.shape[1], dtype=torch.bool)
        out[i] = masked_pool(t, mask, pooling)[0].numpy()
    return out
