#!/usr/bin/env bash
# Train the bundled default biLM (elmo/resources/default) on the corpus of `elmo data build-corpus`.
# Run from the repository root. Two phases, the second resuming from the first's checkpoint:
#   1. Adam lr 0.002 until 1.05 hours of training time;
#   2. lr 0.0005 until 1.6 hours in all (the usual final decay).
# --state-reset-every 10 keeps zero and short contexts in training: ELMo runs from a zero
# state, and a model whose state is never reset comes to depend on it (experiments/ptb).
set -euo pipefail
corpus=${ELMO_DATA:-$HOME/.cache/elmo}/corpus
run=runs/default
export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=10000000000
mkdir -p $run
if [ ! -f $run/vocab.txt ]; then
  elmo vocab build $corpus/train.txt -o $run/vocab.txt --min-count 3 --max-size 50000
fi
# a small validation sample: the first 40 sentences of each source's held-out text
for f in $corpus/heldout/*.txt; do head -n 40 "$f"; done > $run/valid_sample.txt
common=(elmo train $corpus/train.txt --vocab $run/vocab.txt --output $run/run --valid $run/valid_sample.txt
  --dim 512 --projection-dim 128 --n-layers 2 --filters 1:32,2:32,3:64,4:64,5:64 --n-highway 2 --char-dim 16
  --batch-size 128 --unroll-steps 20 --optimizer adam --negatives 2048 --dropout 0.1 --clip-norm 10
  --state-reset-every 10 --epochs 1 --eval-every 800 --checkpoint-every 200 --keep-checkpoints 2
  --log-every 20 --threads ${THREADS:-1} --no-progress)
case "${PHASE:-all}" in
  1|all) "${common[@]}" --lr 0.002 --max-hours 1.05 ;;
esac
case "${PHASE:-all}" in
  2|all) "${common[@]}" --lr 0.0005 --max-hours 1.6 --allow-change lr ;;
esac
