import hashlib
import json
import os
import re
import shutil

import h5py
import numpy as np
import pytest
import torch

import elmo
from elmo import ConfigError, WeightFileError, batch_to_ids, load_original, save_original
from elmo.folder_checksums import update_record
from tests.conftest import ALLENNLP, NOSKIP, fill_disk_on_open, killed_between_the_fallback_renames, random_bilm


@pytest.mark.parametrize("folder", [ALLENNLP, NOSKIP])
def test_original_round_trip_is_bit_exact(folder, tmp_path):
    bilm = load_original(folder / "options.json", folder / "lm_weights.hdf5")
    save_original(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    with h5py.File(folder / "lm_weights.hdf5", "r") as a, h5py.File(tmp_path / "weights.hdf5", "r") as b:
        names = []
        a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        assert sorted(names) == sorted(n for n in names if n in b)
        for n in names:
            assert a[n].dtype == b[n].dtype and np.array_equal(a[n][...], b[n][...]), n
    again = load_original(tmp_path / "options.json", tmp_path / "weights.hdf5")
    for (n, p), (_, q) in zip(bilm.state_dict().items(), again.state_dict().items()):
        assert torch.equal(p, q), n


@pytest.mark.parametrize("folder", [ALLENNLP, NOSKIP])
def test_convert_to_safetensors_and_back_gives_the_same_datasets_and_activations(folder, tmp_path):
    """`elmo convert` HDF5 -> safetensors -> HDF5: every dataset of the layout bit-identical
    (dtype included), the options equal, and the activations of the three models equal."""
    from elmo.cli import main
    native, back = tmp_path / "native", tmp_path / "back"
    assert main(["convert", str(folder), str(native)]) == 0
    assert main(["convert", str(native), str(back), "--to", "original"]) == 0
    with h5py.File(folder / "lm_weights.hdf5", "r") as a, h5py.File(back / "weights.hdf5", "r") as b:
        names: list = []
        a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        kept: list = []
        b.visititems(lambda n, o: kept.append(n) if isinstance(o, h5py.Dataset) else None)
        assert sorted(names) == sorted(kept)
        for n in names:
            assert a[n].dtype == b[n].dtype and np.array_equal(a[n][...], b[n][...]), n
    assert elmo.ElmoOptions.from_file(back / "options.json") == elmo.ElmoOptions.from_file(folder / "options.json")
    ids = batch_to_ids([["The", "bank", "x" * 60], ["."]])
    with torch.no_grad():
        outputs = [elmo.from_pretrained(f)(ids)["activations"] for f in (folder, native, back)]
    for layers in outputs[1:]:
        assert all(torch.equal(p, q) for p, q in zip(outputs[0], layers))


def test_random_model_round_trips_both_formats(tmp_path):
    bilm = random_bilm(skip=False)
    ids = batch_to_ids([["the", "dog"], ["bit"]])
    with torch.no_grad():
        want = bilm(ids)["activations"]
    for fmt in ("original", "safetensors"):
        elmo.save_pretrained(bilm, tmp_path / fmt, fmt=fmt)
        loaded = elmo.from_pretrained(tmp_path / fmt)
        for (n, p), (_, q) in zip(bilm.state_dict().items(), loaded.state_dict().items()):
            assert torch.equal(p, q), (fmt, n)
        with torch.no_grad():
            got = loaded(ids)["activations"]
        assert all(torch.equal(a, b) for a, b in zip(want, got))


def test_saving_in_the_original_layout_over_a_native_model_is_refused(tmp_path):
    """save_pretrained(fmt="original") into a folder holding model.safetensors wrote
    options.json + weights.hdf5 beside it, and from_pretrained, which reads the native weights
    first, gave back the older model without a word. Now it is refused, the folder untouched."""
    from elmo.io import OutputError
    folder = tmp_path / "model"
    old, new = random_bilm(), random_bilm()
    with torch.no_grad():
        for p in new.parameters():
            p.add_(1.0)
    elmo.save_pretrained(old, folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(OutputError, match="model.safetensors.*from_pretrained would load instead"):
        elmo.save_pretrained(new, folder, fmt="original")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    # (the other way round the new native weights are the ones read)
    elmo.save_pretrained(old, tmp_path / "original", fmt="original")
    elmo.save_pretrained(new, tmp_path / "original")
    loaded = elmo.from_pretrained(tmp_path / "original")
    for (n, p), (_, q) in zip(new.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(p, q), n


def test_float16_weights_load_as_float32(tmp_path):
    bilm = random_bilm()
    save_original(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5", dtype="float16")
    loaded = load_original(tmp_path / "options.json", tmp_path / "weights.hdf5")
    for p, q in zip(bilm.parameters(), loaded.parameters()):
        assert q.dtype == torch.float32 and torch.allclose(p, q, atol=1e-3)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "complex64", "bfloat16", None])
def test_a_storage_dtype_that_is_not_a_float_is_refused_before_writing(tmp_path, dtype):
    """save_original(dtype="int8") truncated every weight to an integer in a file that loaded
    back without a word (a different model); "complex64" replaced the previous file with one
    that load_original refuses; "bfloat16" was numpy's "data type not understood"."""
    bilm = random_bilm()
    save_original(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ValueError, match="dtype must be one of float32, float16"):
        save_original(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5", dtype=dtype)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_bfloat16_model_saves_in_the_original_layout(tmp_path):
    """save_original of a model after .to(torch.bfloat16) failed in numpy ("unsupported
    ScalarType BFloat16"); its weights are written as float32, which holds them exactly."""
    bilm = random_bilm().to(torch.bfloat16)
    save_original(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    elmo.save_pretrained(bilm, tmp_path / "folder", fmt="original")
    for loaded in (load_original(tmp_path / "options.json", tmp_path / "weights.hdf5", dtype=torch.float32),
                   elmo.from_pretrained(tmp_path / "folder", dtype="float32")):
        for (n, p), (_, q) in zip(bilm.state_dict().items(), loaded.state_dict().items()):
            assert q.dtype == torch.float32 and torch.equal(p.float(), q), n
    with h5py.File(tmp_path / "weights.hdf5", "r") as h5:
        assert h5["CNN_proj/W_proj"].dtype == np.float32   # what other ELMo readers expect


@pytest.mark.parametrize("fmt", ["safetensors", "original"])
def test_a_bfloat16_model_loads_back_as_bfloat16(tmp_path, fmt):
    """save_pretrained of a bfloat16 model loaded back as float32 (the same values): the dtype is
    now recorded and restored, unless the loader is given one; a float32 model stays float32."""
    bilm = random_bilm().to(torch.bfloat16)
    elmo.save_pretrained(bilm, tmp_path / "bf16", fmt=fmt)
    for loaded in (elmo.from_pretrained(tmp_path / "bf16"), elmo.load_pretrained(tmp_path / "bf16")):
        for (n, p), (_, q) in zip(bilm.state_dict().items(), loaded.state_dict().items()):
            assert q.dtype == p.dtype and torch.equal(p, q), n
    assert elmo.from_pretrained(tmp_path / "bf16", dtype=torch.float32).token_encoder.projection.weight.dtype \
        == torch.float32
    elmo.save_pretrained(random_bilm(), tmp_path / "fp32", fmt=fmt)
    assert all(p.dtype == torch.float32 for p in elmo.from_pretrained(tmp_path / "fp32").parameters())
    assert all(p.dtype == torch.bfloat16
               for p in elmo.from_pretrained(tmp_path / "fp32", dtype="bfloat16").parameters())
    with pytest.raises(ValueError, match="dtype must be one of float32"):
        elmo.from_pretrained(tmp_path / "fp32", dtype="int8")



@pytest.mark.parametrize("fmt", ["safetensors", "original"])
def test_a_float16_model_loads_as_float32_and_a_float64_one_exactly(tmp_path, fmt):
    """Since dtypes were restored, a model saved in float16 (to halve its file) loaded back as
    float16, which on a CPU runs several times slower than float32 and rounds every product:
    float16 is again a storage dtype that loads as float32 (as save_original(dtype="float16")
    files always did), float16 only on request. A native float64 model came back float64 with
    every weight rounded to float32 on the way; it now loads exactly."""
    half = random_bilm().half()
    elmo.save_pretrained(half, tmp_path / "half", fmt=fmt)
    loaded = elmo.from_pretrained(tmp_path / "half")
    for (n, p), (_, q) in zip(half.state_dict().items(), loaded.state_dict().items()):
        assert q.dtype == torch.float32 and torch.equal(p.float(), q), n
    assert all(p.dtype == torch.float16
               for p in elmo.from_pretrained(tmp_path / "half", dtype=torch.float16).parameters())
    if fmt == "safetensors":   # (the original layout stores float32: documented)
        double = random_bilm().double()
        with torch.no_grad():
            for p in double.parameters():
                p.add_(1e-12)               # below float32's resolution
        elmo.save_pretrained(double, tmp_path / "double")
        again = elmo.from_pretrained(tmp_path / "double")
        for (n, p), (_, q) in zip(double.state_dict().items(), again.state_dict().items()):
            assert q.dtype == torch.float64 and torch.equal(p, q), n


def test_info_names_the_dtype_a_model_loads_in(tmp_path, capsys):
    """A bfloat16 model now loads back as bfloat16 and runs so everywhere (embed, experiments),
    but elmo info, which shows the model, did not say so."""
    from elmo.cli import main
    elmo.save_pretrained(random_bilm().to(torch.bfloat16), tmp_path / "bf16")
    assert main(["info", str(tmp_path / "bf16")]) == 0
    assert "dtype: bfloat16 (as loaded)" in capsys.readouterr().out.splitlines()
    assert main(["info", "fixture"]) == 0
    assert "dtype: float32 (as loaded)" in capsys.readouterr().out.splitlines()


def test_truncated_file_is_a_clear_error(tmp_path):
    data = (ALLENNLP / "lm_weights.hdf5").read_bytes()
    (tmp_path / "half.hdf5").write_bytes(data[: len(data) // 2])
    with pytest.raises(WeightFileError, match="half.hdf5"):
        load_original(ALLENNLP / "options.json", tmp_path / "half.hdf5")


def test_missing_dataset_names_it_and_its_shape(tmp_path):
    shutil.copy(ALLENNLP / "lm_weights.hdf5", tmp_path / "w.hdf5")
    with h5py.File(tmp_path / "w.hdf5", "a") as f:
        del f["CNN_high_1/W_carry"]
    with pytest.raises(WeightFileError, match=r"CNN_high_1/W_carry.*\(124, 124\)"):
        load_original(ALLENNLP / "options.json", tmp_path / "w.hdf5")


def test_options_that_do_not_fit_the_weights(tmp_path):
    options = json.loads((ALLENNLP / "options.json").read_text())
    options["lstm"]["dim"] = 32
    (tmp_path / "options.json").write_text(json.dumps(options))
    with pytest.raises(WeightFileError, match=r"W_0.*\(32, 256\).*\(32, 128\)"):
        load_original(tmp_path / "options.json", ALLENNLP / "lm_weights.hdf5")


@pytest.mark.parametrize("section, key, value", [("lstm", "dim", 2**30), ("char_cnn", "filters", [[1, 2**30]])])
def test_options_far_larger_than_the_weights_are_named_before_the_model_is_built(tmp_path, capsys, section, key, value):
    """The model was built from the options before the file's shapes were checked: torch was
    asked for hundreds of GB and `elmo info` ended in a traceback from its allocator."""
    options = json.loads((ALLENNLP / "options.json").read_text())
    options[section][key] = value
    (tmp_path / "options.json").write_text(json.dumps(options))
    shutil.copy(ALLENNLP / "lm_weights.hdf5", tmp_path / "weights.hdf5")
    with pytest.raises(WeightFileError, match=r"weights.hdf5: dataset '.*' has shape .* from the options"):
        load_original(tmp_path / "options.json", tmp_path / "weights.hdf5")
    from elmo.cli import main
    assert main(["info", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1 and "weights.hdf5: dataset" in err


@pytest.mark.parametrize("folder", [ALLENNLP, NOSKIP])
def test_layer_weight_count_is_the_layouts_datasets_without_the_embedding(folder):
    from elmo.weights import expected_shapes, layer_weight_count
    options = elmo.ElmoOptions.from_file(folder / "options.json")
    shapes = expected_shapes(options)
    assert layer_weight_count(options) == sum(int(np.prod(s)) for n, s in shapes.items() if n != "char_embed")


@pytest.mark.parametrize("section, key, value", [("lstm", "dim", 2**30), ("char_cnn", "filters", [[1, 2**30]])])
def test_a_native_config_far_larger_than_the_weights_is_named_before_the_model_is_built(tmp_path, capsys, section,
                                                                                       key, value):
    """As in the original layout: an edited config.json had torch asked for hundreds of GB,
    and `elmo info` ended in a traceback from its allocator."""
    elmo.save_pretrained(load_original(ALLENNLP / "options.json", ALLENNLP / "lm_weights.hdf5"), tmp_path / "m",
                         fmt="safetensors")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    config[section][key] = value
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    with pytest.raises(WeightFileError, match=r"m/config.json: describes a model of at least [\d,]+ weights, more "
                                              r"than model.safetensors \([\d,]+ bytes\) holds"):
        elmo.from_pretrained(tmp_path / "m")
    from elmo.cli import main
    assert main(["info", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1 and "config.json: describes" in err


def test_options_missing_a_key(tmp_path):
    options = json.loads((ALLENNLP / "options.json").read_text())
    del options["lstm"]["projection_dim"]
    (tmp_path / "options.json").write_text(json.dumps(options))
    with pytest.raises(ConfigError, match="lstm.projection_dim: missing"):
        load_original(tmp_path / "options.json", ALLENNLP / "lm_weights.hdf5")


def test_missing_files_and_folders(tmp_path):
    with pytest.raises(WeightFileError, match="not found"):
        load_original(ALLENNLP / "options.json", tmp_path / "nope.hdf5")
    with pytest.raises(WeightFileError, match="not a model folder"):
        elmo.from_pretrained(tmp_path / "nope")
    with pytest.raises(WeightFileError, match="expected config.json"):
        elmo.from_pretrained(tmp_path)


def test_saving_something_that_is_not_a_bilm_is_refused_before_writing(tmp_path):
    with pytest.raises(TypeError, match=r"save_pretrained saves a BiLM \(.*\), got NoneType"):
        elmo.save_pretrained(None, tmp_path / "model")
    assert not (tmp_path / "model").exists()  # no empty folder left behind
    with pytest.raises(TypeError, match="save_original saves a BiLM"):
        save_original(elmo.Elmo(module=random_bilm()), tmp_path / "o.json", tmp_path / "w.hdf5")
    assert list(tmp_path.iterdir()) == []


def test_an_empty_or_wrongly_typed_model_name_is_refused(tmp_path, monkeypatch):
    shutil.copytree(elmo.model_path("fixture"), tmp_path / "model")
    monkeypatch.chdir(tmp_path / "model")  # "" would have read the current folder's model
    for empty in ("", "  "):
        with pytest.raises(WeightFileError, match="the model name is empty"):
            elmo.from_pretrained(empty)
    assert elmo.from_pretrained(".").output_dim > 0  # naming it is the way
    for wrong in (None, 3, b"default"):
        with pytest.raises(TypeError, match="named by a string or a path, got"):
            elmo.from_pretrained(wrong)


def test_a_mistyped_model_name_names_the_close_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where no folder of that name exists
    with pytest.raises(WeightFileError, match="did you mean 'default'"):
        elmo.from_pretrained("defualt")
    with pytest.raises(WeightFileError, match="neither a model folder nor a model's name; bundled"):
        elmo.from_pretrained("zzzz")
    shutil.copytree(elmo.model_path("fixture"), tmp_path / "defualt")
    assert elmo.from_pretrained("defualt").output_dim > 0  # a folder of that name is read


def test_truncated_safetensors_is_a_clear_error(tmp_path):
    elmo.save_pretrained(random_bilm(), tmp_path)
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(WeightFileError, match="model.safetensors"):
        elmo.from_pretrained(tmp_path)


def test_bundled_fixture_loads():
    bilm = elmo.from_pretrained("fixture")
    assert bilm.output_dim == 32 and not bilm.stateful


def test_written_files_get_ordinary_permissions(tmp_path):
    """Atomic writes go through a private temporary file; the result must not stay owner-only."""
    import os
    old = os.umask(0o022)
    try:
        elmo.save_pretrained(random_bilm(), tmp_path / "native")
        elmo.save_pretrained(random_bilm(), tmp_path / "original", fmt="original")
    finally:
        os.umask(old)
    for path in [tmp_path / "native" / "model.safetensors", tmp_path / "original" / "weights.hdf5",
                 tmp_path / "original" / "options.json"]:
        assert path.stat().st_mode & 0o777 == 0o644, path


# ---------------------------------------------------------------------- bad values and paths
def _original_copy(tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(ALLENNLP / "options.json", tmp_path / "options.json")
    shutil.copy(ALLENNLP / "lm_weights.hdf5", tmp_path / "weights.hdf5")
    return tmp_path


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_weights_name_the_dataset(tmp_path, value):
    folder = _original_copy(tmp_path)
    with h5py.File(folder / "weights.hdf5", "a") as f:
        f["CNN_proj/b_proj"][3] = value
    with pytest.raises(WeightFileError, match=r"dataset 'CNN_proj/b_proj' holds 1 non-finite .*\(3,\)"):
        elmo.from_pretrained(folder)
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    elmo.save_pretrained(random_bilm(), tmp_path / "native")   # (save_pretrained refuses such weights)
    path = tmp_path / "native" / "model.safetensors"
    with safe_open(str(path), "pt") as f:
        metadata = f.metadata()
    metadata.pop("tensor_crc32")   # (a file saved before checksums were recorded: its damage is found so)
    tensors = load_file(str(path))
    tensors["lstm.layers.0.bias"][1][5] = value
    save_file(tensors, str(path), metadata=metadata)
    with pytest.raises(WeightFileError, match=r"model.safetensors: tensor 'lstm.layers.0.bias' holds 1 non-finite"):
        elmo.from_pretrained(tmp_path / "native")


@pytest.mark.parametrize("fmt", ["safetensors", "original"])
def test_a_model_with_non_finite_weights_is_not_saved_over_a_good_one(tmp_path, fmt):
    # written, a diverged model's NaN replaced the model saved there before with files that no
    # load accepts, found only at the next load
    folder = tmp_path / "model"
    elmo.save_pretrained(random_bilm(), folder, fmt=fmt)
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    bilm = random_bilm(seed=1)
    with torch.no_grad():
        bilm.lstm.layers[1].weight_proj[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"^save_pretrained: the model's lstm.layers.1.weight_proj holds 1 "
                                         r"non-finite values .* nothing was written"):
        elmo.save_pretrained(bilm, folder, fmt=fmt)
    with pytest.raises(ValueError, match=r"^save_original: the model's lstm.layers.1.weight_proj"):
        save_original(bilm, tmp_path / "o.json", tmp_path / "w.hdf5")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == files
    assert not (tmp_path / "o.json").exists() and not (tmp_path / "w.hdf5").exists()
    elmo.from_pretrained(folder)


def test_string_dataset_is_named(tmp_path):
    folder = _original_copy(tmp_path)
    with h5py.File(folder / "weights.hdf5", "a") as f:
        shape = f["CNN_proj/b_proj"].shape
        del f["CNN_proj/b_proj"]
        f.create_dataset("CNN_proj/b_proj", data=np.full(shape, "0.5", dtype=object),
                         dtype=h5py.string_dtype())
    with pytest.raises(WeightFileError, match="dataset 'CNN_proj/b_proj' holds .* values, expected floating-point numbers"):
        elmo.from_pretrained(folder)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8])
def test_an_integer_dataset_is_refused(tmp_path, dtype):
    """Found by fuzzing: a weight dataset of whole numbers (as a damaged datatype message reads
    a float32 dataset's bits) loaded without a word, every value a whole number."""
    folder = _original_copy(tmp_path)
    with h5py.File(folder / "weights.hdf5", "a") as f:
        values = f["CNN/b_cnn_1"][...]
        del f["CNN/b_cnn_1"]
        f["CNN/b_cnn_1"] = np.abs(values * 10).astype(dtype)
    with pytest.raises(WeightFileError, match=rf"weights.hdf5: dataset 'CNN/b_cnn_1' holds {np.dtype(dtype)} "
                                              r"values, expected floating-point numbers"):
        elmo.from_pretrained(folder)


def test_a_safetensors_tensor_of_whole_numbers_is_refused(tmp_path):
    """Found by fuzzing: a native header whose "F32" reads "I32" (same size, same offsets)
    loaded the float bits as integers into the model, which gave other outputs without a word."""
    import struct
    elmo.save_pretrained(random_bilm(), tmp_path)
    path = tmp_path / "model.safetensors"
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    header["token_encoder.projection.bias"]["dtype"] = "I32"
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length:])
    with pytest.raises(WeightFileError, match=r"model.safetensors: tensor 'token_encoder.projection.bias' "
                                              r"holds torch.int32 values, expected torch.float32"):
        elmo.from_pretrained(tmp_path)


def _native_header(path):
    """(the JSON header of the safetensors file ``path``, the offset where its data starts)"""
    import struct
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + length]), 8 + length


def _rewrite_header(path, header):
    import struct
    data = path.read_bytes()
    _, start = _native_header(path)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[start:])


def _flip_low_bit(path, name, index=3):
    """Flip the lowest bit of the ``index``-th float32 of tensor ``name`` in the safetensors file
    ``path``: a weight changed in its last place, still finite, the shape and header intact."""
    header, start = _native_header(path)
    offset = start + header[name]["data_offsets"][0] + 4 * index
    data = bytearray(path.read_bytes())
    data[offset] ^= 1
    path.write_bytes(bytes(data))


def test_a_flipped_bit_in_a_native_weight_is_refused_naming_the_tensor(tmp_path):
    """The safetensors format checks its header, not its data: a weight damaged in its last bit
    (a failing disk, a bad copy) loaded without a word and changed every vector after it. Each
    tensor's CRC-32 is now recorded in the file's metadata and checked on every load."""
    bilm = random_bilm()
    elmo.save_pretrained(bilm, tmp_path)
    ids = batch_to_ids([["a", "damaged", "file"]])
    expected = bilm(ids)["activations"][-1]
    torch.testing.assert_close(elmo.from_pretrained(tmp_path)(ids)["activations"][-1], expected,
                               rtol=0, atol=0)
    _flip_low_bit(tmp_path / "model.safetensors", "lstm.layers.1.weight_ih")
    with pytest.raises(WeightFileError, match=r"model.safetensors: damaged: tensor "
                                              r"'lstm.layers.1.weight_ih' does not hold the values "
                                              r"it was saved with \(CRC-32 [0-9a-f]{8}, recorded [0-9a-f]{8}\); "
                                              r"restore it from a copy, or save the model again$"):
        elmo.from_pretrained(tmp_path)


def test_two_native_tensors_whose_names_were_swapped_are_refused(tmp_path):
    """Two tensors of one shape whose names trade places in the header (a hand edit, or bytes of
    two names damaged): the LSTM ran its input weights as its recurrent ones, silently."""
    elmo.save_pretrained(random_bilm(), tmp_path)
    path = tmp_path / "model.safetensors"
    header, _ = _native_header(path)
    first, second = "lstm.layers.0.weight_ih", "lstm.layers.0.weight_hh"
    assert header[first]["shape"] == header[second]["shape"]
    header[first], header[second] = header[second], header[first]
    _rewrite_header(path, header)
    with pytest.raises(WeightFileError, match=r"damaged: tensor 'lstm\.layers\.0\.weight_(hh|ih)' does not hold the values"):
        elmo.from_pretrained(tmp_path)


@pytest.mark.parametrize("record, message", [
    ("{", "its metadata's 'tensor_crc32' record is damaged"),
    ('{"char_embed": 1}', "its metadata's 'tensor_crc32' record is damaged"),
    ("drop:lstm.layers.0.bias", "tensor 'lstm.layers.0.bias' is not in the checksum record"),
    ("add:lstm.extra", "tensor 'lstm.extra', which its checksum record names, is missing"),
])
def test_a_damaged_checksum_record_is_refused(tmp_path, record, message):
    elmo.save_pretrained(random_bilm(), tmp_path)
    path = tmp_path / "model.safetensors"
    header, _ = _native_header(path)
    recorded = json.loads(header["__metadata__"]["tensor_crc32"])
    assert set(recorded) == {k for k in header if k != "__metadata__"}
    kind, _, name = record.partition(":")
    if kind == "drop":
        del recorded[name]
    elif kind == "add":
        recorded[name] = "00000000"
    header["__metadata__"]["tensor_crc32"] = json.dumps(recorded) if kind in ("drop", "add") else record
    _rewrite_header(path, header)
    with pytest.raises(WeightFileError, match=re.escape(message)):
        elmo.from_pretrained(tmp_path)


def test_a_native_model_saved_without_checksums_loads_as_before(tmp_path):
    """Files written before the checksums were recorded hold none: they load, unchecked."""
    from safetensors.torch import load_file, save_file
    bilm = random_bilm()
    elmo.save_pretrained(bilm, tmp_path)
    path = tmp_path / "model.safetensors"
    header, _ = _native_header(path)
    metadata = {k: v for k, v in header["__metadata__"].items() if k != "tensor_crc32"}
    save_file(load_file(str(path)), str(path), metadata=metadata)
    ids = batch_to_ids([["older", "file"]])
    torch.testing.assert_close(elmo.from_pretrained(tmp_path)(ids)["activations"][-1],
                               bilm(ids)["activations"][-1], rtol=0, atol=0)


def _flip_low_bit_of_dataset(path, name, index=3):
    """Flip the lowest bit of the ``index``-th value of the contiguous HDF5 dataset ``name``."""
    with h5py.File(path, "r") as f:
        offset = f[name].id.get_offset() + f[name].dtype.itemsize * index
    data = bytearray(path.read_bytes())
    data[offset] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_flipped_bit_in_a_saved_hdf5_weight_is_refused_naming_the_dataset(tmp_path, dtype):
    """HDF5 checks none of a dataset's data: a weight of a model saved in the original layout,
    damaged in its last bit, loaded without a word. Each weight dataset the package writes now
    carries its CRC-32 as an attribute, checked on every load."""
    from elmo.checksums import HDF5_ATTRIBUTE, array_crc32
    bilm = random_bilm()
    save_original(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5", dtype=dtype)
    name = "RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"
    with h5py.File(tmp_path / "weights.hdf5", "r") as f:
        assert f[name].attrs[HDF5_ATTRIBUTE] == array_crc32(f[name][...], "/" + name)
    load_original(tmp_path / "options.json", tmp_path / "weights.hdf5")   # (as saved: loads)
    _flip_low_bit_of_dataset(tmp_path / "weights.hdf5", name)
    with pytest.raises(WeightFileError, match=rf"weights.hdf5: dataset '{name}' does not hold the values it "
                                              rf"was saved with \(CRC-32 [0-9a-f]{{8}}, recorded [0-9a-f]{{8}}\); "
                                              rf"the file is damaged"):
        load_original(tmp_path / "options.json", tmp_path / "weights.hdf5")


@pytest.mark.parametrize("value", ["zz", 7, "0000000g"])
def test_a_damaged_hdf5_checksum_attribute_is_refused(tmp_path, value):
    save_original(random_bilm(), tmp_path / "options.json", tmp_path / "weights.hdf5")
    with h5py.File(tmp_path / "weights.hdf5", "a") as f:
        f["CNN_proj/b_proj"].attrs["elmo_crc32"] = value
    with pytest.raises(WeightFileError, match=r"dataset 'CNN_proj/b_proj' (its 'elmo_crc32' attribute is "
                                              r"damaged|does not hold the values)"):
        load_original(tmp_path / "options.json", tmp_path / "weights.hdf5")


@pytest.mark.parametrize("pair", [("CNN_high_0/W_carry", "CNN_high_0/W_transform"),
                                  ("RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/B",
                                   "RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/B")])
def test_two_hdf5_datasets_whose_names_were_swapped_are_refused(tmp_path, pair):
    """A dataset's checksum attribute goes with it: two datasets of one shape whose names were
    swapped each matched the CRC-32 of its values, and loaded as the other (the highway's carry
    gate as its transform, one direction's LSTM biases as the other's). The checksum covers
    the dataset's path too."""
    elmo.save_pretrained(random_bilm(), tmp_path, fmt="original")
    first, second = pair
    with h5py.File(tmp_path / "weights.hdf5", "a") as f:
        f.move(first, "swapping")
        f.move(second, first)
        f.move("swapping", second)
    with pytest.raises(WeightFileError, match=rf"weights.hdf5: dataset '({first}|{second})' does not hold the "
                                              rf"values it was saved with"):
        elmo.from_pretrained(tmp_path)


def test_an_hdf5_weight_file_without_checksums_loads_as_before(tmp_path):
    """The released files (and the bundled default model) carry no checksums: read unchecked."""
    folder = _original_copy(tmp_path)
    with h5py.File(folder / "weights.hdf5", "r") as f:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        assert names and not any("elmo_crc32" in f[n].attrs for n in names)
    assert elmo.from_pretrained(folder).output_dim > 0


def test_a_big_endian_softmax_loads_as_written(tmp_path):
    """Found by fuzzing: a softmax.hdf5 dataset in big-endian byte order (valid HDF5, as written
    on such a machine) was torch's ValueError naming no file; it now loads, the same values."""
    from elmo.training.export import export_model, load_language_model
    from elmo.training.model import LanguageModel
    from elmo.vocab import Vocabulary
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "the", "bank"])
    bilm = random_bilm()
    export_model(LanguageModel(bilm.options, len(vocab), vocab.bos, vocab.eos, 0.0, bilm=bilm), vocab, tmp_path)
    with h5py.File(tmp_path / "softmax.hdf5", "r+") as h5:
        for name in ("softmax/W", "softmax/b"):
            values = h5[name][...]
            del h5[name]
            h5[name] = values.astype(">f4")
    update_record([tmp_path / "softmax.hdf5"])   # (rewritten on purpose: recorded as its writer would)
    model, _ = load_language_model(tmp_path)
    with h5py.File(tmp_path / "softmax.hdf5", "r") as h5:
        assert torch.equal(model.softmax.weight.detach(), torch.from_numpy(h5["softmax/W"][...].astype("<f4")))
        assert torch.equal(model.softmax.bias.detach(), torch.from_numpy(h5["softmax/b"][...].astype("<f4")))


@pytest.mark.parametrize("name", ["weights.hdf5", "options.json", "model.safetensors"])
@pytest.mark.parametrize("loop", [False, True])
def test_a_model_file_that_links_to_nothing_is_named(tmp_path, capsys, name, loop):
    """A weights or options file that is a symbolic link to a moved target (or to itself)
    counted as absent: the folder was said to lack the very file it shows, and a folder that
    holds both layouts loaded its other layout's files without a word."""
    from elmo.cli import main as cli_main
    folder = _original_copy(tmp_path / "m")
    elmo.save_pretrained(elmo.from_pretrained(folder), folder)   # both layouts: one model
    (folder / name).unlink()
    (folder / name).symlink_to(name if loop else tmp_path / "moved" / name)
    with pytest.raises(WeightFileError, match=f"{name}: is a symbolic link to .*, which does not exist"):
        elmo.from_pretrained(folder)
    assert cli_main(["info", str(folder)]) == 1
    err = capsys.readouterr().err.strip()
    assert f"{name}: is a symbolic link" in err and len(err.splitlines()) == 1


def test_directories_where_files_belong(tmp_path):
    folder = _original_copy(tmp_path / "a")
    (folder / "weights.hdf5").unlink()
    (folder / "weights.hdf5").mkdir()
    with pytest.raises(WeightFileError, match=r"weights.hdf5: is a directory") as e:
        elmo.from_pretrained(folder)
    assert "\n" not in str(e.value)
    folder = _original_copy(tmp_path / "b")
    (folder / "options.json").unlink()
    (folder / "options.json").mkdir()
    with pytest.raises(ConfigError, match=r"options.json: is a directory"):
        elmo.from_pretrained(folder)
    elmo.save_pretrained(random_bilm(), tmp_path / "c")
    (tmp_path / "c" / "model.safetensors").unlink()
    (tmp_path / "c" / "model.safetensors").mkdir()
    with pytest.raises(WeightFileError, match=r"model.safetensors: is a directory"):
        elmo.from_pretrained(tmp_path / "c")


def test_atomic_helpers_are_importable_from_weights_and_io():
    from elmo import io, weights
    assert weights.atomic_write_text is io.atomic_write_text
    assert weights.atomic_target is io.atomic_target and weights.atomic_commit is io.atomic_commit


def test_full_disk_while_saving_weights_is_one_line_and_keeps_the_old_file(tmp_path, monkeypatch):
    """ENOSPC inside HDF5's writes: one OSError naming the file, no temporary file left, and
    the weights already at that path untouched (the write goes to a temporary file first)."""
    bilm = random_bilm(seed=1)
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    save_original(bilm, options, weights)
    before = weights.read_bytes()
    fill_disk_on_open(monkeypatch, 4_000)
    with pytest.raises(OSError) as e:
        save_original(random_bilm(seed=2), options, weights)
    message = str(e.value)
    assert message == f"{weights}: cannot write the weights: No space left on device"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["options.json", "weights.hdf5"]
    assert weights.read_bytes() == before


def test_convert_into_the_current_folder_or_its_parent(tmp_path, monkeypatch, capsys):
    """`elmo convert MODEL .` was pathlib's "PosixPath('.') has an empty name" (the lock file
    beside OUT had no name to be made from); now the folder is written as by its full path,
    and the user's own files in it stay."""
    from elmo.cli import main
    here = tmp_path / "work" / "sub"
    here.mkdir(parents=True)
    (here / "notes.txt").write_text("mine\n")
    monkeypatch.chdir(here)
    assert main(["convert", "fixture", "."]) == 0, capsys.readouterr().err
    assert (here / "notes.txt").read_text() == "mine\n"
    assert elmo.from_pretrained(here).options == elmo.from_pretrained("fixture").options
    monkeypatch.chdir(here)   # (the new folder took the place of the one this process was in)
    assert main(["convert", "fixture", "..", "--to", "original"]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["README.md", "metadata.json", "options.json",
                                                                     "sub", "weights.hdf5"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]   # no lock or staging left


def test_a_convert_killed_between_the_renames_of_its_fallback_swap_is_finished_by_the_next(
        tmp_path, monkeypatch, capsys):
    """Without renameat2 (NFS, another system) convert --overwrite renames OUT aside to
    OUT.replaced and then the new folder in: a kill between left no OUT. The next convert found
    no folder, so it checked nothing (--overwrite, another model's files) and wrote a new one,
    leaving the old folder (with the user's own files) aside, to be deleted by a later
    --overwrite, and the new one as OUT.partial. Under its lock it now puts the old folder back
    first, and replaces it as asked."""
    from elmo.cli import main
    out = tmp_path / "out"
    assert main(["convert", "fixture", str(out)]) == 0
    (out / "mine.txt").write_text("mine\n")
    killed_between_the_fallback_renames(monkeypatch, capsys, out, ["convert", "fixture", str(out), "--overwrite"])
    assert main(["convert", "default", str(out)]) == 1   # (another model's files: only with --overwrite)
    assert "already holds config.json and model.safetensors" in capsys.readouterr().err
    assert main(["convert", "fixture", str(out), "--overwrite"]) == 0
    assert (out / "mine.txt").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_convert_refuses_to_replace_another_models_files(tmp_path, capsys):
    from elmo.cli import main
    out = tmp_path / "out"
    assert main(["convert", "fixture", str(out)]) == 0
    before = (out / "model.safetensors").read_bytes()
    assert main(["convert", "default", str(out)]) == 1  # the fixture's files stay
    # (metadata.json: the record of the files the fixture's convert wrote)
    assert "already holds config.json and model.safetensors and metadata.json: pass --overwrite" in capsys.readouterr().err
    assert (out / "model.safetensors").read_bytes() == before
    assert main(["convert", str(out), str(out), "--to", "original"]) == 0  # the other layout beside it
    assert main(["convert", str(out), str(out), "--to", "original", "--overwrite"]) == 0   # one model still
    # another model over one layout would leave the other beside it: a folder of two models
    assert main(["convert", "default", str(out), "--overwrite"]) == 1
    assert "also holds options.json, weights.hdf5, README.md of the model there" in capsys.readouterr().err
    assert (out / "model.safetensors").read_bytes() == before
    for name in ("options.json", "weights.hdf5", "README.md"):   # (README.md: the fixture's card)
        (out / name).unlink()
    assert main(["convert", "default", str(out), "--overwrite"]) == 0
    assert elmo.from_pretrained(out).output_dim == elmo.from_pretrained("default").output_dim
    # a trained language model's softmax and vocabulary stay with their own biLM
    (out / "softmax.hdf5").write_bytes(b"\x89HDF\r\n\x1a\n")
    assert main(["convert", "fixture", str(out), "--overwrite"]) == 1
    assert ("also holds softmax.hdf5, MODEL_CARD.md of the model there"   # default's (the fixture has a
            in capsys.readouterr().err)                                    # metadata.json: replaced)
    other = tmp_path / "other"                               # the other layout alone there: the same
    assert main(["convert", "fixture", str(other), "--to", "original"]) == 0
    assert main(["convert", "default", str(other)]) == 1
    assert "already holds metadata.json: pass --overwrite" in capsys.readouterr().err   # (the fixture's record)
    assert main(["convert", "default", str(other), "--overwrite"]) == 1
    assert "also holds options.json, weights.hdf5, README.md of the model there" in capsys.readouterr().err


def test_a_second_convert_into_the_same_folder_is_refused_while_the_first_writes(tmp_path, capsys, monkeypatch):
    """Two converts of different models into one folder, the second starting while the first
    loads its model: both found the folder empty, and the first's files then replaced the
    second's without --overwrite (or lay beside them as one model). Now the second is refused,
    naming the first, and the folder holds the first's model alone."""
    from elmo.cli import main
    out, other = tmp_path / "out", tmp_path / "other"
    assert main(["convert", "fixture", str(other), "--to", "original"]) == 0
    save, started, codes = elmo.save_pretrained, [], []

    def start_another_then_save(bilm, folder, fmt="safetensors"):
        if not started:   # the first has checked the folder and loaded its model, not yet written
            started.append(True)
            codes.append(main(["convert", str(other), str(out)]))
        return save(bilm, folder, fmt)
    monkeypatch.setattr(elmo, "save_pretrained", start_another_then_save)
    capsys.readouterr()
    assert main(["convert", "fixture", str(out)]) == 0
    assert codes == [1]
    assert f"{out} is already being written by PID" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "metadata.json", "model.safetensors"]


def test_convert_keeps_the_models_metadata(tmp_path):
    """metadata.json (how the model was trained, the text it was adapted on) was left behind:
    an experiment with the converted copy of an adapted biLM reported it as not adapted."""
    import shutil
    from elmo.cli import main
    from elmo.tasks.bilms import describe_bilm
    adapted = tmp_path / "adapted"
    shutil.copytree(elmo.model_path("fixture"), adapted)
    meta = {"adapted_on": [{"files": ["/data/tweets.txt"], "sha256": ["0" * 64]}], "extra_data": True}
    (adapted / "metadata.json").write_text(json.dumps(meta))
    for layout, out in (("safetensors", tmp_path / "native"), ("original", tmp_path / "back")):
        assert main(["convert", str(adapted if layout == "safetensors" else tmp_path / "native"), str(out),
                     "--to", layout]) == 0
        assert describe_bilm(str(out))["adapted_on"] == meta["adapted_on"]
    back = json.loads((tmp_path / "back" / "metadata.json").read_text())
    assert back == {**meta, "converted_from": str((tmp_path / "native").resolve()),
                    "files_sha256": {n: hashlib.sha256((tmp_path / "back" / n).read_bytes()).hexdigest()
                                     for n in ("options.json", "weights.hdf5")}}
    assert main(["convert", str(adapted), str(adapted)]) == 0     # into itself: its own metadata as it was
    assert json.loads((adapted / "metadata.json").read_text()) == meta
    # how a shipped source's files were stored (its softmax in float16) is not the copy's
    shipped = {**meta, "shipped": {"bilm_dtype": "float32", "softmax_dtype": "float16"}}
    (adapted / "metadata.json").write_text(json.dumps(shipped))
    assert main(["convert", str(adapted), str(tmp_path / "copy")]) == 0
    assert "shipped" not in json.loads((tmp_path / "copy" / "metadata.json").read_text())


def test_convert_carries_the_model_card(tmp_path, capsys):
    """A converted model lost its MODEL_CARD.md (the default model's data, licence and training):
    the card, README and licence files now go with the weights, in either direction."""
    from elmo.cli import main
    source = elmo.model_path("default")
    native, back = tmp_path / "native", tmp_path / "back"
    assert main(["convert", "default", str(native)]) == 0
    assert main(["convert", str(native), str(back), "--to", "original"]) == 0
    for out in (native, back):
        assert (out / "MODEL_CARD.md").read_bytes() == (source / "MODEL_CARD.md").read_bytes()
    assert main(["convert", "fixture", str(tmp_path / "fixture-native")]) == 0   # its README.md
    assert ((tmp_path / "fixture-native" / "README.md").read_text()
            == (elmo.model_path("fixture") / "README.md").read_text())
    # over a folder that holds a card already: replaced only with --overwrite
    capsys.readouterr()
    (native / "config.json").unlink()
    (native / "model.safetensors").unlink()
    (native / "metadata.json").unlink()
    (native / "MODEL_CARD.md").write_text("an old card\n")
    assert main(["convert", "default", str(native)]) == 1
    assert "already holds MODEL_CARD.md: pass --overwrite" in capsys.readouterr().err
    assert main(["convert", "default", str(native), "--overwrite"]) == 0
    assert (native / "MODEL_CARD.md").read_bytes() == (source / "MODEL_CARD.md").read_bytes()



def test_convert_leaves_a_readme_of_a_folder_without_a_model_alone(tmp_path, capsys):
    """Converting a model without a README (the default model has a card) into a folder that
    holds your own README.md and no model was refused as if it were another model's README,
    which worked before cards were carried; a card beside another model's files still is."""
    from elmo.cli import main
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("my notes\n")
    assert main(["convert", "default", str(project)]) == 0
    assert (project / "README.md").read_text() == "my notes\n"
    assert (project / "MODEL_CARD.md").is_file() and (project / "model.safetensors").is_file()
    other = tmp_path / "other"
    assert main(["convert", "fixture", str(other)]) == 0          # a model with its README.md
    (other / "config.json").unlink()
    capsys.readouterr()
    assert main(["convert", "default", str(other), "--overwrite"]) == 1
    assert "also holds README.md of the model there" in capsys.readouterr().err

def test_info_says_where_the_weights_come_from(tmp_path, capsys):
    """elmo info printed the options and sizes only: the provenance that metadata.json keeps
    (training text, start model, adapted texts, conversion) could only be read in the JSON."""
    import shutil
    from elmo.cli import main
    adapted = tmp_path / "adapted"
    shutil.copytree(elmo.model_path("fixture"), adapted)
    meta = {"trained_on": ["/runs/a/adapt_train.txt"], "steps": 13, "tokens": 260, "tokens_total": 2980,
            "adapted_from": "/runs/lm/model", "adapted_on": [{"files": ["/data/tweets.txt"]}]}
    (adapted / "metadata.json").write_text(json.dumps(meta))
    assert main(["convert", str(adapted), str(tmp_path / "native")]) == 0
    capsys.readouterr()
    assert main(["info", str(tmp_path / "native")]) == 0
    assert capsys.readouterr().out.splitlines()[-4:] == [
        "trained on: /runs/a/adapt_train.txt (13 steps, 260 tokens; 2,980 in all phases)",
        "adapted from: /runs/lm/model", "adapted on: /data/tweets.txt", f"converted from: {adapted.resolve()}"]
    assert main(["info", "fixture"]) == 0           # a metadata.json of its files' SHA-256 only: no provenance
    assert capsys.readouterr().out.splitlines()[-1].startswith("SHA-256 verified against ")   # (its record, last)


@pytest.mark.parametrize("text, message", [
    ("not json", "not readable JSON"), ("[1, 2]", "expected a JSON object, got \\[1, 2\\]"),
    ("null", "expected a JSON object, got null"),
    ('{"trained_on": "corpus.txt", "steps": 5, "tokens": 10}', "'trained_on' must be a list of files"),
    ('{"trained_on": ["a"], "steps": "many", "tokens": 10}', "'steps' must be a whole number"),
    ('{"adapted_on": "x.txt"}', "'adapted_on' must be a list"),
    ('{"warm_start": "old"}', "'warm_start' must be an object")])
def test_a_damaged_metadata_file_is_one_error_naming_it(tmp_path, capsys, text, message):
    """A hand-edited or damaged metadata.json was a traceback in elmo info and convert ('list'
    object has no attribute 'get'), JSON's message without the file's name, or read wrongly:
    trained_on "corpus.txt" was listed as the files c, o, r, p, u, s, ..."""
    import shutil
    from elmo.cli import main
    folder = tmp_path / "m"
    shutil.copytree(elmo.model_path("fixture"), folder)
    (folder / "metadata.json").write_text(text)
    for command in (["info", str(folder)], ["convert", str(folder), str(tmp_path / "out")]):
        assert main(command) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and re.search(f"metadata.json: {message}", err), err
    assert not (tmp_path / "out").exists()


def test_save_pretrained_names_a_file_where_the_folder_belongs(tmp_path):
    (tmp_path / "taken").write_text("mine\n")
    with pytest.raises(OSError, match="taken: is a file, but the model folder must be a folder"):
        elmo.save_pretrained(random_bilm(), tmp_path / "taken")   # was "File exists"
    assert (tmp_path / "taken").read_text() == "mine\n"


# ---------------------------------------------------------------------- damaged or mismatched files
def test_a_damaged_dataset_header_is_an_error_naming_the_dataset(tmp_path):
    """(h5py's KeyError 'Unable to synchronously open object' came through as a traceback; other
    damage met RuntimeError or ValueError from inside h5py.)"""
    folder = _original_copy(tmp_path)
    with h5py.File(folder / "weights.hdf5", "r") as f:
        header = h5py.h5o.get_info(f["CNN_proj/b_proj"].id).addr
    data = bytearray((folder / "weights.hdf5").read_bytes())
    data[header:header + 8] = b"\0" * 8
    (folder / "weights.hdf5").write_bytes(bytes(data))
    with pytest.raises(WeightFileError, match=r"weights.hdf5: dataset 'CNN_proj/b_proj' .*cannot be "
                                              r"read, the file is truncated or corrupt: ") as e:
        elmo.from_pretrained(folder)
    assert "\n" not in str(e.value)


def test_a_group_where_a_dataset_belongs_is_named(tmp_path):
    """(It was an AttributeError: 'Group' object has no attribute 'shape'.)"""
    folder = _original_copy(tmp_path)
    with h5py.File(folder / "weights.hdf5", "a") as f:
        del f["CNN_proj/b_proj"]
        f.create_group("CNN_proj/b_proj")
    with pytest.raises(WeightFileError, match=r"'CNN_proj/b_proj' is a group, expected a dataset"):
        elmo.from_pretrained(folder)


def test_options_with_fewer_layers_than_the_weights_are_refused(tmp_path):
    """Options (or a config.json) with one LSTM or highway layer fewer than the file holds
    loaded without a word, the extra layers dropped: another model's outputs."""
    folder = _original_copy(tmp_path / "original")
    options = json.loads((folder / "options.json").read_text())
    options["lstm"]["n_layers"] = 1
    (folder / "options.json").write_text(json.dumps(options))
    with pytest.raises(WeightFileError, match=r"weights.hdf5: dataset 'RNN_0/RNN/MultiRNNCell/Cell1/"
                                              r"LSTMCell/B' is not called for by the options \(and 5 more\)"):
        elmo.from_pretrained(folder)
    options["lstm"]["n_layers"], options["char_cnn"]["n_highway"] = 2, 1
    (folder / "options.json").write_text(json.dumps(options))
    with pytest.raises(WeightFileError, match=r"'CNN_high_1/W_carry' is not called for"):
        elmo.from_pretrained(folder)
    # Datasets outside the layout are still ignored.
    options["char_cnn"]["n_highway"] = 2
    (folder / "options.json").write_text(json.dumps(options))
    with h5py.File(folder / "weights.hdf5", "a") as f:
        f["softmax/W"] = np.zeros((3, 2), dtype=np.float32)
    assert elmo.from_pretrained(folder).options.lstm.n_layers == 2

    native = elmo.save_pretrained(random_bilm(), tmp_path / "native")
    config = json.loads((native / "config.json").read_text())
    config["lstm"]["n_layers"] = config["lstm"]["n_layers"] - 1
    (native / "config.json").write_text(json.dumps(config))
    with pytest.raises(WeightFileError, match=r"model.safetensors: tensor 'lstm.layers.1.* is not part "
                                              r"of the model config.json describes"):
        elmo.from_pretrained(native)


_KILLED_CONVERT = """
import os, sys
import elmo.weights
from elmo.cli import main
def killed(path, text):   # the process dies between the weights and their config
    os._exit(9)
elmo.weights.atomic_write_text = killed
main(["convert", "fixture", sys.argv[1]])
"""


def test_convert_killed_half_way_leaves_no_folder_and_runs_again(tmp_path, capsys):
    """elmo convert killed after the weights, before their config: OUT held model.safetensors
    alone, and the same command again was refused ("already holds model.safetensors: pass
    --overwrite"). Now a new folder is written beside OUT and renamed once whole."""
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "converted"
    root = Path(__file__).resolve().parent.parent
    env = {**__import__("os").environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _KILLED_CONVERT, str(out)], env=env, capture_output=True)
    assert done.returncode == 9
    assert not out.exists()
    from elmo.cli import main
    assert main(["convert", "fixture", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]   # (the killed run's folder is gone)
    assert {"config.json", "model.safetensors"} <= {p.name for p in out.iterdir()}
    assert elmo.from_pretrained(out).options == elmo.from_pretrained("fixture").options


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_new_folder_of_convert_has_the_permissions_of_a_new_folder(tmp_path, capsys, umask):
    """A new OUT is written in a temporary folder and renamed: made by mkdtemp, it kept mode
    0700, so no other user (a group sharing the models) could read the converted model, where
    every other folder the commands make has the umask's mode (0755 under 022)."""
    from elmo.cli import main

    old = os.umask(umask)
    try:
        assert main(["convert", "fixture", str(tmp_path / "converted")]) == 0
    finally:
        os.umask(old)
    assert (tmp_path / "converted").stat().st_mode & 0o777 == 0o777 & ~umask
    assert all(p.stat().st_mode & 0o777 == 0o666 & ~umask for p in (tmp_path / "converted").iterdir())


_KILLED_OVERWRITE = _KILLED_CONVERT.replace('main(["convert", "fixture", sys.argv[1]])',
                                            'main(["convert", "fixture", sys.argv[1], "--overwrite"])')


def test_convert_overwrite_killed_half_way_leaves_the_old_model_whole(tmp_path, capsys):
    """elmo convert --overwrite into an existing folder wrote its files one by one: killed
    after the new weights, OUT held them beside the old model's config (a mix of two models).
    Now the new folder is written beside OUT and swapped in whole; the files of OUT that
    convert does not write (a user's notes) are kept in it."""
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "converted"
    elmo.save_pretrained(random_bilm(seed=3), out)
    (out / "notes.txt").write_text("mine\n")
    (out / "runs").mkdir()
    (out / "runs" / "log.txt").write_text("a log\n")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    root = Path(__file__).resolve().parent.parent
    env = {**__import__("os").environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _KILLED_OVERWRITE, str(out)], env=env, capture_output=True)
    assert done.returncode == 9
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert torch.equal(elmo.from_pretrained(out).lstm.layers[0].bias,
                       random_bilm(seed=3).lstm.layers[0].bias)
    from elmo.cli import main
    assert main(["convert", "fixture", str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]   # (the killed run's folder is gone)
    assert (out / "notes.txt").read_text() == "mine\n" and (out / "runs" / "log.txt").read_text() == "a log\n"
    fixture = elmo.from_pretrained("fixture")
    assert torch.equal(elmo.from_pretrained(out).lstm.layers[0].bias, fixture.lstm.layers[0].bias)


def test_a_second_save_pretrained_into_one_folder_is_refused_while_the_first_writes(tmp_path, monkeypatch):
    """save_pretrained took no lock (the CLI's writers take OUT.lock): two processes saving two
    models into one folder could leave one's weights beside the other's config. The second is
    now refused, naming the first, and the folder holds the first's model alone."""
    import os

    import elmo.weights as W
    from elmo.io import OutputBusy
    out = tmp_path / "model"
    first, second = random_bilm(seed=4), random_bilm(seed=5)
    write, started, refused = W.write_safetensors, [], []

    def another_writer_starts(state, path, metadata=None):
        if not started:   # the first has begun: its weights are being written
            started.append(path)
            with pytest.raises(OutputBusy) as e:
                elmo.save_pretrained(second, out)
            refused.append(str(e.value))
        return write(state, path, metadata)
    monkeypatch.setattr(W, "write_safetensors", another_writer_starts)
    elmo.save_pretrained(first, out)
    assert len(refused) == 1
    assert refused[0].startswith(f"{out} is already being written by PID {os.getpid()}")
    assert torch.equal(elmo.from_pretrained(out).lstm.layers[0].bias, first.lstm.layers[0].bias)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]   # (the lock file is removed)


def test_a_second_save_original_to_one_pair_is_refused_while_the_first_writes(tmp_path, monkeypatch):
    """save_original took no lock where save_pretrained holds FOLDER.lock: a second writer
    between the first's weights and its options left the second's weights beside the first's
    options. The second is now refused, naming the first; the pair is the first's model."""
    import os

    import elmo.weights as W
    from elmo.io import OutputBusy
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    first, second = random_bilm(seed=4), random_bilm(seed=5)
    write, started, refused = W.atomic_write_text, [], []

    def another_writer_between_the_two_files(path, text):
        if not started:   # the first's weights are in place, its options not yet
            started.append(path)
            with pytest.raises(OutputBusy) as e:
                elmo.save_original(second, options, weights)
            refused.append(str(e.value))
        return write(path, text)
    monkeypatch.setattr(W, "atomic_write_text", another_writer_between_the_two_files)
    elmo.save_original(first, options, weights)
    assert len(refused) == 1
    assert refused[0].startswith(f"{weights} is already being written by PID {os.getpid()}")
    loaded = elmo.load_original(options, weights)
    assert torch.equal(loaded.lstm.layers[0].bias, first.lstm.layers[0].bias)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["options.json", "weights.hdf5"]   # (no lock files)
    with pytest.raises(ValueError, match="are one file"):
        elmo.save_original(first, weights, weights)


@pytest.mark.parametrize("writer", ["save_pretrained", "convert"])
def test_a_model_folder_through_a_link_takes_the_folder_s_own_lock(tmp_path, capsys, writer):
    """A model folder given through a symbolic link was locked as LINK.lock, and the same
    folder by its own path as FOLDER.lock: two writers, one through each, both wrote into
    the one folder (convert's two FOLDER.partial, one deleting the other's). The lock is now
    the folder's own, so the second is refused."""
    from elmo.cli import main
    from elmo.io import OutputBusy
    from elmo.output_lock import output_lock

    real = tmp_path / "real"
    elmo.save_pretrained(random_bilm(seed=3), real)
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    with output_lock(real):
        if writer == "save_pretrained":
            with pytest.raises(OutputBusy, match=f"^{link} is already being written"):
                elmo.save_pretrained(random_bilm(seed=4), link)
        else:
            assert main(["convert", "fixture", str(link), "--overwrite"]) == 1
            assert "is already being written" in capsys.readouterr().err
    assert torch.equal(elmo.from_pretrained(link).lstm.layers[0].bias, random_bilm(seed=3).lstm.layers[0].bias)


def test_a_config_that_is_not_the_one_saved_with_the_weights_is_refused(tmp_path, monkeypatch):
    """save_pretrained commits the weights, then config.json: a save killed between the two,
    over a model of the same shapes but another activation, loaded the new weights with the
    old options, silently. The weights now record a digest of the options they were saved
    with; the training keys kept beside them may still change. (A folder that can be swapped is
    now replaced whole; one that cannot, a mount point, still gets its files one by one.)"""
    import elmo.model_replace
    folder = tmp_path / "m"
    elmo.save_pretrained(random_bilm(seed=1, activation="relu"), folder)
    newer = random_bilm(seed=2, activation="tanh")
    real = elmo.weights.atomic_write_text

    def killed(path, text):
        if path.name == "config.json":
            raise KeyboardInterrupt   # the kill, after model.safetensors was committed
        return real(path, text)

    monkeypatch.setattr(elmo.model_replace, "swappable", lambda folder: False)
    monkeypatch.setattr(elmo.weights, "atomic_write_text", killed)
    with pytest.raises(KeyboardInterrupt):
        elmo.save_pretrained(newer, folder)
    monkeypatch.setattr(elmo.weights, "atomic_write_text", real)
    with pytest.raises(WeightFileError, match="not the model options model.safetensors was saved with"):
        elmo.from_pretrained(folder)

    elmo.save_pretrained(newer, folder)   # saved whole: loads, and a training key may be added
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "n_tokens_vocab": 7}))
    ids = batch_to_ids([["a", "bank"]])
    with torch.no_grad():
        assert torch.equal(elmo.from_pretrained(folder)(ids)["activations"][-1], newer(ids)["activations"][-1])
    config["lstm"]["cell_clip"] = 1.5   # an edited LSTM setting is refused too
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(WeightFileError, match="not the model options"):
        elmo.from_pretrained(folder)


def test_a_native_model_file_is_opened_once_for_its_weights_and_their_options_record(tmp_path, monkeypatch):
    # (the options record in its metadata was read by opening the file a second time)
    import safetensors
    import safetensors.torch
    folder = tmp_path / "m"
    elmo.save_pretrained(random_bilm(), folder)
    opened = []
    real = safetensors.safe_open

    def counted(path, *args, **kwargs):
        opened.append(os.path.basename(path))
        return real(path, *args, **kwargs)
    for module in (safetensors, safetensors.torch):
        monkeypatch.setattr(module, "safe_open", counted)
    elmo.from_pretrained(folder)
    assert opened == ["model.safetensors"]


def test_saving_into_a_bundled_models_folder_is_refused(tmp_path):
    # save_pretrained(bilm, elmo.model_path("default")) wrote config.json + model.safetensors into
    # the package, beside the bundled original layout: from_pretrained("default") loaded the
    # saved model from then on, in every program of the installation, without a word
    from elmo.io import OutputError
    bilm = random_bilm()
    fixture, default = elmo.model_path("fixture"), elmo.model_path("default")
    files = lambda: {p: p.stat().st_mtime_ns for folder in (fixture, default) for p in folder.rglob("*")}
    before = files()
    try:
        with pytest.raises(OutputError, match=r"inside the folder of the bundled model 'fixture'"):
            elmo.save_pretrained(bilm, fixture)
        with pytest.raises(OutputError, match=r"inside the folder of the bundled model 'fixture'"):
            elmo.save_pretrained(bilm, fixture / "copy", fmt="original")
        with pytest.raises(OutputError, match=r"inside the folder of the bundled model 'default'"):
            save_original(bilm, default / "new-options.json", tmp_path / "weights.hdf5")
    finally:   # (without the check new files were written: leave the package as it was)
        for path in sorted(set(files()) - set(before), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
    assert files() == before


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_check_finite_finds_nan_and_inf_in_every_float_dtype_and_passes_its_extremes(dtype):
    """The CPU check reads the tensor through numpy, and the 16-bit floats by their exponent
    bits: every non-finite value is found at its index, and the largest finite ones pass."""
    from elmo.weights import WeightFileError, check_finite
    x = torch.randn(40, 6).to(dtype)
    info = torch.finfo(dtype)
    x[0, 0], x[0, 1], x[0, 2] = info.max, info.min, info.tiny   # (finite: no error)
    check_finite(x, "x")
    check_finite(x.t(), "x")                                     # (a strided view)
    for value in (float("nan"), float("inf"), float("-inf")):
        y = x.clone()
        y[7, 3] = y[9, 1] = value
        with pytest.raises(WeightFileError, match=r"^y holds 2 non-finite values \(NaN or inf\), the first at index \(7, 3\)$"):
            check_finite(y, "y")
        with pytest.raises(WeightFileError, match=r"the first at index \(1, 9\)$"):
            check_finite(y.t(), "y")
    y = x.clone().requires_grad_(dtype.is_floating_point)
    check_finite(y, "y")
    for value in (torch.tensor(float("nan"), dtype=dtype), np.array(float("inf"))):   # (0-dim)
        with pytest.raises(WeightFileError, match=r"^z holds 1 non-finite values \(NaN or inf\), the first at index \(\)$"):
            check_finite(value, "z")


def test_check_finite_of_a_float_numpy_lacks_is_its_error_not_a_typeerror():
    """A float8 tensor (which numpy has no type for) was a bare TypeError's traceback."""
    from elmo.weights import WeightFileError, check_finite
    dtype = getattr(torch, "float8_e5m2", None)
    if dtype is None:
        pytest.skip("this torch has no float8")
    x = torch.randn(10, 4)
    check_finite(x.to(dtype), "x")
    x[3, 1] = float("nan")
    with pytest.raises(WeightFileError, match=r"^y holds 1 non-finite values \(NaN or inf\), the first at index \(3, 1\)$"):
        check_finite(x.to(dtype), "y")


def test_info_says_whether_a_folders_weights_record_their_checksums(tmp_path, capsys):
    """A user cannot tell whether a model is checked when loaded (a file saved before the
    checksums were kept loads unchecked): `elmo info` says so for each weight file."""
    from elmo.cli import main
    bilm = elmo.from_pretrained("fixture")
    elmo.save_pretrained(bilm, tmp_path / "native")
    elmo.save_pretrained(bilm, tmp_path / "original", fmt="original")
    shutil.copytree(elmo.model_path("fixture"), tmp_path / "released")
    with h5py.File(tmp_path / "original" / "weights.hdf5", "a") as f:   # (one record lost)
        del f["CNN_proj/b_proj"].attrs["elmo_crc32"]
    expected = {"native": "model.safetensors: 0.42 MB, stored as float32, CRC-32 recorded",
                "original": "weights.hdf5: 0.45 MB, stored as float32, CRC-32 recorded for 32 of its 33 datasets",
                "released": "weights.hdf5: 0.45 MB, stored as float32, no CRC-32 in the file (see the SHA-256 line)"}
    for folder, line in expected.items():
        capsys.readouterr()
        if folder == "original":   # (a dataset without its record loads: files of other tools have none)
            assert elmo.from_pretrained(tmp_path / folder).output_dim == bilm.output_dim
        assert main(["info", str(tmp_path / folder)]) == 0
        assert line in capsys.readouterr().out.splitlines()


def _stored_elsewhere_or_unwritten(h5, name, values, folder, how):
    """Dataset ``name`` of the open file ``h5`` made again as ``how`` says, its values (all or
    some) not stored in the file: each is valid HDF5 that reads without an error."""
    if how == "never written":   # (a writer that died between create_dataset and its write)
        h5.create_dataset(name, shape=values.shape, dtype=values.dtype)
    elif how == "partly written":
        h5.create_dataset(name, shape=values.shape, dtype=values.dtype, chunks=(1, values.shape[1]))[0] = values[0]
    elif how == "external raw file":   # (a file shorter than the values reads as zeros past its end)
        (folder / "raw.bin").write_bytes(values.tobytes()[:8])
        h5.create_dataset(name, shape=values.shape, dtype=values.dtype,
                          external=[(str(folder / "raw.bin"), 0, values.nbytes)])
    elif how == "virtual":   # (a missing source reads as zeros)
        layout = h5py.VirtualLayout(shape=values.shape, dtype=values.dtype)
        layout[...] = h5py.VirtualSource(str(folder / "gone.hdf5"), name, shape=values.shape)
        h5.create_virtual_dataset(name, layout)
    else:   # "link to another file": whatever that file holds now, which no record vouches for
        with h5py.File(folder / "other.hdf5", "w") as other:
            other[name] = values
        h5[name] = h5py.ExternalLink(str(folder / "other.hdf5"), name)


@pytest.mark.parametrize("how", ["never written", "partly written", "external raw file", "virtual",
                                 "link to another file"])
def test_a_dataset_whose_values_are_not_all_in_the_file_is_refused(tmp_path, how):
    """HDF5 reads values that were never written, or that lie in a file that is missing or
    short, as the dataset's fill value (zeros) without an error: such a weight file (one whose
    writer died between a dataset's creation and its write; one whose values lie in other
    files) loaded a model of zero weights, silently. Each is refused, naming the dataset."""
    folder = _original_copy(tmp_path / "model")
    with h5py.File(folder / "weights.hdf5", "a") as h5:
        values = h5["CNN_proj/W_proj"][...]
        del h5["CNN_proj/W_proj"]
        _stored_elsewhere_or_unwritten(h5, "CNN_proj/W_proj", values, folder, how)
    with pytest.raises(WeightFileError, match=r"weights.hdf5: dataset 'CNN_proj/W_proj' ") as e:
        elmo.from_pretrained(folder)
    assert "\n" not in str(e.value)


def test_options_of_a_dictionary_model_beside_hdf5_weights_are_named(tmp_path):
    """An options.json with a char_vocabulary section (a dictionary model's, whose config.json
    was copied beside weights in the original layout) failed inside torch: "The size of tensor
    a (261) must match the size of tensor b (262)". The original layout holds no such model."""
    folder = _original_copy(tmp_path)
    options = json.loads((folder / "options.json").read_text())
    options["char_vocabulary"] = {"n_characters": 260}
    (folder / "options.json").write_text(json.dumps(options))
    with pytest.raises(WeightFileError, match=r"weights.hdf5: .*char_vocabulary") as e:
        elmo.from_pretrained(folder)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("checksums", [True, False])
def test_a_native_weight_file_replaced_while_it_is_opened_is_named_so(tmp_path, monkeypatch, checksums):
    """safetensors opens the file twice, for its header (the metadata, the tensors' places) and
    for its data: a save that replaced the file between the two gave one file's header with
    the other's values. Found by a reader racing a writer: "damaged: tensor ... does not hold
    the values its checksum records", told to restore a file that was whole; a file without
    checksums loaded the new weights under the old file's options digest, which the old
    config.json passed (here: another cell clip, silently)."""
    from safetensors.torch import load_file, save_file
    from elmo import BiLM, ElmoOptions
    old = random_bilm(seed=1)
    other = old.options.to_dict()
    other["lstm"]["cell_clip"] = 1.0
    new = BiLM(ElmoOptions.from_dict(other))
    new.load_state_dict(random_bilm(seed=2).state_dict())
    elmo.save_pretrained(old, tmp_path / "old")
    elmo.save_pretrained(new, tmp_path / "new")
    for path in (tmp_path / "old" / "model.safetensors", tmp_path / "new" / "model.safetensors"):
        if not checksums:   # (written before the checksums were recorded)
            header, _ = _native_header(path)
            metadata = {k: v for k, v in header["__metadata__"].items() if k != "tensor_crc32"}
            save_file(load_file(str(path)), str(path), metadata=metadata)
    opened_by_path = torch.UntypedStorage.from_file

    def replaced_first(filename, *args, **kwargs):   # (the new save lands between the two opens)
        if (tmp_path / "new" / "model.safetensors").exists():
            os.replace(tmp_path / "new" / "model.safetensors", tmp_path / "old" / "model.safetensors")
        return opened_by_path(filename, *args, **kwargs)

    monkeypatch.setattr(torch.UntypedStorage, "from_file", replaced_first)
    with pytest.raises(WeightFileError, match=r"old/model.safetensors: replaced while it was being read"):
        elmo.from_pretrained(tmp_path / "old")


def test_an_hdf5_weight_file_replaced_while_it_is_loaded_is_named_so(tmp_path, monkeypatch):
    """load_original reads the arrays, builds the model, then opens the file again for the dtype
    it records: a save_original of a bfloat16 model over it meanwhile had the float32 weights
    read rounded to bfloat16, silently (the options digest agreed: one model's options)."""
    from elmo import weights
    bilm = random_bilm()
    save_original(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    save_original(bilm.to(torch.bfloat16), tmp_path / "new" / "options.json", tmp_path / "new" / "weights.hdf5")
    read = weights.read_original_arrays

    def replaced_after_reading(path, options):   # (the save lands once the arrays are read)
        arrays = read(path, options)
        os.replace(tmp_path / "new" / "weights.hdf5", tmp_path / "weights.hdf5")
        return arrays

    monkeypatch.setattr(weights, "read_original_arrays", replaced_after_reading)
    with pytest.raises(WeightFileError, match=r"weights.hdf5: replaced while it was being read"):
        load_original(tmp_path / "options.json", tmp_path / "weights.hdf5")


@pytest.mark.parametrize("value", [["0" * 64, "1" * 64], np.array([1, 2])])
def test_an_options_digest_attribute_that_is_an_array_is_named(tmp_path, value):
    """An elmo_options_sha256 attribute holding an array (a damaged or hand-made file) was
    numpy's "The truth value of an array with more than one element is ambiguous"."""
    bilm = random_bilm()
    save_original(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    with h5py.File(tmp_path / "weights.hdf5", "a") as h5:
        h5.attrs["elmo_options_sha256"] = value
    with pytest.raises(WeightFileError, match=r"weights.hdf5: its 'elmo_options_sha256' attribute holds "):
        load_original(tmp_path / "options.json", tmp_path / "weights.hdf5")
