"""Training subcommands: ``elmo vocab build``, ``elmo train``, ``elmo finetune``,
``elmo perplexity`` and ``elmo plot-curve``. They only parse arguments; the work is done by
:mod:`elmo.training` and :mod:`elmo.data`."""
from __future__ import annotations

import argparse
import json
import sys


def _filters(text: str):
    """'1:32,2:32,3:64' -> [[1, 32], [2, 32], [3, 64]]."""
    try:
        return [[int(w), int(n)] for w, n in (part.split(":") for part in text.split(","))]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected width:count pairs like 1:32,2:64, got {text!r}") from None


def _add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (a new model; ignored with --from)")
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
    g = p.add_argument_group("training")
    g.add_argument("--batch-size", type=int, default=128, help="rows per process (default 128)")
    g.add_argument("--unroll-steps", type=int, default=20, help="time steps per batch (default 20)")
    g.add_argument("--layout", choices=["packed", "bucketed"], default="packed",
                   help="packed: sentences end to end, state carried across batches (the original); "
                        "bucketed: one sentence a row, zero state (default packed)")
    g.add_argument("--state-reset-every", type=int, default=0,
                   help="packed layout: zero each row's carried state every K batches, staggered over the rows "
                        "(bounds the context age; 0 = carry forever, as the original)")
    g.add_argument("--epochs", type=float, default=1.0 if finetune else 10.0,
                   help=f"passes over the text (default {1 if finetune else 10})")
    g.add_argument("--max-steps", type=int, help="stop after this many steps (overrides --epochs)")
    g.add_argument("--max-hours", type=float, help="stop after this much training time, then evaluate and export")
    g.add_argument("--optimizer", choices=["adagrad", "adam"], default="adagrad", help="default adagrad")
    g.add_argument("--lr", type=float, help="learning rate (default 0.2 for adagrad, 0.001 for adam)")
    g.add_argument("--adagrad-init", type=float, default=1.0, help="Adagrad initial accumulator (default 1.0)")
    g.add_argument("--clip-norm", type=float, default=10.0, help="global gradient-norm clip (default 10)")
    g.add_argument("--dropout", type=float, default=0.1, help="on LSTM inputs and before the softmax (default 0.1)")
    g.add_argument("--negatives", type=int, default=8192,
                   help="shared sampled-softmax negatives per batch; 0 = full softmax (default 8192)")
    g.add_argument("--no-shuffle", action="store_true", help="read shards and sentences in file order")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--checkpoint-every", type=int, default=1000, help="steps between checkpoints (default 1000)")
    g.add_argument("--keep-checkpoints", type=int, default=3, help="newest checkpoints kept (default 3)")
    g.add_argument("--log-every", type=int, default=20, help="steps between log lines (default 20)")
    g.add_argument("--eval-every", type=int, default=0, help="steps between validation runs (default: at the end)")
    g.add_argument("--eval-batch-size", type=int, default=32)
    g.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default: CUDA when present)")
    g.add_argument("--bf16", action="store_true", help="bfloat16 autocast (opt-in; default exact fp32)")
    g.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("--allow-change", type=lambda t: [x for x in t.split(",") if x], default=[],
                   metavar="SETTING[,SETTING]",
                   help="on resume, let these settings differ from the checkpoint's: lr, state-reset-every, "
                        "dropout, clip-norm, bf16 (e.g. a learning-rate decay between phases). Run length, "
                        "intervals, validation text, device and threads may always change; anything else is "
                        "refused")


def register(subparsers) -> None:
    # ---------------------------------------------------------------- vocab build
    p = subparsers.add_parser("vocab", help="build a vocabulary file from a corpus",
                              description="Vocabulary files in the original format.")
    sub = p.add_subparsers(dest="vocab_command", metavar="ACTION")
    b = sub.add_parser("build", help="count a corpus and write its vocabulary",
                       description="Write <S>, </S>, <UNK>, then the words by descending frequency, one a "
                                   "line (the original format), and word<TAB>count beside it (OUTPUT's name with "
                                   ".counts.tsv; see --counts). elmo train reads the counts from there.")
    b.add_argument("corpus", nargs="+", help="files, globs or folders; one tokenized sentence a line; .gz ok")
    b.add_argument("--output", "-o", required=True, help="vocabulary file to write")
    b.add_argument("--min-count", type=int, default=1, help="drop words seen fewer times (default 1)")
    b.add_argument("--max-size", type=int, help="at most this many entries, specials included")
    b.add_argument("--counts", help="where to write word<TAB>count (default: OUTPUT with .counts.tsv)")
    b.set_defaults(func=vocab_build)
    p.set_defaults(func=lambda args, parser=p: parser.print_help() or 2)

    # ---------------------------------------------------------------- train
    p = subparsers.add_parser(
        "train", help="train a biLM from scratch (resumes when OUTPUT has checkpoints)",
        description="Train a bidirectional language model on plain text (one tokenized sentence a line). "
                    "Writes OUTPUT/log.jsonl, OUTPUT/checkpoints/ and, at the end, OUTPUT/model/ (options.json + "
                    "weights.hdf5 in the original layout, softmax and vocabulary). Run it again with the same "
                    "OUTPUT to resume exactly. Under torchrun it trains data-parallel.",
        epilog="example: elmo vocab build corpus/ -o vocab.txt && "
               "elmo train corpus/ --vocab vocab.txt --output run1 --valid heldout.txt")
    p.add_argument("corpus", nargs="+", help="training text: files, globs or folders of shards; .gz ok")
    p.add_argument("--vocab", required=True, help="vocabulary file (words by descending frequency)")
    p.add_argument("--output", "-o", required=True, help="run folder")
    p.add_argument("--valid", nargs="*", default=[], help="held-out text for perplexity")
    _add_model_args(p)
    _add_run_args(p, finetune=False)
    p.set_defaults(func=train)

    # ---------------------------------------------------------------- finetune
    p = subparsers.add_parser(
        "finetune", help="adapt a trained biLM to a task's unlabelled text",
        description="Continue training a trained biLM (a folder written by elmo train) on new text, keeping its "
                    "vocabulary; one epoch by default. Reports held-out perplexity on that text before and "
                    "after, and records the text in the model's metadata (adapted_on).")
    p.add_argument("text", nargs="+", help="the task's text: files, globs or folders")
    p.add_argument("--from", dest="init_from", required=True, help="trained model folder (OUTPUT/model of elmo train)")
    p.add_argument("--output", "-o", required=True, help="run folder; the adapted model goes to OUTPUT/model")
    p.add_argument("--heldout", nargs="*", default=None,
                   help="held-out text (default: every 10th sentence of TEXT is held out)")
    p.add_argument("--heldout-every", type=int, default=10, help="hold out every N-th sentence (default 10)")
    _add_run_args(p, finetune=True)
    p.set_defaults(func=finetune)

    # ---------------------------------------------------------------- perplexity
    p = subparsers.add_parser(
        "perplexity", help="full-softmax perplexity of a trained biLM on a text",
        description="Forward, backward and average perplexity (full softmax). Every sentence is read from a "
                    "zero state, as ELMo embeds it, so the result does not depend on --batch-size. Counts each "
                    "word plus one sentence boundary per sentence and direction.")
    p.add_argument("model", help="trained model folder (with softmax.hdf5 and vocab.txt)")
    p.add_argument("text", nargs="+", help="files, globs or folders")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per batch (speed only; default 32)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=perplexity)

    # ---------------------------------------------------------------- plot-curve
    p = subparsers.add_parser("plot-curve", help="draw a training log's learning curve to PNG",
                              description="Plot training loss/perplexity and validation perplexity against "
                                          "tokens seen from one or more log.jsonl files (needs matplotlib: "
                                          "pip install 'elmo-pytorch[plots]').")
    p.add_argument("log", nargs="+", help="log.jsonl files (or run folders)")
    p.add_argument("--output", "-o", required=True, help="PNG file to write")
    p.add_argument("--title", default=None)
    p.set_defaults(func=plot_curve)


def _threads(args) -> None:
    from ..runtime import set_threads

    set_threads(getattr(args, "threads", None))


def _model_options(args) -> dict:
    from ..config import ElmoOptions, preset_dict

    opts = ElmoOptions.from_file(args.options).to_dict() if args.options else preset_dict("default")
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


def _run_config(args, **fields):
    from ..training.trainer import TrainConfig

    lr = args.lr if args.lr is not None else (0.2 if args.optimizer == "adagrad" else 0.001)
    return TrainConfig(
        batch_size=args.batch_size, unroll_steps=args.unroll_steps, layout=args.layout, epochs=args.epochs,
        max_steps=args.max_steps, state_reset_every=args.state_reset_every, max_seconds=args.max_hours * 3600 if args.max_hours else None,
        optimizer=args.optimizer, lr=lr, adagrad_init=args.adagrad_init, clip_norm=args.clip_norm,
        dropout=args.dropout, n_negative=args.negatives, shuffle=not args.no_shuffle, seed=args.seed,
        checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints,
        log_every=args.log_every, eval_every=args.eval_every, eval_batch_size=args.eval_batch_size,
        device=args.device, bf16=args.bf16, progress=not args.no_progress,
        allow_change=list(args.allow_change), **fields)


def vocab_build(args) -> int:
    from ..training.vocab_build import build_vocabulary_files

    info = build_vocabulary_files(args.corpus, args.output, min_count=args.min_count, max_size=args.max_size,
                                  counts_path=args.counts)
    print(f"wrote {info['vocab']} ({info['size']:,} entries, {info['covered']:.2%} of tokens covered) "
          f"and {info['counts']}")
    return 0


def _run_job(command: str, job) -> int:
    """Run a training job and print its summary as JSON; a failed write is one line, exit 1."""
    from ..training.checkpoint import RunWriteError

    try:
        summary = job()
    except RunWriteError as e:  # e.g. a full disk: one line, the previous checkpoint is kept
        print(f"elmo {command}: error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=2, default=str))
    return 0


def train(args) -> int:
    from ..training.trainer import train as run

    _threads(args)
    cfg = _run_config(args, train=list(args.corpus), vocab=args.vocab, output=args.output,
                      options=_model_options(args), valid=list(args.valid))
    return _run_job("train", lambda: run(cfg))


def finetune(args) -> int:
    from ..training.finetune import finetune as run

    _threads(args)
    cfg = _run_config(args, train=list(args.text), vocab="", output=args.output, init_from=args.init_from)
    return _run_job("finetune", lambda: run(cfg, heldout=args.heldout, heldout_every=args.heldout_every))


def perplexity(args) -> int:
    from ..data.corpus import expand_paths, iter_file_sentences
    from ..training.distributed import resolve_device
    from ..training.evaluate import perplexity as ppl
    from ..training.export import load_language_model

    _threads(args)
    device = resolve_device(args.device)
    model, vocab = load_language_model(args.model, device=device)
    result = ppl(model, iter_file_sentences(expand_paths(args.text)), vocab, args.batch_size, device)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"forward {result['ppl_fwd']:.2f}  backward {result['ppl_bwd']:.2f}  average {result['ppl']:.2f}  "
              f"({result['targets']:,} targets per direction)")
    return 0


def plot_curve(args) -> int:
    from ..training.curves import plot_learning_curve

    path = plot_learning_curve(args.log, args.output, title=args.title)
    print(f"wrote {path}")
    return 0
