"""The packed biLSTM (elmo/modules/lstm.py) against the plain per-step reference
(tests/reference_bilm.py), in float64: outputs and final states of both directions, with
variable lengths (empty rows included), a carried initial state, clipping that binds, inputs
longer than one chunk of input products, chunks cut by their byte budget, one row (the
matrix-vector path), and the training path as well as inference."""
from __future__ import annotations

import pytest
import torch

from elmo.chars import batch_to_ids
from elmo.config import LSTMConfig
import elmo.modules.lstm as lstm_module
from elmo.modules.lstm import INPUT_CHUNK_STEPS, BiLSTMStack, input_chunks
from reference_bilm import ReferenceBiLM, reference_lstm_stack
from tests.conftest import random_bilm

H, P, I = 7, 5, 6
TOL = dict(rtol=1e-10, atol=1e-12)  # float64: the two orders of summation agree far closer


def _stack(seed=0, scale=0.4, **config) -> BiLSTMStack:
    torch.manual_seed(seed)
    stack = BiLSTMStack(LSTMConfig(H, P, **{"n_layers": 2, **config}), input_dim=I).double()
    with torch.no_grad():
        for p in stack.parameters():
            p.uniform_(-scale, scale)  # nonzero biases too
    return stack.eval()


def _case(lengths, steps, seed=1, with_state=False, n_layers=2):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    x = torch.randn(len(lengths), steps, I, generator=g, dtype=torch.float64)
    state = None
    if with_state:
        state = [(torch.randn(2, len(lengths), H, generator=g, dtype=torch.float64),
                  torch.randn(2, len(lengths), P, generator=g, dtype=torch.float64)) for _ in range(n_layers)]
    mask = torch.arange(steps)[None, :] < lengths[:, None]
    return x, lengths, mask, state


def _assert_same(stack, x, lengths, mask, state):
    layers, finals = stack(x, lengths, state)
    want_layers, want_finals = reference_lstm_stack(stack, x, mask, state)
    assert len(layers) == len(want_layers) == stack.n_layers
    for got, want in zip(layers, want_layers):
        torch.testing.assert_close(got, want, **TOL)
    for (c, h), (want_c, want_h) in zip(finals, want_finals):
        torch.testing.assert_close(c, want_c, **TOL)
        torch.testing.assert_close(h, want_h, **TOL)
    return layers


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("skip", [True, False])
def test_stack_equals_per_step_reference(with_state, skip):
    stack = _stack(cell_clip=3.0, proj_clip=3.0, use_skip_connections=skip)
    x, lengths, mask, state = _case([5, 1, 0, 5, 3], 5, with_state=with_state)
    with torch.no_grad():
        layers = _assert_same(stack, x, lengths, mask, state)
    assert float(layers[0][2].abs().max()) == 0.0  # the empty row has no output


def test_clipping_binds_and_still_agrees():
    stack = _stack(scale=2.0, cell_clip=0.3, proj_clip=0.2)
    x, lengths, mask, state = _case([6, 4, 2], 6, with_state=True)
    with torch.no_grad():
        layers = _assert_same(stack, x, lengths, mask, state)
    top_forward = layers[0][..., :P]
    assert float(top_forward.abs().max()) == pytest.approx(0.2)  # the projection clip was reached


def test_longer_than_one_chunk_and_one_row():
    stack = _stack(cell_clip=None, proj_clip=None)
    steps = INPUT_CHUNK_STEPS + 9
    x, lengths, mask, state = _case([steps, INPUT_CHUNK_STEPS + 1, 3], steps)
    with torch.no_grad():
        _assert_same(stack, x, lengths, mask, state)
        one = _case([steps], steps, seed=2, with_state=True)  # batch 1: matrix-vector products
        _assert_same(stack, *one)


def test_input_chunks_respect_both_limits_and_cover_every_step(monkeypatch):
    monkeypatch.setattr(lstm_module, "INPUT_CHUNK_STEPS", 4)
    monkeypatch.setattr(lstm_module, "INPUT_CHUNK_BYTES", 100)
    sizes = [6, 6, 5, 3, 3, 3, 3, 3, 3, 2, 1]
    # 10 bytes a row, W_ih smaller than the budget: at most 10 rows and 4 steps a chunk
    runs = input_chunks(sizes, row_bytes=10, weight_bytes=40)
    assert runs == [(0, 1), (1, 2), (2, 4), (4, 7), (7, 11)]  # the last one: 4 steps, 9 rows
    assert [t for a, b in runs for t in range(a, b)] == list(range(len(sizes)))
    assert input_chunks([1] * 9, row_bytes=10, weight_bytes=40) == [(0, 4), (4, 8), (8, 9)]
    # a step above the budget is a chunk of its own
    assert input_chunks(sizes, row_bytes=1000, weight_bytes=40) == [(t, t + 1) for t in range(len(sizes))]
    # a W_ih larger than the budget raises it: chunks never read W_ih more than their size
    assert input_chunks(sizes, row_bytes=10, weight_bytes=1000)[0] == (0, 4)
    assert input_chunks([], row_bytes=10, weight_bytes=40) == []


@pytest.mark.parametrize("budget_rows", [7, 12])
def test_chunks_cut_by_bytes_still_agree(monkeypatch, budget_rows):
    """Input products computed a few rows at a time give the same layers and states. The
    steps run 5, 4, 4, 4, 3, 3, 2, 2, 2 rows: 7 rows a chunk makes chunks of one step and of
    two or three; 12 rows (above W_ih's 6 rows of bytes, the least budget) of two to four."""
    stack = _stack(cell_clip=3.0, proj_clip=3.0)
    row_bytes = 2 * 4 * H * 8  # float64, both directions
    assert 2 * I * 4 * H * 8 < budget_rows * row_bytes  # W_ih does not raise the budget
    monkeypatch.setattr(lstm_module, "INPUT_CHUNK_BYTES", budget_rows * row_bytes)
    x, lengths, mask, state = _case([9, 4, 9, 1, 6], 9, with_state=True)
    with torch.no_grad():
        _assert_same(stack, x, lengths, mask, state)


def test_training_path_equals_reference():
    stack = _stack(cell_clip=3.0, proj_clip=3.0).train()  # dropout 0: the fast autograd path
    x, lengths, mask, state = _case([4, 2, 4], 4, with_state=True)
    _assert_same(stack, x.requires_grad_(), lengths, mask, state)


def test_whole_bilm_equals_reference():
    """The reference biLM (character CNN over every padded position, per-step LSTMs) gives the
    library's layers, so the benchmarks time two implementations of one function."""
    bilm = random_bilm(seed=3).double()
    ids = batch_to_ids([["The", "cat", "sat", "."], ["Hi"], []], 50)
    with torch.no_grad():
        got = bilm(ids)["activations"]
    want = ReferenceBiLM(bilm)(ids)
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL)
