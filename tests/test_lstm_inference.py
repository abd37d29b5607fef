"""The no-grad single-sequence LSTM path and the opt-in int8 recurrent weights."""
import pytest
import torch

import elmo.modules.lstm as lstm_module
import elmo.modules.lstm_inference as lstm_inference
from elmo import batch_to_ids
from elmo.modules import dense
from elmo.modules.lstm_inference import Int8Weights, int8_supported
from tests.conftest import random_bilm

SENTENCE = "the dog bit the man because it was hungry and the man ran away .".split() * 3
needs_int8 = pytest.mark.skipif(not int8_supported(torch.device("cpu")),
                                reason="this PyTorch lacks torch._weight_int8pack_mm on CPU")


def run(bilm, sentences, fast=True):
    lstm_module.SINGLE_SEQUENCE_PATH = fast
    try:
        with torch.no_grad():
            return bilm(batch_to_ids(sentences))["activations"]
    finally:
        lstm_module.SINGLE_SEQUENCE_PATH = True


@pytest.mark.parametrize("skip", [True, False])
def test_single_sequence_path_equals_the_general_path(skip, monkeypatch):
    calls = []
    original = lstm_module.run_single_sequence
    monkeypatch.setattr(lstm_module, "run_single_sequence", lambda *a, **k: calls.append(1) or original(*a, **k))
    bilm = random_bilm(seed=3, skip=skip)
    fast = run(bilm, [SENTENCE])
    assert len(calls) == bilm.lstm.n_layers  # the path was taken, once per layer
    slow = run(bilm, [SENTENCE], fast=False)
    assert len(calls) == bilm.lstm.n_layers
    assert all(torch.equal(a, b) for a, b in zip(fast, slow))


def test_single_sequence_path_carries_state_like_the_general_path():
    """Stateful: the second call starts from the first call's final state, on both paths."""
    outs = []
    for fast in (True, False):
        bilm = random_bilm(seed=4)
        bilm.stateful = True
        run(bilm, [SENTENCE[:7]], fast)
        outs.append((run(bilm, [SENTENCE[7:12]], fast), bilm.get_states()))
    (a, state_a), (b, state_b) = outs
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert all(torch.equal(x, y) for sa, sb in zip(state_a, state_b) for x, y in zip(sa, sb))


@needs_int8
@pytest.mark.parametrize("n, k", [(48, 6), (64, 40), (70, 130), (512, 64)])
def test_int8_weights_approximate_the_float_product(n, k):
    torch.manual_seed(0)
    w = torch.randn(2, n, k)
    x = torch.randn(2, 3, k)
    exact = torch.bmm(x, w.transpose(1, 2))
    approx = Int8Weights(w).product(x)
    assert approx.shape == exact.shape and approx.dtype == torch.float32
    # int8 rows (1/254 of a row's largest weight) and a bfloat16 input (2^-9 relative)
    err = (approx - exact).abs().max() / exact.abs().max()
    assert 0 < err < 0.02, err


@needs_int8
def test_int8_mode_is_opt_in_close_and_the_same_alone_or_in_a_batch():
    bilm = random_bilm(seed=5)
    exact = run(bilm, [SENTENCE])
    assert not bilm.lstm.int8_enabled
    bilm.lstm.use_int8()
    low = run(bilm, [SENTENCE])
    assert torch.equal(low[0], exact[0])  # the character CNN is untouched
    for a, b in zip(low[1:], exact[1:]):
        dev = float((a - b).abs().max())
        assert 0 < dev < 0.05 * float(b.abs().max()), dev
    batched = run(bilm, [["a", "short", "one"], SENTENCE, ["x"]])
    for a, b in zip(low, batched):
        assert torch.allclose(a[0], b[1], atol=1e-5)
    bilm.lstm.use_int8(False)
    assert all(torch.equal(a, b) for a, b in zip(run(bilm, [SENTENCE]), exact))


@needs_int8
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_int8_mode_on_a_model_of_another_dtype_runs_batches_in_that_dtype(dtype):
    """use_int8 on a bfloat16 (or float64) model: the products' float32 results met the next
    layer's bfloat16 W_ih, and a batch of two sentences failed inside torch.baddbmm."""
    exact = run(random_bilm(seed=5), [SENTENCE])
    bilm = random_bilm(seed=5).to(dtype)
    bilm.lstm.use_int8()
    alone = run(bilm, [SENTENCE])
    batched = run(bilm, [["a", "short", "one"], SENTENCE, ["x"]])
    for a, b, want in zip(alone, batched, exact):
        assert a.dtype == b.dtype == dtype
        scale = float(want.abs().max())
        # int8 rows and bfloat16 states (2^-9 relative), as the float32 model's int8 test
        assert float((a[0].float() - want[0]).abs().max()) < 0.05 * scale
        assert float((b[1].float() - want[0]).abs().max()) < 0.05 * scale


@needs_int8
def test_int8_weights_follow_weight_changes_and_refuse_autograd():
    bilm = random_bilm(seed=6)
    bilm.lstm.use_int8()
    before = run(bilm, [SENTENCE])
    with torch.no_grad():
        bilm.lstm.layers[1].weight_hh.mul_(0.5)
    after = run(bilm, [SENTENCE])
    assert not torch.allclose(before[2], after[2])
    fresh = random_bilm(seed=6)
    with torch.no_grad():
        fresh.lstm.layers[1].weight_hh.mul_(0.5)
    fresh.lstm.use_int8()
    assert all(torch.equal(a, b) for a, b in zip(after, run(fresh, [SENTENCE])))
    with pytest.raises(RuntimeError, match="no_grad"):
        bilm(batch_to_ids([SENTENCE]))


@needs_int8
@pytest.mark.parametrize("switch_to", [True, False])
def test_a_mode_switch_during_a_call_reaches_only_later_calls(switch_to, monkeypatch):
    """Another thread's use_int8() (or use_int8(False)) while a call runs: the call read each
    layer's mode as it came to it, so its first layer ran in one mode and the others in the
    other, vectors of neither mode. Simulated here by switching right after the first layer."""
    bilm = random_bilm(seed=7)
    bilm.lstm.use_int8(not switch_to)
    before = run(bilm, [SENTENCE])
    original = lstm_module.run_lstm_layer

    def switching(*args, **kwargs):
        result = original(*args, **kwargs)
        bilm.lstm.use_int8(switch_to)   # as another thread would, between two layers
        return result
    monkeypatch.setattr(lstm_module, "run_lstm_layer", switching)
    during = run(bilm, [SENTENCE])
    assert bilm.lstm.int8_enabled == switch_to
    assert all(torch.equal(a, b) for a, b in zip(during, before))   # the mode the call began in
    monkeypatch.setattr(lstm_module, "run_lstm_layer", original)
    bilm.lstm.use_int8(not switch_to)
    assert all(torch.equal(a, b) for a, b in zip(run(bilm, [SENTENCE]), before))


def test_recurrent_weight_rows_match_the_stored_layout_and_follow_weight_changes(monkeypatch):
    """One-row steps multiply by a re-laid copy of W_hh: the same products as the stored layout
    (float rounding apart), and a copy made again after the weights change, never a stale one."""
    bilm = random_bilm(seed=5)
    rows = run(bilm, [SENTENCE])
    monkeypatch.setattr(lstm_module, "RECURRENT_ROWS", False)
    stored = run(bilm, [SENTENCE])
    monkeypatch.setattr(lstm_module, "RECURRENT_ROWS", True)
    assert all(torch.allclose(a, b, rtol=0, atol=1e-5) for a, b in zip(rows, stored))
    layer = bilm.lstm.layers[0]
    copy_before = layer.recurrent_weight_rows()
    assert copy_before.is_contiguous() and torch.equal(copy_before, layer.weight_hh.detach().transpose(1, 2))
    assert layer.recurrent_weight_rows() is copy_before  # made once while W_hh is unchanged
    with torch.no_grad():
        for layer in bilm.lstm.layers:
            layer.weight_hh.mul_(-0.5)               # in place: the same address, a new version
    changed = run(bilm, [SENTENCE])
    monkeypatch.setattr(lstm_module, "RECURRENT_ROWS", False)
    changed_stored = run(bilm, [SENTENCE])
    assert all(torch.allclose(a, b, rtol=0, atol=1e-5) for a, b in zip(changed, changed_stored))
    assert not torch.allclose(changed[1], rows[1], atol=1e-3)  # the change did reach the outputs
    assert torch.equal(bilm.lstm.layers[0].recurrent_weight_rows(),
                       bilm.lstm.layers[0].weight_hh.detach().transpose(1, 2))


@pytest.mark.parametrize("make_optimizer", [
    lambda params: torch.optim.Adagrad(params, lr=0.5, fused=True),
    lambda params: torch.optim.AdamW(params, lr=0.5, fused=True),
    lambda params: torch.optim.SGD(params, lr=0.5),
], ids=["adagrad-fused", "adamw-fused", "sgd"])
def test_inference_copies_follow_a_fused_optimizer_step(make_optimizer):
    """PyTorch's fused kernels update the weights without bumping their version, so the one-row
    copy of W_hh made before a fused step was used after it: one sentence then ran the new
    weights with the old recurrent ones, silently (elmo train's validation did, with its fused
    Adagrad). weight_cache's optimizer hook counts such a step."""
    bilm = random_bilm(seed=5)
    run(bilm, [SENTENCE])                                  # the copies are made
    optimizer = make_optimizer(list(bilm.parameters()))
    bilm(batch_to_ids([SENTENCE, SENTENCE[:5]]))["activations"][-1].sum().backward()
    optimizer.step()
    after = run(bilm, [SENTENCE])
    bilm.lstm.clear_inference_caches()
    fresh = run(bilm, [SENTENCE])
    assert all(torch.equal(a, b) for a, b in zip(after, fresh))


def test_recurrent_weight_rows_are_not_saved_and_not_used_in_training():
    bilm = random_bilm(seed=6)
    run(bilm, [SENTENCE])
    assert not any("rows" in k for k in bilm.state_dict())
    x = batch_to_ids([SENTENCE[:5]])
    bilm(x)["activations"][-1].sum().backward()  # one row with autograd: the training path
    assert bilm.lstm.layers[0].weight_hh.grad is not None


def float32_rounding_apart(layers, expected_layers) -> bool:
    """Each layer within 1e-5 of the expected one's largest magnitude: two float32 GEMM kernels
    that sum in another order, nothing more."""
    return all(float((a - b).abs().max()) <= 1e-5 * float(b.abs().max())
               for a, b in zip(layers, expected_layers))


needs_onednn = pytest.mark.skipif(not dense._onednn_linear_available(),
                                  reason="this PyTorch has no oneDNN linear operator")


@pytest.fixture
def one_row_onednn(monkeypatch):
    """oneDNN for every per-step product of the LSTM without autograd (one row and more),
    whatever the CPU and the weights' size; returns the list to which each oneDNN product appends its weight's shape."""
    monkeypatch.setattr(dense, "BACKEND", "onednn")
    monkeypatch.setattr(dense, "RECURRENT_MIN_BYTES", 0)
    calls = []
    for module in (lstm_inference, dense):  # the single-sequence path's and per_direction_mm's
        monkeypatch.setattr(module, "onednn_mm",
                            lambda *a, _product=module.onednn_mm: calls.append(tuple(a[1].shape)) or _product(*a))
    return calls


@needs_onednn
def test_one_row_products_in_onednn_give_the_same_vectors_on_both_paths(one_row_onednn, monkeypatch):
    bilm = random_bilm(seed=7)
    fast = run(bilm, [SENTENCE])
    assert one_row_onednn, "the single-sequence path did not use oneDNN"
    assert all(layer._hh_rows.value is None for layer in bilm.lstm.layers)  # no re-laid W_hh needed
    assert all(torch.equal(a, b) for a, b in zip(fast, run(bilm, [SENTENCE], fast=False)))
    monkeypatch.setattr(dense, "RECURRENT_ONEDNN", False)
    pytorch = run(bilm, [SENTENCE])
    # two GEMM kernels, another order of the sums: float32 rounding only
    assert float32_rounding_apart(fast, pytorch)


@needs_onednn
def test_one_row_products_in_onednn_in_a_batch_whose_rows_end(one_row_onednn, monkeypatch):
    """A batch of a long and a short sentence: the general path's steps run two rows, then one."""
    bilm = random_bilm(seed=8)
    batch = [SENTENCE, SENTENCE[:4]]
    with_onednn = run(bilm, batch)
    steps = len(SENTENCE) + 2  # the sentence boundaries too
    # every step of every layer: W_hh and W_proj, one product per direction
    layer = bilm.lstm.layers[0]
    recurrent = [s for s in one_row_onednn if s in (layer.weight_hh.shape[1:], layer.weight_proj.shape[1:])]
    assert len(recurrent) == len(bilm.lstm.layers) * steps * 2 * 2
    monkeypatch.setattr(dense, "RECURRENT_ONEDNN", False)
    pytorch = run(bilm, batch)
    assert float32_rounding_apart(with_onednn, pytorch)


needs_packing = pytest.mark.skipif(not dense._onednn_packing_available(),
                                   reason="this PyTorch's oneDNN cannot lay out a weight in its own format")


def _laid_out_and_stored(bilm, batch, monkeypatch):
    """The layers with the weights in oneDNN's layout, then in the stored layout (the switch
    is left on)."""
    monkeypatch.setattr(dense, "RECURRENT_PACKED", True)
    laid_out = run(bilm, batch)
    monkeypatch.setattr(dense, "RECURRENT_PACKED", False)
    stored = run(bilm, batch)
    monkeypatch.setattr(dense, "RECURRENT_PACKED", True)
    return laid_out, stored


@needs_packing
def test_steps_of_several_rows_read_onednn_packed_weights_that_follow_weight_changes(one_row_onednn, monkeypatch):
    """Steps of two rows or more multiply by W_hh and W_proj in oneDNN's layout: the same
    vectors as the stored layout (float rounding apart), remade after the weights change."""
    bilm = random_bilm(seed=9)
    batch = [SENTENCE, SENTENCE[:20], SENTENCE[:4]]
    one_row_onednn.clear()
    packed, stored = _laid_out_and_stored(bilm, batch, monkeypatch)
    layer = bilm.lstm.layers[0]
    first = layer._packed.value
    assert first is not None and all(w.is_mkldnn for w in first[0] + first[1])
    assert float32_rounding_apart(packed, stored)
    assert run(bilm, batch)[1].equal(packed[1]) and layer._packed.value is first  # made once
    with torch.no_grad():
        for each in bilm.lstm.layers:
            each.weight_proj.mul_(-0.5)  # in place: the same address, a new version
    changed, changed_stored = _laid_out_and_stored(bilm, batch, monkeypatch)
    assert layer._packed.value is not first
    assert not torch.allclose(changed[1], packed[1], atol=1e-3)  # the change reached the outputs
    assert float32_rounding_apart(changed, changed_stored)
    # a write through .data is not counted by PyTorch: clearing the caches makes them anew
    for each in bilm.lstm.layers:
        each.weight_hh.data.mul_(0.5)
    bilm.lstm.clear_inference_caches()
    assert layer._packed.value is None
    assert float32_rounding_apart(*_laid_out_and_stored(bilm, batch, monkeypatch))


@needs_packing
def test_a_model_with_packed_weights_can_be_copied_and_saved(one_row_onednn, tmp_path):
    """oneDNN's packed tensors cannot be copied or pickled: a copy starts without them."""
    import copy
    bilm = random_bilm(seed=10)
    batch = [SENTENCE, SENTENCE[:7]]
    before = run(bilm, batch)
    assert bilm.lstm.layers[0]._packed.value is not None
    twin = copy.deepcopy(bilm)
    assert twin.lstm.layers[0]._packed.value is None
    assert all(torch.equal(a, b) for a, b in zip(before, run(twin, batch)))
    torch.save(bilm, tmp_path / "whole.pt")  # the whole module, as some users save it
    assert not any("packed" in k for k in bilm.state_dict())


def test_packing_is_only_for_float32_steps_of_two_rows_or_more(monkeypatch):
    assert not dense.recurrent_packed(torch.randn(2, 1, 8))
    assert dense.recurrent_packed(torch.randn(2, 2, 8)) == dense._onednn_packing_available()
    assert not dense.recurrent_packed(torch.randn(2, 4, 8).bfloat16())
    monkeypatch.setattr(dense, "RECURRENT_PACKED", False)
    assert not dense.recurrent_packed(torch.randn(2, 4, 8))


@needs_onednn
def test_one_row_products_leave_onednn_where_gradients_or_other_dtypes_need_it(one_row_onednn, monkeypatch):
    x, weight = torch.randn(2, 1, 8), torch.randn(2, 8, 16)
    assert dense.recurrent_in_onednn(x, weight)
    assert not dense.recurrent_in_onednn(x.requires_grad_(), weight)  # autograd records
    with torch.no_grad():
        assert dense.recurrent_in_onednn(x, weight)
    assert not dense.recurrent_in_onednn(x.detach().bfloat16(), weight)  # mixed dtypes
    # bfloat16 where oneDNN multiplies it natively (AVX512-BF16, AMX)
    assert dense.recurrent_in_onednn(x.detach().bfloat16(), weight.bfloat16()) == dense._onednn_bf16_available()
    monkeypatch.setattr(dense, "RECURRENT_MIN_BYTES", 4 << 20)
    assert not dense.recurrent_in_onednn(x.detach(), weight)  # small weights stay with PyTorch
    assert dense.recurrent_in_onednn(x.detach(), torch.randn(2, 512, 2048))  # 4 MiB a direction
    monkeypatch.setattr(dense, "BACKEND", "default")
    assert not dense.recurrent_in_onednn(x.detach(), torch.randn(2, 512, 2048))


@pytest.mark.skipif(not dense._onednn_bf16_available(), reason="oneDNN has no native bfloat16 products on this CPU")
def test_one_row_products_in_onednn_for_the_bfloat16_model(one_row_onednn, monkeypatch):
    bilm = random_bilm(seed=9).to(torch.bfloat16)
    fast = run(bilm, [SENTENCE])
    assert one_row_onednn and fast[-1].dtype == torch.bfloat16
    assert all(torch.equal(a, b) for a, b in zip(fast, run(bilm, [SENTENCE], fast=False)))
    monkeypatch.setattr(dense, "RECURRENT_ONEDNN", False)
    pytorch = run(bilm, [SENTENCE])
    # both accumulate in float32 and round to bfloat16 (8 bits): a few of its roundings apart
    assert all(float((a - b).abs().max()) <= 0.05 * float(b.abs().max()) for a, b in zip(fast, pytorch))


def test_a_bfloat16_model_keeps_w_hh_in_its_stored_layout_for_one_row(monkeypatch):
    """The re-laid W_hh is for float32 only: for bfloat16 the stored layout's matrix-vector
    product was the faster one, and no copy of W_hh is made."""
    monkeypatch.setattr(dense, "RECURRENT_ONEDNN", False)   # the PyTorch products on any CPU
    bilm = random_bilm(seed=10)
    assert lstm_module.one_row_relaid(bilm.lstm.layers[0])
    low = bilm.to(torch.bfloat16)
    assert not lstm_module.one_row_relaid(low.lstm.layers[0])
    made = []
    monkeypatch.setattr(type(low.lstm.layers[0]), "recurrent_weight_rows", lambda self: made.append(1))
    layers = run(low, [SENTENCE])
    assert not made and layers[-1].dtype == torch.bfloat16
    assert all(torch.equal(a, b) for a, b in zip(layers, run(low, [SENTENCE], fast=False)))


@needs_int8
def test_int8_mode_on_a_device_without_the_kernel_says_so_at_the_call(monkeypatch):
    """use_int8() on the CPU, then the model moved to a device whose PyTorch has no int8
    kernel (older versions have it for the CPU only; stood in for here by a probe that finds
    none): the call says so in one line instead of PyTorch's NotImplementedError mid-step."""
    bilm = random_bilm(seed=5)
    bilm.lstm.use_int8()
    monkeypatch.setattr(lstm_inference, "_int8_kernel_on", lambda device: False, raising=False)
    with pytest.raises(RuntimeError, match=r"int8 weights need .* on cpu.*use_int8\(False\)"):
        run(bilm, [SENTENCE])
    bilm.lstm.use_int8(False)
    run(bilm, [SENTENCE])   # (float weights need no such kernel)
