#!/usr/bin/env bash
# Forward, backward and average perplexity of the bundled default model on each source's
# held-out text (the table of elmo/resources/default/MODEL_CARD.md). Run from the repository
# root; one `elmo perplexity` per source, full softmax, one thread each (about 1 min per
# source), JOBS of them at once (default 1).
#   [JOBS=2] bash experiments/default/perplexity.sh [MODEL] [OUT.json]
set -euo pipefail
corpus=${ELMO_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/elmo}/corpus
model=${1:-elmo/resources/default}
out=${2:-experiments/default/heldout_ppl.json}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%s\n' "$corpus"/heldout/*.txt | xargs -P "${JOBS:-1}" -I{} sh -c \
  'name=$(basename "$1" .txt); echo "$name $(elmo perplexity "$2" "$1" --threads 1 --json)" > "$3/$name.line"' \
  _ {} "$model" "$work"
cat "$work"/*.line > "$work/lines"
python experiments/default/heldout_table.py "$work/lines" "$out" --model "$model" --heldout "$corpus/heldout"
