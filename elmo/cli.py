"""The ``elmo`` command. Each job is a subcommand; this file only parses arguments and calls
library functions, so every job is also a Python call.

Subcommands live beside the code they drive: each module in ``COMMAND_MODULES`` has a
``register(subparsers)`` function that adds its subcommands and sets ``func`` on them.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

#: Modules that add subcommands, in the order they appear in ``elmo --help``.
COMMAND_MODULES = [
    "elmo.commands.core",
    "elmo.commands.models",
    "elmo.commands.train",
    "elmo.commands.data",
    "elmo.commands.embed",
    "elmo.commands.analysis",
    "elmo.commands.tasks",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo",
        description="ELMo: deep contextualised word representations. Load the original weights, "
                    "embed text, train and adapt biLMs, and measure what the layers hold.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def _version() -> str:
    from . import __version__
    return __version__


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from .config import ConfigError
    from .hub.download import DownloadError
    from .weights import WeightFileError
    try:
        result = args.func(args)
    except (ConfigError, WeightFileError, DownloadError, FileNotFoundError, ValueError) as e:
        # Expected user errors: one clear line, no traceback.
        print(f"elmo {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"elmo {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
