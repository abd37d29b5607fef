"""What ``elmo embed`` finds at OUTPUT before it starts, and what the finished file says."""
from __future__ import annotations

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
