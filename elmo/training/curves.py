"""``elmo plot-curve``: draw the learning curve of one or more ``log.jsonl`` files.

Left: exp of the training loss against tokens seen: ``sampled_ppl`` when the softmax was
sampled (not comparable with a perplexity), ``train_ppl`` with the full softmax (on training
batches, with dropout); logs written before these keys have ``ppl``, which is either. Right:
full-softmax validation perplexity, forward, backward and average, against epochs.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence

from ..checks import is_number
from ..io import atomic_commit, atomic_target
from ..output_checks import check_output_file, check_replaceable, writing
from ..output_lock import output_lock
from ..strict_json import NONFINITE_NAMES
from ..text_files import first_bad_utf8, json_objects

#: The numbers each kind of record that is drawn must hold (a train record is drawn when it
#: has a training figure: one logged before any step finished has none): its place on the
#: axis, which is always finite, and its figures, which a run writes as "nan" or "inf" where
#: they are not finite (drawn as gaps).
_AXIS = {"train": "tokens", "eval": "epoch"}
_FIGURES = {"train": (), "eval": ("ppl_fwd", "ppl_bwd", "ppl")}


def log_file(path: str | Path) -> Path:
    """The ``log.jsonl`` a path names: the file itself, or the one in a run folder."""
    path = Path(path)
    return path / "log.jsonl" if path.is_dir() else path


def read_log(path: str | Path) -> List[Dict]:
    """The records of a ``log.jsonl`` (or of the one in a run folder); a line that is not a JSON
    object, bytes that are not UTF-8, or a train/eval record without the numbers a curve needs
    are a ValueError naming the file and the line (not a KeyError from deep in the plot)."""
    path = log_file(path)

    def bad(line: int, problem: str) -> ValueError:
        return ValueError(f"{path}: line {line}: {problem}; not a training log?")

    records = []
    with open(path, encoding="utf-8") as f:
        try:
            for number, record in json_objects(_without_a_torn_end(f, path), bad):
                event = record.get("event")
                drawn = event == "eval" or train_figure(record) is not None
                # (an event that is no string, e.g. a list, is no train or eval record: not drawn)
                if drawn and isinstance(event, str):
                    _check_drawn(record, event, lambda problem: bad(number, problem))
                records.append(record)
        except UnicodeDecodeError:
            with open(path, "rb") as raw:
                where = first_bad_utf8(raw)
            raise ValueError(f"{path}: not UTF-8 text ({where}); not a training log?") from None
    return records



def _check_drawn(record: Dict, event: str, bad: Callable[[str], ValueError]) -> None:
    """Raise ``bad(problem)`` unless the record of ``event`` (drawn) holds a number for its
    place on the axis and a number or a non-finite one's name for each figure. (A "nan" for the
    tokens passed as a figure's gap and ended in a TypeError at the axis; a figure edited into
    a string of digits was drawn as a gap without a word.)"""
    axis = _AXIS.get(event)
    if axis is not None and not is_number(record.get(axis)):
        raise bad(f"{event!r} record without a number {axis!r}")
    found = train_figure(record) if event == "train" else None
    for key in _FIGURES.get(event, ()) + ((found[0],) if found else ()):
        value = record.get(key)
        if value is None and event == "eval":
            raise bad(f"{event!r} record without a number {key!r}")
        if not is_number(value) and value not in NONFINITE_NAMES:
            raise bad(f"{event!r} record whose {key!r} is {json.dumps(value)}, not a number")


def _without_a_torn_end(lines: Iterable[str], path: Path) -> Iterator[str]:
    """The lines of a log, less a last line without its newline that is not JSON: the run is
    writing it now, or stopped while it wrote it. (plot-curve of a live or killed run refused
    the whole log there as "not a training log?")"""
    last = None
    for line in lines:
        if last is not None:
            yield last
        last = line
    if last is None:
        return
    if not last.endswith("\n") and last.strip():
        try:
            json.loads(last)
        except json.JSONDecodeError:
            print(f"note: {path}: its last line is cut short (the run is writing it, or stopped while "
                  f"writing it); it is left out", file=sys.stderr, flush=True)
            return
    yield last

def _figure(value) -> float:
    """A logged figure as a float: one of :data:`~elmo.strict_json.NONFINITE_NAMES` is a gap in the curve (NaN)."""
    return value if is_number(value) else math.nan


TRAIN_KEYS = ("sampled_ppl", "train_ppl", "ppl")  # new logs, then older ones


def train_figure(record: Dict) -> Optional[tuple]:
    """(key, value) of a training record's exp(loss), whichever key its log version used."""
    for key in TRAIN_KEYS:
        if key in record:
            value = record[key]
            return key, _figure(value)
    return None


def curve_names(logs: Sequence[str | Path]) -> List[str]:
    """The legend's name of each log: its run folder's for a ``log.jsonl`` (or a run folder
    named), else the file's name less ``.jsonl``; the paths as given where two would be the
    same or one empty. (Every file was named by its folder: ``logs/a.jsonl logs/b.jsonl`` drew
    two curves both named "logs", and a ``log.jsonl`` of the working folder one named "",
    which the legend left out with a matplotlib warning.)"""
    names = []
    for log in logs:
        path = Path(log).resolve()
        names.append(path.parent.name if path.is_file() and path.name == "log.jsonl" else
                     path.name if path.is_dir() else path.name.removesuffix(".jsonl"))
    if len(set(names)) < len(names) or "" in names:
        return [str(log) for log in logs]
    return names


def plot_learning_curve(logs: Sequence[str | Path], output: str | Path, title: Optional[str] = None) -> Path:
    """Write a PNG of the curves in ``logs`` to ``output`` (atomically)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("plot-curve needs matplotlib: pip install 'elmo-pytorch[plots]'") from None
    output = Path(output)
    check_output_file(output, "picture")
    for log in logs:  # the PNG would replace the training log it was drawn from
        if log_file(log).resolve() == output.resolve():
            raise ValueError(f"{output}: is one of the logs to draw; write the picture to another file")
    check_replaceable(output, b"\x89PNG\r\n\x1a\n", "PNG picture")   # (before the logs are read; again below)
    every = {log: read_log(log) for log in logs}
    empty = [str(log) for log, records in every.items()
             if not any(r.get("event") in ("train", "eval") for r in records)]
    if empty:  # else a picture without a curve
        raise ValueError(f"no training or validation records in {', '.join(empty)}")
    fig, (ax_train, ax_valid) = plt.subplots(1, 2, figsize=(11, 4.2))
    kinds: set[str] = set()
    # each direction and their mean for one or two runs; for more, three lines a run hid the
    # curves under their legend: the mean alone
    valid_keys = (("ppl_fwd", "o-"), ("ppl_bwd", "s--"), ("ppl", "^:")) if len(every) <= 2 else (("ppl", "o-"),)
    for (log, records), name in zip(every.items(), curve_names(list(every))):
        train = [(r, f) for r in records if r.get("event") == "train" and (f := train_figure(r))]
        evals = [r for r in records if r.get("event") == "eval"]
        if train:
            kinds.update(key for _, (key, _) in train)
            ax_train.plot([r["tokens"] / 1e6 for r, _ in train], [v for _, (_, v) in train], label=name, lw=1)
        if evals:
            tokens = [r["epoch"] for r in evals]
            for key, style in valid_keys:
                ax_valid.plot(tokens, [_figure(r[key]) for r in evals], style, label=f"{name} {key}", ms=3)
    titles = {"sampled_ppl": "sampled softmax", "train_ppl": "full softmax", "ppl": "sampled or full softmax"}
    ax_train.set(xlabel="tokens seen (millions)", ylabel="exp(training loss)", yscale="log",
                 title="training: " + ", ".join(titles[k] for k in TRAIN_KEYS if k in kinds)
                 + (" (not comparable with validation)" if kinds - {"train_ppl"} else ""))
    ax_valid.set(xlabel="epoch", ylabel="validation perplexity (full softmax)", yscale="log",
                 title="validation" + ("" if len(every) <= 2 else ": the mean of both directions"))
    for ax in (ax_train, ax_valid):
        ax.grid(True, which="both", alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    # Checked and replaced under OUTPUT.lock, which every command writing a file holds: a file
    # another command wrote there meanwhile (an elmo embed output, say) was replaced by the picture.
    try:
        with output_lock(output):
            check_replaceable(output, b"\x89PNG\r\n\x1a\n", "PNG picture")
            # a fresh temporary name per process: two runs drawing the same OUTPUT do not write one file
            tmp = atomic_target(output)
            try:
                with writing(output, "learning curve"):   # (matplotlib's failed write named no file)
                    fig.savefig(tmp, dpi=120, format="png")
                    atomic_commit(tmp, output)
            finally:
                tmp.unlink(missing_ok=True)
    finally:
        plt.close(fig)
    return output
