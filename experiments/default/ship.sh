#!/usr/bin/env bash
# Ship the trained default biLM (runs/default/run/model, written by train.sh) into the package
# as elmo/resources/default, and rebuild the demo's bundled data against its vocabulary.
# Run from the repository root:  bash experiments/default/ship.sh [MODEL_FOLDER]
#   1. measure what float16 costs: a copy with every part in float16 against the float32
#      export, on the first 40 sentences of each source's held-out text
#      (experiments/default/precision.json);
#   2. ship: biLM float32, softmax float16 (the choice the measurement supports, see
#      elmo/resources/default/MODEL_CARD.md), at most 50 MB;
#   3. the demo's corpus sample and GloVe subset (elmo/resources/demo).
# The per-source perplexities of the model card: experiments/default/perplexity.sh.
set -euo pipefail
src=${1:-runs/default/run/model}
dest=elmo/resources/default
corpus=${ELMO_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/elmo}/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in "$corpus"/heldout/*.txt; do head -n 40 "$f"; done > "$work/sample.txt"
python -m elmo.training.ship "$src" "$work/fp16" --bilm-dtype float16 --softmax-dtype float16
python -m elmo.training.precision "$src" "$work/fp16" "$work/sample.txt" --threads 1 \
  --out experiments/default/precision.json
python -m elmo.training.ship "$src" "$dest" --bilm-dtype float32 --softmax-dtype float16
python -m elmo.demo.build_data --vocab "$dest/vocab.txt"
