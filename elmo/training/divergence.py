"""A run that diverged: the line it stops with after non-finite steps, and the check, before
the export, that the finished model's outputs are finite. (The step skips a non-finite update
and counts it: :meth:`~elmo.training.trainer.TrainingRun.step`.)"""
from __future__ import annotations

import math
from itertools import islice
from pathlib import Path
from typing import List, Sequence, Tuple

import torch

from ..data.corpus import expand_paths, iter_file_sentences
from ..vocab import Vocabulary
from .checkpoint import list_checkpoints
from .evaluate import likelihood_sums
from .model import LanguageModel

#: Steps in a row whose gradient is not finite after which a run stops (each is skipped).
MAX_NONFINITE_STEPS = 5

#: Training sentences scored at the end to see that the model's outputs are finite.
FINAL_CHECK_SENTENCES = 8


def diverged_message(step_no: int, nonfinite_in_a_row: int, ckpt_dir: Path, at_end: bool = False) -> str:
    """The one line a diverged run stops with, at step ``step_no`` after ``nonfinite_in_a_row``
    non-finite steps. None of the skipped steps changed the weights,
    but the update before them may be what broke the model (a huge --lr gives finite
    weights of 1e28 whose every later loss is NaN): the checkpoints written since hold those
    same weights, and a resume from them diverges again, so the line names the older ones.

    ``at_end``: the schedule ran out during such a streak, before it was long enough to stop
    the run; the model is not exported, since its last loss was not finite."""
    before = step_no - nonfinite_in_a_row  # the weights now are those of this step
    found = list_checkpoints(ckpt_dir)
    since = [p.name for p in found if int(p.stem.split("-")[1]) >= before]
    older = [p.name for p in found if int(p.stem.split("-")[1]) < before]
    held = f" (as are {', '.join(since)})" if since else ""
    fallback = (f"delete the checkpoints from step {before} on in {ckpt_dir} and resume from {older[-1]}"
                if older else f"no checkpoint in {ckpt_dir} is older than step {before}: start again "
                              f"in another --output")
    n, last = nonfinite_in_a_row, step_no
    weights = (f"the weights are those of step {before}{held}: finite, but that step's update may be what "
               f"diverged")
    if at_end:
        lower = "a lower --lr, or in float32 if --bf16 was on"
        instead = (f"delete the checkpoints from step {before} on in {ckpt_dir} and resume from {older[-1]} "
                   f"with {lower} (and --allow-change lr / bf16)" if older else
                   f"start again in another --output with {lower} (no checkpoint in {ckpt_dir} is older "
                   f"than step {before})")
        return (f"training diverged: the run ended on {n} step{'s' if n > 1 else ''} in a row (up to step "
                f"{last}) with a non-finite loss or gradient, so the model was not exported; {weights}. To "
                f"train on from them, resume with a larger --max-steps (a finite step ends the streak); "
                f"otherwise {instead}")
    stopped = (f"training diverged: the last {n} steps (up to step {last}) had a non-finite loss or gradient "
               f"and changed nothing")
    if not found:
        # (before the first checkpoint: "Resume with a lower --lr" named nothing to resume from)
        return (f"{stopped}, before the first checkpoint, so there is nothing to resume from; run again "
                f"(in this --output it starts afresh) with a lower --lr, or in float32 if --bf16 was on")
    return (f"{stopped}; {weights}. Resume with a lower --lr (and --allow-change lr), or in float32 "
            f"if --bf16 was on; if it diverges again, {fallback}")


def check_outputs_finite(model: LanguageModel, vocab: Vocabulary, valid_sentences: Sequence[List[str]],
                         valid_losses: Tuple[float, float], train: Sequence[str], eval_batch_size: int,
                         device: torch.device, step_no: int, ckpt_dir: Path) -> None:
    """Refuse to export a model whose outputs are NaN. A step's loss is that of the weights
    before its update, so an update that breaks them shows only in the next step's: the
    last one's never did (--lr 1e30 over one step exported finite weights near 1e29 whose
    every loss is NaN, a finished run, exit status 0). The final validation tells, where there
    is held-out text (``valid_losses``: its sums, every rank's); else a few sentences of the
    training text ``train`` are scored, by every rank, whose weights are the same: all of them
    stop together."""
    if valid_sentences:
        nll_f, nll_b = valid_losses
    else:
        sentences = list(islice(iter_file_sentences(expand_paths(train)), FINAL_CHECK_SENTENCES))
        nll_f, nll_b, _, _ = likelihood_sums(model, sentences, vocab, eval_batch_size, device)
    if not (math.isnan(nll_f) or math.isnan(nll_b)):   # (inf is a defined result: next to no probability)
        return
    step = step_no
    older = [p.name for p in list_checkpoints(ckpt_dir) if int(p.stem.split("-")[1]) < step]
    instead = (f"delete the checkpoints from step {step} on in {ckpt_dir} and resume from {older[-1]} "
               f"with a lower --lr (and --allow-change lr)" if older else
               f"start again in another --output with a lower --lr (no checkpoint in {ckpt_dir} is "
               f"older than step {step})")
    raise FloatingPointError(f"training diverged: after the last step ({step}) the model's loss is NaN (its "
                             f"outputs are not finite: that step's update broke the weights, as a --lr too "
                             f"large does), so the model was not exported; {instead}")
