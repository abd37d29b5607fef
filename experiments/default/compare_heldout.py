"""Two models' held-out perplexity side by side, per source and pooled (the files that
experiments/default/perplexity.sh writes), and whether any source got worse.

    python experiments/default/compare_heldout.py OLD.json NEW.json [--names v1 v2]
"""
import argparse
import json
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("old")
p.add_argument("new")
p.add_argument("--names", nargs=2, default=["old", "new"])
args = p.parse_args()
old, new = (json.loads(Path(f).read_text()) for f in (args.old, args.new))
a, b = args.names
print(f"| source | targets per direction | {a} forward / backward / average | {b} forward / backward / average "
      f"| change of the average |")
print("|---|---:|---:|---:|---:|")
worse = []
rows = [(s, old["sources"][s], new["sources"][s]) for s in old["sources"]]
rows.append(("**all (pooled over tokens)**", old["all_pooled"], new["all_pooled"]))
for source, o, n in rows:
    if o["targets"] != n["targets"]:
        raise SystemExit(f"{source}: {o['targets']} targets in {args.old}, {n['targets']} in {args.new}")
    change = n["ppl"] / o["ppl"] - 1
    if change > 0:
        worse.append(source)
    print(f"| {source} | {o['targets']:,} | {o['ppl_fwd']:.1f} / {o['ppl_bwd']:.1f} / {o['ppl']:.1f} "
          f"| {n['ppl_fwd']:.1f} / {n['ppl_bwd']:.1f} / {n['ppl']:.1f} | {100 * change:+.1f}% |")
print(f"\nsources worse under {b}: {', '.join(worse) if worse else 'none'}")
