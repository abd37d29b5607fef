"""The summary of an experiment's runs: per (task, variant), the test and dev scores' mean
and spread over seeds, and the gain over the baseline paired by seed (:func:`summarise`,
what ``results.md`` and ``experiment-table`` show).
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Sequence

from .experiment_config import ExperimentConfig, baseline_name
from .paired import paired_difference, sample_std


def _stats(values: List[Optional[float]]) -> Dict[str, float]:
    """Count, mean and sample standard deviation; NaN where undefined (no value; for the
    spread, one value; or a NaN among them: the dev score of a task without a dev set, which
    a record read back from results.json holds as None, strict JSON's NaN)."""
    numbers = [float("nan") if v is None else v for v in values]
    mean = statistics.fmean(numbers) if numbers else float("nan")
    return {"n": len(numbers), "mean": mean, "std": sample_std(numbers)}


def _means(values: Sequence[Dict[str, float]]) -> Dict[str, float]:
    """name -> the mean over runs of each name's value in ``values`` (one dict per run; a
    run without the name does not count)."""
    names = sorted({k for v in values for k in v})
    return {k: _stats([v[k] for v in values if k in v])["mean"] for k in names}


def _gain_over(runs: List[dict], task: str, variant: str, base: str) -> Dict[str, float]:
    """``variant``'s gain over ``base`` on ``task``, paired by seed
    (:func:`~elmo.tasks.paired.paired_difference`): ``gain_mean``, ``gain_std``, ``gain_seeds``,
    the paired t ``gain_t`` and the 95% interval ``gain_low`` to ``gain_high``; NaN where
    undefined (one seed, zero spread, or no baseline run to pair with: 0 seeds)."""
    nan = float("nan")
    try:
        d = paired_difference({"runs": runs}, task, variant, base)
    except ValueError:  # the baseline has not run (yet) on this task, or shares no seed
        return {"gain_mean": nan, "gain_std": nan, "gain_seeds": 0, "gain_t": nan,
                "gain_low": nan, "gain_high": nan}
    mean, seeds = d["mean"], d["seeds"]
    assert mean is not None and seeds is not None     # (paired_difference always sets both)
    out: Dict[str, float] = {"gain_mean": mean, "gain_seeds": seeds}
    for k in ("std", "t", "low", "high"):
        v = d[k]
        out[f"gain_{k}"] = nan if v is None else v
    return out


def summarise(runs: List[dict], cfg: ExperimentConfig) -> List[dict]:
    """One row per (task, variant): test mean and std over seeds, dev mean, and the gain over
    the baseline paired by seed (mean and std of the per-seed differences, paired t and 95%
    interval). No row ever averages different tasks."""
    base = baseline_name(cfg)
    rows = []
    tasks = []
    for r in runs:
        if r["task"] not in tasks:
            tasks.append(r["task"])
    for task in tasks:
        for v in cfg.variants:
            rs = [r for r in runs if r["task"] == task and r["variant"] == v.name]
            if not rs:
                continue
            test = _stats([r["test"] for r in rs])
            row = {"task": task, "metric": rs[0]["metric"], "variant": v.name,
                   "elmo": rs[0]["elmo"] and {k: val for k, val in rs[0]["elmo"].items()
                                              if k != "mix_weights"},
                   "seeds": sorted(r["seed"] for r in rs),
                   "test_mean": test["mean"], "test_std": test["std"],
                   "dev_mean": _stats([r["dev"] for r in rs])["mean"],
                   "seconds": sum(r["seconds"] for r in rs)}
            # a graded task's other correlation, never mixed with its metric; further test
            # sets' metric, and a graded task's other correlation there ("set: metric")
            flat = [{f"{k}: {m}": v for k, ms in r.get("extra_tests_other_metrics", {}).items()
                     for m, v in ms.items()} for r in rs]
            for key, values in (("other_metrics", [r.get("other_metrics", {}) for r in rs]),
                                ("extra_tests", [r.get("extra_tests", {}) for r in rs]),
                                ("extra_tests_other_metrics", flat)):
                means = _means(values)
                if means:
                    row[f"{key}_mean"] = means
            if v.name != base:
                row.update(_gain_over(runs, task, v.name, base))
            rows.append(row)
    return rows
