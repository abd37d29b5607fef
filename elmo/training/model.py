"""The biLM with its language-model head: what training optimises.

    char ids (B, T, C) --CharCNN--> x (B, T, P) --BiLSTMStack--> top layer (B, T, 2P)
    forward half (B, T, P)  -> dropout -> shared softmax -> next token
    backward half (B, T, P) -> dropout -> shared softmax -> previous token

Both directions' tokens go through the character CNN in one call (shared tokens are encoded
once). The backward stack reads its own rows (the reversed text, see
:mod:`elmo.data.lm_batches`), so its state carries along the reversed stream.

The loss is the mean of the two directions' mean negative log-likelihoods.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Tuple, TypedDict

import torch
import torch.nn.functional as F
from torch import nn

from ..chars import BOS_TOKEN, EOS_TOKEN, word_to_char_ids
from ..config import ElmoOptions
from ..data.lm_batches import LMBatch
from ..host_copy import device_constant
from ..modules.bilm import BiLM, token_positions
from ..modules.eager import eager_under_compile
from ..modules.lstm import LayerState
from ..modules.softmax import FULL_SOFTMAX, SharedSoftmax, SoftmaxLoss


__all__ = ["LMOutput", "LanguageModel"]


class LMOutput(TypedDict):
    """What :meth:`LanguageModel.forward` returns (a plain dict). (A typed dict, not
    Dict[str, object]: ``out["loss"].backward()`` and ``float(out["nll_fwd"])`` type-check,
    where an object has neither.)"""

    loss: torch.Tensor               # 0-dim, the mean of both directions' mean losses
    nll_fwd: torch.Tensor            # 0-dim, summed negative log-likelihoods, detached
    nll_bwd: torch.Tensor
    n_fwd: int                       # targets counted
    n_bwd: int
    state: List[LayerState]          # per layer (c (2, B, H), h (2, B, P)), detached


class LanguageModel(nn.Module):
    """A :class:`BiLM` plus the softmax shared by both directions.

    Args:
        options: model options; ``n_tokens_vocab`` is taken from ``n_vocab``.
        n_vocab: softmax size (the vocabulary file's length).
        bos_id, eos_id: ids of ``<S>`` and ``</S>``, to leave out the targets that are given
            (``<S>`` after ``</S>`` forward, ``</S>`` after ``<S>`` backward) when asked.
        dropout: on every LSTM layer's input and before the softmax (training only).
        bilm, softmax: the model's parts where they were loaded (``options`` and ``n_vocab``
            then only name them); by default new ones, randomly initialised.
    """

    def __init__(self, options: ElmoOptions, n_vocab: int, bos_id: int = 0, eos_id: int = 1,
                 dropout: float = 0.1, *, bilm: Optional[BiLM] = None,
                 softmax: Optional[SharedSoftmax] = None):
        super().__init__()
        # (a loaded model passes its parts: randomly initialised ones were replaced at once,
        # the random draws taking longer than the copy of the loaded weights over them)
        self.bilm = bilm if bilm is not None else BiLM(options)
        self.softmax = softmax if softmax is not None else SharedSoftmax(n_vocab, options.lstm.projection_dim)
        self.bos_id, self.eos_id = bos_id, eos_id
        self.set_dropout(dropout)

    def set_dropout(self, p: float) -> None:
        self.dropout = p
        self.bilm.lstm.dropout = p

    @property
    def options(self) -> ElmoOptions:
        return self.bilm.options

    @eager_under_compile
    def forward(self, batch: LMBatch, state: Optional[List[LayerState]] = None,
                negatives: Optional[SoftmaxLoss] = None, skip_given_targets: bool = False,
                mean_over: Optional[Tuple[float, float]] = None) -> LMOutput:
        """Loss of one batch.

        Args:
            batch: see :class:`LMBatch` (B rows).
            state: per layer (c (2, B, H), h (2, B, P)) carried from the previous batch, or
                None for zeros.
            negatives: the batch's softmax loss (:class:`~elmo.modules.softmax.Candidates`
                shared sampled negatives, or the full softmax); None for the full softmax.
            skip_given_targets: leave out targets that carry no information (evaluation):
                ``<S>`` read after ``</S>`` forward, ``</S>`` after ``<S>`` backward, where
                one sentence follows another in a row (a ``<S>`` or ``</S>`` word of the
                text is a target like any other word).
            mean_over: the forward and backward target counts each direction's summed loss
                is divided by; None for this batch's own. Data parallelism passes the global
                batch's counts over the processes, so that the gradients DDP averages are
                those of the global batch's mean, also where the processes' rows hold
                different numbers of tokens (bucketed).

        Returns:
            ``loss`` (0-dim, mean of both directions), ``nll_fwd``/``nll_bwd`` (0-dim summed
            negative log-likelihoods, detached), ``n_fwd``/``n_bwd`` (targets counted), and
            ``state``: the final state per layer, detached (backprop stops at the batch edge).
        """
        rows = batch.fwd_chars.shape[0]
        chars = torch.cat([batch.fwd_chars, batch.bwd_chars])   # (2B, T, W)
        # the lengths as the host holds them where it does: a GPU's would be read for the packing,
        # and the character CNN would read it twice to find the tokens (each row's first lengths[b])
        host_lengths = batch.host_lengths
        steps = chars.shape[1]
        at_tokens: Optional[torch.Tensor] = None   # (N,) one direction's token positions, from the host
        if host_lengths is None:
            tokens = self.bilm.token_encoder(chars)  # (2B, T, P)
        else:
            self.bilm.token_encoder.check_ids(chars)
            at_tokens = token_positions(host_lengths, steps, chars.device)
            tokens = self.bilm.token_encoder(chars, token_positions=torch.cat([at_tokens, at_tokens + rows * steps]))
        layers, final = self.bilm.lstm(tokens[:rows], batch.lengths if host_lengths is None else host_lengths,
                                       state, backward_inputs=tokens[rows:])
        top = layers[-1]
        p = self.options.lstm.projection_dim
        fwd_mask, bwd_mask = batch.fwd_mask, batch.bwd_mask
        if skip_given_targets:
            fwd_mask = fwd_mask & ~_given(batch.fwd_targets, self.bos_id, batch.fwd_chars, EOS_TOKEN)
            bwd_mask = bwd_mask & ~_given(batch.bwd_targets, self.eos_id, batch.bwd_chars, BOS_TOKEN)
        # each mask's positions found once, then gathered by: a mask as an index read the
        # device again for every tensor it selected from, and for their gradients (a GPU wait each);
        # masks that are the rows' first lengths[b] positions are the tokens' (no read at all)
        if at_tokens is not None and not skip_given_targets and batch.masks_follow_lengths:
            at_f = at_b = at_tokens
        else:
            at_f, at_b = fwd_mask.reshape(-1).nonzero().squeeze(1), bwd_mask.reshape(-1).nonzero().squeeze(1)
        hidden_f = self._dropout(top[..., :p].reshape(-1, p).index_select(0, at_f))      # (N_f, P)
        hidden_b = self._dropout(top[..., p:].reshape(-1, p).index_select(0, at_b))      # (N_b, P)
        targets_f, targets_b = batch.fwd_targets.reshape(-1)[at_f], batch.bwd_targets.reshape(-1)[at_b]
        nll_f, nll_b = self._nll(hidden_f, targets_f, hidden_b, targets_b, negatives or FULL_SOFTMAX)
        dtype = self.softmax.weight.dtype
        count_f, count_b = mean_over or (nll_f.numel(), nll_b.numel())
        loss = 0.5 * (nll_f.sum() / max(count_f, 1) + nll_b.sum() / max(count_b, 1))
        return {"loss": loss, "nll_fwd": nll_f.detach().sum(), "nll_bwd": nll_b.detach().sum(),
                # the masks' counts, as the selected targets' shapes hold them (int(mask.sum()) read the device)
                "n_fwd": nll_f.numel(), "n_bwd": nll_b.numel(),
                # carried in the parameters' dtype, so bf16 autocast steps and fp32 steps can alternate
                "state": [(c.detach().to(dtype), h.detach().to(dtype)) for c, h in final]}

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward

    def _dropout(self, hidden: torch.Tensor) -> torch.Tensor:
        """(N, P) -> (N, P): dropout before the softmax, one direction at a time (the random
        numbers drawn stay those of one call per direction)."""
        return F.dropout(hidden, self.dropout, self.training) if self.dropout > 0 else hidden

    def _nll(self, hidden_f: torch.Tensor, targets_f: torch.Tensor, hidden_b: torch.Tensor,
             targets_b: torch.Tensor, loss: SoftmaxLoss) -> Tuple[torch.Tensor, torch.Tensor]:
        """hidden (N, P) after dropout and targets (N,) per direction -> (N,) negative
        log-likelihoods per direction, by ``loss`` (full or sampled)."""
        return loss.nll(self.softmax, hidden_f, targets_f, hidden_b, targets_b)


def _given(targets: torch.Tensor, target_id: int, input_chars: torch.Tensor, input_token: str) -> torch.Tensor:
    """(B, T) bool: the positions whose target is ``target_id`` read right after
    ``input_token`` (input_chars (B, T, C)), the boundary a packed row's join gives away.
    By the ids alone, a ``<S>`` word of the text was left out forward (and ``</S>``
    backward): the two directions counted other targets than the words plus one boundary a
    sentence that perplexity reports."""
    marker = device_constant(word_to_char_ids(input_token, input_chars.shape[-1]), torch.long, input_chars.device)
    return (targets == target_id) & (input_chars == marker).all(dim=-1)
