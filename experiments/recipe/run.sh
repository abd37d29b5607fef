#!/usr/bin/env bash
# Adagrad at the original's values taken as they are, against the original's updates, and Adam,
# at equal steps.
#
# The original differentiates unroll_steps (T = 20) times the mean loss; `elmo train` the mean
# loss. So Adagrad with the original's accumulator 1.0 and clip 10 (the defaults of `elmo train`
# before 2026-12-06) takes steps up to T times smaller than the original's early on, and
# `--adagrad-init 0.0025 --clip-norm 0.5` (1/T^2 and 10/T, now the defaults of a run from
# scratch) gives the original's updates exactly. Each variant trains the shipped default model's
# shape from scratch on Brown's train split, the same batches and seed, for STEPS steps, and is
# evaluated on Brown's dev split every 100 steps.
#
#   STEPS=300 SEEDS="1 2" THREADS=2 bash experiments/recipe/run.sh      # runs/recipe/<variant>-s<seed>/
#   python experiments/recipe/collect.py runs/recipe experiments/recipe
# VARIANTS="adagrad-earlier adagrad-original" runs only those; adam-clip-original (Adam with
# the clip of 0.5) is run only when named there.
set -euo pipefail
brown=$(elmo data path brown)
out=${OUT:-runs/recipe}
steps=${STEPS:-300}
mkdir -p "$out"
[ -f "$out/vocab.txt" ] || elmo vocab build "$brown/train.txt" -o "$out/vocab.txt" --min-count 2 --max-size 30000
declare -A variants=(
  [adagrad-earlier]="--optimizer adagrad --adagrad-init 1.0 --clip-norm 10"
  [adagrad-original]="--optimizer adagrad --adagrad-init 0.0025 --clip-norm 0.5"
  [adam]="--optimizer adam --lr 0.002 --clip-norm 10"
  [adam-clip-original]="--optimizer adam --lr 0.002 --clip-norm 0.5"
)
for seed in ${SEEDS:-1}; do
  for name in ${VARIANTS:-adagrad-earlier adagrad-original adam}; do
    run="$out/$name-s$seed"
    [ -d "$run/model" ] && continue
    # shellcheck disable=SC2086
    elmo train "$brown/train.txt" --vocab "$out/vocab.txt" --output "$run" --valid "$brown/dev.txt" \
      --dim 512 --projection-dim 128 --n-layers 2 --filters 1:32,2:32,3:64,4:64,5:64 --n-highway 2 \
      --char-dim 16 --batch-size 128 --unroll-steps 20 --negatives 2048 --dropout 0.1 \
      --state-reset-every 10 --max-steps "$steps" --eval-every 100 --checkpoint-every 100 \
      --log-every 20 --seed "$seed" --threads "${THREADS:-2}" --no-progress ${variants[$name]}
  done
done
