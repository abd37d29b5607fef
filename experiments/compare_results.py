"""One experiment's results under two biLMs, side by side.

    python experiments/compare_results.py experiments/results/pos-v1/results.json \
        experiments/results/pos/results.json --names v1 v3 -o experiments/results/pos/compare.md

Prints (and with ``-o`` also writes) a markdown report: per task and variant the test metric's
mean ± std (number of seeds) under each and the change; per ELMo variant its gain over the
baseline under each and the change of the gain. Each task keeps its own metric. The tables
are made by ``elmo.tasks.compare``.
"""
from __future__ import annotations

import argparse
import sys

from elmo.io import atomic_write_text
from elmo.tasks.compare import CompareError, comparison_markdown, read_results, recomputed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old", help="the first results.json (or its folder), e.g. with the older biLM")
    p.add_argument("new", help="the second results.json (or its folder)")
    p.add_argument("--names", nargs=2, default=("old", "new"), metavar=("OLD", "NEW"),
                   help="column names of the two results (default: old new)")
    p.add_argument("-o", "--output", default=None, help="also write the markdown here")
    args = p.parse_args(argv)
    try:
        # each side's config is read (its baseline), checked here: a results file without one
        # was a KeyError traceback
        old, new = (recomputed(read_results(path, need=("config", "runs")), path) for path in (args.old, args.new))
        text = comparison_markdown(old, new, args.names,
                                   (args.old, args.new))
    except CompareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(text, end="")
    if args.output:
        atomic_write_text(args.output, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
