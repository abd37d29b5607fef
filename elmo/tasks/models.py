"""The task models: a sequence tagger, a sentence classifier, an ESIM-style pair classifier,
their one-output regression variants for graded tasks, and a BiDAF-style span extractor for
extractive question answering.

Each takes :class:`~elmo.tasks.batching.Batch` objects and has

* ``loss(batch)``: the training loss (mean over examples, plus the ELMo penalty);
* ``predict(batch)``: class ids (B,) as a list, one list of tag ids per sentence,
  (regression) one float per example in the targets' units, or (span_qa) one answer span
  ``{"text", "start", "end"}`` per question (``predict_batch``); a model
  loaded with ``TaskModel.load(folder)`` also takes texts and returns labels (see
  :mod:`.saved`).

Where ELMo goes (``elmo.positions``), following the paper:

* ``input``: [word features; ELMo_input] feeds the task BiLSTM;
* ``output``: [BiLSTM output; ELMo_output] feeds what comes after (the tag scorer, the
  pooling, or ESIM's attention).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Dict, List, Optional

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..modules.scalar_mix import no_penalty
from .batching import Batch, TextBatch
from .crf import CRF
from .features import ElmoFeatures, WordFeatures

if TYPE_CHECKING:
    from .saved import SavedInfo


class BiLSTM(nn.Module):
    """A bidirectional LSTM over padded rows: (B, T, D), mask (B, T) -> (B, T, 2H), zero at
    padding. Rows of length 0 give zeros."""

    def __init__(self, input_dim: int, hidden: int, num_layers: int = 1):
        super().__init__()
        self.lstm = nn.LSTM(input_dim, hidden, num_layers=num_layers, batch_first=True,
                            bidirectional=True)
        self.output_dim = 2 * hidden

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, T, D) float, mask (B, T) bool (a prefix of each row) -> (B, T, 2H), x's
        dtype: forward then backward outputs, zero past each row's length."""
        lengths = mask.long().sum(1)
        out = x.new_zeros(x.shape[0], x.shape[1], self.output_dim)
        rows = (lengths > 0).nonzero().squeeze(1)
        if len(rows) == 0:
            return out
        packed = pack_padded_sequence(x[rows], lengths[rows].cpu(), batch_first=True,
                                      enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])
        out[rows] = h
        return out

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward


class Encoder(nn.Module):
    """[dropout(word features); ELMo_input] -> BiLSTM [; ELMo_output]: the part all three
    models share. (B, T) words, (B, T, C) chars -> (B, T, output_dim).

    The ELMo mixes come with their own dropout (:class:`ElmoFeatures`), so the input dropout
    here acts on the static features only and ELMo_input is dropped exactly once."""

    def __init__(self, words: WordFeatures, hidden: int, dropout: float,
                 elmo: Optional[ElmoFeatures] = None, num_layers: int = 1):
        super().__init__()
        self.words = words
        self.elmo = elmo
        positions = elmo.positions if elmo is not None else []
        self.elmo_in = "input" in positions
        self.elmo_out = "output" in positions
        elmo_dim = elmo.output_dim if elmo is not None else 0    # (positions are empty without elmo)
        in_dim = words.output_dim + (elmo_dim if self.elmo_in else 0)
        self.dropout = nn.Dropout(dropout)
        self.lstm = BiLSTM(in_dim, hidden, num_layers)
        self.output_dim = self.lstm.output_dim + (elmo_dim if self.elmo_out else 0)

    def forward(self, text: TextBatch) -> torch.Tensor:
        """``text``'s words (B, T), chars (B, T, C) and mask (B, T) -> (B, T, output_dim):
        [BiLSTM (2H); ELMo_output (D) where placed there], zero at padding."""
        x = self.dropout(self.words(text.words, text.chars, text.extra))
        mixes: Dict[str, torch.Tensor] = {}
        if self.elmo is not None:
            mixes = self.elmo(text.chars, text.mask, text.layers)
        if self.elmo_in:
            x = torch.cat([x, mixes["input"]], dim=-1)
        h = self.lstm(x, text.mask)
        if self.elmo_out:
            h = torch.cat([h, mixes["output"]], dim=-1)
        return h

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward

    def penalty(self, lam: float) -> torch.Tensor:
        """The ELMo mixes' lam * ||s||^2 summed, a 0-dim tensor (zero without ELMo)."""
        return self.elmo.penalty(lam) if self.elmo is not None else no_penalty(self)


class TaskModel(nn.Module):
    """What the training loop needs from every task model."""

    encoder: Encoder
    lam: float = 0.0
    #: what a model from :meth:`load` was saved with (set by :func:`.saved.load`; absent on a
    #: model being trained, hence no default here)
    saved: SavedInfo

    def loss(self, batch: Batch) -> torch.Tensor:
        """The training loss of ``batch``, a 0-dim float tensor: mean over its examples, plus
        the ELMo penalty."""
        raise NotImplementedError

    def predict_batch(self, batch: Batch) -> list:
        """One prediction per example of ``batch`` (B items; see the module doc)."""
        raise NotImplementedError

    def predict(self, batch_or_texts, batch_size: int = 64, progress: bool = False) -> list:
        """Ids for a :class:`Batch`; for texts (a model from :meth:`load`), their tags or
        labels: one tag list per text (tagging) or one label per text (classification; a
        pair model takes (text_a, text_b) pairs). A text is a string (split as the training
        data was) or a list of tokens."""
        if isinstance(batch_or_texts, Batch):
            return self.predict_batch(batch_or_texts)
        from .saved import predict
        return predict(self, batch_or_texts, batch_size, progress)

    @classmethod
    def load(cls, folder, bilm=None, device=None, glove=None) -> "TaskModel":
        """A task model saved by ``elmo experiment --save-models`` (see :mod:`.saved`);
        ``bilm`` points at its biLM if that has moved, ``glove`` at its GloVe file
        (False: words outside its vocabulary stay ``<unk>``)."""
        from .saved import load
        return load(folder, bilm=bilm, device=device, glove=glove)

    def mix_weights(self) -> Dict[str, Dict[str, object]]:
        """position -> {"weights", "gamma"} of the ELMo mixes ({} without ELMo)."""
        return self.encoder.elmo.mix_weights() if self.encoder.elmo is not None else {}


class Tagger(TaskModel):
    """BiLSTM tagger: encoder -> dropout -> linear tag scores (B, T, K), with a CRF or a
    per-token softmax.

    Args:
        encoder: the shared :class:`Encoder`.
        num_tags: K.
        crf: decode with a linear-chain CRF.
        dropout: before the tag scorer.
        lam: weight of the ELMo penalty lambda * ||s||^2.
    """

    def __init__(self, encoder: Encoder, num_tags: int, crf: bool = False, dropout: float = 0.5,
                 lam: float = 0.0):
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.scores = nn.Linear(encoder.output_dim, num_tags)
        self.crf = CRF(num_tags) if crf else None
        self.lam = lam

    def emissions(self, batch: Batch) -> torch.Tensor:
        """Tag scores (B, T, K) of the first text, float; padded positions hold scores too
        (the mask leaves them out)."""
        return self.scores(self.dropout(self.encoder(batch.texts[0])))

    def loss(self, batch: Batch) -> torch.Tensor:
        """0-dim: the CRF's negative log-likelihood, mean per sentence, or the cross-entropy,
        mean per real token, against ``batch.labels`` (B, T) long; plus the ELMo penalty."""
        mask = batch.texts[0].mask
        e = self.emissions(batch)
        if self.crf is not None:
            loss = self.crf.neg_log_likelihood(e, batch.labels, mask) / max(len(mask), 1)
        else:
            loss = nn.functional.cross_entropy(e[mask], batch.labels[mask])
        return loss + self.encoder.penalty(self.lam)

    @torch.no_grad()
    def predict_batch(self, batch: Batch) -> List[List[int]]:
        """B lists of tag ids, each as long as its sentence (Viterbi with a CRF, else the
        arg-max per token)."""
        mask = batch.texts[0].mask
        e = self.emissions(batch)
        if self.crf is not None:
            return self.crf.decode(e, mask)
        # the whole batch crosses to the host at once (a GPU syncs on each read of a value)
        best, lengths = e.argmax(-1).tolist(), mask.sum(1).tolist()
        return [row[:n] for row, n in zip(best, lengths)]


class Pooling(nn.Module):
    """(B, T, D), mask -> (B, D): ``max`` over positions, or ``attention`` (a learned score
    per position, softmax over the unmasked ones, weighted sum)."""

    def __init__(self, dim: int, kind: str = "max"):
        super().__init__()
        if kind not in ("max", "attention"):
            raise ValueError(f"pooling must be 'max' or 'attention', got {kind!r}")
        self.kind = kind
        if kind == "attention":
            self.score = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, 1))

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """h (B, T, D), mask (B, T) bool -> (B, D) in h's dtype. A row without tokens gets
        zeros (``attention``: the mean of its padding, zero as the encoder gives it)."""
        empty = ~mask.any(1, keepdim=True)                       # rows with no tokens
        if h.shape[1] == 0:                                      # a batch of empty texts only
            return h.new_zeros(h.shape[0], h.shape[2])
        if self.kind == "max":
            pooled = h.masked_fill(~mask.unsqueeze(-1), float("-inf")).max(1).values
            return pooled.masked_fill(empty, 0.0)
        scores = self.score(h).squeeze(-1).masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores.masked_fill(empty, 0.0), dim=1)
        return (weights.unsqueeze(-1) * h).sum(1)

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward


class Classifier(TaskModel):
    """One class per example from ``logits(batch)`` (B, num_classes): cross-entropy loss
    (labels of -1 are ignored) plus the ELMo penalty, and the arg-max as prediction."""

    def logits(self, batch: Batch) -> torch.Tensor:
        """Class scores (B, num_classes), float (unnormalised)."""
        raise NotImplementedError

    def loss(self, batch: Batch) -> torch.Tensor:
        """0-dim: cross-entropy of :meth:`logits` against ``batch.labels`` (B,) long (-1
        ignored), plus the ELMo penalty."""
        return (nn.functional.cross_entropy(self.logits(batch), batch.labels, ignore_index=-1)
                + self.encoder.penalty(self.lam))

    @torch.no_grad()
    def predict_batch(self, batch: Batch) -> List[int]:
        """B class ids, the arg-max of :meth:`logits`."""
        return self.logits(batch).argmax(-1).tolist()


class SentenceClassifier(Classifier):
    """encoder -> pooling -> dropout -> Linear-ReLU -> dropout -> Linear class scores.

    Args:
        encoder: the shared :class:`Encoder`.
        num_classes: number of classes.
        pooling: ``max`` or ``attention``.
        hidden: size of the hidden layer of the classifier.
    """

    def __init__(self, encoder: Encoder, num_classes: int, pooling: str = "max",
                 hidden: int = 100, dropout: float = 0.5, lam: float = 0.0):
        super().__init__()
        self.encoder = encoder
        self.pool = Pooling(encoder.output_dim, pooling)
        self.classify = nn.Sequential(nn.Dropout(dropout), nn.Linear(encoder.output_dim, hidden),
                                      nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, num_classes))
        self.lam = lam

    def logits(self, batch: Batch) -> torch.Tensor:
        """(B, num_classes) from the first text's encoding (B, T, d), pooled to (B, d)."""
        text = batch.texts[0]
        return self.classify(self.pool(self.encoder(text), text.mask))


class PairClassifier(Classifier):
    """ESIM (Chen et al. 2017) for a pair of texts a, b:

    1. encode both with the shared :class:`Encoder` (ELMo at its input and/or output);
    2. soft alignment: e = a b^T, a~ = softmax_b(e) b, b~ = softmax_a(e)^T a;
    3. enhance: m = [x; x~; x - x~; x * x~], project with Linear-ReLU to ``hidden``;
    4. compose with a second BiLSTM, pool by average and max over each text;
    5. [avg_a; max_a; avg_b; max_b] -> dropout -> Linear-tanh -> dropout -> Linear scores.
    """

    def __init__(self, encoder: Encoder, num_classes: int, hidden: int = 100,
                 dropout: float = 0.5, lam: float = 0.0):
        super().__init__()
        self.encoder = encoder
        d = encoder.output_dim
        self.project = nn.Sequential(nn.Linear(4 * d, hidden), nn.ReLU())
        self.compose = BiLSTM(hidden, hidden)
        self.dropout = nn.Dropout(dropout)
        self.classify = nn.Sequential(nn.Dropout(dropout), nn.Linear(8 * hidden, hidden), nn.Tanh(),
                                      nn.Dropout(dropout), nn.Linear(hidden, num_classes))
        self.lam = lam

    @staticmethod
    def _pool(v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """v (B, T, h), mask (B, T) bool -> [average; max] over the real positions (B, 2h);
        zeros for a row without tokens."""
        if v.shape[1] == 0:                           # a batch whose texts are all empty
            return v.new_zeros(v.shape[0], 2 * v.shape[2])
        keep = mask.unsqueeze(-1).to(v.dtype)
        avg = (v * keep).sum(1) / keep.sum(1).clamp(min=1)
        mx = v.masked_fill(~mask.unsqueeze(-1), float("-inf")).max(1).values
        return torch.cat([avg, mx.masked_fill(~mask.any(1, keepdim=True), 0.0)], dim=-1)

    def logits(self, batch: Batch) -> torch.Tensor:
        """(B, num_classes) from texts a (B, Ta) and b (B, Tb) (steps 1 to 5 above)."""
        ta, tb = batch.texts
        a, b = self.encoder(ta), self.encoder(tb)                    # (B, Ta, d), (B, Tb, d)
        e = torch.bmm(a, b.transpose(1, 2))                          # (B, Ta, Tb)
        neg = torch.finfo(e.dtype).min
        a_tilde = torch.bmm(torch.softmax(e.masked_fill(~tb.mask.unsqueeze(1), neg), dim=2), b)
        b_tilde = torch.bmm(torch.softmax(e.masked_fill(~ta.mask.unsqueeze(2), neg), dim=1)
                            .transpose(1, 2), a)
        ma = self.project(torch.cat([a, a_tilde, a - a_tilde, a * a_tilde], dim=-1))
        mb = self.project(torch.cat([b, b_tilde, b - b_tilde, b * b_tilde], dim=-1))
        va = self.compose(self.dropout(ma), ta.mask)
        vb = self.compose(self.dropout(mb), tb.mask)
        return self.classify(torch.cat([self._pool(va, ta.mask), self._pool(vb, tb.mask)], dim=-1))


class Regressor(Classifier):
    """A graded task's model: a classifier's network with one output, the standardised
    target. The loss is the mean squared error against (target - mean) / std, with the mean
    and std of the training targets (buffers: saved and loaded with the weights), and a
    prediction is output * std + mean, in the targets' units. Subclasses list this class
    first, before the classifier whose network they reuse.

    The mean and std are float64, and so is the standardising and unscaling: a target far
    from 0 for its spread (3e6 + N(0, 1): float32's spacing at 3e6 is 0.25) kept only the
    float32 steps of its offset, in training targets and in predictions. Only the
    standardised values, of order 1, are float32. A dtype cast of the model
    (``model.half()``, ``.to(torch.float32)``) leaves the two buffers float64 (float16 made a
    mean of 3e6 inf); a device move moves them."""

    target_mean: torch.Tensor
    target_std: torch.Tensor
    #: the float64 buffers a dtype cast must not round
    SCALE_BUFFERS = ("target_mean", "target_std")

    def _scale_buffers(self) -> None:
        """Register the 0-dim float64 buffers ``target_mean`` (0) and ``target_std`` (1)."""
        self.register_buffer("target_mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("target_std", torch.ones((), dtype=torch.float64))

    def _apply(self, fn, recurse=True):
        kept = {name: self._buffers.get(name) for name in self.SCALE_BUFFERS}
        out = super()._apply(fn, recurse)
        for name, value in kept.items():      # on fn's device, still the float64 value
            moved = self._buffers[name]
            if value is not None and moved is not None:
                self._buffers[name] = value.to(moved.device)
        return out

    def set_target_scale(self, mean: float, std: float) -> None:
        """Standardise targets with the training split's ``mean`` and ``std`` (finite, std > 0).

        A NaN or infinite scale made every standardised target and prediction NaN, found
        only as a NaN loss in training; task files refuse such targets line by line."""
        if not math.isfinite(mean):
            raise ValueError(f"the targets' mean must be a finite number, got {mean}")
        if not (math.isfinite(std) and std > 0):
            raise ValueError(f"the targets' standard deviation must be a finite positive number, got {std}")
        self.target_mean.fill_(mean)
        self.target_std.fill_(std)

    def standardised(self, labels: torch.Tensor) -> torch.Tensor:
        """(B,) targets -> (B,) float64 (target - mean) / std, computed in float64."""
        return (labels.to(torch.float64) - self.target_mean) / self.target_std

    def loss(self, batch: Batch) -> torch.Tensor:
        """0-dim: mean squared error of the (B,) outputs against the standardised
        ``batch.labels`` (B,) float64, plus the ELMo penalty."""
        out = self.logits(batch).squeeze(-1)                                  # (B,)
        target = self.standardised(batch.labels).to(out.dtype)               # (B,)
        return nn.functional.mse_loss(out, target) + self.encoder.penalty(self.lam)

    @torch.no_grad()
    def predict_batch(self, batch: Batch) -> list:
        """(B,) float predictions in the targets' units: the output unscaled in float64 (what
        ``elmo predict`` writes is this float64 value, as evaluation scored it)."""
        out = self.logits(batch).squeeze(-1).to(torch.float64) * self.target_std + self.target_mean
        return out.cpu().tolist()


class SentenceRegressor(Regressor, SentenceClassifier):
    """:class:`SentenceClassifier`'s network with one output (see :class:`Regressor`)."""

    def __init__(self, encoder: Encoder, pooling: str = "max", hidden: int = 100,
                 dropout: float = 0.5, lam: float = 0.0):
        SentenceClassifier.__init__(self, encoder, 1, pooling=pooling, hidden=hidden,
                                    dropout=dropout, lam=lam)
        self._scale_buffers()


class PairRegressor(Regressor, PairClassifier):
    """:class:`PairClassifier`'s ESIM network with one output (see :class:`Regressor`)."""

    def __init__(self, encoder: Encoder, hidden: int = 100, dropout: float = 0.5,
                 lam: float = 0.0):
        PairClassifier.__init__(self, encoder, 1, hidden=hidden, dropout=dropout, lam=lam)
        self._scale_buffers()


#: The longest answer, in tokens, a span_qa model predicts (SQuAD's answers are short: the
#: usual limit of BiDAF-style decoders).
MAX_ANSWER_TOKENS = 30


def best_spans(start: torch.Tensor, end: torch.Tensor, mask: torch.Tensor,
               max_len: int = MAX_ANSWER_TOKENS):
    """The best answer span of each row: the [i, j + 1) with i <= j < i + ``max_len``, both
    real positions (``mask``), maximising ``start[i] + end[j]`` (log-scores).

    Args:
        start, end: (B, T) scores of a span starting / ending (inclusive) at each position.
        mask: (B, T) bool, the real context positions (a prefix of each row).
        max_len: the most tokens a span may have (>= 1).

    Returns (spans (B, 2) long, [start, end) with end exclusive, (0, 0) for a row without a
    real position; scores (B,), -inf for such a row). O(B * T * max_len): one shift of the end
    scores per span length, never the (T, T) table of every pair.
    """
    if max_len < 1:
        raise ValueError(f"the longest answer must be at least 1 token, got {max_len}")
    b, t = start.shape
    neg = torch.tensor(float("-inf"), dtype=start.dtype, device=start.device)
    s = start.masked_fill(~mask, neg)
    e = end.masked_fill(~mask, neg)
    best = s.new_full((b,), float("-inf"))
    best_i = torch.zeros(b, dtype=torch.long, device=start.device)
    best_k = torch.zeros(b, dtype=torch.long, device=start.device)
    for k in range(min(max_len, t)):          # k = j - i, the span's length minus one
        total = s[:, :t - k] + e[:, k:]        # (B, T - k): spans [i, i + k]
        value, where = total.max(1)
        better = value > best
        best = torch.where(better, value, best)
        best_i = torch.where(better, where, best_i)
        best_k = torch.where(better, torch.full_like(best_k, k), best_k)
    found = torch.isfinite(best)
    spans = torch.stack([best_i, best_i + best_k + 1], 1)
    return spans.masked_fill(~found.unsqueeze(1), 0), best


class SpanExtractor(TaskModel):
    """A BiDAF-lite reader for extractive question answering (``span_qa``): question q and
    context c, each (B, T) tokens.

    1. encode both with the shared :class:`Encoder` (ELMo at its input and/or output):
       q (B, Tq, d), c (B, Tc, d);
    2. similarity S_ij = w . [c_i; q_j; c_i * q_j] (B, Tc, Tq);
    3. context-to-query attention a_i = softmax_j(S_ij) q; query-to-context attention
       b = softmax_i(max_j S_ij) c, the same vector for every position;
    4. G = [c; a; c * a; c * b] (B, Tc, 4d) -> dropout -> modelling BiLSTM -> M (B, Tc, 2h);
    5. start scores from [G; M], end scores from [G; M2] with M2 a second BiLSTM over M
       (the end conditioned on what the start saw, as BiDAF does).

    The loss is the negative log-likelihood of the first gold answer inside the context read
    (its start and its last token, softmax over real context positions), the two terms summed
    and averaged over the examples that have such an answer, plus the ELMo penalty. A
    prediction is the span decoded by :func:`best_spans` (at most ``max_answer_tokens``), with
    its text: the context's tokens joined by spaces.
    """

    def __init__(self, encoder: Encoder, hidden: int = 100, dropout: float = 0.5,
                 lam: float = 0.0, max_answer_tokens: int = MAX_ANSWER_TOKENS):
        super().__init__()
        self.encoder = encoder
        d = encoder.output_dim
        self.similarity = nn.Linear(3 * d, 1)
        self.dropout = nn.Dropout(dropout)
        self.model_lstm = BiLSTM(4 * d, hidden)
        self.end_lstm = BiLSTM(2 * hidden, hidden)
        self.start_score = nn.Linear(4 * d + 2 * hidden, 1)
        self.end_score = nn.Linear(4 * d + 2 * hidden, 1)
        self.lam = lam
        self.max_answer_tokens = max_answer_tokens

    def _similarity(self, c: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """(B, Tc, d), (B, Tq, d) -> S (B, Tc, Tq), w split in three so that the
        (B, Tc, Tq, 3d) concatenation is never built."""
        d = c.shape[-1]
        w = self.similarity.weight.squeeze(0)
        w_c, w_q, w_cq = w[:d], w[d:2 * d], w[2 * d:]
        return ((c @ w_c).unsqueeze(2) + (q @ w_q).unsqueeze(1)
                + torch.bmm(c * w_cq, q.transpose(1, 2)) + self.similarity.bias)

    def scores(self, batch: Batch):
        """(B, Tc) log-probabilities of each context position starting and ending the answer,
        -inf at padding."""
        tq, tc = batch.texts
        q, c = self.encoder(tq), self.encoder(tc)
        neg = torch.finfo(c.dtype).min
        sim = self._similarity(c, q).masked_fill(~tq.mask.unsqueeze(1), neg)   # (B, Tc, Tq)
        a = torch.bmm(torch.softmax(sim, dim=2), q)
        if sim.shape[2]:
            top = sim.max(2).values                                        # (B, Tc)
        else:                                    # (every question of the batch empty)
            top = sim.new_zeros(sim.shape[:2])
        weights = torch.softmax(top.masked_fill(~tc.mask, neg), dim=1)     # (B, Tc)
        b = torch.bmm(weights.unsqueeze(1), c)                             # (B, 1, d)
        g = torch.cat([c, a, c * a, c * b.expand_as(c)], dim=-1)           # (B, Tc, 4d)
        m = self.model_lstm(self.dropout(g), tc.mask)
        m2 = self.end_lstm(self.dropout(m), tc.mask)
        start = self.start_score(self.dropout(torch.cat([g, m], -1))).squeeze(-1)
        end = self.end_score(self.dropout(torch.cat([g, m2], -1))).squeeze(-1)
        # (a row with no real position keeps finite scores: an all -inf row's log-softmax is
        # NaN, and its backward NaN even where the loss leaves the row out)
        pad = ~tc.mask & tc.mask.any(1, keepdim=True)
        return (torch.log_softmax(start.masked_fill(pad, float("-inf")), dim=1),
                torch.log_softmax(end.masked_fill(pad, float("-inf")), dim=1))

    def loss(self, batch: Batch) -> torch.Tensor:
        """NLL of the gold start and last token; ``batch.labels`` (B, 2) [start, end), -1 for
        an example without an answer in its context (left out)."""
        start, end = self.scores(batch)
        has = batch.labels[:, 0] >= 0
        if not bool(has.any()):       # nothing to learn from: a zero that still has a graph
            return 0.0 * self.start_score.weight.sum() + self.encoder.penalty(self.lam)
        rows = has.nonzero().squeeze(1)
        gold = batch.labels[rows]
        nll = -(start[rows, gold[:, 0]] + end[rows, gold[:, 1] - 1])
        return nll.mean() + self.encoder.penalty(self.lam)

    @torch.no_grad()
    def predict_batch(self, batch: Batch) -> List[Dict[str, object]]:
        """One ``{"text", "start", "end"}`` per example: the best span [start, end) of its
        context (``end`` exclusive) and its tokens joined by spaces ("" for an empty context)."""
        start, end = self.scores(batch)
        spans, _ = best_spans(start, end, batch.texts[1].mask, self.max_answer_tokens)
        out: List[Dict[str, object]] = []
        for (i, j), tokens in zip(spans.tolist(), batch.texts[1].tokens):
            out.append({"text": " ".join(tokens[i:j]), "start": i, "end": j})
        return out
