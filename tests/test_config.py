import copy
import json
import shutil

import pytest

import elmo
from elmo import ConfigError, ElmoOptions
from tests.conftest import ALLENNLP

BASE = json.loads((ALLENNLP / "options.json").read_text())


def broken(path, value=None, delete=False):
    d = copy.deepcopy(BASE)
    node = d
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return d


def test_reads_the_fixture_options():
    opts = ElmoOptions.from_dict(BASE)
    assert opts.lstm.dim == 64 and opts.lstm.projection_dim == 16 and opts.lstm.n_layers == 2
    assert opts.lstm.cell_clip == 3.0 and opts.lstm.use_skip_connections is True
    assert opts.char_cnn.n_filters == 124 and opts.char_cnn.max_width == 5
    assert opts.output_dim == 32 and opts.num_layers == 3


@pytest.mark.parametrize("path", [("lstm", "dim"), ("lstm", "projection_dim"), ("lstm", "n_layers"),
                                  ("lstm", "use_skip_connections"), ("char_cnn", "filters"),
                                  ("char_cnn", "n_highway"), ("char_cnn", "embedding", "dim"),
                                  ("char_cnn", "max_characters_per_token"), ("lstm",), ("char_cnn",)])
def test_missing_key_is_named(path):
    with pytest.raises(ConfigError, match=".".join(path)):
        ElmoOptions.from_dict(broken(path, delete=True))


@pytest.mark.parametrize("path,value", [(("lstm", "dim"), -3), (("lstm", "dim"), "64"),
                                        (("lstm", "cell_clip"), -1), (("char_cnn", "activation"), "gelu"),
                                        (("char_cnn", "filters"), [[1, 4], [2]]),
                                        (("char_cnn", "n_characters"), 300),
                                        (("lstm", "use_skip_connections"), "yes")])
def test_wrong_value_is_named(path, value):
    with pytest.raises(ConfigError, match=path[-1]):
        ElmoOptions.from_dict(broken(path, value))


@pytest.mark.parametrize("filters", [[[1, 10**12]], [[1, 4], [10**30, 4]]])
def test_a_filter_beyond_any_models_size_is_named(filters):
    """Every other size is checked against MAX_SIZE; a filter count of 10**12 was taken and
    failed in torch's allocator (10**30 overflowed inside torch)."""
    with pytest.raises(ConfigError, match=r"^char_cnn\.filters\[\d\]: .* is beyond any model's size"):
        ElmoOptions.from_dict(broken(("char_cnn", "filters"), filters))


def test_optional_clips_and_extra_keys_round_trip():
    d = broken(("lstm", "cell_clip"), delete=True)
    d["n_tokens_vocab"] = 793471
    opts = ElmoOptions.from_dict(d)
    assert opts.lstm.cell_clip is None
    again = ElmoOptions.from_dict(json.loads(opts.to_json()))
    assert again == opts and again.extra["n_tokens_vocab"] == 793471


def test_missing_file_and_bad_json(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        ElmoOptions.from_file(tmp_path / "nope.json")
    bad = tmp_path / "options.json"
    bad.write_text("{\"lstm\": ")
    with pytest.raises(ConfigError, match="not valid JSON"):
        ElmoOptions.from_file(bad)


def test_a_key_given_twice_is_refused_naming_the_file(tmp_path):
    """Found by fuzzing: an options.json holding "cell_clip" twice (3, then 1) loaded the
    original layout's weights with the second value, outputs changed without a word."""
    text = json.dumps(BASE).replace('"cell_clip": 3', '"cell_clip": 3, "cell_clip": 1')
    assert text != json.dumps(BASE)
    (tmp_path / "options.json").write_text(text)
    with pytest.raises(ConfigError, match=r"options.json: not valid JSON \(the key 'cell_clip' appears "
                                          r"twice in one object, with 3 and 1"):
        ElmoOptions.from_file(tmp_path / "options.json")
    shutil.copy(ALLENNLP / "lm_weights.hdf5", tmp_path / "weights.hdf5")
    with pytest.raises(ConfigError, match="cell_clip' appears twice"):
        elmo.from_pretrained(tmp_path)


@pytest.mark.parametrize("name", ["small", "medium", "original"])
def test_presets_match_the_released_models(name):
    """The presets are the shapes of the released models the hub registry describes."""
    from elmo.hub.registry import get

    opts, facts = ElmoOptions.preset(name), get(name)
    assert (opts.lstm.dim, opts.lstm.projection_dim, opts.lstm.n_layers) == (
        facts.lstm_dim, facts.projection_dim, facts.n_layers)
    assert (opts.char_cnn.n_filters, opts.char_cnn.n_highway) == (facts.n_filters, facts.n_highway)


def test_preset_copies_and_unknown_name():
    from elmo.config import preset_dict

    d = preset_dict("small")
    d["lstm"]["dim"] = 7
    assert ElmoOptions.preset("small").lstm.dim == 1024
    with pytest.raises(ConfigError, match="preset 'huge'.*medium"):
        ElmoOptions.preset("huge")


def test_no_preset_is_named_default_which_the_bundled_model_of_another_shape_is():
    """preset("default") was an alias of "small" (1024 cells, 2048 filters), not the shape of
    the bundled `default` model (512 cells, 256 filters): it is refused, naming both."""
    import elmo

    with pytest.raises(ConfigError, match=r"from_pretrained\('default'\)\.options.*preset 'small'"):
        ElmoOptions.preset("default")
    assert elmo.from_pretrained("default").options.lstm.dim == 512 != ElmoOptions.preset("small").lstm.dim


@pytest.mark.parametrize("path,value", [(("lstm", "cel_clip"), 3), (("lstm", "projection"), 16),
                                        (("char_cnn", "n_highways"), 1), (("char_cnn", "embedding", "dimm"), 4),
                                        (("char_cnn", "activaton"), "tanh")])
def test_unknown_key_in_a_model_section_is_refused(path, value):
    """A key the reader would pass over changed the model silently: a misspelt cell_clip gave a
    model without cell clipping, a misspelt activation relu instead of tanh."""
    with pytest.raises(ConfigError, match=".".join(path) + ": unknown key"):
        ElmoOptions.from_dict(broken(path, value))


def test_unknown_key_in_char_vocabulary_is_refused():
    d = copy.deepcopy(BASE)
    d["char_vocabulary"] = {"n_characters": 10, "word_dim": 4, "n_word": 7}
    with pytest.raises(ConfigError, match="char_vocabulary.n_word: unknown key"):
        ElmoOptions.from_dict(d)


def test_forward_only_model_is_refused():
    """The original trainer's ``"bidirectional": false`` (a forward-only language model) was
    kept as an extra key and a biLM built: another model than the options describe."""
    with pytest.raises(ConfigError, match="bidirectional: only bidirectional"):
        ElmoOptions.from_dict(broken(("bidirectional",), False))
    opts = ElmoOptions.from_dict(broken(("bidirectional",), True))
    assert opts.extra == {"bidirectional": True}
    assert ElmoOptions.from_dict(json.loads(opts.to_json())) == opts


LSTM_OK = dict(dim=8, projection_dim=4, n_layers=1)
CNN_OK = dict(embedding_dim=4, filters=((1, 4), (2, 4)), n_highway=1)


@pytest.mark.parametrize("field, value", [
    ("cell_clip", float("nan")), ("proj_clip", -1.0), ("cell_clip", "3"), ("n_layers", 0),
    ("dim", -8), ("projection_dim", 2.5), ("use_skip_connections", "no")])
def test_lstm_config_built_directly_is_checked(field, value):
    # elmo.LSTMConfig(...) took any value: a NaN clip gave NaN vectors and a negative one
    # constant vectors without an error; a string clip or no layers failed deep in torch
    with pytest.raises(ConfigError, match=rf"^lstm\.{field}: "):
        elmo.LSTMConfig(**{**LSTM_OK, field: value})


@pytest.mark.parametrize("field, value, key", [
    ("activation", "gelu", "activation"), ("max_characters_per_token", 2, "max_characters_per_token"),
    ("n_highway", -1, "n_highway"), ("filters", (), "filters"), ("filters", ((60, 4),), "filters"),
    ("filters", ((1, 0),), r"filters\[0\]"), ("embedding_dim", 0, r"embedding\.dim"),
    ("n_characters", 100, "n_characters")])
def test_char_cnn_config_built_directly_is_checked(field, value, key):
    # an unknown activation ran as relu and a negative n_highway as none; a token width of 2
    # failed with an IndexError inside the model
    with pytest.raises(ConfigError, match=rf"^char_cnn\.{key}: "):
        elmo.CharCNNConfig(**{**CNN_OK, field: value})


def test_config_built_directly_equals_the_files():
    # the checks normalise as the reader does: an int clip is a float, lists of filters are tuples
    built = elmo.ElmoOptions(elmo.LSTMConfig(**LSTM_OK, cell_clip=3),
                             elmo.CharCNNConfig(**{**CNN_OK, "filters": [[1, 4], [2, 4]]}))
    assert ElmoOptions.from_dict(built.to_dict()) == built
    assert built.lstm.cell_clip == 3.0 and isinstance(built.lstm.cell_clip, float)
    assert built.char_cnn.filters == ((1, 4), (2, 4))
    assert hash(built.char_cnn)  # (a list of lists was unhashable)
    with pytest.raises(ConfigError, match="^lstm: expected LSTMConfig"):
        elmo.ElmoOptions(LSTM_OK, built.char_cnn)  # a dict: an AttributeError inside BiLM
    with pytest.raises(ConfigError, match="^bidirectional: "):
        elmo.ElmoOptions(built.lstm, built.char_cnn, extra={"bidirectional": False})


def test_a_token_width_no_batch_can_hold_is_refused_naming_the_file(tmp_path):
    """max_characters_per_token 10**9 passed the checks, and the first batch failed with a
    MemoryError naming no file: one token's character CNN values (each position's embedding
    and every filter's output) are now bounded, by the sizes the file gives."""
    d = broken(("char_cnn", "max_characters_per_token"), 10**9)
    emb = d["char_cnn"]["embedding"]["dim"]
    per_position = emb + sum(n for _, n in d["char_cnn"]["filters"])
    path = tmp_path / "options.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ConfigError, match=rf"^{path}: char_cnn\.max_characters_per_token: 1000000000 positions of "
                                          rf"{per_position} values each \(char_cnn\.embedding\.dim {emb} \+ "):
        ElmoOptions.from_file(path)
    from elmo.config import MAX_VALUES_PER_TOKEN
    most = MAX_VALUES_PER_TOKEN // per_position
    assert ElmoOptions.from_dict(broken(("char_cnn", "max_characters_per_token"), most)).char_cnn \
        .max_characters_per_token == most
    with pytest.raises(ConfigError, match=rf"at most {most} with these sizes"):
        ElmoOptions.from_dict(broken(("char_cnn", "max_characters_per_token"), most + 1))
    with pytest.raises(ConfigError, match=r"^char_cnn\.max_characters_per_token: "):       # built directly too
        elmo.CharCNNConfig(**{**CNN_OK, "max_characters_per_token": 10**9})
