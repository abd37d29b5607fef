#!/usr/bin/env bash
# PTB biLM, second run (experiments/ptb/v2/README.md): the first run's model and data, with the
# state resets from the start, the learning rate halved on validation plateaus (--lr-decay,
# Kim et al. 2016) and more dropout for the longer run. Run from the repository root:
#   elmo data get ptb && HOURS=3.0 THREADS=2 bash experiments/ptb/v2/run.sh
# The run went through five phases, each resumed from the last one's checkpoint with the
# learning rate or the decay threshold changed (README, "Phases"); this script runs them in
# turn, each to the step where it ended. Run it again after an interruption: it resumes from
# the last checkpoint and skips the phases that are done.
set -euo pipefail
# keep freed blocks up to 32 MiB in the heap, as experiments/ptb/run.sh does
export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=10000000000
data=$(elmo data path ptb)
run=runs/ptb-v2/run
mkdir -p runs/ptb-v2
[ -f runs/ptb-v2/vocab.txt ] || elmo vocab build "$data/ptb.train.txt" -o runs/ptb-v2/vocab.txt
#        last step  Adam lr  decay threshold
phases=("6259       0.002    0.01"   # no decay fired
        "7900       0.002    0.02"   # three decays, to 0.00025
        "9100       0.002    0.01"   # three decays, to 0.00003125
        "11900      0.0005   0"      # a warm restart of the rate, halved when not below the best
        "15801      0.001    0")     # a second warm restart, to the time limit (HOURS=3.0)
done_step() { ls $run/checkpoints 2>/dev/null | sed -n 's/checkpoint-0*\([0-9][0-9]*\)\.pt/\1/p' | sort -n | tail -1; }
for phase in "${phases[@]}"; do
  read -r last lr threshold <<<"$phase"
  [ "$(done_step || true)" -ge "$last" ] 2>/dev/null && continue
  elmo train "$data/ptb.train.txt" --vocab runs/ptb-v2/vocab.txt --output $run --valid "$data/ptb.valid.txt" \
    --dim 512 --projection-dim 128 --n-layers 2 --filters 1:32,2:32,3:64,4:64,5:64 --n-highway 2 --char-dim 16 \
    --batch-size 64 --unroll-steps 20 --optimizer adam --lr "$lr" --negatives 1024 --dropout 0.25 --clip-norm 10 \
    --state-reset-every 10 --lr-decay 0.5 --lr-decay-threshold "$threshold" --allow-change lr,lr-decay-threshold \
    --eval-every 363 --max-steps "$last" --max-hours "${HOURS:-3.0}" --checkpoint-every 100 --keep-checkpoints 2 \
    --log-every 20 --threads "${THREADS:-1}" --no-progress
done
for split in valid test; do
  elmo perplexity $run/model "$data/ptb.$split.txt" --threads "${THREADS:-1}" --json > $run/${split}_ppl.json
done
# the usual PTB protocol: the test text as one stream, the state carried through it
elmo perplexity $run/model "$data/ptb.test.txt" --carry-state --threads "${THREADS:-1}" --json > $run/test_ppl_carried.json
cat $run/valid_ppl.json $run/test_ppl.json $run/test_ppl_carried.json
