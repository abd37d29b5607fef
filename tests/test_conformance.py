"""The reference activations of the original implementation, to its stated tolerance."""
import json

import h5py
import numpy as np
import pytest
import torch

from elmo import batch_to_ids, load_original
from elmo.modules import dense
from tests.conftest import ALLENNLP, NOSKIP

CASES = {"allennlp": (ALLENNLP, "sentences.json"), "noskip": (NOSKIP, "lm_embeddings_sentences.json")}
BACKENDS = ["default"] + (["onednn"] if dense._onednn_linear_available() else [])


@pytest.fixture(params=BACKENDS)
def dense_backend(request, monkeypatch):
    """Runs a check with PyTorch's own products and with oneDNN's (elmo.modules.dense), whichever
    this machine would pick by default; with oneDNN, the LSTM's steps use it too, one-row
    steps (a batch's rows that have ended) included, whatever the weights' size."""
    monkeypatch.setattr(dense, "BACKEND", request.param)
    if request.param == "onednn":
        monkeypatch.setattr(dense, "RECURRENT_MIN_BYTES", 0)
    return request.param


def replay(folder, sentence_file, bilm):
    """Feed batch i = [list0[i], list1[i], list2[i]] for i = 0..9 through one stateful model."""
    sentences = json.loads((folder / sentence_file).read_text())
    expected = [h5py.File(folder / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    try:
        for i in range(10):
            batch = [sentences[k][i].strip().split() for k in range(3)]
            with torch.no_grad():
                top = bilm(batch_to_ids(batch))["activations"][-1]
            for k, tokens in enumerate(batch):
                n, p = len(tokens), top.shape[-1] // 2
                got = np.stack([top[k, :n, :p].numpy(), top[k, :n, p:].numpy()])
                want = expected[k][str(i)][...]
                assert got.shape == want.shape
                assert np.allclose(got, want, atol=1e-6), f"batch {i} row {k}: {np.abs(got - want).max()}"
    finally:
        for f in expected:
            f.close()


@pytest.mark.parametrize("case", CASES)
def test_stateful_replay_matches_reference(case, dense_backend):
    folder, sentence_file = CASES[case]
    bilm = load_original(folder / "options.json", folder / "lm_weights.hdf5", stateful=True)
    replay(folder, sentence_file, bilm)


def test_stateless_mode_does_not_match_the_carried_state_reference():
    """The replay depends on the carried state: a stateless model must fail it (the test can fail)."""
    folder, sentence_file = CASES["allennlp"]
    bilm = load_original(folder / "options.json", folder / "lm_weights.hdf5", stateful=False)
    with pytest.raises(AssertionError):
        replay(folder, sentence_file, bilm)


def test_token_embeddings_match_reference(dense_backend):
    bilm = load_original(ALLENNLP / "options.json", ALLENNLP / "lm_weights.hdf5")
    vocab = (ALLENNLP / "vocab_test.txt").read_text().split("\n")
    vocab = [w for w in vocab if w]
    with h5py.File(ALLENNLP / "elmo_token_embeddings.hdf5", "r") as f:
        want = f["embedding"][...]
    with torch.no_grad():
        got = bilm.token_encoder(batch_to_ids([[w] for w in vocab]))[:, 0].numpy()
    assert got.shape == want.shape
    assert np.allclose(got, want, atol=1e-6)


def test_noskip_state_rows_follow_the_original():
    """After the replay an unused 4th row is still zero; a batch of 2 leaves row 3 unchanged."""
    folder, sentence_file = CASES["noskip"]
    bilm = load_original(folder / "options.json", folder / "lm_weights.hdf5", stateful=True)
    replay(folder, sentence_file, bilm)
    with torch.no_grad():
        bilm(batch_to_ids([["a"], ["b"], ["c"], []]))  # the 4th row is all padding
    states = bilm.get_states()
    for c, h in states:
        assert c.shape[1] == 4 and c[:, 3].abs().sum() == 0 and h[:, 3].abs().sum() == 0
    before = [(c.clone(), h.clone()) for c, h in states]
    with torch.no_grad():
        bilm(batch_to_ids([["x", "y"], ["z"]]))
    for (c, h), (c0, h0) in zip(bilm.get_states(), before):
        assert torch.equal(c[:, 2:], c0[:, 2:]) and torch.equal(h[:, 2:], h0[:, 2:])
        assert not torch.equal(c[:, :2], c0[:, :2])
    bilm.reset_states()
    assert bilm.get_states() is None
