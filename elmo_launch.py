"""The ``elmo`` console command's entry point, a module outside the ``elmo`` package.

Importing anything of ``elmo`` imports the package, and with it torch: about a second in
which Ctrl-C was Python's traceback of an import. This module is imported first and catches
it there (one line, status 130, as Ctrl-C during a command), then runs :func:`elmo.cli.main`.
``import elmo`` from Python is unchanged.
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
