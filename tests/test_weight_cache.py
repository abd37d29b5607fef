"""WeightCache: a value made from parameters, made again when they change, never copied."""
import copy
import pickle

import torch
from torch import nn

from elmo.modules.weight_cache import WeightCache


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
