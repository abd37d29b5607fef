"""``elmo predict MODEL_DIR INPUT``: run a saved task model (``elmo experiment
--save-models``) on new text and write CoNLL, TSV or JSON lines."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

from . import DEVICE_HELP, threads_help


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
    p.add_argument("-o", "--output", default=None,
                   help="write here (atomically; default or '-': stdout); an existing file is "
                        "kept unless --overwrite")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing -o file (e.g. the predictions of an earlier run)")
    p.add_argument("--format", choices=["conll", "tsv", "jsonl"], default=None,
                   help="output format (default: conll for tagging, tsv otherwise)")
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
    from ..io import check_output_file, refuse_replacing_inputs
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


def _read_lines(path: str) -> List[str]:
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
        text = data.decode("utf-8-sig")  # a byte-order mark is no part of the first word
    except UnicodeDecodeError as e:
        from ..io import utf8_error_where
        where = utf8_error_where(e.object, e, offset=len(data) - len(e.object))   # (after a byte-order mark)
        raise ValueError(f"{_source(path)}: {where} is not valid UTF-8") from None
    from ..io import text_lines
    # (a lone \r, a file with old Mac line ends: its lines were one text, a \r read as a space)
    return text_lines(text, lambda line, what: ValueError(f"{_source(path)}:{line}: {what}"))


def _note_empty(path: str, examples: list, fmt: str, tagger: bool, qa: bool = False) -> None:
    """Say on stderr which input lines had no tokens (a pair: either text), and what they got
    (``qa``: a question answering model's, which pools nothing and gives no label)."""
    empty = [i for i, ex in enumerate(examples, start=1)
             if not ex.tokens or (ex.tokens_b is not None and not ex.tokens_b)]
    if not empty:
        return
    shown = ", ".join(map(str, empty[:10])) + (f" and {len(empty) - 10} more" if len(empty) > 10 else "")
    where = f"{_source(path)}: {'line' if len(empty) == 1 else 'lines'} {shown} without tokens"
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


def _note_cut(path: str, examples: list, reads: list, info, fmt: str, tagger: bool) -> None:
    """Say on stderr which input lines were longer than the model reads (its ``max_tokens``,
    ``max_tokens_b``: its training and test texts were cut so), and where the output says it."""
    from ..tasks.kinds import UNREAD_TAG
    cut = [i for i, (ex, (a, b)) in enumerate(zip(examples, reads), start=1)
           if a < len(ex.tokens) or (b is not None and b < len(ex.tokens_b))]
    if not cut:
        return
    shown = ", ".join(map(str, cut[:10])) + (f" and {len(cut) - 10} more" if len(cut) > 10 else "")
    limits = " and ".join(f"{k} {v}" for k, v in (("max_tokens", info.max_tokens),
                                                   ("max_tokens_b", info.max_tokens_b)) if v)
    if fmt == "jsonl":
        where = "tokens_read in each record says how many" + ("; the others have tag null" if tagger else "")
    elif tagger:
        where = f"the tokens past them have the tag {UNREAD_TAG!r} (not read)"
    else:
        where = "the label is of those tokens (--format jsonl records how many: tokens_read)"
    print(f"elmo predict: {_source(path)}: {'line' if len(cut) == 1 else 'lines'} "
          f"{shown} longer than the model reads ({limits}, as its training and test texts were "
          f"cut): it read their first tokens only; {where}", file=sys.stderr)


def predict(args: argparse.Namespace) -> int:
    from ..io import no_empty_folder_on_failure, output_lock

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
    from ..checks import require_count
    from ..tasks.kinds import UNREAD_TAG, task_kind
    from ..tasks.models import TaskModel
    from ..tasks.saved import SavedInfo, predict_examples, to_examples
    from ..io import atomic_write_text

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
    lines = _read_lines(args.input)
    texts: Sequence[Union[str, Tuple[str, str]]]
    if spec.pair:
        pairs: List[Tuple[str, str]] = []
        for i, line in enumerate(lines, start=1):
            parts = line.split("\t")
            if len(parts) != 2:
                columns = "question<TAB>context" if spec.span_answers else "text_a<TAB>text_b"
                raise ValueError(f"{_source(args.input)}:{i}: a {'question answering' if spec.span_answers else 'pair'} "
                                 f"model needs {columns}, found {len(parts)} column(s)")
            pairs.append((parts[0], parts[1]))
        texts = pairs
    else:
        # a TSV or CoNLL file given by mistake: its other columns (a gold label, a tag) were
        # read as words of the text, and every line got a prediction
        tabbed = next((i for i, line in enumerate(lines, start=1) if "\t" in line), None)
        if tabbed is not None:
            raise ValueError(f"{_source(args.input)}:{tabbed}: a tab; a {kind} model reads one text a line, "
                             f"tokens separated by spaces (is this a TSV or CoNLL file?)")
        texts = lines
    tokenize = args.tokenize or saved.config["tokenize"]
    examples = to_examples(texts, kind, tokenize)
    from . import progress_bar_wanted
    labels = predict_examples(model, examples, require_count("--batch-size", args.batch_size),
                              progress=progress_bar_wanted(not args.quiet))
    _note_empty(args.input, examples, fmt, spec.token_labels, spec.span_answers)
    reads = [saved.read(ex) for ex in examples]
    _note_cut(args.input, examples, reads, saved, fmt, spec.token_labels)
    out = []
    for text, ex, label, read in zip(texts, examples, labels, reads):
        if fmt == "conll":
            if ex.tokens:  # an empty sentence has no block (a blank line more would merge blocks)
                out += [f"{w}\t{UNREAD_TAG if t is None else t}" for w, t in zip(ex.tokens, label)] + [""]
        elif fmt == "tsv":
            out.append(spec.tsv_line(text, ex.tokens, label))
        else:
            out.append(json.dumps(spec.json_record(text, ex.tokens, label, read), ensure_ascii=False))
    result = "".join(line + "\n" for line in out)
    if output is not None:
        atomic_write_text(output, result)
    else:
        sys.stdout.write(result)
    return 0
