"""What may differ when ``elmo train`` resumes a run: the stored settings against the new ones.

A run folder is resumed with the settings that wrote its checkpoint. Three kinds of setting:

* :data:`FREE`: how long to run and what to write, which never change the trained numbers
  of the steps already taken (epochs, max steps, the time limit, log / eval / checkpoint
  intervals, kept checkpoints, validation text, device, progress bar, export, metadata, and
  ``lr_restart``, an action of the one resume that asks for it);
  thread counts are not settings of the run at all;
* :data:`ON_REQUEST`: a schedule someone may change on purpose between phases (learning
  rate and its plateau decay, state resets, dropout, clipping, bf16): refused unless named in ``allow_change``
  (``--allow-change lr,state-reset-every``), and announced when they change;
* everything else (model shape, vocabulary, corpus, layout, batch, unroll, optimizer,
  negatives, seed, shuffling, init_from): refused, because the checkpoint cannot continue
  under them (a different shape does not even load) or the run would silently become another.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Optional, Tuple

FREE = frozenset({"epochs", "max_steps", "max_seconds", "log_every", "eval_every", "eval_batch_size",
                  "checkpoint_every", "keep_checkpoints", "valid", "device", "progress", "export",
                  "metadata", "output", "allow_change", "lr_restart"})
ON_REQUEST = frozenset({"lr", "lr_decay", "lr_decay_threshold", "state_reset_every", "dropout", "clip_norm", "bf16"})
_PATHS = frozenset({"train", "vocab", "init_from"})


class ResumeMismatch(ValueError):
    """The run folder's checkpoint was written with other settings; the message names them."""


def setting_name(name: str) -> str:
    """``state-reset-every`` (a flag's spelling) -> ``state_reset_every``."""
    return name.strip().lstrip("-").replace("-", "_")


def check_allow_change(names: Iterable[str]) -> List[str]:
    """The names of ``allow_change``, normalised; an unknown or unchangeable one raises."""
    out = []
    for raw in names:
        name = setting_name(raw)
        if name not in ON_REQUEST:
            raise ValueError(f"--allow-change {raw}: only {', '.join(sorted(ON_REQUEST))} may change on resume "
                             f"on request" + (" (it may change freely)" if name in FREE else ""))
        out.append(name)
    return out


def within_run(path: str, output: Any) -> Optional[str]:
    """``path`` as a path inside the run folder ``output`` (``adapt_train.txt``), or None where
    it is not in it (or ``output`` is not known)."""
    if not isinstance(output, str) or not output:
        return None
    rel = os.path.relpath(os.path.normpath(path), os.path.normpath(output))
    return None if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def _normal(key: str, value: Any, output: Any = None) -> Any:
    """``value`` of the setting ``key`` as it is compared: plain JSON; a path normalised, and one
    inside the run folder ``output`` as ``OUTPUT/...`` (finetune's text is a file of its run
    folder: a folder moved elsewhere was refused as "setting train was [OLD/adapt_train.txt],
    now [NEW/adapt_train.txt]", which no command line could give)."""
    value = json.loads(json.dumps(value))  # tuples -> lists, as the stored JSON has them
    if key in _PATHS and value is not None:
        def normal(path: str) -> str:
            rel = within_run(path, output) if isinstance(path, str) else None
            return os.path.join("OUTPUT", rel) if rel is not None else os.path.normpath(path)
        return [normal(v) for v in value] if isinstance(value, list) else normal(value)
    return value


def _flatten(prefix: str, value: Any) -> Dict[str, Any]:
    if isinstance(value, dict) and value:
        out: Dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(f"{prefix}.{k}", v))
        return out
    return {prefix: value}


def without_effect(config: Dict[str, Any]) -> frozenset:
    """The settings that the rest of ``config`` leaves without effect (the unroll steps and
    state resets of the bucketed layout, the threshold of a decay of 1, Adam's Adagrad
    accumulator). A new config refuses such a setting given; a stored one may hold any value
    there (a run begun before that refusal), and it changed nothing."""
    out = set()
    if config.get("layout") == "bucketed":
        out |= {"unroll_steps", "state_reset_every"}
    if config.get("lr_decay", 1.0) >= 1.0:
        out.add("lr_decay_threshold")
    if config.get("optimizer", "adagrad") != "adagrad":
        out.add("adagrad_init")
    return frozenset(out)


def differences(stored: Dict[str, Any], new: Dict[str, Any]) -> List[Tuple[str, str, Any, Any]]:
    """(top-level key, dotted name, stored value, new value) of every setting that differs.

    Keys the stored config does not have (written by an older version) are not compared, nor
    are settings without effect in either config (:func:`without_effect`): a resume with
    ``--lr-decay 1 --allow-change lr-decay`` need not repeat (or allow) the old threshold,
    which the new config refuses.
    """
    idle = without_effect(stored) | without_effect(new)
    out = []
    for key in sorted(new):
        if key in FREE or key not in stored or key in idle:
            continue
        old_flat = _flatten(key, _normal(key, stored[key], stored.get("output")))
        new_flat = _flatten(key, _normal(key, new[key], new.get("output")))
        for name in sorted(set(old_flat) | set(new_flat)):
            a, b = old_flat.get(name, "(unset)"), new_flat.get(name, "(unset)")
            if a != b:
                out.append((key, name, a, b))
    return out


def check_resume(stored: Dict[str, Any], new: Dict[str, Any], where: str) -> List[str]:
    """Raise :class:`ResumeMismatch` unless ``new`` may resume a checkpoint written with
    ``stored``; returns "X was A, now B" for the changes allowed on request."""
    allowed = set(check_allow_change(new.get("allow_change") or []))
    refused, changed = [], []
    for key, name, a, b in differences(stored, new):
        line = f"setting {name} was {json.dumps(a)}, now {json.dumps(b)}"
        if key in allowed:
            changed.append(f"{name} was {json.dumps(a)}, now {json.dumps(b)}")
        elif key in ON_REQUEST:
            refused.append(f"{line} (pass --allow-change {key.replace('_', '-')} to change it on purpose)")
        else:
            refused.append(line)
    if refused:
        raise ResumeMismatch(f"cannot resume {where}: {'; '.join(refused)}. Rerun with the settings it was "
                             f"started with, or use another --output")
    return changed


#: How the processes share each file's lines (:attr:`~elmo.data.corpus.CorpusStream.line_split`), in words.
LINE_SPLITS = {"turns": "every N-th of the shuffled lines",
               "tokens": "a block of consecutive lines of about equal tokens",
               "lines": "a block of about equal consecutive lines",
               "strided": "every N-th line (as versions before the blocks did)"}


def check_line_split(then: Optional[str], now: Optional[str], where: str) -> None:
    """Refuse to resume the run ``where`` whose processes shared each file's lines otherwise
    than this run's do (``then``: the checkpoint's record; ``now``: this run's stream's): its
    positions count the lines of other parts. A checkpoint from before the record dealt the
    lines in turn, shuffled or not."""
    if then == "(unrecorded)":
        then = None if now is None else "turns" if now == "turns" else "strided"
    if then == now:
        return
    said = {"whole": "whole files", **LINE_SPLITS}
    raise ResumeMismatch(f"cannot resume {where}: each of its processes read {said.get(then or 'whole', then)}, "
                         f"and this version gives each {said[now or 'whole']}, so its position would point into "
                         f"other text; resume it with the version of elmo that began it, or use another "
                         f"--output")


def check_vocabulary_unchanged(stored: Optional[str], digest: str, vocab: str, where: str,
                               checkpoint: Optional[str]) -> None:
    """Refuse a vocabulary file ``vocab`` whose words changed since the checkpoint was written
    (the same path, rebuilt): each softmax row would silently score another word. ``stored``:
    the checkpoint's digest of its words (checkpoints written before the digest was recorded
    have none), ``digest`` this run's; ``checkpoint``: the checkpoint's file name."""
    if stored is not None and stored != digest:
        raise ResumeMismatch(
            f"cannot resume {where}: the vocabulary {vocab} has changed since "
            f"{checkpoint or 'its checkpoint'} was written (its words "
            f"differ); rerun with the vocabulary it was started with, or use another --output")
