"""The training fast path of the LSTM (elmo/modules/lstm_autograd.py) against autograd through
the plain per-step formula (elmo.modules.lstm.run_lstm_layer), in float64: outputs, final
states and the gradients of every input, with packed variable lengths, a state carried in and
out, both directions, and clipping exactly at its boundaries."""
from __future__ import annotations

import pytest
import torch

from elmo.config import LSTMConfig
from elmo.modules import lstm as lstm_module
from elmo.modules.lstm import BiLSTMStack, Packing, run_lstm_layer
from elmo.modules.lstm_autograd import LSTMSequence, run_lstm_layer_autograd

D, H, P, I = 2, 6, 4, 5


def _inputs(lengths, seed=0, scale=1.0):
    """Packed inputs and parameters (float64, requiring grad) for rows of these lengths."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    batch_sizes = Packing.from_lengths(lengths, int(lengths.max())).batch_sizes
    n, b = sum(batch_sizes), lengths.numel()

    def r(*shape):
        return (scale * torch.randn(*shape, generator=g, dtype=torch.float64)).requires_grad_()

    return dict(layer_input=r(D, n, I), weight_ih=r(D, I, 4 * H), bias=r(D, 1, 4 * H),
                batch_sizes=batch_sizes, weight_hh=r(D, P, 4 * H), weight_proj=r(D, H, P),
                state=(r(D, b, H), r(D, b, P)))


def _run_both(args, cell_clip, proj_clip, seed=1):
    """Outputs and gradients (of a random weighting of outputs and final state) of both paths."""
    leaves = [args[k] for k in ("layer_input", "weight_ih", "bias", "weight_hh", "weight_proj")] + list(args["state"])
    results = []
    for run in (run_lstm_layer, run_lstm_layer_autograd):
        out, (c, h) = run(args["layer_input"], args["weight_ih"], args["bias"], args["batch_sizes"],
                          args["weight_hh"], args["weight_proj"], args["state"], cell_clip, proj_clip)
        g = torch.Generator().manual_seed(seed)
        loss = sum((t * torch.randn(t.shape, generator=g, dtype=t.dtype)).sum() for t in (out, c, h))
        grads = torch.autograd.grad(loss, leaves)
        results.append(([out, c, h], grads))
    return results


@pytest.mark.parametrize("lengths", [[5, 5, 5], [6, 3, 3, 1, 0], [1], [0, 2]])
@pytest.mark.parametrize("clip", [None, 0.4])
def test_fast_path_equals_autograd_through_the_plain_steps(lengths, clip):
    args = _inputs(lengths, scale=0.8)
    (ref_out, ref_grads), (out, grads) = _run_both(args, clip, clip)
    for a, b in zip(out, ref_out):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    if clip is not None:  # the test exercises the clips: some values are cut
        assert bool((ref_out[0].abs() == clip).any()) and bool((ref_out[1].abs() == clip).any())


def test_gradcheck_by_finite_differences():
    """Independent of the per-step path: numerical gradients of the function itself."""
    args = _inputs([4, 2, 2], seed=3, scale=0.5)
    gates = torch.baddbmm(args["bias"], args["layer_input"], args["weight_ih"]).detach().requires_grad_()
    c0, h0 = args["state"]

    def f(gates, w_hh, w_proj, c0, h0):
        return LSTMSequence.apply(gates, w_hh, w_proj, c0, h0, tuple(args["batch_sizes"]), 5.0, 5.0)

    assert torch.autograd.gradcheck(f, (gates, args["weight_hh"], args["weight_proj"], c0, h0))


def _boundary_args():
    """One step where cells and projected outputs land exactly on +-clip, on any CPU.

    Every gate input is +-40 (weight_ih = 0, h0 = 0), so sigmoid gives exactly 1 and tanh
    exactly +-1 in float64 whatever the implementation; with c0 = +-39 the cell is exactly
    +-40, tanh(40) = 1, and a projection that copies cells (one weight of 1 per column) makes
    h exactly +-1. So cell_clip = 40 and proj_clip = 1 sit on the boundary in both paths.
    """
    args = _inputs([1, 1], seed=5)
    sign = torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, -1.0], dtype=torch.float64)  # per cell unit
    with torch.no_grad():
        args["weight_ih"].zero_()
        args["bias"].fill_(40.0)
        args["bias"][..., H:2 * H] = 40.0 * sign          # tanh(j) = +-1
        args["state"][0].copy_(39.0 * sign)               # c0 = +-39: c = +-40
        args["state"][1].zero_()
        args["weight_proj"].zero_()
        for p in range(P):
            args["weight_proj"][:, p, p] = 1.0
    return args, 40.0, 1.0


def test_clip_exactly_at_the_boundary_passes_the_gradient_like_clamp():
    args, cell_clip, proj_clip = _boundary_args()
    (ref_out, ref_grads), (out, grads) = _run_both(args, cell_clip, proj_clip)
    assert bool((out[1].detach().abs() == cell_clip).all()) and bool((out[0].detach().abs() == proj_clip).all())
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    # clamp's convention: a value on the boundary passes its gradient (to c0 through the cell
    # clip, to weight_proj through the projection clip), so a clip a hair tighter, which cuts
    # it, leaves none; a path using x < clip would have failed the comparison above.
    grad_c0, grad_proj = grads[5], grads[4]
    assert bool((grad_c0 != 0).all()) and bool((grad_proj != 0).any())
    tight_cell = _run_both(args, cell_clip * (1 - 1e-9), proj_clip)[1][1]
    tight_proj = _run_both(args, cell_clip, proj_clip * (1 - 1e-9))[1][1]
    assert bool((tight_cell[5] == 0).all()) and bool((tight_proj[4] == 0).all())


def test_bilstm_stack_training_path_equals_the_per_step_path(monkeypatch):
    """The whole stack: both directions with their own inputs, skip connections, dropout off,
    a carried state in and the final state out, variable lengths."""
    torch.manual_seed(0)
    stack = BiLSTMStack(LSTMConfig(H, P, n_layers=2, cell_clip=0.5, proj_clip=0.5), input_dim=I).double()
    lengths = torch.tensor([4, 1, 0, 4, 2])
    x = torch.randn(5, 4, I, dtype=torch.float64, requires_grad=True)
    xb = torch.randn(5, 4, I, dtype=torch.float64, requires_grad=True)
    state = [(torch.randn(2, 5, H, dtype=torch.float64), torch.randn(2, 5, P, dtype=torch.float64))
             for _ in range(2)]
    params = list(stack.parameters()) + [x, xb]
    results = []
    for fast in (False, True):
        monkeypatch.setattr(lstm_module, "wants_fast_path", lambda *a, fast=fast: fast)
        layers, final = stack(x, lengths, state, backward_inputs=xb)
        loss = sum((t * (k + 1) * torch.linspace(-1, 1, t.numel(), dtype=t.dtype).view(t.shape)).sum()
                   for k, t in enumerate(layers + [s for pair in final for s in pair]))
        results.append((layers, final, torch.autograd.grad(loss, params)))
    (layers0, final0, g0), (layers1, final1, g1) = results
    for a, b in zip(layers1, layers0):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    for (c1, h1), (c0, h0) in zip(final1, final0):
        torch.testing.assert_close(c1, c0, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(h1, h0, rtol=1e-12, atol=1e-12)
    for a, b in zip(g1, g0):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_training_uses_the_fast_path_and_inference_does_not(monkeypatch):
    calls = []
    original = LSTMSequence.apply
    monkeypatch.setattr(LSTMSequence, "apply", lambda *a: calls.append(1) or original(*a))
    stack = BiLSTMStack(LSTMConfig(H, P, n_layers=2, cell_clip=None, proj_clip=None), input_dim=I)
    x = torch.randn(3, 4, I)
    with torch.no_grad():
        stack(x, torch.tensor([4, 2, 1]))
    assert calls == []
    stack(x, torch.tensor([4, 2, 1]))
    assert len(calls) == 2


def test_under_bf16_autocast_the_fast_path_runs_in_bf16_and_matches(monkeypatch):
    """Opt-in bf16 training: the layer runs as one function in bf16; its outputs and gradients
    are those of the per-step path under autocast and of float32, to bf16's precision."""
    calls = []
    original = LSTMSequence.apply
    monkeypatch.setattr(LSTMSequence, "apply", lambda *a: calls.append(a[0].dtype) or original(*a))
    torch.manual_seed(0)
    stack = BiLSTMStack(LSTMConfig(16, 8, n_layers=2, cell_clip=3.0, proj_clip=3.0), input_dim=I)
    lengths = torch.tensor([6, 3, 6, 1])
    x = torch.randn(4, 6, I, requires_grad=True)
    params = list(stack.parameters()) + [x]
    weights = torch.linspace(-1, 1, 4 * 6 * 16).view(4, 6, 16)
    results = {}
    for name, fast, bf16 in (("fp32", True, False), ("per-step", False, True), ("fast", True, True)):
        monkeypatch.setattr(lstm_module, "wants_fast_path", lambda *a, fast=fast: fast)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            layers, _ = stack(x, lengths)
        loss = (layers[-1].float() * weights).sum()
        results[name] = (layers[-1].detach().float(), torch.autograd.grad(loss, params), layers[-1].dtype)
    assert calls == [torch.float32] * 2 + [torch.bfloat16] * 2
    assert results["fast"][2] == results["per-step"][2] == torch.bfloat16
    exact_out, exact_grads, _ = results["fp32"]
    for name in ("per-step", "fast"):
        out, grads, _ = results[name]
        assert float((out - exact_out).norm() / exact_out.norm()) < 0.03, name
        for g, e in zip(grads, exact_grads):
            assert g.dtype == e.dtype == torch.float32  # the parameters' gradients stay float32
            assert float((g - e).norm() / e.norm()) < 0.05, name
