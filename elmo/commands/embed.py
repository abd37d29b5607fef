"""``elmo embed``: embed a text file (one sentence a line) into an HDF5 file of vectors."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, Optional

from . import TORCH_CHOICE, threads_help

EPILOG = """\
output layout (that of the original ELMo command):
  "0", "1", ...        one dataset per input line: (layers, tokens, dim) with --layers all,
                       (tokens, dim) otherwise; an empty line gives zero tokens
  sentence_to_index    JSON {sentence: line number}, unless --sentence-keys/--forget-sentences
  attributes           model_config, command_line, layers, stateful, precision, settings

long words: the model reads a word's first 48 UTF-8 bytes (the original's limit of 50
  characters, begin and end marks included); words that share them get the same vectors.

resuming: a killed run leaves OUTPUT.parts/; the same command continues from there.
several processes: torchrun --nproc_per_node N -m elmo embed IN OUT ... shards the lines
across ranks; rank 0 merges the parts into OUT.
"""


#: The option groups of ``elmo embed``: EmbedConfig's fields by group (``--model`` stands alone).
_GROUPS = {
    "what to write": ("layers", "gamma", "dtype", "sentence_keys", "forget_sentences"),
    "reading the input": ("errors",),  # and --tokenize, below
    "how to run": ("batch_size", "max_tokens", "overlap", "sort_by_length", "token_cache", "cache_min_count",
                   "cache_max_words", "cache_sample_lines", "stateful", "segment_lines", "device",
                   "overwrite", "wait_timeout", "progress"),
}


def command_defaults() -> dict:
    """Where ``elmo embed``'s defaults differ from :class:`EmbedConfig`'s (those of
    :func:`embed_file`): the model is named, the device is ``auto`` (what the library's None
    gives a named model; ``--print-config`` shows it, as train's does), and a progress bar is
    shown unless --quiet."""
    from .. import DEFAULT_MODEL

    return {"model": DEFAULT_MODEL, "device": "auto", "progress": True}


def register(subparsers) -> None:
    from dataclasses import fields

    from ..embedding.config import EmbedConfig
    from ..jobconfig import add_arguments, add_config_arguments

    p = subparsers.add_parser(
        "embed", help="embed a text file (one sentence a line) into an HDF5 file",
        description="Compute contextual vectors for every line of INPUT and write them to OUTPUT "
                    "(HDF5). Deterministic by default: a sentence gets the same vectors whatever "
                    "its neighbours and the batch size, up to float rounding (about 1e-6).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="text file, one sentence a line (tokens separated by spaces, "
                                 "or raw text with --tokenize); not stdin: it is read twice")
    p.add_argument("output", help="HDF5 file to write")
    every = {f.name for f in fields(EmbedConfig)}
    add_arguments(p, EmbedConfig, exclude=every - {"model"}, defaults=command_defaults())
    for title, names in _GROUPS.items():
        group = p.add_argument_group(title)
        if title == "reading the input":
            # --tokenize takes an optional name (a bare --tokenize means en), which add_arguments
            # does not make; like the generated options it leaves nothing behind unless given
            group.add_argument("--tokenize", nargs="?", const="en", default=argparse.SUPPRESS,
                               choices=["en", "zh"],
                               help=EmbedConfig.__dataclass_fields__["tokenize"].metadata["help"])
        add_arguments(group, EmbedConfig, exclude=every - set(names), defaults=command_defaults())
    group.add_argument(  # in "how to run"
        "--threads", type=int, default=None,
        help=threads_help(TORCH_CHOICE, "; on a busy machine fewer threads than "
                          "cores is often faster. Not part of the recorded settings: a resume with another count "
             "changes the rounding of the new segments (about 1e-7); keep it for bit-identical files"))
    for option, nargs, instead in ALLENNLP_OPTIONS:
        p.add_argument(option, nargs=nargs, action=_AllenNLPOption, instead=instead)
    add_config_arguments(p, example="segment_lines=512")
    p.set_defaults(func=embed)


#: The options of AllenNLP's ``elmo`` command that are spelled otherwise here: (option, its
#: number of values, what to write instead). Given, they stop with that spelling, where
#: argparse said only "unrecognized arguments".
ALLENNLP_OPTIONS = (
    ("--all", 0, "--layers all"),
    ("--top", 0, "--layers top"),
    ("--average", 0, "--layers average"),
    ("--use-sentence-keys", 0, "--sentence-keys"),
    ("--cuda-device", 1, "--device cuda:N (or --device cpu)"),
    ("--options-file", 1, "--model FOLDER, a folder that holds options.json and weights.hdf5"),
    ("--weight-file", 1, "--model FOLDER, a folder that holds options.json and weights.hdf5"),
)


class _AllenNLPOption(argparse.Action):
    """An option of AllenNLP's ``elmo`` command: a usage error naming this command's spelling."""

    def __init__(self, option_strings, dest, instead: str, **kwargs):
        self.instead = instead
        super().__init__(option_strings, argparse.SUPPRESS, default=argparse.SUPPRESS,
                         help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} is an option of AllenNLP's elmo command; here it is "
                     f"{self.instead}")


def command_line(input_path: str, output_path: str, cfg) -> str:
    """The command, with every option spelled out (defaults included), as it is stored in the
    output's ``command_line`` attribute: running it again resumes or reproduces the run."""
    from dataclasses import replace

    from ..embedding.windows import default_overlap
    from ..jobconfig import to_options
    from ..shell import shell_join

    if cfg.overlap is None and isinstance(cfg.max_tokens, int) and cfg.max_tokens >= 1:
        # the overlap used, spelled out like the rest (and as earlier versions stored it)
        cfg = replace(cfg, overlap=default_overlap(cfg.max_tokens))
    options = to_options(cfg, exclude={"progress"})
    if input_path.startswith("-") or output_path.startswith("-"):
        # (read as options, such a path stopped the stored command with a usage error)
        return shell_join(["elmo", "embed", *options, "--", input_path, output_path])
    return shell_join(["elmo", "embed", input_path, output_path, *options])


def embed(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from ..allocator import keep_freed_memory
    from ..embedding import EmbedConfig, embed_file
    from ..embedding.run import distributed_rank
    from ..jobconfig import from_args, in_option_terms, in_typed_terms, print_config_and_exit

    from . import refuse_dash, set_cli_threads
    # (a file named '-' was looked for: "no such input file", or a file '-' was written)
    refuse_dash(args.input, "INPUT", "elmo embed cannot read stdin: it reads the input twice (to index it, "
                                     "then to embed it) and resumes a killed run from byte offsets; save "
                                     "the text to a file and give its name")
    refuse_dash(args.output, "OUTPUT", "the vectors are written to an HDF5 file, not to stdout: give a file name")
    cfg = from_args(EmbedConfig, args, defaults=command_defaults())
    if print_config_and_exit(cfg, args):
        return 0
    set_cli_threads(args.threads)
    # Each batch allocates and frees the same tens of megabytes (character maps, highway
    # activations, gate chunks); handed back to the system each time, a batch of 128 paid
    # about 25,000 page faults (up to a tenth of its time in the kernel) on the small configuration.
    keep_freed_memory()
    # --set tokenize=true/false: spelled as the option writes it in the stored command line
    spelled: Dict[object, Optional[str]] = {True: "en", False: None}
    cfg = replace(cfg, tokenize=spelled.get(cfg.tokenize, cfg.tokenize))
    from . import progress_bar_wanted
    # OUTPUT appears only when complete, so one found before the run (not --overwrite), that the
    # run leaves without an error, is this command's finished file: nothing is computed again
    complete_before = not cfg.overwrite and Path(args.output).is_file()
    try:
        output = embed_file(args.input, args.output, config=replace(cfg, progress=progress_bar_wanted(cfg.progress)),
                            command_line=command_line(args.input, args.output, cfg))
    except ValueError as e:   # ("batch_size must be at least 1": the option is --batch-size,
        # or, as the value was given, "--set batch_size must ..." or "--config FILE: batch_size must ...")
        renamed = in_typed_terms(EmbedConfig, in_option_terms(EmbedConfig, str(e)), args)
        if renamed == str(e):
            raise
        raise ValueError(renamed) from e
    if output is not None and cfg.progress and complete_before:
        print(f"{output} is complete already (written by this command): nothing to do; --overwrite "
              f"writes it again", file=sys.stderr)
    elif output is not None and cfg.progress:
        print(f"wrote {output}", file=sys.stderr)
    elif output is None and cfg.progress:
        print(f"rank {distributed_rank()[0]}: segments written; rank 0 merges them", file=sys.stderr)
    return 0
