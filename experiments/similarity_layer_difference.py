"""Is one layer really better than another at word similarity? The section `similarity` of
`elmo analyze` gives each layer's Spearman rho with its own 95% interval; two layers scored on
the same pairs are not independent, so whether they differ is read from the interval of their
*difference*, resampling the pairs (the same draws for both layers, as the section draws them).

    python experiments/similarity_layer_difference.py default
    python experiments/similarity_layer_difference.py default --sets wordsim353 --seed 0

Prints, per pair set, each layer's rho, then ``layer j - layer i`` for every two layers and
``layer j - untrained copy's layer j`` (the copy `elmo analyze` uses as its control: the same
architecture with random weights drawn from --seed), each with a 95% percentile interval. An
interval that excludes 0 is a difference that resampling the pairs does not explain.
"""
from __future__ import annotations

import argparse
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np


def rho_difference(cos_a: np.ndarray, cos_b: np.ndarray, scores: np.ndarray, seed: int = 0,
                   n_resamples: int = 1000) -> Dict[str, Optional[float]]:
    """Spearman rho of ``cos_a`` minus that of ``cos_b``, both (N,) against ``scores`` (N,),
    with a 95% interval from resampling the N pairs (both sides on the same draws).

    Returns ``{"diff", "low", "high"}``; None where a rho is undefined (a constant side)."""
    from elmo.analysis.stats import resampled_interval
    from elmo.correlation import spearman, undefined_reason

    if undefined_reason(cos_a, scores) or undefined_reason(cos_b, scores):
        return {"diff": None, "low": None, "high": None}
    boot = resampled_interval(lambda i: spearman(cos_a[i], scores[i]) - spearman(cos_b[i], scores[i]),
                              len(scores), n_resamples, seed)
    return {"diff": spearman(cos_a, scores) - spearman(cos_b, scores), "low": boot["low"],
            "high": boot["high"]}


def layer_differences(cos: np.ndarray, scores: np.ndarray, control: Optional[np.ndarray] = None,
                      seed: int = 0, n_resamples: int = 1000) -> List[dict]:
    """Every ``layer j - layer i`` (i < j) of ``cos`` (L + 1, N), and with ``control``
    (L + 1, N), every ``layer j - control's layer j``: a list of ``{"name", "diff", "low",
    "high"}``."""
    rows = []
    for j in range(1, len(cos)):
        for i in range(j):
            rows.append({"name": f"layer {j} - layer {i}",
                         **rho_difference(cos[j], cos[i], scores, seed, n_resamples)})
    if control is not None:
        for j in range(len(cos)):
            rows.append({"name": f"layer {j} - untrained layer {j}",
                         **rho_difference(cos[j], control[j], scores, seed, n_resamples)})
    return rows


def _number(x: Optional[float]) -> str:
    return "undefined" if x is None else f"{x:+.3f}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("model", help="a model name or folder (as elmo analyze takes it)")
    p.add_argument("--sets", default="wordsim353,simlex999",
                   help="pair sets, as elmo analyze --similarity-sets (default wordsim353,simlex999)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap draws and the untrained copy (default 0)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--no-untrained-control", action="store_true", help="skip the untrained copy")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = p.parse_args(argv)
    import torch

    import elmo
    from elmo.analysis.report import similarity_sets
    from elmo.analysis.similarity import pair_cosines, words_alone
    from elmo.analysis.vectors import untrained_copy
    from elmo.correlation import spearman

    torch.set_num_threads(args.threads)
    try:
        sets = similarity_sets(args.sets)
        bilm = elmo.from_pretrained(args.model)
    except (ValueError, OSError) as e:
        print(f"similarity_layer_difference: {e}", file=sys.stderr)
        return 2
    words = sorted({w for pairs in sets.values() for a, b, _ in pairs for w in (a, b)})
    index = {w: i for i, w in enumerate(words)}
    vectors = words_alone(bilm, words)
    control = None if args.no_untrained_control else words_alone(untrained_copy(bilm, args.seed), words)
    for name, pairs in sets.items():
        scores = np.array([s for _, _, s in pairs], dtype=np.float64)
        cos = pair_cosines(vectors, index, pairs)
        ctl = None if control is None else pair_cosines(control, index, pairs)
        print(f"{name} ({len(pairs)} pairs): rho per layer "
              + ", ".join(f"{spearman(c, scores):.3f}" for c in cos))
        for row in layer_differences(cos, scores, ctl, args.seed, args.resamples):
            span = "" if row["low"] is None else f" (95% interval {_number(row['low'])} to {_number(row['high'])})"
            print(f"  {row['name']}: {_number(row['diff'])}{span}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
