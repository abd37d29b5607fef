import copy
import random
import threading

import pytest
import torch
from hypothesis import given, settings, strategies as st

import elmo
from elmo import BiLM, batch_to_ids
from elmo.modules.cudnn_precision import full_precision_convolutions
from tests.conftest import random_bilm

WORDS = ["the", "dog", "bit", "man", "a", "bank", "river", "money", ".", ",", "Über", "naïve", "x" * 30]


def layers_of(bilm, sentences, **kwargs):
    with torch.no_grad():
        return bilm(batch_to_ids(sentences), **kwargs)


@pytest.mark.parametrize("skip", [True, False])
def test_layer_shapes_and_layer0_is_the_token_vector_twice(skip):
    bilm = random_bilm(skip=skip)
    out = layers_of(bilm, [["the", "dog"], ["a"]])
    assert len(out["activations"]) == 3
    for layer in out["activations"]:
        assert layer.shape == (2, 2, 12)
    x = out["activations"][0]
    assert torch.equal(x[..., :6], x[..., 6:])
    assert out["mask"].tolist() == [[True, True], [True, False]]
    assert all(layer[1, 1].abs().sum() == 0 for layer in out["activations"])


def test_keep_sentence_boundaries():
    bilm = random_bilm()
    kept = layers_of(bilm, [["the", "dog"], ["a"]], keep_sentence_boundaries=True)
    plain = layers_of(bilm, [["the", "dog"], ["a"]])
    assert kept["mask"].tolist() == [[True] * 4, [True, True, True, False]]
    for k, p in zip(kept["activations"], plain["activations"]):
        assert torch.allclose(k[0, 1:3], p[0]) and torch.allclose(k[1, 1:2], p[1, :1])


def test_stateless_sentence_is_the_same_alone_and_in_any_batch():
    bilm = random_bilm()
    rng = random.Random(0)
    target = ["the", "dog", "bit", "the", "man", "."]
    alone = layers_of(bilm, [target])["activations"]
    for trial in range(5):
        others = [[rng.choice(WORDS) for _ in range(rng.randint(0, 12))] for _ in range(rng.randint(1, 6))]
        pos = rng.randint(0, len(others))
        batch = others[:pos] + [target] + others[pos:]
        together = layers_of(bilm, batch)["activations"]
        for a, t in zip(alone, together):
            assert torch.allclose(a[0], t[pos, :len(target)], atol=1e-6)
    # and again after other calls: nothing is carried
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(alone, layers_of(bilm, [target])["activations"]))


def test_stateful_mode_carries_state_and_resets():
    bilm = random_bilm()
    bilm.stateful = True
    first = layers_of(bilm, [["the", "dog"]])["activations"][-1]
    second = layers_of(bilm, [["the", "dog"]])["activations"][-1]
    assert not torch.allclose(first, second)
    bilm.reset_states()
    assert torch.allclose(first, layers_of(bilm, [["the", "dog"]])["activations"][-1])


sentence = st.lists(st.sampled_from(WORDS), min_size=2, max_size=10)


@settings(max_examples=30, deadline=None)
@given(tokens=sentence, suffix=st.lists(st.sampled_from(WORDS), min_size=0, max_size=6),
       k=st.integers(0, 9), seed=st.integers(0, 3), skip=st.booleans())
def test_forward_layers_do_not_see_later_tokens(tokens, suffix, k, seed, skip):
    k = min(k, len(tokens) - 1)
    bilm = random_bilm(seed=seed, skip=skip)
    changed = tokens[:k + 1] + suffix
    a = layers_of(bilm, [tokens])["activations"]
    b = layers_of(bilm, [changed])["activations"]
    p = a[0].shape[-1] // 2
    for j in range(1, len(a)):
        assert torch.allclose(a[j][0, :k + 1, :p], b[j][0, :k + 1, :p], atol=1e-6), f"layer {j} forward leaks"


@settings(max_examples=30, deadline=None)
@given(tokens=sentence, prefix=st.lists(st.sampled_from(WORDS), min_size=0, max_size=6),
       k=st.integers(0, 9), seed=st.integers(0, 3), skip=st.booleans())
def test_backward_layers_do_not_see_earlier_tokens(tokens, prefix, k, seed, skip):
    k = min(k, len(tokens) - 1)
    bilm = random_bilm(seed=seed, skip=skip)
    changed = prefix + tokens[k:]
    shift = len(prefix) - k
    a = layers_of(bilm, [tokens])["activations"]
    b = layers_of(bilm, [changed])["activations"]
    p = a[0].shape[-1] // 2
    for j in range(1, len(a)):
        assert torch.allclose(a[j][0, k:, p:], b[j][0, k + shift:, p:], atol=1e-6), f"layer {j} backward leaks"


def test_leak_check_can_fail():
    """The property tests compare the right halves: the backward half does see later tokens."""
    bilm = random_bilm()
    a = layers_of(bilm, [["the", "dog", "bit"]])["activations"][1]
    b = layers_of(bilm, [["the", "dog", "man"]])["activations"][1]
    assert not torch.allclose(a[0, :2, 6:], b[0, :2, 6:], atol=1e-6)


@pytest.mark.parametrize("proj", [1, 6, 33])
def test_empty_sentence_gets_an_empty_output_of_the_model_width(proj):
    bilm = random_bilm(proj=proj)
    out = layers_of(bilm, [[]])
    assert [a.shape for a in out["activations"]] == [(1, 0, 2 * proj)] * 3
    mixed = layers_of(bilm, [[], ["the"], []])
    assert [a.shape for a in mixed["activations"]] == [(3, 1, 2 * proj)] * 3
    assert mixed["mask"].tolist() == [[False], [True], [False]]


def test_empty_batch():
    out = layers_of(random_bilm(), [])
    assert [a.shape for a in out["activations"]] == [(0, 0, 12)] * 3 and out["mask"].shape == (0, 0)


def test_300_character_word_equals_its_48_byte_prefix():
    bilm = random_bilm()
    long_word = "".join(random.Random(1).choice("abcdefgh") for _ in range(300))
    a = layers_of(bilm, [["a", long_word, "b"]])["activations"]
    b = layers_of(bilm, [["a", long_word[:48], "b"]])["activations"]
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_5000_token_sentence():
    bilm = random_bilm()
    tokens = [WORDS[i % len(WORDS)] for i in range(5000)]
    out = layers_of(bilm, [tokens, ["short"]])
    assert out["activations"][-1].shape == (2, 5000, 12)
    assert torch.isfinite(out["activations"][-1]).all()
    assert out["mask"].sum().item() == 5001


def test_wrong_character_width_is_a_clear_error():
    # (a byte-id model is also told of batch_to_ids' width; a dictionary model is not:
    # tests/test_manylangs.py)
    with pytest.raises(ValueError, match=r"characters per token; this model expects 50 \(use "
                                         r"bilm.token_ids\(sentences\), or pass max_characters_per_token "
                                         r"to batch_to_ids\)$"):
        random_bilm()(batch_to_ids([["a"]], max_characters_per_token=20))


def test_ids_the_model_cannot_read_are_clear_errors():
    bilm = random_bilm()
    ids = batch_to_ids([["the", "dog"]])
    with pytest.raises(TypeError, match="integer ids"):
        bilm(ids.float())
    with pytest.raises(TypeError, match="integer ids"):
        bilm(ids > 0)
    for bad, shown in ((262, "262"), (-1, "-1")):  # past the embedding's 262 rows, and negative
        wrong = ids.clone()
        wrong[0, 1, 3] = bad
        with pytest.raises(ValueError, match=f"character id {shown}, but this model's character ids run "
                                             f"from 0 \\(padding\\) to 261"):
            bilm(wrong)
    with pytest.raises(ValueError, match="character id -7"):  # not taken as padding
        bilm(torch.full((1, 2, 50), -7))
    for position in (0, 1):  # a whole token of negative ids: before a token, and the last one
        wrong = ids.clone()
        wrong[0, position] = -5   # (the last was dropped as padding; the first named the padding)
        with pytest.raises(ValueError, match="character id -5"):
            bilm(wrong)
    with torch.no_grad():  # other integer types are ids too
        assert all(torch.equal(a, b) for a, b in zip(bilm(ids.int())["activations"], bilm(ids)["activations"]))
    # a type too narrow for the ids: as uint8 every token's 259 (its start) wrapped to 3 and the
    # sentence ran as other characters, without an error
    for narrow in (torch.uint8, torch.int8):
        for run in (bilm, bilm.token_encoder):
            with pytest.raises(TypeError, match=f"char_ids are {narrow}, which stops at .*start with id 259"):
                run(ids.to(narrow))


def test_switches_of_the_calls_must_be_bools():
    """A string is true to Python: bilm(ids, keep_sentence_boundaries="no") kept the
    boundaries (T + 2 positions), Elmo(...)(ids, return_layers="no") returned the layers and
    lstm.use_int8("no") switched int8 weights on, each without an error."""
    from elmo import Elmo

    bilm = random_bilm()
    ids = batch_to_ids([["a", "b"]])
    with pytest.raises(TypeError, match="keep_sentence_boundaries must be True or False, got str: 'no'"):
        bilm(ids, keep_sentence_boundaries="no")
    with pytest.raises(TypeError, match="return_layers must be True or False, got str: 'no'"):
        Elmo(module=bilm, dropout=0.0)(ids, return_layers="no")
    with pytest.raises(TypeError, match="enabled must be True or False, got str: 'no'"):
        bilm.lstm.use_int8("no")
    assert not bilm.lstm.int8_enabled
    assert bilm(ids, keep_sentence_boundaries=True)["mask"].shape == (1, 4)


def test_a_bilm_is_built_from_options_only():
    for wrong in (None, "fixture", {"lstm": {}}):
        with pytest.raises(TypeError, match="BiLM takes ElmoOptions"):
            BiLM(wrong)


def test_ids_that_are_not_a_tensor_on_the_models_device_are_clear_errors():
    bilm = random_bilm()
    ids = batch_to_ids([["the", "dog"]])
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        bilm(ids.tolist())
    with pytest.raises(ValueError, match="char_ids are on meta and the model on cpu"):
        bilm(ids.to("meta"))  # (stands in for cuda ids given to a CPU model, and the reverse)


@pytest.mark.parametrize("where", ["left", "hole"])
def test_padding_before_a_token_is_refused_not_misread(where):
    """A zero row before a sentence's last token would have put </S> over that token."""
    bilm = random_bilm()
    ids = batch_to_ids([["the", "dog", "bit"], ["a", "man"]])
    if where == "left":  # ["a", "man"] padded on the left
        ids[1] = torch.cat([ids[1, 2:], ids[1, :2]])
    else:
        ids[0, 1] = 0
    with pytest.raises(ValueError, match=f"sentence {1 if where == 'left' else 0} has padding"):
        bilm(ids)


def test_token_cache_words_must_be_strings():
    encoder = random_bilm().token_encoder
    with pytest.raises(TypeError, match="words must be strings, got int: 3"):
        encoder.build_token_cache(["the", 3])
    with pytest.raises(TypeError, match="not a string"):
        encoder.build_token_cache("the")
    assert encoder.token_cache_size == 0


def test_model_with_other_max_chars_uses_it():
    bilm = random_bilm(max_chars=12)
    with torch.no_grad():
        out = bilm(batch_to_ids([["abcdefghijklmnop"]], max_characters_per_token=12))
    assert out["activations"][0].shape == (1, 1, 12)


def test_token_cache_equals_the_cnn_including_oov():
    bilm = random_bilm()
    sentences = [["the", "dog", "bit", "zebra"], ["unseen", "words", "here", "."], []]
    plain = layers_of(bilm, sentences)["activations"]
    bilm.token_encoder.build_token_cache(["the", "dog", "bit", ".", "bank"])
    assert bilm.token_encoder.token_cache_size == 7  # five words plus <S> and </S>
    cached = layers_of(bilm, sentences)["activations"]
    for p, c in zip(plain, cached):
        assert torch.allclose(p, c, atol=1e-6)
    # the cache is really used: poisoning it changes a cached word, not an OOV word
    bilm.token_encoder._token_cache.vectors.add_(1.0)
    poisoned = layers_of(bilm, sentences)["activations"][0]
    assert not torch.allclose(poisoned[0, 0], plain[0][0, 0])
    assert torch.allclose(poisoned[1, 0], plain[0][1, 0], atol=1e-6)
    bilm.token_encoder.clear_token_cache()
    assert torch.allclose(layers_of(bilm, sentences)["activations"][0], plain[0], atol=1e-6)


def test_duplicate_tokens_are_encoded_once_with_the_same_result():
    bilm = random_bilm()
    with torch.no_grad():
        ids = batch_to_ids([["dog", "dog", "cat"], ["cat", "dog"]])
        fast = bilm.token_encoder(ids)
        one_by_one = torch.stack([torch.stack([bilm.token_encoder.encode_tokens(ids[b, t:t + 1])[0]
                                               for t in range(3)]) for b in range(2)])
    assert torch.allclose(fast[0], one_by_one[0], atol=1e-6)
    assert torch.allclose(fast[1, :2], one_by_one[1, :2], atol=1e-6) and fast[1, 2].abs().sum() == 0


@pytest.mark.parametrize("rows", [2, 3])  # fewer rows than carried, and more
def test_a_state_carried_from_a_bf16_autocast_step_is_in_the_weights_dtype(rows):
    """A stateful biLM fine-tuned under bf16 autocast carried its final state in bfloat16 (the
    LSTM's training path runs in bf16), and the next call without autocast, say on a validation
    batch, failed inside PyTorch ("Input dtypes must be the same"). The state is carried in the
    weights' float32 (bfloat16 values are exact in it), and the next call trains."""
    bilm = random_bilm().train()
    bilm.stateful = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bilm(batch_to_ids([["the", "dog", "bit"], ["a"], ["man"]]))["activations"][-1].float().sum().backward()
    assert all(c.dtype == h.dtype == torch.float32 for c, h in bilm.get_states())
    bilm.zero_grad()
    out = bilm(batch_to_ids([["the", "dog"], ["a", "man", "."], ["x"]][:rows]))["activations"][-1]
    assert out.dtype == torch.float32
    out.sum().backward()
    assert all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in bilm.lstm.parameters())


def test_gradients_flow_when_training():
    bilm = random_bilm().train()
    out = bilm(batch_to_ids([["the", "dog"], ["a"]]))
    sum(a.sum() for a in out["activations"]).backward()
    assert all(p.grad is not None for p in bilm.parameters())


def _full_width_tokens(encoder, ids):
    """The plain computation: every convolution over all 50 character positions."""
    chars = encoder.char_embedding(ids).transpose(1, 2)
    pooled = torch.cat([conv(chars).max(dim=2).values for conv in encoder.convolutions], dim=1)
    return encoder.projection(encoder.highway(encoder._activation(pooled)))


def test_the_char_cnn_given_the_token_positions_gives_what_it_finds_itself():
    """The BiLM hands the character CNN the positions of the tokens, from the lengths it has
    read (its ids checked once); the vectors are those the CNN gives finding them itself,
    for rows with and without tokens, and positions of none give zeros."""
    from elmo.modules.bilm import token_positions
    bilm = random_bilm()
    ids = batch_to_ids([["a", "bb", "a"], [], ["ccc"]])
    lengths = (ids > 0).any(-1).sum(1).tolist()
    positions = token_positions(lengths, ids.shape[1], ids.device)
    assert positions.tolist() == [0, 1, 2, 6]
    with torch.no_grad():
        found = bilm.token_encoder(ids)
        given = bilm.token_encoder(ids, token_positions=positions)
        none = bilm.token_encoder(ids[1:2], token_positions=positions[:0])
    assert torch.equal(given, found) and found[0].abs().sum() > 0
    assert torch.equal(none, torch.zeros_like(none))
    assert token_positions([], 4, ids.device).tolist() == [] and token_positions([0, 0], 0, ids.device).numel() == 0


def test_length_groups_find_the_cheapest_split():
    from itertools import combinations
    from elmo.modules.char_cnn import length_groups
    rng = random.Random(3)
    for _ in range(20):
        lengths = torch.tensor([rng.choice([3, 4, 5, 7, 9, 14, 30, 50]) for _ in range(rng.randint(1, 60))])
        extra, overhead = 5, rng.choice([0.0, 20.0, 200.0])
        groups = length_groups(lengths, extra, overhead)
        got = sum(len(i) * keep for i, keep in groups) + overhead * len(groups)
        assert sorted(torch.cat([i for i, _ in groups]).tolist()) == list(range(len(lengths)))
        for index, keep in groups:                      # every token fits its group's width
            assert int(lengths[index].max()) + extra == keep
        values = sorted(set(lengths.tolist()))
        best = float("inf")
        for k in range(len(values)):                    # every way to cut the sorted lengths
            for cuts in combinations(range(1, len(values)), k):
                bounds = [0, *cuts, len(values)]
                cost = 0.0
                for lo, hi in zip(bounds, bounds[1:]):
                    n = sum(1 for x in lengths.tolist() if values[lo] <= x <= values[hi - 1])
                    cost += n * (values[hi - 1] + extra) + overhead
                best = min(best, cost)
        assert got == pytest.approx(best)


def test_length_grouped_encoding_equals_the_full_width_computation(monkeypatch):
    from elmo.modules import char_cnn
    bilm = random_bilm()
    encoder = bilm.token_encoder
    words = ["a", "to", "dog", "house", "character", "internationalisation", "x" * 48, "y" * 300,
             "é", "数"] + [f"w{i}" * (i % 7 + 1) for i in range(200)]
    ids = batch_to_ids([words])[0]
    monkeypatch.setattr(char_cnn, "GROUP_OVERHEAD_MACS", 0)   # as many groups as lengths
    lengths = ((ids != 261) & (ids != 0)).sum(dim=1)
    assert len(char_cnn.length_groups(lengths, encoder.config.max_width, 0.0)) > 3
    grouped = encoder.encode_tokens(ids)
    assert torch.allclose(grouped, _full_width_tokens(encoder, ids), atol=1e-5)
    # gradients reach every group
    encoder.train()
    encoder.encode_tokens(ids).sum().backward()
    assert encoder.char_embedding.weight.grad.abs().sum() > 0


@pytest.fixture
def cudnn_flags_restored():
    """Puts cuDNN's TF32 flags back as they were (the test sets them through the new API)."""
    cudnn = torch.backends.cudnn
    before = (cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision)
    yield cudnn
    cudnn.allow_tf32 = True  # the legacy setter first: it overwrites both per-operator flags
    cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision = before


@pytest.mark.skipif(not hasattr(getattr(torch.backends.cudnn, "conv", None), "fp32_precision"),
                    reason="PyTorch before 2.9 has no per-operator TF32 flags")
@pytest.mark.parametrize("new_api", [False, True])
def test_full_precision_convolutions_under_either_tf32_api(cudnn_flags_restored, new_api):
    """The CUDA convolutions run without TF32 and the flags come back as they were, also where
    the program set cuDNN's per-operator flags (PyTorch 2.9 and later): then reading the old
    ``cudnn.allow_tf32`` raises, which had made every float32 forward on CUDA fail. The flags
    are global, so this runs without a GPU: the context only looks at the input's device type."""
    from types import SimpleNamespace
    cudnn = cudnn_flags_restored
    if new_api:
        cudnn.conv.fp32_precision = "tf32"
        cudnn.rnn.fp32_precision = "ieee"  # set apart: the legacy read now raises
        with pytest.raises(RuntimeError):
            cudnn.allow_tf32
    before = (cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision)
    assert before[0] == "tf32"
    with full_precision_convolutions(SimpleNamespace(device=torch.device("cuda"), dtype=torch.float32)):
        assert cudnn.conv.fp32_precision != "tf32"
    assert (cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision) == before


@pytest.mark.skipif(not hasattr(getattr(torch.backends.cudnn, "conv", None), "fp32_precision"),
                    reason="PyTorch before 2.9 has no per-operator TF32 flags")
@pytest.mark.parametrize("new_api", [False, True])
def test_full_precision_convolutions_hold_while_another_thread_is_inside(cudnn_flags_restored, new_api):
    """The TF32 flags are process-wide and several threads may run one model: thread A's
    block ending while thread B's block runs put TF32 back under B's convolutions (each
    block restored what it found on entry), so B's vectors silently came out in TF32. The
    flags come back only when the last block ends."""
    from types import SimpleNamespace
    cudnn = cudnn_flags_restored
    if new_api:
        cudnn.conv.fp32_precision = "tf32"
        cudnn.rnn.fp32_precision = "ieee"  # set apart: the legacy read now raises
    else:
        cudnn.allow_tf32 = True
    before = (cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision)
    x = SimpleNamespace(device=torch.device("cuda"), dtype=torch.float32)
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def thread_a():
        with full_precision_convolutions(x):
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def thread_b():
        a_in.wait(10)
        with full_precision_convolutions(x):
            b_in.set()
            a_out.wait(10)
            seen["inside b after a ended"] = cudnn.conv.fp32_precision
        seen["after both"] = (cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision)

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert a_out.is_set() and len(seen) == 2, "the threads did not interleave as planned"
    assert seen["inside b after a ended"] != "tf32"
    assert seen["after both"] == before


def test_the_carried_state_moves_and_casts_with_the_model():
    """The state was a plain attribute, left behind by .to(): after a call on the CPU, a model
    moved to a GPU (here: cast to float64, which takes the same path) failed on its next call."""
    bilm = random_bilm()
    bilm.stateful = True
    ids = batch_to_ids([["the", "dog"], ["a"]])
    bilm(ids)
    bilm.to(torch.float64)
    assert all(c.dtype == h.dtype == torch.float64 for c, h in bilm.get_states())
    assert bilm(ids)["activations"][-1].dtype == torch.float64


def test_ids_reach_a_gpu_even_where_pinning_is_refused(monkeypatch):
    from elmo.host_copy import to_device

    ids = torch.ones(2, 3, dtype=torch.long)
    calls = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: (_ for _ in ()).throw(RuntimeError("no")))
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: calls.append((a, k)) or self)
    to_device(ids, torch.device("cuda"))
    assert calls == [((torch.device("cuda"),), {})]  # a plain copy, not a crash


def test_a_view_reaches_a_gpu_through_contiguous_pinned_memory(monkeypatch):
    """A column slice (as a hand-made LMBatch's chars[:, :steps]) was pinned with its strides,
    and PyTorch copies a strided pinned tensor to a GPU through a contiguous pageable copy: a
    transfer that waits for the GPU, which pinning was meant to avoid."""
    from elmo.host_copy import to_device

    view = torch.arange(12).reshape(3, 4)[:, :3]
    pinned, moved = [], []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: pinned.append(self.is_contiguous()) or self)
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: moved.append((self.is_contiguous(), k)) or self)
    out = to_device(view, torch.device("cuda"))
    assert pinned == [True] and moved == [(True, {"non_blocking": True})]
    assert torch.equal(out, view)


@pytest.mark.parametrize("through_elmo", [False, True])
def test_loading_weights_forgets_the_state_carried_under_the_old_ones(through_elmo):
    """A stateful model kept the state its old weights left after load_state_dict: the next
    call gave vectors of the new weights started from the old weights' state (no error)."""
    from elmo import Elmo
    ids = batch_to_ids([["the", "dog"], ["a"]])
    old, new = random_bilm(seed=0), random_bilm(seed=1)
    old.stateful = new.stateful = True
    with torch.no_grad():
        expected = new(ids)["activations"]   # the new weights, from a zero state
        new.reset_states()
        old(ids)                             # a state carried under the old weights
        if through_elmo:
            wrapper = Elmo(module=old, num_output_representations=1, dropout=0.0)
            wrapper.load_state_dict(Elmo(module=new, num_output_representations=1,
                                         dropout=0.0).state_dict())
        else:
            old.load_state_dict(new.state_dict())
        got = old(ids)["activations"]
    assert all(torch.equal(g, e) for g, e in zip(got, expected))


@pytest.mark.parametrize("cached", [False, True])
def test_token_vectors_in_autocasts_dtype_are_placed_without_promotion(monkeypatch, cached):
    """Under CUDA's bf16 autocast the CNN's vectors come back in bfloat16 while the output
    buffer has the weights' float32; CUDA's autocast, unlike the CPU's, does not promote
    index_copy's operands, and index_copy refused the mix (every bf16 training step on a GPU
    failed in the character CNN). Simulated on the CPU without autocast: encode_tokens gives
    bfloat16 vectors, as F.linear does under CUDA's autocast; the output is float32 and holds
    them. ``cached``: the token cache's misses take the same path."""
    from elmo.modules.char_cnn import CharCNN
    bilm = random_bilm(seed=5)
    cnn = bilm.token_encoder
    ids = batch_to_ids([["the", "dog", "bit"], ["a", "river"]])
    with torch.no_grad():
        want = cnn(ids).bfloat16().float()  # the vectors as bfloat16 gives them
    real = CharCNN.encode_tokens
    monkeypatch.setattr(CharCNN, "encode_tokens", lambda self, ids: real(self, ids).bfloat16())
    with torch.no_grad():
        if cached:
            cnn.build_token_cache(["the", "dog"])  # "bit", "a", "river" miss
        got = cnn(ids)
    assert got.dtype == torch.float32
    assert torch.equal(got, want)


def test_cuda_like_autocast_refuses_what_cudas_refuses(cuda_like_autocast):
    """The fixture the next tests rest on: under it index_copy no longer mixes dtypes."""
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(RuntimeError, match="same dtype"):
        torch.zeros(3).index_copy(0, torch.tensor([0]), torch.ones(1, dtype=torch.bfloat16))


def test_cuda_like_autocast_casts_what_cudas_casts(cuda_like_autocast):
    """The fixture's other half: CUDA's autocast runs sums, exponentials and softmaxes of
    bfloat16 in float32 and matrix-vector products in bfloat16, where the CPU's does not."""
    x = torch.ones(3, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert x.sum().dtype == x.sum(0).dtype == x.exp().dtype == torch.softmax(x, 0).dtype == torch.float32
        assert torch.mv(torch.ones(2, 3), x.float()).dtype == torch.bfloat16
        assert torch.linalg.vector_norm(x).dtype == torch.float32
    assert x.sum().dtype == torch.bfloat16 and torch.mv(torch.ones(2, 3), x.float()).dtype == torch.float32


def test_inference_under_cuda_like_bf16_autocast(cuda_like_autocast):
    """The biLM under bf16 autocast as CUDA casts (the character CNN's index_copy failed)."""
    bilm = random_bilm(seed=6)
    ids = batch_to_ids([["the", "dog", "bit"], ["a", "river"]])
    with torch.no_grad():
        exact = bilm(ids)["activations"]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = bilm(ids)["activations"]
    for a, b in zip(low, exact):
        assert torch.isfinite(a).all() and a.shape == b.shape
        assert float((a.float() - b).abs().max()) < 0.05 * float(b.abs().max()) + 1e-3


def test_loading_weights_of_other_modules_keeps_the_carried_state():
    """load_state_dict of a partial dict without the biLM's weights (an Elmo's mix alone,
    strict=False) forgot the state the unchanged biLM carried: the next call of a stream
    started from zeros, as if a new text began. Only the biLM's own weights reset it."""
    from elmo import Elmo
    ids = batch_to_ids([["the", "dog"], ["a"]])

    def stream(load_mix: bool):
        torch.manual_seed(0)
        bilm = random_bilm(seed=0)
        bilm.stateful = True
        model = Elmo(module=bilm, num_output_representations=1, dropout=0.0)
        with torch.no_grad():
            model(ids)
            if load_mix:
                mix = {k: v for k, v in model.state_dict().items() if k.startswith("scalar_mix")}
                assert mix and model.load_state_dict(mix, strict=False).missing_keys
            return model(ids)["elmo_representations"][0]

    assert torch.equal(stream(load_mix=True), stream(load_mix=False))


@pytest.mark.parametrize("transform", ["vmap", "grad"])
def test_torch_func_transforms_are_refused_with_one_clear_error(transform):
    """Under torch.func.vmap the biLM failed deep in PyTorch ("Cannot access data pointer of
    Tensor that doesn't have storage"), under torch.func.grad of functional_call in its LSTM's
    autograd function (which has no setup_context); both now raise one RuntimeError saying
    what works instead. functional_call alone still runs."""
    from torch.func import functional_call, grad, vmap

    bilm = random_bilm()
    ids = batch_to_ids([["The", "bank"], ["Hi"]])
    params = {name: p.detach() for name, p in bilm.named_parameters()}
    with pytest.raises(RuntimeError, match="does not run inside torch.func transforms"):
        if transform == "vmap":
            vmap(lambda row: bilm(row.unsqueeze(0))["activations"][-1])(ids)
        else:
            grad(lambda p: functional_call(bilm, p, (ids,))["activations"][-1].sum())(params)
    with pytest.raises(RuntimeError, match="CharCNN does not run inside"):
        vmap(lambda row: bilm.token_encoder(row.unsqueeze(0)))(ids)
    with torch.no_grad():
        out = functional_call(bilm, params, (ids,))["activations"][-1]
        assert torch.equal(out, bilm(ids)["activations"][-1])


def test_the_cnn_alone_refuses_ids_of_another_shape_or_device():
    """elmo.CharCNN (the biLM's token_encoder) read ids of another width as they came: a
    60-character word given 40 ids got another vector, no error. A 2-d or 4-d tensor, a list
    or ids on the meta device failed deep in Python or PyTorch. Each is now one clear error."""
    encoder = random_bilm().token_encoder
    ids = batch_to_ids([["a" * 60, "bank"]])
    for bad in (ids[..., :40], torch.cat([ids, ids[..., :1]], dim=-1), ids[0], ids[None]):
        with pytest.raises(ValueError, match=r"must be \(batch, tokens, 50\)"):
            encoder(bad)
    with pytest.raises(TypeError, match="torch.Tensor"):
        encoder(ids.tolist())
    with pytest.raises(ValueError, match="on meta"):
        encoder(ids.to("meta"))
    assert encoder(ids).shape == (1, 2, encoder.output_dim)


def test_char_cnn_built_directly_checks_its_arguments():
    # elmo.CharCNN is public: options as a dict failed with an AttributeError inside it, and a
    # width of 0 built a model whose token vectors had no values
    config = elmo.from_pretrained("fixture").options.char_cnn
    with pytest.raises(TypeError, match="CharCNN takes a CharCNNConfig"):
        elmo.CharCNN(config.to_dict(), 16)
    with pytest.raises(ValueError, match="output_dim must be at least 1, got 0"):
        elmo.CharCNN(config, 0)
    assert elmo.CharCNN(config, 16)(batch_to_ids([["a", "bc"]])).shape == (1, 2, 16)


def test_a_sentence_in_a_batch_is_within_this_machines_own_rounding_of_it_alone():
    """Alone and in batches of other sentences (one-row and batched paths, other lengths), a
    sentence of the bundled default model gets its vectors up to float32 rounding; the bound is
    measured, not a number fitted to one CPU: the float32 error of the sentences run alone,
    against the same model in float64 (where batching changes only the 16th digit)."""
    bilm = elmo.from_pretrained("default")
    wide = copy.deepcopy(bilm).double()
    rng = random.Random(1)
    sentences = [[rng.choice(WORDS) for _ in range(rng.randint(1, 14))] for _ in range(7)]
    with torch.no_grad():
        alone = [[a[0] for a in bilm(batch_to_ids([s]))["activations"]] for s in sentences]
        exact = [[a[0] for a in wide(batch_to_ids([s]))["activations"]] for s in sentences]
        own_rounding = max(float((a.double() - e).abs().max()) for al, ex in zip(alone, exact)
                           for a, e in zip(al, ex))
        scale = max(float(e.abs().max()) for ex in exact for e in ex)
        for size in (2, 3, 7):
            order = rng.sample(range(len(sentences)), size)
            batch = [sentences[i] for i in order] + [[]]            # (and an empty sentence)
            together = bilm(batch_to_ids(batch))["activations"]
            together_wide = wide(batch_to_ids(batch))["activations"]
            for row, i in enumerate(order):
                n = len(sentences[i])
                for t, tw, e in zip(together, together_wide, exact[i]):
                    # float64: batching is invisible (margin of 1e6 over its rounding)
                    assert float((tw[row, :n] - e).abs().max()) <= 1e-10 * scale
                    # float32: no further from the float64 vectors than rounding puts a sentence alone
                    assert float((t[row, :n].double() - e).abs().max()) <= 4 * own_rounding


def test_a_model_on_the_meta_device_says_it_holds_no_weights():
    # the device check said to move the ids to meta too, and then the call failed inside
    # PyTorch ("Cannot copy out of meta tensor; no data!"), through Elmo and Embedder as well
    bilm = random_bilm().to("meta")
    ids = batch_to_ids([["the", "dog"]])
    calls = [lambda: bilm(ids), lambda: bilm(ids.to("meta")), lambda: bilm.token_encoder(ids.to("meta")),
             lambda: elmo.Elmo(module=bilm, dropout=0.0)(ids), lambda: elmo.Embedder(bilm).embed_sentences([["a"]]),
             # (the token cache failed in torch.unique with a NotImplementedError on fake kernels)
             lambda: bilm.token_encoder.build_token_cache(["the", "dog"]),
             lambda: elmo.Embedder(bilm).build_token_cache([["a", "a"]], min_count=1),
             lambda: elmo.Elmo(module=bilm, dropout=0.0, vocab_to_cache=["the", "dog"])]
    for call in calls:
        with pytest.raises(ValueError, match=r"on the meta device, which holds no weights: load them first"):
            call()
    assert bilm.token_encoder.token_cache_size == 0
    filled = bilm.to_empty(device="cpu")
    filled.load_state_dict(random_bilm().state_dict())
    assert torch.equal(layers_of(filled, [["the", "dog"]])["activations"][-1],
                       layers_of(random_bilm(), [["the", "dog"]])["activations"][-1])
