#!/usr/bin/env bash
# PTB biLM, second run (experiments/ptb/v2/README.md): the first run's model and data, with the
# state resets from the start, the learning rate halved on every validation plateau
# (--lr-decay, Kim et al. 2016) and more dropout for the longer run. Run from the repository root:
#   elmo data get ptb && bash experiments/ptb/v2/run.sh
# A stopped run resumes from its last checkpoint when the same command is run again.
# Changed on resume (README, "Phases"); each phase ran until it was stopped and resumed:
#   steps 1-6,259:     --lr 0.002 --lr-decay-threshold 0.01 (no decay fired)
#   steps 6,259-7,900: --lr 0.002 --lr-decay-threshold 0.02 (three decays, to 0.00025)
#   steps 7,900-9,100: --lr 0.002 --lr-decay-threshold 0.01 (three decays, to 0.00003125)
#   from step 9,100:   --lr 0.0005 --lr-decay-threshold 0 (a warm restart of the rate; halved
#                      whenever validation is not below the best so far), as below.
set -euo pipefail
# keep freed blocks up to 32 MiB in the heap, as experiments/ptb/run.sh does
export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=10000000000
data=$(elmo data path ptb)
run=runs/ptb-v2/run
mkdir -p runs/ptb-v2
[ -f runs/ptb-v2/vocab.txt ] || elmo vocab build "$data/ptb.train.txt" -o runs/ptb-v2/vocab.txt
elmo train "$data/ptb.train.txt" --vocab runs/ptb-v2/vocab.txt --output $run --valid "$data/ptb.valid.txt" \
  --dim 512 --projection-dim 128 --n-layers 2 --filters 1:32,2:32,3:64,4:64,5:64 --n-highway 2 --char-dim 16 \
  --batch-size 64 --unroll-steps 20 --optimizer adam --lr 0.0005 --negatives 1024 --dropout 0.25 --clip-norm 10 \
  --state-reset-every 10 --lr-decay 0.5 --lr-decay-threshold 0 --allow-change lr,lr-decay-threshold --eval-every 363 \
  --epochs 40 --max-hours "${HOURS:-2.0}" --checkpoint-every 100 --keep-checkpoints 2 --log-every 20 \
  --threads "${THREADS:-1}" --no-progress
elmo perplexity $run/model "$data/ptb.valid.txt" --threads "${THREADS:-1}" --json > $run/valid_ppl.json
elmo perplexity $run/model "$data/ptb.test.txt" --threads "${THREADS:-1}" --json > $run/test_ppl.json
cat $run/valid_ppl.json $run/test_ppl.json
