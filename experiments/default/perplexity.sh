#!/usr/bin/env bash
# Forward, backward and average perplexity of the bundled default model on each source's
# held-out text (the table of elmo/resources/default/MODEL_CARD.md). Run from the repository
# root; one `elmo perplexity` per source, full softmax, one thread (about 1 min per source).
#   bash experiments/default/perplexity.sh [MODEL] [OUT.json]
set -euo pipefail
corpus=${ELMO_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/elmo}/corpus
model=${1:-elmo/resources/default}
out=${2:-experiments/default/heldout_ppl.json}
lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
for f in "$corpus"/heldout/*.txt; do
  echo "$(basename "$f" .txt) $(elmo perplexity "$model" "$f" --threads 1 --json)" >> "$lines"
done
python experiments/default/heldout_table.py "$lines" "$out" --model "$model" --heldout "$corpus/heldout"
