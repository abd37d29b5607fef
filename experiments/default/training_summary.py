"""The training figures of the default model's card, from the run's learning curve.

    python experiments/default/training_summary.py experiments/default/log.jsonl \
        experiments/default/training.json
    python experiments/default/training_summary.py experiments/default/v2/log.jsonl \
        experiments/default/v3/log.jsonl experiments/default/v3/training.json   # a run continued

Several logs are read as one run's, in order (version 3's log continues version 2's run). A
phase is what one session of the trainer did: it begins at the run's start or at a resume
(where the learning rate may change) and ends at the last event before the next resume;
tokens/s is tokens / elapsed training time (the trainer's clock, which counts the steps only:
evaluations and checkpoints are left out). The per-interval rates show how the shared
machine's load varied.
"""
import json
import sys
from pathlib import Path

import numpy as np

from elmo.io import atomic_write_text

*logs, out = sys.argv[1:]
events = [json.loads(line) for log in logs for line in Path(log).read_text().splitlines() if line.strip()]
train = [e for e in events if e["event"] == "train"]
per_step = train[-1]["tokens"] // train[-1]["step"]          # batch rows x unroll steps
bounds = [i for i, e in enumerate(events) if e["event"] in ("start", "resume")]
phases, end = [], {"elapsed_s": 0.0, "step": 0}
for k, i in enumerate(bounds):
    timed = [e for e in events[i:bounds[k + 1] if k + 1 < len(bounds) else len(events)]
             if "elapsed_s" in e and "step" in e]
    if not timed:
        continue
    begin = events[i].get("step", 0)
    phases.append({"start_step": begin, "end_step": timed[-1]["step"], "lr": events[i].get("lr"),
                   "elapsed_s": timed[-1]["elapsed_s"] - end["elapsed_s"],
                   "tokens": (timed[-1]["step"] - begin) * per_step})
    end = timed[-1]
for p in phases:
    p["tokens_per_s"] = p["tokens"] / p["elapsed_s"]
rates = np.array([t["tokens_per_s"] for t in train])
final = {"elapsed_s": end["elapsed_s"], "step": end["step"], "tokens": end["step"] * per_step}
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
atomic_write_text(out, json.dumps(summary, indent=2) + "\n")
print(f"{summary['tokens']:,} tokens in {summary['elapsed_s'] / 3600:.2f} h of training "
      f"({summary['epochs']:.2f} epochs, {summary['steps']:,} steps): {summary['tokens_per_s']:,.0f} tokens/s "
      f"overall; per interval {rates.min():,.0f} to {rates.max():,.0f} (median {np.median(rates):,.0f})")
for i, p in enumerate(phases, 1):
    print(f"phase {i}: {p['tokens']:,} tokens in {p['elapsed_s']:.0f} s ({p['tokens_per_s']:,.0f} tokens/s)")
for v in summary["valid"]:
    print(f"valid step {v['step']}: forward {v['ppl_fwd']:.1f}, backward {v['ppl_bwd']:.1f}, average {v['ppl']:.1f}")
