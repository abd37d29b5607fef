"""WeightCache: a value made from parameters, made again when they change, never copied."""
import copy
import multiprocessing
import pickle

import pytest
import torch
from torch import nn
from torch.func import functional_call

import elmo
from elmo import batch_to_ids
from elmo.modules import dense
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
        assert not bilm.token_encoder._token_cache_key.matches(bilm.token_encoder.parameters())
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


def at_the_address_of(memory: bytearray, values: torch.Tensor) -> torch.Tensor:
    """A new tensor (a storage of its own) holding ``values`` in ``memory``: every call's tensor
    has the address of the one before, as the allocator hands the block of a freed tensor to the
    next one of its size."""
    tensor = torch.frombuffer(memory, dtype=values.dtype, count=values.numel()).view(values.shape)
    with torch.no_grad():
        tensor.copy_(values)
    return tensor


@pytest.mark.parametrize("onednn", [False, True], ids=["one-row-copy", "onednn-layout"])
def test_new_weights_at_the_address_of_freed_ones_are_not_taken_for_them(onednn, monkeypatch):
    """``functional_call(bilm, {name: new tensor ...}, ids)`` once per setting of the weights,
    each dict a temporary: its tensors are freed after the call, and the next dict's may get
    their addresses, with the same version. The caches knew the weights by address and version
    only, so the re-laid W_hh, oneDNN's layout of the weights and the token cache's vectors of
    the first dict were used for the next (a model with 256 cells here: outputs off by 0.19 on
    the third of four dicts, no error). They now also hold each weight's storage weakly, and a
    freed one is a change."""
    if onednn:
        if not dense._onednn_packing_available():
            pytest.skip("this PyTorch has no oneDNN weight layout")
        monkeypatch.setattr(dense, "BACKEND", "onednn")
        monkeypatch.setattr(dense, "RECURRENT_MIN_BYTES", 0)
    words = ["The", "bank", "closed"]
    bilm = random_bilm(3)
    bilm.token_encoder.build_token_cache(words)
    base = {name: p.detach().clone() for name, p in bilm.named_parameters()}
    memory = {name: bytearray(v.numel() * v.element_size()) for name, v in base.items()}
    for ids in (batch_to_ids([["The", "bank", "closed", "."]]),
                batch_to_ids([["The", "bank", "closed", "."], ["Hi", "bank"]])):
        for scale in (1.0, -0.5):
            params = {name: at_the_address_of(memory[name], v * scale) for name, v in base.items()}
            with torch.no_grad():
                got = functional_call(bilm, params, (ids,))["activations"]
            del params                                  # freed: its addresses are free again
            fresh = random_bilm(4)
            fresh.load_state_dict({name: v * scale for name, v in base.items()})
            fresh.token_encoder.build_token_cache(words)
            with torch.no_grad():
                want = fresh(ids)["activations"]
            for g, w in zip(got, want):                # the same computation: float rounding apart
                assert float((g - w).abs().max()) <= 1e-5 * float(w.abs().max())


def _halve_in_another_process(bilm) -> None:
    with torch.no_grad():
        for p in bilm.parameters():
            p.mul_(0.5)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
@pytest.mark.parametrize("onednn", [False, True], ids=["one-row-copy", "onednn-layout"])
def test_weights_another_process_wrote_in_shared_memory_are_not_read_from_the_caches(onednn, monkeypatch):
    """After ``bilm.share_memory()`` another process (Hogwild training, say) writes the weights;
    this process's version counters do not see it, so its token cache and the LSTM's forms of
    the weights stayed those of the old weights: the token vectors came out as before the
    write, and the layers between old and new, no error. For weights in shared memory the
    forms are now made at every call and the token cache is not used."""
    if onednn:
        if not dense._onednn_packing_available():
            pytest.skip("this PyTorch has no oneDNN weight layout")
        monkeypatch.setattr(dense, "BACKEND", "onednn")
        monkeypatch.setattr(dense, "RECURRENT_MIN_BYTES", 0)
    bilm = random_bilm(5)
    bilm.token_encoder.build_token_cache(["The", "bank", "closed"])
    bilm.share_memory()
    batches = (batch_to_ids([["The", "bank", "closed", "."]]),
               batch_to_ids([["The", "bank", "closed", "."], ["The", "bank"]]))
    with torch.no_grad():
        for ids in batches:
            bilm(ids)                                   # the forms and the vectors are made
    child = multiprocessing.get_context("fork").Process(target=_halve_in_another_process, args=(bilm,))
    child.start()
    child.join()
    assert child.exitcode == 0
    fresh = copy.deepcopy(bilm)
    fresh.token_encoder.clear_token_cache()
    with torch.no_grad():
        for ids in batches:
            got, want = bilm(ids)["activations"], fresh(ids)["activations"]
            for g, w in zip(got, want):
                assert float((g - w).abs().max()) <= 1e-5 * float(w.abs().max())


def test_a_model_loaded_under_inference_mode_runs_and_follows_its_weights():
    # its weights are inference tensors, which count no versions: the first call failed with
    # "Inference tensors do not track version counter" (a plain torch module runs there), and
    # a write under inference_mode (load_state_dict) is not counted, so nothing may be kept
    # (float32 tolerances: the cached token vectors were computed in other groups of words)
    ids = elmo.batch_to_ids([["The", "bank", "closed", "."], ["Hi"], []])
    plain = elmo.from_pretrained("fixture")
    plain.token_encoder.build_token_cache(["The", "bank"])
    with torch.inference_mode():
        model = elmo.from_pretrained("fixture")
        model.token_encoder.build_token_cache(["The", "bank"])
        for rows in (ids, ids[:1]):  # (a batch, and the one-row path's own forms)
            torch.testing.assert_close(model(rows)["activations"], plain(rows)["activations"])
        halved = {k: v * 0.5 for k, v in model.state_dict().items()}
        model.load_state_dict(halved)
        plain.load_state_dict(halved)
        for rows in (ids, ids[:1]):
            torch.testing.assert_close(model(rows)["activations"], plain(rows)["activations"])
    with torch.no_grad():
        torch.testing.assert_close(model(ids)["activations"], plain(ids)["activations"])
