"""Collect the per-source lines of perplexity.sh ("source {json of elmo perplexity}") into a
JSON file and print the model card's markdown table, with each source's share of tokens that
are not in the model's vocabulary (they are predicted as <UNK>, which flatters perplexity)."""
import argparse
import json
import math
from pathlib import Path

from elmo.io import atomic_write_text

p = argparse.ArgumentParser(allow_abbrev=False)
p.add_argument("lines")
p.add_argument("out")
p.add_argument("--model", required=True)
p.add_argument("--heldout", required=True, help="folder of the held-out files, SOURCE.txt")
args = p.parse_args()
vocab = set(Path(args.model, "vocab.txt").read_text(encoding="utf-8").split("\n"))

rows = {}
for line in Path(args.lines).read_text().splitlines():
    source, result = line.split(" ", 1)
    rows[source] = json.loads(result)
    tokens = Path(args.heldout, f"{source}.txt").read_text(encoding="utf-8").split()
    rows[source]["oov_rate"] = sum(t not in vocab for t in tokens) / len(tokens)
targets = sum(r["targets"] for r in rows.values())
loss_f = sum(r["loss_fwd"] * r["targets"] for r in rows.values()) / targets
loss_b = sum(r["loss_bwd"] * r["targets"] for r in rows.values()) / targets
pooled = {"ppl_fwd": math.exp(loss_f), "ppl_bwd": math.exp(loss_b), "ppl": math.exp((loss_f + loss_b) / 2),
          "targets": targets}
command = f"elmo perplexity {args.model} $ELMO_DATA/corpus/heldout/SOURCE.txt --threads 1 --json"
atomic_write_text(args.out, json.dumps({"model": args.model, "command": command, "sources": rows,
                                        "all_pooled": pooled}, indent=2) + "\n")
print("| source | targets per direction | not in vocabulary | forward | backward | average |")
print("|---|---:|---:|---:|---:|---:|")
for source, r in rows.items():
    print(f"| {source} | {r['targets']:,} | {100 * r['oov_rate']:.1f}% | {r['ppl_fwd']:.1f} | {r['ppl_bwd']:.1f} | "
          f"{r['ppl']:.1f} |")
print(f"| **all (pooled over tokens)** | {targets:,} | | {pooled['ppl_fwd']:.1f} | {pooled['ppl_bwd']:.1f} | "
      f"{pooled['ppl']:.1f} |")
