"""The training figures of the default model's card, from the run's learning curve.

    python experiments/default/training_summary.py experiments/default/log.jsonl \
        experiments/default/training.json

Phases end at each "time_limit" event; tokens/s overall is tokens / elapsed training time (the
trainer's clock, which counts the steps only: evaluations and checkpoints are left out); the
per-interval rates show how the shared machine's load varied.
"""
import json
import sys
from pathlib import Path

import numpy as np

from elmo.io import atomic_write_text

events = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line.strip()]
train = [e for e in events if e["event"] == "train"]
per_step = train[-1]["tokens"] // train[-1]["step"]          # batch rows x unroll steps
phases, start = [], {"elapsed_s": 0.0, "step": 0}
for e in events:
    if e["event"] == "time_limit":
        phases.append({"end_step": e["step"], "elapsed_s": e["elapsed_s"] - start["elapsed_s"],
                       "tokens": (e["step"] - start["step"]) * per_step})
        start = {"elapsed_s": e["elapsed_s"], "step": e["step"]}
for p in phases:
    p["tokens_per_s"] = p["tokens"] / p["elapsed_s"]
rates = np.array([t["tokens_per_s"] for t in train])
final = train[-1]
if phases:
    final = {**final, "elapsed_s": start["elapsed_s"], "step": start["step"], "tokens": start["step"] * per_step}
first = next(e for e in events if e["event"] == "start")
summary = {
    "start": first,
    "resumes": [e for e in events if e["event"] == "resume"],
    "phases": phases,
    "elapsed_s": final["elapsed_s"], "tokens": final["tokens"], "steps": final["step"],
    "epochs": final["tokens"] / first["corpus"]["tokens"], "tokens_per_s": final["tokens"] / final["elapsed_s"],
    "interval_tokens_per_s": {"min": float(rates.min()), "median": float(np.median(rates)),
                              "max": float(rates.max()), "intervals": len(rates)},
    "valid": [{k: e[k] for k in ("step", "ppl_fwd", "ppl_bwd", "ppl", "targets")}
              for e in events if e["event"] == "eval" and e.get("split") == "valid"],
}
atomic_write_text(sys.argv[2], json.dumps(summary, indent=2) + "\n")
print(f"{summary['tokens']:,} tokens in {summary['elapsed_s'] / 3600:.2f} h of training "
      f"({summary['epochs']:.2f} epochs, {summary['steps']:,} steps): {summary['tokens_per_s']:,.0f} tokens/s "
      f"overall; per interval {rates.min():,.0f} to {rates.max():,.0f} (median {np.median(rates):,.0f})")
for i, p in enumerate(phases, 1):
    print(f"phase {i}: {p['tokens']:,} tokens in {p['elapsed_s']:.0f} s ({p['tokens_per_s']:,.0f} tokens/s)")
for v in summary["valid"]:
    print(f"valid step {v['step']}: forward {v['ppl_fwd']:.1f}, backward {v['ppl_bwd']:.1f}, average {v['ppl']:.1f}")
