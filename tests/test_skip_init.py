"""Loaders build the model with its random initialisation skipped (elmo.modules.skip_init):
every weight must then come from the file. The skipped initialisers fill NaN here, so a weight
the loader left alone shows; the load must equal one of a model initialised as usual, bitwise."""
import contextlib
import threading

import pytest
import torch
from torch import nn

import elmo
import elmo.manylangs.folder as manylangs_folder
import elmo.weights
from elmo.modules import skip_init
from elmo.modules.bilm import BiLM
from tests.conftest import ALLENNLP, FIXTURES, random_bilm, tiny_options


def _fill_nan(tensor: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return tensor.fill_(float("nan"))


@pytest.fixture
def nan_init(monkeypatch):
    """Skipped initialisers fill their tensor with NaN."""
    monkeypatch.setattr(skip_init, "leave_as_is", _fill_nan)


def test_every_weight_built_with_init_skipped_reaches_the_hook(nan_init):
    """(The check below relies on it: a weight the hook missed would hold random values.)"""
    with skip_init.init_skipped():
        bilm = BiLM(tiny_options())
    for name, tensor in bilm.state_dict().items():
        assert bool(tensor.isnan().any()), name


def test_another_thread_builds_with_its_weights_drawn(nan_init):
    built = []
    with skip_init.init_skipped():
        worker = threading.Thread(target=lambda: built.append(nn.Linear(8, 8)))
        worker.start()
        worker.join()
    assert bool(torch.isfinite(built[0].weight).all()) and bool(built[0].weight.abs().sum() > 0)


def _folders(tmp_path):
    """Model folders of every loader: the original layout, native safetensors in three dtypes,
    the AllenNLP fixture and ELMoForManyLangs folders (with and without a word embedding)."""
    bilm = random_bilm(skip=False)
    folders = [ALLENNLP, FIXTURES / "elmoformanylangs" / "model", FIXTURES / "elmoformanylangs" / "model_word"]
    elmo.save_pretrained(bilm, tmp_path / "original", fmt="original")
    folders.append(tmp_path / "original")
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        elmo.save_pretrained(bilm.to(dtype), tmp_path / str(dtype), fmt="safetensors")
        folders.append(tmp_path / str(dtype))
    return folders


def test_loads_overwrite_every_skipped_weight_and_equal_an_initialised_load(tmp_path, monkeypatch):
    sentences = [["The", "bank", "x" * 60], ["."]]
    for folder in _folders(tmp_path):
        with monkeypatch.context() as m:   # the load as it was: weights drawn, then overwritten
            for module in (elmo.weights, manylangs_folder):
                m.setattr(module, "init_skipped", contextlib.nullcontext)
            want = elmo.from_pretrained(folder)
        with monkeypatch.context() as m:
            m.setattr(skip_init, "leave_as_is", _fill_nan)
            got = elmo.from_pretrained(folder)
        want_state, got_state = want.state_dict(), got.state_dict()
        assert list(want_state) == list(got_state), folder
        for name, tensor in got_state.items():
            assert not bool(tensor.isnan().any()), (folder, name)
            assert tensor.dtype == want_state[name].dtype and torch.equal(tensor, want_state[name]), (folder, name)
        ids = got.token_ids(sentences)
        with torch.no_grad():
            for p, q in zip(want(ids)["activations"], got(ids)["activations"]):
                assert torch.equal(p, q), folder


def test_load_original_skips_the_draws(tmp_path, monkeypatch):
    """load_original itself (not through a folder), NaN-filled where it skipped."""
    bilm = random_bilm(skip=False)
    elmo.save_original(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    calls = []
    monkeypatch.setattr(skip_init, "leave_as_is", lambda t: calls.append(t) or _fill_nan(t))
    got = elmo.load_original(tmp_path / "options.json", tmp_path / "weights.hdf5")
    assert calls   # (the draws were skipped: a load that drew them would pass the rest unseen)
    for (name, p), q in zip(got.state_dict().items(), bilm.state_dict().values()):
        assert torch.equal(p, q), name


def test_the_original_layouts_arrays_are_each_copied_in_and_dropped(tmp_path):
    """(Dropped once copied, the file's arrays and the model's weights are not both held whole.)"""
    from elmo.original_layout import assign_original_arrays as _assign_original_arrays, read_original_arrays
    bilm = random_bilm(skip=False)
    elmo.save_original(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    arrays = read_original_arrays(tmp_path / "weights.hdf5", bilm.options)
    with skip_init.init_skipped():
        got = BiLM(bilm.options)
    _assign_original_arrays(got, arrays)
    assert arrays == {}
    for (name, p), q in zip(got.state_dict().items(), bilm.state_dict().values()):
        assert torch.equal(p, q), name
