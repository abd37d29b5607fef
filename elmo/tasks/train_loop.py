"""Training with early stopping on the dev metric, and evaluation (:func:`score`; a task's
metrics on one of its test sets, :func:`split_metrics`).

:func:`fit` trains a :class:`~elmo.tasks.models.TaskModel` with Adam, one pass over the
shuffled training batches per epoch, scores dev after each epoch, keeps the trainable
parameters of the best epoch and stops after ``patience`` epochs without improvement. Only a
strictly higher dev score is an improvement: among epochs with equal scores (a model that
predicts one label for all of dev scores the same every epoch) the earliest is kept, and the
ties count towards ``patience``. A batch whose loss or gradient is not finite is skipped; an
epoch that ends on one is not kept (its parameters are those that gave it). The biLM, when fine-tuned, may get its own learning rate
(``bilm_lr``).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, TypeVar, cast

import torch

from ..config import ConfigError
from ..jobconfig import build, check_numbers
from .batching import Batch
from .datasets import Example, TaskData
from .kinds import answer_texts, task_kind
from .metrics import ANSWER_METRICS, CORRELATIONS, METRICS, correlation_undefined
from .models import TaskModel


@dataclass
class FitConfig:
    """Optimiser and stopping settings of a task model (the ``train`` block of an experiment
    config; not the biLM trainer's :class:`~elmo.training.config.TrainConfig`)."""

    epochs: int = 20
    patience: int = 3
    lr: float = 1e-3
    bilm_lr: float = 1e-4
    batch_size: int = 32
    grad_clip: float = 5.0
    weight_decay: float = 0.0
    max_seconds: float = 0.0          # stop after the epoch that passes this (0 = no limit)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "") -> "FitConfig":
        """The settings of a ``train`` block, every key and type checked; ``where`` names the
        block in errors (e.g. ``"task pos: "``). Numbers out of range are refused here, before
        any run: a negative or NaN ``grad_clip`` would flip or poison every gradient."""
        cfg = build(cls, d, source=where.removesuffix(": "), block="train")
        check_numbers(where, "train", epochs=(cfg.epochs, "count"), patience=(cfg.patience, "count"),
                      lr=(cfg.lr, "rate"), bilm_lr=(cfg.bilm_lr, "rate"), batch_size=(cfg.batch_size, "count"),
                      grad_clip=(cfg.grad_clip, "rate"), weight_decay=(cfg.weight_decay, "rate"),
                      max_seconds=(cfg.max_seconds, "seconds"))
        _check_adam_scalars(cfg, where)
        return cfg


#: Adam's default beta1 (what :func:`_optimizer` uses): its first step is lr / (1 - beta1).
ADAM_BETA1 = 0.9
FLOAT32_MAX = torch.finfo(torch.float32).max


def _check_adam_scalars(cfg: FitConfig, where: str) -> None:
    """Refuse a learning rate or weight decay that Adam cannot pass to float32 weights: torch
    turns its first step, ``lr / (1 - beta1)``, and ``weight_decay`` into float32 scalars, and
    one past float32's largest number (``lr`` 1e38, finite, so allowed) stopped the first run
    with a RuntimeError from deep in torch.optim (a finite lr below it diverges instead, which
    :func:`fit` names)."""
    steps = {"lr": (cfg.lr / (1 - ADAM_BETA1), f"its first step, lr / (1 - {ADAM_BETA1:g}),"),
             "bilm_lr": (cfg.bilm_lr / (1 - ADAM_BETA1), f"its first step, bilm_lr / (1 - {ADAM_BETA1:g}),"),
             "weight_decay": (cfg.weight_decay, "it")}
    for name, (scalar, what) in steps.items():
        if scalar > FLOAT32_MAX:
            raise ConfigError(f"{where}train: {name} {getattr(cfg, name):g} is too large for Adam: {what} "
                              f"must be a float32 number (at most {FLOAT32_MAX:.5g}), got {scalar:.5g}")


BatchMaker = Callable[[Sequence[Example]], Batch]
T = TypeVar("T")

#: Batches in a row with a non-finite loss or gradient (each skipped) after which fit() stops.
MAX_NONFINITE_BATCHES = 5


def batches(examples: Sequence[Example], size: int, make: BatchMaker,
            rng: Optional[random.Random] = None,
            length: Callable[[Example], int] = lambda ex: len(ex.tokens)) -> List[Batch]:
    """Batches of ``size`` examples: shuffled with ``rng`` when given, else in order.
    Examples of similar ``length`` (default: the first text's tokens; a kind's
    ``batch_length``) are batched together (sorted within chunks of 50 batches) so that little
    padding is computed."""
    order = list(range(len(examples)))
    if rng is not None:
        rng.shuffle(order)
    chunk = size * 50
    groups = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=lambda i: length(examples[i]))
        groups += [part[k:k + size] for k in range(0, len(part), size)]
    if rng is not None:
        rng.shuffle(groups)
    return [make([examples[i] for i in g]) for g in groups]


def progress_bar(steps: Sequence[T], desc: str, progress: bool) -> Iterable[T]:
    """``steps`` (batches, or where they start) with a tqdm bar on stderr that counts them,
    drawn only with ``progress`` (the command decides: a terminal and no --quiet) and gone
    when done, since the log lines are the record."""
    from tqdm import tqdm
    return tqdm(steps, desc=desc, unit="batch", leave=False, disable=not progress)


def predict(model: TaskModel, examples: Sequence[Example], make: BatchMaker,
            batch_size: int = 64, progress: bool = False, desc: str = "predict") -> list:
    """The model's predictions (label ids or tag-id lists) for examples, in their order;
    ``progress``: a bar named ``desc`` over the batches."""
    model.eval()
    out = []
    for start in progress_bar(range(0, len(examples), batch_size), desc, progress):
        out += model.predict(make(examples[start:start + batch_size]))
    return out


def score(model: TaskModel, examples: Sequence[Example], make: BatchMaker, metric: str,
          labels: Sequence[str], batch_size: int = 64, progress: bool = False, desc: str = "predict") -> float:
    """The task metric (see :mod:`.metrics`) of the model's predictions on examples, in
    percent (a correlation times 100, as GLUE reports STS-B's); ``progress``, ``desc``: as
    :func:`predict`'s."""
    if not examples:
        return float("nan")
    return metric_value(metric, examples, predict(model, examples, make, batch_size, progress, desc), labels)


def metric_value(metric: str, examples: Sequence[Example], pred: list, labels: Sequence[str]) -> float:
    """``metric`` of the predictions ``pred`` (:func:`predict`'s, for ``examples``), in percent."""
    gold: Sequence = [ex.label for ex in examples]
    guess: Sequence
    if metric in ("token_accuracy", "span_f1"):            # one tag id list per sentence
        guess = [[labels[i] for i in p] for p in pred]
    elif metric in CORRELATIONS:                           # numbers already
        guess = pred
    elif metric in ANSWER_METRICS:                         # answer spans: their texts
        gold, guess = answer_texts(examples, pred)
    else:
        guess = [labels[i] for i in pred]
    return 100.0 * METRICS[metric](gold, guess)


def split_metrics(model: TaskModel, data: TaskData, make: BatchMaker, log: Callable[[str], None],
                  split: str = "test", progress: bool = False) -> Dict[str, Any]:
    """The task metric on ``split`` (``{data.metric: value}``); a graded task's also gets
    ``other_metrics`` (its kind's other correlation there) and, where the correlation is
    undefined (NaN), ``undefined``: why, which is logged too. A span_qa task's gets its other
    metric too (F1 and exact match), from the same predictions. ``progress``: a bar named
    after the split over its batches."""
    kind = task_kind(data.kind)
    examples = data.splits[split]
    if not (kind.graded or kind.span_answers):
        return {data.metric: score(model, examples, make, data.metric, data.labels,
                                   progress=progress, desc=split)}
    if not examples:
        return {data.metric: float("nan")}
    pred = predict(model, examples, make, progress=progress, desc=split)
    out: Dict[str, Any] = {data.metric: metric_value(data.metric, examples, pred, data.labels),
                           "other_metrics": {m: metric_value(m, examples, pred, data.labels)
                                             for m in kind.metrics if m != data.metric}}
    why = correlation_undefined([cast(float, ex.label) for ex in examples], pred) if kind.graded else None
    if why:
        out["undefined"] = why
        log(f"{data.name}: the {split} correlation is undefined (NaN): {why}")
    return out


def _optimizer(model: TaskModel, cfg: FitConfig) -> torch.optim.Optimizer:
    bilm_params = []
    if model.encoder.elmo is not None and model.encoder.elmo.finetune:
        bilm_params = [p for p in model.encoder.elmo.elmo.bilm.parameters() if p.requires_grad]
    bilm_ids = {id(p) for p in bilm_params}
    rest = [p for p in model.parameters() if p.requires_grad and id(p) not in bilm_ids]
    groups = [{"params": rest, "lr": cfg.lr}]
    if bilm_params:
        groups.append({"params": bilm_params, "lr": cfg.bilm_lr})
    return torch.optim.Adam(groups, weight_decay=cfg.weight_decay, betas=(ADAM_BETA1, 0.999))


def _trainable_state(model: TaskModel) -> Dict[str, torch.Tensor]:
    """Copies of the parameters that training changes (a frozen biLM is left out)."""
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def _diverged(what: str, cfg: FitConfig) -> FloatingPointError:
    """The error of a task model whose loss or gradient stayed non-finite (``what``: how)."""
    # (grad_clip is on by default: "or set train.grad_clip" sent users to a setting they had)
    clip = " or set train.grad_clip" if not cfg.grad_clip else f" (train.grad_clip {cfg.grad_clip:g} is on)"
    return FloatingPointError(f"the task model diverged: {what}; lower train.lr (it is {cfg.lr:g}){clip}")


def fit(model: TaskModel, train: Sequence[Example], dev: Sequence[Example], make: BatchMaker,
        metric: str, labels: Sequence[str], cfg: FitConfig, seed: int,
        log: Callable[[str], None] = lambda s: None,
        early_stopping: bool = True,
        length: Callable[[Example], int] = lambda ex: len(ex.tokens),
        progress: bool = False) -> Dict[str, object]:
    """Train with early stopping on dev; the model ends with its best epoch's parameters (the
    earliest of equal best scores; see the module docstring).
    With ``early_stopping=False`` dev must be empty: every epoch runs and the last one is
    kept (``best_dev`` is NaN). ``length``: what batches group examples by (:func:`batches`).
    ``progress``: a bar over each epoch's batches and one over dev's (see :func:`progress_bar`).

    Returns ``{"best_dev", "best_epoch", "epochs", "history": [{"epoch", "loss", "dev"}],
    "seconds"}``. A batch whose loss or gradient is not finite is skipped (logged per epoch);
    :data:`MAX_NONFINITE_BATCHES` in a row raise FloatingPointError.
    """
    if not train or (early_stopping and not dev):
        raise ValueError(f"training needs train and dev examples (got {len(train)} and {len(dev)})")
    if not early_stopping and dev:
        raise ValueError("without early stopping there is no dev split to score")
    rng = random.Random(seed)
    opt = _optimizer(model, cfg)
    params = [p for g in opt.param_groups for p in g["params"]]
    best_dev, best_epoch, best_state = float("-inf"), 0, _trainable_state(model)
    history = []
    in_a_row = 0   # batches in a row whose loss or gradient was not finite (each skipped)
    start = time.time()
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        total, n = 0.0, 0
        skipped = 0
        for batch in progress_bar(batches(train, cfg.batch_size, make, rng, length), f"epoch {epoch}", progress):
            opt.zero_grad()
            loss = model.loss(batch)
            finite = bool(torch.isfinite(loss))
            if finite:
                loss.backward()
                if cfg.grad_clip:
                    finite = bool(torch.isfinite(torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)))
            if not finite:  # no update from it: NaN weights would go on scoring, as label 0 everywhere
                skipped += 1
                in_a_row += 1
                if in_a_row >= MAX_NONFINITE_BATCHES:
                    raise _diverged(f"{in_a_row} batches in a row (epoch {epoch}) had a non-finite loss or "
                                    f"gradient", cfg)
                continue
            in_a_row = 0
            opt.step()
            total += float(loss.detach())
            n += 1
        # Its last batch skipped, the epoch ends with the parameters that gave that batch a
        # non-finite loss (no step since): their scores were kept as a result (label 0 for NaN).
        broken = in_a_row > 0
        if skipped:
            log(f"epoch {epoch}: {skipped} batches skipped (non-finite loss or gradient)"
                + ("; the last one was, so this epoch's parameters are not kept" if broken else ""))
        if not dev:                      # no early stopping: the last epoch is the one kept
            history.append({"epoch": epoch, "loss": total / max(n, 1), "dev": float("nan")})
            log(f"epoch {epoch}: loss {total / max(n, 1):.4f} (no dev)")
            if not broken:
                best_dev, best_epoch, best_state = float("nan"), epoch, _trainable_state(model)
        else:
            dev_score = float("nan") if broken else score(model, dev, make, metric, labels,
                                                          progress=progress, desc="dev")
            history.append({"epoch": epoch, "loss": total / max(n, 1), "dev": dev_score})
            log(f"epoch {epoch}: loss {total / max(n, 1):.4f} dev {dev_score:.2f}")
            # (a NaN dev score, an undefined correlation, is no improvement: NaN > x is False,
            # and a later finite score still beats the -inf start)
            if dev_score > best_dev:
                best_dev, best_epoch, best_state = dev_score, epoch, _trainable_state(model)
            elif epoch - best_epoch >= cfg.patience:
                break
        if cfg.max_seconds and time.time() - start > cfg.max_seconds:
            log(f"stopping: time limit of {cfg.max_seconds:g} s reached")
            break
    if best_epoch == 0 and broken:
        raise _diverged(f"epoch {len(history)}, the last, ended on a batch whose loss or gradient was "
                        f"non-finite with its parameters, and no earlier epoch can be kept instead", cfg)
    if dev and best_epoch == 0:
        # no epoch had a defined dev score: the untrained start would be kept without a word
        best_dev, best_epoch, best_state = float("nan"), len(history), _trainable_state(model)
        log(f"the dev {metric} was undefined (NaN) in every epoch (for a correlation: the model "
            f"predicted one value for all of dev, or dev's targets are all equal), so early "
            f"stopping had nothing to compare: kept the last epoch's parameters (epoch {best_epoch})")
    with torch.no_grad():
        named = dict(model.named_parameters())
        for name, value in best_state.items():
            named[name].copy_(value)
    return {"best_dev": best_dev, "best_epoch": best_epoch, "epochs": len(history),
            "history": history, "seconds": time.time() - start}
