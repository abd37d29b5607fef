"""A straightforward per-timestep ELMo, written plainly as the speed reference.

It computes the same function as elmo.BiLM, the way common ports do: the character CNN runs
on every position of the padded batch over all 50 characters, and each LSTM direction steps
through the padded batch one time step at a time with its own input product, masking the
rows that have ended. The benchmarks check that it agrees with the library before timing.

Inference runs with autograd enabled, as AllenNLP's ``ElmoEmbedder`` does (it calls its biLM
without ``torch.no_grad``); there the weights are loaded with ``requires_grad=False``, so no
graph is recorded. ``benchmarks/inference.py`` freezes the weights the same way.
"""
from __future__ import annotations

from typing import List

import torch
import torch.nn.functional as F

from elmo import BiLM
from elmo.modules.bilm import add_sentence_boundaries


class ReferenceBiLM:
    """Reads the parameters of a BiLM; ``__call__(char_ids)`` gives the L + 1 layers (B, T, 2P)."""

    def __init__(self, bilm: BiLM):
        self.bilm = bilm

    def token_vectors(self, ids: torch.Tensor) -> torch.Tensor:
        enc = self.bilm.token_encoder
        batch, steps, n_chars = ids.shape
        chars = enc.char_embedding(ids.view(-1, n_chars)).transpose(1, 2)
        pooled = [conv(chars).max(dim=2).values for conv in enc.convolutions]
        x = enc._activation(torch.cat(pooled, dim=1))
        f = x.shape[1]
        for layer in enc.highway.layers:
            carry = torch.sigmoid(F.linear(x, layer.weight[:f], layer.bias[:f]))
            transform = F.relu(F.linear(x, layer.weight[f:], layer.bias[f:]))
            x = carry * transform + (1 - carry) * x
        return enc.projection(x).view(batch, steps, -1)

    def direction(self, layer, d: int, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Direction d (0 forward, 1 backward) of one layer over a padded batch."""
        lstm = self.bilm.lstm
        batch, steps, _ = x.shape
        h = x.new_zeros(batch, lstm.projection_dim)
        c = x.new_zeros(batch, lstm.cell_dim)
        out = x.new_zeros(batch, steps, lstm.projection_dim)
        w_ih, w_hh, w_proj, bias = layer.weight_ih[d], layer.weight_hh[d], layer.weight_proj[d], layer.effective_bias()[d]
        order = range(steps - 1, -1, -1) if d == 1 else range(steps)
        for t in order:
            gates = F.linear(x[:, t], w_ih) + F.linear(h, w_hh) + bias
            i, j, f, o = gates.chunk(4, dim=1)
            new_c = torch.sigmoid(i) * torch.tanh(j) + torch.sigmoid(f) * c
            if lstm.cell_clip is not None:
                new_c = new_c.clamp(-lstm.cell_clip, lstm.cell_clip)
            new_h = F.linear(torch.sigmoid(o) * torch.tanh(new_c), w_proj)
            if lstm.proj_clip is not None:
                new_h = new_h.clamp(-lstm.proj_clip, lstm.proj_clip)
            m = mask[:, t, None]
            c = torch.where(m, new_c, c)
            h = torch.where(m, new_h, h)
            out[:, t] = new_h * m
        return out

    def __call__(self, char_ids: torch.Tensor) -> List[torch.Tensor]:
        mask = (char_ids > 0).any(-1)
        ids = add_sentence_boundaries(char_ids, mask.sum(1))
        mask = (ids > 0).any(-1)
        x = self.token_vectors(ids)
        layers = [torch.cat([x, x], -1)]
        fwd_in = bwd_in = x
        lstm = self.bilm.lstm
        for j, layer in enumerate(lstm.layers):
            fwd = self.direction(layer, 0, fwd_in, mask)
            bwd = self.direction(layer, 1, bwd_in, mask)
            if lstm.use_skip_connections and j > 0:
                fwd, bwd = fwd + fwd_in, bwd + bwd_in
            layers.append(torch.cat([fwd, bwd], -1))
            fwd_in, bwd_in = fwd, bwd
        real = (char_ids > 0).any(-1, keepdim=True)  # also zeroes each row's </S> position
        return [layer[:, 1:char_ids.shape[1] + 1] * real for layer in layers]
