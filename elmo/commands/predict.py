"""``elmo predict MODEL_DIR INPUT``: run a saved task model (``elmo experiment
--save-models``) on new text and write CoNLL, TSV or JSON lines."""
from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, TextIO, Tuple, Union

from . import DEVICE_HELP, threads_help

#: Input lines labelled at a time (rounded down to whole batches, at least one): the input,
#: its examples and their output lines are held for one part only.
PART_LINES = 4096


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "predict", help="tag or classify new text with a saved task model",
        description="Run a task model saved by `elmo experiment --save-models` on new text: one "
                    "text a line (a pair model: text_a<TAB>text_b), from a file or stdin. "
                    "Tokens are separated by spaces, or split by the project's tokenizer when "
                    "the model was trained with \"tokenize\": true (or with --tokenize). A question "
                    "answering model (span_qa) reads question<TAB>context and writes the answer "
                    "with its token span.")
    p.add_argument("model", help="the saved model's folder (OUT/models/<task>/<variant>/seed-<n>)")
    p.add_argument("input", nargs="?", default="-", help="input text file (default: stdin)")
    p.add_argument("-o", "--output", "--out", default=None,
                   help="write here (atomically; default or '-': stdout); an existing file is "
                        "kept unless --overwrite")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing -o file (e.g. the predictions of an earlier run)")
    p.add_argument("--format", choices=["conll", "tsv", "jsonl"], default=None,
                   help="output format (default: conll for tagging, tsv otherwise); each line is "
                        "one record for every line reader: TSV writes a text's line breaks "
                        "(\\x0b, \\x85, U+2028, ...) as spaces, keeping its tokens; jsonl keeps "
                        "the text exactly (\\u escapes)")
    p.add_argument("--tokenize", action="store_true",
                   help="split raw text with the project's tokenizer (not for tagging models)")
    p.add_argument("--bilm", default=None, help="the biLM's folder, if it has moved since training")
    glove = p.add_mutually_exclusive_group()
    glove.add_argument("--glove", default=None,
                       help="the GloVe file the model was built with, if it has moved (words outside "
                            "the model's vocabulary get their GloVe vectors)")
    glove.add_argument("--no-glove", action="store_true",
                       help="look no word up in the model's GloVe: words outside its vocabulary "
                            "get <unk>, as in models saved before the GloVe was recorded")
    p.add_argument("--batch-size", type=int, default=64,
                   help="texts per model call (default 64)")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--threads", type=int, default=1, help=threads_help("1"))
    p.add_argument("--quiet", "--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=predict)


def _check_output(output: str, input_path: str, model: str, overwrite: bool,
                  bilm: Optional[str] = None, glove: Optional[str] = None) -> None:
    """Refuse, before the model is loaded, an output that cannot be a file or would replace
    what predict reads (the input text, one of the saved model's files, a biLM folder's or
    GloVe file given), spelled through a link too, and without ``overwrite`` any file that
    holds something: predict's formats have no header by which an earlier output could be told
    from a data file given to -o by mistake."""
    from ..output_checks import check_output_file, refuse_replacing_inputs
    from ..tasks.saved import SAVED_FILES
    from ..weights import model_files
    if not output:  # (Path('') is the current folder)
        raise ValueError("-o: an empty path; give a file path, or '-' for stdout")
    out = Path(output)
    check_output_file(out, "predictions")
    # (by the file named: a link called preds.txt to the model's labels.json was written
    # through, and a hard link to the input replaced it)
    inputs = [("the input file", Path(input_path))] if input_path != "-" else []
    inputs += [("a file of the saved model", Path(model) / name) for name in SAVED_FILES]
    if bilm is not None and Path(bilm).is_dir():
        inputs += [("a file of the biLM", f) for f in model_files(bilm)]
    if glove is not None:
        inputs.append(("the GloVe file", Path(glove)))
    refuse_replacing_inputs(out, inputs, "predictions")
    if not overwrite and out.is_file() and out.stat().st_size > 0:
        raise ValueError(f"{output}: exists; it is kept: pass --overwrite to replace it, or write "
                         f"the predictions to another file")


def _source(path: str) -> str:
    """INPUT as the messages name it: ``stdin`` for ``-`` (a message began "-:1:")."""
    return "stdin" if path == "-" else path


def _input_lines(path: str) -> Iterator[str]:
    """INPUT's lines (:func:`elmo.text_files.utf8_lines`), read and decoded one at a time."""
    from ..text_files import utf8_lines
    source = _source(path)
    with contextlib.ExitStack() as stack:
        raw = sys.stdin.buffer if path == "-" else stack.enter_context(open(path, "rb"))
        # (a lone \r, a file with old Mac line ends: its lines were one text, a \r read as a space)
        yield from utf8_lines(raw, lambda line, what: ValueError(f"{source}:{line}: {what}"),
                              lambda where: ValueError(f"{source}: {where} is not valid UTF-8"))


def _rereadable(path: str) -> bool:
    """Whether INPUT can be read twice: a regular file, not stdin nor a named pipe or a
    ``<(command)`` (whose lines a first reading would take, leaving none to label)."""
    try:
        return path != "-" and stat.S_ISREG(os.stat(path).st_mode)
    except OSError:     # (opening it says why, naming it)
        return False


def _texts(lines: Iterable[str], spec, source: str) -> Iterator[Union[str, Tuple[str, str]]]:
    """The texts of INPUT's lines (a pair model's: pairs), one a line; a line that cannot be one
    raises a ValueError naming it."""
    for i, line in enumerate(lines, start=1):
        if spec.pair:
            parts = line.split("\t")
            if len(parts) != 2:
                columns = "question<TAB>context" if spec.span_answers else "text_a<TAB>text_b"
                raise ValueError(f"{source}:{i}: a {'question answering' if spec.span_answers else 'pair'} "
                                 f"model needs {columns}, found {len(parts)} column(s)")
            yield parts[0], parts[1]
        elif "\t" in line:
            # a TSV or CoNLL file given by mistake: its other columns (a gold label, a tag) were
            # read as words of the text, and every line got a prediction
            raise ValueError(f"{source}:{i}: a tab; a {spec.name} model reads one text a line, "
                             f"tokens separated by spaces (is this a TSV or CoNLL file?)")
        else:
            yield line


class _Lines:
    """The numbers of the input lines a note names: the first ten, and how many there are
    (a note names ten; the numbers of a file's every line need not be held)."""

    def __init__(self) -> None:
        self.first: List[int] = []
        self.count = 0

    def add(self, number: int) -> None:
        self.count += 1
        if len(self.first) < 10:
            self.first.append(number)

    def shown(self) -> str:
        more = self.count - len(self.first)
        return ", ".join(map(str, self.first)) + (f" and {more} more" if more else "")


def _note_empty(path: str, empty: _Lines, fmt: str, tagger: bool, qa: bool = False) -> None:
    """Say on stderr which input lines had no tokens (a pair: either text), and what they got
    (``qa``: a question answering model's, which pools nothing and gives no label)."""
    if not empty.count:
        return
    where = f"{_source(path)}: {'line' if empty.count == 1 else 'lines'} {empty.shown()} without tokens"
    if fmt == "conll":
        what = "no block in the CoNLL output (--format jsonl keeps one record per line)"
    elif tagger:
        what = "no tags"
    elif qa:   # (it said "the label the model gives an empty text (its pooled vector is zero)")
        what = ("an empty context gets the empty answer at 0 0; an empty question, the span the model "
                "points at without one")
    else:
        what = "the label the model gives an empty text (its pooled vector is zero)"
    print(f"elmo predict: {where}: {what}", file=sys.stderr)


def _note_cut(path: str, cut: _Lines, info, fmt: str, tagger: bool) -> None:
    """Say on stderr which input lines were longer than the model reads (its ``max_tokens``,
    ``max_tokens_b``: its training and test texts were cut so), and where the output says it."""
    from ..tasks.kinds import UNREAD_TAG
    if not cut.count:
        return
    limits = " and ".join(f"{k} {v}" for k, v in (("max_tokens", info.max_tokens),
                                                   ("max_tokens_b", info.max_tokens_b)) if v)
    if fmt == "jsonl":
        where = "tokens_read in each record says how many" + ("; the others have tag null" if tagger else "")
    elif tagger:
        where = f"the tokens past them have the tag {UNREAD_TAG!r} (not read)"
    else:
        where = "the label is of those tokens (--format jsonl records how many: tokens_read)"
    print(f"elmo predict: {_source(path)}: {'line' if cut.count == 1 else 'lines'} "
          f"{cut.shown()} longer than the model reads ({limits}, as its training and test texts were "
          f"cut): it read their first tokens only; {where}", file=sys.stderr)


def predict(args: argparse.Namespace) -> int:
    from ..io import no_empty_folder_on_failure
    from ..output_lock import output_lock

    # '-' is stdout as INPUT '-' is stdin (it wrote a file named '-'); '' is refused, not stdout
    output = None if args.output == "-" else args.output
    if output is None:
        return _predict(args, None)
    _check_output(output, args.input, args.model, args.overwrite, args.bilm, args.glove)   # (before the lock file is made)
    # Two predictions into one new -o both found it free, and the second replaced the first's
    # file without --overwrite: one writer at a time, and the check again once it is ours.
    with no_empty_folder_on_failure(Path(output).parent), output_lock(Path(output)):
        _check_output(output, args.input, args.model, args.overwrite, args.bilm, args.glove)
        return _predict(args, output)


def _predict(args: argparse.Namespace, output: Optional[str]) -> int:
    from ..tasks.kinds import task_kind
    from ..tasks.models import TaskModel
    from ..tasks.saved import SavedInfo
    from ..checks import require_count

    from . import cli_device, set_cli_threads
    # (0 was taken as 1, a negative count too: 0 is torch's choice, as in every command)
    set_cli_threads(args.threads)
    device = cli_device(args.device)   # (before the model loads)
    model = TaskModel.load(args.model, bilm=args.bilm, device=device,
                           glove=False if args.no_glove else args.glove)
    saved = model.saved
    assert isinstance(saved, SavedInfo)     # set by load() (mypy sees a Module attribute)
    kind = saved.kind
    spec = task_kind(kind)
    fmt = args.format or ("conll" if spec.token_labels else "tsv")
    if fmt == "conll" and not spec.token_labels:
        raise ValueError(f"--format conll is for tagging models; this one does {kind}")
    if args.tokenize and spec.token_labels:
        raise ValueError("--tokenize is not for tagging models (their tags belong to the "
                         "tokens as given: separate tokens by spaces)")
    batch_size = require_count("--batch-size", args.batch_size)
    source = _source(args.input)
    batches = None
    if _rereadable(args.input):
        # read once to find a bad line before the model labels any, and the bar's length (stdin
        # or a pipe cannot be read twice: its bad line fails the run where it comes, and no
        # output is made)
        batches = -(-sum(1 for _ in _texts(_input_lines(args.input), spec, source)) // batch_size)
    from tqdm import tqdm
    from . import progress_bar_wanted
    with _output_file(output) as out:
        with tqdm(total=batches, disable=not progress_bar_wanted(not args.quiet), unit="batch",
                  desc="predict") as bar:
            empty, cut = _write_predictions(model, _texts(_input_lines(args.input), spec, source), out,
                                            fmt, batch_size, args.tokenize or saved.config["tokenize"], bar)
        _note_empty(args.input, empty, fmt, spec.token_labels, spec.span_answers)
        _note_cut(args.input, cut, saved, fmt, spec.token_labels)
    return 0


def _write_predictions(model, texts: Iterable, out: TextIO, fmt: str, batch_size: int,
                       tokenize: bool, bar) -> Tuple[_Lines, _Lines]:
    """Label ``texts`` a part (:data:`PART_LINES`) at a time and write each part's output
    lines to ``out`` before reading the next: a file of any length is labelled in the memory
    of one part. Parts are whole batches, so every batch (and every result, to the bit) is the
    one a whole-file run makes. Returns the input lines without tokens and those cut."""
    part_size = max(1, PART_LINES // batch_size) * batch_size
    empty, cut = _Lines(), _Lines()
    done = 0
    while part := list(itertools.islice(texts, part_size)):
        out.write(_part_output(model, part, done, fmt, batch_size, tokenize, bar, empty, cut))
        done += len(part)
        del part    # (before the next part is read)
    return empty, cut


def _part_output(model, part: list, done: int, fmt: str, batch_size: int, tokenize: bool, bar,
                 empty: _Lines, cut: _Lines) -> str:
    """The output lines of the texts ``part``, which follow ``done`` input lines; its lines
    without tokens and those cut are added to ``empty`` and ``cut``."""
    from ..record_lines import json_line
    from ..tasks.kinds import UNREAD_TAG, task_kind
    from ..tasks.saved import predict_examples, to_examples
    info = model.saved
    spec = task_kind(info.kind)
    examples = to_examples(part, info.kind, tokenize)
    labels = predict_examples(model, examples, batch_size, bar=bar)
    lines = []
    for number, (text, ex, label) in enumerate(zip(part, examples, labels), start=done + 1):
        read = info.read(ex)
        if not ex.tokens or (ex.tokens_b is not None and not ex.tokens_b):
            empty.add(number)
        if read[0] < len(ex.tokens) or (read[1] is not None and read[1] < len(ex.tokens_b)):
            cut.add(number)
        if fmt == "conll":
            if ex.tokens:  # an empty sentence has no block (a blank line more would merge blocks)
                lines += [f"{w}\t{UNREAD_TAG if t is None else t}" for w, t in zip(ex.tokens, label)] + [""]
        elif fmt == "tsv":
            lines.append(spec.tsv_line(text, ex.tokens, label))
        else:
            # (a raw U+2028 or \x85 in the text ended the record there for str.splitlines)
            lines.append(json_line(spec.json_record(text, ex.tokens, label, read)))
    return "".join(line + "\n" for line in lines)


@contextlib.contextmanager
def _output_file(output: Optional[str]) -> Iterator[TextIO]:
    """Where predict writes its output lines as it makes them: ``-o``'s temporary
    (:func:`elmo.io.atomic_text_file`), which becomes the file once the whole input is
    labelled; for stdout, an unnamed temporary file copied to stdout then. stdout gets the
    whole output after the run or, when it fails, nothing, as when predict held the output in
    memory; the copy takes room in the temporary folder (TMPDIR) instead."""
    from ..io import atomic_text_file, os_errors_naming
    if output is not None:
        with atomic_text_file(output) as f:
            yield f
        return
    # (a full disk named no file: the folder that is full, TMPDIR, is named; not stdout's errors)
    spool_dir = Path(tempfile.gettempdir())
    with os_errors_naming(spool_dir):
        spool = tempfile.TemporaryFile("w+", encoding="utf-8")
    try:
        with os_errors_naming(spool_dir):
            yield spool
            spool.flush()     # (a full disk fails here, if not before)
            spool.seek(0)
        shutil.copyfileobj(spool, sys.stdout)
    finally:
        # (closing flushes what a full disk left in the buffer again, and its error, naming
        # no file, took the place of the one raised)
        with contextlib.suppress(OSError):
            spool.close()
