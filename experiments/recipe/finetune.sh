#!/usr/bin/env bash
# A warm start under the two accumulators: the bundled default model adapted to the first 100
# lines of Brown dev with Adagrad (lr 0.2, one epoch), its optimizer fresh, once with the
# from-scratch default on our gradient (--adagrad-init 0.0025 --clip-norm 0.5, the original's
# updates) and once with 1.0 and 10 (what a warm start takes). Prints held-out perplexity
# before and after.
#
#   bash experiments/recipe/finetune.sh         # runs/recipe-finetune/{scratch-defaults,warm-defaults}/
set -euo pipefail
out=${OUT:-runs/recipe-finetune}
mkdir -p "$out"
head -n 100 "$(elmo data path brown)/dev.txt" > "$out/brown100.txt"
declare -A variants=(
  [scratch-defaults]="--adagrad-init 0.0025 --clip-norm 0.5"
  [warm-defaults]="--adagrad-init 1.0 --clip-norm 10"
)
for name in scratch-defaults warm-defaults; do
  if [ ! -f "$out/$name/finetune_report.json" ]; then
    # shellcheck disable=SC2086
    elmo finetune "$out/brown100.txt" --from elmo/resources/default -o "$out/$name" --threads 1 --no-progress \
      ${variants[$name]} > /dev/null
  fi
  python -c "import json, sys; r = json.load(open(sys.argv[1])); print(sys.argv[2], r['steps'], 'steps, held-out ppl',
             round(r['before']['ppl'], 2), '->', round(r['after']['ppl'], 2))" "$out/$name/finetune_report.json" "$name"
done
