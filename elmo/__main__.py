"""``python -m elmo``: the ``elmo`` command.

Python imports the package before this module; ``import elmo`` imports no torch (its names
load when first used), so a Ctrl-C while the commands and torch load is caught by
:func:`elmo.cli.main` and is one line with status 130, as under the ``elmo`` console command
(``elmo_launch``)."""
import sys

try:
    from .cli import main
except KeyboardInterrupt:   # (nothing has run or been written yet)
    if sys.stderr is not None:
        print("elmo: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
