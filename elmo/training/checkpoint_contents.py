"""Whether a loaded training checkpoint holds what this run writes, before anything of it is
restored.

A damaged or hand-edited checkpoint (a missing ``eps``, an Adagrad sum deleted, a weight of
integers, a word that is a number, a carried LSTM state short of a layer, NaN in a weight) was
restored as it was and then failed in a traceback of the code that used it, resumed without a
word, or was reported as a run that diverged. :func:`checkpoint_problem` says what is wrong,
for the trainer's one-line refusal naming the file.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch

from ..modules.softmax import SoftmaxRecipe
from ..weight_values import non_finite
from .checkpoint import contents_problem
from .optim import optimizer_state_problem


@dataclass(frozen=True)
class RunParts:
    """The parts of a run that a checkpoint restores: the language model, its batches (their
    ``state_dict`` and ``batch_size``), the softmax's sampler, the optimizer, and this
    process's rank (which part of ``ranks`` is its own)."""
    model: Any
    batches: Any
    sampler: SoftmaxRecipe
    optimizer: torch.optim.Optimizer
    rank: int


def checkpoint_problem(ckpt: Dict[str, Any], run: RunParts, loaded: bool) -> Optional[str]:
    """What of ``ckpt`` is not of the form ``run`` writes (:func:`.checkpoint.contents_problem`),
    else None. Once its settings and weights are found to fit the run (``loaded``: their own
    messages say more, and a changed vocabulary also changes the optimizer's shapes), also its
    tensors (:func:`tensors_problem`) and optimizer state."""
    template: Dict[str, Any] = {"step": 0, "tokens": 0, "elapsed": 0.0, "skipped_steps": 0,
                                "nonfinite_in_a_row": 0, "ranks": [{}]}
    if loaded:   # (the parts that depend on the settings, which are found the same by now)
        # (each rank's part as this one's; the CPU's generator only, as a run resumed on
        # another device has it; of the schedule its rate, all that an older one's holds)
        template["ranks"] = [{"batches": run.batches.state_dict(), "rng": {"torch": torch.get_rng_state()},
                              "sampler": run.sampler.state_dict()}]
        template.update({"lr_schedule": {"lr": 0.0}} if ckpt.get("lr_schedule") else {})
    problem = contents_problem({**template, **ckpt}, template, "checkpoint")   # (older ones lack some)
    if problem is not None or not loaded:
        return problem
    mine = ckpt["ranks"][run.rank]
    problem = tensors_problem(ckpt["model"], run, mine.get("lstm_state"))
    if problem is None:
        problem = optimizer_state_problem(run.optimizer, ckpt["optimizer"])
        problem = problem and f"its optimizer's {problem}"
    if problem is None and any(v < 0 for v in (ckpt["step"], ckpt["tokens"], ckpt["elapsed"])):
        problem = "a negative step, token count or time"
    window = mine.get("log_window")
    if problem is None and window is not None and not (isinstance(window, dict) and all(
            type(v) in (int, float, bool) for v in window.values())):
        problem = f"its log window is not a dict of sums: {window!r:.80}"
    return problem


def tensors_problem(model: Any, run: RunParts, lstm_state: Any) -> Optional[str]:
    """What is wrong with a checkpoint's weights (``model``: its state dict) in dtype
    (load_state_dict converts them: a weight of integers loaded as whole numbers) or values
    (NaN), or with its carried LSTM state (each layer's (cell ``(2, rows, dim)``, output
    ``(2, rows, projection_dim)``); one layer missing failed the first step, in the LSTM), else
    None. Names and shapes of the weights are load_state_dict's to check."""
    own = run.model.state_dict()
    if not isinstance(model, dict):
        return f"checkpoint['model'] is {type(model).__name__}, expected a dict"
    wrong = next((k for k, v in model.items() if isinstance(v, torch.Tensor) and k in own
                  and v.dtype != own[k].dtype), None)
    if wrong is not None:
        return f"its weight {wrong} is {model[wrong].dtype}, expected {own[wrong].dtype}"
    # (a checkpoint is written of finite weights only, a skipped step changing none: one
    # that holds NaN resumed into "training diverged", which blamed the run, not the file)
    bad = next((k for k, v in model.items() if isinstance(v, torch.Tensor) and non_finite(v) is not None), None)
    if bad is not None:
        return f"its weight {bad} holds non-finite values (NaN or inf)"
    rows, lstm = getattr(run.batches, "batch_size", None), run.model.bilm.options.lstm
    if lstm_state is None or rows is None:   # (none carried: a bucketed run, or a reset)
        return None
    shapes = [[(2, rows, lstm.dim), (2, rows, lstm.projection_dim)]] * lstm.n_layers
    got = [[tuple(t.shape) if isinstance(t, torch.Tensor) and t.is_floating_point() else None for t in pair]
           if isinstance(pair, (list, tuple)) else None for pair in lstm_state] \
        if isinstance(lstm_state, (list, tuple)) else None
    if got != shapes:
        return (f"its carried LSTM state is not (cell, output) tensors of shapes {shapes[0]} for each of "
                f"{len(shapes)} layers")
    return None
