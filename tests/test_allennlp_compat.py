"""AllenNLP's public ELMo surface: N-d input, Elmo's options, ElmoTokenEmbedder, ElmoEmbedder."""
import copy
import io
import json

import h5py
import numpy as np
import pytest
import torch

from elmo import (BiLM, Elmo, ElmoEmbedder, ElmoTokenEmbedder, Embedder, batch_to_ids,
                  from_pretrained)
from tests.conftest import ALLENNLP, random_bilm

# (2, 3) passages of sentences, some empty, of different lengths (longest 4).
PASSAGES = [[["The", "dog", "bit", "."], ["Hi"], []],
            [["a", "bank"], ["the", "river", "bank", "rose"], ["x"]]]


def ids_4d(passages, n_chars=50):
    """(B, P, T, C) character ids, every passage padded to the longest sentence overall."""
    longest = max(len(s) for p in passages for s in p)
    out = torch.zeros(len(passages), len(passages[0]), longest, n_chars, dtype=torch.long)
    for b, passage in enumerate(passages):
        ids = batch_to_ids(passage, n_chars)
        out[b, :, :ids.shape[1]] = ids
    return out


def alone(module, sentence, **kwargs):
    with torch.no_grad():
        return module(batch_to_ids([sentence]), **kwargs)


# ---------------------------------------------------------------- N-d input
def test_bilm_4d_input_equals_each_sentence_alone():
    bilm = random_bilm()
    ids = ids_4d(PASSAGES)                                        # (2, 3, 4, 50)
    with torch.no_grad():
        out = bilm(ids)
        flat = bilm(ids.reshape(6, 4, 50))
    assert out["mask"].shape == (2, 3, 4)
    assert [a.shape for a in out["activations"]] == [(2, 3, 4, 12)] * 3
    for a, f in zip(out["activations"], flat["activations"]):  # a reshape of the 3-d call, exactly
        assert torch.equal(a, f.reshape(2, 3, 4, 12))
    for b, passage in enumerate(PASSAGES):
        for p, sentence in enumerate(passage):
            n = len(sentence)
            assert out["mask"][b, p].tolist() == [True] * n + [False] * (4 - n)
            one = alone(bilm, sentence)["activations"]
            for layer, single in zip(out["activations"], one):
                assert torch.allclose(layer[b, p, :n], single[0, :n], atol=1e-6)
                assert layer[b, p, n:].abs().sum() == 0


def test_bilm_5d_input_and_boundaries():
    bilm = random_bilm()
    ids = ids_4d(PASSAGES).unsqueeze(0)                          # (1, 2, 3, 4, 50)
    with torch.no_grad():
        out = bilm(ids, keep_sentence_boundaries=True)
    assert out["mask"].shape == (1, 2, 3, 6) and out["activations"][0].shape == (1, 2, 3, 6, 12)
    assert out["mask"][0, 1, 1].all()
    assert out["mask"][0, 0, 2].tolist() == [True, True] + [False] * 4      # empty: <S> </S>


def test_kept_boundaries_of_an_empty_sentence_are_run_as_in_allennlp():
    """AllenNLP's add_sentence_boundary_token_ids gives every row <S> and </S>, an empty one
    too: two positions of mask 1 with the LSTMs' vectors there. They were padding here (mask 0,
    zero vectors). The forward LSTM at <S> has seen only <S>, the backward one at </S> only </S>:
    what they give at those positions in any sentence."""
    bilm = random_bilm()
    for module in (bilm, Elmo(module=bilm, dropout=0.0, keep_sentence_boundaries=True)):
        with torch.no_grad():
            out = (module(batch_to_ids([["the", "dog"], []]), keep_sentence_boundaries=True)
                   if module is bilm else module(batch_to_ids([["the", "dog"], []]), return_layers=True))
        assert out["mask"].long().tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
        for layer in out["activations" if module is bilm else "layers"]:
            half = layer.shape[-1] // 2
            assert torch.allclose(layer[1, 0, :half], layer[0, 0, :half], atol=1e-6)      # forward at <S>
            assert torch.allclose(layer[1, 1, half:], layer[0, 3, half:], atol=1e-6)      # backward at </S>
            assert layer[1, 2:].abs().sum() == 0 and layer[1, :2].abs().sum() > 0


def test_kept_boundaries_move_an_empty_sentences_state_on_as_in_allennlp():
    """Stateful, AllenNLP's row of an empty sentence moved on by <S> </S> with the boundaries
    kept; here it kept its state (as it still does without them: a row that is not run)."""
    from reference_bilm import ReferenceBiLM
    bilm = random_bilm()
    first, second = batch_to_ids([["the", "dog"], []]), batch_to_ids([["x"], ["y"]])
    reference = ReferenceBiLM(copy.deepcopy(bilm))
    bilm.stateful = True
    with torch.no_grad():
        bilm(first, keep_sentence_boundaries=True)
        got = bilm(second)["activations"]
        _, state = reference.run(first, keep_sentence_boundaries=True)
        want, _ = reference.run(second, state)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-5)


def test_bilm_rejects_input_without_a_batch_dimension():
    with pytest.raises(ValueError, match="tokens, chars"):
        random_bilm()(batch_to_ids([["a"]])[0])


def test_elmo_4d_input_with_word_inputs_equals_each_sentence_alone():
    elmo = Elmo(module=random_bilm(), num_output_representations=2, dropout=0.0)
    ids = ids_4d(PASSAGES)
    words = torch.randint(1, 10, ids.shape[:-1])                  # (2, 3, 4): shape checked only
    with torch.no_grad():
        out = elmo(ids, words, return_layers=True)
    assert out["mask"].shape == (2, 3, 4)
    assert [r.shape for r in out["elmo_representations"]] == [(2, 3, 4, 12)] * 2
    assert [layer.shape for layer in out["layers"]] == [(2, 3, 4, 12)] * 3
    for b, passage in enumerate(PASSAGES):
        for p, sentence in enumerate(passage):
            n = len(sentence)
            single = alone(elmo, sentence)
            assert torch.equal(out["mask"][b, p, :n], single["mask"][0, :n])
            for rep, one in zip(out["elmo_representations"], single["elmo_representations"]):
                assert torch.allclose(rep[b, p, :n], one[0, :n], atol=1e-6)
                assert rep[b, p, n:].abs().sum() == 0


def test_elmo_4d_keep_sentence_boundaries():
    elmo = Elmo(module=random_bilm(), dropout=0.0, keep_sentence_boundaries=True)
    with torch.no_grad():
        out = elmo(ids_4d(PASSAGES))
    assert out["mask"].shape == (2, 3, 6) and out["elmo_representations"][0].shape == (2, 3, 6, 12)
    with torch.no_grad():
        one = alone(elmo, PASSAGES[1][1])                        # the longest: no padding
    assert torch.allclose(out["elmo_representations"][0][1, 1], one["elmo_representations"][0][0], atol=1e-6)


def test_elmo_bad_shapes_are_clear_errors():
    elmo = Elmo(module=random_bilm(), dropout=0.0)
    ids = ids_4d(PASSAGES)
    with pytest.raises(ValueError, match=r"word_inputs has shape \(2, 3\).*must be \(2, 3, 4\)"):
        elmo(ids, torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="inputs must be character ids"):
        elmo(torch.ones(4, 50, dtype=torch.long))


# ---------------------------------------------------------------- Elmo's options
def test_layer_norm_statistics_leave_out_the_boundaries_unlike_allennlp():
    """A documented difference: with do_layer_norm the mean and variance are over the tokens
    (as bilm-tf); AllenNLP computes them with the <S> and </S> positions included."""
    bilm = random_bilm()
    ids = batch_to_ids([["the", "dog", "bit", "the", "man"], ["a"]])
    with torch.no_grad():
        got = Elmo(module=bilm, dropout=0.0, do_layer_norm=True)(ids)["elmo_representations"][0]
        plain, bounded = bilm(ids), bilm(ids, keep_sentence_boundaries=True)

    def normalised_mix(layers, mask):
        keep = mask.unsqueeze(-1).float()
        out = 0
        for layer in layers:
            count = keep.sum() * layer.shape[-1]
            mean = (layer * keep).sum() / count
            var = (((layer - mean) * keep) ** 2).sum() / count
            out = out + (layer - mean) / torch.sqrt(var + 1e-12) / len(layers)
        return out

    keep = plain["mask"].unsqueeze(-1)  # (padding: zero, as AllenNLP gives it without boundaries)
    assert torch.allclose(got, normalised_mix(plain["activations"], plain["mask"]) * keep, atol=1e-5)
    allennlp = normalised_mix(bounded["activations"], bounded["mask"])[:, 1:-1]
    assert (allennlp - got)[plain["mask"]].abs().max() > 1e-3


def test_fixed_scalar_mix_parameters_pick_a_layer_and_are_not_trained():
    bilm = random_bilm()
    elmo = Elmo(module=bilm, dropout=0.0, scalar_mix_parameters=[-9e10, 1.0, -9e10])
    ids = batch_to_ids([["the", "dog"], ["a"]])
    out = elmo(ids, return_layers=True)
    assert torch.equal(out["elmo_representations"][0], out["layers"][1])
    assert not any(p.requires_grad for p in elmo.scalar_mixes[0].parameters())


def test_allennlps_names_for_the_mixes_reach_them():
    """AllenNLP's Elmo holds its mixes as scalar_mix_0, scalar_mix_1, ... (and the list
    _scalar_mixes); code that reads the learned layer weights through them stopped with an
    AttributeError. They name the same modules now; the state_dict keys stay as they were."""
    elmo = Elmo(module=random_bilm(), num_output_representations=2, dropout=0.0)
    keys = list(elmo.state_dict())
    assert elmo.scalar_mix_0 is elmo.scalar_mixes[0] and elmo.scalar_mix_1 is elmo.scalar_mixes[1]
    assert elmo._scalar_mixes == list(elmo.scalar_mixes)
    with torch.no_grad():
        elmo.scalar_mix_1.scalar_parameters.copy_(torch.tensor([-9e10, 1.0, -9e10]))
    out = elmo(batch_to_ids([["the", "dog"]]), return_layers=True)
    assert torch.equal(out["elmo_representations"][1], out["layers"][1])
    for missing in ("scalar_mix_2", "scalar_mix_01", "scalar_mix_"):
        with pytest.raises(AttributeError, match=missing):
            getattr(elmo, missing)
    assert list(elmo.state_dict()) == keys and not any("scalar_mix_" in k for k in keys)


class AllenNLPStyleBiLM(torch.nn.Module):
    """A module on AllenNLP's contract for Elmo(module=...): outputs keep <S> and </S>."""

    def __init__(self, bilm):
        super().__init__()
        self.bilm, self.num_layers, self.seen = bilm, bilm.num_layers, []

    def get_output_dim(self):
        return self.bilm.output_dim

    def forward(self, inputs, word_inputs=None):
        self.seen.append(None if word_inputs is None else tuple(word_inputs.shape))
        return self.bilm(inputs, keep_sentence_boundaries=True)


def test_module_on_allennlps_contract_gives_what_the_bilm_gives():
    bilm = random_bilm()
    wrapped = AllenNLPStyleBiLM(bilm)
    other = Elmo(module=wrapped, num_output_representations=2, dropout=0.0)
    ours = Elmo(module=bilm, num_output_representations=2, dropout=0.0)
    assert other.get_output_dim() == 12
    ids = ids_4d(PASSAGES)
    with torch.no_grad():
        a = other(ids, torch.ones(ids.shape[:-1], dtype=torch.long))
        b = ours(ids)
    assert wrapped.seen == [(6, 4)]                               # word ids reach it, flattened
    assert torch.equal(a["mask"], b["mask"])
    # (up to rounding: with the boundaries kept, the empty sentences are run too, in one batch)
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(a["elmo_representations"], b["elmo_representations"]))
    kept = Elmo(module=wrapped, dropout=0.0, keep_sentence_boundaries=True)
    with torch.no_grad():
        assert kept(ids)["elmo_representations"][0].shape == (2, 3, 6, 12)
    with pytest.raises(ValueError, match="vocab_to_cache needs a BiLM"):
        Elmo(module=wrapped, vocab_to_cache=["the"])


class MismatchedBiLM(AllenNLPStyleBiLM):
    """Returns a mask one position short of its activations."""

    def forward(self, inputs, word_inputs=None):
        out = self.bilm(inputs, keep_sentence_boundaries=True)
        return {"activations": out["activations"], "mask": out["mask"][:, :-1]}


@pytest.mark.parametrize("keep", [False, True])
def test_module_whose_mask_does_not_fit_its_activations_is_a_clear_error(keep):
    """(keep_sentence_boundaries: the vectors came back with a mask that did not fit them)"""
    mixer = Elmo(module=MismatchedBiLM(random_bilm()), dropout=0.0, keep_sentence_boundaries=keep)
    with pytest.raises(ValueError, match=r"returned activations of shapes \[\(2, 4, 12\).* a mask of "
                                         r"shape \(2, 3\)"):
        mixer(batch_to_ids([["the", "dog"], ["a"]]))


# ---------------------------------------------------------------- ElmoTokenEmbedder
def test_token_embedder_from_files_projection_and_4d():
    emb = ElmoTokenEmbedder(str(ALLENNLP / "options.json"), str(ALLENNLP / "lm_weights.hdf5"),
                            dropout=0.0, projection_dim=7)
    assert emb.get_output_dim() == 7
    ids = ids_4d(PASSAGES)
    out = emb(ids, torch.ones(ids.shape[:-1], dtype=torch.long))
    assert out.shape == (2, 3, 4, 7)
    with torch.no_grad():  # the projection of Elmo's single mix
        mixed = emb.elmo(ids)["elmo_representations"][0]
        assert torch.allclose(out, emb._projection(mixed), atol=1e-6)
    out.sum().backward()
    assert emb._projection.weight.grad is not None                # the projection is trained
    assert emb.elmo.scalar_mixes[0].scalar_parameters.grad is not None
    assert all(p.grad is None and not p.requires_grad for p in emb.elmo.bilm.parameters())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_token_embedder_projects_a_bilm_of_another_dtype(dtype, tmp_path):
    """A biLM that is not float32 (a weight file saved from a bfloat16 model loads as
    bfloat16) made the projection fail inside nn.Linear ("mat1 and mat2 must have the same
    dtype"). The float32 projection now takes the mix in its own dtype and is trained."""
    from elmo import save_original
    bilm = random_bilm()
    ids = batch_to_ids([["a", "b"], ["c"]])
    save_original(bilm.to(dtype), tmp_path / "options.json", tmp_path / "weights.hdf5")
    emb = ElmoTokenEmbedder(str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5"),
                            dropout=0.0, projection_dim=5)
    assert next(emb.elmo.bilm.parameters()).dtype == dtype      # (as the README says)
    out = emb(ids)
    assert out.shape == (2, 2, 5) and out.dtype == torch.float32
    with torch.no_grad():
        mixed = emb.elmo(ids)["elmo_representations"][0]
        assert mixed.dtype == dtype
        assert torch.equal(out, emb._projection(mixed.float()))
    out.sum().backward()
    assert emb._projection.weight.grad is not None
    # converted as a whole, the layer takes that dtype too
    assert emb.to(dtype)(ids).dtype == dtype


def test_token_embedder_on_raw_ids_of_any_rank():
    """Hand-made ids (not from batch_to_ids), 3-d and 4-d, as AllenNLP's own test feeds them."""
    emb = ElmoTokenEmbedder(module=random_bilm(), projection_dim=5)
    w1, w2 = [6, 5, 4, 3] + [0] * 46, [3, 2, 1] + [0] * 47
    assert emb(torch.tensor([[w1, w2]])).shape == (1, 2, 5)
    assert emb(torch.tensor([[[w1]]])).shape == (1, 1, 1, 5)
    assert emb(torch.zeros(2, 0, 3, 50, dtype=torch.long)).shape == (2, 0, 3, 5)


def test_token_embedder_without_projection_and_options():
    bilm = random_bilm()
    emb = ElmoTokenEmbedder(module=bilm, dropout=0.0, requires_grad=True,
                            scalar_mix_parameters=[0.0, 0.0, 5.0])
    assert emb.get_output_dim() == 12 and emb._projection is None
    mix = emb.elmo.scalar_mixes[0]
    assert not mix.scalar_parameters.requires_grad and not mix.gamma.requires_grad
    ids = batch_to_ids([["the", "dog", "bit"]])
    out = emb(ids)
    layers = bilm(ids)["activations"]
    w = torch.softmax(torch.tensor([0.0, 0.0, 5.0]), 0)
    assert torch.allclose(out, sum(wj * h for wj, h in zip(w, layers)), atol=1e-6)
    out.sum().backward()                                          # requires_grad: the biLM learns
    assert bilm.lstm.layers[0].weight_hh.grad is not None
    with pytest.raises(ValueError, match="projection_dim must be at least 1, got 0"):
        ElmoTokenEmbedder(module=random_bilm(), projection_dim=0)
    for width in (2.5, "4", True):  # (2.5 met a TypeError inside nn.Linear)
        with pytest.raises(TypeError, match="projection_dim must be an integer"):
            ElmoTokenEmbedder(module=random_bilm(), projection_dim=width)


# ---------------------------------------------------------------- ElmoEmbedder
SENTENCES = [["The", "bank", "closed", "."], ["Hi"], [], ["the", "river", "bank", "rose", "again", "."]]


@pytest.fixture(scope="module")
def fixture_embedder():
    return ElmoEmbedder(str(ALLENNLP / "options.json"), str(ALLENNLP / "lm_weights.hdf5"))


def test_embedder_methods_agree_with_embedder(fixture_embedder):
    ee = fixture_embedder
    reference = Embedder("fixture").embed_sentences(SENTENCES)
    batch = ee.embed_batch(SENTENCES)
    assert [a.shape for a in batch] == [(3, 4, 32), (3, 1, 32), (3, 0, 32), (3, 6, 32)]
    assert all(a.dtype == np.float32 for a in batch)
    for got, want in zip(batch, reference):                        # the same batch: exactly
        assert np.array_equal(got, want)
    single = ee.embed_sentence(SENTENCES[0])
    assert np.allclose(single, reference[0], atol=1e-6)
    lazy = ee.embed_sentences(iter(SENTENCES), batch_size=3)
    assert not isinstance(lazy, list)
    for got, want in zip(lazy, reference):
        assert got.shape == want.shape and np.allclose(got, want, atol=1e-6)
    acts, mask = ee.batch_to_embeddings(SENTENCES)
    assert acts.shape == (4, 3, 6, 32) and mask.shape == (4, 6)
    assert np.allclose(acts[0, :, :4].numpy(), reference[0], atol=1e-6)


def test_batch_to_embeddings_gives_allennlps_long_mask(fixture_embedder):
    """The mask was bool where AllenNLP 0.9 gave a long 0/1 mask, so code written for it
    stopped at ``1 - mask`` ("Subtraction ... with a bool tensor is not supported")."""
    _, mask = fixture_embedder.batch_to_embeddings(SENTENCES)
    lengths = [len(s) for s in SENTENCES]
    assert mask.dtype == torch.long
    assert (1 - mask).sum(-1).tolist() == [mask.shape[1] - n for n in lengths]
    assert mask.sum(-1).tolist() == lengths


def test_embed_sentences_is_lazy(fixture_embedder):
    taken = []

    def source():
        for s in SENTENCES * 3:
            taken.append(s)
            yield s

    first = next(fixture_embedder.embed_sentences(source(), batch_size=2))
    assert first.shape == (3, 4, 32) and len(taken) == 2


def test_embedder_bad_input_is_a_clear_error(fixture_embedder):
    with pytest.raises(TypeError, match="got a string"):
        fixture_embedder.embed_sentence("The bank closed .")
    with pytest.raises(ValueError, match="both options_file and weight_file"):
        ElmoEmbedder(str(ALLENNLP / "options.json"))
    with pytest.raises(ValueError, match="cuda_device=99"):
        ElmoEmbedder(model="fixture", cuda_device=99)


@pytest.mark.parametrize("stateful", [False, True])
def test_embedder_batches_that_are_not_lists_are_clear_errors_or_work(stateful):
    """embed_batch of a generator said "object of type 'generator' has no len()" (stateful:
    "max() arg is an empty sequence"), a dict "got a string", None "'NoneType' object is not
    iterable", and a numpy array of token rows failed in numpy ("truth value ... ambiguous");
    embed_sentences counted a bad sentence from the start of its batch, not of the input."""
    embedder = ElmoEmbedder(model="fixture", stateful=stateful)
    bad = [((["a"] for _ in range(2)), "embed_batch expects a list of token lists, got generator"),
           ({"a": 1}, "embed_batch expects a list of token lists, got a dict"),
           (None, "embed_batch expects a list of token lists, got NoneType")]
    for batch, message in bad:
        with pytest.raises(TypeError, match=message):
            embedder.embed_batch(batch)
    with pytest.raises(TypeError, match=r"batch_to_embeddings expects a list of token lists, got generator"):
        embedder.batch_to_embeddings(["a"] for _ in range(2))
    rows = [["a", "b"], ["c", "d"]]
    embedder.elmo_bilm.reset_states()
    want = embedder.embed_batch(rows)
    embedder.elmo_bilm.reset_states()
    got = embedder.embed_batch(np.array(rows))
    assert len(got) == 2 and all(np.array_equal(w, g) for w, g in zip(want, got))
    sentences = iter([["a"]] * 5 + ["b c"])
    with pytest.raises(TypeError, match=r"embed_sentences: sentence 5 is a string \('b c'\)"):
        list(embedder.embed_sentences(sentences, batch_size=2))


def test_embed_sentences_refuses_a_set_or_dict_of_sentences(fixture_embedder):
    """embed_sentences of a set gave one array per sentence in the set's hash order, which the
    caller could not match to the sentences (and a dict embedded its keys); embed_batch
    refused both. A set of words for a token cache is still taken: its order does not matter."""
    for sentences in ({("a", "b"), ("c",)}, {("a",): "label"}):
        with pytest.raises(TypeError, match=r"embed_sentences expects a list of token lists, got a "
                                            r"(set|dict), which has no order of its own; pass a list"):
            list(fixture_embedder.embed_sentences(sentences))
    assert Embedder("fixture").build_token_cache({("a", "b"), ("a", "b", "c")}, min_count=1) == 3


def test_embedder_stateful_replays_the_allennlp_reference():
    """stateful=True is AllenNLP's behaviour: embed_batch carries each row's state into the next
    call, and replays the reference activations of the conformance fixture."""
    ee = ElmoEmbedder(str(ALLENNLP / "options.json"), str(ALLENNLP / "lm_weights.hdf5"), stateful=True)
    sentences = json.loads((ALLENNLP / "sentences.json").read_text())
    files = [h5py.File(ALLENNLP / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    try:
        for i in range(10):
            batch = [sentences[k][i].strip().split() for k in range(3)]
            for k, array in enumerate(ee.embed_batch(batch)):
                top = array[-1]                                    # (n, 32): [forward; backward]
                got = np.stack([top[:, :16], top[:, 16:]])
                assert np.allclose(got, files[k][str(i)][...], atol=1e-6)
    finally:
        for f in files:
            f.close()
    stateless = ElmoEmbedder(model=ee.elmo_bilm, stateful=False)  # the same weights, no state
    again = [stateless.embed_sentence(["Hi", "there"]) for _ in range(2)]
    assert np.array_equal(*again)


def test_stateful_embed_batch_runs_long_sentences_whole():
    """Stateful, row b carries its state to row b of the next call: a sentence longer than
    max_tokens ran as windows in rows of their own, moving the next sentence to another row
    and call, where it started from a window's state."""
    bilm = random_bilm()
    windowed = ElmoEmbedder(model=copy.deepcopy(bilm), stateful=True, max_tokens=4, overlap=1)
    reference = ElmoEmbedder(model=copy.deepcopy(bilm), stateful=True)   # one biLM call per batch
    batch = [list("abcdefghij"), ["k", "l"], []]
    for _ in range(2):   # the second call starts from the state the first left
        got = windowed.embed_batch(batch)
        activations, mask = reference.batch_to_embeddings(batch)
        for b, sentence in enumerate(batch):
            want = activations[b, :, :len(sentence)].numpy()
            assert got[b].shape == want.shape
            assert np.allclose(got[b], want, atol=1e-5)


def test_stateful_embed_file_equals_embed_sentences_with_long_lines(tmp_path):
    """Stateful embed_file cut a line longer than max_tokens into windows, rows of their own,
    so the lines after it got other rows' state than embed_sentences (and AllenNLP) give them."""
    bilm = random_bilm()
    lines = ["a b c d e f g h i j", "k l", "m n o", "p"]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    writer = ElmoEmbedder(model=copy.deepcopy(bilm), stateful=True, max_tokens=4, overlap=1)
    writer.embed_file(src, tmp_path / "out.hdf5", batch_size=2)
    reader = ElmoEmbedder(model=copy.deepcopy(bilm), stateful=True, max_tokens=4, overlap=1)
    want = list(reader.embed_sentences([line.split() for line in lines], batch_size=2))
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        for i, w in enumerate(want):
            assert f[str(i)].shape == w.shape
            assert np.allclose(f[str(i)][...], w, atol=1e-5)


def test_stateful_embed_file_leaves_the_callers_model_its_carried_state(tmp_path):
    """ElmoEmbedder(model=bilm, stateful=True).embed_file left the file's last state in the
    caller's model: the next embed_batch continued from the file's text, not from the batches
    embedded before it (as AllenNLP's row-by-row carry has it)."""
    bilm = random_bilm()
    src = tmp_path / "in.txt"
    src.write_text("k l m n\no p\nq\n", encoding="utf-8")
    batch = [["the", "river", "bank"], ["a", "b"]]
    embedder = ElmoEmbedder(model=bilm, stateful=True)
    reference = ElmoEmbedder(model=copy.deepcopy(bilm), stateful=True)
    embedder.embed_batch(batch)
    reference.embed_batch(batch)
    embedder.embed_file(src, tmp_path / "out.hdf5", batch_size=2)
    for got, want in zip(embedder.embed_batch(batch), reference.embed_batch(batch)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fmt", ["all", "top", "average"])
def test_embed_file_layout(fixture_embedder, tmp_path, fmt):
    lines = ["The bank closed .", "Hi", "The bank closed ."]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.hdf5"
    fixture_embedder.embed_file(str(src), str(out), output_format=fmt, batch_size=2)
    want = [fixture_embedder.embed_sentence(line.split()) for line in lines]
    with h5py.File(out, "r") as f:
        assert sorted(f.keys()) == ["0", "1", "2", "sentence_to_index"]
        index = json.loads(f["sentence_to_index"][0])
        assert index == {"The bank closed .": "2", "Hi": "1"}
        for i, w in enumerate(want):
            expected = {"all": w, "top": w[-1], "average": w.mean(axis=0)}[fmt]
            got = f[str(i)][...]
            assert got.dtype == np.float32 and got.shape == expected.shape
            assert np.allclose(got, expected, atol=1e-5)


def test_embed_file_from_an_open_file_into_a_new_folder(fixture_embedder, tmp_path):
    # A path input makes the output's folder; an open file did not (FileNotFoundError naming
    # the temporary copy of its text)
    out = tmp_path / "new" / "deeper" / "out.hdf5"
    fixture_embedder.embed_file(io.StringIO("a b\n"), out, output_format="top")
    with h5py.File(out, "r") as f:
        assert f["0"].shape == (2, 32)
    assert [p.name for p in out.parent.iterdir()] == ["out.hdf5"]
    # a failed run leaves no folder it made
    bad = tmp_path / "other" / "out.hdf5"
    with pytest.raises(ValueError, match="not valid UTF-8"):
        fixture_embedder.embed_file(io.BytesIO(b"\xff\n"), bad)
    assert not (tmp_path / "other").exists()


def test_embed_file_from_an_open_file_checks_the_output_as_for_a_path(fixture_embedder, tmp_path):
    # (a folder that is a file: a bare FileExistsError for an open file, one line for a path)
    (tmp_path / "afile").write_text("kept", encoding="utf-8")
    out = tmp_path / "afile" / "out.hdf5"
    for source in (lambda: str(tmp_path / "afile"), lambda: io.StringIO("a b\n")):
        with pytest.raises(OSError, match=r"afile/out\.hdf5: .*afile is not a directory"):
            fixture_embedder.embed_file(source(), out)
    assert (tmp_path / "afile").read_text(encoding="utf-8") == "kept"


def test_embed_file_refuses_to_write_over_the_open_file_it_reads(fixture_embedder, tmp_path):
    """A path given as both input and output is refused; the same file given as an open file
    was read, then replaced by the vectors: the text was lost."""
    from elmo.io import OutputError
    source = tmp_path / "sentences.txt"
    source.write_text("a b\nc\n", encoding="utf-8")
    (tmp_path / "link.hdf5").symlink_to(source)
    for output in (source, tmp_path / "link.hdf5"):
        for mode in ("rb", "r"):
            with open(source, mode) as handle, pytest.raises(OutputError, match="is the input file"):
                fixture_embedder.embed_file(handle, output)
    assert source.read_text(encoding="utf-8") == "a b\nc\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.hdf5", "sentences.txt"]
    # another file, or a handle without one, is written as before
    with open(source, "rb") as handle:
        fixture_embedder.embed_file(handle, tmp_path / "out.hdf5", output_format="top")
    fixture_embedder.embed_file(io.BytesIO(b"a b\n"), tmp_path / "out2.hdf5", output_format="top")
    for name in ("out.hdf5", "out2.hdf5"):
        with h5py.File(tmp_path / name, "r") as f:
            assert f["0"].shape == (2, 32)


def test_embed_file_errors_name_the_open_file_not_its_copy(fixture_embedder, tmp_path):
    # The line was named in the temporary copy of the text, deleted when the error was seen
    source = tmp_path / "sentences.txt"
    source.write_text("a b\nc\na b\n", encoding="utf-8")
    with open(source, encoding="utf-8") as handle, \
            pytest.raises(ValueError, match=r"sentences\.txt: line 3 repeats line 1") as caught:
        fixture_embedder.embed_file(handle, tmp_path / "out.hdf5", use_sentence_keys=True)
    assert "input.txt" not in str(caught.value)
    with pytest.raises(ValueError, match="^the BytesIO given: line 2: byte 0xff") as caught:
        fixture_embedder.embed_file(io.BytesIO(b"a\n\xff\n"), tmp_path / "out.hdf5")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sentences.txt"]


def test_embed_file_from_a_text_handle_with_lone_surrogates(fixture_embedder, tmp_path):
    """A text handle's lone surrogates were a bare UnicodeEncodeError. Those of
    errors="surrogateescape" (sys.stdin under a POSIX locale) are the bytes it could not
    decode: the error names them as for the path; any other one is named with its line."""
    from elmo.embedding import InputError
    source = tmp_path / "latin1.txt"
    source.write_bytes(b"a b\ncaf\xe9 au lait\n")
    out = tmp_path / "out.hdf5"
    expected = r"latin1\.txt: line 2: byte 0xe9 at byte offset 7 is not valid UTF-8"
    with pytest.raises(InputError, match=expected):
        fixture_embedder.embed_file(source, out)
    with open(source, encoding="utf-8", errors="surrogateescape") as handle, \
            pytest.raises(InputError, match=expected):
        fixture_embedder.embed_file(handle, out)
    with pytest.raises(InputError, match=r"^the StringIO given: line 3: character U\+D800 is a lone surrogate"):
        fixture_embedder.embed_file(io.StringIO("a\nb\nc \ud800 d\n"), out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latin1.txt"]


def test_embed_file_arguments_that_are_neither_paths_nor_open_files(fixture_embedder, tmp_path):
    """A list of lines, bytes or None as ``input_file`` was a bare AttributeError (no
    ``read``); a wrong output was pathlib's TypeError for an open file and named
    ``output_path`` for a path. Both name the parameter now, before any handle is read."""
    source = tmp_path / "in.txt"
    source.write_text("a b\n", encoding="utf-8")
    for bad in (["a b", "c"], str(source).encode(), None, 3):
        with pytest.raises(TypeError, match=rf"^input_file must be a path .* got {type(bad).__name__}: "):
            fixture_embedder.embed_file(bad, tmp_path / "out.hdf5")
    for bad in (None, str(tmp_path / "out.hdf5").encode(), io.BytesIO()):
        for make_input in (lambda: str(source), lambda: io.StringIO("a b\n")):
            handle = make_input()
            with pytest.raises(TypeError, match=rf"^output_file_path must be a path .* got {type(bad).__name__}: "):
                fixture_embedder.embed_file(handle, bad)
            if isinstance(handle, io.StringIO):
                assert not handle.closed and handle.read() == "a b\n"  # not used up
    # (the switches were checked by embed_file, after the handle was read and closed, and
    # use_sentence_keys was called sentence_keys)
    for name in ("use_sentence_keys", "forget_sentences"):
        handle = io.StringIO("a b\n")
        with pytest.raises(TypeError, match=rf"^{name} must be True or False, got int: 1$"):
            fixture_embedder.embed_file(handle, tmp_path / "out.hdf5", **{name: 1})
        assert not handle.closed and handle.read() == "a b\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_embed_file_from_an_open_file_deletes_the_copy_a_killed_run_left(fixture_embedder, tmp_path):
    """The copy of an open file's text beside the output had a random name: a run killed
    before its end left the whole text there for ever. A run for the same output deletes the
    copy of one whose process has ended (and not one of a live process)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "out.hdf5"
    from elmo.io import temporary_folder
    live = temporary_folder(out, ".input")   # this process's: a run under way
    make_copy = ("import sys; from pathlib import Path; from elmo.io import temporary_folder; "
                 "f = temporary_folder(Path(sys.argv[1]), '.input'); (f / 'input.txt').write_text('a b')")
    subprocess.run([sys.executable, "-c", make_copy, str(out)], check=True, timeout=60,
                   env={**os.environ, "PYTHONPATH": str(root)})
    dead = [p for p in tmp_path.iterdir() if p != live]
    assert len(dead) == 1 and dead[0].name.startswith(".out.hdf5.") and (dead[0] / "input.txt").exists()
    fixture_embedder.embed_file(io.BytesIO(b"a b\n"), out, output_format="top")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, "out.hdf5"])


def test_embed_file_from_an_open_file_with_sentence_keys(fixture_embedder, tmp_path):
    handle = io.StringIO("a b\nc\n")
    out = tmp_path / "keys.hdf5"
    fixture_embedder.embed_file(handle, out, output_format="top", use_sentence_keys=True)
    assert handle.closed
    with h5py.File(out, "r") as f:
        assert sorted(f.keys()) == ["a b", "c"]
        assert f["a b"].shape == (2, 32)
    assert [p.name for p in tmp_path.iterdir()] == ["keys.hdf5"]  # no temporary left behind
    fixture_embedder.embed_file(io.StringIO("a b\n"), out, forget_sentences=True)  # replaces it
    with h5py.File(out, "r") as f:
        assert list(f.keys()) == ["0"] and f["0"].shape == (3, 2, 32)
    with pytest.raises(ValueError, match="output_format"):
        fixture_embedder.embed_file(io.StringIO("a\n"), out, output_format="mean")


def test_default_model_when_no_files_are_given():
    ee = ElmoEmbedder()
    assert isinstance(ee.elmo_bilm, BiLM) and not ee.elmo_bilm.stateful
    assert ee.embed_sentence(["Hello"]).shape == (ee.elmo_bilm.num_layers, 1, ee.elmo_bilm.output_dim)
    assert from_pretrained("default").options.to_json() == ee.elmo_bilm.options.to_json()


@pytest.mark.parametrize("open_file", [False, True])
def test_embed_file_errors_name_the_parameters_of_embed_file_not_the_cli_options(fixture_embedder, tmp_path,
                                                                              open_file):
    """The errors said "--sentence-keys" and "pass --errors replace", options of elmo embed
    that a caller of ElmoEmbedder.embed_file neither passed nor can pass."""
    source = tmp_path / "sentences.txt"

    def given():
        return open(source, "rb") if open_file else source
    source.write_text("a b\n\nc\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2 is empty; use_sentence_keys=True needs") as caught:
        fixture_embedder.embed_file(given(), tmp_path / "out.hdf5", use_sentence_keys=True)
    assert "--" not in str(caught.value)
    source.write_text("a b\nc/./d\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: .* \(pass use_sentence_keys=False\)") as caught:
        fixture_embedder.embed_file(given(), tmp_path / "out.hdf5", use_sentence_keys=True)
    assert "--" not in str(caught.value)
    source.write_bytes(b"a\n\xff\n")
    with pytest.raises(ValueError, match=r"line 2: .*errors='replace'") as caught:
        fixture_embedder.embed_file(given(), tmp_path / "out.hdf5")
    assert "--" not in str(caught.value)


def test_embed_file_refuses_a_busy_output_before_it_reads_the_open_file(fixture_embedder, tmp_path):
    """An output another process writes (it holds OUTPUT.lock) was refused as OutputBusy only
    after the open file was read and closed: a stream such as stdin was lost. It is refused
    with the handle unread and open; once the output is free the same handle is embedded."""
    from elmo.io import OutputBusy
    from elmo.output_lock import output_lock
    out = tmp_path / "new" / "out.hdf5"
    handle = io.BytesIO(b"a b\nc\n")
    with output_lock(out):   # (a second lock of one file in a process stands for another process's)
        with pytest.raises(OutputBusy, match=r"out\.hdf5 is already being written by PID"):
            fixture_embedder.embed_file(handle, out, output_format="top")
        assert not handle.closed and handle.tell() == 0
    fixture_embedder.embed_file(handle, out, output_format="top")
    assert handle.closed
    with h5py.File(out, "r") as f:
        assert f["0"].shape == (2, 32) and f["1"].shape == (1, 32)
    assert sorted(p.name for p in out.parent.iterdir()) == ["out.hdf5"]   # no lock file nor copy left


@pytest.mark.parametrize("text", [True, False])
def test_embed_file_copies_an_open_file_a_chunk_at_a_time(fixture_embedder, tmp_path, monkeypatch, text):
    """An open file's text was read whole into memory (a text handle's str encoded whole beside
    it) before being copied beside the output: a large stdin took several times its size. It is
    copied COPY_CHUNK characters or bytes at a time, with the same vectors, and a lone surrogate
    in a later chunk is named with its line in the whole text."""
    import elmo.allennlp_compat as compat
    from elmo.embedding import InputError
    lines = "a b\nc d e\nf\ng h\n"
    sizes = []

    class Recorded(io.StringIO if text else io.BytesIO):   # type: ignore[misc]
        def read(self, size=-1):
            sizes.append(size)
            return super().read(size)

    monkeypatch.setattr(compat, "COPY_CHUNK", 5, raising=False)
    (tmp_path / "path.txt").write_text(lines, encoding="utf-8")
    fixture_embedder.embed_file(tmp_path / "path.txt", tmp_path / "expected.hdf5")
    handle = Recorded(lines if text else lines.encode())
    fixture_embedder.embed_file(handle, tmp_path / "out.hdf5")
    assert handle.closed and len(sizes) >= 3 and all(0 < size <= 5 for size in sizes)
    with h5py.File(tmp_path / "expected.hdf5", "r") as a, h5py.File(tmp_path / "out.hdf5", "r") as b:
        assert sorted(a) == sorted(b) and all(np.array_equal(a[k][()], b[k][()]) for k in a)
    if text:
        with pytest.raises(InputError, match=r"^the Recorded given: line 4: character U\+D800"):
            fixture_embedder.embed_file(Recorded("a b\nc d e\nf\ng \ud800 h\n"), tmp_path / "bad.hdf5")


def test_embed_batch_keeps_one_call_when_another_call_comes_between(monkeypatch):
    """Threads sharing one stateless ElmoEmbedder: a call made between another call's start
    and its planning (here forced, by running it from inside the first one's plan) must not
    split the first batch into several biLM calls (it set the shared Embedder's batch_size)."""
    ee = ElmoEmbedder(model=random_bilm(seed=0))
    original_plan, calls, nested = Embedder.plan, [], []

    def plan_with_another_call_first(self, sentences):
        if not nested:
            nested.append(True)
            ee.embed_batch([["Hi"]])   # the other thread's call, in between
        return original_plan(self, sentences)

    monkeypatch.setattr(Embedder, "plan", plan_with_another_call_first)
    ee.elmo_bilm.register_forward_hook(lambda *_: calls.append(1))
    out = ee.embed_batch(SENTENCES)
    assert len(calls) == 2 and len(out) == len(SENTENCES)   # the nested call's, then this batch's
