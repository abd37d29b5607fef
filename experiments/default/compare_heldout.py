"""Models' held-out perplexity side by side, per source and pooled (the files that
experiments/default/perplexity.sh writes), and whether any source got worse under the last.

    python experiments/default/compare_heldout.py V1.json V2.json [V3.json ...] [--names v1 v2 v3]

The change columns compare the last model with each earlier one (average perplexity).
"""
import argparse
import json
from pathlib import Path

p = argparse.ArgumentParser(allow_abbrev=False)
p.add_argument("files", nargs="+", help="two or more perplexity.sh outputs, oldest first")
p.add_argument("--names", nargs="+", default=None, help="a column name per file (default: old, new or m1, m2, ...)")
args = p.parse_args()
if len(args.files) < 2:
    p.error("give two or more files")
names = args.names or (["old", "new"] if len(args.files) == 2 else [f"m{i}" for i in range(1, len(args.files) + 1)])
if len(names) != len(args.files):
    p.error(f"{len(args.files)} files but {len(names)} names")
models = [json.loads(Path(f).read_text()) for f in args.files]
last, earlier = names[-1], names[:-1]
print("| source | targets per direction | "
      + " | ".join(f"{n} forward / backward / average" for n in names) + " | "
      + " | ".join(f"{last} vs {n}" for n in earlier) + " |")
print("|---|---:|" + "---:|" * (len(names) + len(earlier)))
worse = []
rows = [(s, [m["sources"][s] for m in models]) for s in models[0]["sources"]]
rows.append(("**all (pooled over tokens)**", [m["all_pooled"] for m in models]))
for source, values in rows:
    targets = {v["targets"] for v in values}
    if len(targets) != 1:
        raise SystemExit(f"{source}: the files count different targets ({sorted(targets)})")
    changes = [values[-1]["ppl"] / v["ppl"] - 1 for v in values[:-1]]
    if changes[-1] > 0:
        worse.append(source)
    print(f"| {source} | {values[0]['targets']:,} | "
          + " | ".join(f"{v['ppl_fwd']:.1f} / {v['ppl_bwd']:.1f} / {v['ppl']:.1f}" for v in values) + " | "
          + " | ".join(f"{100 * c:+.1f}%" for c in changes) + " |")
print(f"\nsources worse under {last} than under {earlier[-1]}: {', '.join(worse) if worse else 'none'}")
