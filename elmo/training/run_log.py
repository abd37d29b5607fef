"""The learning curve, ``log.jsonl``: the file a run appends its records to, cut back to the
checkpoint's step on resume; the log window, whose sums a checkpoint keeps, and the training
record made of it."""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..io import atomic_write_text, os_error_reason
from ..text_files import json_objects
from .. import strict_json
from .checkpoint import writing
from .config import TrainConfig


def _log_records_until(path: Path, step: int) -> List[Dict[str, Any]]:
    """The records of the log ``path`` up to ``step``. A last line without its newline is a
    write cut short (a run killed, or its disk full, while it wrote that line): it is dropped,
    with a note. Any other line that is not a JSON object, or whose ``step`` is no whole number,
    is an error naming it; so is a log that cannot be read (a folder there)."""
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as e:   # (a folder there, unreadable: the OS's line did not say what to do)
        raise ValueError(f"{path}: cannot read the learning curve ({os_error_reason(e)}); put back the run's "
                         f"own log.jsonl, or remove what is there to resume with a curve from the checkpoint on") \
            from None
    lines = text.split("\n")
    torn = lines.pop()  # what follows the last newline: "" when the file ends with one
    if torn.strip("\x00 \t\r"):
        print(f"note: {path}: its last line was cut short (the run stopped while writing it); it is dropped",
              file=sys.stderr, flush=True)

    def bad(number: int, what: str) -> ValueError:
        return ValueError(f"{path}: line {number}: {what}; the learning curve is damaged there: "
                          f"remove or repair that line to resume")

    kept = []
    for number, record in json_objects(lines, bad):
        at = record.get("step", 0)
        if isinstance(at, bool) or not isinstance(at, int):   # (compared below: a TypeError's traceback)
            raise bad(number, f"its step is {json.dumps(at)}, not a step number")
        if at <= step:
            kept.append(record)
    return kept


class RunLog:
    """The JSON-lines learning curve. On resume, lines past the checkpoint's step are dropped
    (a killed run may have logged steps that will be trained again). ``evals`` holds the
    (step, sentences, targets) of the validation records kept: the final validation comes
    after the last checkpoint, so a finished run started again (or killed while exporting)
    measures the same weights on the same text again, and that is not logged twice."""

    def __init__(self, path: Path, enabled: bool, resume_step: Optional[int]):
        self.path, self.enabled = path, enabled
        self.evals: set = set()
        if enabled and resume_step is not None:
            kept = _log_records_until(path, resume_step) if path.exists() else []
            if not kept:   # (emptied or deleted: the curve began at the resume without a word)
                print(f"note: {path}: holds no record of the steps up to {resume_step} (emptied or deleted); "
                      f"the learning curve goes on from the checkpoint's step", file=sys.stderr, flush=True)
            self.evals = {(r.get("step"), r.get("sentences"), r.get("targets"))
                          for r in kept if r.get("event") == "eval"}
            with writing(path):
                atomic_write_text(path, "".join(strict_json.dumps(r, sort_keys=True) + "\n" for r in kept))
        elif enabled and resume_step is None:
            with writing(path):
                atomic_write_text(path, "")

    def write(self, record: Dict[str, Any]) -> None:
        if self.enabled:
            with writing(self.path), open(self.path, "a", encoding="utf-8") as f:
                f.write(strict_json.dumps(record, sort_keys=True) + "\n")


#: What a log line averages over its steps, kept in the checkpoint (not the tokens and time
#: of its speed, which are this session's).
WINDOW_SUMS = ("loss", "weight", "n", "gnorm", "skipped")

#: A log window's mark (kept in the checkpoint) that its loss leaves out its steps before a
#: resume: an older checkpoint's bucketed steps, whose target counts it does not hold.
SINCE_RESUME = "loss_since_resume"


def weighted_window(window: Dict[str, Any], cfg: TrainConfig) -> Dict[str, Any]:
    """A checkpoint's log window in the present form: one written before the losses were
    weighted by their targets holds the sum of the steps' means. A packed step's mean is over
    one full batch's targets, which are its weight (exact). A bucketed step's count is lost, so
    its loss cannot be weighed against the new steps' (one target each made the next log line
    nearly the new steps' mean alone): the old steps' loss is left out and the window marked
    :data:`SINCE_RESUME`, which the log line carries (its grad_norm still covers them)."""
    if "weight" in window:
        return window
    if cfg.layout == "packed":
        per_step = float(cfg.batch_size * cfg.unroll_steps)
        return {**window, "loss": window["loss"] * per_step, "weight": window["n"] * per_step}
    return {**window, "loss": 0.0, "weight": 0.0, SINCE_RESUME: True}


def new_window() -> Dict[str, Any]:
    """A log window: the sums of loss, gradient norm and speed over the next ``log_every``
    steps (``n`` of them applied, ``skipped`` not: their gradient was not finite). The sums
    (:data:`WINDOW_SUMS`) travel in the checkpoint, so a resumed run's next log line averages
    the same steps as an uninterrupted run's; its speed counts this session only."""
    return {"loss": 0.0, "weight": 0.0, "n": 0, "tokens": 0, "t0": time.perf_counter(),
            "gnorm": 0.0, "skipped": 0}


def train_record(window: Dict[str, Any], totals: Sequence[float], step: int, tokens_done: int,
                 epoch_positions: int, elapsed: float,
                 ppl_key: str) -> Tuple[Dict[str, Any], Optional[Dict[str, str]]]:
    """The learning-curve record of ``window``'s steps, and what the progress bar shows of it
    (None where the window has no loss). ``totals``: the loss, weight and token sums of the
    window added up over the ranks; ``ppl_key``: the name of exp(training loss)."""
    loss_sum, weight_sum, tok_sum = totals
    dt = max(time.perf_counter() - window["t0"], 1e-9)
    record: Dict[str, Any] = {"event": "train", "step": step,
                              "epoch": round(tokens_done / epoch_positions, 4),
                              "tokens_per_s": round(tok_sum / dt, 1), "tokens": tokens_done,
                              "elapsed_s": round(elapsed, 2)}
    shown = None
    if window["n"]:  # (the skipped steps are all ranks' alike, so every rank has the same n)
        record["grad_norm"] = round(window["gnorm"] / window["n"], 4)
    if weight_sum > 0:  # (0 where an older window's steps are all it has: see weighted_window)
        loss = loss_sum / weight_sum   # the mean over the targets of the steps (and ranks)
        record.update({"loss": round(loss, 5), ppl_key: round(math.exp(min(loss, 50)), 3)})
        if window.get(SINCE_RESUME):
            record[SINCE_RESUME] = True
        shown = {"tok/s": f"{record['tokens_per_s']:.0f}", "loss": f"{loss:.3f}",
                 ppl_key.replace("_", "-"): f"{record[ppl_key]:.1f}"}
    if window["skipped"]:
        record["skipped"] = window["skipped"]
    return record, shown
