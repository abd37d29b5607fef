"""No host tensor meets the model's tensors in a forward, a training step or a trainer's step:
checked on the CPU with tests/host_device_mixes.py, as a GPU would refuse the mix (or copy an
index with a wait). The forward's host-side work (the boundaries, the token positions, the
LSTM's packing, the sampler's draws) must reach the device through ``to_device``."""
from __future__ import annotations

import pytest
import torch

from elmo import batch_to_ids
from elmo.host_copy import to_device
from elmo.modules.softmax import Candidates, LogUniformSampler
from elmo.training.model import LanguageModel
from tests.conftest import random_bilm, tiny_options
from tests.host_device_mixes import HostDeviceMixes
from tests.test_cuda import _random_lm_batch

CPU = torch.device("cpu")   # (the model's device as code names it: a torch.device)


def test_a_host_index_into_device_data_is_a_mix():
    """The check itself: what a GPU refuses is recorded, what reaches it by to_device is not."""
    data = torch.zeros(4, 2)
    with HostDeviceMixes(data) as seen:
        host = torch.tensor([0, 2])                     # (the host: no device named)
        data.index_copy(0, host, torch.ones(2, 2, device=data.device))
        data.index_copy(0, to_device(host, data.device), torch.ones(2, 2, device=data.device))
        data.index_select(0, torch.tensor([1], device=data.device))
    assert [name for name, _ in seen.mixes] == ["TensorBase.index_copy"]


@pytest.mark.parametrize("keep_boundaries", [False, True])
@pytest.mark.parametrize("sentences", [[["the", "dog", "bit"]], [["the", "dog", "bit"], [], ["a"]]])
def test_a_bilm_call_mixes_no_host_tensor_in(sentences, keep_boundaries):
    bilm = random_bilm(seed=2)
    bilm.stateful = True   # (the second call starts from the carried state)
    ids = batch_to_ids(sentences)
    with torch.no_grad(), HostDeviceMixes(bilm, ids) as seen:
        bilm(ids, keep_sentence_boundaries=keep_boundaries)
        bilm(ids, keep_sentence_boundaries=keep_boundaries)
    assert seen.mixes == []


def test_a_bilm_call_with_a_token_cache_mixes_no_host_tensor_in():
    bilm = random_bilm(seed=2)
    with torch.no_grad():
        bilm.token_encoder.build_token_cache(["the", "dog"])
    ids = batch_to_ids([["the", "dog", "bit"], ["a"]])
    with torch.no_grad(), HostDeviceMixes(bilm, ids) as seen:
        bilm(ids)
    assert seen.mixes == []


@pytest.mark.parametrize("host_lengths", [False, True])
@pytest.mark.parametrize("sampled", [False, True])
def test_a_training_step_mixes_no_host_tensor_in(sampled, host_lengths):
    """The batch and the negatives made on the host and moved as the trainer moves them, then
    forward, backward and an evaluation's forward (the given targets left out)."""
    torch.manual_seed(0)
    model = LanguageModel(tiny_options(), n_vocab=50, dropout=0.1).train()
    sampler = LogUniformSampler(50, seed=0)
    with HostDeviceMixes(model) as seen:
        batch = _random_lm_batch(rows=3, steps=5, n_vocab=50, host_lengths=host_lengths).to(CPU)
        negatives = Candidates.draw(sampler, 10, CPU) if sampled else None
        out = model(batch, None, negatives)
        out["loss"].backward()
        model.eval()
        with torch.no_grad():
            model(batch, out["state"], None, skip_given_targets=True)
    assert seen.mixes == []


@pytest.mark.parametrize("settings", [dict(layout="packed", n_negative=20, state_reset_every=3),
                                      dict(layout="bucketed", n_negative=20)])
def test_a_trainer_step_mixes_no_host_tensor_in(tmp_path, settings):
    """Trainer.step as a whole: its batches built on the host, the state reset, the clip, the
    optimizer (the third step resets rows of the packed layout's carried state)."""
    from tests.training_helpers import training_run
    run = training_run(tmp_path, device="cpu", **settings)
    with HostDeviceMixes(run.model) as seen:
        for _ in range(4):
            run.step()
    assert seen.mixes == []


def test_small_constants_reach_the_device_once(monkeypatch):
    """The ids of <S> and </S> (every forward) and the evaluation's boundary markers (every
    evaluation batch) were made with torch.tensor and copied to the device on every call, each
    copy from ordinary host memory a wait for a GPU; after the first call they are reused."""
    import traceback
    from elmo.host_copy import device_constant
    made = []
    tensor = torch.tensor

    def counted(*args, **kwargs):
        made.append([f.name for f in traceback.extract_stack()[:-1] if "/elmo/" in f.filename])
        return tensor(*args, **kwargs)

    bilm = random_bilm()
    lm = LanguageModel(bilm.options, 50, 1, 2, dropout=0.0, bilm=bilm)
    batch = _random_lm_batch(2, 5, 50)
    ids = batch_to_ids([["a", "b"], ["c"]])
    with torch.no_grad():
        bilm(ids), lm(batch, skip_given_targets=True)   # (the first calls make them)
        monkeypatch.setattr(torch, "tensor", counted)
        bilm(ids), lm(batch, skip_given_targets=True)
    monkeypatch.undo()
    assert not [names for names in made if "_given" in names or "device_constant" in names], made
    constant = device_constant(((1, 2), (3, 4)), torch.long, torch.device("cpu"))
    assert constant is device_constant(((1, 2), (3, 4)), torch.long, torch.device("cpu"))
    assert constant.tolist() == [[1, 2], [3, 4]] and constant.dtype == torch.long
