"""Two variants of one experiment compared seed by seed: the mean difference of their test
metric with a 95% Student-t interval.

Every variant of a task runs on the same split and seeds, so ``variant A - variant B`` can be
paired by seed, as the gain over the baseline is in ``results.md``. This answers the paper's
ablation questions with an interval: all layers against the last one (Table 2), ELMo at the
input against the output (Table 3)::

    python experiments/paired_difference.py experiments/results/pos/results.json pos \\
        elmo-input last-only
"""
from __future__ import annotations

import math
import statistics
from typing import Dict, List, Optional


def sample_std(values: List[float]) -> float:
    """The sample standard deviation; NaN where it is undefined: fewer than two values, or a
    NaN among them (``statistics.stdev`` raises an AttributeError on NaN)."""
    if len(values) < 2 or any(math.isnan(v) for v in values):
        return float("nan")
    return statistics.stdev(values)


def _t_abs_probability(x: float, df: int) -> float:
    """P(|T| <= x) for Student's t with an integer ``df`` >= 1, in closed form
    (Abramowitz and Stegun 26.7.3 and 26.7.4: a finite sum in cos(theta), theta = atan(x/sqrt(df)))."""
    theta = math.atan(x / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2:                      # odd: 2/pi * (theta + sin(theta) * (cos + 2/3 cos^3 + ...))
        term = math.cos(theta)
        total = 0.0 if df == 1 else term
        for k in range(3, df - 1, 2):           # next term: (k-1)/k * cos^2 * previous
            term *= (k - 1) / k * c2
            total += term
        return 2.0 / math.pi * (theta + math.sin(theta) * total)
    term, total = 1.0, 1.0          # even: sin(theta) * (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
    for k in range(2, df - 1, 2):
        term *= (k - 1) / k * c2
        total += term
    return math.sin(theta) * total


def t_critical(df: int, level: float = 0.95) -> float:
    """The two-sided critical value of Student's t: P(|T| <= value) = ``level``
    (4.303 for 2 degrees of freedom, 2.776 for 4, 2.262 for 9 at 95%)."""
    if df < 1 or int(df) != df:
        raise ValueError(f"degrees of freedom must be a positive integer, got {df}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    low, high = 0.0, 1.0
    while _t_abs_probability(high, int(df)) < level:
        high *= 2.0
    for _ in range(200):            # bisection: the probability rises monotonically in x
        mid = 0.5 * (low + high)
        if _t_abs_probability(mid, int(df)) < level:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


def _value(value) -> float:
    # (None: a graded run's undefined correlation, NaN as JSON holds it; its gain is NaN too)
    return float("nan") if value is None else float(value)


def _test_by_seed(runs: List[dict], task: str, variant: str, metric: Optional[str] = None) -> Dict[int, float]:
    """Each seed's test score of ``variant`` on ``task``: the task's own metric (``test``), or
    with ``metric`` the one of that name (the run's own, or one of its ``other_metrics``, as a
    regression task records Spearman's rho beside Pearson's r)."""
    found = {}
    for r in runs:
        if r["task"] != task or r["variant"] != variant:
            continue
        if metric is None or metric == r.get("metric"):
            found[r["seed"]] = _value(r["test"])
        elif metric in (r.get("other_metrics") or {}):
            found[r["seed"]] = _value(r["other_metrics"][metric])
        else:
            known = [r.get("metric"), *(r.get("other_metrics") or {})]
            raise ValueError(f"the runs of {variant!r} on task {task!r} record no metric {metric!r} "
                             f"(they have: {', '.join(str(k) for k in known if k)})")
    return found


def paired_difference(results: dict, task: str, variant_a: str, variant_b: str,
                      level: float = 0.95, metric: Optional[str] = None) -> Dict[str, Optional[float]]:
    """``variant_a - variant_b`` on ``task``'s test metric (or the test metric named
    ``metric``, e.g. ``spearman`` of a regression task), paired by seed.

    Returns ``{"mean", "std", "seeds", "t", "low", "high", "a_mean", "b_mean"}``: the mean
    difference, its standard deviation over the paired seeds, their number, the paired t
    statistic and the ``level`` interval mean ± t_critical * std / sqrt(seeds) (std, t and
    the interval are None for fewer than two seeds; t also for zero spread). Raises
    ValueError naming what is missing when either variant has no run on the task, or the two
    share no seed.
    """
    runs = results.get("runs", [])
    a, b = _test_by_seed(runs, task, variant_a, metric), _test_by_seed(runs, task, variant_b, metric)
    for name, found in ((variant_a, a), (variant_b, b)):
        if not found:
            known = sorted({r["variant"] for r in runs if r["task"] == task})
            raise ValueError(f"no run of variant {name!r} on task {task!r} (variants: {', '.join(known) or 'none'})")
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError(f"{variant_a!r} and {variant_b!r} share no seed on task {task!r}")
    diffs = [a[s] - b[s] for s in seeds]
    mean = statistics.fmean(diffs)
    out: Dict[str, Optional[float]] = {
        "mean": mean, "std": None, "seeds": len(seeds), "t": None, "low": None, "high": None,
        "a_mean": statistics.fmean(a[s] for s in seeds), "b_mean": statistics.fmean(b[s] for s in seeds)}
    if len(seeds) > 1 and not any(math.isnan(d) for d in diffs):
        # (a NaN test, a graded run's undefined correlation, leaves the spread undefined:
        # statistics.stdev raised an AttributeError on it, stopping the experiment)
        std = sample_std(diffs)
        half = t_critical(len(seeds) - 1, level) * std / math.sqrt(len(seeds))
        out.update(std=std, low=mean - half, high=mean + half,
                   t=mean / (std / math.sqrt(len(seeds))) if std > 0 else None)
    return out


def signed(x: float, digits: int = 2) -> str:
    """``x`` with its sign to ``digits`` places, ``+1.17``; a value that rounds to zero is
    ``+0.00`` (a gain of -0.001 was shown as ``-0.00``, a loss that the table did not hold).
    Interval bounds keep their own format: a bound's sign says which side of 0 it is on."""
    text = f"{x:+.{digits}f}"
    return "+" + text[1:] if float(text) == 0 else text


def difference_text(diff: Dict[str, Optional[float]], level: float = 0.95) -> str:
    """One line: ``+0.21 ± 0.05 (3 seeds), 95% interval +0.09 to +0.33, paired t 7.1``."""
    mean = diff["mean"]
    if mean is None or math.isnan(mean):
        return (f"undefined: a test score of the {diff['seeds']} paired seed(s) is undefined (NaN, a "
                f"graded run's correlation: see its run's 'undefined')")
    text = signed(mean)
    if diff["std"] is None:
        return f"{text} (1 seed, no interval)"
    # the level as given: '.0%' rounded 0.975 to "98%", naming another interval than computed
    text += (f" ± {diff['std']:.2f} ({diff['seeds']} seeds), {level * 100:g}% interval "
             f"{diff['low']:+.2f} to {diff['high']:+.2f}")
    return text + (f", paired t {diff['t']:.2f}" if diff["t"] is not None else "")
