#!/usr/bin/env bash
# A sweep at equal wall time for the next default model (#15): three LSTM sizes with the same
# character CNN, vocabulary, batch, unroll and Adam schedule, each trained for MINUTES minutes
# on THREADS threads from scratch, held-out perplexity on the first 40 sentences of each
# source's held-out text every EVAL steps. Run from the repository root after
# `elmo data build-corpus`; then `python experiments/default/sweep/plot.py`.
#   MINUTES=7 THREADS=2 bash experiments/default/sweep/run.sh
set -euo pipefail
corpus=${ELMO_DATA:-$HOME/.cache/elmo}/corpus
out=${OUT:-runs/sweep}
minutes=${MINUTES:-7}
hours=$(python3 -c "print($minutes / 60)")
mkdir -p "$out"
[ -f "$out/vocab.txt" ] || elmo vocab build "$corpus/train.txt" -o "$out/vocab.txt" --min-count 3 --max-size 50000
for f in "$corpus"/heldout/*.txt; do head -n 40 "$f"; done > "$out/valid_sample.txt"
# name:cells:projection
for size in ${SIZES:-cells512-proj128:512:128 cells1024-proj256:1024:256 cells2048-proj256:2048:256}; do
  IFS=: read -r name dim proj <<<"$size"
  [ -f "$out/$name/done" ] && continue
  elmo train "$corpus/train.txt" --vocab "$out/vocab.txt" --output "$out/$name" --valid "$out/valid_sample.txt" \
    --dim "$dim" --projection-dim "$proj" --n-layers 2 --filters 1:32,2:32,3:64,4:64,5:64 --n-highway 2 \
    --char-dim 16 --batch-size 128 --unroll-steps 20 --optimizer adam --lr 0.002 --negatives 2048 \
    --dropout 0.1 --clip-norm 10 --state-reset-every 10 --epochs 1 --eval-every "${EVAL:-60}" \
    --checkpoint-every 100000 --log-every 10 --threads "${THREADS:-2}" --no-progress --max-hours "$hours"
  touch "$out/$name/done"
done
