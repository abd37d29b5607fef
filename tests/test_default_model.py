"""The bundled default biLM (elmo/resources/default), the demo's claims on it, and its data.

These run on the shipped weights: if a new model stops separating the senses of "bank" at the
top layer, or a file stops matching what the package expects, they fail."""
from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest
import torch

import elmo
from elmo.demo import data as demo_data
from elmo.demo import run_demo, sense_similarity
from elmo.training.export import load_language_model


@pytest.fixture(scope="module")
def default_bilm():
    return elmo.from_pretrained("default")


def test_default_is_the_bundled_trained_model():
    assert elmo.DEFAULT_MODEL == "default" and "default" in elmo.BUNDLED_MODELS
    folder = elmo.model_path("default")
    sizes = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
    assert {"options.json", "weights.hdf5", "softmax.hdf5", "vocab.txt", "metadata.json",
            "MODEL_CARD.md"} <= set(sizes)
    assert sum(sizes.values()) <= 50e6
    meta = json.loads((folder / "metadata.json").read_text())
    assert meta["tokens"] > 1_000_000 and meta["adapted_on"] == []
    with h5py.File(folder / "softmax.hdf5") as h5:
        assert h5["softmax/W"].dtype == np.dtype(meta["shipped"]["softmax_dtype"])
    with h5py.File(folder / "weights.hdf5") as h5:
        assert all(h5[name].dtype == np.dtype(meta["shipped"]["bilm_dtype"])
                   for name in ("char_embed", "CNN_proj/W_proj"))


def test_default_model_round_trips_exactly(default_bilm, tmp_path):
    elmo.save_original(default_bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    again = elmo.load_original(tmp_path / "options.json", tmp_path / "weights.hdf5")
    for name, tensor in default_bilm.state_dict().items():
        assert torch.equal(tensor, again.state_dict()[name]), name
    native = elmo.from_pretrained(elmo.save_pretrained(default_bilm, tmp_path / "native"))
    ids = elmo.batch_to_ids([["The", "bank", "closed", "."], ["Hi"]])
    with torch.no_grad():
        for a, b in zip(default_bilm(ids)["activations"], native(ids)["activations"]):
            assert torch.equal(a, b)


def test_language_model_folder_loads(default_bilm):
    model, vocab = load_language_model(elmo.model_path("default"))
    assert len(vocab) == model.softmax.weight.shape[0] == 50_000
    assert vocab.words[:3] == ["<S>", "</S>", "<UNK>"]
    for name, tensor in default_bilm.state_dict().items():
        assert torch.equal(tensor, model.bilm.state_dict()[name]), name


def test_bank_claims_hold_on_the_default_model(default_bilm):
    rows = sense_similarity(default_bilm)
    assert len(rows) == default_bilm.num_layers == 3
    assert rows[0]["max_diff"] == 0.0 and rows[0]["within"] == pytest.approx(1.0)
    top = rows[-1]
    assert top["within"] > top["across"], top
    assert top["max_diff"] > 0.1           # the context does change the top layer


def test_demo_runs_end_to_end(capsys):
    run_demo(threads=1)
    out = capsys.readouterr().out
    assert "model: default" in out and "fixture" not in out
    for header in ('1. "bank"', '2. Nearest neighbours of "play"', "3. A warning, measured"):
        assert header in out
    assert "[sports]" in out and "[theatre]" in out and "GloVe 6B 50d:" in out
    assert "(the senses separate)" in out


def test_demo_neighbours_leave_out_a_corpus_copy_of_the_query(default_bilm):
    """A query sentence that is also a corpus sentence would be its own nearest use (cosine 1)."""
    from elmo.demo.neighbors import QUERIES, play_neighbors
    from elmo.embedding import Embedder

    data = demo_data.load()
    sports = QUERIES["sports"].split()
    data.sentences = data.sentences[:40] + [sports, sports]
    result = play_neighbors(Embedder(default_bilm, batch_size=16), data, k=3, k_static=2)
    hits = result["contextual"]["sports"]["hits"]
    assert len(hits) == 3 and all(score < 0.9999 for score, _ in hits), hits


def test_bundled_demo_data_is_consistent():
    assert demo_data.check() == []
    data = demo_data.load()
    manifest = data.manifest
    assert manifest["sentences"] == len(data.sentences) == 1000
    from elmo.data.fetch import sha256_file
    assert manifest["vocab_sha256"] == sha256_file(elmo.model_path("default") / "vocab.txt")


def test_demo_data_check_catches_changes(tmp_path):
    folder = tmp_path / "demo"
    shutil.copytree(demo_data.data_folder(), folder)
    assert demo_data.check(folder) == []
    sentences = folder / demo_data.SENTENCES_FILE
    lines = sentences.read_text().splitlines()
    sentences.write_text("\n".join(["a sentence without the word ."] + lines[1:]) + "\n")
    problems = demo_data.check(folder)
    assert any("SHA-256" in p for p in problems) and any("without" in p for p in problems)


def test_the_training_commands_take_the_bundled_name(tmp_path, capsys, monkeypatch):
    from elmo.cli import main
    text = tmp_path / "t.txt"
    text.write_text("the bank closed .\nthe river bank .\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # no folder named "default" here
    assert main(["perplexity", "default", str(text), "--json"]) == 0
    by_name = json.loads(capsys.readouterr().out)
    assert main(["perplexity", str(elmo.model_path("default")), str(text), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == by_name and by_name["ppl"] > 1
    assert main(["perplexity", "defualt", str(text)]) == 1
    assert "did you mean 'default'" in capsys.readouterr().err
    assert main(["perplexity", "default", str(text), "--batch-size", "0"]) == 1   # (named batch_size)
    assert "--batch-size must be at least 1, got 0" in capsys.readouterr().err
