"""The library on a GPU: conformance, direction leaks, device placement, memory.

Marked ``cuda`` and skipped without CUDA. ``benchmarks/gpu/run.sh`` runs them with
``pytest -m cuda``; its ``--smoke`` runs them on the CPU (``ELMO_TEST_DEVICE=cpu``), so that the
default suite checks that they run at all.
"""
import contextlib
import json
import os

import h5py
import numpy as np
import pytest
import torch

import elmo.modules.lstm as lstm_module
from elmo import batch_to_ids, load_original
from tests.conftest import ALLENNLP, NOSKIP, random_bilm

DEVICE = torch.device(os.environ.get("ELMO_TEST_DEVICE", "cuda"))
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(DEVICE.type == "cuda" and not torch.cuda.is_available(),
                                                   reason="no CUDA device")]
CASES = {"allennlp": (ALLENNLP, "sentences.json"), "noskip": (NOSKIP, "lm_embeddings_sentences.json")}
WORDS = "the dog bit the man and then it ran away from the bank of the river .".split()


@contextlib.contextmanager
def float32_products():
    """Float32 matrix products in full float32 inside, the precision before restored after."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@pytest.fixture(autouse=True)
def full_float32():
    """The 1e-6 tolerances need float32 products in float32. NVIDIA's PyTorch images start
    every process with TF32 products (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1, about 1e-3 off);
    run.sh turns that off, and these tests do too when run by hand. (The library keeps its
    own convolutions out of cuDNN's TF32.)"""
    with float32_products():
        yield


@pytest.fixture(autouse=True)
def autocast_as_cuda_casts(request):
    """On the CPU (ELMO_TEST_DEVICE=cpu: ``run.sh --smoke`` and the default suite) the CPU's
    autocast casts as CUDA's does (tests/conftest.py, ``cuda_like_autocast``): the CPU's own
    promotes ``index_copy``'s, ``cat``'s and ``stack``'s operands, and code that relied on that
    passed here and failed at its first bf16 step on a GPU."""
    if DEVICE.type == "cpu":
        request.getfixturevalue("cuda_like_autocast")
    yield


def test_float32_products_are_full_float32():
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cuda.matmul.allow_tf32 is False


def embed(bilm, sentences):
    with torch.no_grad():
        return bilm(batch_to_ids(sentences).to(DEVICE))["activations"]


@pytest.mark.parametrize("case", CASES)
def test_stateful_replay_matches_reference_on_device(case):
    """The conformance replay of tests/test_conformance.py, with the model on DEVICE."""
    folder, sentence_file = CASES[case]
    bilm = load_original(folder / "options.json", folder / "lm_weights.hdf5", stateful=True).to(DEVICE)
    sentences = json.loads((folder / sentence_file).read_text())
    for i in range(10):
        batch = [sentences[k][i].strip().split() for k in range(3)]
        top = embed(bilm, batch)[-1]
        assert top.device.type == DEVICE.type
        top = top.cpu().numpy()
        for k, tokens in enumerate(batch):
            n, p = len(tokens), top.shape[-1] // 2
            got = np.stack([top[k, :n, :p], top[k, :n, p:]])
            with h5py.File(folder / f"lm_embeddings_{k}.hdf5", "r") as f:
                want = f[str(i)][...]
            assert np.allclose(got, want, atol=1e-6), f"batch {i} row {k}: {np.abs(got - want).max()}"
    for c, h in bilm.get_states():
        assert c.device.type == DEVICE.type and h.device.type == DEVICE.type


@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("k", [0, 3, 7])
def test_directions_do_not_leak_on_device(skip, k):
    """Forward layers ignore later tokens, backward layers earlier ones (batch 1 and a batch)."""
    bilm = random_bilm(seed=k, skip=skip).to(DEVICE)
    tokens = WORDS[:10]
    later = tokens[:k + 1] + ["river", "x" * 20, "."]
    earlier = ["money", "Über"] + tokens[k:]
    shift = 2 - k
    a = embed(bilm, [tokens])
    b = embed(bilm, [later])
    c = embed(bilm, [earlier])
    batched = embed(bilm, [later, tokens, earlier])
    p = a[0].shape[-1] // 2
    for j in range(1, len(a)):
        assert torch.allclose(a[j][0, :k + 1, :p], b[j][0, :k + 1, :p], atol=1e-6), f"layer {j} forward leaks"
        assert torch.allclose(a[j][0, k:, p:], c[j][0, k + shift:, p:], atol=1e-6), f"layer {j} backward leaks"
        assert torch.allclose(a[j][0], batched[j][1, :len(tokens)], atol=1e-5)
        assert not torch.allclose(a[j][0, :k + 1, p:], b[j][0, :k + 1, p:], atol=1e-6)  # the check can fail


def test_single_sequence_path_on_device_equals_general_path():
    bilm = random_bilm(seed=2).to(DEVICE)
    fast = embed(bilm, [WORDS])
    lstm_module.SINGLE_SEQUENCE_PATH = False
    try:
        slow = embed(bilm, [WORDS])
    finally:
        lstm_module.SINGLE_SEQUENCE_PATH = True
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(fast, slow))


def test_bf16_model_runs_on_device_close_to_fp32():
    bilm = random_bilm(seed=3).to(DEVICE)
    exact = embed(bilm, [WORDS, WORDS[:4]])
    low = embed(bilm.to(torch.bfloat16), [WORDS, WORDS[:4]])
    for a, b in zip(low, exact):
        assert a.dtype == torch.bfloat16 and a.device.type == DEVICE.type
        assert float((a.float() - b).abs().max()) < 0.05 * float(b.abs().max()) + 1e-3


def test_threads_sharing_a_model_get_the_single_thread_vectors():
    """Several threads embedding with one model (as elmo.Embedder allows) get the vectors of
    one thread alone: cuDNN's TF32 flag is process-wide, and a thread whose convolutions
    ended put TF32 back under another thread's (about 1e-3 off)."""
    from concurrent.futures import ThreadPoolExecutor
    bilm = random_bilm(seed=5).to(DEVICE)
    batches = [[WORDS[k:k + 6], WORDS[:k + 2]] for k in range(8)]
    alone = [embed(bilm, b) for b in batches]
    with ThreadPoolExecutor(4) as pool:
        shared = list(pool.map(lambda k: embed(bilm, batches[k % 8]), range(32)))
    for k, layers in enumerate(shared):
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(layers, alone[k % 8])), f"call {k}"


def test_repeated_inference_does_not_grow_device_memory():
    bilm = random_bilm(seed=4).to(DEVICE)
    ids = batch_to_ids([WORDS, WORDS[:5], WORDS[3:9]]).to(DEVICE)

    def allocated():
        return torch.cuda.memory_allocated(DEVICE) if DEVICE.type == "cuda" else 0

    with torch.no_grad():
        bilm(ids)
        before = allocated()
        for _ in range(20):
            bilm(ids)
    assert allocated() <= before


@pytest.mark.parametrize("host_lengths", [False, True])
@pytest.mark.parametrize("bf16", [False, True])
def test_training_step_on_device(bf16, host_lengths):
    """Loss, backward and an optimizer step with every tensor on DEVICE; also under the
    opt-in bf16 autocast (``elmo train --bf16``), whose casts differ from device to device
    (CUDA's autocast does not promote index_copy's operands as the CPU's does). With
    ``host_lengths`` the batch holds its lengths on the host, as the trainer's and run.py's
    batches do: the token positions and the LSTM's packing are then made on the host and
    copied to DEVICE."""
    from elmo.modules.softmax import Candidates, LogUniformSampler
    from elmo.training.model import LanguageModel
    from tests.conftest import tiny_options
    torch.manual_seed(0)
    model = LanguageModel(tiny_options(), n_vocab=50, dropout=0.1).to(DEVICE).train()
    batch = _random_lm_batch(rows=3, steps=5, n_vocab=50, host_lengths=host_lengths).to(DEVICE)
    assert (batch.host_lengths is not None) == host_lengths
    negatives = Candidates.draw(LogUniformSampler(50, seed=0), 10, DEVICE)
    with torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=bf16):
        out = model(batch, None, negatives)
    out["loss"].backward()
    assert out["loss"].device.type == DEVICE.type and torch.isfinite(out["loss"])
    assert all(p.grad is None or p.grad.device.type == DEVICE.type for p in model.parameters())
    torch.optim.Adagrad(model.parameters(), lr=0.1).step()
    assert all(s.device.type == DEVICE.type for layer in out["state"] for s in layer)


def _random_lm_batch(rows: int, steps: int, n_vocab: int, host_lengths: bool = False):
    """An LMBatch of random word ids and the characters of made-up words for them; with
    ``host_lengths`` it also holds its lengths as ints (:meth:`LMBatch.keep_host_lengths`)."""
    from elmo.chars import word_to_char_ids
    from elmo.data.lm_batches import LMBatch
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, n_vocab, (rows, steps + 1), generator=g)
    chars = torch.tensor([[word_to_char_ids(f"w{int(i)}", 50) for i in row] for row in ids])
    mask = torch.ones(rows, steps, dtype=torch.bool)
    batch = LMBatch(fwd_chars=chars[:, :steps], bwd_chars=chars[:, 1:].flip(1), fwd_targets=ids[:, 1:],
                    bwd_targets=ids[:, :steps].flip(1), fwd_mask=mask, bwd_mask=mask.clone(),
                    lengths=torch.full((rows,), steps, dtype=torch.long))
    return batch.keep_host_lengths([steps] * rows) if host_lengths else batch


@contextlib.contextmanager
def _sync_debug(mode: str):
    """torch's sync debug mode ``mode`` inside ("error": a wait for the GPU raises; "default":
    allowed) on a GPU; nothing on the CPU (ELMO_TEST_DEVICE=cpu)."""
    if DEVICE.type != "cuda":
        yield
        return
    before = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(before)


@pytest.mark.parametrize("settings", [dict(layout="packed", n_negative=20, state_reset_every=3),
                                      dict(layout="bucketed", n_negative=20)])
def test_a_trainer_step_waits_for_the_device_once_besides_the_net(tmp_path, monkeypatch, settings):
    """Trainer.step under sync debug mode "error" but for the net's forward and backward
    (their data-sized operators wait: README, "GPU") and the one read of the loss and the
    gradient norm together: the batch's and negatives' copies (pinned), the state reset, the
    clip, the skip decision, Adagrad and the bookkeeping queue their work without a wait."""
    from elmo.training import trainer
    from tests.training_helpers import NetAside, training_run
    run = training_run(tmp_path, device=str(DEVICE), **settings)
    run.net = NetAside(run.net, lambda: _sync_debug("default"))
    reads, read = [], trainer.read_step_figures

    def read_once(*args):
        reads.append(1)
        with _sync_debug("default"):
            return read(*args)

    monkeypatch.setattr(trainer, "read_step_figures", read_once)
    for _ in range(4):   # (the third resets rows of the packed layout's carried state)
        with _sync_debug("error"):
            run.step()
    assert len(reads) == 4 and run.window["n"] == 4
    assert run.model.softmax.weight.device.type == DEVICE.type
