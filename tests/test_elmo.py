import copy

import pytest
import torch

from elmo import Elmo, ElmoTokenEmbedder, ScalarMix, batch_to_ids
from tests.conftest import ALLENNLP, random_bilm


def test_allennlp_signature_and_output_dict():
    elmo = Elmo(str(ALLENNLP / "options.json"), str(ALLENNLP / "lm_weights.hdf5"), 2, dropout=0)
    out = elmo(batch_to_ids([["Hello", "world", "."], ["Hi"]]))
    assert set(out) == {"elmo_representations", "mask"}
    assert len(out["elmo_representations"]) == 2
    assert all(r.shape == (2, 3, 32) for r in out["elmo_representations"])
    assert elmo.get_output_dim() == 32
    assert not any(p.requires_grad for p in elmo.bilm.parameters())
    assert all(p.requires_grad for m in elmo.scalar_mixes for p in m.parameters())


def test_mixes_are_independent_and_trainable_with_a_frozen_bilm():
    elmo = Elmo(module=random_bilm(), num_output_representations=2, dropout=0.0)
    elmo.train()
    assert not elmo.bilm.training  # a frozen biLM stays in inference mode
    out = elmo(batch_to_ids([["the", "dog"]]))
    out["elmo_representations"][0].sum().backward()
    assert elmo.scalar_mixes[0].scalar_parameters.grad is not None
    assert elmo.scalar_mixes[1].scalar_parameters.grad is None
    assert elmo.penalty(0.1).requires_grad
    mixes = list(elmo.scalar_mixes)
    expected = mixes[0].penalty(0.1) + mixes[1].penalty(0.1)
    assert torch.equal(elmo.penalty(0.1), expected)


def test_penalty_without_mixes_is_a_zero_tensor():
    elmo = Elmo(module=random_bilm(), num_output_representations=0)
    penalty = elmo.penalty(0.1)
    assert isinstance(penalty, torch.Tensor) and penalty.dim() == 0 and float(penalty) == 0.0


def test_penalty_without_mixes_follows_the_models_device_and_dtype():
    """The zero was torch.zeros(()) on the CPU in float32, whatever the model: adding it to a
    GPU loss failed, and a float64 model's loss became float32."""
    elmo = Elmo(module=random_bilm(), num_output_representations=0).double()
    assert elmo.penalty(0.1).dtype == torch.float64
    elmo = Elmo(module=random_bilm(), num_output_representations=0).to("meta")
    assert elmo.penalty(0.1).device.type == "meta"


def test_dropout_applies_in_training_only():
    elmo = Elmo(module=random_bilm(), num_output_representations=1, dropout=0.5)
    ids = batch_to_ids([["the", "dog", "bit", "the", "man"]] * 4)
    elmo.eval()
    a, b = (elmo(ids)["elmo_representations"][0] for _ in range(2))
    assert torch.equal(a, b)
    elmo.train()
    dropped = elmo(ids)["elmo_representations"][0]
    assert (dropped == 0).float().mean() > 0.3


def test_fine_tuning_the_bilm():
    elmo = Elmo(module=random_bilm(), num_output_representations=1, requires_grad=True, dropout=0.0)
    elmo(batch_to_ids([["the", "dog"]]))["elmo_representations"][0].sum().backward()
    assert elmo.bilm.lstm.layers[0].weight_hh.grad is not None



def _unfreeze_elmo(elmo):
    elmo.requires_grad_(True)


def _unfreeze_bilm(elmo):
    elmo.bilm.requires_grad_(True)


def _unfreeze_each_parameter(elmo):
    for p in elmo.parameters():
        p.requires_grad = True


@pytest.mark.parametrize("unfreeze", [_unfreeze_elmo, _unfreeze_bilm, _unfreeze_each_parameter])
def test_a_bilm_unfrozen_after_the_constructor_is_fine_tuned(unfreeze):
    """Elmo(requires_grad=False), then the biLM unfrozen as any module's parameters are (for
    gradual unfreezing, say): the biLM still ran without autograd, its parameters required
    grad and got none, and the optimizer left them as they were, no error. Their flags now
    decide: the gradients are those of an Elmo made with requires_grad=True."""
    ids = batch_to_ids([["the", "dog", "bit"], ["a", "man"]])
    elmo = Elmo(module=random_bilm(), num_output_representations=1, dropout=0.0)
    unfreeze(elmo)
    elmo(ids)["elmo_representations"][0].sum().backward()
    tuned = Elmo(module=random_bilm(), num_output_representations=1, dropout=0.0, requires_grad=True)
    tuned(ids)["elmo_representations"][0].sum().backward()
    for (name, got), want in zip(elmo.bilm.named_parameters(), tuned.bilm.parameters()):
        assert got.grad is not None, name
        assert torch.allclose(got.grad, want.grad, rtol=1e-5, atol=1e-7), name


def test_an_elmo_frozen_by_its_own_requires_grad_call_does_not_warn():
    """requires_grad_(False) on a fine-tuning Elmo freezes it: no gradients for the biLM and no
    warning that another Elmo froze it."""
    import warnings

    elmo = Elmo(module=random_bilm(), dropout=0.0, requires_grad=True)
    elmo.requires_grad_(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = elmo(batch_to_ids([["a", "b"]]))["elmo_representations"][0]
    assert not out.requires_grad
    elmo.scalar_mixes[0].requires_grad_(True)  # the mix alone trains: the biLM stays frozen
    elmo(batch_to_ids([["a", "b"]]))["elmo_representations"][0].sum().backward()
    assert all(p.grad is None for p in elmo.bilm.parameters())


def test_a_bfloat16_weight_file_is_fine_tuned_in_float32(tmp_path):
    """A weight file saved from a bfloat16 model records that dtype and loads as bfloat16:
    Elmo(options_file, weight_file, requires_grad=True) trained the biLM's weights in bfloat16
    (AllenNLP's Elmo is float32). Fine-tuned it is float32; frozen it keeps the file's dtype."""
    from elmo import save_original
    save_original(random_bilm().to(torch.bfloat16), tmp_path / "options.json", tmp_path / "weights.hdf5")
    files = (str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5"))
    tuned = Elmo(*files, 1, requires_grad=True, dropout=0.0)
    assert {p.dtype for p in tuned.bilm.parameters()} == {torch.float32}
    tuned(batch_to_ids([["the", "dog"]]))["elmo_representations"][0].sum().backward()
    assert {p.dtype for p in Elmo(*files, 1, dropout=0.0).bilm.parameters()} == {torch.bfloat16}

def test_token_cache_through_elmo_gives_the_same_output():
    bilm = random_bilm()
    ids = batch_to_ids([["the", "dog", "zebra"]])
    plain = Elmo(module=bilm, dropout=0.0)(ids)["elmo_representations"][0]
    cached = Elmo(module=bilm, dropout=0.0, vocab_to_cache=["the", "dog"])(ids)["elmo_representations"][0]
    assert torch.allclose(plain, cached, atol=1e-6)


@pytest.mark.parametrize("make", [ElmoTokenEmbedder, Elmo])
def test_vocab_to_cache_takes_a_numpy_array_of_words(make):
    """A vocabulary read with numpy (or a pandas column's .values) was tested for its truth
    value: numpy's "truth value of an array ... is ambiguous" for two words or more, and for
    one word that is "" no cache at all, without a word."""
    import numpy as np
    for words in (np.array(["the", "dog"]), np.array([""])):
        module = make(module=random_bilm(), dropout=0.0, vocab_to_cache=words)
        bilm = module.elmo.bilm if isinstance(module, ElmoTokenEmbedder) else module.bilm
        assert bilm.token_encoder.token_cache_size == len(words) + 2   # (with <S> and </S>)


class _UncountedSGD(torch.optim.Optimizer):
    """Another library's optimizer: it writes through ``.data``, which no version counts."""

    def __init__(self, params, lr):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.data.add_(p.grad, alpha=-group["lr"])


@pytest.mark.parametrize("make_optimizer", [
    lambda params: torch.optim.SGD(params, lr=0.1),
    lambda params: torch.optim.SGD(params, lr=0.1, fused=True),
    lambda params: torch.optim.Adam(params, lr=0.1, fused=True),
    lambda params: _UncountedSGD(params, lr=0.1),
], ids=["sgd", "sgd-fused", "adam-fused", "another-library"])
def test_token_cache_follows_fine_tuning_and_loaded_weights(make_optimizer):
    """Elmo(requires_grad=True, vocab_to_cache=...) fine-tuned in train() mode (the cache off),
    then evaluated: the cached words kept the vectors of the weights before fine-tuning while
    the other words got the new ones. The cached vectors are now made again after a change,
    also one by a fused optimizer or another library's, whose writes PyTorch does not count."""
    ids = batch_to_ids([["the", "dog", "zebra"], ["dog", "ran"]])
    elmo = Elmo(module=random_bilm(), dropout=0.0, requires_grad=True, vocab_to_cache=["the", "dog"])
    optimizer = make_optimizer(elmo.parameters())
    elmo.train()
    elmo(ids)["elmo_representations"][0].sum().backward()
    optimizer.step()
    elmo.eval()
    encoder = elmo.bilm.token_encoder

    def assert_the_cache_gives_what_the_cnn_gives():
        with torch.no_grad():
            cached = elmo(ids, return_layers=True)["layers"][0]
            encoder.clear_token_cache()
            plain = elmo(ids, return_layers=True)["layers"][0]
        encoder.build_token_cache(["the", "dog"])
        # the CNN over other groupings of the distinct tokens: float32 rounding only
        assert torch.allclose(cached, plain, rtol=1e-5, atol=1e-6)
    assert_the_cache_gives_what_the_cnn_gives()                     # after the optimizer step
    elmo.bilm.load_state_dict(random_bilm(seed=1).state_dict())
    assert_the_cache_gives_what_the_cnn_gives()


@pytest.mark.parametrize("made", ["remade", "built"])
def test_token_cache_made_under_bf16_autocast_keeps_float32_vectors(made):
    """The cache's vectors, remade under bf16 autocast (a validation pass after a fine-tuning
    step) or built there, were kept rounded to bfloat16: later float32 calls gave the cached
    words vectors 4e-3 (relative) off the CNN's, the other words exact ones, without a word.
    They are made in the weights' float32 whatever the caller's autocast."""
    ids = batch_to_ids([["the", "dog", "zebra"], ["dog", "ran"]])
    elmo = Elmo(module=random_bilm(), dropout=0.0, requires_grad=True, vocab_to_cache=["the", "dog"])
    encoder = elmo.bilm.token_encoder
    with torch.autocast("cpu", dtype=torch.bfloat16):
        if made == "remade":  # a step changes the weights; the next no-grad call remakes the vectors
            optimizer = torch.optim.SGD(elmo.parameters(), lr=0.1)
            elmo(ids)["elmo_representations"][0].float().sum().backward()
            optimizer.step()
            with torch.no_grad():
                elmo(ids)
        else:
            encoder.build_token_cache(["the", "dog"])
    assert encoder._token_cache.vectors.dtype == torch.float32
    with torch.no_grad():
        cached = elmo(ids, return_layers=True)["layers"][0]
        encoder.clear_token_cache()
        plain = elmo(ids, return_layers=True)["layers"][0]
    # float32 rounding of the CNN over other groupings of the tokens (eps 1.2e-7 times a few
    # dozen terms per sum), far below bfloat16's 2 ** -8 = 3.9e-3
    eps = torch.finfo(torch.float32).eps
    assert torch.allclose(cached, plain, rtol=100 * eps, atol=100 * eps * float(plain.abs().max()))


def test_token_cache_leaves_the_cnn_its_gradients_in_eval_mode():
    """Gradients in eval() mode (no dropout) of a fine-tuned biLM: with a token cache the
    cached words' vectors were constants and the CNN got no gradient from them."""
    ids = batch_to_ids([["the", "dog", "zebra"]])
    grads = []
    for cache in (None, ["the", "dog", "zebra"]):
        elmo = Elmo(module=random_bilm(), dropout=0.0, requires_grad=True, vocab_to_cache=cache).eval()
        elmo(ids)["elmo_representations"][0].sum().backward()
        grads.append(elmo.bilm.token_encoder.projection.weight.grad)
    assert grads[1] is not None and torch.allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("keep_sentence_boundaries", [False, True])
def test_layer_norm_leaves_the_padding_zero(keep_sentence_boundaries):
    """With do_layer_norm a padded position (and a sentence without tokens) got -mean / std
    of each layer instead of zeros: not the zeros the mask promises, and a task that pools
    without the mask saw them. The positions with tokens are unchanged."""
    bilm = random_bilm()
    ids = batch_to_ids([["the", "dog", "bit", "the", "man"], ["a"], []])
    with torch.no_grad():
        out = Elmo(module=bilm, dropout=0.0, do_layer_norm=True, num_output_representations=2,
                   keep_sentence_boundaries=keep_sentence_boundaries)(ids)
        bounded = bilm(ids, keep_sentence_boundaries=keep_sentence_boundaries)
    mask = out["mask"]
    assert torch.equal(mask, bounded["mask"]) and not mask.all()
    mix = ScalarMix(3, do_layer_norm=True)
    for vectors in out["elmo_representations"]:
        assert torch.equal(vectors[~mask], torch.zeros_like(vectors[~mask]))
        with torch.no_grad():
            want = mix(bounded["activations"], mask)
        assert torch.allclose(vectors[mask], want[mask], rtol=1e-5, atol=1e-6)


def test_a_fine_tuning_elmo_whose_bilm_another_elmo_froze_warns_once():
    """requires_grad is the parameters' own flag: Elmo(module=bilm, requires_grad=True), then
    Elmo(module=bilm, requires_grad=False) over the same biLM (say, a frozen feature
    extractor beside the fine-tuned model) froze it for the first one too, whose training then
    left the biLM unchanged without a word. Its next call now warns, once."""
    import warnings

    bilm = random_bilm()
    tuned = Elmo(module=bilm, dropout=0.0, requires_grad=True)
    ids = batch_to_ids([["a", "b"]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tuned(ids)                                                      # fine-tuned: no warning
        Elmo(module=bilm, dropout=0.0, requires_grad=False)(ids)        # frozen by design: none
    with pytest.warns(UserWarning, match="none of its biLM's parameters requires grad now"):
        tuned(ids)["elmo_representations"][0].sum().backward()
    assert all(p.grad is None for p in bilm.parameters())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tuned(ids)                                                      # once
        with torch.no_grad():
            Elmo(module=random_bilm(), dropout=0.0, requires_grad=True)(ids)  # no gradients asked


def test_bad_arguments():
    with pytest.raises(ValueError, match="options_file"):
        Elmo()
    with pytest.raises(ValueError, match="not both"):
        Elmo(str(ALLENNLP / "options.json"), None, module=random_bilm())
    with pytest.raises(ValueError, match="num_output_representations must be at least 0, got -1"):
        Elmo(module=random_bilm(), num_output_representations=-1)
    for count in (1.5, True):  # (True passed as one mix)
        with pytest.raises(TypeError, match="num_output_representations must be an integer"):
            Elmo(module=random_bilm(), num_output_representations=count)
    for p in (float("nan"), -0.1, 1.5, None, "0.5", 1.0):  # (1.0 zeroed every vector in training)
        with pytest.raises(ValueError, match="dropout must be a number between 0 and 1"):
            Elmo(module=random_bilm(), dropout=p)
    for module in (3, torch.nn.Linear(2, 2)):  # not a biLM: not an AttributeError later
        with pytest.raises(TypeError, match="module= must be a BiLM"):
            Elmo(module=module)
    with pytest.raises(TypeError, match="list of words, not a string"):
        Elmo(module=random_bilm(), vocab_to_cache="the")  # not the words "t", "h", "e"


def test_inputs_that_are_not_id_tensors_are_clear_errors():
    mixer = Elmo(module=random_bilm(), dropout=0.0)
    ids = batch_to_ids([["the", "dog"]])
    with pytest.raises(TypeError, match="inputs must be a torch.Tensor"):
        mixer(ids.numpy())
    with pytest.raises(TypeError, match="word_inputs must be a torch.Tensor or None"):
        mixer(ids, [[1, 2]])
    with pytest.raises(ValueError, match="meta device"):
        mixer(ids.to("meta"))


def test_a_given_bilm_keeps_its_own_stateful_setting():
    """Elmo(module=bilm), ElmoTokenEmbedder and ElmoEmbedder set the BiLM stateless unasked:
    the caller's stateful model silently lost its carried state."""
    from elmo import ElmoEmbedder, ElmoTokenEmbedder
    bilm = random_bilm()
    for make in (lambda: Elmo(module=bilm), lambda: ElmoTokenEmbedder(module=bilm),
                 lambda: ElmoEmbedder(model=bilm)):
        bilm.stateful = True
        make()
        assert bilm.stateful is True
    Elmo(module=bilm, stateful=False)  # asked for: it changes
    assert bilm.stateful is False
    Elmo(module=bilm, stateful=True)
    assert bilm.stateful is True


def test_reset_states_on_elmo_clears_a_stateful_bilms_carried_state():
    """The README says `stateful=True` (on Elmo, ...) carries the state and `reset_states()`
    clears it; Elmo had no reset_states (AttributeError)."""
    mixer = Elmo(module=random_bilm(), num_output_representations=1, dropout=0.0, stateful=True)
    first, second = batch_to_ids([["the", "dog", "ran"]]), batch_to_ids([["a", "cat"]])
    fresh = mixer(second)["elmo_representations"][0]        # from a zero state
    mixer.reset_states()
    mixer(first)
    carried = mixer(second)["elmo_representations"][0]
    assert not torch.allclose(carried, fresh)               # the state was carried
    mixer.reset_states()
    assert torch.equal(mixer(second)["elmo_representations"][0], fresh)


def test_reset_states_on_a_module_without_one_is_a_clear_error():
    class NoState(torch.nn.Module):           # AllenNLP's module= contract has no reset_states
        num_layers = 1

        def get_output_dim(self):
            return 4

    mixer = Elmo(module=NoState(), num_output_representations=1, dropout=0.0)
    with pytest.raises(TypeError, match="NoState has no reset_states"):
        mixer.reset_states()


def test_a_fixed_mix_stays_fixed_when_everything_is_unfrozen():
    # elmo.requires_grad_(True), the README's way to fine-tune the biLM later, set the fixed
    # mix's parameters trainable too: one step moved gamma from 1 to about -95 and the fixed s,
    # with a penalty of zero, without a word
    bilm = random_bilm()
    mixer = Elmo(module=bilm, dropout=0.0, scalar_mix_parameters=[-9e10, 1.0, -9e10])
    embedder = ElmoTokenEmbedder(module=copy.deepcopy(bilm), dropout=0.0, scalar_mix_parameters=[0.0, 1.0, 2.0])
    ids = batch_to_ids([["the", "dog"], ["a"]])
    for model, elmo in ((mixer, mixer), (embedder, embedder.elmo)):
        mix = elmo.scalar_mixes[0]
        fixed = {k: v.clone() for k, v in mix.state_dict().items()}
        assert set(fixed) == {"scalar_parameters", "gamma"}          # (the same state_dict keys)
        model.requires_grad_(True)
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        out = model(ids)
        vectors = out["elmo_representations"][0] if isinstance(out, dict) else out
        vectors.pow(2).sum().backward()
        optimizer.step()
        assert all(torch.equal(fixed[k], v) for k, v in mix.state_dict().items())
        assert all(p.grad is not None for p in elmo.bilm.parameters())   # (the biLM does train)
        assert elmo.penalty(1.0).item() == 0.0
