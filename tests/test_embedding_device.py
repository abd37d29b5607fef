"""``embed_file`` given a caller's BiLM leaves it on its device: on a CUDA machine it moved a
CPU model to the GPU in place and left it there (the caller's next CPU call then failed on
tensors of two devices). CUDA is simulated: only which devices the model is sent to counts."""
import torch
import pytest

from elmo import ElmoEmbedder, embed_file
from tests.conftest import random_bilm


def spy_on_moves(monkeypatch, bilm):
    """Record the devices ``bilm.to`` is called with; the model stays where it is (no GPU here)."""
    moves = []

    def to(*args, **kwargs):
        moves.append(torch.device(args[0] if args else kwargs["device"]))
        return bilm
    monkeypatch.setattr(bilm, "to", to)
    return moves


@pytest.fixture
def cuda_machine(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("the bank\na river bank\n", encoding="utf-8")
    return path


def test_a_callers_model_runs_on_its_own_device_by_default(tmp_path, text, cuda_machine, monkeypatch):
    bilm = random_bilm(seed=3)
    moves = spy_on_moves(monkeypatch, bilm)
    embed_file(text, tmp_path / "out.hdf5", bilm, layers="top")
    assert all(m.type == "cpu" for m in moves), moves


def test_a_callers_model_run_on_another_device_is_moved_back(tmp_path, text, cuda_machine, monkeypatch):
    bilm = random_bilm(seed=3)
    moves = spy_on_moves(monkeypatch, bilm)
    # (the run itself would need the GPU)
    monkeypatch.setattr("elmo.embedding.run._embed_and_merge", lambda *a, **k: None)
    embed_file(text, tmp_path / "out.hdf5", bilm, layers="top", device="cuda:0")
    assert moves == [torch.device("cuda:0"), torch.device("cpu")]


def test_elmo_embedder_embed_file_leaves_its_model_where_it_is(tmp_path, text, cuda_machine, monkeypatch):
    bilm = random_bilm(seed=3)
    embedder = ElmoEmbedder(model=bilm)          # cuda_device=-1: the CPU
    moves = spy_on_moves(monkeypatch, bilm)
    embedder.embed_file(str(text), tmp_path / "out.hdf5", output_format="top")
    assert all(m.type == "cpu" for m in moves), moves
