#!/usr/bin/env bash
# Gather a PTB run's results (log, curve, numbers, validation table) into its experiment folder.
# Run from the repository root; the first run by default, the second with
#   RUN=runs/ptb-v2/run OUT=experiments/ptb/v2 TITLE="biLM on PTB, second run (CPU, 2 threads)" bash experiments/ptb/collect.sh
set -euo pipefail
run=${RUN:-runs/ptb/run}
out=${OUT:-experiments/ptb}
cp $run/log.jsonl $out/log.jsonl
cp $run/train_config.json $out/train_config.json
elmo plot-curve $run/log.jsonl -o $out/curve.png --title "${TITLE:-biLM on PTB (CPU, 1 thread)}"
python - "$run" "$out" <<'PY'
import json, sys
run, out = sys.argv[1], sys.argv[2]
log = [json.loads(l) for l in open(f"{run}/log.jsonl")]
start = next(r for r in log if r.get("event") == "start")
train = [r for r in log if r.get("event") == "train"]
meta = json.load(open(f"{run}/model/metadata.json"))
result = {"params": start["params"], "params_bilm": start["params_bilm"], "params_softmax": start["params"] - start["params_bilm"],
          "steps": meta["steps"], "tokens": meta["tokens"], "epochs": round(meta["tokens"] / start["corpus"]["tokens"], 3),
          "training_seconds": meta["elapsed_s"], "tokens_per_s": round(meta["tokens"] / meta["elapsed_s"], 1),
          "valid": json.load(open(f"{run}/valid_ppl.json")), "test": json.load(open(f"{run}/test_ppl.json"))}
try:
    result["test_state_carried"] = json.load(open(f"{run}/test_ppl_carried.json"))
except FileNotFoundError:
    pass
json.dump(result, open(f"{out}/results.json", "w"), indent=2)
print(json.dumps(result, indent=2))
# the validation curve as a markdown table, with the learning rate each evaluation ran at
# the first rate: the one the first resume found (train_config.json holds the last phase's)
first = next((r for r in log if r.get("event") == "resume" and "lr_before" in r), None)
lr = first["lr_before"] if first else json.load(open(f"{run}/train_config.json"))["lr"]
print("\n| step | epoch | rate of the steps before | validation forward | backward | average |\n|---:|---:|---:|---:|---:|---:|")
for r in log:
    if r.get("event") == "eval" and r.get("split") == "valid":
        print(f"| {r['step']:,} | {r['epoch']:.2f} | {lr:g} | {r['ppl_fwd']:.1f} | {r['ppl_bwd']:.1f} | {r['ppl']:.1f} |")
    elif r.get("event") in ("lr_decay", "resume") and "lr" in r:
        lr = r["lr"]
PY
