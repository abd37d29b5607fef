#!/usr/bin/env bash
# The PTB biLM of experiments/ptb/README.md: train, then perplexity on valid and test.
# Run from the repository root after experiments/ptb/prepare.sh.
#
# The run had two phases (see README.md): steps 1-1000 carried every row's LSTM state forever
# (the original's batching); at step 1000 it was stopped and resumed from its checkpoint with
# --state-reset-every 10, because the forward LM had come to depend on cells that only a
# never-reset state builds up (it failed from a zero state). To replay it exactly, run phase 1
# with --max-steps 1000, then phase 2.
set -euo pipefail
data=runs/ptb/data
run=runs/ptb/run
# glibc returns large freed blocks to the system after every step by default; keeping them
# avoids page-fault storms in the LSTM's many short-lived tensors.
export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=10000000000
common=(elmo train $data/ptb.train.txt --vocab $data/vocab.txt --output $run --valid $data/ptb.valid.txt
  --dim 512 --projection-dim 128 --n-layers 2 --filters 1:32,2:32,3:64,4:64,5:64 --n-highway 2 --char-dim 16
  --batch-size 64 --unroll-steps 20 --optimizer adam --lr 0.002 --negatives 1024 --dropout 0.1 --clip-norm 10
  --epochs 8 --eval-every 760 --checkpoint-every 100 --keep-checkpoints 2 --log-every 20 --threads 1 --no-progress)
if [ "${PHASE:-2}" = 1 ]; then
  "${common[@]}" --max-steps 1000
  exit 0
fi
"${common[@]}" --state-reset-every 10 --max-hours 1.45
elmo perplexity $run/model $data/ptb.valid.txt --threads 1 --json > $run/valid_ppl.json
elmo perplexity $run/model $data/ptb.test.txt --threads 1 --json > $run/test_ppl.json
elmo perplexity $run/model $data/ptb.test.txt --threads 1 --json --state-reset-every 0 > $run/test_ppl_carried.json
cat $run/valid_ppl.json $run/test_ppl.json $run/test_ppl_carried.json
