"""``elmo experiment CONFIG``: baseline vs +ELMo task runs over seeds (see
:mod:`elmo.tasks.experiment_config` for the config format)."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from . import DEVICE_CHOICES, threads_help


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "experiment", help="train task models with and without ELMo over seeds",
        description="Run the tasks and variants of an experiment config (JSON or TOML) on "
                    "identical splits over several seeds; write results.json, results.md and "
                    "layer_weights.png.")
    p.add_argument("config", help="experiment config file (.json or .toml)")
    p.add_argument("--out", "--output", "-o", dest="out", default=None,
                   help="results folder (default: the config's 'out', else "
                        "experiments/results/<name>)")
    p.add_argument("--seeds", type=int, default=None, help="override: use seeds 1..N")
    p.add_argument("--bilm", default=None, help="override the config's default biLM")
    p.add_argument("--threads", type=int, default=None,
                   help=threads_help("the config's 'threads', else torch's choice"))
    p.add_argument("--device", default=None,
                   help=f"{DEVICE_CHOICES} for the task models (default: the config's 'device', else cpu)")
    p.add_argument("--resume", action="store_true",
                   help="keep the runs already in results.json whose settings (and, with ELMo, "
                        "biLM files' SHA-256) match, and do the rest")
    p.add_argument("--overwrite", action="store_true",
                   help="start again when the results folder already holds results.json "
                        "(without --resume or --overwrite an existing one is an error)")
    p.add_argument("--save-models", action="store_true",
                   help="keep each trained model (best epoch) in OUT/models/<task>/<variant>/"
                        "seed-<n>/ for `elmo predict` and TaskModel.load")
    p.add_argument("--glove", default=None,
                   help="a GloVe file you have (text format, .gz included) for the baseline's "
                        "word vectors, instead of fetching glove-50d")
    p.add_argument("--variants", default=None,
                   help="comma-separated variant names: run only these now (e.g. the baseline "
                        "while the biLM is still training); --resume later runs the rest")
    p.add_argument("--plan", action="store_true",
                   help="print the tasks' sizes, the variants and the number of runs; train nothing")
    p.add_argument("--quiet", "--no-progress", action="store_true",
                   help="no progress lines, and no progress bars (drawn only where stderr is a terminal)")
    p.add_argument("--set", dest="config_set", action="append", default=[], metavar="KEY=VALUE",
                   help="set a setting of the config by its dotted name, after the options above "
                        "(e.g. --set train.lr=0.01, --set seeds=[1,2], --set variants.1.elmo.lambda=1); "
                        "VALUE is read as JSON when it parses; repeatable")
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved config (every default filled in) as JSON that "
                        "`elmo experiment` reads back, and stop")
    p.set_defaults(func=experiment)

    q = subparsers.add_parser(
        "experiment-table", help="one table from several experiments' results.json",
        description="List the summary rows of several `elmo experiment` results (each task in "
                    "its own metric, never averaged) as one markdown table.")
    q.add_argument("results", nargs="+", help="results.json files (or their folders)")
    q.add_argument("-o", "--output", "--out", default=None, help="write the table here (default, or '-': print)")
    q.set_defaults(func=experiment_table)

    r = subparsers.add_parser(
        "experiment-report", help="write an experiment's results.md and plots again from its results.json",
        description="Recompute the summary of stored `elmo experiment` results with this version "
                    "(e.g. the gains' 95% intervals) and write results.md and the plots again. "
                    "Nothing is trained; the runs, machine and times stay as recorded.")
    r.add_argument("results", nargs="+", help="results folders (or their results.json)")
    r.set_defaults(func=experiment_report)


def experiment(args: argparse.Namespace) -> int:
    from ..config import ConfigError
    from ..jobconfig import apply_assignments
    from ..tasks.experiment_config import MAX_SEEDS, RepeatedVariantError, check_variants_differ
    from ..tasks.experiment_config import expand_homes, normalise_config, read_config

    from ..checks import require_count

    from . import cli_device
    # (named as the config's keys: "CONFIG: threads must be ...", "CONFIG: seeds must be ...")
    if args.threads is not None:
        require_count("--threads", args.threads, least=0)
    if args.seeds is not None and not 1 <= args.seeds <= MAX_SEEDS:
        raise ValueError(f"--seeds must be a count from 1 to {MAX_SEEDS}; got {args.seeds}")
    if args.device is not None:    # (one line naming --device, before the config is read)
        cli_device(args.device)
    settings = read_config(args.config)
    if args.seeds is not None:
        settings["seeds"] = args.seeds
    if args.threads is not None:
        settings["threads"] = args.threads
    if args.bilm is not None:
        settings["bilm"] = args.bilm
    if args.device is not None:
        settings["device"] = args.device
    if args.glove is not None:
        settings["embeddings"] = {"glove": args.glove}
    source = f"{args.config}{' with --set' if args.config_set else ''}"
    try:
        cfg = normalise_config(expand_homes(apply_assignments(settings, args.config_set)))   # (--set out=~/r)
        if args.print_config:   # (plan and run_experiment check it themselves: once, not twice)
            check_variants_differ(cfg)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    if args.print_config:
        from ..redact import redact_record
        # (a biLM URL with a login, which the run refuses, is printed without its password)
        print(json.dumps(redact_record(_absolute_paths(cfg.to_dict()))[0], indent=2, default=str))
        return 0
    only = None
    if args.variants is not None:
        only = [v.strip() for v in args.variants.split(",") if v.strip()]
        if not only:  # '' ran every variant; ',' ran none, and with --overwrite emptied results.json
            raise ValueError(f"--variants {args.variants!r} names no variant; the config has "
                             f"{', '.join(v.name for v in cfg.variants)}")
    try:
        return _plan_or_run(args, cfg, only)
    except RepeatedVariantError as e:   # (their check's, of the config: named as the others are)
        raise ConfigError(f"{source}: {e}") from None


def _plan_or_run(args: argparse.Namespace, cfg, only) -> int:
    """``elmo experiment``'s plan (``--plan``) or its run of ``cfg``, whose results it prints."""
    from ..tasks.report import markdown
    from ..tasks.runner import plan, results_folder, run_experiment

    if args.plan:
        print("\n".join(plan(cfg, only)))
        return 0
    command = "elmo " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == [
        "experiment"] else f"elmo experiment {shlex.quote(args.config)}"
    from . import refuse_dash
    refuse_dash(args.out, "--out", "the experiment writes a folder (results, plots, logs): give its name",
                "folder")
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    from . import progress_bar_wanted
    results = run_experiment(cfg, out=args.out, resume=args.resume, command=command, log=log,
                             only_variants=only, overwrite=args.overwrite,
                             save_models=args.save_models, progress=progress_bar_wanted(not args.quiet))
    print(markdown(results))
    # (the report on stdout names no folder; a user running from their own folder asked where it went)
    folder = results_folder(cfg, args.out)
    written = [name + "/" * (name == "models") for name in _RESULT_FILES if (folder / name).exists()]
    print(f"elmo experiment: wrote {folder}/: {', '.join(written)}", file=sys.stderr)
    return 0


_RESULT_FILES = ("results.json", "results.md", "layer_weights.png", "training_sizes.png", "models")


def _absolute_paths(cfg: dict) -> dict:
    """The config with its data paths absolute, so that the printed config reads back from
    any folder (a relative path in a config file is relative to the file's folder)."""
    def absolute(p):
        return str(Path(p).resolve()) if isinstance(p, str) and p else p

    for t in cfg["tasks"]:
        if "data_dir" in t:
            t["data_dir"] = absolute(t["data_dir"])
        if isinstance(t.get("files"), dict):
            t["files"] = {k: absolute(v) for k, v in t["files"].items()}
    if isinstance(cfg["embeddings"], dict) and cfg["embeddings"].get("glove"):
        cfg["embeddings"]["glove"] = absolute(cfg["embeddings"]["glove"])
    # A biLM folder too: read_config found it beside the config or in the working folder, and
    # printed as written, relative, it named no model (or another one) read from elsewhere.
    cfg["bilm"] = _absolute_bilm(cfg["bilm"])
    for v in cfg["variants"]:
        if isinstance(v.get("elmo"), dict) and v["elmo"].get("bilm"):
            v["elmo"]["bilm"] = _absolute_bilm(v["elmo"]["bilm"])
    return cfg


def _absolute_bilm(spec):
    """A biLM spec with a relative local folder made absolute (``random:`` kept); a bundled or
    published name, a URL, or a name that is no folder here stays as it is."""
    from .. import which_model
    from ..tasks.bilms import RANDOM_PREFIX
    if not isinstance(spec, str):
        return spec
    prefix = RANDOM_PREFIX if spec.startswith(RANDOM_PREFIX) else ""
    # a local folder wins over a published name, as in loading; made absolute, the name would
    # no longer warn when loaded, so the warning comes here
    named = which_model(spec[len(prefix):])
    if named.kind != "local" or named.folder is None:
        return spec
    return prefix + str(named.folder.resolve())


def experiment_table(args: argparse.Namespace) -> int:
    from ..io import atomic_write_text
    from ..output_checks import check_output_file, check_replaceable
    from ..output_lock import output_lock, writer_of
    from ..tasks.compare import read_results, recomputed
    from ..tasks.report import TABLE_HEADER, combined_table

    if args.output == "-":   # stdout, as without -o (it wrote a file named '-')
        args.output = None
    if args.output:  # before reading: -o on one of the results.json replaced the results with the table
        check_output_file(Path(args.output), "table")
        for name in args.results:
            source = Path(name) / "results.json" if Path(name).is_dir() else Path(name)
            if source.resolve() == Path(args.output).resolve():
                raise ValueError(f"{args.output}: is one of the results to table; write the table to another file")
        check_replaceable(Path(args.output), TABLE_HEADER.encode(), "table of experiments")
    # An experiment writing a folder rewrites its results.json after each run: a table of it
    # was of the runs finished so far, without a word (experiment-report is refused then).
    for name in args.results:
        source = Path(name) / "results.json" if Path(name).is_dir() else Path(name)
        writer = writer_of(source)
        if writer is not None:
            print(f"elmo experiment-table: warning: {source} is being written by {writer} (an experiment "
                  f"runs there): its rows hold the runs finished so far", file=sys.stderr)
    # each row from the stored runs, as experiment-report computes it (not the stored summary)
    table = combined_table([recomputed(read_results(name, need=("config", "runs")), name)
                            for name in args.results], sources=args.results)
    if args.output:
        # (under TABLE.lock, checked again: a file another command wrote there meanwhile was replaced)
        with output_lock(Path(args.output)):
            check_replaceable(Path(args.output), TABLE_HEADER.encode(), "table of experiments")
            atomic_write_text(Path(args.output), table)
    else:
        print(table, end="")
    return 0


def experiment_report(args: argparse.Namespace) -> int:
    from ..tasks.runner import rewrite_reports

    for name in args.results:
        results = rewrite_reports(name, log=lambda s: print(f"elmo experiment-report: {s}", file=sys.stderr))
        print(f"{name}: {len(results['runs'])} runs, {len(results['summary'])} summary rows")
    return 0
