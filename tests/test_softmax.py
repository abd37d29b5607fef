"""The shared softmax: the log-uniform sampler, and sampled against full softmax."""
from __future__ import annotations

import math

import pytest
import torch

from elmo.modules.softmax import (FULL_SOFTMAX, SOFTMAX_LOSSES, Candidates, FullSoftmax, LogUniformSampler,
                                  SampledSoftmax, SharedSoftmax, softmax_loss, softmax_name)


def test_log_uniform_draws_follow_zipf():
    sampler = LogUniformSampler(1000, seed=0)
    assert math.isclose(float(sampler.probs.sum()), 1.0, rel_tol=1e-9)
    draws = sampler.draw(400_000)
    assert draws.min() >= 0 and draws.max() < 1000
    freq = torch.bincount(draws, minlength=1000).double() / draws.numel()
    # P(0) = log 2 / log 1001 ~ 0.10; the frequent ids are within 3% of their probability
    assert torch.allclose(freq[:20], sampler.probs[:20], rtol=0.03)
    assert freq[500:].sum() == pytest.approx(float(sampler.probs[500:].sum()), rel=0.03)


def test_sample_is_distinct_and_expected_counts_match_simulation():
    sampler = LogUniformSampler(100, seed=1)
    ids, log_q, tries = sampler.sample(30)
    assert ids.numel() == 30 and ids.unique().numel() == 30 and tries >= 30
    assert torch.allclose(log_q, sampler.log_expected_count(ids, tries, 30))
    # Q(w) = 1 - (1 - P(w))^tries is the probability that w is among `tries` draws
    n_sets, fixed = 20_000, 40
    draws = sampler.draw(n_sets * fixed).view(n_sets, fixed)
    seen = torch.zeros(n_sets, 100, dtype=torch.bool).scatter_(1, draws, True).double().mean(0)
    q = sampler.log_expected_count(torch.arange(100), fixed, n_sampled=None).exp()
    assert torch.allclose(seen, q, atol=0.015)


def test_all_words_sampled_gives_the_full_softmax_loss_and_gradient():
    torch.manual_seed(0)
    softmax = SharedSoftmax(50, 8)
    with torch.no_grad():
        softmax.bias.uniform_(-1, 1)
    hidden = torch.randn(13, 8, requires_grad=True)
    targets = torch.randint(0, 50, (13,))
    full = softmax.full_nll(hidden, targets)
    g_full = torch.autograd.grad(full.sum(), [hidden, softmax.weight, softmax.bias])
    cand = Candidates.draw(LogUniformSampler(50), 50)
    assert cand.tries is None and torch.equal(cand.log_q, torch.zeros(50))
    sampled = softmax.sampled_nll(hidden, targets, cand.ids, cand.log_q, cand.log_q_of(targets))
    g_sampled = torch.autograd.grad(sampled.sum(), [hidden, softmax.weight, softmax.bias])
    # stated tolerance: float32 rounding only
    assert torch.allclose(sampled, full, atol=1e-5, rtol=1e-5)
    for a, b in zip(g_sampled, g_full):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-5)


def test_sampled_loss_corrects_by_log_q_and_removes_accidental_hits():
    torch.manual_seed(1)
    softmax = SharedSoftmax(200, 6)
    hidden = torch.randn(5, 6)
    sampler = LogUniformSampler(200, seed=3)
    cand = Candidates.draw(sampler, 20)
    targets = torch.tensor([int(cand.ids[0]), int(cand.ids[5]), 150, 199, int(cand.ids[19])])  # 3 accidental hits
    with torch.no_grad():
        got = softmax.sampled_nll(hidden, targets, cand.ids, cand.log_q, cand.log_q_of(targets))
        logits = hidden @ softmax.weight.T + softmax.bias
    log_q_all = sampler.log_expected_count(torch.arange(200), cand.tries, 20).float()
    for n in range(5):
        t = int(targets[n])
        negs = [int(i) for i in cand.ids if int(i) != t]
        z = torch.stack([logits[n, t] - log_q_all[t]] + [logits[n, i] - log_q_all[i] for i in negs])
        assert float(got[n]) == pytest.approx(float(torch.logsumexp(z, 0) - z[0]), rel=1e-5, abs=1e-5)


def test_sampler_state_round_trip():
    a = LogUniformSampler(500, seed=9)
    a.sample(40)
    state = a.state_dict()
    first = a.sample(40)[0]
    b = LogUniformSampler(500, seed=0)
    b.load_state_dict(state)
    assert torch.equal(b.sample(40)[0], first)


def test_sampled_loss_gradients_match_plain_autograd_with_hits():
    """The hand-written backward equals autograd through the plain formula (mask the hits,
    logsumexp), for every parameter, with some accidental hits present."""
    torch.manual_seed(2)
    softmax = SharedSoftmax(300, 16)
    with torch.no_grad():
        softmax.bias.uniform_(-1, 1)
    hidden = torch.randn(40, 16, requires_grad=True)
    cand = Candidates.draw(LogUniformSampler(300, seed=5), 64)
    targets = torch.randint(0, 300, (40,))
    targets[:6] = cand.ids[:6]                                     # accidental hits
    log_q_t = cand.log_q_of(targets)
    params = [hidden, softmax.weight, softmax.bias]
    got = softmax.sampled_nll(hidden, targets, cand.ids, cand.log_q, log_q_t)
    g_got = torch.autograd.grad((got * torch.linspace(0.5, 2, 40)).sum(), params)
    w, b = softmax.weight, softmax.bias
    true = (hidden * w[targets]).sum(-1) + b[targets] - log_q_t
    neg = hidden @ w[cand.ids].T + b[cand.ids] - cand.log_q
    neg = neg.masked_fill(cand.ids[None, :] == targets[:, None], float("-inf"))
    z = torch.cat([true[:, None], neg], dim=1)
    plain = torch.logsumexp(z, dim=1) - z[:, 0]
    g_plain = torch.autograd.grad((plain * torch.linspace(0.5, 2, 40)).sum(), params)
    assert torch.allclose(got, plain, atol=1e-5, rtol=1e-5)
    for a, b_ in zip(g_got, g_plain):
        assert torch.allclose(a, b_, atol=1e-6, rtol=1e-5)


def test_the_training_settings_pick_the_softmax_loss_from_the_table():
    assert set(SOFTMAX_LOSSES) == {"full", "sampled"}
    # 0 negatives, or as many as the vocabulary, is the exact loss
    assert [softmax_name(100, n) for n in (0, 30, 99, 100, 500)] == [
        "full", "sampled", "sampled", "full", "full"]
    assert isinstance(softmax_loss(100, 0), FullSoftmax)
    loss = softmax_loss(100, 30, seed=3)
    assert isinstance(loss, SampledSoftmax) and loss.train_ppl_key == "sampled_ppl"
    assert FULL_SOFTMAX.train_ppl_key == "train_ppl" and FULL_SOFTMAX.state_dict() is None
    # the sampler's position is saved and restored (checkpoints)
    state = loss.state_dict()
    first = loss.candidates().ids
    loss.load_state_dict(state)
    assert torch.equal(loss.candidates().ids, first)


def test_both_losses_answer_the_same_interface_with_the_same_numbers():
    """``nll`` per direction equals the layer's own losses exactly: the sampled one on both
    directions concatenated (shared negatives), the full one a direction at a time."""
    torch.manual_seed(0)
    softmax = SharedSoftmax(60, 8)
    hidden_f, hidden_b = torch.randn(7, 8), torch.randn(5, 8)
    targets_f, targets_b = torch.randint(0, 60, (7,)), torch.randint(0, 60, (5,))
    nll_f, nll_b = FULL_SOFTMAX.nll(softmax, hidden_f, targets_f, hidden_b, targets_b)
    assert torch.equal(nll_f, softmax.full_nll(hidden_f, targets_f))
    assert torch.equal(nll_b, softmax.full_nll(hidden_b, targets_b))
    cand = SampledSoftmax(60, 20, seed=1).candidates()
    nll_f, nll_b = cand.nll(softmax, hidden_f, targets_f, hidden_b, targets_b)
    targets = torch.cat([targets_f, targets_b])
    both = softmax.sampled_nll(torch.cat([hidden_f, hidden_b]), targets, cand.ids, cand.log_q,
                               cand.log_q_of(targets))
    assert nll_f.shape == (7,) and nll_b.shape == (5,)
    assert torch.equal(torch.cat([nll_f, nll_b]), both)


def test_sampled_loss_does_not_depend_on_how_many_rows_a_chunk_holds():
    """The loss is computed a chunk of rows at a time; hits fall in several chunks here, and
    every chunk size gives the same losses and gradients (float32 summation order only)."""
    torch.manual_seed(4)
    softmax = SharedSoftmax(120, 8)
    with torch.no_grad():
        softmax.bias.uniform_(-1, 1)
    hidden = torch.randn(23, 8, requires_grad=True)
    cand = Candidates.draw(LogUniformSampler(120, seed=2), 40)
    targets = torch.randint(0, 120, (23,))
    targets[::4] = cand.ids[:6]                                     # hits in every chunk
    log_q_t = cand.log_q_of(targets)
    params = [hidden, softmax.weight, softmax.bias]
    upstream = torch.linspace(0.5, 2, 23)
    results = []
    for rows in (1, 4, 7, 23, 100, None):
        nll = softmax.sampled_nll(hidden, targets, cand.ids, cand.log_q, log_q_t, chunk_rows=rows)
        results.append((nll, torch.autograd.grad((nll * upstream).sum(), params)))
    first_nll, first_grads = results[0]
    for nll, grads in results[1:]:
        assert torch.allclose(nll, first_nll, atol=1e-6, rtol=1e-6)
        for a, b in zip(grads, first_grads):
            assert torch.allclose(a, b, atol=1e-6, rtol=1e-5)


def test_sampled_loss_under_bf16_autocast_stays_close_to_float32():
    torch.manual_seed(5)
    softmax = SharedSoftmax(200, 16)
    hidden = torch.randn(30, 16, requires_grad=True)
    cand = Candidates.draw(LogUniformSampler(200, seed=1), 50)
    targets = torch.randint(0, 200, (30,))
    log_q_t = cand.log_q_of(targets)
    exact = softmax.sampled_nll(hidden, targets, cand.ids, cand.log_q, log_q_t)
    g_exact = torch.autograd.grad(exact.sum(), [hidden, softmax.weight])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = softmax.sampled_nll(hidden, targets, cand.ids, cand.log_q, log_q_t)
    assert low.dtype == torch.float32
    g_low = torch.autograd.grad(low.sum(), [hidden, softmax.weight])
    assert torch.allclose(low, exact, atol=0.1, rtol=0.02)
    for a, b in zip(g_low, g_exact):
        assert a.dtype == torch.float32 and float((a - b).norm() / b.norm()) < 0.05


def test_full_softmax_in_evaluation_holds_a_chunk_of_logits_at_a_time(tmp_path, monkeypatch):
    """A stateless perplexity reads each sentence whole: a text of long lines asked for all of a
    batch's (N, V) logits at once (a 10,000-word line, 2 GB for the default model's 50,000
    words) and failed in PyTorch's allocator. Evaluation takes them a chunk of rows at a time,
    with the same losses; training keeps its one product."""
    import elmo.modules.softmax as softmax_module
    from elmo.training.evaluate import perplexity
    from training_helpers import tiny_lm_and_batch

    model, vocab, _ = tiny_lm_and_batch(tmp_path / "t.txt", "a b c d\n", 1, 2)
    sentences = [["a", "b", "c", "d"] * 60, ["d", "c"] * 7]   # 241 + 15 targets a direction
    unchunked = perplexity(model, sentences, vocab)
    chunk_rows = 16
    monkeypatch.setattr(softmax_module, "FULL_CHUNK_BYTES", 4 * len(vocab) * chunk_rows, raising=False)
    rows_seen = []
    cross_entropy = torch.nn.functional.cross_entropy

    def counting(logits, *args, **kwargs):
        rows_seen.append(logits.shape[0])
        return cross_entropy(logits, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "cross_entropy", counting)
    chunked = perplexity(model, sentences, vocab)
    assert max(rows_seen) <= chunk_rows and sum(rows_seen) == 2 * chunked["targets"]
    for key in ("loss_fwd", "loss_bwd"):
        assert chunked[key] == pytest.approx(unchunked[key], rel=1e-6)
    rows_seen.clear()   # training: one product a direction, its logits kept for the backward
    hidden = torch.randn(100, model.softmax.weight.shape[1])
    model.softmax.full_nll(hidden, torch.zeros(100, dtype=torch.long)).sum().backward()
    assert rows_seen == [100]
