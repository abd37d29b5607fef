"""The bidirectional language model: character CNN + forward and backward LSTM stacks.

For a sentence of T tokens it gives L + 1 layers, each (T, 2P):
layer 0 is [x_k; x_k] (the token vector twice), layer j is [forward_j; backward_j].

``<S>`` and ``</S>`` are added around every sentence before the LSTMs and removed from the
outputs (unless ``keep_sentence_boundaries``). An empty sentence (a row of the batch that is
all padding) is not run at all: it gets zero-length output and, in stateful mode, keeps its
state. With ``keep_sentence_boundaries`` it is ``<S> </S>``, run (and its state moved on) as
AllenNLP runs it: two positions of mask True.

Two state modes:
  * stateless (default): every sentence starts from a zero state, so its vectors never depend
    on the other sentences of its batch or on earlier calls;
  * stateful: reproduces the original ELMo, where row b's final (c, h) state of each call is
    the initial state of row b in the next call (detached, in the weights' dtype). Call
    :meth:`BiLM.reset_states` to start over; loading weights (``load_state_dict``) starts
    over too.

Threads: a stateless model holds nothing between calls, and any number of threads may call it
at once, without a lock. A stateful model's calls take turns (:func:`stateful_calls`): two
threads that read the carried state, ran the LSTMs and stored their final states interleaved
started from the same state and each overwrote the other's (vectors of no order of the calls,
no error).
"""
from __future__ import annotations

import contextlib
import math
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, List, Optional, Sequence, Tuple, TypedDict

import numpy as np
import torch
from torch import nn

from ..checks import require_switch
from ..chars import BOS_TOKEN, EOS_TOKEN, ByteCharIds, word_to_char_ids
from ..config import ElmoOptions
from ..host_copy import device_constant, to_device
from .char_cnn import CharCNN, require_integer_ids, require_weights_with_values
from .eager import eager_under_compile, refuse_function_transforms
from .lstm import BiLSTMStack, LayerState


def add_sentence_boundaries(char_ids: torch.Tensor, lengths: Sequence[int], bos_row=None,
                            eos_row=None, empty_rows: bool = False) -> torch.Tensor:
    """(B, T, C) int64 ids -> (B, T + 2, C) with ``<S>`` first and ``</S>`` after the last
    token; ``lengths``: each row's count of tokens, B ints on the host (where the rows' ends
    are is decided there: no read of the device).

    ``bos_row`` / ``eos_row``: the C ids of the boundaries (default: byte ids). Rows of length 0
    stay all padding, unless ``empty_rows``: then they get ``<S> </S>`` too (as in AllenNLP's
    ``add_sentence_boundary_token_ids``).
    """
    batch, steps, n_chars = char_ids.shape
    if bos_row is None:
        bos_row, eos_row = word_to_char_ids(BOS_TOKEN, n_chars), word_to_char_ids(EOS_TOKEN, n_chars)
    out = char_ids.new_zeros(batch, steps + 2, n_chars)
    out[:, 1:-1] = char_ids
    rows = [b for b, n_tokens in enumerate(lengths) if n_tokens > 0 or empty_rows]
    if rows:
        # (2, 2R): <S> at step 0 of each row, then </S> after each row's last token
        # (made on the host, named: torch's default device may be another, see tests/test_default_device.py)
        where = to_device(torch.tensor([rows + rows, [0] * len(rows) + [lengths[b] + 1 for b in rows]],
                                       device="cpu"), char_ids.device)
        boundaries = device_constant((tuple(bos_row), tuple(eos_row)), torch.long, char_ids.device)   # (2, C)
        out[where[0], where[1]] = boundaries[:, None].expand(2, len(rows), n_chars).reshape(-1, n_chars)
    return out


def token_positions(lengths: Sequence[int], steps: int, device: torch.device) -> torch.Tensor:
    """(N,) int64 on ``device``: the flat positions b * ``steps`` + t, t < lengths[b], in
    ascending order, of B rows whose tokens come first (N the sum of the lengths)."""
    host = np.asarray(lengths, dtype=np.int64).reshape(-1)   # (on the host: numpy, not a device's tensor)
    grid = np.arange(host.size * steps, dtype=np.int64).reshape(host.size, steps)
    return to_device(torch.from_numpy(grid[np.arange(steps)[None, :] < host[:, None]]), device)


def _tokens_after_padding(mask: torch.Tensor) -> torch.Tensor:
    """(B, T - 1) bool, of ``mask`` (B, T) bool True at a token: True at a token right after a
    padded position (T - 1 is 0 where T < 2)."""
    return mask[:, 1:] & ~mask[:, :-1]


def padding_hole(mask: torch.Tensor) -> torch.Tensor:
    """0-dim bool, on ``mask``'s device: whether a row of ``mask`` (B, T) bool, True at a
    token, has a token after a padded position (see :func:`check_padding_at_end`)."""
    return _tokens_after_padding(mask).any()


def check_padding_at_end(mask: torch.Tensor) -> None:
    """ValueError unless each row's tokens come first and its padding (all-zero ids) after them:
    ``mask`` (B, T) bool, True at a token.

    A sentence's length is its count of tokens, so a zero row before its last token (padding on
    the left, or a hole) would put ``</S>`` over that last token and shift the LSTMs: wrong
    vectors and no error. (An empty token ``""`` has ids of its own; it is not padding.)"""
    hole = _tokens_after_padding(mask)
    if bool(hole.any()):
        row, step = (int(v) for v in hole.nonzero()[0])
        raise ValueError(f"char_ids sentence {row} has padding (all-zero ids) at position {step} "
                         f"before a token at {step + 1}: each sentence's tokens must come first, "
                         f"padding after them, as elmo.batch_to_ids makes them")


class BiLMOutput(TypedDict):
    """What :meth:`BiLM.forward` returns (a plain dict)."""

    activations: List[torch.Tensor]  # L + 1 tensors (..., T', 2P)
    mask: torch.Tensor               # (..., T') bool


class BiLM(nn.Module):
    """The biLM of an ELMo model.

    Args:
        options: the model's options (see :class:`elmo.config.ElmoOptions`).
        stateful: carry LSTM state across calls per batch row, as the original did.
        id_scheme: how tokens become ids; only for a model with ``options.char_vocabulary``
            (its :class:`elmo.manylangs.CharVocabulary`). Without it such a model has its
            weights but cannot convert or run text.
    """

    #: The files the model was loaded from (resolved; empty for one built in memory), set by
    #: :func:`elmo.load_pretrained` and :func:`elmo.load_original`: ``embed_file`` refuses an
    #: output that would replace one of them.
    source_files: Tuple[Path, ...] = ()

    def __init__(self, options: ElmoOptions, stateful: bool = False, id_scheme=None):
        super().__init__()
        if not isinstance(options, ElmoOptions):  # else an AttributeError on the first field
            raise TypeError(f"BiLM takes ElmoOptions (ElmoOptions.from_file, from_dict or preset), "
                            f"got {type(options).__name__}; to load a model use elmo.from_pretrained")
        self.options = options
        lstm = options.lstm
        vocab = options.char_vocabulary
        if vocab is None:
            self.token_encoder = CharCNN(options.char_cnn, lstm.projection_dim)
        else:
            sizes = (vocab.n_characters + 1, vocab.n_words + 1 if vocab.word_dim else 0)
            if id_scheme is not None and (id_scheme.n_char_rows, id_scheme.n_word_rows) != sizes:
                raise ValueError(f"the dictionaries have {id_scheme.n_char_rows - 1} characters and "
                                 f"{max(id_scheme.n_word_rows - 1, 0)} words; the options say "
                                 f"{vocab.n_characters} and {vocab.n_words if vocab.word_dim else 0}")
            self.token_encoder = CharCNN(options.char_cnn, lstm.projection_dim, id_scheme,
                                         n_char_rows=sizes[0], n_word_rows=sizes[1],
                                         word_dim=vocab.word_dim)
        self.lstm = BiLSTMStack(lstm)
        self.stateful = stateful
        self._states: Optional[List[LayerState]] = None

    @property
    def stateful(self) -> bool:
        """Whether each batch row's LSTM state carries into the next call (see the module doc)."""
        return self._stateful

    @stateful.setter
    def stateful(self, value: bool) -> None:
        self._stateful = require_switch("stateful", value)

    def _apply(self, fn, *args, **kwargs):
        # The carried state moves (and casts) with the module: a stateful model moved to a GPU
        # after a call on the CPU indexed its CPU state with GPU rows and failed.
        result = super()._apply(fn, *args, **kwargs)
        if self._states is not None:
            self._states = [(fn(c), fn(h)) for c, h in self._states]
        return result

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Called for this module by load_state_dict on it or on any module holding it (an
        # Elmo): a state carried under the old weights would start the new weights' next call,
        # giving vectors of neither model. (.to() keeps it: the weights stay the same; so does
        # a partial dict without this module's weights, an Elmo's mix alone, strict=False.)
        if any(key.startswith(prefix) for key in state_dict):
            self.reset_states()
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def output_dim(self) -> int:
        return self.options.output_dim

    @property
    def num_layers(self) -> int:
        return self.options.num_layers

    @property
    def id_scheme(self):
        """How this model turns tokens into ids (``token_encoder.id_scheme``)."""
        return self.token_encoder.id_scheme

    def token_ids(self, sentences) -> torch.Tensor:
        """The ids of B tokenized sentences for this model: (B, T, W) int64, zeros at padding.

        For a byte-id model this is :func:`elmo.batch_to_ids` with the model's character count;
        a dictionary model (ELMoForManyLangs) uses its own dictionaries. Move the result to the
        model's device before calling the model.
        """
        return self.token_encoder.require_id_scheme().batch_to_ids(sentences)

    # ------------------------------------------------------------------ state handling
    def reset_states(self) -> None:
        """Forget the carried state (stateful mode): the next call starts from zeros. (A call
        in progress in another thread ends first: else it stored its state after the reset.)"""
        with stateful_calls(self):
            self._states = None

    def get_states(self) -> Optional[List[LayerState]]:
        """The carried state per layer, (c (2, rows, H), h (2, rows, P)), or None."""
        return self._states

    @contextlib.contextmanager
    def states_kept(self) -> Iterator[None]:
        """Run a block that may carry, reset or replace the LSTM state (stateful mode), then put
        back the state there was before it: a caller's model is not left conditioned on the
        block's text. The block must not move the module (``.to()``): the state put back is
        where it was. Another thread's stateful calls wait for the block (the state put back
        would have undone theirs)."""
        with stateful_calls(self):
            saved = self._states
            try:
                yield
            finally:
                self._states = saved

    def _initial_state(self, batch: int, like: torch.Tensor) -> Optional[List[LayerState]]:
        """The carried state for the first ``batch`` rows, per layer (c (2, batch, H),
        h (2, batch, P)); rows beyond those carried start at zeros (dtype and device of
        ``like``). None when stateless or nothing is carried (the LSTMs start from zeros)."""
        if not self.stateful or self._states is None:
            return None
        held = self._states[0][0].shape[1]
        if held >= batch:
            return [(c[:, :batch], h[:, :batch]) for c, h in self._states]
        zeros = self.lstm.zero_state(batch - held, like)
        return [(torch.cat([c, zc], 1), torch.cat([h, zh], 1)) for (c, h), (zc, zh) in zip(self._states, zeros)]

    def _store_state(self, final: List[LayerState], batch: int) -> None:
        """Carry ``final``, per layer (c (2, batch, H), h (2, batch, P)), detached and in the
        LSTM weights' dtype; rows past ``batch`` of the state carried before keep theirs."""
        # Carried in the LSTM weights' dtype: a fine-tuning call under bf16 autocast ends in a
        # bfloat16 state, and the next call without autocast (say, validation) failed deep in
        # PyTorch on the mixed dtypes. (bfloat16 to float32 is exact; autocast casts it back.)
        dtype = self.lstm.layers[0].weight_hh.dtype
        final = [(c.detach().to(dtype), h.detach().to(dtype)) for c, h in final]
        if self._states is None or self._states[0][0].shape[1] <= batch:
            self._states = final
        else:  # rows beyond this batch keep what they had
            self._states = [(torch.cat([c, old_c[:, batch:]], 1), torch.cat([h, old_h[:, batch:]], 1))
                            for (c, h), (old_c, old_h) in zip(final, self._states)]

    # ------------------------------------------------------------------ the computation
    @eager_under_compile
    def forward(self, char_ids: torch.Tensor, keep_sentence_boundaries: bool = False
                ) -> BiLMOutput:
        """Run the biLM on a batch of sentences.

        Args:
            char_ids: (B, T, W) from :meth:`token_ids` (for byte-id models the same as
                :func:`elmo.batch_to_ids`); padded positions all zero.
                Any leading shape works, e.g. (B, passages, T, W): every (T, W) slice is one
                sentence and gets what it gets alone (stateless mode; up to float rounding).
                Ids that are not integers, or lie outside the model's embedding rows, raise
                (:meth:`elmo.modules.char_cnn.CharCNN.check_ids`).
            keep_sentence_boundaries: keep the ``<S>``/``</S>`` positions in the outputs.

        Returns:
            ``activations``: L + 1 tensors (..., T', 2P), T' = T (or T + 2 with boundaries),
            zero at padded positions; ``mask``: (..., T') bool. ``...`` is the input's leading
            shape.
        """
        refuse_function_transforms("BiLM")
        # "no" is true to Python: it kept the boundaries, two positions more than the tokens
        keep_sentence_boundaries = require_switch("keep_sentence_boundaries", keep_sentence_boundaries)
        if not isinstance(char_ids, torch.Tensor):
            raise TypeError(f"char_ids must be a torch.Tensor of ids, got {type(char_ids).__name__}: "
                            f"make them with bilm.token_ids(sentences) or elmo.batch_to_ids")
        if char_ids.dim() < 3:
            raise ValueError(f"char_ids must be (batch, tokens, chars) or (..., tokens, chars), "
                             f"got shape {tuple(char_ids.shape)}")
        weights = self.token_encoder.char_embedding.weight
        require_weights_with_values(weights, "BiLM")
        if char_ids.device != weights.device:  # else an error deep in the embedding (or the meta backend)
            raise ValueError(f"char_ids are on {char_ids.device} and the model on {weights.device}: "
                             f"move them with char_ids.to({str(weights.device)!r})")
        scheme = self.token_encoder.require_id_scheme()
        if char_ids.shape[-1] != scheme.width:
            # (batch_to_ids makes byte ids: of any width, a dictionary model refuses them)
            other = (", or pass max_characters_per_token to batch_to_ids"
                     if isinstance(scheme, ByteCharIds) else "")
            raise ValueError(f"char_ids has {char_ids.shape[-1]} characters per token; this model "
                             f"expects {scheme.width} (use bilm.token_ids(sentences){other})")
        # the type before the boundaries are written into them (the ranges: in _forward_3d)
        require_integer_ids(char_ids, scheme.start_id)
        char_ids = char_ids.long()  # (int32 ids work too; uint8 only where they fit)
        leading = tuple(char_ids.shape[:-2])
        if len(leading) > 1:  # (..., T, C) -> (rows, T, C); rows in row-major order
            char_ids = char_ids.reshape(math.prod(leading), *char_ids.shape[-2:])
        out = self._forward_3d(char_ids, keep_sentence_boundaries)
        if len(leading) > 1:
            out = {"activations": [a.reshape(*leading, *a.shape[1:]) for a in out["activations"]],
                   "mask": out["mask"].reshape(*leading, out["mask"].shape[-1])}
        return out

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward

    def _forward_3d(self, char_ids: torch.Tensor, keep_sentence_boundaries: bool) -> BiLMOutput:
        """:meth:`forward` for (B, T, W) ids."""
        encoder = self.token_encoder
        scheme = encoder.id_scheme
        mask = (char_ids > 0).any(dim=-1)
        # The checks of the ids and each row's count of tokens, read in one read of the device
        # (each read waits for a GPU): the ids' range first (a token of negative ids would look
        # like padding, dropped at the end), then padding before a token
        id_figures = encoder.id_figures(char_ids)
        n_id = id_figures.numel()
        figures = torch.cat([id_figures, padding_hole(mask).long().reshape(1), mask.sum(dim=1)]).tolist()
        encoder.refuse_bad_ids(char_ids, figures[:n_id])
        if figures[n_id]:
            check_padding_at_end(mask)
        lengths = figures[n_id + 1:]
        # kept, an empty sentence is <S> </S>, run and masked in as AllenNLP does (its two
        # positions were padding: mask False, zero vectors); else it is not run at all
        with_bounds = add_sentence_boundaries(char_ids, lengths, scheme.bos_row, scheme.eos_row,
                                              empty_rows=keep_sentence_boundaries)
        bounded = [n + 2 if n > 0 or keep_sentence_boundaries else n for n in lengths]
        layers = self._layers(with_bounds, bounded, token_positions(bounded, with_bounds.shape[1], char_ids.device))
        if keep_sentence_boundaries:
            bounded_mask = (with_bounds > 0).any(dim=-1)
            return {"activations": layers, "mask": bounded_mask}
        keep = mask.unsqueeze(-1).to(layers[0].dtype)
        return {"activations": [layer[:, 1:-1] * keep for layer in layers], "mask": mask}

    def layers_of(self, char_ids: torch.Tensor, lengths: torch.Tensor) -> List[torch.Tensor]:
        """The L + 1 layers for exactly these tokens (no boundaries added): each (B, T, 2P).

        Uses and updates the carried state in stateful mode, one thread at a time
        (:func:`stateful_calls`); a stateless call takes no lock.
        """
        return self._layers(char_ids, lengths)

    def _layers(self, char_ids: torch.Tensor, lengths: "torch.Tensor | Sequence[int]",
                positions: Optional[torch.Tensor] = None) -> List[torch.Tensor]:
        """:meth:`layers_of`; ``positions``: where the tokens are (see
        :meth:`elmo.modules.char_cnn.CharCNN.forward`), for lengths read to the host."""
        if positions is None:
            tokens = self.token_encoder(char_ids)  # (B, T, P), zero where there is no token
        else:   # (a keyword, so that a pre-hook returning its one positional argument keeps it)
            tokens = self.token_encoder(char_ids, token_positions=positions)
        if not self.stateful:
            lstm_layers, _ = self.lstm(tokens, lengths, None)
        else:
            with stateful_calls(self):  # from reading the state to storing the next one
                state = self._initial_state(char_ids.shape[0], tokens)
                lstm_layers, final = self.lstm(tokens, lengths, state)
                self._store_state(final, char_ids.shape[0])
        return [torch.cat([tokens, tokens], dim=-1)] + lstm_layers


@contextlib.contextmanager
def stateful_calls(model: BiLM) -> Iterator[None]:
    """Hold ``model``'s lock for the block when it is stateful (nothing to hold when not).

    Each batch row's carried state follows the calls in order: two threads calling one stateful
    model at once each started from the state before both calls, and one's final state was
    lost. :meth:`BiLM.layers_of` holds the lock from reading the state to storing the next
    one, and an :class:`elmo.Embedder` call for all of its batches. Each call then equals a
    sequential call, but which state it starts from depends on which thread came first.
    Re-entrant: one thread may nest calls (its own order)."""
    if not model.stateful:
        yield
        return
    with _LOCKS_GUARD:
        lock = _STATEFUL_LOCKS.setdefault(model, threading.RLock())
    with lock:
        yield


# one lock per model, not per caller: several embedders may share a model; weak, so a model is
# freed as before (and the lock is not an attribute that deepcopy or pickle refuse)
_STATEFUL_LOCKS: "weakref.WeakKeyDictionary[BiLM, threading.RLock]" = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()
