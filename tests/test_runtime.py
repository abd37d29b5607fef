"""elmo.runtime: the one place torch's thread count is set."""
from __future__ import annotations

import pytest
import torch

from elmo.runtime import set_threads, threads


def test_set_threads_and_keep():
    assert set_threads(2) == 2 == torch.get_num_threads()
    assert set_threads(None) == 2 and set_threads(0) == 2  # unset: torch's setting stays
    with pytest.raises(ValueError, match="threads: must be a positive number, got -3"):
        set_threads(-3)


def test_threads_block_restores_also_on_error():
    set_threads(1)
    with threads(2) as n:
        assert n == 2 == torch.get_num_threads()
    assert torch.get_num_threads() == 1
    with pytest.raises(RuntimeError, match="boom"):
        with threads(3):
            raise RuntimeError("boom")
    assert torch.get_num_threads() == 1
    with threads(None) as n:
        assert n == 1
