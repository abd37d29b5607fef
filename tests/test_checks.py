"""The argument checks of elmo/checks.py, and the API calls that use them: a count, switch or
path of the wrong type or range is an error that names the argument, before torch or pathlib
meet it (True counted as 1, "false" as a true switch, 2.5 failed inside torch)."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import elmo
from elmo import Embedder, ElmoEmbedder, batch_to_ids
from elmo.checks import integer_or_none, require_count, require_path, require_switch
from elmo.config import ConfigError, ElmoOptions
from elmo.training.vocab_build import build_vocabulary_files
from tests.conftest import random_bilm

DEFAULT_OPTIONS = Path(elmo.__file__).parent / "resources" / "default" / "options.json"


def test_integers_of_any_type_but_not_bools_floats_or_strings():
    for value in (3, np.int64(3), np.uint8(3), torch.tensor(3)):
        assert integer_or_none(value) == 3 and type(integer_or_none(value)) is int
    for value in (True, np.bool_(False), 3.0, 2.5, "3", None, torch.tensor(3.0), [3]):
        assert integer_or_none(value) is None


def test_count_messages_name_the_argument_and_the_bound():
    assert require_count("n", 0, least=0) == 0
    with pytest.raises(ValueError, match=r"^n must be at least 1, got 0 \(0: off\)$"):
        require_count("n", 0, hint=" (0: off)")
    with pytest.raises(TypeError, match="^n must be an integer, got bool: True$"):
        require_count("n", True)


def test_switches_and_paths():
    assert require_switch("s", np.bool_(True)) is True and require_switch("s", False) is False
    for value in ("false", 0, 1, None):
        with pytest.raises(TypeError, match="s must be True or False"):
            require_switch("s", value)
    assert require_path("p", "a/b") == Path("a/b") == require_path("p", Path("a/b"))
    for value in (None, 3, b"a"):
        with pytest.raises(TypeError, match="p must be a path"):
            require_path("p", value)


def test_stateful_must_be_a_bool_wherever_it_is_set():
    bilm = random_bilm()
    with pytest.raises(TypeError, match="stateful must be True or False, got str: 'no'"):
        bilm.stateful = "no"  # (it was kept, and "no" is true: the model carried state)
    assert bilm.stateful is False
    with pytest.raises(TypeError, match="stateful must be True or False"):
        elmo.from_pretrained("default", stateful="yes")
    with pytest.raises(TypeError, match="stateful must be True or False"):
        elmo.Elmo(module=bilm, stateful=1)
    for switch in ("requires_grad", "do_layer_norm", "keep_sentence_boundaries"):
        with pytest.raises(TypeError, match=f"{switch} must be True or False, got str: 'False'"):
            elmo.Elmo(module=bilm, **{switch: "False"})  # (layer norm or the boundaries were on)
    for switch in ("do_layer_norm", "trainable"):
        with pytest.raises(TypeError, match=f"{switch} must be True or False"):
            elmo.ScalarMix(3, **{switch: "no"})


def test_counts_of_the_python_api():
    bilm = random_bilm()
    embedder = Embedder(bilm)
    with pytest.raises(TypeError, match="min_count must be an integer, got str"):
        embedder.build_token_cache([["a", "b"]], min_count="2")
    with pytest.raises(ValueError, match="max_words must be at least 1, got 0"):
        embedder.build_token_cache([["a", "b"]], max_words=0)
    with pytest.raises(TypeError, match="batch_size must be an integer, got bool"):
        Embedder(bilm, batch_size=True)
    with pytest.raises(TypeError, match="overlap must be an integer"):
        Embedder(bilm, overlap=1.5)
    with pytest.raises(TypeError, match="max_characters_per_token must be an integer, got bool"):
        batch_to_ids([["a"]], max_characters_per_token=True)
    with pytest.raises(ValueError, match=r"max_characters_per_token must be at least 3, got 2 \(begin, end"):
        batch_to_ids([["a"]], max_characters_per_token=2)
    with pytest.raises(TypeError, match="batch_size must be an integer"):
        list(ElmoEmbedder(model=bilm).embed_sentences([["a"]], batch_size=2.0))


def test_vocabulary_counts(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b a\n")
    with pytest.raises(TypeError, match="--min-count must be an integer, got str"):
        build_vocabulary_files([str(corpus)], tmp_path / "v.txt", min_count="2")
    with pytest.raises(TypeError, match="--max-size must be an integer, got float"):
        build_vocabulary_files([str(corpus)], tmp_path / "v.txt", max_size=10.5)


def test_paths_and_option_sizes():
    with pytest.raises(TypeError, match="options_file must be a path"):
        elmo.load_original(None, None)
    with pytest.raises(TypeError, match=r"path \(the model folder\) must be a path"):
        elmo.load_pretrained(None)
    with pytest.raises(TypeError, match="options file must be a path"):
        ElmoOptions.from_file(None)
    with pytest.raises(TypeError, match="input_path must be a path"):
        elmo.embed_file(None, "out.hdf5")
    with pytest.raises(ConfigError, match=r"preset \['small'\]: unknown"):
        ElmoOptions.preset(["small"])
    options = json.loads(DEFAULT_OPTIONS.read_text())
    options["lstm"]["dim"] = 1e30  # an integral float: it was taken as 10**30, which torch overflowed on
    with pytest.raises(ConfigError, match=r"lstm.dim: 1e\+30 is beyond any model's size"):
        ElmoOptions.from_dict(options)


def test_a_module_or_tensor_given_for_an_argument_is_named_in_one_line():
    # a whole model's or tensor's repr followed the message: dozens of lines of layers
    mixer = elmo.Elmo(module=elmo.from_pretrained("fixture"), dropout=0.0)
    calls = [lambda: elmo.from_pretrained(mixer),
             lambda: elmo.from_pretrained("fixture", stateful=torch.ones(40, 40, dtype=torch.bool)),
             lambda: elmo.batch_to_ids([[torch.zeros(200)]]),
             lambda: elmo.ScalarMix(3, initial_gamma=mixer)]
    for call in calls:
        with pytest.raises(TypeError) as caught:
            call()
        assert "\n" not in str(caught.value) and len(str(caught.value)) < 200, str(caught.value)


def test_embedder_given_an_elmo_names_its_bilm():
    mixer = elmo.Elmo(module=elmo.from_pretrained("fixture"), dropout=0.0)
    for call in (lambda: elmo.Embedder(mixer), lambda: elmo.sentence_vectors(mixer, [["a"]])):
        with pytest.raises(TypeError, match=r"^Embedder takes a BiLM, .* got Elmo \(an Elmo's biLM is its \.bilm\)$"):
            call()
    assert elmo.Embedder(mixer.bilm).dim == mixer.get_output_dim()


def test_embedder_checks_its_settings_before_loading_a_model():
    # sort_by_length="no" sorted (a non-empty string is true), where embed_file refused it;
    # and a bad batch_size was found only after the model had been loaded (a download)
    with pytest.raises(TypeError, match="sort_by_length must be True or False, got str: 'no'"):
        Embedder("fixture", sort_by_length="no")
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        Embedder("no-such-model", batch_size=0)


def test_sentence_vectors_checks_pooling_and_layers_before_any_model():
    # pooling="sum" failed in masked_pool only after the model was loaded and every sentence embedded
    with pytest.raises(ValueError, match="pooling must be 'mean' or 'max', got 'sum'"):
        elmo.sentence_vectors("no-such-model", [["a"]], pooling="sum")
    with pytest.raises(ValueError, match="sentence_vectors needs one vector per token"):
        elmo.sentence_vectors("no-such-model", [["a"]], layers="all")


def test_command_line_text_with_a_lone_surrogate_is_named():
    from elmo.checks import require_utf8_text
    assert require_utf8_text("--word", "caf\u00e9 \U0001F600") == "caf\u00e9 \U0001F600"
    with pytest.raises(ValueError, match=r"^--word holds U\+D800, a lone surrogate, which UTF-8 cannot encode"):
        require_utf8_text("--word", "a\ud800")
    with pytest.raises(ValueError, match=r"^SENTENCE holds byte 0xff, which is not UTF-8 \(\$'a\\xff'\)"):
        require_utf8_text("SENTENCE", "a\udcff")
