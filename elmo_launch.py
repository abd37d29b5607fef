"""The ``elmo`` console command's entry point, a module outside the ``elmo`` package.

A command loads torch when it runs (its ``--help`` does not): about a second in which Ctrl-C
was Python's traceback of an import. :func:`elmo.cli.main` catches it there (``import elmo``
loads no torch itself: its names load their modules when first used), and this module,
imported first, catches it in the moment before (one line, status 130, as Ctrl-C during a
command), then runs :func:`elmo.cli.main`.
"""
from __future__ import annotations

import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    try:
        from elmo.cli import main as run
    except KeyboardInterrupt:
        # (nothing has run or been written yet; the package's import is simply abandoned)
        if sys.stderr is not None:
            print("elmo: interrupted", file=sys.stderr)
        return 130
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
