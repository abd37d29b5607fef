"""Device placement checked on the CPU: no tensor of a training step, an inference call or the
sampler's draws may be made on torch's default device by accident.

Under ``with torch.device("meta")`` every tensor made without ``device=`` lands on the meta
device. A tensor that forward or backward makes that way, then mixes with the model's CPU
tensors, fails there ("not on the expected device"), and one read back (``.tolist()``,
``int()``) has no values: exactly the tensors that would stay on the CPU beside a model on a
GPU (a device mismatch, or a host-to-device copy every step), or that a CPU generator would
be asked to draw onto "cuda" under ``torch.set_default_device("cuda")``.
"""
from __future__ import annotations

import pytest
import torch

from elmo.host_copy import device_constant
from elmo.modules import char_cnn
from elmo.modules.softmax import Candidates, LogUniformSampler
from elmo.training.evaluate import reset_rows
from elmo.training.model import LanguageModel
from elmo.training.optim import adagrad, load_optimizer_state
from tests.conftest import tiny_options
from tests.test_cuda import _random_lm_batch


@pytest.fixture
def meta_default():
    """A block whose tensors made without ``device=`` land on the meta device; the cached
    hash weights are dropped first, so that the block makes its own."""
    char_cnn._row_hash_weights.cache_clear()
    with torch.device("meta"):
        yield
    char_cnn._row_hash_weights.cache_clear()


@pytest.mark.parametrize("n_sampled", [10, 60])  # (60 >= V: every word, log Q 0)
def test_the_samplers_draws_stay_on_its_generators_device(meta_default, n_sampled):
    with torch.device("cpu"):
        want = Candidates.draw(LogUniformSampler(50, seed=3), n_sampled, "cpu")
    got = Candidates.draw(LogUniformSampler(50, seed=3), n_sampled, "cpu")
    assert got.ids.device.type == "cpu" and torch.equal(got.ids, want.ids)
    assert torch.equal(got.log_q, want.log_q) and got.tries == want.tries


def test_reset_rows_builds_its_mask_where_the_state_is(meta_default):
    state = [(torch.ones(2, 4, 3, device="cpu"), torch.ones(2, 4, 5, device="cpu"))]
    c, h = reset_rows(state, step=1, every=2)[0]
    assert c.device.type == "cpu"
    # (row g is reset where step + g is a multiple of every: rows 1 and 3)
    assert c[0, :, 0].tolist() == [1.0, 0.0, 1.0, 0.0] and h[1, :, 4].tolist() == [1.0, 0.0, 1.0, 0.0]


@pytest.mark.parametrize("host_lengths", [False, True])  # (True: as the trainer's batches)
@pytest.mark.parametrize("sampled,bf16", [(False, False), (True, False), (True, True)])
def test_a_training_step_makes_no_tensor_on_the_default_device(sampled, bf16, host_lengths):
    torch.manual_seed(0)
    model = LanguageModel(tiny_options(), n_vocab=50, dropout=0.1).train()
    batch = _random_lm_batch(rows=3, steps=5, n_vocab=50, host_lengths=host_lengths)
    negatives = Candidates.draw(LogUniformSampler(50, seed=0), 10, "cpu") if sampled else None
    char_cnn._row_hash_weights.cache_clear()
    with torch.device("meta"), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = model(batch, None, negatives)
        out["loss"].backward()
    assert out["loss"].device.type == "cpu" and bool(torch.isfinite(out["loss"]))
    assert all(p.grad is None or p.grad.device.type == "cpu" for p in model.parameters())


@pytest.mark.parametrize("rows", [1, 3])  # (one row: the single-sequence path)
def test_inference_makes_no_tensor_on_the_default_device(rows):
    bilm = LanguageModel(tiny_options(), n_vocab=50, dropout=0.0).bilm
    ids = _random_lm_batch(rows=rows, steps=5, n_vocab=50).fwd_chars
    lengths = torch.full((rows,), ids.shape[1])
    with torch.no_grad():
        want = bilm.layers_of(ids, lengths)
        char_cnn._row_hash_weights.cache_clear()
        with torch.device("meta"):
            got = bilm.layers_of(ids, lengths)
    assert all(torch.equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("keep_boundaries", [False, True])
@pytest.mark.parametrize("sentences", [[["the", "dog", "bit"]], [["the", "dog", "bit"], [], ["a"]]])
def test_a_bilm_call_makes_no_tensor_on_the_default_device(sentences, keep_boundaries):
    """BiLM.forward, what Embedder, Elmo and benchmarks/gpu/run.py call (not only layers_of):
    the sentence boundaries' index and ids, made on the host, were made on torch's default
    device, and copying them from there to the ids' device failed."""
    from elmo import batch_to_ids
    from tests.conftest import random_bilm
    bilm = random_bilm(seed=1)
    ids = batch_to_ids(sentences)
    with torch.no_grad():
        want = bilm(ids, keep_sentence_boundaries=keep_boundaries)
        char_cnn._row_hash_weights.cache_clear()
        device_constant.cache_clear()   # (else the block reuses the copy made above)
        with torch.device("meta"):
            got = bilm(ids, keep_sentence_boundaries=keep_boundaries)
    assert torch.equal(got["mask"], want["mask"])
    assert all(torch.equal(a, b) for a, b in zip(got["activations"], want["activations"]))


def test_a_resumed_optimizers_step_counts_go_where_its_implementation_reads_them():
    """A CPU run's checkpoint (fused Adagrad: the counts on the parameters' device) resumed on
    another device (the meta device here, standing in for a GPU), whose Adagrad is not fused:
    the counts go back to the CPU, where the usual implementation reads them without waiting
    for the device."""
    on_cpu = adagrad([torch.nn.Parameter(torch.randn(4))], 0.2, 0.1)
    if not on_cpu.param_groups[0].get("fused"):
        pytest.skip("this PyTorch's Adagrad has no fused CPU kernel")
    on_cpu.param_groups[0]["params"][0].grad = torch.ones(4)
    on_cpu.step()
    elsewhere = adagrad([torch.nn.Parameter(torch.randn(4, device="meta"))], 0.2, 0.1)
    assert not elsewhere.param_groups[0].get("fused")
    load_optimizer_state(elsewhere, on_cpu.state_dict())
    state = next(iter(elsewhere.state.values()))
    assert state["step"].device.type == "cpu" and float(state["step"]) == 1.0
    assert state["sum"].device.type == "meta"
    # and back: the fused CPU kernel reads its counts on the parameters' device, the CPU
    back = adagrad([torch.nn.Parameter(torch.randn(4))], 0.2, 0.1)
    load_optimizer_state(back, on_cpu.state_dict())
    assert next(iter(back.state.values()))["step"].device.type == "cpu"
