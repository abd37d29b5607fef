"""The language model's output layer: one softmax (W, b) shared by both directions.

Full softmax: log p(w | h) = h W_w + b_w - logsumexp_v(h W_v + b_v).

Sampled softmax (Jean et al. 2015, as in the original trainer) estimates the same loss from
the true word and S sampled negatives:

* negatives come from a log-uniform (Zipf) distribution over the ids, which assumes the
  vocabulary is sorted by descending frequency:
  ``P(k) = (log(k + 2) - log(k + 1)) / log(V + 1)``;
* S distinct ids are drawn per batch (iid draws until S distinct ones are seen), shared by
  every position of the batch and by both directions;
* every logit is corrected by subtracting log Q(w), the expected number of times w appears
  among the draws (``Q = 1 - (1 - P)^tries``);
* a negative equal to a position's true word is removed from that position's candidates.

With S >= V every word is a candidate with Q = 1, and the loss is exactly the full softmax.

Both losses share one interface, :class:`SoftmaxLoss`: ``nll(softmax, hidden_f, targets_f,
hidden_b, targets_b)`` gives both directions' per-position losses. :data:`SOFTMAX_LOSSES`
names the two recipes (``full``, ``sampled``); :func:`softmax_loss` picks one from the
training settings. A recipe's ``candidates(device)`` is what one batch uses: the full softmax
itself, or that batch's drawn :class:`Candidates`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Protocol, Tuple, Type

import torch
from torch import nn


class LogUniformSampler:
    """Draws distinct ids from the log-uniform distribution over ``n_vocab`` ids.

    Uses its own ``torch.Generator`` (``state_dict``/``load_state_dict`` save it) so the
    negatives are reproducible and independent of dropout's random numbers.
    """

    def __init__(self, n_vocab: int, seed: int = 0):
        self.n_vocab = n_vocab
        self.generator = torch.Generator().manual_seed(seed)
        ids = torch.arange(n_vocab, dtype=torch.float64)
        self.log_range = math.log(n_vocab + 1)
        self.probs = ((ids + 2).log() - (ids + 1).log()) / self.log_range  # (V,) float64

    def draw(self, n: int) -> torch.Tensor:
        """n iid ids (with repeats), by inverting the CDF: k = floor(exp(u log(V + 1))) - 1."""
        u = torch.rand(n, generator=self.generator, dtype=torch.float64)
        return ((u * self.log_range).exp().floor().long() - 1).clamp_(0, self.n_vocab - 1)

    def sample(self, n_sampled: int) -> Tuple[torch.Tensor, torch.Tensor, Optional[int]]:
        """``n_sampled`` distinct ids (S,), log Q (S,) of each (Q: expected count), and the
        number of draws it took.

        Returns every id with log Q = 0 and tries None when ``n_sampled >= n_vocab``.
        """
        if n_sampled >= self.n_vocab:
            return torch.arange(self.n_vocab), torch.zeros(self.n_vocab, dtype=torch.float64), None
        chunks, seen = [], torch.zeros(self.n_vocab, dtype=torch.bool)
        size = max(n_sampled, 1024)
        while True:  # draw until n_sampled distinct ids are seen; chunks double (rare ids are slow)
            chunks.append(self.draw(size))
            seen[chunks[-1]] = True
            if int(seen.sum()) >= n_sampled:
                break
            size *= 2
        drawn = torch.cat(chunks)
        # The S-th distinct value ends the draws: count tries up to it, keep values in order.
        uniq, inverse = torch.unique(drawn, return_inverse=True)
        first = torch.full((uniq.numel(),), drawn.numel(), dtype=torch.long)
        first.scatter_reduce_(0, inverse, torch.arange(drawn.numel()), reduce="amin")
        first_sorted, order = first.sort()
        ids = uniq[order[:n_sampled]]
        tries = int(first_sorted[n_sampled - 1]) + 1
        return ids, self.log_expected_count(ids, tries, n_sampled), tries

    def log_expected_count(self, ids: torch.Tensor, tries: Optional[int],
                           n_sampled: Optional[int] = None) -> torch.Tensor:
        """log Q(id), Q the expected count of id among ``tries`` draws: (n,) float64.

        Q = 1 - (1 - P)^tries, computed stably; when no draw was repeated (tries equals
        ``n_sampled``) Q = P * tries, as the original's sampler takes it. ``tries=None``
        (every word is a candidate) gives log Q = 0.
        """
        if tries is None:
            return torch.zeros(ids.shape, dtype=torch.float64, device=ids.device)
        # looked up where the ids are: copying a GPU batch's targets to the host would wait
        # for the step's work every training step
        p = self._probs_on(ids.device)[ids]
        if tries == n_sampled:
            return torch.log(p * tries)
        return torch.log(-torch.expm1(tries * torch.log1p(-p)))

    def _probs_on(self, device: torch.device) -> torch.Tensor:
        """:attr:`probs` (V,) float64 on ``device``, copied there once."""
        if self.probs.device != device:
            cache = self.__dict__.setdefault("_probs_cache", {})
            if device not in cache:
                cache[device] = self.probs.to(device)
            return cache[device]
        return self.probs

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


@dataclass
class Candidates:
    """The shared negatives of one batch: ids (S,), log Q (S,) float32, and how they were drawn."""

    ids: torch.Tensor
    log_q: torch.Tensor
    tries: Optional[int]
    sampler: LogUniformSampler

    @classmethod
    def draw(cls, sampler: LogUniformSampler, n_sampled: int, device=None) -> "Candidates":
        ids, log_q, tries = sampler.sample(n_sampled)
        return cls(ids.to(device), log_q.to(device=device, dtype=torch.float32), tries, sampler)

    def log_q_of(self, targets: torch.Tensor) -> torch.Tensor:
        """log Q of the true ids (N,) under the same draws: (N,) float32."""
        log_q = self.sampler.log_expected_count(targets, self.tries, self.ids.numel())
        return log_q.to(device=targets.device, dtype=torch.float32)

    def nll(self, softmax: "SharedSoftmax", hidden_f: torch.Tensor, targets_f: torch.Tensor,
            hidden_b: torch.Tensor, targets_b: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Sampled losses (N_f,), (N_b,) of hidden (N_f, D) / (N_b, D) and their targets."""
        # both directions share the negatives: one larger product
        hidden, targets = torch.cat([hidden_f, hidden_b]), torch.cat([targets_f, targets_b])
        nll = softmax.sampled_nll(hidden, targets, self.ids, self.log_q, self.log_q_of(targets))
        return nll[:hidden_f.shape[0]], nll[hidden_f.shape[0]:]


class _SampledLoss(torch.autograd.Function):
    """-log softmax([neg_1 .. neg_S, true])[true] per row, with the hit entries of neg removed.

    The same value as cross-entropy over the concatenated logits, with a backward written out
    (softmax minus one-hot, times the incoming gradient). On the CPU the passes over the (N, S)
    logits dominate this loss's cost, so it makes few: a maximum, one exponential written
    once (the hits zeroed in it) and summed, and in the backward one scaling of that saved
    exponential. The logits are never concatenated with the true column, copied to mask the
    hits or turned into a dense log-softmax.
    """

    @staticmethod
    def forward(ctx, true_logit, neg, hit_rows, hit_cols):
        """true_logit (N,), neg (N, S), hits (K,) rows and columns of neg -> loss (N,) float32."""
        neg, true_logit = neg.float(), true_logit.float()
        # Any upper bound of the kept logits keeps exp from overflowing; a hit has the true
        # word's own logit, so including it does not push the others towards underflow.
        top = torch.maximum(neg.amax(dim=1), true_logit)                 # (N,)
        exp_neg = torch.sub(neg, top[:, None]).exp_()                   # (N, S)
        exp_neg[hit_rows, hit_cols] = 0.0                                # hits removed
        total = exp_neg.sum(dim=1) + torch.exp(true_logit - top)        # (N,)
        loss = top + torch.log(total) - true_logit
        ctx.save_for_backward(exp_neg, total, loss)
        return loss

    @staticmethod
    def backward(ctx, grad):
        exp_neg, total, loss = ctx.saved_tensors
        d_neg = exp_neg * (grad / total)[:, None]      # softmax of the negatives times grad
        d_true = grad * (torch.exp(-loss) - 1)          # p_true = exp(-loss)
        return d_true, d_neg, None, None


class SharedSoftmax(nn.Module):
    """Softmax weights W (V, D) and bias b (V,) used by both directions.

    Initialised as in the original: W normal with std 1/sqrt(D), b zero.
    """

    def __init__(self, n_vocab: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_vocab, dim) / math.sqrt(dim))
        self.bias = nn.Parameter(torch.zeros(n_vocab))

    @property
    def n_vocab(self) -> int:
        return self.weight.shape[0]

    def full_nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """hidden (N, D), targets (N,) -> negative log-likelihood per position (N,)."""
        logits = torch.addmm(self.bias, hidden, self.weight.t())
        return nn.functional.cross_entropy(logits.float(), targets, reduction="none")

    def sampled_nll(self, hidden: torch.Tensor, targets: torch.Tensor, sampled: torch.Tensor,
                    sampled_log_q: torch.Tensor, target_log_q: torch.Tensor) -> torch.Tensor:
        """The sampled-softmax loss per position (N,).

        Args:
            hidden: (N, D). targets: (N,) true ids.
            sampled: (S,) the shared negative ids; sampled_log_q: (S,) their log Q.
            target_log_q: (N,) log Q of each true id.
        """
        true_logit = (hidden * self.weight[targets]).sum(-1) + self.bias[targets] - target_log_q
        # log Q folded into the bias: addmm adds it without another pass over (N, S).
        neg = torch.addmm(self.bias[sampled] - sampled_log_q, hidden, self.weight[sampled].t())
        # Accidental hits: a negative that is this position's true word. The sampled ids are
        # distinct, so a row has at most one; find them by id instead of comparing N x S pairs.
        column = torch.full((self.n_vocab,), -1, dtype=torch.long, device=sampled.device)
        column[sampled] = torch.arange(sampled.numel(), device=sampled.device)
        hit = column[targets]
        rows = (hit >= 0).nonzero().squeeze(1)
        return _SampledLoss.apply(true_logit, neg, rows, hit[rows])


class SoftmaxLoss(Protocol):
    """What the language model asks of one batch's softmax loss (full or sampled)."""

    def nll(self, softmax: SharedSoftmax, hidden_f: torch.Tensor, targets_f: torch.Tensor,
            hidden_b: torch.Tensor, targets_b: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """hidden (N_f, D) / (N_b, D), targets (N_f,) / (N_b,) -> losses (N_f,), (N_b,)."""


class FullSoftmax:
    """The exact loss over every word: no draws, no state (see the module docstring)."""

    name = "full"
    #: the training log's key for exp(training loss): a true perplexity on training text
    train_ppl_key = "train_ppl"

    def __init__(self, n_vocab: int = 0, n_sampled: int = 0, seed: int = 0):
        pass

    def candidates(self, device=None) -> "FullSoftmax":
        return self

    def nll(self, softmax: SharedSoftmax, hidden_f: torch.Tensor, targets_f: torch.Tensor,
            hidden_b: torch.Tensor, targets_b: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Full losses (N_f,), (N_b,); one direction at a time, as (N, V) logits can be large."""
        return softmax.full_nll(hidden_f, targets_f), softmax.full_nll(hidden_b, targets_b)

    def state_dict(self) -> None:
        return None

    def load_state_dict(self, state) -> None:
        pass


class SampledSoftmax:
    """``n_sampled`` shared log-uniform negatives a batch, from its own seeded sampler."""

    name = "sampled"
    #: not a perplexity of the model (it normalises over a few thousand words): named apart
    train_ppl_key = "sampled_ppl"

    def __init__(self, n_vocab: int, n_sampled: int, seed: int = 0):
        self.sampler = LogUniformSampler(n_vocab, seed=seed)
        self.n_sampled = n_sampled

    def candidates(self, device=None) -> Candidates:
        return Candidates.draw(self.sampler, self.n_sampled, device)

    def state_dict(self) -> dict:
        return self.sampler.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.sampler.load_state_dict(state)


#: The softmax losses by name; a new one is a class with the methods above plus an entry here.
SOFTMAX_LOSSES: Dict[str, Type] = {"full": FullSoftmax, "sampled": SampledSoftmax}
#: The loss of a batch given no candidates (evaluation, ``negatives=None``).
FULL_SOFTMAX = FullSoftmax()


def softmax_name(n_vocab: int, n_sampled: int) -> str:
    """``sampled`` for 0 < n_sampled < n_vocab, else ``full`` (0 or >= V negatives are exact)."""
    return "sampled" if 0 < n_sampled < n_vocab else "full"


def softmax_loss(n_vocab: int, n_sampled: int, seed: int = 0):
    """The :data:`SOFTMAX_LOSSES` recipe the training settings ask for."""
    return SOFTMAX_LOSSES[softmax_name(n_vocab, n_sampled)](n_vocab, n_sampled, seed)
