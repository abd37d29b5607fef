"""The package's one model digest (elmo.model_digest): what it sees, and what it ignores."""
from __future__ import annotations

import copy

import pytest
import torch

from elmo.model_digest import model_digest
from tests.conftest import random_bilm


class _Holder(torch.nn.Module):
    """One tensor ``t`` as a buffer (any dtype)."""

    def __init__(self, t: torch.Tensor):
        super().__init__()
        self.register_buffer("t", t)


def test_the_digest_sees_the_dtype_of_the_same_bytes():
    """Each tensor's dtype is hashed, not only its bytes: float32 values and the same bytes
    read as int32 compute different things."""
    values = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert model_digest(_Holder(values)) != model_digest(_Holder(values.view(torch.int32)))
    assert model_digest(_Holder(values)) == model_digest(_Holder(values.clone()))


def test_the_digest_sees_the_shape_and_the_name():
    values = torch.arange(6, dtype=torch.float32)
    assert model_digest(_Holder(values)) != model_digest(_Holder(values.reshape(2, 3)))
    other = _Holder(values)
    other.register_buffer("u", other.t)
    del other.t
    assert model_digest(_Holder(values)) != model_digest(other)


def test_the_digest_sees_the_settings_but_not_their_key_order():
    bilm = random_bilm(seed=3)
    plain = model_digest(bilm)
    assert plain == model_digest(copy.deepcopy(bilm)) == model_digest(bilm, None)
    assert model_digest(bilm, {"a": 1, "b": [2, 3]}) == model_digest(bilm, {"b": [2, 3], "a": 1})
    assert len({plain, model_digest(bilm, {"a": 1}), model_digest(bilm, {"a": 2})}) == 3


def test_the_digest_sees_the_options_of_a_bilm_inside_a_module():
    """A module holding a biLM (a task model) is digested with that biLM's options: the same
    weights under another clip give another digest."""
    from elmo import BiLM, ElmoOptions
    bilm = random_bilm(seed=3)
    options = bilm.options.to_dict()
    options["lstm"]["cell_clip"] = 0.05
    clipped = BiLM(ElmoOptions.from_dict(options))
    clipped.load_state_dict(bilm.state_dict())
    held, held_clipped = torch.nn.ModuleList([bilm]), torch.nn.ModuleList([clipped])
    assert model_digest(held) != model_digest(held_clipped)
    assert model_digest(bilm) != model_digest(clipped)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_digest_of_a_model_in_a_low_precision(dtype):
    """bfloat16 (which numpy lacks) and float16 weights are hashed as their exact bits."""
    bilm = random_bilm(seed=3)
    low = copy.deepcopy(bilm).to(dtype)
    assert model_digest(low) == model_digest(copy.deepcopy(low)) != model_digest(bilm)
