"""Training subcommands: ``elmo vocab build``, ``elmo train``, ``elmo finetune``,
``elmo perplexity`` and ``elmo plot-curve``. They only parse arguments; the work is done by
:mod:`elmo.training` and :mod:`elmo.data`."""
from __future__ import annotations

import argparse
import copy
import itertools
import sys
from pathlib import Path
from typing import Optional, overload

from .. import strict_json
from . import DEVICE_HELP, TORCH_CHOICE, cli_device, set_cli_threads, threads_help


def _filters(text: str):
    """'1:32,2:32,3:64' -> [[1, 32], [2, 32], [3, 64]]."""
    try:
        return [[int(w), int(n)] for w, n in (part.split(":") for part in text.split(","))]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected width:count pairs like 1:32,2:64, got {text!r}") from None


@overload
def _model_folder(name_or_path: str) -> str: ...
@overload
def _model_folder(name_or_path: None) -> None: ...
def _model_folder(name_or_path: Optional[str]) -> Optional[str]:
    """A trained model's folder: the path as given, else the folder of a bundled or published
    model of that name (``elmo perplexity default TEXT``, ``--from default``)."""
    if not name_or_path or Path(name_or_path).exists():
        return name_or_path
    import elmo
    return str(elmo.model_path(name_or_path))


def _add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (a new model; not with --from)")
    g.add_argument("--options", help="an options.json to take the model shape from; the flags below override it")
    g.add_argument("--dim", type=int, help="LSTM cells per layer (default 1024)")
    g.add_argument("--projection-dim", type=int, help="LSTM projection = token vector width (default 128)")
    g.add_argument("--n-layers", type=int, help="LSTM layers per direction (default 2)")
    g.add_argument("--filters", type=_filters,
                   help="character CNN filters as width:count pairs (default 1:32,2:32,3:64,4:128,5:256,6:512,7:1024)")
    g.add_argument("--n-highway", type=int, help="highway layers after the CNN (default 1)")
    g.add_argument("--char-dim", type=int, help="character embedding width (default 16)")
    g.add_argument("--no-skip-connections", action="store_true", help="no residual connection between LSTM layers")


def _add_run_args(p: argparse.ArgumentParser, *, finetune: bool) -> None:
    """The options of a training run, made from :class:`~elmo.training.config.TrainConfig`."""
    from ..jobconfig import add_arguments, add_config_arguments
    from ..training.config import TrainConfig

    if finetune:
        p.add_argument("--from", dest="init_from", required=True,
                       help="trained model folder (OUTPUT/model of elmo train), or a model's name, such as "
                            "the bundled `default`")
        p.add_argument("--output", "-o", "--out", required=True, help="run folder; the adapted model goes to OUTPUT/model")
    g = p.add_argument_group("training")
    add_arguments(g, TrainConfig, exclude={"vocab", "output", "valid", "init_from"} if finetune else set(),
                  defaults=_FINETUNE_DEFAULTS if finetune else None, helps=_FINETUNE_HELPS if finetune else None)
    g.add_argument("--threads", type=int, help=threads_help(TORCH_CHOICE))
    add_config_arguments(p, example="lr=0.01")


_FINETUNE_DEFAULTS = {"epochs": 1.0}
#: finetune validates on its held-out text and has no --valid, which train's help asks for
_FINETUNE_HELPS = {"lr_decay": "multiply the learning rate by this at every validation run whose perplexity on the "
                               "held-out text is not --lr-decay-threshold below the best so far (needs "
                               "--eval-every; 1 = never; Kim et al. 2016 halve it: 0.5)"}


def register(subparsers) -> None:
    # ---------------------------------------------------------------- vocab build
    p = subparsers.add_parser("vocab", help="build a vocabulary file from a corpus",
                              description="Vocabulary files in the original format.")
    sub = p.add_subparsers(dest="vocab_command", metavar="ACTION", required=True)
    b = sub.add_parser("build", help="count a corpus and write its vocabulary",
                       description="Write <S>, </S>, <UNK>, then the words by descending frequency, one a "
                                   "line (the original format), and word<TAB>count beside it (OUTPUT's name with "
                                   ".counts.tsv; see --counts). elmo train reads the counts from there.")
    b.add_argument("corpus", nargs="+", help="files, globs or folders; one tokenized sentence a line; .gz ok")
    b.add_argument("--output", "-o", "--out", required=True, help="vocabulary file to write")
    b.add_argument("--min-count", type=int, default=1, help="drop words seen fewer times (default 1)")
    b.add_argument("--max-size", type=int,
                   help="at most this many entries, specials included (default: no limit)")
    b.add_argument("--counts", help="where to write word<TAB>count (default: OUTPUT with .counts.tsv, where "
                                    "elmo train --vocab OUTPUT finds them; elsewhere, give train --vocab COUNTS)")
    b.add_argument("--quiet", "--no-progress", action="store_true", help="no progress counter")
    b.set_defaults(func=vocab_build)

    # ---------------------------------------------------------------- train
    p = subparsers.add_parser(
        "train", help="train a biLM from scratch (resumes when OUTPUT has checkpoints)",
        description="Train a bidirectional language model on plain text (one tokenized sentence a line). "
                    "Writes OUTPUT/log.jsonl, OUTPUT/checkpoints/ and, at the end, OUTPUT/model/ (options.json + "
                    "weights.hdf5 in the original layout, softmax and vocabulary). Run it again with the same "
                    "OUTPUT to resume exactly. Under torchrun it trains data-parallel.",
        epilog="example: elmo vocab build shards/ -o vocab.txt && "
               "elmo train shards/ --vocab vocab.txt --output run1 --valid heldout.txt")
    # (left out, the text is the --config file's "train", as --print-config wrote it)
    p.add_argument("corpus", nargs="*", help="training text: files, globs or folders of shards; .gz ok "
                                             "(with --config FILE: the file's when left out)")
    _add_model_args(p)
    _add_run_args(p, finetune=False)
    p.set_defaults(func=train, usage_error=p.error)

    # ---------------------------------------------------------------- finetune
    p = subparsers.add_parser(
        "finetune", help="adapt a trained biLM to a task's unlabelled text",
        description="Continue training a trained biLM (a folder written by elmo train) on new text, keeping its "
                    "vocabulary; one epoch by default. Reports held-out perplexity on that text before and "
                    "after, and records the text in the model's metadata (adapted_on).")
    p.add_argument("text", nargs="+", help="the task's text: files, globs or folders")
    p.add_argument("--heldout", nargs="*", default=None,
                   help="held-out text (default: every 10th sentence of TEXT is held out)")
    p.add_argument("--heldout-every", type=int, default=None,
                   help="hold out every N-th sentence (default 10; not with --heldout)")
    _add_run_args(p, finetune=True)
    p.set_defaults(func=finetune)

    # ---------------------------------------------------------------- perplexity
    p = subparsers.add_parser(
        "perplexity", help="full-softmax perplexity of a trained biLM on a text",
        description="Forward, backward and average perplexity (full softmax). Every sentence is read from a "
                    "zero state, as ELMo embeds it, so the result does not depend on --batch-size; with "
                    "--carry-state the text is read as one stream with the state carried through it (the "
                    "usual Penn Treebank protocol). Counts each word plus one sentence boundary per "
                    "sentence and direction; words outside the vocabulary are <UNK> targets (their "
                    "number is shown). The average is exp of the mean of the two directions' losses "
                    "(the geometric mean of their perplexities).")
    p.add_argument("model", help="trained model folder (with softmax.hdf5 and vocab.txt), or a model's name, "
                                 "such as the bundled `default`")
    p.add_argument("text", nargs="+", help="files, globs or folders")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per batch (speed only; default 32)")
    p.add_argument("--carry-state", action="store_true",
                   help="read the text as one stream, sentence after sentence, the LSTM state carried "
                        "through it (the sentences' order matters) instead of each sentence from a zero state")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--threads", type=int, help=threads_help(TORCH_CHOICE))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", "--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=perplexity)

    # ---------------------------------------------------------------- plot-curve
    p = subparsers.add_parser("plot-curve", help="draw a training log's learning curve to PNG",
                              description="Plot training loss/perplexity against tokens seen and validation "
                                          "perplexity against epochs from one or more log.jsonl files (needs matplotlib: "
                                          "pip install 'elmo-pytorch[plots]').")
    p.add_argument("log", nargs="+", help="log.jsonl files (or run folders)")
    p.add_argument("--output", "-o", "--out", required=True, help="PNG file to write")
    p.add_argument("--title", default=None, help="a title above the plots (default: none)")
    p.set_defaults(func=plot_curve)


def _threads(args) -> None:
    set_cli_threads(getattr(args, "threads", None))


_MODEL_FLAGS = ("options", "dim", "projection_dim", "n_layers", "filters", "n_highway", "char_dim")


def _model_flags_given(args) -> bool:
    return args.no_skip_connections or any(getattr(args, flag) is not None for flag in _MODEL_FLAGS)


def _model_options(args, base: Optional[dict] = None) -> dict:
    """The model's options: ``--options`` (or ``base``, or the preset ``TRAIN_PRESET``), then the flags."""
    from ..config import TRAIN_PRESET, ElmoOptions, preset_dict

    if args.options:
        opts = ElmoOptions.from_file(args.options).to_dict()
    else:
        opts = copy.deepcopy(base) if base else preset_dict(TRAIN_PRESET)
    lstm, cnn = opts["lstm"], opts["char_cnn"]
    for flag, key in (("dim", "dim"), ("projection_dim", "projection_dim"), ("n_layers", "n_layers")):
        if getattr(args, flag) is not None:
            lstm[key] = getattr(args, flag)
    if args.no_skip_connections:
        lstm["use_skip_connections"] = False
    if args.filters is not None:
        cnn["filters"] = args.filters
    if args.n_highway is not None:
        cnn["n_highway"] = args.n_highway
    if args.char_dim is not None:
        cnn["embedding"] = {"dim": args.char_dim}
    ElmoOptions.from_dict(opts)  # fail early, naming the key
    return {"lstm": lstm, "char_cnn": cnn}


def vocab_build(args) -> int:
    from ..training.vocab_build import build_vocabulary_files
    from . import progress_bar_wanted, refuse_dash

    # (it wrote files named '-' and '-.counts.tsv': the counts cannot go to stdout beside it)
    refuse_dash(args.output, "-o", "the vocabulary is written to a file and its counts beside it "
                                   "(where elmo train --vocab finds them), not to stdout: give a file name")
    refuse_dash(args.counts, "--counts", "the counts are written to a file, not to stdout: give a file name")
    info = build_vocabulary_files(args.corpus, args.output, min_count=args.min_count, max_size=args.max_size,
                                  progress=progress_bar_wanted(not args.quiet),
                                  counts_path=args.counts)
    print(f"wrote {info['vocab']} ({info['size']:,} entries, {info['covered']:.2%} of tokens covered) "
          f"and {info['counts']}")
    if "note" in info:
        print(f"note: {info['note']}", file=sys.stderr)
    return 0


def _refuse_dash_output(cfg) -> None:
    from . import refuse_dash
    # (it trained into a folder named '-')
    refuse_dash(cfg.output, "--output", "a training run writes a folder (checkpoints, log.jsonl, model/): give its name",
                "folder")


def _bar_on_a_terminal_only(cfg):
    """The run's settings with the progress bar off unless stderr is a terminal (see
    :func:`elmo.commands.progress_bar_wanted`; log.jsonl records the run either way)."""
    from dataclasses import replace

    from . import progress_bar_wanted
    return replace(cfg, progress=progress_bar_wanted(cfg.progress))


def _run_job(command: str, job, note=None) -> int:
    """Run a training job and print its summary as JSON; a failed write is one line, exit 1.
    ``note(summary)``, when given, is a line for a reader, printed on stderr after the JSON.

    Under torchrun every process runs the job, but only rank 0 prints the summary: the
    output is then one JSON object, as it is for a single process.
    """
    from ..training.checkpoint import RunWriteError
    from ..training.distributed import is_main_process

    try:
        summary = job()
    except RunWriteError as e:  # e.g. a full disk: one line, the previous checkpoint is kept
        print(f"elmo {command}: error: {e}", file=sys.stderr)
        return 1
    if is_main_process():
        print(strict_json.dumps(summary, indent=2, default=str))
        if note is not None:
            print(note(summary), file=sys.stderr)
    return 0


def _adaptation_note(summary: dict) -> str:
    """finetune's outcome in words, as ``elmo info`` gives it (the JSON buries it in objects)."""
    def figure(ppl) -> str:   # (a start record read back on resume may hold strict JSON's "nan")
        return f"{ppl:,.1f}" if isinstance(ppl, (int, float)) else str(ppl)

    return (f"held-out perplexity {figure(summary['before']['ppl'])} before adapting, "
            f"{figure(summary['after']['ppl'])} after ({summary['heldout_sentences']} sentences); "
            f"the adapted model: {summary['model']}")


def _refuse_shape_with_from(cfg) -> None:
    """A run from a trained model keeps that model's shape: model options from --config or
    --set (``--set options.lstm.dim=8``) were dropped without a word, as the flags are not."""
    from ..config import ConfigError

    if cfg.init_from and cfg.options:
        raise ConfigError(f"options ({', '.join(sorted(cfg.options))}, from --config or --set) do not apply "
                          f"with --from: a warm start keeps the model's shape")


def train(args) -> int:
    from ..config import ConfigError
    from ..jobconfig import from_args, print_config_and_exit, read_json
    from ..training.export import VOCAB_FILE
    from ..training.config import TrainConfig, with_recipe_defaults
    from ..training.trainer import train as run

    from_file = read_json(args.config_file) if args.config_file else {}
    if not args.corpus and not from_file.get("train"):   # (a usage error, as a missing argument is)
        args.usage_error("the following arguments are required: corpus (or --config FILE that names it)")
    _threads(args)
    file_options = from_file.get("options")
    if getattr(args, "init_from", None):
        args.init_from = _model_folder(args.init_from)
    init_from = getattr(args, "init_from", None) or from_file.get("init_from")
    options: Optional[dict]
    if init_from:  # the model brings its own shape
        if _model_flags_given(args):
            raise ConfigError("the model flags (--options, --dim, ...) do not apply with --from: "
                              "a warm start keeps the model's shape")
        options = None if file_options is not None else {}
    else:
        options = None if file_options and not _model_flags_given(args) else _model_options(args, file_options)
    # a warm start keeps the model's vocabulary unless one is named
    defaults = {"vocab": str(Path(init_from) / VOCAB_FILE)} if init_from else None
    cfg = from_args(TrainConfig, args, defaults=defaults, given={"train": list(args.corpus) or None, "options": options},
                    config_values=from_file)
    _refuse_shape_with_from(cfg)
    _refuse_dash_output(cfg)
    if print_config_and_exit(with_recipe_defaults(cfg), args):   # (the values the run would take)
        return 0
    cfg = _bar_on_a_terminal_only(cfg)
    return _run_job("train", lambda: run(cfg))


def finetune(args) -> int:
    from ..jobconfig import from_args, print_config_and_exit
    from ..training.finetune import finetune as run, heldout_file
    from ..training.config import TrainConfig, with_recipe_defaults

    _threads(args)
    if args.heldout == []:   # (it held out every N-th sentence as if --heldout were not given)
        raise ValueError("--heldout names no file: give the held-out text, or leave it out to hold out "
                         "every --heldout-every-th sentence")
    if args.heldout and args.heldout_every is not None:   # (it was ignored without a word)
        raise ValueError(f"--heldout-every {args.heldout_every} applies without --heldout: the held-out text "
                         f"is then every N-th sentence of TEXT, not the files --heldout names")
    heldout_every = 10 if args.heldout_every is None else args.heldout_every
    args.init_from = _model_folder(args.init_from)
    # validated on the held-out text it writes to OUTPUT, known from the start (--lr-decay was
    # refused as if there were none, asking for --valid, which finetune does not have)
    cfg = from_args(TrainConfig, args, defaults=_FINETUNE_DEFAULTS,
                    given={"train": list(args.text), "vocab": "", "output": args.output, "init_from": args.init_from,
                           "valid": [str(heldout_file(args.output))]})
    _refuse_shape_with_from(cfg)
    _refuse_dash_output(cfg)
    if print_config_and_exit(with_recipe_defaults(cfg), args):   # (the values the run would take)
        return 0
    cfg = _bar_on_a_terminal_only(cfg)
    return _run_job("finetune", lambda: run(cfg, heldout=args.heldout, heldout_every=heldout_every),
                    note=_adaptation_note)


def perplexity(args) -> int:
    from ..checks import require_count
    from ..data.corpus import count_tokens, expand_paths_in_order, iter_file_sentences
    from ..data.text_choice import HELDOUT_HINT, check_not_whole_corpus, trained_files
    from ..training.evaluate import perplexity as ppl
    from ..training.export import load_language_model, read_metadata

    from . import progress_bar_wanted
    _threads(args)
    device = cli_device(args.device)
    require_count("--batch-size", args.batch_size)   # (named batch_size, as the API calls it)
    check_not_whole_corpus("text", args.text, HELDOUT_HINT)   # (its train.txt measured as if held out)
    folder = _model_folder(args.model)
    model, vocab = load_language_model(folder, device=device)
    # in the order the files are named (sorted, b.txt a.txt was read as a.txt b.txt: another
    # context for --carry-state, silently); read as ppl() goes, never listed (a large text was
    # held in memory whole)
    files = expand_paths_in_order(args.text)
    sentences = iter_file_sentences(files)
    first = next(sentences, None)
    if first is None:  # the files named, not a bare "no text to evaluate"
        raise ValueError(f"{', '.join(args.text)}: no text to evaluate (only empty or blank lines)")
    sentences = itertools.chain([first], sentences)
    progress = progress_bar_wanted(not args.quiet)
    total = None
    if progress:   # (the text is read as it goes: a second streaming pass counts its targets for the bar)
        counted = count_tokens(files, boundaries=False)
        total = counted["tokens"] + counted["sentences"]   # the forward targets: words and each </S>
    try:
        result = ppl(model, sentences, vocab, args.batch_size, device, carry_state=args.carry_state,
                     progress=progress, progress_total=total)
    except FloatingPointError as e:
        raise FloatingPointError(f"{args.model}: {e}") from e
    definition = "carried state" if args.carry_state else "stateless"
    # (a figure on the model's own training text was shown as any other, read as held-out)
    trained = [str(p) for p in trained_files(files, read_metadata(folder))]
    if trained:
        print(f"note: {', '.join(trained)}: text this model was trained on (its metadata.json says so); this "
              f"is not a held-out perplexity", file=sys.stderr)
    if args.json:
        print(strict_json.dumps({**result, "definition": definition, "training_text": trained}))
    else:
        unknown = (f", {result['unk_targets']:,} of them <UNK> (words outside the vocabulary, predicted as one "
                   f"class)" if result["unk_targets"] else "")
        print(f"forward {result['ppl_fwd']:.2f}  backward {result['ppl_bwd']:.2f}  average {result['ppl']:.2f}  "
              f"({result['targets']:,} targets per direction{unknown}; {definition})")
    return 0


def plot_curve(args) -> int:
    from ..training.curves import plot_learning_curve

    from . import refuse_dash
    refuse_dash(args.output, "-o", "the plot is written to a PNG file, not to stdout: give a file name")
    path = plot_learning_curve(args.log, args.output, title=args.title)
    print(f"wrote {path}")
    return 0
