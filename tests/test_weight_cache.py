"""WeightCache: a value made from parameters, made again when they change, never copied."""
import copy
import pickle

import torch
from torch import nn

from elmo import batch_to_ids
from elmo.modules.weight_cache import WeightCache
from tests.conftest import random_bilm


def test_made_once_then_again_after_each_kind_of_change():
    weight = nn.Parameter(torch.ones(3))
    cache: WeightCache[torch.Tensor] = WeightCache()
    made = []

    def make():
        made.append(1)
        return weight.detach() * 2

    first = cache.get((weight,), make)
    assert cache.get((weight,), make) is first and len(made) == 1
    with torch.no_grad():
        weight.add_(1)                    # in place: a new version
    assert torch.equal(cache.get((weight,), make), torch.full((3,), 4.0)) and len(made) == 2
    weight.data = torch.zeros(3)          # replaced: a new address
    assert torch.equal(cache.get((weight,), make), torch.zeros(3)) and len(made) == 3
    cache.get((weight.double(),), make)   # another dtype (here another tensor too)
    assert len(made) == 4
    cache.clear()
    assert cache.value is None
    cache.get((weight,), make)
    assert len(made) == 5


def test_copies_and_pickles_start_empty():
    module = nn.Linear(2, 2)
    module.cache = WeightCache()
    module.cache.get((module.weight,), lambda: torch.ones(1))
    assert copy.deepcopy(module).cache.value is None
    assert pickle.loads(pickle.dumps(module)).cache.value is None
    assert module.cache.value is not None  # the original keeps its value


def test_a_round_trip_through_another_dtype_makes_every_form_again():
    """.half().float() makes new weight tensors, and the allocator may give a new one the
    address of the weight a cached form was made from; with the same version, dtype and
    device the key could not tell them apart, so the one-row steps kept multiplying by the
    re-laid copy of the unrounded W_hh (a batch-1 sentence then differed from the same
    sentence in a batch by up to 3e-4, no error; a few round trips in a hundred of a tiny
    model here). ``.to()`` now drops the LSTM's forms and remakes the token cache's vectors,
    so the forms always match the weights, wherever the allocator puts them."""
    ids = batch_to_ids([["The", "bank", "closed", "."], ["Hi"]])
    for seed, dtype in ((0, torch.float16), (1, torch.bfloat16), (2, torch.float16)):
        bilm = random_bilm(seed)
        bilm.token_encoder.build_token_cache(["The", "bank", "Hi"])
        with torch.no_grad():
            bilm(ids[:1])
            bilm(ids)                         # the one-row and the oneDNN forms, the cache's vectors
        bilm = bilm.to(dtype).float()
        assert all(layer._hh_rows.value is None and layer._packed.value is None
                   for layer in bilm.lstm.layers)
        assert bilm.token_encoder._token_cache_key == ()
        fresh = copy.deepcopy(bilm)           # (a copy starts with no forms and its own cache key)
        fresh.token_encoder.clear_token_cache()
        with torch.no_grad():
            for rows in (ids[:1], ids):
                got, want = bilm(rows)["activations"], fresh(rows)["activations"]
                for g, w in zip(got, want):  # (the cache's vectors: the CNN's, up to rounding)
                    assert float((g - w).abs().max()) <= 1e-5 * float(w.abs().max())


def test_a_fused_step_is_counted_where_increment_version_takes_one_tensor(monkeypatch):
    """Before PyTorch 2.5, ``torch.autograd.graph.increment_version`` took a single tensor, not
    a list: the optimizer hook passed the group's list, so on 2.4 every fused Adagrad step
    (``elmo train`` on the CPU) raised TypeError. It now bumps one tensor a call."""
    real = torch.autograd.graph.increment_version

    def one_tensor_only(tensor):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError("increment_version(): argument 'tensor' must be Tensor")
        real(tensor)

    monkeypatch.setattr(torch.autograd.graph, "increment_version", one_tensor_only)
    params = [nn.Parameter(torch.ones(3)), nn.Parameter(torch.ones(2))]
    optimizer = torch.optim.Adagrad(params, lr=0.5, fused=True)
    (params[0].sum() + params[1].sum()).backward()
    before = [p._version for p in params]
    optimizer.step()
    assert all(p._version > v for p, v in zip(params, before))
