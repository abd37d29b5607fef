import math
import re

import pytest
import torch

from elmo import Elmo, ScalarMix, batch_to_ids
from tests.conftest import random_bilm


def fixed_mix(weights, gamma, **kw):
    return ScalarMix(len(weights), initial_scalar_parameters=[math.log(w) for w in weights],
                     initial_gamma=gamma, trainable=False, **kw)


def test_worked_example():
    layers = [torch.full((1, 1, 1), v) for v in (1.0, 2.0, 4.0)]
    assert fixed_mix([0.2, 0.3, 0.5], 2.0)(layers).item() == pytest.approx(5.6, abs=1e-5)
    assert fixed_mix([0.6, 0.3, 0.1], 2.0)(layers).item() == pytest.approx(3.2, abs=1e-5)


def test_worked_example_on_the_same_frozen_bilm():
    """Two mixes over one frozen biLM's layers give the weighted sums of those layers."""
    bilm = random_bilm()
    ids = batch_to_ids([["the", "dog", "bit"]])
    for weights in ([0.2, 0.3, 0.5], [0.6, 0.3, 0.1]):
        elmo = Elmo(module=bilm, num_output_representations=1, dropout=0.0,
                    scalar_mix_parameters=[math.log(w) for w in weights])
        elmo.scalar_mixes[0].gamma.data.fill_(2.0)
        out = elmo(ids, return_layers=True)
        expected = 2.0 * sum(w * h for w, h in zip(weights, out["layers"]))
        assert torch.allclose(out["elmo_representations"][0], expected, atol=1e-6)
    assert not any(p.requires_grad for p in bilm.parameters())


def test_starts_as_an_average_and_learns():
    mix = ScalarMix(3)
    assert torch.allclose(mix.weights(), torch.full((3,), 1 / 3)) and mix.gamma.item() == 1.0
    layers = [torch.randn(2, 4, 5, requires_grad=False) for _ in range(3)]
    mix(layers).sum().backward()
    assert mix.scalar_parameters.grad is not None and mix.gamma.grad is not None


def test_fixed_parameters_do_not_train():
    mix = fixed_mix([0.2, 0.3, 0.5], 1.0)
    assert not mix.scalar_parameters.requires_grad and not mix.gamma.requires_grad


def test_penalty():
    mix = ScalarMix(3, initial_scalar_parameters=[1.0, -2.0, 0.5])
    assert mix.penalty(0.1).item() == pytest.approx(0.1 * (1 + 4 + 0.25))


def test_a_fixed_mix_adds_no_penalty():
    """A mix fixed by scalar_mix_parameters is not learned, yet penalty() added lam * ||s||^2:
    with AllenNLP's [-9e10, 1, -9e10] (pick layer 1) that was 1.6e19 at lam=0.001, and
    task_loss + penalty showed nothing of the task loss."""
    elmo = Elmo(module=random_bilm(), num_output_representations=2, dropout=0.0,
                scalar_mix_parameters=[-9e10, 1.0, -9e10])
    task_loss = torch.tensor(0.25)
    for mix in elmo.scalar_mixes:
        assert float(mix.penalty(0.001)) == 0.0
    assert float(task_loss + elmo.penalty(0.001)) == 0.25
    with pytest.raises(ValueError, match="lam must be 0 or more"):
        elmo.penalty(-1.0)                         # (lam is still checked)
    assert float(fixed_mix([0.2, 0.3, 0.5], 1.0).penalty(0.1)) == 0.0
    # a learned mix is penalised as before, from any start
    learned = ScalarMix(3, initial_scalar_parameters=[3.0, 0.0, -1.0])
    assert learned.penalty(0.1).requires_grad
    assert learned.penalty(0.1).item() == pytest.approx(0.1 * (9 + 0 + 1))


def test_layer_norm_uses_only_unmasked_positions():
    torch.manual_seed(0)
    a = torch.randn(2, 3, 4) * 3 + 5
    mask = torch.tensor([[True, True, False], [True, False, False]])
    garbage = a.clone()
    garbage[~mask] = 1000.0  # padded positions must not change the statistics
    mix = ScalarMix(1, do_layer_norm=True)
    out_a, out_g = mix([a], mask), mix([garbage], mask)
    assert torch.allclose(out_a[mask], out_g[mask], atol=1e-5)
    kept = out_a[mask]
    assert kept.mean().abs() < 1e-5 and (kept.var(unbiased=False) - 1).abs() < 1e-4
    with pytest.raises(ValueError, match="mask"):
        mix([a])
    # a mask without a token leaves the layer as it is (no mean or spread to take), also now
    # that the choice is made on the device, without reading the count back
    nothing = torch.zeros(2, 3, dtype=torch.bool)
    assert torch.equal(mix([a], nothing), ScalarMix(1)([a], nothing))
    leaf = a.clone().requires_grad_(True)      # and its gradient is finite: the layer's own
    mix([leaf], nothing).sum().backward()
    assert torch.isfinite(leaf.grad).all() and torch.allclose(leaf.grad, torch.ones_like(a))


def test_wrong_number_of_layers():
    with pytest.raises(ValueError, match="expected 3 layers"):
        ScalarMix(3)([torch.zeros(1, 1, 1)] * 2)
    with pytest.raises(ValueError, match="num_layers must be at least 1, got 0"):
        ScalarMix(0)
    for count in (2.5, "3", True, None):  # (True passed as 1)
        with pytest.raises(TypeError, match="num_layers must be an integer"):
            ScalarMix(count)


def test_layer_norm_mask_of_another_shape_is_a_clear_error():
    layers = [torch.randn(2, 3, 4) for _ in range(2)]
    for shape in ((2, 4), (3, 2), (2, 1)):  # (2, 1) would have broadcast: wrong statistics, no error
        with pytest.raises(ValueError, match=re.escape(f"the mask has shape {shape}; for layers of shape (2, 3, 4) it must be (2, 3)")):
            ScalarMix(2, do_layer_norm=True)(layers, torch.ones(shape, dtype=torch.bool))


def test_a_layer_norm_mask_of_numbers_counts_each_token_once():
    """A mask is True/False per position; given as numbers, a long mask of 2s (or a float
    mask of 0.5s) weighted those positions in the mean and variance instead of counting them
    once, and the mix came out different from the same mask as bools, without an error."""
    torch.manual_seed(0)
    layers = [torch.randn(2, 3, 4) for _ in range(2)]
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    mix = ScalarMix(2, do_layer_norm=True)
    want = mix(layers, mask)
    for numbers in (mask.long(), mask.float(), mask.long() * 2, mask.float() * 0.5):
        assert torch.allclose(mix(layers, numbers), want, rtol=1e-6, atol=0)
    with pytest.raises(TypeError, match="the mask must be a tensor"):
        mix(layers, [[1, 1, 0], [1, 0, 0]])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_layer_norm_of_half_precision_layers_is_finite_and_close_to_float32(dtype):
    """A .half() model's layers: the layer norm summed B * T * D float16 values (here 64 x 40
    x 256 of about 3) past float16's largest number, 65504, and the whole mix came out NaN,
    without an error. The statistics are now float32; the result keeps the layers' dtype, so
    it differs from float32's by the dtype's rounding (float16 2^-11, bfloat16 2^-8 of a
    value, a few roundings)."""
    torch.manual_seed(0)
    layers = [torch.randn(64, 40, 256) * 3 + 1 for _ in range(3)]
    mask = torch.ones(64, 40, dtype=torch.bool)
    mask[1:, 30:] = False
    mix = ScalarMix(3, do_layer_norm=True)
    with torch.no_grad():
        want = mix(layers, mask)
        got = mix([layer.to(dtype) for layer in layers], mask)
    assert got.dtype == dtype and bool(torch.isfinite(got).all())
    eps = torch.finfo(dtype).eps
    assert float((got.float() - want).abs().max()) <= 8 * eps * float(want.abs().max())


def test_layers_of_different_shapes_and_non_finite_starts_are_clear_errors():
    with pytest.raises(ValueError, match="one shape"):
        ScalarMix(2)([torch.zeros(1, 2, 4), torch.zeros(1, 3, 4)])
    for s, gamma in (([float("nan"), 0.0, 0.0], 1.0), ([0.0, float("inf"), 0.0], 1.0), (None, float("nan"))):
        with pytest.raises(ValueError, match="must be a finite number"):
            ScalarMix(3, initial_scalar_parameters=s, initial_gamma=gamma)
    picked = ScalarMix(3, initial_scalar_parameters=[-9e10, 1.0, -9e10])  # picking one layer stays allowed
    layers = [torch.full((1, 1, 2), float(v)) for v in (1, 2, 3)]
    assert torch.equal(picked(layers), layers[1])


def test_parameters_past_float32s_range_are_refused_not_turned_into_nan():
    """1e40 is a finite Python float but inf in the float32 parameter: every output was NaN."""
    for kwargs in ({"initial_scalar_parameters": [1e40, 0.0, 0.0]}, {"initial_gamma": 1e39}):
        with pytest.raises(ValueError, match="float32 holds"):
            ScalarMix(3, **kwargs)
    with pytest.raises(ValueError, match=r"scalar_mix_parameters\[0\] must be a finite number"):
        Elmo(module=random_bilm(), scalar_mix_parameters=[1e40, 0.0, 0.0])
    given = ScalarMix(3, initial_scalar_parameters=torch.tensor([0.0, 1.0, 2.0]))  # a tensor's numbers do
    assert torch.allclose(given.weights(), torch.softmax(torch.tensor([0.0, 1.0, 2.0]), 0))


def test_mistyped_mix_settings_are_errors_that_name_them():
    bilm = random_bilm()
    for wrong, message in ((1.0, "scalar_mix_parameters must be a list of 3 numbers"),
                           ({"a": 1}, "scalar_mix_parameters must be a list of 3 numbers"),
                           (["a", "b", "c"], r"scalar_mix_parameters\[0\] must be a number, got str"),
                           ([0.0, None, 1.0], r"scalar_mix_parameters\[1\] must be a number, got NoneType")):
        with pytest.raises(TypeError, match=message):
            Elmo(module=bilm, num_output_representations=0, scalar_mix_parameters=wrong)
    with pytest.raises(TypeError, match="initial_gamma must be a number"):
        ScalarMix(3, initial_gamma=None)


def test_the_penalty_weight_is_checked():
    mixer = Elmo(module=random_bilm(), dropout=0.0)
    for wrong, error in (("0.1", TypeError), (None, TypeError), (float("nan"), ValueError), (-1.0, ValueError)):
        with pytest.raises(error, match="lam must be"):
            mixer.penalty(wrong)
    with pytest.raises(ValueError, match="lam must be"):  # also without mixes
        Elmo(module=random_bilm(), num_output_representations=0).penalty(float("nan"))
    assert float(mixer.penalty(0.5).detach()) == 0.0  # s starts at zeros


def test_layers_that_are_not_floating_point_are_refused():
    """Integer layers cast the weights 1/3 to 0 (bool ones to True): a silently wrong mix."""
    mix = ScalarMix(3)
    for layers in ([torch.full((1, 2, 4), 9)] * 3, [torch.ones(1, 1, 2, dtype=torch.bool)] * 3, [1, 2, 3]):
        with pytest.raises(TypeError, match="floating-point tensors"):
            mix(layers)
    assert torch.allclose(mix([torch.full((1, 2, 4), 9.0)] * 3), torch.full((1, 2, 4), 9.0))


def test_a_mask_of_another_shape_is_refused_without_layer_norm_too():
    """Without do_layer_norm a mask of any shape, or a string, was taken and not used: the
    caller's mistake went unseen until layer norm was switched on. None is still fine."""
    layers = [torch.randn(2, 3, 4) for _ in range(2)]
    with pytest.raises(ValueError, match=re.escape("the mask has shape (5, 5); for layers of shape (2, 3, 4) "
                                                   "it must be (2, 3)")):
        ScalarMix(2)(layers, torch.ones(5, 5))
    with pytest.raises(TypeError, match="the mask must be a tensor"):
        ScalarMix(2)(layers, "mask")
    mix = ScalarMix(2)
    assert mix(layers, torch.ones(2, 3, dtype=torch.bool)).equal(mix(layers))


def test_layers_that_are_no_list_or_have_no_feature_axis_are_clear_errors():
    """None or a generator was "object of type ... has no len()"; 0-dimensional layers were an
    IndexError from inside layer norm (and a (1,) mix without it)."""
    for layers in (None, (torch.zeros(1, 1, 2) for _ in range(2))):
        with pytest.raises(TypeError, match="layers must be a list of 2 tensors, got"):
            ScalarMix(2)(layers)
    for do_layer_norm in (False, True):
        with pytest.raises(ValueError, match=r"must be \(\.\.\., D\) tensors, got 0-dimensional"):
            ScalarMix(2, do_layer_norm=do_layer_norm)([torch.tensor(1.0)] * 2, torch.tensor(True))
