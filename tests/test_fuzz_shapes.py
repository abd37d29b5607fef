"""Differential tests on random small model shapes: the library against the plain reference.

Each seed draws a legal but unusual options.json (1 to 3 layers, skip connections on or off,
clips present or absent, cells wider or narrower than the projection, filter widths beyond
the shortest words, 0 to 2 highway layers, relu or tanh, other character counts per token),
random weights and a random batch (empty sentences, words longer than the model keeps,
non-ASCII text, batch sizes 1, 2, 17 and 33), and checks what the fast paths give against
:class:`reference_bilm.ReferenceBiLM` run in float64: the layers and the mask, a sentence alone
(the one-row path) against the same sentence in a batch, the token cache, stateful calls, the
language model's gradients (clips active) and a save_original / load_original round trip.

Tolerance: the library runs in float32 and the reference in float64, so the two differ by
float32 rounding only. Each difference is bounded by :data:`REL` times the scale of the
activations (the largest magnitude of all the reference's layers, token layer included, and
at least 1): rounding the token vectors to float32 (eps = 1.2e-7) errs by about eps times
their scale, and the CNN's sums and at most three LSTM layers of at most 42 steps compound a
few dozen such errors. (The same computation in float64 agrees with the reference to 1e-13.)
"""
from __future__ import annotations

import copy
import json
import random
from typing import Dict, List, Sequence

import pytest
import torch
import torch.nn.functional as F

from elmo import BiLM, batch_to_ids
from elmo.config import ConfigError, ElmoOptions
from elmo.data.lm_batches import LMBatch
from elmo.embedding.embedder import Embedder
from elmo.modules import char_cnn as char_cnn_module
from elmo.modules import dense as dense_module
from elmo.modules import lstm as lstm_module
from elmo.modules.lstm_inference import int8_supported
from elmo.training.model import LanguageModel
from elmo.weights import load_original, load_pretrained, save_original, save_pretrained

from reference_bilm import ReferenceBiLM, lstm_direction

pytestmark = pytest.mark.numerics

#: Bound on |library - reference| relative to the compared quantity's scale (see the module doc).
REL = 1e-5

#: The same for the loss and the gradients, relative to the largest gradient: the backward
#: pass runs the recurrence again, so the forward pass's errors are compounded over as many
#: steps again.
REL_GRAD = 1e-4

SEEDS = [0, 1, 2, 3, 4, 5]
SLOW_SEEDS = list(range(100, 160))

#: Letters the words are drawn from: ASCII, two- three- and four-byte UTF-8.
#: A control character and a lone surrogate (dropped when encoded) too.
ALPHABET = ("abcdefghijklmnopqrstuvwxyzABC0123456789.,'-" + "éüßøñ" + "中文字ひらがな" + "\U0001F600\U00010348"
            + "\t\ud800")


def draw_options(rng: random.Random) -> Dict:
    """A random legal options.json (as a dict) of a small model."""
    p = rng.choice([1, 2, 3, 4, 8, 16])
    max_chars = rng.choice([3, 4, 7, 12, 50, 64])
    filters = [[rng.randint(1, min(max_chars, 9)), rng.randint(1, 6)] for _ in range(rng.randint(1, 4))]
    clip = lambda: rng.choice([None, 0.05, 0.3, 1.0, 3.0])  # noqa: E731  (small ones bind)
    return {
        "lstm": {"dim": rng.choice([1, p, 2 * p, 5, 24]), "projection_dim": p,
                 "n_layers": rng.randint(1, 3), "cell_clip": clip(), "proj_clip": clip(),
                 "use_skip_connections": rng.random() < 0.5},
        "char_cnn": {"embedding": {"dim": rng.choice([1, 2, 4, 16])}, "filters": filters,
                     "n_highway": rng.randint(0, 2), "n_characters": rng.choice([261, 262]),
                     "max_characters_per_token": max_chars, "activation": rng.choice(["relu", "tanh"])},
    }


def random_model(options: ElmoOptions, seed: int, scale: float, stateful: bool = False) -> BiLM:
    """A BiLM of ``options`` with every weight and bias uniform in +-scale/sqrt(fan-in)."""
    torch.manual_seed(seed)
    bilm = BiLM(options, stateful=stateful)
    with torch.no_grad():
        for p in bilm.parameters():
            fan_in = p.shape[-1] if p.dim() > 1 else 4
            p.uniform_(-scale / fan_in ** 0.5, scale / fan_in ** 0.5)
        bilm.token_encoder.char_embedding.weight.uniform_(-1, 1)
    return bilm.eval()


def draw_word(rng: random.Random) -> str:
    """A word of 1 to 60 characters, or now and then the empty token (which has ids of its own)."""
    length = rng.choice([0, 1, 1, 2, 3, 4, 5, 7, 10, 20, 60])
    return "".join(rng.choice(ALPHABET) for _ in range(length))


def draw_batch(rng: random.Random, batch_size: int) -> List[List[str]]:
    """``batch_size`` sentences of 0 to 40 words (some empty, lengths mixed)."""
    vocabulary = [draw_word(rng) for _ in range(30)]
    sentences = []
    for _ in range(batch_size):
        n = rng.choice([0, 1, 2, 3, 5, 8, 13, 40, rng.randint(0, 40)])
        sentences.append([rng.choice(vocabulary) if rng.random() < 0.7 else draw_word(rng) for _ in range(n)])
    return sentences


def scale_of(tensors: Sequence[torch.Tensor]) -> float:
    """The largest magnitude in ``tensors``, at least 1."""
    return max([1.0] + [float(t.abs().max()) for t in tensors if t.numel()])


def assert_scaled_close(got: torch.Tensor, want: torch.Tensor, what: str, scale: float | None = None) -> None:
    """|got - want| <= REL * scale; scale: of the activations, by default want's (scale_of)."""
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    if want.numel() == 0:
        return
    want = want.double()
    scale = scale_of([want]) if scale is None else scale
    err = float((got.double() - want).abs().max())
    assert err <= REL * scale, f"{what}: max difference {err:.3g} at scale {scale:.3g} (bound {REL * scale:.3g})"


def reference_of(bilm: BiLM) -> ReferenceBiLM:
    """The reference over a float64 copy of ``bilm``'s weights."""
    return ReferenceBiLM(copy.deepcopy(bilm).double())


class Case:
    """One seed's options, model and batch."""

    def __init__(self, seed: int, batch_size: int | None = None, scale: float | None = None):
        rng = random.Random(seed)
        self.seed = seed
        self.raw = draw_options(rng)
        self.options = ElmoOptions.from_dict(self.raw)
        # (larger weights make the function itself ill-conditioned: its gates' inputs reach the
        # hundreds, and a float32 rounding of the token vectors then moves the top layer by 1e-3)
        self.scale = scale if scale is not None else rng.choice([0.5, 1.0, 2.0, 3.0])
        self.batch_size = batch_size or rng.choice([1, 2, 17, 33])
        self.sentences = draw_batch(rng, self.batch_size)
        self.max_chars = self.options.char_cnn.max_characters_per_token
        self.bilm = random_model(self.options, seed, self.scale)

    def ids(self, sentences: Sequence[Sequence[str]] | None = None) -> torch.Tensor:
        return batch_to_ids(self.sentences if sentences is None else sentences, self.max_chars)

    def __repr__(self) -> str:
        return f"seed {self.seed}, scale {self.scale}, batch {self.batch_size}, options {self.raw}"


def check_against_reference(case: Case, keep_sentence_boundaries: bool = False) -> None:
    ids = case.ids()
    with torch.no_grad():
        got = case.bilm(ids, keep_sentence_boundaries=keep_sentence_boundaries)
        want, _ = reference_of(case.bilm).run(ids, keep_sentence_boundaries=keep_sentence_boundaries)
    mask = (ids > 0).any(-1)
    if keep_sentence_boundaries:  # <S> and </S> around each sentence, an empty one too (AllenNLP)
        mask = torch.arange(ids.shape[1] + 2)[None] < (mask.sum(1) + 2)[:, None]
    assert torch.equal(got["mask"], mask), case
    assert len(got["activations"]) == len(want) == case.options.num_layers
    scale = scale_of(want)
    for k, (g, w) in enumerate(zip(got["activations"], want)):
        assert g.dtype == torch.float32
        assert_scaled_close(g, w, f"{case}: layer {k}", scale)
    rows = ids.shape[0]
    if rows % 2 == 0 and not keep_sentence_boundaries:  # (2, B / 2, T, C): each (T, C) a sentence
        with torch.no_grad():
            grid = case.bilm(ids.view(2, rows // 2, *ids.shape[1:]))
        assert torch.equal(grid["mask"], mask.view(2, rows // 2, -1)), case
        for k, (g, w) in enumerate(zip(grid["activations"], want)):
            assert_scaled_close(g.reshape(w.shape), w, f"{case}: layer {k} of a (2, B / 2, T, C) batch", scale)


#: Switches of the fast paths, each set to reach a path the tiny shapes do not take by default.
KNOBS = {
    "default": {},
    "pytorch_products": {(dense_module, "BACKEND"): "default"},
    "onednn_recurrent": {(dense_module, "BACKEND"): "onednn", (dense_module, "RECURRENT_MIN_BYTES"): 0},
    "onednn_stored_layout": {(dense_module, "BACKEND"): "onednn", (dense_module, "RECURRENT_MIN_BYTES"): 0,
                             (dense_module, "RECURRENT_PACKED"): False},
    "length_groups": {(char_cnn_module, "GROUP_OVERHEAD_MACS"): 0},
    "conv_unfolded": {(char_cnn_module, "CONV_AS_MATMUL"): False},
    "general_one_row": {(lstm_module, "SINGLE_SEQUENCE_PATH"): False},
    "stored_hh": {(lstm_module, "RECURRENT_ROWS"): False},
}


def apply_knobs(monkeypatch, name: str) -> None:
    for (module, attr), value in KNOBS[name].items():
        monkeypatch.setattr(module, attr, value)


@pytest.mark.parametrize("knob", list(KNOBS))
@pytest.mark.parametrize("seed", SEEDS)
def test_layers_equal_reference(seed, knob, monkeypatch):
    apply_knobs(monkeypatch, knob)
    check_against_reference(Case(seed))


@pytest.mark.parametrize("seed", SEEDS)
def test_layers_with_boundaries_equal_reference(seed):
    check_against_reference(Case(seed), keep_sentence_boundaries=True)


@pytest.mark.slow
@pytest.mark.parametrize("knob", list(KNOBS))
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_layers_equal_reference_sweep(seed, knob, monkeypatch):
    apply_knobs(monkeypatch, knob)
    check_against_reference(Case(seed))


def check_alone_equals_in_batch(case: Case) -> None:
    """Each non-empty sentence alone (batch 1: the one-row path) against it inside the batch."""
    with torch.no_grad():
        batch = case.bilm(case.ids())["activations"]
        for b, sentence in enumerate(case.sentences[:6]):
            alone = case.bilm(case.ids([sentence]))["activations"]
            for k, (a, full) in enumerate(zip(alone, batch)):
                assert_scaled_close(a[0], full[b, :len(sentence)], f"{case}: sentence {b} layer {k}",
                                    scale_of(batch))


@pytest.mark.parametrize("knob", ["default", "pytorch_products", "onednn_recurrent", "stored_hh"])
@pytest.mark.parametrize("seed", SEEDS)
def test_sentence_alone_equals_it_in_a_batch(seed, knob, monkeypatch):
    apply_knobs(monkeypatch, knob)
    check_alone_equals_in_batch(Case(seed, batch_size=17))


#: Bound for the opt-in bfloat16 modes, relative to the activations' scale: one bfloat16
#: rounding step (8 bits of mantissa) of values of that scale.
REL_BF16 = 2.0 ** -7


@pytest.mark.parametrize("mode", ["int8", "bfloat16"])
@pytest.mark.parametrize("seed", SEEDS)
def test_opt_in_modes_give_a_sentence_alone_what_it_gets_in_a_batch(seed, mode):
    """int8 recurrent weights and a bfloat16 model apply at every batch size (the one-row path
    included): a sentence alone gets its vectors in the batch, up to bfloat16 rounding."""
    case = Case(seed, batch_size=17)
    bilm = case.bilm
    if mode == "int8":
        if not int8_supported(torch.device("cpu")):
            pytest.skip("this PyTorch lacks the int8 weight-only product")
        bilm.lstm.use_int8(True)
    else:
        bilm = bilm.to(torch.bfloat16)
    with torch.no_grad():
        batch = bilm(case.ids())["activations"]
        for b, sentence in enumerate(case.sentences[:6]):
            alone = bilm(case.ids([sentence]))["activations"]
            for k, (a, full) in enumerate(zip(alone, batch)):
                what = f"{case}: {mode}, sentence {b} layer {k}"
                assert a.dtype == full.dtype == (torch.bfloat16 if mode == "bfloat16" else torch.float32), what
                got, want = a[0].double(), full[b, :len(sentence)].double()
                err = float((got - want).abs().max()) if got.numel() else 0.0
                assert err <= REL_BF16 * scale_of(batch), f"{what}: differs by {err:.3g}"


def check_token_cache(case: Case) -> None:
    ids = case.ids()
    with torch.no_grad():
        without = case.bilm(ids)["activations"]
        words = sorted({w for s in case.sentences for w in s})
        case.bilm.token_encoder.build_token_cache(words[::2])  # half the words: hits and misses
        with_cache = case.bilm(ids)["activations"]
    for k, (c, w) in enumerate(zip(with_cache, without)):
        assert_scaled_close(c, w, f"{case}: layer {k} with a token cache", scale_of(without))


@pytest.mark.parametrize("seed", SEEDS)
def test_token_cache_gives_the_same_layers(seed):
    check_token_cache(Case(seed, batch_size=17))


def rows_of(state, rows: int):
    """The first ``rows`` rows of a per-layer state, zero rows added past its own."""
    def fit(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([t[:, :rows], t.new_zeros(t.shape[0], max(0, rows - t.shape[1]), t.shape[2])], 1)
    return [(fit(c), fit(h)) for c, h in state]


def check_stateful(case: Case) -> None:
    """Three stateful calls against the reference carrying the final state of each call into
    the next: the second call's batch has fewer rows than the state carried (the rows past it
    keep theirs), the third more (its new rows start from zeros)."""
    bilm = random_model(case.options, case.seed, case.scale, stateful=True)
    ref = reference_of(bilm)
    rows = len(case.sentences)
    calls = [case.sentences, list(reversed(case.sentences))[:max(1, rows // 2)], case.sentences + [["extra", "row"]]]
    state = None
    for n, sentences in enumerate(calls):
        ids = case.ids(sentences)
        with torch.no_grad():
            got = bilm(ids)["activations"]
            want, final = ref.run(ids, None if state is None else rows_of(state, len(sentences)))
        scale = scale_of(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_scaled_close(g, w, f"{case}: stateful call {n}, layer {k}", scale)
        state = final if state is None or final[0][0].shape[1] >= state[0][0].shape[1] else [
            (torch.cat([c, old_c[:, c.shape[1]:]], 1), torch.cat([h, old_h[:, h.shape[1]:]], 1))
            for (c, h), (old_c, old_h) in zip(final, state)]
        carried = bilm.get_states()
        assert carried is not None
        for j, ((c, h), (want_c, want_h)) in enumerate(zip(carried, state)):
            # (unclipped cells can outgrow the activations: a few dozen steps of +-1 each)
            assert_scaled_close(c, want_c, f"{case}: carried cells after call {n}, layer {j}",
                                max(scale, scale_of([want_c])))
            assert_scaled_close(h, want_h, f"{case}: carried outputs after call {n}, layer {j}", scale)


@pytest.mark.parametrize("seed", SEEDS)
def test_stateful_calls_equal_reference_carrying_state(seed):
    check_stateful(Case(seed))


def reference_lm_loss(model: LanguageModel, batch: LMBatch, state):
    """The language model's loss (dropout 0, full softmax), computed plainly from the initial
    ``state`` per layer (c (2, B, H), h (2, B, P)): the backward stack reads its rows left to
    right, as the library's (they hold the reversed text). Returns the loss and the final
    state per layer."""
    ref = ReferenceBiLM(model.bilm)
    stack = model.bilm.lstm
    mask = batch.fwd_mask
    fwd_in, bwd_in = ref.token_vectors(batch.fwd_chars), ref.token_vectors(batch.bwd_chars)
    finals = []
    for j, layer in enumerate(stack.layers):
        c, h = state[j]
        fwd, (c_f, h_f) = lstm_direction(stack, layer, 0, fwd_in, mask, (c[0], h[0]))
        bwd, (c_b, h_b) = lstm_direction(stack, layer, 1, bwd_in, mask, (c[1], h[1]), right_to_left=False)
        finals.append((torch.stack([c_f, c_b]), torch.stack([h_f, h_b])))
        if stack.use_skip_connections and j > 0:
            fwd, bwd = fwd + fwd_in, bwd + bwd_in
        fwd_in, bwd_in = fwd, bwd
    w, b = model.softmax.weight, model.softmax.bias
    nll_f = F.cross_entropy(F.linear(fwd_in[batch.fwd_mask], w, b), batch.fwd_targets[batch.fwd_mask], reduction="none")
    nll_b = F.cross_entropy(F.linear(bwd_in[batch.bwd_mask], w, b), batch.bwd_targets[batch.bwd_mask], reduction="none")
    return 0.5 * (nll_f.mean() + nll_b.mean()), finals


def random_lm_batch(case: Case, n_vocab: int) -> LMBatch:
    rng = random.Random(case.seed)
    rows = ([s for s in case.sentences if s][:8] or [["a"]]) + [[]]  # a row without tokens keeps its state
    steps = max(len(s) for s in rows)
    lengths = torch.tensor([len(s) for s in rows])
    mask = torch.arange(steps)[None] < lengths[:, None]
    fwd = batch_to_ids(rows, case.max_chars)
    bwd = batch_to_ids([list(reversed(s)) for s in rows], case.max_chars)
    targets = lambda: torch.tensor([[rng.randrange(n_vocab) for _ in range(steps)] for _ in rows]) * mask  # noqa: E731
    return LMBatch(fwd, bwd, targets(), targets(), mask, mask.clone(), lengths)


def check_lm_gradients(case: Case) -> None:
    n_vocab = 11
    torch.manual_seed(case.seed)
    model = LanguageModel(case.options, n_vocab, dropout=0.0)
    model.bilm.load_state_dict(case.bilm.state_dict())
    model.train()
    batch = random_lm_batch(case, n_vocab)
    # a state carried from an earlier batch, as training passes it
    state = [(torch.rand(2, len(batch.lengths), case.options.lstm.dim) - 0.5,
              torch.rand(2, len(batch.lengths), case.options.lstm.projection_dim) - 0.5)
             for _ in range(case.options.lstm.n_layers)]
    out = model(batch, state)
    loss = out["loss"]
    loss.backward()
    reference = copy.deepcopy(model).double()
    reference.zero_grad()
    want, want_state = reference_lm_loss(reference, batch, [(c.double(), h.double()) for c, h in state])
    want.backward()
    with torch.no_grad():  # the activations' scale: the token vectors'
        scale = scale_of([ReferenceBiLM(reference.bilm).token_vectors(batch.fwd_chars)])
    for j, ((c, h), (want_c, want_h)) in enumerate(zip(out["state"], want_state)):
        want_c, want_h = want_c.detach(), want_h.detach()
        assert_scaled_close(c, want_c, f"{case}: final cells of layer {j}", max(scale, scale_of([want_c])))
        assert_scaled_close(h, want_h, f"{case}: final outputs of layer {j}", max(scale, scale_of([want_h])))
    err = abs(float(loss.detach()) - float(want.detach()))
    assert err <= REL_GRAD * max(float(want.detach()), 1.0), f"{case}: loss differs by {err:.3g}"
    got_grads = dict(model.named_parameters())
    grads = {name: p.grad for name, p in reference.named_parameters() if p.grad is not None}
    assert set(grads) == {name for name, p in got_grads.items() if p.grad is not None}, case
    scale = max(float(g.abs().max()) for g in grads.values())  # (no floor: gradients may all be small)
    for name, grad in grads.items():
        err = float((got_grads[name].grad.double() - grad).abs().max())
        assert err <= REL_GRAD * scale, f"{case}: gradient of {name} differs by {err:.3g} at scale {scale:.3g}"


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_lm_gradients_equal_reference(seed):
    check_lm_gradients(Case(seed, batch_size=17))


def test_lm_gradients_with_clipping_active():
    case = Case(7, batch_size=17, scale=3.0)
    options = dict(case.raw, lstm=dict(case.raw["lstm"], cell_clip=0.1, proj_clip=0.05, n_layers=2))
    case.options = ElmoOptions.from_dict(options)
    case.bilm = random_model(case.options, case.seed, case.scale)
    # the clips bind: some outputs, and some final cells, of the reference sit at the clip values
    with torch.no_grad():
        layers, final = reference_of(case.bilm).run(case.ids())
    assert float(layers[1].abs().max()) == pytest.approx(0.05)
    assert float(final[0][0].abs().max()) == pytest.approx(0.1)
    check_lm_gradients(case)


def check_bilm_gradients(case: Case) -> None:
    """Fine-tuning (as Elmo(requires_grad=True) does): gradients of a weighted sum of every
    layer through the BiLM's training path against autograd through the reference."""
    bilm = case.bilm.train()
    ids = case.ids()
    reference = copy.deepcopy(bilm).double()
    got = bilm(ids)["activations"]
    want = ReferenceBiLM(reference)(ids)
    torch.manual_seed(case.seed)
    weights = [torch.randn(w.shape[-1], dtype=torch.float64) for w in want]
    sum(((g * w.float()).sum() for g, w in zip(got, weights)), torch.zeros(())).backward()
    sum(((x * w).sum() for x, w in zip(want, weights)), torch.zeros((), dtype=torch.float64)).backward()
    grads = {name: p.grad for name, p in reference.named_parameters() if p.grad is not None}
    got_grads = dict(bilm.named_parameters())
    if not grads:  # (a batch without tokens)
        return
    scale = max(float(g.abs().max()) for g in grads.values())
    for name, grad in grads.items():
        got_grad = got_grads[name].grad  # (None where no token reached the weight: zero)
        err = float(((0 if got_grad is None else got_grad.double()) - grad).abs().max())
        assert err <= REL_GRAD * scale, f"{case}: gradient of {name} differs by {err:.3g} at scale {scale:.3g}"


@pytest.mark.parametrize("seed", SEEDS)
def test_bilm_gradients_equal_reference(seed):
    check_bilm_gradients(Case(seed))


def check_round_trip(case: Case, tmp_path) -> None:
    save_original(case.bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    loaded = load_original(tmp_path / "options.json", tmp_path / "weights.hdf5")
    assert loaded.options == case.options, case
    ids = case.ids()
    with torch.no_grad():
        before, after = case.bilm(ids), loaded(ids)
    for k, (a, b) in enumerate(zip(after["activations"], before["activations"])):
        assert torch.equal(a, b), f"{case}: layer {k} after save_original / load_original"
    save_pretrained(case.bilm, tmp_path / "native")
    native = load_pretrained(tmp_path / "native")
    assert native.options == case.options, case
    with torch.no_grad():
        again = native(ids)
    for k, (a, b) in enumerate(zip(again["activations"], before["activations"])):
        assert torch.equal(a, b), f"{case}: layer {k} after save_pretrained / load_pretrained"


@pytest.mark.parametrize("seed", SEEDS)
def test_save_original_round_trip(seed, tmp_path):
    check_round_trip(Case(seed), tmp_path)


def check_windows(case: Case) -> None:
    """Embedder with short windows: each token's vectors are the reference's for the window
    that gives it the most context on both sides (the earlier one on a tie), run alone."""
    rng = random.Random(case.seed)
    max_tokens = rng.randint(1, 12)
    overlap = rng.randint(0, max_tokens - 1)
    embedder = Embedder(case.bilm, batch_size=rng.randint(1, 5), max_tokens=max_tokens, overlap=overlap)
    got = embedder.embed_sentences(case.sentences)
    ref = reference_of(case.bilm)
    for b, sentence in enumerate(case.sentences):
        n = len(sentence)
        assert got[b].shape == (case.options.num_layers, n, case.options.output_dim)
        if n == 0:
            continue
        starts = list(range(0, n - max_tokens, max_tokens - overlap)) + [max(0, n - max_tokens)]
        spans = [(s, min(s + max_tokens, n)) for s in starts]
        with torch.no_grad():
            windows = [torch.stack(ref(case.ids([sentence[s:e]])))[:, 0] for s, e in spans]
        for i in range(n):
            def context(span):
                s, e = span
                return min(i - s if s > 0 else n, e - 1 - i if e < n else n)
            k = max((k for k, span in enumerate(spans) if span[0] <= i < span[1]),
                    key=lambda k: (context(spans[k]), -k))
            want = windows[k][:, i - spans[k][0]]
            assert_scaled_close(torch.from_numpy(got[b][:, i]), want,
                                f"{case}: sentence {b} token {i} (windows of {max_tokens}, overlap {overlap})",
                                scale_of(windows))


@pytest.mark.parametrize("seed", SEEDS)
def test_windows_of_long_sentences_equal_reference(seed):
    check_windows(Case(seed, batch_size=17))


SLOW_CHECKS = {"alone": check_alone_equals_in_batch, "cache": check_token_cache, "stateful": check_stateful,
               "gradients": check_lm_gradients, "windows": check_windows, "bilm_gradients": check_bilm_gradients}


@pytest.mark.slow
@pytest.mark.parametrize("check", list(SLOW_CHECKS))
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_other_checks_sweep(seed, check):
    SLOW_CHECKS[check](Case(seed))


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_save_original_round_trip_sweep(seed, tmp_path):
    check_round_trip(Case(seed), tmp_path)


@pytest.mark.parametrize("seed", SEEDS)
def test_loading_refuses_options_it_would_ignore(seed, tmp_path):
    """An options.json whose model section has a key the reader does not know (a misspelt one,
    which was passed over: another model, no error), or that asks for a forward-only model,
    is refused when loaded, naming the key."""
    case = Case(seed)
    rng = random.Random(seed)
    save_original(case.bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    saved = json.loads((tmp_path / "options.json").read_text())
    section = rng.choice(["lstm", "char_cnn"])
    key = rng.choice(sorted(saved[section]))
    misspelt = copy.deepcopy(saved)
    misspelt[section][key + "s"] = misspelt[section].pop(key)
    forward_only = dict(copy.deepcopy(saved), bidirectional=False)
    for options, match in ((misspelt, f"{section}.{key}s: unknown key"), (forward_only, "bidirectional")):
        (tmp_path / "options.json").write_text(json.dumps(options))
        with pytest.raises(ConfigError, match=match):
            load_original(tmp_path / "options.json", tmp_path / "weights.hdf5")
