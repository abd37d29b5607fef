"""elmo.tasks.paired: two variants paired by seed, with a Student-t interval."""
from __future__ import annotations

import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from elmo.tasks.paired import difference_text, paired_difference, t_critical

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "paired_difference.py"


@pytest.mark.parametrize("df, value", [(1, 12.7062), (2, 4.3027), (3, 3.1824), (4, 2.7764),
                                       (5, 2.5706), (9, 2.2622), (30, 2.0423)])
def test_t_critical_matches_the_t_table(df, value):
    assert t_critical(df) == pytest.approx(value, abs=1e-4)


def test_t_critical_approaches_the_normal_and_rejects_bad_input():
    assert t_critical(2000) == pytest.approx(1.9600, abs=2e-3)
    assert t_critical(4, level=0.99) == pytest.approx(4.6041, abs=1e-4)
    for bad in (0, 2.5):
        with pytest.raises(ValueError, match="degrees of freedom"):
            t_critical(bad)
    with pytest.raises(ValueError, match="level"):
        t_critical(3, level=1.0)


def _results(rows):
    return {"runs": [{"task": t, "variant": v, "seed": s, "test": x} for t, v, s, x in rows]}


def test_paired_difference_pairs_by_seed_and_ignores_unpaired_seeds():
    res = _results([("pos", "a", 1, 90.0), ("pos", "a", 2, 91.0), ("pos", "a", 3, 93.0),
                    ("pos", "b", 1, 89.0), ("pos", "b", 2, 89.5), ("pos", "b", 3, 90.0),
                    ("pos", "b", 4, 10.0), ("ner", "a", 1, 0.0)])
    d = paired_difference(res, "pos", "a", "b")
    diffs = [1.0, 1.5, 3.0]
    half = 4.3027 * statistics.stdev(diffs) / math.sqrt(3)
    assert d["seeds"] == 3 and d["mean"] == pytest.approx(statistics.fmean(diffs))
    assert d["low"] == pytest.approx(d["mean"] - half, abs=1e-3)
    assert d["high"] == pytest.approx(d["mean"] + half, abs=1e-3)
    assert d["t"] == pytest.approx(d["mean"] / (statistics.stdev(diffs) / math.sqrt(3)))
    assert d["a_mean"] == pytest.approx(91.333333) and d["b_mean"] == pytest.approx(89.5)
    assert difference_text(d).startswith("+1.83 ± 1.04 (3 seeds), 95% interval -0.75 to +4.42, paired t 3.05")


def test_one_seed_has_no_interval_and_no_spread_no_t():
    one = paired_difference(_results([("t", "a", 1, 2.0), ("t", "b", 1, 1.0)]), "t", "a", "b")
    assert one["std"] is None and one["low"] is None and difference_text(one) == "+1.00 (1 seed, no interval)"
    flat = paired_difference(_results([("t", "a", 1, 2.0), ("t", "b", 1, 1.0),
                                       ("t", "a", 2, 3.0), ("t", "b", 2, 2.0)]), "t", "a", "b")
    assert flat["std"] == 0.0 and flat["t"] is None and flat["low"] == flat["high"] == 1.0


def test_missing_variant_or_no_shared_seed_is_a_clear_error():
    res = _results([("t", "a", 1, 2.0), ("t", "b", 2, 1.0)])
    with pytest.raises(ValueError, match=r"no run of variant 'c' on task 't' \(variants: a, b\)"):
        paired_difference(res, "t", "a", "c")
    with pytest.raises(ValueError, match="share no seed"):
        paired_difference(res, "t", "a", "b")


def test_script_prints_each_pair_and_fails_cleanly(tmp_path):
    import json
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_results([("t", "a", 1, 2.0), ("t", "b", 1, 1.0),
                                         ("t", "a", 2, 4.0), ("t", "b", 2, 1.0)])))
    ok = subprocess.run([sys.executable, str(SCRIPT), str(path), "t", "a", "b", "--pair", "b", "a"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0].startswith("t: a - b: +2.00 ± 1.41 (2 seeds)")
    assert ok.stdout.splitlines()[1].startswith("t: b - a: -2.00 ± 1.41 (2 seeds)")
    bad = subprocess.run([sys.executable, str(SCRIPT), str(path), "t", "a", "x"], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith("error: no run of variant 'x'")
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize("level, named", [(0.95, "95% interval"), (0.975, "97.5% interval"),
                                          (0.999, "99.9% interval"), (0.5, "50% interval")])
def test_the_interval_is_named_by_the_level_it_was_computed_at(level, named):
    """The text rounded the level to a whole percent: a 97.5% interval read '98% interval'."""
    res = _results([("t", "a", 1, 2.0), ("t", "b", 1, 1.0), ("t", "a", 2, 4.0), ("t", "b", 2, 1.0)])
    text = difference_text(paired_difference(res, "t", "a", "b", level=level), level)
    assert f"(2 seeds), {named} " in text


def _regression_results():
    """Runs of a regression task: Pearson's r as ``test``, Spearman's rho in ``other_metrics``."""
    rows = [("a", 1, 70.0, 71.0), ("a", 2, 72.0, 74.0), ("b", 1, 69.0, 70.5), ("b", 2, 70.0, 70.0)]
    return {"runs": [{"task": "r", "metric": "pearson", "variant": v, "seed": s, "test": p,
                      "other_metrics": {"spearman": rho}} for v, s, p, rho in rows]}


def test_another_recorded_metric_is_paired_by_seed_and_an_unrecorded_one_is_named():
    res = _regression_results()
    pearson = paired_difference(res, "r", "a", "b")
    assert pearson["mean"] == pytest.approx(1.5) and pearson["std"] == pytest.approx(math.sqrt(0.5))
    assert paired_difference(res, "r", "a", "b", metric="pearson")["mean"] == pytest.approx(1.5)
    rho = paired_difference(res, "r", "a", "b", metric="spearman")
    assert rho["mean"] == pytest.approx(2.25)                    # (0.5 + 4.0) / 2
    assert rho["a_mean"] == pytest.approx(72.5) and rho["b_mean"] == pytest.approx(70.25)
    with pytest.raises(ValueError, match=r"record no metric 'kendall' \(they have: pearson, spearman\)"):
        paired_difference(res, "r", "a", "b", metric="kendall")


def test_script_takes_the_metric_by_name(tmp_path):
    import json
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_regression_results()))
    ok = subprocess.run([sys.executable, str(SCRIPT), str(path), "r", "a", "b", "--metric", "spearman"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("r (spearman): a - b: +2.25 ± 2.47 (2 seeds)")
    bad = subprocess.run([sys.executable, str(SCRIPT), str(path), "r", "a", "b", "--metric", "kendall"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith("error: the runs of 'a' on task 'r' record no metric")
    assert "Traceback" not in bad.stderr


def test_a_difference_that_rounds_to_zero_is_shown_without_a_minus():
    # (-0.001 read "-0.00": a loss the numbers do not show); its interval's bounds keep theirs
    one = {"mean": -0.001, "std": None, "seeds": 1, "low": None, "high": None, "t": None}
    assert difference_text(one) == "+0.00 (1 seed, no interval)"
    three = {"mean": -0.001, "std": 0.02, "seeds": 3, "low": -0.05, "high": 0.048, "t": -0.09}
    assert difference_text(three).startswith("+0.00 ± 0.02 (3 seeds), 95% interval -0.05 to +0.05")
