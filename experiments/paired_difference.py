"""Two variants of one experiment, paired by seed: mean difference of the test metric with a
95% Student-t interval (``elmo.tasks.paired``).

    python experiments/paired_difference.py experiments/results/pos/results.json pos \
        elmo-input last-only                   # all layers against the last (Table 2)
    python experiments/paired_difference.py experiments/results/ner/results.json ner \
        elmo-input elmo-output                 # input against output (Table 3)

Prints ``A - B: mean ± std (n seeds), 95% interval LOW to HIGH, paired t T`` in the task's own
metric (``--metric spearman``: a regression task's Spearman rho instead of its Pearson r).
Several pairs at once: repeat ``--pair A B``.
"""
from __future__ import annotations

import argparse
import sys

from elmo.tasks.compare import CompareError, read_results
from elmo.tasks.paired import difference_text, paired_difference


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("results", help="a results.json (or its folder)")
    p.add_argument("task", help="the task's name in the experiment, e.g. pos or sentiment5")
    p.add_argument("variants", nargs="*", metavar="VARIANT", help="two variants: A B (A - B is printed)")
    p.add_argument("--pair", nargs=2, action="append", default=[], metavar=("A", "B"),
                   help="one more pair of variants (repeatable)")
    p.add_argument("--level", type=float, default=0.95, help="the interval's level (default 0.95)")
    p.add_argument("--metric", default=None,
                   help="another test metric the runs record (e.g. spearman of a regression task; "
                        "default: the task's own)")
    args = p.parse_args(argv)
    pairs = list(args.pair)
    if args.variants:
        if len(args.variants) != 2:
            p.error("name two variants, A and B")
        pairs.insert(0, args.variants)
    if not pairs:
        p.error("name two variants (A B) or give --pair A B")
    try:
        results = read_results(args.results)
        for a, b in pairs:
            diff = paired_difference(results, args.task, a, b, level=args.level, metric=args.metric)
            on = f" ({args.metric})" if args.metric else ""
            print(f"{args.task}{on}: {a} - {b}: {difference_text(diff, args.level)}")
    except (CompareError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
