"""experiments/similarity_layer_difference.py: two layers' rho on the same pairs, differenced
on the same bootstrap draws."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from elmo.correlation import spearman
from tests.conftest import load_script, side_by_side

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "similarity_layer_difference.py"


def _script():
    return load_script(SCRIPT, "similarity_layer_difference")


def test_the_difference_is_the_two_rhos_difference_on_paired_draws():
    rng = np.random.default_rng(3)
    scores = rng.normal(size=60)
    a = scores + rng.normal(size=60)
    b = scores + 3 * rng.normal(size=60)
    res = _script().rho_difference(a, b, scores, seed=0, n_resamples=200)
    assert res["diff"] == pytest.approx(spearman(a, scores) - spearman(b, scores), abs=1e-12)
    assert res["low"] <= res["diff"] <= res["high"]
    # the same vector on both sides differs by exactly 0 in every draw only when the draws are shared
    same = _script().rho_difference(a, a.copy(), scores, seed=0, n_resamples=200)
    assert same == {"diff": 0.0, "low": 0.0, "high": 0.0}


def test_a_perfect_and_a_reversed_ranking_differ_by_two_in_every_draw():
    scores = np.arange(20, dtype=np.float64)
    res = _script().rho_difference(scores ** 3, -scores, scores, seed=1, n_resamples=100)
    assert res["diff"] == pytest.approx(2.0, abs=1e-12)
    assert res["low"] == pytest.approx(2.0, abs=1e-12) and res["high"] == pytest.approx(2.0, abs=1e-12)


def test_a_constant_side_gives_no_difference_and_the_rows_cover_every_layer_pair():
    script = _script()
    scores = np.arange(10, dtype=np.float64)
    assert script.rho_difference(np.ones(10), scores, scores, n_resamples=10) == {
        "diff": None, "low": None, "high": None}
    cos = np.stack([scores, -scores, scores ** 2])
    rows = script.layer_differences(cos, scores, control=cos[::-1].copy(), n_resamples=10)
    assert [r["name"] for r in rows] == ["layer 1 - layer 0", "layer 2 - layer 0", "layer 2 - layer 1",
                                         "layer 0 - untrained layer 0", "layer 1 - untrained layer 1",
                                         "layer 2 - untrained layer 2"]
    assert rows[0]["diff"] == pytest.approx(-2.0, abs=1e-12)
    assert rows[4]["diff"] == pytest.approx(0.0, abs=1e-12)   # layer 1 against itself


def test_the_script_runs_on_a_model_and_a_pair_file(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("cat\tdog\t8.1\ncar\ttree\t1.2\nking\tqueen\t7.4\nsun\tmoon\t6.3\n"
                     "book\tidea\t2.5\nhouse\thome\t9.0\n", encoding="utf-8")
    ok, bad = side_by_side([[sys.executable, str(SCRIPT), "fixture", "--sets", str(pairs), "--resamples", "50"],
                            [sys.executable, str(SCRIPT), "fixture", "--sets", str(tmp_path / "none.tsv")]])
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.splitlines()
    assert lines[0].startswith(f"{pairs} (6 pairs): rho per layer ")
    assert any(line.strip().startswith("layer 1 - layer 0: ") for line in lines)
    assert any(line.strip().startswith("layer 0 - untrained layer 0: ") for line in lines)
    assert bad.returncode == 2 and "none.tsv" in bad.stderr and "Traceback" not in bad.stderr
