#!/usr/bin/env bash
# The default biLM, version 3 (#15): version 2's run, continued. Version 2's last checkpoint
# (runs/default-v2/run, step 7803: weights, Adam's state and the corpus position, seed 1) goes
# on, on 2 threads, with its own settings; what changes is named with --allow-change.
# Run from the repository root after `elmo data build-corpus` and version 2's train.sh.
#
#   ARM=fp32 STEPS=300 bash experiments/default/v3/train.sh   # A/B: 300 more steps, exact fp32
#   ARM=bf16 STEPS=300 bash experiments/default/v3/train.sh   #      the same steps, bf16 autocast
#   (PHASE=5, 6, 7 are the model card's phases 6, 7, 8: the card counts the A/B's bf16 arm as 5)
#   ARM=bf16 PHASE=5 HOURS=3.0 bash experiments/default/v3/train.sh   # lr 0.0005
#   ARM=bf16 PHASE=6 HOURS=3.4 bash experiments/default/v3/train.sh   # lr / 4
#   ARM=bf16 PHASE=7 HOURS=3.6 bash experiments/default/v3/train.sh   # lr / 16 to the end
#
# HOURS counts the run's training time from version 2's start (1.70 h at step 7803). Each arm
# is its own copy of the run (runs/default-v3-ARM); a stopped run resumes where it left off.
# Validation is computed in exact fp32 in both arms.
set -euo pipefail
corpus=${ELMO_DATA:-$HOME/.cache/elmo}/corpus
arm=${ARM:-bf16}
run=${RUN:-runs/default-v3-$arm}
export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=10000000000
if [ ! -d "$run/run" ]; then
  mkdir -p "$run"
  cp -r "${FROM_RUN:-runs/default-v2}/run" "$run/run"
  rm -rf "$run/run/model"
  # the run began before warm_start.json existed: its start is version 1, as version 2's card says
  python -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))["warm_start"], sys.stdout, indent=2)' \
    "${V2_MODEL:-elmo/resources/default}/metadata.json" > "$run/run/warm_start.json"
fi
precision=()
[ "$arm" = bf16 ] && precision=(--bf16)
# version 2's settings (experiments/default/v2/train.sh), so the checkpoint can go on
common=(elmo train "$corpus/train.txt" --from elmo/resources/default --output "$run/run"
  --valid "${VALID:-runs/default-v2/valid_sample.txt}" --batch-size 128 --unroll-steps 20 --optimizer adam
  --negatives 2048 --dropout 0.1 --clip-norm 10 --state-reset-every 10 --epochs 10 --seed 1
  --checkpoint-every 200 --keep-checkpoints 2 --log-every 20 --threads "${THREADS:-2}" --no-progress
  "${precision[@]}" --allow-change "lr,bf16")
case "${PHASE:-ab}" in
  ab) "${common[@]}" --lr 0.00025 --max-steps $((7803 + ${STEPS:-300})) --eval-every 100 ;;
  5) "${common[@]}" --lr 0.0005 --max-hours "${HOURS:-3.0}" --eval-every 800 ;;
  6) "${common[@]}" --lr 0.000125 --max-hours "${HOURS:-3.4}" --eval-every 800 ;;
  7) "${common[@]}" --lr 0.00003125 --max-hours "${HOURS:-3.6}" --eval-every 800 ;;
esac
