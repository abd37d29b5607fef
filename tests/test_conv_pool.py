"""The character CNN's convolution + max over positions as matrix multiplies, against conv1d."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from elmo.modules.conv_pool import conv_max_pool


def _plain(chars, weight, bias):
    """What nn.Conv1d and a max over positions give (autograd through both)."""
    return F.conv1d(chars.transpose(1, 2), weight, bias).max(dim=2).values


def _leaves(*tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


@pytest.mark.parametrize("width,length", [(1, 9), (3, 9), (7, 12), (5, 5)])
def test_values_and_gradients_equal_conv1d_then_max(width, length):
    torch.manual_seed(width * 100 + length)
    chars, weight, bias = torch.randn(11, length, 4), torch.randn(6, 4, width), torch.randn(6)
    ours, plain = _leaves(chars, weight, bias), _leaves(chars, weight, bias)
    got, want = conv_max_pool(*ours), _plain(*plain)
    assert got.shape == (11, 6)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)
    upstream = torch.randn(11, 6)
    (got * upstream).sum().backward()
    (want * upstream).sum().backward()
    for a, b in zip(ours, plain):
        assert torch.allclose(a.grad, b.grad, atol=1e-5, rtol=1e-5)


def test_tied_windows_of_padding_give_the_same_parameter_gradients():
    """Tokens padded with the same character have several identical windows: the maximum ties.
    Whichever tied window takes the gradient, the weights' and bias' gradients are the same
    (the windows' contents are equal), and so is the sum over the padded positions' inputs."""
    torch.manual_seed(0)
    pad = torch.randn(4)
    chars = pad.repeat(5, 10, 1)
    chars[:, :3] = torch.randn(5, 3, 4)          # three real characters, then 7 of padding
    weight, bias = torch.randn(8, 4, 2), torch.randn(8)
    ours, plain = _leaves(chars, weight, bias), _leaves(chars, weight, bias)
    conv_max_pool(*ours).sum().backward()
    _plain(*plain).sum().backward()
    for a, b in zip(ours[1:], plain[1:]):
        assert torch.allclose(a.grad, b.grad, atol=1e-5, rtol=1e-5)
    # the padding's embedding row receives the padded positions' gradients summed
    assert torch.allclose(ours[0].grad[:, 3:].sum(1), plain[0].grad[:, 3:].sum(1), atol=1e-5)
    assert torch.allclose(ours[0].grad[:, :3], plain[0].grad[:, :3], atol=1e-5)


def test_fewer_positions_than_the_filter_is_a_clear_error():
    with pytest.raises(ValueError, match="fewer than the filter width"):
        conv_max_pool(torch.randn(2, 3, 4), torch.randn(5, 4, 4), torch.randn(5))


def test_no_tokens_gives_an_empty_result():
    weight = torch.randn(5, 4, 2, requires_grad=True)
    out = conv_max_pool(torch.randn(0, 6, 4), weight, torch.randn(5))
    assert out.shape == (0, 5)


def test_under_bf16_autocast_the_products_run_in_bf16():
    torch.manual_seed(1)
    chars, weight, bias = torch.randn(7, 9, 4), torch.randn(6, 4, 3), torch.randn(6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = conv_max_pool(chars, weight, bias)
    assert low.dtype == torch.bfloat16
    assert torch.allclose(low.float(), _plain(chars, weight, bias), atol=0.1, rtol=0.05)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rounded_rows_give_the_same_values_and_gradients(dtype):
    """The windows' rows rounded up with zero rows (for oneDNN's bfloat16 kernels): the zero
    rows' outputs are dropped and add nothing to the gradients."""
    from elmo.modules.conv_pool import _ConvMaxPool
    torch.manual_seed(3)
    chars, weight, bias = (t.to(dtype) for t in (torch.randn(5, 9, 4), torch.randn(6, 4, 3), torch.randn(6)))
    results = []
    for round_rows in (False, True):                 # 5 tokens x 7 positions: 35 rows, or 64
        leaves = _leaves(chars, weight, bias)
        out = _ConvMaxPool.apply(*leaves, round_rows)
        (out.float() * torch.linspace(-1, 1, 6)).sum().backward()
        results.append([out] + [t.grad for t in leaves])
    tol = 1e-5 if dtype == torch.float32 else 2e-2    # two kernels' summation orders apart
    for plain, rounded in zip(*results):
        assert plain.shape == rounded.shape and plain.dtype == rounded.dtype == dtype
        assert torch.allclose(plain.float(), rounded.float(), atol=tol, rtol=tol)


def test_under_bf16_autocast_the_rows_are_rounded_where_onednn_multiplies_bf16(monkeypatch):
    from elmo.modules import conv_pool, dense
    calls = []
    original = conv_pool._convolved
    monkeypatch.setattr(conv_pool, "_convolved", lambda *args: calls.append(args[-1]) or original(*args))
    chars, weight, bias = torch.randn(5, 9, 4), torch.randn(6, 4, 3), torch.randn(6, requires_grad=True)
    conv_max_pool(chars, weight, bias)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        conv_max_pool(chars, weight, bias)
        monkeypatch.setattr(dense, "BACKEND", "default")
        conv_max_pool(chars, weight, bias)
    assert calls == [False, dense._onednn_bf16_available(), False]


def test_tied_maxima_pass_the_gradient_to_the_first_position_as_max_does():
    """Identical windows (repeated characters, padding) tie exactly: the gradient goes to the
    first of them, as autograd through ``max(dim)`` sends it, position by position."""
    torch.manual_seed(4)
    a, b = torch.randn(4), torch.randn(4)
    chars = torch.stack([a, b, a, b, a, b, b, b, b]).repeat(3, 1, 1)   # (3, 9, 4): ties everywhere
    weight, bias = torch.randn(8, 4, 2), torch.randn(8)
    ours, plain = _leaves(chars, weight, bias), _leaves(chars, weight, bias)
    conv_max_pool(*ours).sum().backward()
    _plain(*plain).sum().backward()
    assert torch.equal(ours[0].grad != 0, plain[0].grad != 0)
    for mine, theirs in zip(ours, plain):
        assert torch.allclose(mine.grad, theirs.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("positions", [1, 7, 300])
def test_max_with_first_index_equals_max_over_positions(positions):
    from elmo.modules.conv_pool import max_with_first_index
    torch.manual_seed(positions)
    x = torch.randint(-3, 3, (6, positions, 5)).float()   # few distinct values: many ties
    got, want = max_with_first_index(x), x.max(dim=1)
    assert torch.equal(got[0], want.values) and torch.equal(got[1], want.indices)


def test_a_nan_in_a_map_is_its_maximum_and_position_as_max_gives_them():
    from elmo.modules.conv_pool import max_with_first_index
    x = torch.randn(3, 6, 4)
    x[1, 4, 2] = float("nan")
    values, where = max_with_first_index(x)
    assert torch.isnan(values[1, 2]) and int(where[1, 2]) == 4
    assert torch.equal(where, x.max(dim=1).indices)


def test_inference_gives_the_maximum_without_recording_anything():
    torch.manual_seed(5)
    chars, weight, bias = torch.randn(4, 9, 4), torch.randn(6, 4, 3), torch.randn(6)
    with torch.no_grad():
        got = conv_max_pool(chars, weight.requires_grad_(), bias)
    assert got.grad_fn is None
    assert torch.allclose(got, _plain(chars, weight.detach(), bias), atol=1e-5, rtol=1e-5)
