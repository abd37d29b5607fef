#!/usr/bin/env bash
# The default biLM, version 2 (#15): a warm start from the shipped model (elmo/resources/default),
# same shape and vocabulary, on the same corpus, with 2 threads. Run from the repository root
# after `elmo data build-corpus`. Two phases, the second resuming from the first's checkpoint:
#   1. Adam (fresh state) at lr 0.001 until HOURS1 hours of training time;
#   2. lr 0.00025 until HOURS2 hours in all.
# Seed 1, so the warm start reads the corpus in an order the shipped model's run did not.
# --state-reset-every 10 as before (ELMo runs from a zero state; see train.sh).
# A killed run resumes where its last checkpoint left off: run the script again.
set -euo pipefail
corpus=${ELMO_DATA:-$HOME/.cache/elmo}/corpus
run=${RUN:-runs/default-v2}
export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=10000000000
mkdir -p "$run"
# the validation sample of train.sh: the first 40 sentences of each source's held-out text
for f in "$corpus"/heldout/*.txt; do head -n 40 "$f"; done > "$run/valid_sample.txt"
common=(elmo train "$corpus/train.txt" --from "${FROM:-elmo/resources/default}" --output "$run/run"
  --valid "$run/valid_sample.txt" --batch-size 128 --unroll-steps 20 --optimizer adam --negatives 2048
  --dropout 0.1 --clip-norm 10 --state-reset-every 10 --epochs 10 --seed 1 --eval-every 800
  --checkpoint-every 200 --keep-checkpoints 2 --log-every 20 --threads "${THREADS:-2}" --no-progress)
case "${PHASE:-all}" in
  1|all) "${common[@]}" --lr 0.001 --max-hours "${HOURS1:-1.15}" ;;
esac
case "${PHASE:-all}" in
  2|all) "${common[@]}" --lr 0.00025 --max-hours "${HOURS2:-1.7}" --allow-change lr ;;
esac
