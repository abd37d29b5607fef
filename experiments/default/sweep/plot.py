"""Held-out perplexity against training time for the runs of experiments/default/sweep/run.sh.

    python experiments/default/sweep/plot.py [RUNS] [OUT_DIR]

Writes sweep.png (the curves) and sweep.json (per run: parameters, tokens/s, tokens seen and
the held-out perplexities with the training time at which each was measured).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def read_run(folder: Path) -> dict:
    records = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines() if line.strip()]
    start = next(r for r in records if r.get("event") == "start")
    trains = [r for r in records if r.get("event") == "train"]
    elapsed = {r["step"]: r["elapsed_s"] for r in trains}
    evals = []
    for r in records:
        if r.get("event") == "eval" and r.get("split") == "valid":
            # the nearest logged training time at or before the evaluation's step
            before = [s for s in elapsed if s <= r["step"]]
            evals.append({"step": r["step"], "seconds": elapsed[max(before)] if before else 0.0,
                          "ppl": r["ppl"], "ppl_fwd": r["ppl_fwd"], "ppl_bwd": r["ppl_bwd"]})
    last = trains[-1] if trains else {}
    return {"params": start.get("params"), "params_bilm": start.get("params_bilm"),
            "threads": start.get("threads"), "steps": last.get("step"), "tokens": last.get("tokens"),
            "seconds": last.get("elapsed_s"), "tokens_per_s": last.get("tokens_per_s"), "valid": evals}


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    runs = Path(args[0] if args else "runs/sweep")
    out = Path(args[1] if len(args) > 1 else Path(__file__).parent)
    results = {d.name: read_run(d) for d in sorted(runs.iterdir()) if (d / "log.jsonl").exists()}
    (out / "sweep.json").write_text(json.dumps(results, indent=1) + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, r in results.items():
        xs = [e["seconds"] / 60 for e in r["valid"]]
        ys = [e["ppl"] for e in r["valid"]]
        ax.plot(xs, ys, marker="o", ms=3,
                label=f"{name} ({r['params_bilm'] / 1e6:.1f}M biLM, {r['tokens_per_s']:.0f} tok/s)")
    ax.set_xlabel("training time (minutes, 2 threads)")
    ax.set_ylabel("held-out perplexity (fwd/bwd mean)")
    ax.set_yscale("log")
    ax.set_title("Three LSTM sizes at equal time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "sweep.png", dpi=120)
    for name, r in results.items():
        best = r["valid"][-1] if r["valid"] else None
        print(f"{name}: {r['tokens']} tokens in {r['seconds']} s ({r['tokens_per_s']} tok/s); "
              f"last held-out ppl {best['ppl'] if best else 'n/a'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
