"""Held-out perplexity against steps for the runs of experiments/recipe/run.sh.

    python experiments/recipe/collect.py [RUNS] [OUT_DIR]

Writes recipe.json (per run: its validation perplexities by step, and the mean gradient norm
of each logged window before clipping) and recipe.png (the curves), and prints one table row per
variant: the last validation perplexity of each seed, and their mean and standard deviation.
"""
from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from elmo.training.curves import plot_learning_curve, read_log


def read_run(folder: Path) -> dict:
    records = read_log(folder / "log.jsonl")
    valid = [{"step": r["step"], "ppl": r["ppl"], "ppl_fwd": r["ppl_fwd"], "ppl_bwd": r["ppl_bwd"]}
             for r in records if r.get("event") == "eval" and r.get("split") == "valid"]
    trains = [r for r in records if r.get("event") == "train"]
    return {"valid": valid,
            "grad_norm": [{"step": r["step"], "grad_norm": r["grad_norm"]} for r in trains if "grad_norm" in r],
            "sampled_ppl": [{"step": r["step"], "ppl": r.get("sampled_ppl")} for r in trains]}


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    runs = Path(args[0] if args else "runs/recipe")
    out = Path(args[1] if len(args) > 1 else Path(__file__).parent)
    results = {d.name: read_run(d) for d in sorted(runs.iterdir()) if (d / "log.jsonl").exists()}
    (out / "recipe.json").write_text(json.dumps(results, indent=1) + "\n")

    by_variant = defaultdict(list)    # "adam-s1" -> variant "adam", one seed's run
    for name, r in results.items():
        variant = name.rsplit("-s", 1)[0]
        if r["valid"]:
            by_variant[variant].append((name, r["valid"][-1]))
    print("| variant | seeds | step | held-out ppl (fwd/bwd mean) per seed | mean ± std |")
    print("|---|---:|---:|---|---|")
    for variant, finals in sorted(by_variant.items()):
        ppls = [v["ppl"] for _, v in finals]
        spread = f"{statistics.mean(ppls):.1f} ± {statistics.stdev(ppls):.1f}" if len(ppls) > 1 else f"{ppls[0]:.1f}"
        steps = sorted({v["step"] for _, v in finals})
        print(f"| {variant} | {len(ppls)} | {'/'.join(map(str, steps))} | "
              f"{', '.join(f'{p:.1f}' for p in ppls)} | {spread} |")

    # the curves, drawn as `elmo plot-curve` draws them (validation against epochs: equal steps)
    plot_learning_curve(sorted(d for d in runs.iterdir() if (d / "log.jsonl").exists()), out / "recipe.png",
                        title="Optimizer recipes at equal steps (Brown, 128 x 20 tokens a step)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
