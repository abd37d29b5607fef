"""ELMoForManyLangs (HIT-SCIR) model folders: the outputs of the original code, exactly.

The fixture (tests/fixtures/elmoformanylangs, see its README) holds two tiny random models,
without (model/) and with (model_word/) a word embedding, and the outputs the original code
computed for 40 sentences. Its stated tolerance: numpy.allclose(rtol=1e-5, atol=1e-5).
"""
import json
import re
import shutil
import zipfile

import h5py
import numpy as np
import pytest
import torch

import elmo
from elmo import ConfigError, Embedder, WeightFileError
from elmo.cli import main as cli_main
from elmo.manylangs import CharVocabulary, read_dictionary, resolve_config_path, write_dictionary
from elmo.manylangs.folder import read_model_config
from tests.conftest import FIXTURES
from tests.training_helpers import unrecord

MANYLANGS = FIXTURES / "elmoformanylangs"
MODELS = {"model": "expected.hdf5", "model_word": "expected_word.hdf5"}
SENTENCES = json.loads((MANYLANGS / "sentences.json").read_text(encoding="utf-8"))
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module", params=list(MODELS))
def case(request):
    bilm = elmo.from_pretrained(MANYLANGS / request.param)
    with h5py.File(MANYLANGS / MODELS[request.param], "r") as f:
        expected = {k: f[k][()] for k in f if k != "stateful"}
    return request.param, bilm, expected


def run(bilm, sentences):
    """(L + 1, B, T, 2P) numpy for a batch of sentences."""
    with torch.no_grad():
        return torch.stack(bilm(bilm.token_ids(sentences))["activations"]).numpy()


def assert_matches(layers, k, expected):
    n = len(SENTENCES[k])
    got = layers[:, :n]
    assert got.shape == expected[f"s{k}"].shape
    assert np.allclose(got, expected[f"s{k}"], **TOL), f"sentence {k}: {np.abs(got - expected[f's{k}']).max()}"
    assert np.allclose(got.mean(0), expected[f"avg{k}"], **TOL), f"sentence {k} (average)"


# ---------------------------------------------------------------------- conformance
def test_one_batch_reproduces_every_layer_and_the_average(case):
    _, bilm, expected = case
    layers = run(bilm, SENTENCES)
    assert layers.shape[0] == 3 and layers.shape[-1] == 64
    for k in range(len(SENTENCES)):
        assert_matches(layers[:, k], k, expected)


@pytest.mark.parametrize("batch", [1, 7])
def test_alone_and_in_small_batches(case, batch):
    _, bilm, expected = case
    for start in range(0, len(SENTENCES), batch):
        layers = run(bilm, SENTENCES[start:start + batch])
        for b in range(layers.shape[1]):
            assert_matches(layers[:, b], start + b, expected)


def test_character_and_word_ids_exactly(case):
    name, bilm, expected = case
    scheme = bilm.id_scheme
    for k, sentence in enumerate(SENTENCES):
        ids = bilm.token_ids([sentence])[0]
        rows = torch.cat([torch.tensor([scheme.bos_row]), ids, torch.tensor([scheme.eos_row])]) - 1
        assert np.array_equal(rows[:, :50].numpy(), expected[f"chars{k}"]), f"chars of sentence {k}"
        if name == "model_word":
            assert np.array_equal(rows[:, 50].numpy(), expected[f"words{k}"]), f"words of sentence {k}"
        else:
            assert rows.shape[1] == 50 and f"words{k}" not in expected


def test_ids_past_the_dictionaries_are_clear_errors():
    bilm = elmo.from_pretrained(MANYLANGS / "model_word")
    ids = bilm.token_ids([["a", "b"]])
    chars, words = bilm.token_encoder.char_embedding.num_embeddings, bilm.token_encoder.word_embedding.num_embeddings
    for column, bad, what in ((2, chars, "character"), (50, words, "word")):
        wrong = ids.clone()
        wrong[0, 0, column] = bad
        with pytest.raises(ValueError, match=f"{what} id {bad}, but this model's {what} ids run from 0"):
            bilm(wrong)


def test_unknown_characters_are_oov_and_the_markers_swapped():
    chars = read_dictionary(MANYLANGS / "model" / "char.dic")
    bilm = elmo.from_pretrained(MANYLANGS / "model")
    row = bilm.token_ids([SENTENCES[11]])[0, 0] - 1           # sentence 11: all unknown characters
    n = len(SENTENCES[11][0])
    assert row[0] == chars["<eow>"] and row[n + 1] == chars["<bow>"]
    assert (row[1:n + 1] == chars["<oov>"]).all() and (row[n + 2:] == chars["<pad>"]).all()


def test_stateful_rows_carry_state_like_the_original(case):
    name, _, _ = case
    bilm = elmo.from_pretrained(MANYLANGS / name, stateful=True)
    with h5py.File(MANYLANGS / MODELS[name], "r") as f:
        group = f["stateful"]
        run(bilm, [SENTENCES[k] for k in group.attrs["call1_row_order"]])
        order = list(group.attrs["call2_row_order"])
        layers = run(bilm, [SENTENCES[k] for k in order])
        for row, k in enumerate(order):
            assert group[f"s{k}"].attrs["batch_row"] == row
            want = group[f"s{k}"][()]
            assert np.allclose(layers[:, row, :len(SENTENCES[k])], want, **TOL), f"sentence {k}"
    # and stateless (the default) gives the first call's outputs again
    assert not elmo.from_pretrained(MANYLANGS / name).stateful


# ---------------------------------------------------------------------- embedding, converting
def test_embedder_and_embed_file_use_the_models_ids(tmp_path, case):
    name, bilm, expected = case
    arrays = Embedder(bilm, batch_size=6).embed_sentences(SENTENCES)
    for k, array in enumerate(arrays):
        assert np.allclose(array, expected[f"s{k}"], **TOL), f"sentence {k}"
    allennlp_style = elmo.ElmoEmbedder(model=bilm).embed_batch(SENTENCES[:5])
    for k, array in enumerate(allennlp_style):
        assert np.allclose(array, expected[f"s{k}"], **TOL), f"ElmoEmbedder, sentence {k}"
    text = tmp_path / "in.txt"
    text.write_text("The cat sat on the mat .\n北京 是 首都\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert cli_main(["embed", str(text), str(out), "--model", str(MANYLANGS / name),
                     "--layers", "average", "--quiet"]) == 0
    with h5py.File(out, "r") as f:
        assert np.allclose(f["0"][()], expected["avg0"], **TOL)
        assert f["1"].shape == (3, 64)


def test_convert_round_trip(tmp_path, case):
    name, bilm, expected = case
    out = tmp_path / "native"
    assert cli_main(["convert", str(MANYLANGS / name), str(out)]) == 0
    assert (out / "model.safetensors").exists() and (out / "char.dic").exists()
    assert (out / "word.dic").exists() == (name == "model_word")
    again = elmo.from_pretrained(out)
    assert again.options == bilm.options
    assert read_dictionary(out / "char.dic") == bilm.id_scheme.chars
    assert np.array_equal(run(again, SENTENCES), run(bilm, SENTENCES))


def test_convert_to_the_original_layout_is_refused_in_one_line(tmp_path, capsys):
    assert cli_main(["convert", str(MANYLANGS / "model"), str(tmp_path / "o"), "--to", "original"]) == 1
    err = capsys.readouterr().err
    assert "dictionary" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_token_cache_gives_the_same_vectors():
    bilm = elmo.from_pretrained(MANYLANGS / "model_word")
    before = run(bilm, SENTENCES[:12])
    bilm.token_encoder.build_token_cache([t for s in SENTENCES[:6] for t in s])
    assert bilm.token_encoder.token_cache_size > 10
    assert np.allclose(run(bilm, SENTENCES[:12]), before, atol=1e-6)


# ---------------------------------------------------------------------- Chinese
def test_jieba_segments_raw_chinese(tmp_path):
    pytest.importorskip("jieba", reason="jieba is not installed (pip install 'elmo-pytorch[zh]')")
    from elmo.tokenize import tokenize_zh
    assert tokenize_zh("我爱北京天安门") == ["我", "爱", "北京", "天安门"]
    assert tokenize_zh("  北京 ") == ["北京"]
    text = tmp_path / "raw.txt"
    text.write_text("我爱北京天安门\n", encoding="utf-8")
    out = elmo.embed_file(text, tmp_path / "out.hdf5", MANYLANGS / "model_word", tokenize="zh",
                          layers="top")
    with h5py.File(out, "r") as f:
        assert f["0"].shape == (4, 64)
        assert json.loads(f.attrs["settings"])["tokenize"] == "zh"
    cli_out = tmp_path / "cli.hdf5"
    assert cli_main(["embed", str(text), str(cli_out), "--model", str(MANYLANGS / "model_word"),
                     "--tokenize", "zh", "--layers", "top", "--quiet"]) == 0
    with h5py.File(cli_out, "r") as f, h5py.File(out, "r") as g:
        assert np.array_equal(f["0"][()], g["0"][()])
        assert "--tokenize zh" in f.attrs["command_line"]


def test_missing_jieba_is_a_clear_error(monkeypatch):
    import sys
    from elmo.tokenize import TokenizerUnavailable, get_tokenizer
    monkeypatch.setitem(sys.modules, "jieba", None)   # import jieba now fails
    with pytest.raises(TokenizerUnavailable, match="pip install 'elmo-pytorch\\[zh\\]'"):
        get_tokenizer("zh")


# ---------------------------------------------------------------------- folders and files
def test_config_path_fallbacks(tmp_path):
    # model_word's config.json names a dead absolute path: the basename in the folder is used
    assert resolve_config_path(MANYLANGS / "model_word") == MANYLANGS / "model_word" / "cnn_16_8_32_64_tiny.json"
    # a released folder without its configuration file: the bundled copy, by basename
    (tmp_path / "config.json").write_text(json.dumps({"config_path": "/home/x/configs/cnn_0_100_512_4096_sample.json"}))
    path = resolve_config_path(tmp_path)
    assert path.name == "cnn_50_100_512_4096_sample.json" and path.parent.name == "elmoformanylangs"
    options = read_model_config(path, 100, 200)
    assert (options.lstm.dim, options.lstm.projection_dim, options.lstm.cell_clip) == (4096, 512, 3.0)
    assert options.char_cnn.n_filters == 2048 and options.char_vocabulary.word_dim == 100
    (tmp_path / "config.json").write_text(json.dumps({"seed": 1}))
    with pytest.raises(ConfigError, match="config.json: config_path: missing"):
        resolve_config_path(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"config_path": "/nowhere/other.json"}))
    with pytest.raises(ConfigError, match="config.json: config_path '/nowhere/other.json' not found"):
        resolve_config_path(tmp_path)


def test_zero_clip_means_no_clipping(tmp_path):
    config = json.loads((MANYLANGS / "model" / "cnn_16_0_32_64_tiny.json").read_text())
    config["encoder"]["cell_clip"] = 0
    (tmp_path / "c.json").write_text(json.dumps(config))
    options = read_model_config(tmp_path / "c.json", 188, 0)
    assert options.lstm.cell_clip is None and options.lstm.proj_clip == 0.8


def test_dictionary_reading_rules(tmp_path):
    path = tmp_path / "char.dic"
    # a space entry and a U+3000 entry both read as U+3000 (the later wins); U+2028 ends a line
    path.write_text("a\t0\n \t1\n\u3000\t2\nb\t3\u2028c\t4\n", encoding="utf-8")
    assert read_dictionary(path) == {"a": 0, "\u3000": 2, "b": 3, "c": 4}
    write_dictionary({"x": 1, "\u3000": 0, "y z": 2}, tmp_path / "w.dic")
    assert read_dictionary(tmp_path / "w.dic") == {"x": 1, "\u3000": 0, "y z": 2}
    path.write_text("a\t0\nb\tx\n", encoding="utf-8")
    with pytest.raises(WeightFileError, match="char.dic: line 2"):
        read_dictionary(path)


@pytest.mark.parametrize("token, reason", [
    (" b", "read back as 'b'"), ("\xa0", r"read back as '\\u3000'"), ("", r"read back as '\\u3000'"),
    ("x\u2028y", "holds a line break"), ("x\ty", "holds a TAB"),
])
def test_a_token_that_would_not_read_back_is_not_written(tmp_path, token, reason):
    """write_dictionary wrote such a token as it is, and the file read back as another
    dictionary (the token stripped, or read as U+3000) or not at all; a model saved with it
    gave other ids for that token than the one in memory."""
    entries = {"a": 0, token: 1, "b ": 2}   # ("b ": surrounding space at the end reads back)
    with pytest.raises(WeightFileError, match=f"w.dic: token {re.escape(repr(token))} cannot be written: .*{reason}"):
        write_dictionary(entries, tmp_path / "w.dic")
    assert not (tmp_path / "w.dic").exists()
    # the vocabulary's save checks both dictionaries before writing either
    chars = {s: i for i, s in enumerate(["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>", "a"])}
    words = {"<oov>": 0, "<pad>": 1, "<bos>": 2, "<eos>": 3, token: 4}
    with pytest.raises(WeightFileError, match="word.dic: token"):
        CharVocabulary(chars, words, max_chars=5).save(tmp_path)
    assert not (tmp_path / "char.dic").exists()


def test_truncation_applies_to_the_word_lookup():
    chars = {s: i for i, s in enumerate(["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>", "a"])}
    words = {"<oov>": 0, "<pad>": 1, "<bos>": 2, "<eos>": 3, "aaa": 4}
    vocab = CharVocabulary(chars, words, max_chars=5)
    assert vocab.row("aaaa") == (6, 7, 7, 7, 5, 5)     # cut to 3 characters, word "aaa" (id 4)
    assert vocab.row("<bos>") == (6, 1, 5, 4, 4, 3)    # the <bos> entry between the markers
    assert vocab.bos_row == (6, 1, 5, 4, 4, 3) and vocab.eos_row == (6, 2, 5, 4, 4, 4)



def test_dictionary_batch_to_ids_pads_and_checks_tokens_as_byte_ids_do():
    """CharVocabulary.batch_to_ids shares the byte ids' layout and token check (it kept a copy
    of both, its own message unreachable): rows in place, zeros past each sentence's end,
    an empty batch (0, 0, width), and a token that is no string named by its place."""
    chars = {s: i for i, s in enumerate(["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>", "a"])}
    words = {"<oov>": 0, "<pad>": 1, "<bos>": 2, "<eos>": 3, "aaa": 4}
    vocab = CharVocabulary(chars, words, max_chars=5)
    ids = vocab.batch_to_ids([["aaa"], [], ["a", "b"]])
    assert ids.shape == (3, 2, 6) and ids.dtype == torch.long
    assert ids[0, 0].tolist() == list(vocab.row("aaa")) and ids[2, 1].tolist() == list(vocab.row("b"))
    assert not ids[0, 1].any() and not ids[1].any()
    assert vocab.batch_to_ids([]).shape == (0, 0, 6)
    with pytest.raises(TypeError, match=r"^batch_to_ids: sentence 1, token 0: tokens must be strings, got int"):
        vocab.batch_to_ids([["a"], [3]])


def copy_model(tmp_path, name="model_word"):
    folder = tmp_path / name
    shutil.copytree(MANYLANGS / name, folder)
    for p in folder.iterdir():
        p.chmod(0o644)
    return folder


def one_line_error(folder, capsys):
    assert cli_main(["info", str(folder)]) == 1
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    return err


def zip_format_record(tmp_path, pkl, suffix):
    """A copy of the model folder whose ``pkl`` is re-saved in the zip format: (folder, the
    file's bytes, the record whose name ends with ``suffix``)."""
    folder = copy_model(tmp_path, "model")
    torch.save(torch.load(folder / pkl, map_location="cpu", weights_only=True), folder / pkl)
    with zipfile.ZipFile(folder / pkl) as archive:
        record = next(i for i in archive.infolist() if i.filename.endswith(suffix))
    return folder, bytearray((folder / pkl).read_bytes()), record


def test_missing_char_dic(tmp_path, capsys):
    folder = copy_model(tmp_path)
    (folder / "char.dic").unlink()
    with pytest.raises(WeightFileError, match="char.dic: dictionary file not found"):
        elmo.from_pretrained(folder)
    assert "char.dic" in one_line_error(folder, capsys)


def test_key_missing_in_the_pkl(tmp_path, capsys):
    folder = copy_model(tmp_path)
    state = torch.load(folder / "encoder.pkl", map_location="cpu", weights_only=True)
    del state["backward_layer_1.state_linearity.bias"]
    torch.save(state, folder / "encoder.pkl")
    with pytest.raises(WeightFileError, match="encoder.pkl: key 'backward_layer_1.state_linearity.bias' "
                                              "is missing"):
        elmo.from_pretrained(folder)
    assert "encoder.pkl" in one_line_error(folder, capsys)
    state["backward_layer_1.state_linearity.bias"] = torch.zeros(256)
    state["extra"] = torch.zeros(1)
    torch.save(state, folder / "encoder.pkl")
    with pytest.raises(WeightFileError, match="encoder.pkl: unexpected key 'extra'"):
        elmo.from_pretrained(folder)


def test_non_finite_weights_in_the_pkl(tmp_path):
    folder = copy_model(tmp_path)
    state = torch.load(folder / "encoder.pkl", map_location="cpu", weights_only=True)
    state["forward_layer_0.state_projection.weight"][3, 5] = float("nan")
    torch.save(state, folder / "encoder.pkl")
    with pytest.raises(WeightFileError, match="encoder.pkl: key 'forward_layer_0.state_projection.weight'.*"):
        elmo.from_pretrained(folder)


def test_row_count_mismatch(tmp_path, capsys):
    folder = copy_model(tmp_path)
    lines = (folder / "char.dic").read_text(encoding="utf-8").splitlines()
    (folder / "char.dic").write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")
    with pytest.raises(WeightFileError, match="token_embedder.pkl: 'char_emb_layer.embedding.weight' "
                                              "has 188 rows but .*char.dic has 187"):
        elmo.from_pretrained(folder)
    assert "char.dic" in one_line_error(folder, capsys)


def test_unreadable_pkl_and_missing_special(tmp_path, capsys):
    folder = copy_model(tmp_path, "model")
    (folder / "token_embedder.pkl").write_bytes(b"not a pickle")
    assert "token_embedder.pkl: not a readable torch state dict" in one_line_error(folder, capsys)
    shutil.copy(MANYLANGS / "model" / "token_embedder.pkl", folder / "token_embedder.pkl")
    text = (folder / "char.dic").read_text(encoding="utf-8").replace("<bow>\t", "<bxw>\t")
    (folder / "char.dic").write_text(text, encoding="utf-8")
    assert "char.dic: special token(s) <bow> missing" in one_line_error(folder, capsys)


def test_a_changed_byte_in_a_zip_format_pkl_is_refused(tmp_path, capsys):
    """torch.load does not check the CRC-32 of a zip-format state dict's records: a flipped byte
    in a weight loaded as another value (the model ran with it, without a word)."""
    import struct
    import zipfile
    folder = copy_model(tmp_path, "model")
    state = torch.load(folder / "encoder.pkl", map_location="cpu", weights_only=True)
    torch.save(state, folder / "encoder.pkl")   # (the zip format; the fixture's is the legacy one)
    elmo.from_pretrained(folder)                 # (whole, it loads)
    with zipfile.ZipFile(folder / "encoder.pkl") as archive:
        record = max((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    data = bytearray((folder / "encoder.pkl").read_bytes())
    # the record's data follows its 30-byte local header, which ends with the lengths of its
    # name and extra field
    name_length, extra_length = struct.unpack("<HH", data[record.header_offset + 26:record.header_offset + 30])
    start = record.header_offset + 30 + name_length + extra_length
    data[start + record.file_size // 8 * 4] ^= 0x01   # (the lowest mantissa bit of a float32: still finite)
    (folder / "encoder.pkl").write_bytes(bytes(data))
    with pytest.raises(WeightFileError, match=f"encoder.pkl: record '{record.filename}' fails its CRC-32 check"):
        elmo.from_pretrained(folder)
    assert "encoder.pkl" in one_line_error(folder, capsys)


@pytest.mark.parametrize("name", ["char.dic", "word.dic", "token_embedder.pkl", "encoder.pkl"])
def test_a_folder_file_that_links_to_nothing_is_named(tmp_path, capsys, name):
    """A dictionary or .pkl that is a symbolic link to a moved target was said to be "not
    found", though the folder shows it (as the other layouts' files, see test_weights)."""
    folder = copy_model(tmp_path)
    (folder / name).unlink()
    (folder / name).symlink_to(tmp_path / "moved" / name)
    with pytest.raises(WeightFileError, match=f"{name}: is a symbolic link to .*, which does not exist"):
        elmo.from_pretrained(folder)
    assert f"{name}: is a symbolic link" in one_line_error(folder, capsys)


def test_byte_models_ids_are_batch_to_ids(fixture_model):
    sentences = [["The", "bank", "."], [], ["naïve", "x" * 70]]
    assert torch.equal(fixture_model.token_ids(sentences), elmo.batch_to_ids(sentences))


def test_a_dictionary_model_without_its_dictionaries_says_so():
    options = elmo.from_pretrained(MANYLANGS / "model").options
    bare = elmo.BiLM(options)                      # the weights' shapes, no char.dic
    assert bare.token_encoder.char_embedding.weight.shape == (189, 16)
    with pytest.raises(RuntimeError, match="char.dic"):
        bare.token_ids([["a"]])


def test_released_configuration_gives_the_released_shapes(tmp_path):
    from elmo.manylangs.folder import expected_encoder, expected_token_embedder
    (tmp_path / "config.json").write_text(json.dumps({"config_path": "cnn_50_100_512_4096_sample.json"}))
    options = read_model_config(resolve_config_path(tmp_path), 5000, 70000)
    embedder, encoder = expected_token_embedder(options), expected_encoder(options)
    assert embedder["highways._layers.1.weight"] == (4096, 2048)
    assert embedder["projection.weight"] == (512, 2148)
    assert embedder["word_emb_layer.embedding.weight"] == (70000, 100)
    assert embedder["convolutions.6.weight"] == (1024, 50, 7)
    assert encoder["backward_layer_1.input_linearity.weight"] == (16384, 512)
    assert encoder["forward_layer_0.state_projection.weight"] == (512, 4096)
    assert options.output_dim == 1024 and options.lstm.proj_clip == 3.0


def test_expected_token_embedder_refuses_options_without_dictionaries():
    """Options of a byte model have no char_vocabulary: one clear error, not a None crash."""
    from elmo.manylangs.folder import expected_token_embedder
    from tests.conftest import tiny_options
    with pytest.raises(ConfigError, match="no char_vocabulary"):
        expected_token_embedder(tiny_options())


def test_a_sentence_that_is_a_string_is_refused_by_the_dictionaries(case):
    """As for byte models: each character of "the bank" would have become a token."""
    _, bilm, _ = case
    with pytest.raises(TypeError, match="sentence 1 is a string"):
        bilm.token_ids([["a"], "the bank"])
    with pytest.raises(TypeError, match="sentence 0 is NoneType"):
        bilm.token_ids([None])


def test_byte_ids_given_to_a_dictionary_model_are_refused():
    bilm = elmo.from_pretrained(MANYLANGS / "model")           # no word embedding: also 50 ids
    with pytest.raises(ValueError, match="bilm.token_ids"):
        bilm(elmo.batch_to_ids([["a", "b"]]))


def test_check_ids_refuses_ids_that_start_otherwise_as_a_forward_does():
    """In range, but not this model's ids (no token starts with its start id): a forward
    refused them, CharCNN.check_ids let them pass. The start is now one of check_ids'
    figures, read with the ranges in one read of the device (the BiLM reads them with its
    lengths)."""
    bilm = elmo.from_pretrained(MANYLANGS / "model")
    in_range = elmo.batch_to_ids([["a", "b"]]) % 20
    for check in (bilm.token_encoder.check_ids, bilm):
        with pytest.raises(ValueError, match=r"not made for this model \(each token's ids start with 188"):
            check(in_range)
    bilm.token_encoder.check_ids(bilm.token_ids([["a", "b"], []]))   # its own ids pass


def test_the_width_error_of_a_dictionary_model_points_at_token_ids_only():
    """Byte ids of the wrong width for a model with a word embedding (51 ids a token) said
    'or pass max_characters_per_token to batch_to_ids', which gives byte ids of that width:
    refused again, as ids of another scheme."""
    bilm = elmo.from_pretrained(MANYLANGS / "model_word")
    with pytest.raises(ValueError, match="bilm.token_ids") as err:
        bilm(elmo.batch_to_ids([["a", "b"]]))
    assert "batch_to_ids" not in str(err.value)


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["encoder"].update(name="lstm"), "encoder.name: only the 'elmo' encoder"),
    (lambda c: c["encoder"].pop("dim"), "encoder.dim: missing"),
    (lambda c: c["token_embedder"].update(char_dim=0), "token_embedder.char_dim: must be positive"),
    (lambda c: c["encoder"].update(proj_clip=-1), "encoder.proj_clip: must be >= 0"),
    # found by fuzzing: a misspelt key left the default (0: no clipping) in place, silently
    (lambda c: c["encoder"].update({" proj_clip": c["encoder"].pop("proj_clip")}),
     r"encoder. proj_clip: unknown key \(known: name, projection_dim, cell_clip, proj_clip, dim, n_layers\)"),
    (lambda c: c["token_embedder"].update(n_highways=3), "token_embedder.n_highways: unknown key"),
])
def test_model_configuration_errors_name_file_and_key(tmp_path, edit, message):
    config = json.loads((MANYLANGS / "model" / "cnn_16_0_32_64_tiny.json").read_text())
    edit(config)
    (tmp_path / "c.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=f"c.json: {message}"):
        read_model_config(tmp_path / "c.json", 188, 0)


def test_a_published_name_downloads_unpacks_and_reproduces(tmp_path, monkeypatch):
    """The hub's path (name -> archive -> unpacked folder -> load_pretrained), on a local server
    serving the fixture's model_word folder zipped as the released archives are (one folder)."""
    import io
    import zipfile
    from dataclasses import replace

    from elmo.hub import registry
    from tests.hub_server import FileServer

    monkeypatch.setenv("ELMO_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ELMO_OFFLINE", raising=False)
    monkeypatch.setenv("ELMO_DOWNLOAD_RETRIES", "0")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for path in sorted((MANYLANGS / "model_word").iterdir()):
            z.writestr(f"zhs.model/{path.name}", path.read_bytes())
    with FileServer({"/zhs.model.zip": buffer.getvalue()}) as server:
        entry = replace(registry.MODELS["manylangs-zh-hans"], urls={"archive": server.url("/zhs.model.zip")})
        monkeypatch.setitem(registry.MODELS, "manylangs-zh-hans", entry)
        bilm = elmo.from_pretrained("manylangs-zh-hans")
    with h5py.File(MANYLANGS / "expected_word.hdf5", "r") as f:
        layers = run(bilm, SENTENCES[:8])
        for k in range(8):
            assert np.allclose(layers[:, k, :len(SENTENCES[k])], f[f"s{k}"][()], **TOL)


def test_convert_counts_the_dictionaries_as_files_of_the_model(tmp_path, capsys):
    """A char.dic already in OUT was replaced by a dictionary model's without --overwrite, and
    a converted ELMoForManyLangs model's char.dic and word.dic stayed beside the weights of a
    model converted over it with --overwrite; both are refused now, OUT left as it was."""
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "char.dic").write_text("mine\n")
    assert cli_main(["convert", str(MANYLANGS / "model_word"), str(stray)]) == 1
    err = capsys.readouterr().err
    assert "already holds char.dic: pass --overwrite" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in stray.iterdir()) == ["char.dic"] and (stray / "char.dic").read_text() == "mine\n"
    native = tmp_path / "native"
    assert cli_main(["convert", str(MANYLANGS / "model_word"), str(native)]) == 0
    before = {p.name: p.read_bytes() for p in native.iterdir()}
    assert cli_main(["convert", "fixture", str(native), "--overwrite"]) == 1
    assert "also holds char.dic, word.dic of the model there" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in native.iterdir()} == before
    assert cli_main(["convert", str(MANYLANGS / "model_word"), str(native), "--overwrite"]) == 0
    assert cli_main(["convert", str(MANYLANGS / "model"), str(native), "--overwrite"]) == 1
    assert "also holds word.dic" in capsys.readouterr().err


def test_convert_over_an_elmoformanylangs_folder_keeps_its_files(tmp_path, capsys):
    """Converted into itself with --overwrite (which the refusal without it asked for), an
    ELMoForManyLangs folder's config.json, the file naming its model configuration, was
    replaced by the native one; converted over another such folder, that folder's .pkl state
    dicts stayed beside the new weights. Both are refused now, the folder left as it was."""
    folder = copy_model(tmp_path, "model_word")
    other = copy_model(tmp_path, "model")
    for source, target, message in (
            (folder, folder, "its config.json is the ELMoForManyLangs folder's"),
            (MANYLANGS / "model_word", other, "also holds token_embedder.pkl, encoder.pkl of the model there")):
        before = {p.name: p.read_bytes() for p in target.iterdir()}
        assert cli_main(["convert", str(source), str(target), "--overwrite"]) == 1
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1
        assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    # without --overwrite, converting into itself is not sent to it
    assert cli_main(["convert", str(folder), str(folder)]) == 1
    assert "its config.json is the ELMoForManyLangs folder's" in capsys.readouterr().err


def test_info_gives_the_size_and_dtype_of_the_pkl_files(capsys):
    """`elmo info` of an ELMoForManyLangs folder named none of its weight files."""
    assert cli_main(["info", str(MANYLANGS / "model_word")]) == 0
    out = capsys.readouterr().out
    assert "token_embedder.pkl: 0.11 MB, stored as float32" in out
    assert "encoder.pkl: 0.30 MB, stored as float32" in out


@pytest.mark.parametrize("dic", ["char.dic", "word.dic"])
def test_a_native_dictionary_id_past_the_embedding_is_refused_when_loading(tmp_path, capsys, dic):
    """A converted folder's char.dic (or word.dic) with an id past the embedding's rows loaded,
    and every sentence with that token was refused later as ids 'made for another model'."""
    out = tmp_path / "native"
    assert cli_main(["convert", str(MANYLANGS / "model_word"), str(out)]) == 0
    lines = (out / dic).read_text(encoding="utf-8").splitlines()
    token = lines[-1].split("\t")[0]
    lines[-1] = f"{token}\t{len(lines) + 5}"
    (out / dic).write_text("\n".join(lines) + "\n", encoding="utf-8")
    unrecord(out, dic)   # (the edit accepted: the check of its ids is what this test reaches)
    with pytest.raises(WeightFileError, match=f"{dic}: id {len(lines) + 5} of .* is not below"):
        elmo.from_pretrained(out)
    assert dic in one_line_error(out, capsys)


@pytest.mark.parametrize("file, old, new", [
    ("config.json", '"config_path": "cnn_16_0_32_64_tiny.json"',
     '"config_path": "cnn_16_0_32_64_tiny.json", "config_path": "other.json"'),
    ("cnn_16_0_32_64_tiny.json", '"cell_clip": 1.0', '"cell_clip": 1.0, "cell_clip": 3'),
])
def test_a_key_given_twice_in_a_folder_config_is_refused(tmp_path, capsys, file, old, new):
    """Found by fuzzing: a key given twice in config.json or the model configuration (here
    config_path to a configuration without clipping, or a second cell_clip) took the last
    value without a word, and the model gave other outputs."""
    folder = copy_model(tmp_path, "model")
    config = json.loads((folder / "cnn_16_0_32_64_tiny.json").read_text())
    config["encoder"]["cell_clip"] = 0
    (folder / "other.json").write_text(json.dumps(config))
    text = (folder / file).read_text()
    assert old in text
    (folder / file).write_text(text.replace(old, new))
    key = "config_path" if file == "config.json" else "cell_clip"
    with pytest.raises(ConfigError, match=f"{re.escape(file)}: not readable JSON \\(the key '{key}' appears twice"):
        elmo.from_pretrained(folder)
    assert f"{file}: not readable JSON" in one_line_error(folder, capsys)


def test_a_zip_format_pkl_whose_header_is_damaged_is_refused(tmp_path, capsys):
    """Found by fuzzing: a flipped bit in the name length of a record's local header (the
    central directory intact) moved where torch.load took that record's data from: the model
    loaded other values without a word. Python's zip reader refuses the record; so do we."""
    folder, data, record = zip_format_record(tmp_path, "token_embedder.pkl", "/data/4")
    data[record.header_offset + 27] ^= 0x01   # (the high byte of the name's length: +256)
    (folder / "token_embedder.pkl").write_bytes(bytes(data))
    with pytest.raises(WeightFileError, match=r"token_embedder.pkl: a damaged or incomplete zip archive \("):
        elmo.from_pretrained(folder)
    assert "token_embedder.pkl: a damaged" in one_line_error(folder, capsys)


def test_two_tokens_with_one_dictionary_id_are_refused(tmp_path, capsys):
    """Found by fuzzing: a char.dic line given the id of another token loaded silently (both
    characters on one embedding row, another row unused): other outputs without a word."""
    folder = copy_model(tmp_path, "model")
    lines = (folder / "char.dic").read_text(encoding="utf-8").splitlines()
    token = lines[21].split("\t")[0]
    lines[21] = f"{token}\t{lines[5].split(chr(9))[1]}"
    (folder / "char.dic").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(WeightFileError, match=rf"char.dic: line 22: id 5 of {re.escape(repr(token))} is also the id "
                                              r"of .* \(line 6\); each token needs its own id"):
        elmo.from_pretrained(folder)
    assert "char.dic: line 22" in one_line_error(folder, capsys)


def test_a_dictionary_with_a_byte_order_mark_reads_as_without(tmp_path):
    """Found by fuzzing: a UTF-8 byte-order mark opening char.dic (an editor's) joined the first
    token ('\\ufeffi' for 'i'), so that 'i' was out of the dictionary and the model gave other
    outputs without a word; it is dropped, as from every text file the package reads."""
    folder = copy_model(tmp_path, "model")
    data = (folder / "char.dic").read_bytes()
    assert data.startswith(b"i\t0\n")
    (folder / "char.dic").write_bytes(b"\xef\xbb\xbf" + data)
    assert read_dictionary(folder / "char.dic") == read_dictionary(MANYLANGS / "model" / "char.dic")
    sentences = [["in", "it"], ["i"]]
    assert np.array_equal(run(elmo.from_pretrained(folder), sentences),
                          run(elmo.from_pretrained(MANYLANGS / "model"), sentences))


def test_a_dictionary_id_of_thousands_of_digits_is_shown_cut(tmp_path):
    """Found by fuzzing: an id of 5,000 digits (past Python's limit for int()) was repeated
    whole in the error line."""
    path = tmp_path / "char.dic"
    path.write_text("a\t0\nb\t" + "9" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(WeightFileError, match=r"char.dic: line 2: id '9+\.\.\. is not an integer") as caught:
        read_dictionary(path)
    assert len(str(caught.value)) < 250


@pytest.mark.parametrize("damage", [lambda d: b"not a pickle", lambda d: d[:151] + bytes([d[151] ^ 2]) + d[152:]])
def test_a_damaged_legacy_pkl_is_named_without_torchs_advice(tmp_path, capsys, damage):
    """Found by fuzzing: a damaged legacy .pkl repeated torch's advice to load the file with
    weights_only=False (which runs any code the file holds) and its terminal escapes; the
    line now gives the weights-only reader's own reason only."""
    folder = copy_model(tmp_path, "model")
    data = (folder / "encoder.pkl").read_bytes()
    (folder / "encoder.pkl").write_bytes(damage(data))
    with pytest.raises(WeightFileError, match=r"encoder.pkl: not a readable torch state dict \(") as caught:
        elmo.from_pretrained(folder)
    message = str(caught.value)
    assert "weights_only" not in message and "\x1b" not in message and len(message) < len(str(folder)) + 200
    assert "encoder.pkl: not a readable" in one_line_error(folder, capsys)


def test_a_legacy_pkl_whose_storage_size_was_damaged_is_said_in_words(tmp_path, capsys):
    """Found by fuzzing: a legacy .pkl whose storage size record was damaged gave torch's
    unfilled "storage has wrong byte size: expected %ld got %ld" with a number run on after it."""
    import struct
    folder = copy_model(tmp_path, "model")
    state = torch.load(folder / "encoder.pkl", map_location="cpu", weights_only=True)
    torch.save(state, folder / "encoder.pkl", _use_new_zipfile_serialization=False)
    data = bytearray((folder / "encoder.pkl").read_bytes())
    # a tensor's storage is written as its number of values, then its bytes (storages in an
    # order of their own): found by its bytes
    tensor = max(state.values(), key=lambda t: t.numel())
    assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    at = bytes(data).find(tensor.contiguous().numpy().tobytes()) - 8
    assert at > 0 and struct.unpack("<q", data[at:at + 8])[0] == tensor.numel()
    data[at:at + 8] = struct.pack("<q", struct.unpack("<q", data[at:at + 8])[0] + 1)
    (folder / "encoder.pkl").write_bytes(bytes(data))
    with pytest.raises(WeightFileError, match=r"encoder.pkl: not a readable torch state dict \(a tensor's storage "
                                              r"holds another number of bytes than the file records for it\)$"):
        elmo.from_pretrained(folder)
    assert "%ld" not in one_line_error(folder, capsys)


def test_a_zip_record_marked_as_a_directory_is_refused(tmp_path, capsys):
    """Found by fuzzing: one flipped bit of a central directory entry's attributes (0x10, the
    MS-DOS directory flag) made torch.load read that record as empty: the tensor kept whatever
    memory held, other values at each load, without a word."""
    folder, data, record = zip_format_record(tmp_path, "token_embedder.pkl", "/data/8")
    entry = data.rfind(b"PK\x01\x02", 0, data.rfind(record.filename.encode()))
    assert data[entry + 38] == 0
    data[entry + 38] = 0x10   # (external attributes, the first byte)
    (folder / "token_embedder.pkl").write_bytes(bytes(data))
    with pytest.raises(WeightFileError, match=r"token_embedder.pkl: record 'token_embedder/data/8' is marked as a "
                                              r"directory"):
        elmo.from_pretrained(folder)
    assert "token_embedder.pkl: record" in one_line_error(folder, capsys)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("key, make, message", [
    ("projection.weight", lambda t: t.to_sparse(), "is a torch.sparse_coo tensor, expected a dense one"),
    ("projection.weight", lambda t: t.to_sparse_csr(), "is a torch.sparse_csr tensor, expected a dense one"),
    ("char_emb_layer.embedding.weight", lambda t: torch.tensor(0.5), r"has shape \(\), expected \(188, 16\)"),
])
def test_a_tensor_of_another_kind_in_the_pkl_is_named(tmp_path, capsys, key, make, message):
    """Found by fuzzing: a sparse tensor (of the right shape and dtype) in a .pkl was a
    TypeError traceback from the check of finite values, and an embedding saved as a scalar an
    IndexError from the count of its rows."""
    folder = copy_model(tmp_path, "model")
    state = torch.load(folder / "token_embedder.pkl", map_location="cpu", weights_only=True)
    state[key] = make(state[key])
    torch.save(state, folder / "token_embedder.pkl")
    with pytest.raises(WeightFileError, match=rf"token_embedder.pkl: key '{key}' {message}"):
        elmo.from_pretrained(folder)
    assert f"token_embedder.pkl: key '{key}'" in one_line_error(folder, capsys)


def test_a_legacy_pkl_tensor_whose_values_share_memory_is_refused(tmp_path, capsys):
    """Found by fuzzing: in a legacy .pkl (which holds no checksums) a flipped bit turned a
    bias's stride 1 into 0, and the model loaded with its first value in all 16 places."""
    folder = copy_model(tmp_path, "model")
    state = torch.load(folder / "token_embedder.pkl", map_location="cpu", weights_only=True)
    state["convolutions.0.bias"] = state["convolutions.0.bias"][:1].expand(16)
    torch.save(state, folder / "token_embedder.pkl", _use_new_zipfile_serialization=False)
    with pytest.raises(WeightFileError, match=r"token_embedder.pkl: key 'convolutions.0.bias' has strides \(0,\) for "
                                              r"shape \(16,\): its values share memory"):
        elmo.from_pretrained(folder)
    assert "token_embedder.pkl: key" in one_line_error(folder, capsys)
    state["convolutions.0.bias"] = torch.zeros(16, 2).T[0]   # (strided, not sharing memory: loads)
    torch.save(state, folder / "token_embedder.pkl", _use_new_zipfile_serialization=False)
    elmo.from_pretrained(folder)


@pytest.mark.parametrize("record, field, bit, reason", [
    (b"PK\x01\x02", 8, 0x01, "is encrypted"),       # a central directory entry's flags: encrypted
    (b"PK\x06\x06", 49, 0x10, "Invalid argument"),  # the zip64 end record's directory offset
])
def test_a_zip_directory_record_damaged_is_named(tmp_path, capsys, record, field, bit, reason):
    """Found by fuzzing: a central directory entry with its 'encrypted' flag set was a
    RuntimeError traceback, and a zip64 end record whose directory offset was damaged the bare
    '[Errno 22] Invalid argument' naming no file."""
    folder, data, entry = zip_format_record(tmp_path, "encoder.pkl", "/data/6")
    at = data.rfind(record, 0, data.rfind(entry.filename.encode())) if record == b"PK\x01\x02" else data.rfind(record)
    assert at >= 0
    data[at + field] ^= bit
    (folder / "encoder.pkl").write_bytes(bytes(data))
    with pytest.raises(WeightFileError, match=rf"encoder.pkl: a damaged or incomplete zip archive \(.*{reason}"):
        elmo.from_pretrained(folder)
    assert "encoder.pkl: a damaged" in one_line_error(folder, capsys)
