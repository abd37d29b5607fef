"""One experiment's results under two biLMs, side by side.

    python experiments/compare_results.py experiments/results/pos-v1/results.json \
        experiments/results/pos/results.json --names v1 v3 -o experiments/results/pos/compare.md

Prints (or with ``-o FILE`` writes there, as ``elmo experiment-table -o`` does; ``-o -``
prints) a markdown report: per task and variant the test metric's
mean ± std (number of seeds) under each and the change; per ELMo variant its gain over the
baseline under each and the change of the gain. Each task keeps its own metric. The tables
are made by ``elmo.tasks.compare``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from elmo.io import OutputError, atomic_write_text
from elmo.output_checks import check_output_file, check_replaceable
from elmo.output_lock import output_lock
from elmo.tasks.compare import COMPARISON_HEADER, CompareError, comparison_markdown, read_results, recomputed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("old", help="the first results.json (or its folder), e.g. with the older biLM")
    p.add_argument("new", help="the second results.json (or its folder)")
    p.add_argument("--names", nargs=2, default=("old", "new"), metavar=("OLD", "NEW"),
                   help="column names of the two results (default: old new)")
    p.add_argument("-o", "--output", default=None, help="write the markdown here (default, or '-': print)")
    args = p.parse_args(argv)
    if args.output == "-":   # stdout, as without -o (as elmo experiment-table -o - does)
        args.output = None
    try:
        if args.output:  # before reading: -o naming one of the results replaced it with the markdown
            _check_output(Path(args.output), (args.old, args.new))
        # each side's config is read (its baseline), checked here: a results file without one
        # was a KeyError traceback
        old, new = (recomputed(read_results(path, need=("config", "runs")), path) for path in (args.old, args.new))
        text = comparison_markdown(old, new, args.names,
                                   (args.old, args.new))
        if args.output:
            # (under FILE.lock, checked again: a file another command wrote there meanwhile was replaced)
            with output_lock(Path(args.output)):
                check_replaceable(Path(args.output), COMPARISON_HEADER.encode(), "comparison of two results")
                atomic_write_text(args.output, text)
        else:
            print(text, end="")
    except (CompareError, OutputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _check_output(output: Path, inputs) -> None:
    """Refuse an output that is one of the results compared, a folder, or a file that is no
    earlier comparison (a results.json or config given to -o by mistake is kept)."""
    check_output_file(output, "comparison")
    for name in inputs:
        source = Path(name) / "results.json" if Path(name).is_dir() else Path(name)
        if source.resolve() == output.resolve():
            raise CompareError(f"{output}: is one of the results compared; write the comparison to another file")
    check_replaceable(output, COMPARISON_HEADER.encode(), "comparison of two results")


if __name__ == "__main__":
    sys.exit(main())
