"""A linear-chain conditional random field over tag sequences.

For emissions ``e`` (B, T, K) and a tag path ``y`` of a sentence of length n the score is

    score(y) = start[y_0] + sum_t e[t, y_t] + sum_{t>0} trans[y_{t-1}, y_t] + end[y_{n-1}]

and p(y) = exp(score(y)) / Z with Z the sum over all K^n paths. ``log_partition`` computes
log Z with the forward algorithm, ``neg_log_likelihood`` the training loss, ``decode`` the
best path with Viterbi. Sentences of different lengths share a batch through ``mask``
(B, T), which must be true on a prefix of each row; a row of length 0 contributes nothing.
"""
from __future__ import annotations

from typing import List

import torch
from torch import nn


class CRF(nn.Module):
    """Linear-chain CRF with learned start, end and transition scores.

    Args:
        num_tags: K, the number of tags.
    """

    def __init__(self, num_tags: int):
        super().__init__()
        self.num_tags = num_tags
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))   # [from, to]
        self.start = nn.Parameter(torch.zeros(num_tags))
        self.end = nn.Parameter(torch.zeros(num_tags))
        nn.init.uniform_(self.transitions, -0.1, 0.1)

    def path_score(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor
                   ) -> torch.Tensor:
        """score(y) of the given paths: emissions (B, T, K), tags (B, T), mask (B, T) -> (B,)."""
        mask_f = mask.to(emissions.dtype)
        lengths = mask.long().sum(1)
        emit = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)                 # (B, T)
        score = (emit * mask_f).sum(1)
        trans = self.transitions[tags[:, :-1], tags[:, 1:]]                      # (B, T-1)
        score = score + (trans * mask_f[:, 1:]).sum(1)
        nonempty = lengths > 0
        first = tags[:, 0]
        last = tags.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        return score + (self.start[first] + self.end[last]) * nonempty.to(emissions.dtype)

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log Z by the forward algorithm: emissions (B, T, K), mask (B, T) -> (B,)."""
        batch, steps, _ = emissions.shape
        if steps == 0:
            return emissions.new_zeros(batch)
        alpha = self.start + emissions[:, 0]                                     # (B, K)
        for t in range(1, steps):
            # alpha_new[b, j] = logsumexp_i alpha[b, i] + trans[i, j] + e[b, t, j]
            step = torch.logsumexp(alpha.unsqueeze(2) + self.transitions, dim=1) + emissions[:, t]
            alpha = torch.where(mask[:, t].unsqueeze(1), step, alpha)
        log_z = torch.logsumexp(alpha + self.end, dim=1)
        return torch.where(mask[:, 0], log_z, torch.zeros_like(log_z))

    def neg_log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor,
                           mask: torch.Tensor) -> torch.Tensor:
        """Sum over the batch of -log p(tags): emissions (B, T, K), tags, mask (B, T) -> ()."""
        return (self.log_partition(emissions, mask) - self.path_score(emissions, tags, mask)).sum()

    @torch.no_grad()
    def decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> List[List[int]]:
        """The highest-scoring path of each row (Viterbi): a list of B lists of tag ids,
        each as long as its row's mask."""
        batch, steps, _ = emissions.shape
        if steps == 0:
            return [[] for _ in range(batch)]
        best = self.start + emissions[:, 0]                                      # (B, K)
        back = []
        for t in range(1, steps):
            cand = best.unsqueeze(2) + self.transitions                         # (B, K_from, K_to)
            top, arg = cand.max(dim=1)
            back.append(arg)
            best = torch.where(mask[:, t].unsqueeze(1), top + emissions[:, t], best)
        best = best + self.end
        # The back-trace runs on the emissions' device for all rows at once, and the paths
        # cross to the host in one copy (one int() per tag was a device sync per tag on a GPU).
        # A row of length n ends at step n - 1: until the walk reaches it, its tag stays the
        # best final tag; from there it follows its back-pointers.
        length_t = mask.long().sum(1)                                            # (B,)
        tag = best.argmax(dim=1)                                                 # (B,)
        tags = [tag] * steps
        for t in range(steps - 1, 0, -1):
            tags[t] = tag
            previous = back[t - 1].gather(1, tag.unsqueeze(1)).squeeze(1)
            tag = torch.where(length_t > t, previous, tag)
        tags[0] = tag
        rows = torch.cat([length_t.unsqueeze(1), torch.stack(tags, dim=1)], dim=1).tolist()  # (B, 1 + T)
        return [row[1:1 + row[0]] for row in rows]
