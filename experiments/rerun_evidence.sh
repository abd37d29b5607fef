#!/usr/bin/env bash
# Re-run task experiments on the bundled default biLM as shipped now, keeping the results of the
# version they were run with, for an old-and-new comparison. Run from the repository root:
#
#   OLD=v1 bash experiments/rerun_evidence.sh [CONFIG ...]   # default: ner, pos, pos_sample_efficiency,
#                                                              # sentiment, sentiment_rating, topic
# For each config:
#   1. its results folder is copied, once, to experiments/results/$OLD/<name>;
#   2. `elmo experiment CONFIG --resume` keeps the baseline runs (they use no biLM) and trains
#      every ELMo run again with the shipped weights (resume compares the biLM's SHA-256);
#   3. experiments/compare_results.py writes experiments/results/<name>/compare_$OLD.md.
# ner's adapted variant reads runs/adapted/twitter-ner/model, which must be adapted from the
# shipped model: when ner is listed, that folder is removed and experiments/adapt_ner.sh builds
# it again first. JOBS experiments run at once (default 2, each at its config's one thread);
# their logs are in runs/rerun/<name>.log.
set -euo pipefail
old=${OLD:?name the version the current results come from, e.g. OLD=v1}
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(experiments/configs/{ner,pos,pos_sample_efficiency,sentiment,sentiment_rating,topic}.json)
name_of() { python -c 'import json, sys; print(json.load(open(sys.argv[1]))["name"])' "$1"; }
mkdir -p runs/rerun "experiments/results/$old"
for config in "${configs[@]}"; do
  name=$(name_of "$config")
  if [ -d "experiments/results/$name" ] && [ ! -d "experiments/results/$old/$name" ]; then
    cp -r "experiments/results/$name" "experiments/results/$old/$name"
  fi
done
if printf '%s\n' "${configs[@]}" | grep -q '/ner\.json$'; then
  rm -rf runs/adapted/twitter-ner
  bash experiments/adapt_ner.sh > runs/rerun/adapt_ner.log 2>&1
fi
printf '%s\n' "${configs[@]}" | xargs -P "${JOBS:-2}" -I{} sh -c \
  'n=$(python -c "import json, sys; print(json.load(open(sys.argv[1]))[\"name\"])" "$1");
   elmo experiment "$1" --resume --quiet > "runs/rerun/$n.log" 2>&1 || echo "$1 failed: see runs/rerun/$n.log"' _ {}
for config in "${configs[@]}"; do
  name=$(name_of "$config")
  python experiments/compare_results.py "experiments/results/$old/$name/results.json" \
    "experiments/results/$name/results.json" --names "$old" now -o "experiments/results/$name/compare_$old.md"
done
