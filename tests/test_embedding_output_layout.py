"""What ``elmo embed`` finds at OUTPUT before it starts, and what the finished file says."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

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
