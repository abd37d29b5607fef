"""Analysis subcommands: ``elmo analyze`` (the report) and ``elmo neighbors`` (one query)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from . import DEVICE_HELP, TORCH_CHOICE, cli_device, progress_bar_wanted, set_cli_threads, threads_help

#: (the corpus index of the neighbours, a section's embedding and its probes: minutes of silence)
QUIET_HELP = "no progress bars (the sections' embedding and probes, the neighbours' corpus index, downloads)"


def register(subparsers) -> None:
    from dataclasses import fields

    from ..analysis.report import NEIGHBORS_BATCH_SIZE, SECTIONS, AnalysisConfig
    from ..jobconfig import add_arguments, add_config_arguments

    p = subparsers.add_parser(
        "analyze", help="probe what each layer holds and write a report",
        description="POS probe per layer, word-sense nearest centroid per layer, contextual neighbours, "
                    "contrast pairs and word similarity on one model; writes report.md, results.json "
                    "and PNG pictures. Needs the corpora of `elmo data get brown-pos wordnet brown "
                    "glove-50d wordsim353 simlex999` (fetched when missing).")
    p.add_argument("model", help="bundled or published model name, model folder or http(s) URL")
    p.add_argument("--out", "--output", "-o", dest="out", default=None,
                   help="output folder (default: experiments/analysis/NAME, NAME the model's name or its "
                        "folder's; for a run's trained model RUN/model, the run folder's name)")
    p.add_argument("--only", action="append", choices=SECTIONS,
                   help="run only this section (repeatable; default: all); into the folder of a report "
                        "of the same model, settings and input files, it adds or redoes the section and keeps the others")
    add_arguments(p, AnalysisConfig)
    # a setting whose default is None reads as None when not given (code and tests read
    # args.pca_word); analyze() hands from_args only the options that carry a value
    p.set_defaults(**{f.name: None for f in fields(AnalysisConfig) if f.default is None})
    p.add_argument("--overwrite", action="store_true",
                   help="replace a report of another model that OUT holds (refused without it)")
    p.add_argument("--report-only", action="store_true",
                   help="only write report.md again from OUT/results.json (e.g. after editing "
                        "OUT/interpretation.md, which the report shows); computes nothing")
    p.add_argument("--threads", type=int, default=None,
                   help=threads_help(TORCH_CHOICE, "; on a busy shared machine 1 can be much faster"))
    p.add_argument("--device", default="auto", help=DEVICE_HELP + "; the probes run on the CPU")
    p.add_argument("--quiet", "--no-progress", action="store_true", help=QUIET_HELP)
    add_config_arguments(p, example="pos_l2=0.001")
    p.set_defaults(func=analyze)

    p = subparsers.add_parser(
        "neighbors", help="nearest tokens in context across a corpus",
        description="Embed SENTENCE, take the vector of WORD in it, and list the corpus tokens "
                    "whose vectors in context are nearest (cosine), per layer, beside static "
                    "neighbours (layer 0 and GloVe). The corpus vectors are computed once and "
                    "cached.")
    p.add_argument("sentence", help="a tokenized sentence (tokens separated by spaces)")
    p.add_argument("--word", required=True, help="the word of the sentence to look up")
    p.add_argument("--occurrence", type=int, default=None,
                   help="which occurrence of WORD in SENTENCE is the query, from 1 (default: the "
                        "first; a word that occurs more than once is noted)")
    p.add_argument("--model", default=None,
                   help="bundled or published model name, model folder or http(s) URL "
                        "(default: the bundled default)")
    p.add_argument("--corpus", required=True,
                   help="a text file (a tokenized sentence a line) or CORPUS:SPLIT, e.g. brown:dev")
    p.add_argument("--layer", type=int, action="append",
                   help="layer to search (repeatable; default: every LSTM layer)")
    p.add_argument("-k", type=int, default=10, help="neighbours per layer (default 10)")
    p.add_argument("--same-word", action="store_true",
                   help="only other occurrences of WORD (any case) are candidates: which uses "
                        "of the word are nearest, as in the paper's Table 4")
    p.add_argument("--max-sentences", type=int, default=None,
                   help="index at most this many sentences (default or 0: all)")
    p.add_argument("--index-dir", default=None, help="cache folder of the index "
                   "(default: indexes/ in the data cache)")
    p.add_argument("--no-glove", action="store_true", help="skip the GloVe neighbours")
    p.add_argument("--batch-size", type=int, default=NEIGHBORS_BATCH_SIZE,
                   help=f"sentences per biLM call (default {NEIGHBORS_BATCH_SIZE})")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--quiet", "--no-progress", action="store_true", help=QUIET_HELP)
    p.set_defaults(func=neighbors)


def analysis_config(args: argparse.Namespace):
    """The :class:`~elmo.analysis.report.AnalysisConfig` that ``elmo analyze``'s arguments ask
    for (defaults, --config, the options given, --set). An option left at None was not given
    (the None defaults are only there for code that reads ``args``)."""
    from ..analysis.report import AnalysisConfig
    from ..jobconfig import from_args

    return from_args(AnalysisConfig, argparse.Namespace(**{k: v for k, v in vars(args).items() if v is not None}))


def report_only_ignores(args: argparse.Namespace) -> list:
    """The options given beside ``--report-only`` that it leaves without effect: every
    setting of the analysis, ``--only``, ``--config`` and ``--set`` (``--threads``, which
    changes no number, is let be)."""
    from dataclasses import fields

    from ..analysis.report import AnalysisConfig

    given = [f.name for f in fields(AnalysisConfig) if getattr(args, f.name, None) is not None]
    given += [name for name in ("only", "config_file", "config_set", "overwrite") if getattr(args, name, None)]
    flags = {"config_file": "config", "config_set": "set"}
    return ["--" + flags.get(name, name).replace("_", "-") for name in given]


#: What ``elmo train`` (and ``elmo finetune``) write beside ``model/`` in a run folder: a
#: folder ``model`` beside either is a run's trained model, named by its run folder.
RUN_FOLDER_FILES = ("train_config.json", "log.jsonl")


def default_out(model: str) -> Path:
    """``experiments/analysis/<the model's folder name>``. A model named ``.`` or ``..`` (or
    ``/``) has no name of its own in its spelling: its resolved folder's name is taken (the
    report went into ``experiments/analysis/`` itself, beside every other model's folder, or,
    for ``..``, into ``experiments/``). A run's trained model, ``runs/NAME/model`` (a folder
    ``model`` whose parent holds a file of :data:`RUN_FOLDER_FILES`), takes the run folder's
    name: every run's report went into ``experiments/analysis/model/``, over the last one's."""
    path = Path(model)
    if path.name in ("", ".", ".."):
        path = path.resolve()
    name = path.name or "root"
    if name == "model":
        run = Path(os.path.abspath(path)).parent   # (a bare ``model``: the working folder)
        if run.name and any((run / f).is_file() for f in RUN_FOLDER_FILES):
            name = run.name
    return Path("experiments") / "analysis" / name


def analyze(args: argparse.Namespace) -> int:
    from ..allocator import keep_freed_memory
    from ..analysis.report import run_analysis
    from ..jobconfig import print_config_and_exit

    config = analysis_config(args)
    if print_config_and_exit(config, args):
        return 0
    # The probes' L-BFGS allocates and frees the same (tokens x width) tensors, 100 MB and
    # more, at every step; handed back to the system each time, their page faults cost as
    # much as the arithmetic (the mix probe ran in half the time with this).
    keep_freed_memory(mmap_threshold=2 ** 30)
    set_cli_threads(args.threads)
    device = cli_device(args.device)   # (before any corpus is read or the model loaded)
    from . import refuse_dash
    refuse_dash(args.out, "--out", "the analysis writes a folder: give its name", "folder")
    out = Path(args.out) if args.out else default_out(args.model)
    if args.report_only:
        from ..analysis.report import rewrite_report
        ignored = report_only_ignores(args)
        if ignored:   # (they were ignored without a word: the report kept the run's settings)
            raise ValueError(f"--report-only computes nothing and keeps the settings of {out / 'results.json'}, "
                             f"so {', '.join(ignored)} would have no effect; drop {'it' if len(ignored) == 1 else 'them'}, "
                             f"or run the analysis again without --report-only")
        print(f"analyze: wrote {rewrite_report(out, args.model)}")
        return 0
    results = run_analysis(args.model, out, config, args.only, device=device, overwrite=args.overwrite,
                           progress=progress_bar_wanted(not args.quiet))
    for text in results["findings"].values():
        print(text)
    return 0


def neighbors(args: argparse.Namespace) -> int:
    import elmo
    from ..analysis import datasets
    from ..analysis.neighbors import cached_index, context, occurrences_in, query_vectors, static_neighbors
    from ..analysis.report import index_home, resolve_corpus
    from ..checks import require_count, require_utf8_text
    from ..embedding import Embedder

    # (before the model loads: a byte that was not UTF-8 silently left the word)
    require_utf8_text("SENTENCE", args.sentence)
    require_utf8_text("--word", args.word)
    if args.k < 1:  # before the index is built, not after its first layer is printed
        raise ValueError(f"-k must be at least 1, got {args.k}")
    # named as typed (the library's messages name its parameters: batch_size, occurrence)
    batch_size = require_count("--batch-size", args.batch_size)
    if args.occurrence is not None:
        require_count("--occurrence", args.occurrence)
    device = cli_device(args.device)
    embedder = Embedder(elmo.from_pretrained(args.model or elmo.DEFAULT_MODEL, device=device),
                        batch_size=batch_size)
    tokens = args.sentence.split()
    n_layers = embedder.bilm.num_layers          # layer 0 included, as the index holds them
    for j in args.layer or []:   # before the index is built (minutes) and the first layer printed
        if not 0 <= j < n_layers:
            raise ValueError(f"--layer {j}: the model has layers 0..{n_layers - 1}")
    # a word not in the sentence too, or an occurrence it lacks
    position, vecs = query_vectors(embedder, tokens, args.word, 1 if args.occurrence is None else args.occurrence)
    times = occurrences_in(tokens, args.word)
    if times > 1:   # (the first was taken without a word, and no other could be asked for)
        which = ("the first; --occurrence N picks another" if args.occurrence is None
                 else f"occurrence {args.occurrence}")
        print(f"{args.word!r} occurs {times} times in the sentence; the query is token {position + 1} ({which})")
    corpus = resolve_corpus(args.corpus)
    # GloVe before the index (minutes on a large corpus): offline, it failed after every layer
    glove_dir = None if args.no_glove else datasets.corpus_dir("glove-50d")
    from ..data.fetch import DATA_CACHE_HINT
    hint = "give a writable --index-dir" if args.index_dir else f"{DATA_CACHE_HINT}, or give a writable --index-dir"
    index = cached_index(embedder, corpus, Path(args.index_dir) if args.index_dir else index_home(),
                         args.max_sentences or None, args.batch_size, writable_hint=hint,
                         # (a full disk is not fixed by a writable folder: by room, here or elsewhere)
                         full_disk_hint="free space or give --index-dir on another disk",
                         progress=progress_bar_wanted(not args.quiet))
    own = index.copies(tokens, position)   # the query itself, where the corpus holds its sentence
    layers = list(dict.fromkeys(args.layer or range(1, index.num_layers)))   # (--layer 2 --layer 2 ran it twice)
    occurrences = len(index.occurrences(args.word)) - len(own)
    if args.same_word and occurrences == 0:   # (each layer's header was printed with nothing under it)
        print(f"{args.word!r} does not occur in the corpus" if not own else
              f"{args.word!r} occurs in the corpus only as the query itself (its sentence is a corpus "
              f"sentence), which is left out")
        layers = []
    elif len(index.positions) == len(own):   # (each layer's header, with nothing under it)
        print("the corpus holds no token but the query itself, which is left out")
        layers = []
    for j in layers:
        others = len(index.positions) - len(own)      # ("1 occurrences", "1 corpus tokens")
        pool = (f"{occurrences:,} occurrence{'' if occurrences == 1 else 's'} of {args.word!r}"
                if args.same_word else f"{others:,} corpus token{'' if others == 1 else 's'}")
        if own:
            # (it said the sentence was left out, above hits of its other tokens: only the
            # query token is, in each corpus copy of its sentence)
            copies = "the corpus copy" if len(own) == 1 else f"the {len(own)} corpus copies"
            pool += f"; the query itself, in {copies} of its sentence, left out"
        print(f"layer {j}, nearest in context ({pool}):")
        for h in index.search(vecs[j], j, args.k, word=args.word if args.same_word else None,
                              exclude=own):
            print(f"  {h.score:.3f}  {h.word:<15} {context(index.sentences[h.sentence], h.token)}")
    words, layer0 = index.word_types()
    print("layer 0 (static), nearest corpus words:")
    hits = static_neighbors(words, layer0, args.word, args.k, query=vecs[0])
    print("  " + (", ".join(f"{h.word} {h.score:.2f}" for h in hits) if hits   # (it was a blank line)
                  else f"the corpus has no word but {args.word!r}"))
    if glove_dir is not None:                         # (None with --no-glove)
        glove_words, glove_vecs = datasets.glove(glove_dir)
        hits = static_neighbors(glove_words, glove_vecs, args.word.lower(), args.k)
        print("GloVe 50d (static):")
        print("  " + (", ".join(f"{h.word} {h.score:.2f}" for h in hits) if hits
                      else f"{args.word.lower()!r} is not in the GloVe vocabulary"))
    return 0
