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
from typing import Callable, Dict, Optional, Protocol, Tuple

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from ..host_copy import to_device
from .autocast import autocast_dtype
from .dense import onednn_mm, onednn_wanted


class LogUniformSampler:
    """Draws distinct ids from the log-uniform distribution over ``n_vocab`` ids.

    Uses its own ``torch.Generator`` (``state_dict``/``load_state_dict`` save it) so the
    negatives are reproducible and independent of dropout's random numbers.
    """

    def __init__(self, n_vocab: int, seed: int = 0):
        self.n_vocab = n_vocab
        self.generator = torch.Generator().manual_seed(seed)
        # The draws and their bookkeeping stay on the CPU, the generator's device, whatever
        # torch.set_default_device says (a CPU generator cannot draw onto "cuda"); each
        # batch's ids are copied to the model's device by Candidates.draw.
        ids = torch.arange(n_vocab, dtype=torch.float64, device="cpu")
        self.log_range = math.log(n_vocab + 1)
        self.probs = ((ids + 2).log() - (ids + 1).log()) / self.log_range  # (V,) float64

    def draw(self, n: int) -> torch.Tensor:
        """n iid ids (n,) int64 (with repeats), by inverting the CDF:
        k = floor(exp(u log(V + 1))) - 1."""
        u = torch.rand(n, generator=self.generator, dtype=torch.float64, device="cpu")
        return ((u * self.log_range).exp().floor().long() - 1).clamp_(0, self.n_vocab - 1)

    def sample(self, n_sampled: int) -> Tuple[torch.Tensor, torch.Tensor, Optional[int]]:
        """``n_sampled`` distinct ids (S,), log Q (S,) of each (Q: expected count), and the
        number of draws it took.

        Returns every id with log Q = 0 and tries None when ``n_sampled >= n_vocab``.
        """
        if n_sampled >= self.n_vocab:
            every = torch.arange(self.n_vocab, device="cpu")
            return every, torch.zeros(self.n_vocab, dtype=torch.float64, device="cpu"), None
        chunks, seen = [], torch.zeros(self.n_vocab, dtype=torch.bool, device="cpu")
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
        first = torch.full((uniq.numel(),), drawn.numel(), dtype=torch.long, device="cpu")
        first.scatter_reduce_(0, inverse, torch.arange(drawn.numel(), device="cpu"), reduce="amin")
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
        """``n_sampled`` distinct ids (S,) int64 from ``sampler`` and their log Q (S,) float32,
        on ``device``; every id, with log Q 0, when ``n_sampled`` >= V (then S = V)."""
        ids, log_q, tries = sampler.sample(n_sampled)
        if device is None:
            return cls(ids, log_q.to(torch.float32), tries, sampler)
        # (a plain copy to a GPU waited for the queue there, every step)
        return cls(to_device(ids, device), to_device(log_q.to(torch.float32), device), tries, sampler)

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


#: Bytes of float32 logits one chunk of rows of the sampled loss holds (16 MiB, so that a
#: chunk stays in the last-level cache while it is exponentiated and summed, and every
#: buffer stays under glibc's mmap threshold, 32 MiB, which would map it afresh each step).
SAMPLED_CHUNK_BYTES = 16 << 20

#: Bytes of float32 logits one chunk of rows of the full softmax holds in evaluation
#: (:meth:`SharedSoftmax.full_nll`): 64 MiB, 335 positions of a 50,000-word vocabulary.
FULL_CHUNK_BYTES = 64 << 20


class _SampledLoss(torch.autograd.Function):
    """-log softmax([neg_1 .. neg_S, true])[true] per row, with the hit entries of neg removed,
    where neg = hidden weight^T + bias.

    The same value as cross-entropy over the concatenated logits, computed a chunk of rows at
    a time, with the backward written out. On the CPU the (N, S) logits cost more in memory
    passes than in arithmetic, and as one array above 32 MiB every step pays page faults for
    it (see :mod:`elmo.allocator`). So a chunk's logits are written once by its matrix
    multiply into a buffer that stays in cache, then exponentiated in place (the hits
    zeroed) and summed. Only that exponential is kept, one chunk per tensor; the backward
    runs the two products of the gradient on it, chunk by chunk, with each row's factor
    applied to the products' (c, D) sides. The logits are never concatenated with the true column, masked by copying or
    turned into a dense log-softmax.
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, true_logit, hit, chunk_rows: int):
        """hidden (N, D), weight (S, D), bias (S,) (log Q folded in), true_logit (N,), hit (N,)
        int64: each row's column of neg that is its true word, or -1; -> loss (N,) float32.

        Matrix products run in ``hidden``'s dtype (the caller casts for autocast); the
        exponentials and sums in float32. No value is read back to the host (on a GPU each
        read waits for the queued work): the hits are removed row by row, where there is one.
        """
        n = hidden.shape[0]
        true_logit = true_logit.float()
        bounds = list(range(0, n, chunk_rows)) + [n]
        exps, totals, losses = [], [], []
        onednn = onednn_wanted(hidden)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            neg = (onednn_mm(hidden[lo:hi], weight, bias) if onednn
                   else torch.addmm(bias, hidden[lo:hi], weight.t())).float()  # (c, S)
            true_c = true_logit[lo:hi]
            # Any upper bound of the kept logits keeps exp from overflowing; a hit has the
            # true word's own logit, so including it does not push the others to underflow.
            top = torch.maximum(neg.amax(dim=1), true_c)                    # (c,)
            exp_neg = neg.sub_(top[:, None]).exp_()
            if exp_neg.shape[1]:   # hits removed: a row's hit column set to 0, others written back
                hit_c = hit[lo:hi, None]                                    # (c, 1)
                at = hit_c.clamp(min=0)
                exp_neg.scatter_(1, at, torch.where(hit_c >= 0, 0.0, exp_neg.gather(1, at)))
            total = exp_neg.sum(dim=1) + torch.exp(true_c - top)
            exps.append(exp_neg)
            totals.append(total)
            losses.append(top + torch.log(total) - true_c)
        loss = torch.cat(losses) if losses else true_logit.new_zeros(0)
        ctx.bounds = bounds
        ctx.save_for_backward(hidden, weight, loss, torch.cat(totals) if totals else loss, *exps)
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        """grad (N,) float32 -> gradients of hidden (N, D) and weight (S, D) in their dtypes,
        bias (S,) in weight's, true_logit (N,) float32; None for the hits and chunk_rows."""
        hidden, weight, loss, total, *exps = ctx.saved_tensors
        # d neg = exp_neg * scale per row: the softmax of the negatives times grad. A row's
        # factor commutes with both products, so in float32 it is applied to their (c, D)
        # sides instead of the (c, S) exponential: one pass over the chunk fewer.
        scale = grad / total                                                # (N,) float32
        d_hidden = torch.empty_like(hidden)
        d_weight = torch.zeros_like(weight)
        d_bias = torch.zeros(weight.shape[0], device=weight.device)
        buffer = None
        for (lo, hi), exp_neg in zip(zip(ctx.bounds[:-1], ctx.bounds[1:]), exps):
            row_scale = scale[lo:hi, None]                                  # (c, 1)
            d_bias.addmv_(exp_neg.t(), scale[lo:hi])
            if hidden.dtype == exp_neg.dtype:
                torch.mm(exp_neg, weight, out=d_hidden[lo:hi]).mul_(row_scale)
                d_weight.addmm_(exp_neg.t(), hidden[lo:hi] * row_scale)
                continue
            # lower-precision products (autocast): scale while casting, as one pass anyway
            if buffer is None or buffer.shape != exp_neg.shape:
                buffer = torch.empty(exp_neg.shape, dtype=hidden.dtype, device=exp_neg.device)
            d_neg = torch.mul(exp_neg, row_scale, out=buffer)                # (c, S)
            torch.mm(d_neg, weight, out=d_hidden[lo:hi])
            d_weight.addmm_(d_neg.t(), hidden[lo:hi])
        d_true = grad * (torch.exp(-loss) - 1)          # p_true = exp(-loss)
        return d_hidden, d_weight, d_bias.to(weight.dtype), d_true, None, None


class SharedSoftmax(nn.Module):
    """Softmax weights W (V, D) and bias b (V,) used by both directions.

    Initialised as in the original: W normal with std 1/sqrt(D), b zero.
    """

    def __init__(self, n_vocab: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_vocab, dim) / math.sqrt(dim))
        self.bias = nn.Parameter(torch.zeros(n_vocab))

    @classmethod
    def from_tensors(cls, weight: torch.Tensor, bias: torch.Tensor) -> "SharedSoftmax":
        """The softmax holding ``weight`` (V, D) and ``bias`` (V,) (loaded ones, which it then
        owns; in the default dtype, as a new one's), without drawing random ones first.

        (Not built on the meta device: its first use in a process imported PyTorch's reference
        operators, seconds where the random draws it saved took a tenth of one.)"""
        if weight.dim() != 2 or tuple(bias.shape) != (weight.shape[0],):
            raise ValueError(f"a softmax's weight is (V, D) and its bias (V,), got {tuple(weight.shape)} "
                             f"and {tuple(bias.shape)}")
        softmax = cls(0, weight.shape[1])   # (empty: nothing drawn)
        dtype = torch.get_default_dtype()
        softmax.weight, softmax.bias = nn.Parameter(weight.to(dtype)), nn.Parameter(bias.to(dtype))
        return softmax

    @property
    def n_vocab(self) -> int:
        return self.weight.shape[0]

    def full_nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """hidden (N, D), targets (N,) int64 -> negative log-likelihood per position (N,)
        float32 (the (N, V) logits are taken in float32).

        Without gradients (evaluation) the logits are taken :data:`FULL_CHUNK_BYTES` at a time:
        a stateless perplexity reads each sentence whole, so a text of long lines (a document a
        line) asked for all its batch's logits at once, 200 KB a word for a vocabulary of 50,000,
        and failed in PyTorch's allocator. Training keeps one product (its backward needs them
        all, and its sums stay as they were, bit for bit)."""
        rows = max(1, FULL_CHUNK_BYTES // (4 * max(self.n_vocab, 1)))
        training = torch.is_grad_enabled() and (hidden.requires_grad or self.weight.requires_grad)
        if training or hidden.shape[0] <= rows:
            return self._full_nll_rows(hidden, targets)
        return torch.cat([self._full_nll_rows(hidden[i:i + rows], targets[i:i + rows])
                          for i in range(0, hidden.shape[0], rows)])

    def _full_nll_rows(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """:meth:`full_nll` of these rows in one product."""
        logits = torch.addmm(self.bias, hidden, self.weight.t())
        return nn.functional.cross_entropy(logits.float(), targets, reduction="none")

    def sampled_nll(self, hidden: torch.Tensor, targets: torch.Tensor, sampled: torch.Tensor,
                    sampled_log_q: torch.Tensor, target_log_q: torch.Tensor,
                    chunk_rows: Optional[int] = None) -> torch.Tensor:
        """The sampled-softmax loss per position (N,) float32.

        Args:
            hidden: (N, D). targets: (N,) true ids.
            sampled: (S,) the shared negative ids; sampled_log_q: (S,) their log Q.
            target_log_q: (N,) log Q of each true id.
            chunk_rows: rows of logits computed at a time (default: about
                :data:`SAMPLED_CHUNK_BYTES` of them); the result does not depend on it.
        """
        true_logit = (hidden * self.weight[targets]).sum(-1) + self.bias[targets] - target_log_q
        # Accidental hits: a negative that is this position's true word. The sampled ids are
        # distinct, so a row has at most one; find them by id instead of comparing N x S pairs.
        column = torch.full((self.n_vocab,), -1, dtype=torch.long, device=sampled.device)
        column[sampled] = torch.arange(sampled.numel(), device=sampled.device)
        hit = column[targets]   # (N,) the true word's column among the negatives, or -1
        if chunk_rows is None:
            chunk_rows = max(1, SAMPLED_CHUNK_BYTES // (4 * max(sampled.numel(), 1)))
        # log Q folded into the bias, which the product adds without another pass over (N, S)
        weight, bias = self.weight[sampled], self.bias[sampled] - sampled_log_q
        dtype = autocast_dtype(hidden.device.type)
        if dtype is None:
            return _SampledLoss.apply(hidden, weight, bias, true_logit, hit, chunk_rows)
        with torch.autocast(hidden.device.type, enabled=False):  # the products in autocast's dtype
            return _SampledLoss.apply(hidden.to(dtype), weight.to(dtype), bias.to(dtype), true_logit,
                                      hit, chunk_rows)


class SoftmaxLoss(Protocol):
    """What the language model asks of one batch's softmax loss (full or sampled)."""

    def nll(self, softmax: SharedSoftmax, hidden_f: torch.Tensor, targets_f: torch.Tensor,
            hidden_b: torch.Tensor, targets_b: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """hidden (N_f, D) / (N_b, D), targets (N_f,) / (N_b,) -> losses (N_f,), (N_b,)."""


class SoftmaxRecipe(Protocol):
    """What a training run asks of its softmax loss (a :data:`SOFTMAX_LOSSES` entry): each
    batch's :class:`SoftmaxLoss`, and the sampler's state for a checkpoint. (Typed, so that
    the batch's loss passed to the language model is checked, where Any let anything through.)"""

    name: str
    train_ppl_key: str

    def candidates(self, device=None) -> SoftmaxLoss:
        """One batch's loss, on ``device``."""

    def state_dict(self) -> Optional[dict]:
        """What a checkpoint keeps (None: nothing to keep)."""

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` gave."""


class FullSoftmax:
    """The exact loss over every word: no draws, no state (see the module docstring)."""

    name = "full"
    #: the training log's key for exp(training loss): a true perplexity on training text
    train_ppl_key = "train_ppl"

    def __init__(self, n_vocab: int = 0, n_sampled: int = 0, seed: int = 0):
        pass

    def candidates(self, device=None) -> "FullSoftmax":
        """Itself: a full softmax draws nothing."""
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
        """One batch's negatives: ids (S,) int64, log Q (S,) float32, on ``device``."""
        return Candidates.draw(self.sampler, self.n_sampled, device)

    def state_dict(self) -> dict:
        return self.sampler.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.sampler.load_state_dict(state)


#: The softmax losses by name; a new one is a class with the methods above plus an entry here.
SOFTMAX_LOSSES: Dict[str, Callable[[int, int, int], SoftmaxRecipe]] = {
    "full": FullSoftmax, "sampled": SampledSoftmax}
#: The loss of a batch given no candidates (evaluation, ``negatives=None``).
FULL_SOFTMAX = FullSoftmax()


def softmax_name(n_vocab: int, n_sampled: int) -> str:
    """``sampled`` for 0 < n_sampled < n_vocab, else ``full`` (0 or >= V negatives are exact)."""
    return "sampled" if 0 < n_sampled < n_vocab else "full"


def softmax_loss(n_vocab: int, n_sampled: int, seed: int = 0) -> SoftmaxRecipe:
    """The :data:`SOFTMAX_LOSSES` recipe the training settings ask for."""
    return SOFTMAX_LOSSES[softmax_name(n_vocab, n_sampled)](n_vocab, n_sampled, seed)
