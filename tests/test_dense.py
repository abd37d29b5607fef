"""The highway's and the sampled softmax's products through oneDNN, against PyTorch's own."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from elmo import runtime
from elmo.modules import dense
from elmo.modules.char_cnn import Highway
from elmo.modules.softmax import _SampledLoss

needs_onednn = pytest.mark.skipif(not dense._onednn_linear_available(),
                                  reason="this PyTorch has no oneDNN linear operator")


@pytest.fixture
def backend(monkeypatch):
    """Sets elmo.modules.dense.BACKEND for one test (restored afterwards)."""
    def set_backend(name: str) -> None:
        monkeypatch.setattr(dense, "BACKEND", name)
    return set_backend


def _close(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Equal up to the summation order of two float32 GEMM kernels: 1e-5 of the largest value
    (the kernels differ by about 1e-6 on 2048-long sums; this is ~100 float32 ulps)."""
    got, want = got.detach(), want.detach()
    return got.shape == want.shape and float((got - want).abs().max()) <= 1e-5 * float(want.abs().max())


def _leaves(*tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


@needs_onednn
@pytest.mark.parametrize("shape", [(37, 64), (3, 5, 64), (2, 32, 64)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_values_and_gradients_equal_f_linear(backend, shape, with_bias):
    backend("onednn")
    torch.manual_seed(len(shape))
    x, weight, bias = torch.randn(*shape), torch.randn(48, 64), torch.randn(48)
    ours, plain = _leaves(x, weight, bias), _leaves(x, weight, bias)
    assert dense.onednn_wanted(ours[0])
    got = dense.linear(ours[0], ours[1], ours[2] if with_bias else None)
    want = F.linear(plain[0], plain[1], plain[2] if with_bias else None)
    assert _close(got, want)
    upstream = torch.randn(want.shape)
    (got * upstream).sum().backward()
    (want * upstream).sum().backward()
    for a, b in zip(ours[:2], plain[:2]):
        assert _close(a.grad, b.grad)
    if with_bias:
        assert _close(ours[2].grad, plain[2].grad)
    else:
        assert ours[2].grad is None


@needs_onednn
def test_strided_operands_and_empty_batches(backend):
    backend("onednn")
    torch.manual_seed(1)
    a, b = torch.randn(64, 30), torch.randn(64, 20)
    # transposed views, as the backward passes them
    assert _close(dense.onednn_mm(a.t(), b.t()), a.t() @ b)
    empty = dense.linear(torch.randn(0, 20).requires_grad_(), torch.randn(7, 20), torch.ones(7))
    assert empty.shape == (0, 7)
    assert dense.onednn_mm(torch.randn(4, 0), torch.randn(7, 0), torch.ones(7)).eq(1).all()


@needs_onednn
def test_nan_reaches_the_output(backend):
    backend("onednn")
    x = torch.randn(5, 16)
    x[2, 3] = float("nan")
    out = dense.linear(x, torch.randn(8, 16), torch.zeros(8))
    assert out[2].isnan().all() and not out[[0, 1, 3, 4]].isnan().any()


def test_which_products_go_through_onednn(backend, monkeypatch):
    x = torch.randn(4, 8)
    backend("default")
    assert not dense.onednn_wanted(x)
    if dense._onednn_linear_available():
        backend("auto")
        monkeypatch.setattr(dense, "cpu_vendor", lambda: "AuthenticAMD")
        assert dense.onednn_wanted(x)
        assert not dense.onednn_wanted(x.double())          # float32 only
        with torch.autocast("cpu", dtype=torch.bfloat16):   # autocast casts for F.linear
            assert not dense.onednn_wanted(x)
            assert dense.linear(x, torch.randn(3, 8)).dtype == torch.bfloat16
        for other in ("GenuineIntel", "unknown"):           # MKL's own processors; Arm
            monkeypatch.setattr(dense, "cpu_vendor", lambda: other)
            assert not dense.onednn_wanted(x)
    backend("fast")
    with pytest.raises(ValueError, match="BACKEND"):
        dense.onednn_wanted(x)


def test_without_onednn_it_is_f_linear(backend, monkeypatch):
    backend("onednn")
    monkeypatch.setattr(dense, "_onednn_linear_available", lambda: False)
    x, w = torch.randn(6, 8), torch.randn(3, 8)
    assert not dense.onednn_wanted(x)
    assert torch.equal(dense.linear(x, w), F.linear(x, w))


@needs_onednn
def test_highway_and_sampled_softmax_agree_across_backends(backend):
    torch.manual_seed(2)
    highway = Highway(32, 2)
    x = torch.randn(9, 32)
    results = {}
    for name in ("default", "onednn"):
        backend(name)
        leaf = x.clone().requires_grad_()
        highway.zero_grad()
        out = highway(leaf)
        out.square().sum().backward()
        results[name] = [out.detach(), leaf.grad] + [p.grad.clone() for p in highway.parameters()]
    assert all(_close(a, b) for a, b in zip(results["onednn"], results["default"]))

    hidden, weight, bias, true = torch.randn(10, 16), torch.randn(40, 16), torch.randn(40), torch.randn(10)
    hits = torch.full((10,), -1)
    hits[1], hits[6] = 3, 0
    losses = {}
    for name in ("default", "onednn"):
        backend(name)
        h = hidden.clone().requires_grad_()
        loss = _SampledLoss.apply(h, weight, bias, true, hits, 4)
        loss.sum().backward()
        losses[name] = (loss.detach(), h.grad)
    assert all(_close(a, b) for a, b in zip(losses["onednn"], losses["default"]))


def test_cpu_vendor_reads_the_first_processor(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n\n"
                    "processor\t: 1\nvendor_id\t: GenuineIntel\n", encoding="utf-8")
    assert runtime.cpu_vendor(info) == "AuthenticAMD"
    (tmp_path / "none").write_text("processor\t: 0\n", encoding="utf-8")
    assert runtime.cpu_vendor(tmp_path / "none") == "unknown"
    assert runtime.cpu_vendor(tmp_path / "missing") == "unknown"


@pytest.mark.parametrize("broken", ["raises", "wrong values"])
def test_an_operator_that_changed_is_not_used(monkeypatch, broken):
    """oneDNN's linear operator is internal to PyTorch: if a version changes its arguments or
    meaning, the probe turns the path off instead of failing inside a step."""
    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        pytest.skip("this PyTorch has no oneDNN linear operator")

    def changed(x, w, b, *args):
        if broken == "raises":
            raise RuntimeError("_linear_pointwise() expected 7 arguments")
        return torch.zeros(x.shape[0], w.shape[0])

    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", changed)
    dense._onednn_linear_available.cache_clear()
    try:
        assert not dense._onednn_linear_available()
    finally:
        monkeypatch.undo()
        dense._onednn_linear_available.cache_clear()
    assert dense._onednn_linear_available()


def test_environment_variable_chooses_the_backend_at_import():
    """ELMO_DENSE_BACKEND reaches the command-line tools; a wrong value is a clear error."""
    import os
    import sys

    from tests.conftest import side_by_side
    probe = ("from elmo.modules import dense\n"
             "try:\n    print(dense.BACKEND, dense.cpu_products())\nexcept ValueError as e:\n    print(e)")
    done = side_by_side([[sys.executable, "-c", probe]] * 2,
                        envs=[{**os.environ, "ELMO_DENSE_BACKEND": value} for value in ("default", "fast")], check=True)
    right, wrong = (d.stdout for d in done)
    assert right.splitlines() == ["default PyTorch"]
    assert "ELMO_DENSE_BACKEND" in wrong and "'fast'" in wrong


@needs_onednn
def test_bfloat16_products_are_wanted_only_when_asked_for_and_native(backend):
    backend("onednn")
    x = torch.zeros(2, 3, dtype=torch.bfloat16)
    assert not dense.onednn_wanted(x)  # linear and the softmax stay with float32
    assert dense.onednn_wanted(x, bf16=True) == dense._onednn_bf16_available()
    assert not dense.onednn_wanted(x.half(), bf16=True)
    backend("default")
    assert not dense.onednn_wanted(x, bf16=True)


@needs_onednn
def test_the_probes_answer_the_same_when_first_asked_under_autocast():
    """The probes compare oneDNN with F.linear, which autocast runs in bfloat16: asked first
    inside autocast (opt-in bf16 training), they must still find oneDNN where it works."""
    probes = (dense._onednn_linear_available, dense._onednn_bf16_available, dense._onednn_packing_available)
    outside = [probe() for probe in probes]
    try:
        for probe in probes:
            probe.cache_clear()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            inside = [probe() for probe in probes]
        assert inside == outside and outside[0]
    finally:
        for probe in probes:
            probe.cache_clear()


@pytest.mark.skipif(not dense._onednn_bf16_available(), reason="oneDNN has no native bfloat16 products on this CPU")
@pytest.mark.parametrize("with_bias", [True, False])
def test_under_bf16_autocast_linear_rounds_the_rows_for_onednn(backend, monkeypatch, with_bias):
    """Opt-in bf16 training: the highway's products run in oneDNN over rows rounded up to
    ROW_MULTIPLE (PyTorch's bfloat16 products would build a kernel per row count), and give
    what autocast's F.linear gives, to bfloat16's precision, gradients included."""
    backend("auto")
    rows_seen = []
    original = dense.onednn_mm
    monkeypatch.setattr(dense, "onednn_mm", lambda a, b, bias=None: rows_seen.append(a.shape) or original(a, b, bias))
    torch.manual_seed(4)
    x, w, b = torch.randn(37, 64), torch.randn(48, 64), (torch.randn(48) if with_bias else None)
    upstream = torch.randn(37, 48)
    results = []
    for ours in (True, False):
        leaves = _leaves(x, w) + ([b.clone().requires_grad_()] if with_bias else [])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = (dense.linear if ours else F.linear)(*leaves, *([] if with_bias else [None]))
        assert out.dtype == torch.bfloat16 and out.shape == (37, 48)
        (out.float() * upstream).sum().backward()
        results.append([out] + [t.grad for t in leaves])
    assert rows_seen == [(64, 64), (64, 48), (48, 64)]  # forward, input and weight gradients
    for got, want in zip(*results):
        got, want = got.detach(), want.detach()
        assert got.dtype == want.dtype
        assert float((got.float() - want.float()).abs().max()) <= 2e-2 * float(want.float().abs().max())
    rows_seen.clear()
    backend("default")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        dense.linear(x, w, b)
    assert not rows_seen
