"""What ``elmo embed`` finds at OUTPUT before it starts, and what the finished file says."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from elmo.embedding import SettingsMismatch, embed_file


def test_an_hdf5_file_that_embed_did_not_write_is_named_as_such(tmp_path):
    # Any other HDF5 file (the model's weights, say) was "written by a different command (it
    # differs in: batch_size, dtype, ...)", with the advice to rerun that command to resume
    inp = tmp_path / "in.txt"
    inp.write_text("the bank .\n", encoding="utf-8")
    out = tmp_path / "weights.hdf5"
    with h5py.File(out, "w") as f:
        f["w"] = np.ones(3)
    with pytest.raises(SettingsMismatch, match="is not an output of elmo embed") as e:
        embed_file(inp, out, "fixture")
    assert "differs in" not in str(e.value)
    with h5py.File(out, "r") as f:   # (left as it was)
        assert list(f) == ["w"]


def test_mean_pooling_of_float16_vectors_does_not_overflow():
    # float16 vectors of 10,000 tokens of 10.0 summed to 100,000, past float16's 65504: the
    # mean was inf
    from elmo.embedding import masked_pool

    vectors = torch.full((2, 10_000, 4), 10.0, dtype=torch.float16)
    vectors[1, ::2] = 0.0
    mask = torch.ones(2, 10_000, dtype=torch.bool)
    mask[1, 5_000:] = False
    pooled = masked_pool(vectors, mask, "mean")
    assert pooled.dtype == torch.float16
    assert torch.equal(pooled.float(), torch.tensor([[10.0] * 4, [5.0] * 4]))


def test_a_layer_selection_made_directly_is_checked_and_keeps_its_gamma(tmp_path):
    from elmo.embedding import LayerSelection

    inp = tmp_path / "in.txt"
    inp.write_text("the bank .\n", encoding="utf-8")
    mix = LayerSelection("mix", (0.2, 0.3, 0.5))
    # gamma=2.0 beside a LayerSelection was dropped: the file held the gamma-1 mix, recorded as 1.0
    with pytest.raises(ValueError, match="gamma comes from the LayerSelection"):
        embed_file(inp, tmp_path / "o.hdf5", "fixture", layers=mix, gamma=2.0)
    assert not (tmp_path / "o.hdf5").exists()
    with pytest.raises(ValueError, match="kind must be all, top, average or mix"):
        LayerSelection("bogus")   # (ran as a mix, and stopped in tensordot)
    with pytest.raises(ValueError, match="apply to a mix"):
        LayerSelection("top", gamma=3.0)   # (recorded gamma 3.0, vectors of gamma 1)
    with pytest.raises(ValueError, match="finite"):
        LayerSelection("mix", (1.0, 1.0, 1.0), gamma=float("nan"))
    assert LayerSelection.parse(LayerSelection("mix", (1.0, 1.0, 1.0), 2.0), 2.0).gamma == 2.0


def test_embed_file_takes_the_dtypes_embed_sentences_takes(tmp_path):
    # numpy's dtype("float16") passed the check and stopped json.dumps of the settings ("Object
    # of type Float16DType is not JSON serializable"); a torch dtype was refused

    inp = tmp_path / "in.txt"
    inp.write_text("the bank .\n\nby the river\n", encoding="utf-8")
    named = embed_file(inp, tmp_path / "named.hdf5", "fixture", dtype="float16", layers="top")
    for i, dtype in enumerate([np.dtype("float16"), torch.float16]):
        out = embed_file(inp, tmp_path / f"{i}.hdf5", "fixture", dtype=dtype, layers="top")
        with h5py.File(out, "r") as f, h5py.File(named, "r") as g:
            assert f.attrs["settings"] == g.attrs["settings"] and f["0"].dtype == np.float16
            assert all(np.array_equal(f[k][()], g[k][()]) for k in ("0", "1", "2"))
    with pytest.raises(ValueError, match="dtype must be float32 or float16"):
        embed_file(inp, tmp_path / "x.hdf5", "fixture", dtype=np.float64)


def test_numpy_settings_are_recorded_and_a_string_switch_is_refused(tmp_path):
    # numpy counts and bools (a config read by numpy or pandas) stopped json.dumps of the
    # settings once the model was loaded; sentence_keys="false" was true

    inp = tmp_path / "in.txt"
    inp.write_text("the bank .\nby the river\n", encoding="utf-8")
    out = embed_file(inp, tmp_path / "o.hdf5", "fixture", cache_min_count=np.int64(1),
                     cache_sample_lines=np.int64(5), sort_by_length=np.bool_(False),
                     forget_sentences=np.bool_(True))
    with h5py.File(out, "r") as f:
        assert "sentence_to_index" not in f
        settings = json.loads(f.attrs["settings"])
    assert settings["token_cache"][0] == 1 and settings["sort_by_length"] is False
    with pytest.raises(TypeError, match="sentence_keys must be True or False"):
        embed_file(inp, tmp_path / "s.hdf5", "fixture", sentence_keys="false")
    assert not (tmp_path / "s.hdf5").exists()


def test_an_output_named_with_glob_characters_deletes_only_its_own_temporary_files(tmp_path):
    # "out[12].hdf5" was a glob pattern: the run deleted the temporary files of out1.hdf5 and
    # out2.hdf5 (other runs, under way, whose locks it does not hold) and left its own
    inp = tmp_path / "in.txt"
    inp.write_text("the bank .\n", encoding="utf-8")
    others = [tmp_path / ".out1.hdf5.tmp-4242", tmp_path / ".out2.hdf5.tmp-4243"]
    for other in others:
        other.write_bytes(b"another run's file")
    stale = tmp_path / ".out[12].hdf5.tmp-4244"   # (a killed run's, of this output)
    stale.write_bytes(b"")
    out = embed_file(inp, tmp_path / "out[12].hdf5", "fixture")
    assert all(other.read_bytes() == b"another run's file" for other in others)
    assert not stale.exists()
    with h5py.File(out, "r") as f:
        assert f["0"].shape[1] == 3
