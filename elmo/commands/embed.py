"""``elmo embed``: embed a text file (one sentence a line) into an HDF5 file of vectors."""
from __future__ import annotations

import argparse
import shlex
import sys

EPILOG = """\
output layout (that of the original ELMo command):
  "0", "1", ...        one dataset per input line: (layers, tokens, dim) with --layers all,
                       (tokens, dim) otherwise; an empty line gives zero tokens
  sentence_to_index    JSON {sentence: line number}, unless --sentence-keys/--forget-sentences
  attributes           model_config, command_line, layers, stateful, settings

resuming: a killed run leaves OUTPUT.parts/; the same command continues from there.
several processes: torchrun --nproc_per_node N -m elmo embed IN OUT ... shards the lines
across ranks; rank 0 merges the parts into OUT.
"""


def register(subparsers) -> None:
    from .. import DEFAULT_MODEL
    from ..embedding.reader import DEFAULT_SEGMENT_LINES
    from ..embedding.run import (DEFAULT_CACHE_MAX_WORDS, DEFAULT_CACHE_MIN_COUNT,
                                 DEFAULT_CACHE_SAMPLE_LINES, DEFAULT_WAIT_TIMEOUT_S)
    from ..embedding.embedder import DEFAULT_BATCH_SIZE
    from ..embedding.windows import DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP

    p = subparsers.add_parser(
        "embed", help="embed a text file (one sentence a line) into an HDF5 file",
        description="Compute contextual vectors for every line of INPUT and write them to OUTPUT "
                    "(HDF5). Deterministic by default: a sentence gets the same vectors whatever "
                    "its neighbours and the batch size.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="text file, one sentence a line (tokens separated by spaces, "
                                 "or raw text with --tokenize)")
    p.add_argument("output", help="HDF5 file to write")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"bundled or published model name, model folder or http(s) URL "
                        f"(default: {DEFAULT_MODEL})")

    what = p.add_argument_group("what to write")
    what.add_argument("--layers", default="all", metavar="all|top|average|mix:w0,w1,...",
                      help="all layers (layers, tokens, dim); the top layer, the average of all "
                           "layers, or gamma * sum_j w_j layer_j (tokens, dim) (default: all)")
    what.add_argument("--gamma", type=float, default=1.0, help="scale of a mix (default: 1)")
    what.add_argument("--dtype", choices=["float32", "float16"], default="float32",
                      help="stored number type; float16 halves the file (default: float32)")
    what.add_argument("--sentence-keys", action="store_true",
                      help="name each dataset by its sentence instead of its line number "
                           "(sentences must be unique and non-empty)")
    what.add_argument("--forget-sentences", action="store_true",
                      help="do not store the sentence_to_index dataset")

    text = p.add_argument_group("reading the input")
    text.add_argument("--tokenize", nargs="?", const="en", default=None, choices=["en", "zh"],
                      help="split raw text into tokens instead of on whitespace: en (the default "
                           "when no name is given) splits punctuation and clitics off as in the "
                           "training data; zh segments Chinese words with jieba "
                           "(pip install 'elmo-pytorch[zh]'). Without it, pre-segmented text is taken as is")
    text.add_argument("--errors", choices=["strict", "replace"], default="strict",
                      help="bytes that are not UTF-8: an error naming the line, or replaced by "
                           "U+FFFD (default: strict)")

    run = p.add_argument_group("how to run")
    run.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                     help=f"sentences per model call (default: {DEFAULT_BATCH_SIZE})")
    run.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                     help="longer sentences are cut into overlapping windows of this many tokens "
                          f"and stitched back (default: {DEFAULT_MAX_TOKENS})")
    run.add_argument("--overlap", type=int, default=DEFAULT_OVERLAP,
                     help=f"tokens shared by consecutive windows (default: {DEFAULT_OVERLAP})")
    run.add_argument("--no-sort", dest="sort", action="store_false",
                     help="batch sentences in input order instead of by length")
    run.add_argument("--no-token-cache", dest="token_cache", action="store_false",
                     help="do not cache the character-CNN vectors of frequent words")
    run.add_argument("--cache-min-count", type=int, default=DEFAULT_CACHE_MIN_COUNT,
                     help=f"cache words seen this often in the first --cache-sample lines "
                          f"(default: {DEFAULT_CACHE_MIN_COUNT})")
    run.add_argument("--cache-max-words", type=int, default=DEFAULT_CACHE_MAX_WORDS,
                     help=f"at most this many cached words (default: {DEFAULT_CACHE_MAX_WORDS})")
    run.add_argument("--cache-sample", type=int, default=DEFAULT_CACHE_SAMPLE_LINES,
                     help=f"lines counted to choose the cached words (default: {DEFAULT_CACHE_SAMPLE_LINES})")
    run.add_argument("--stateful", action="store_true",
                     help="carry each batch row's LSTM state to the next batch, as the original "
                          "did (reset at each segment; recorded in the output's attributes)")
    run.add_argument("--segment-lines", type=int, default=DEFAULT_SEGMENT_LINES,
                     help="lines per segment: the unit that is length-sorted, saved for resuming "
                          f"and given to a rank (default: {DEFAULT_SEGMENT_LINES})")
    run.add_argument("--device", default=None,
                     help="torch device (default: cuda:LOCAL_RANK if available, else cpu)")
    run.add_argument("--overwrite", action="store_true",
                     help="start again, ignoring an existing OUTPUT and OUTPUT.parts/")
    run.add_argument("--threads", type=int, default=None,
                     help="CPU threads for torch (default: torch's choice); on a busy machine "
                          "fewer threads than cores is often faster")
    run.add_argument("--wait-timeout", type=float, default=DEFAULT_WAIT_TIMEOUT_S, metavar="S",
                     help="under torchrun: rank 0 stops with an error when no other rank has "
                          f"finished a segment for S seconds (default: {DEFAULT_WAIT_TIMEOUT_S:.0f})")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=embed)


#: Options stored as ``--no-...`` flags: their destination and the flag that sets it to False.
_NEGATED = {"sort": "--no-sort", "token_cache": "--no-token-cache"}


def command_line(args: argparse.Namespace) -> str:
    """The command, with every option spelled out (defaults included), as it is stored in the
    output's ``command_line`` attribute: running it again resumes or reproduces the run."""
    words = ["elmo", "embed", args.input, args.output]
    for name, value in vars(args).items():
        if name in ("input", "output", "func", "command", "quiet", "threads"):
            continue
        if name in _NEGATED:
            words += [] if value else [_NEGATED[name]]
        elif isinstance(value, bool):
            words += [f"--{name.replace('_', '-')}"] if value else []
        elif value is not None:
            words += [f"--{name.replace('_', '-')}", str(value)]
    return shlex.join(words)


def embed(args: argparse.Namespace) -> int:
    from ..embedding import embed_file
    from ..embedding.run import distributed_rank
    from ..runtime import set_threads

    set_threads(args.threads)

    output = embed_file(
        args.input, args.output, args.model, layers=args.layers, gamma=args.gamma,
        dtype=args.dtype, batch_size=args.batch_size, max_tokens=args.max_tokens,
        overlap=args.overlap, sort_by_length=args.sort, stateful=args.stateful or None,
        token_cache=args.token_cache, cache_min_count=args.cache_min_count,
        cache_max_words=args.cache_max_words, cache_sample_lines=args.cache_sample,
        tokenize=args.tokenize, errors=args.errors, sentence_keys=args.sentence_keys,
        forget_sentences=args.forget_sentences, segment_lines=args.segment_lines,
        overwrite=args.overwrite, device=args.device, progress=not args.quiet,
        command_line=command_line(args), wait_timeout=args.wait_timeout)
    if output is not None and not args.quiet:
        print(f"wrote {output}", file=sys.stderr)
    elif output is None and not args.quiet:
        print(f"rank {distributed_rank()[0]}: segments written; rank 0 merges them", file=sys.stderr)
    return 0
