"""A straightforward per-timestep ELMo, written plainly: the reference that the tests
(tests/test_lstm.py) check the packed LSTM against, and the benchmarks time the library against.

It computes the same function as elmo.BiLM, the way common ports do: the character CNN runs
on every position of the padded batch over all 50 characters, and each LSTM direction steps
through the padded batch one time step at a time with its own input product, masking the
rows that have ended. The benchmarks check that it agrees with the library before timing.

Calling it runs with autograd enabled, as AllenNLP's ``ElmoEmbedder`` does (it calls its biLM
without ``torch.no_grad``); there the weights are loaded with ``requires_grad=False``, so no
graph is recorded. ``benchmarks/inference.py`` freezes the weights the same way.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F

from elmo import BiLM
from elmo.chars import BOS_TOKEN, EOS_TOKEN, word_to_char_ids
from elmo.modules.lstm import BiLSTMLayer, BiLSTMStack


LayerState = Tuple[torch.Tensor, torch.Tensor]


def lstm_direction(stack: BiLSTMStack, layer: BiLSTMLayer, d: int, x: torch.Tensor, mask: torch.Tensor,
                   state: Optional[LayerState] = None, right_to_left: Optional[bool] = None
                   ) -> Tuple[torch.Tensor, LayerState]:
    """Direction d (0 forward, 1 backward) of one layer of ``stack`` over a padded batch.

    Args:
        x: (B, T, I) inputs; mask: (B, T) bool, True on each row's real positions (a prefix).
        state: the initial (c (B, H), h (B, P)); zeros when None.
        right_to_left: the order the steps are read in; None: right to left for d == 1 (a
            language model's backward stack reads its reversed text left to right).

    Returns:
        outputs (B, T, P), zero where ``mask`` is False, and the final (c, h); a row keeps its
        state through the positions it masks out (so an empty row keeps its initial state).
    """
    batch, steps, _ = x.shape
    if state is None:
        c, h = x.new_zeros(batch, stack.cell_dim), x.new_zeros(batch, stack.projection_dim)
    else:
        c, h = state
    out = x.new_zeros(batch, steps, stack.projection_dim)
    w_ih, w_hh, w_proj = layer.weight_ih[d], layer.weight_hh[d], layer.weight_proj[d]
    cells = stack.cell_dim
    bias = layer.bias[d] + torch.cat([torch.zeros(2 * cells), torch.ones(cells), torch.zeros(cells)]).to(x)  # forget +1
    if right_to_left is None:
        right_to_left = d == 1
    order = range(steps - 1, -1, -1) if right_to_left else range(steps)
    for t in order:
        gates = F.linear(x[:, t], w_ih) + F.linear(h, w_hh) + bias
        i, j, f, o = gates.chunk(4, dim=1)
        new_c = torch.sigmoid(i) * torch.tanh(j) + torch.sigmoid(f) * c
        if stack.cell_clip is not None:
            new_c = new_c.clamp(-stack.cell_clip, stack.cell_clip)
        new_h = F.linear(torch.sigmoid(o) * torch.tanh(new_c), w_proj)
        if stack.proj_clip is not None:
            new_h = new_h.clamp(-stack.proj_clip, stack.proj_clip)
        m = mask[:, t, None]
        c = torch.where(m, new_c, c)
        h = torch.where(m, new_h, h)
        out[:, t] = new_h * m
    return out, (c, h)


def reference_lstm_stack(stack: BiLSTMStack, x: torch.Tensor, mask: torch.Tensor,
                         state: Optional[List[LayerState]] = None
                         ) -> Tuple[List[torch.Tensor], List[LayerState]]:
    """What :meth:`BiLSTMStack.forward` computes (no dropout), one time step at a time.

    Args:
        x: (B, T, I); mask: (B, T) bool, each row's real positions (a prefix).
        state: per layer (c (2, B, H), h (2, B, P)), direction 0 forward; zeros when None.

    Returns:
        per layer (B, T, 2P): forward then backward outputs; and per layer the final state
        (c (2, B, H), h (2, B, P)).
    """
    layers, finals = [], []
    fwd_in = bwd_in = x
    for j, layer in enumerate(stack.layers):
        start = [None, None] if state is None else [(state[j][0][d], state[j][1][d]) for d in (0, 1)]
        fwd, (c_f, h_f) = lstm_direction(stack, layer, 0, fwd_in, mask, start[0])
        bwd, (c_b, h_b) = lstm_direction(stack, layer, 1, bwd_in, mask, start[1])
        if stack.use_skip_connections and j > 0:
            fwd, bwd = fwd + fwd_in, bwd + bwd_in
        layers.append(torch.cat([fwd, bwd], -1))
        finals.append((torch.stack([c_f, c_b]), torch.stack([h_f, h_b])))
        fwd_in, bwd_in = fwd, bwd
    return layers, finals


def with_boundaries(char_ids: torch.Tensor, lengths: torch.Tensor, empty_rows: bool = False) -> torch.Tensor:
    """(B, T, C) byte ids -> (B, T + 2, C): each sentence of n > 0 tokens becomes <S>, its
    tokens, </S>, then padding; an empty one stays all padding, or with ``empty_rows`` (the
    boundaries kept, as AllenNLP) becomes <S> </S>."""
    batch, steps, n_chars = char_ids.shape
    out = char_ids.new_zeros(batch, steps + 2, n_chars)
    for b, n in enumerate(lengths.tolist()):
        if n > 0 or empty_rows:
            out[b, 0] = torch.tensor(word_to_char_ids(BOS_TOKEN, n_chars))
            out[b, 1:n + 1] = char_ids[b, :n]
            out[b, n + 1] = torch.tensor(word_to_char_ids(EOS_TOKEN, n_chars))
    return out


class ReferenceBiLM:
    """Reads the parameters of a BiLM; ``__call__(char_ids)`` gives the L + 1 layers (B, T, 2P)."""

    def __init__(self, bilm: BiLM):
        self.bilm = bilm

    def token_vectors(self, ids: torch.Tensor) -> torch.Tensor:
        enc = self.bilm.token_encoder
        batch, steps, n_chars = ids.shape
        chars = enc.char_embedding(ids.view(-1, n_chars)).transpose(1, 2)
        pooled = [conv(chars).max(dim=2).values for conv in enc.convolutions]
        activation = torch.tanh if self.bilm.options.char_cnn.activation == "tanh" else F.relu
        x = activation(torch.cat(pooled, dim=1))
        f = x.shape[1]
        for layer in enc.highway.layers:
            carry = torch.sigmoid(F.linear(x, layer.weight[:f], layer.bias[:f]))
            transform = F.relu(F.linear(x, layer.weight[f:], layer.bias[f:]))
            x = carry * transform + (1 - carry) * x
        return enc.projection(x).view(batch, steps, -1)

    def direction(self, layer, d: int, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Direction d (0 forward, 1 backward) of one layer over a padded batch: (B, T, P)."""
        return lstm_direction(self.bilm.lstm, layer, d, x, mask)[0]

    def __call__(self, char_ids: torch.Tensor) -> List[torch.Tensor]:
        return self.run(char_ids)[0]

    def run(self, char_ids: torch.Tensor, state: Optional[List[LayerState]] = None,
            keep_sentence_boundaries: bool = False) -> Tuple[List[torch.Tensor], List[LayerState]]:
        """The L + 1 layers (B, T, 2P), or (B, T + 2, 2P) with the boundaries kept, and the final
        state per layer, (c (2, B, H), h (2, B, P)), starting from ``state`` (zeros when None):
        what a stateful BiLM carries to its next call."""
        mask = (char_ids > 0).any(-1)
        ids = with_boundaries(char_ids, mask.sum(1), empty_rows=keep_sentence_boundaries)
        mask = (ids > 0).any(-1)
        x = self.token_vectors(ids)
        layers = [torch.cat([x, x], -1)]
        lstm_layers, finals = reference_lstm_stack(self.bilm.lstm, x, mask, state)
        layers += lstm_layers
        if keep_sentence_boundaries:
            return [layer * mask[..., None] for layer in layers], finals
        real = (char_ids > 0).any(-1, keepdim=True)  # also zeroes each row's </S> position
        return [layer[:, 1:char_ids.shape[1] + 1] * real for layer in layers], finals
