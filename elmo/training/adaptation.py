"""One ``adapted_on`` record of a model's ``metadata.json``: what a finetune trained on.

A record names the texts (``files``, ``sha256``) and says how much of them the model saw:

* planned, from the text and the settings before training: ``sentences_planned`` and
  ``tokens_planned`` (the words of the training part), and ``epochs_planned`` (``--epochs``)
  or, where ``--max-steps`` set the run's length instead, ``steps_planned``;
* trained, from the trainer's own counters at the export, across resumes: ``steps_trained``,
  ``tokens_trained`` (input positions, ``<S>`` and ``</S>`` included, as ``log.jsonl`` counts
  its tokens) and ``epochs_trained`` (a fraction where the run stopped early).

Records written before the trained figures existed have ``sentences_trained`` and
``tokens_trained`` but no ``steps_trained``: those figures were the plan (a ``--max-steps 5``
run said it trained on the whole text), so they are read as planned, and the size actually
trained is unknown.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ..checks import is_number


def planned_record(record: Mapping[str, Any], *, sentences: int, words: int, epochs: float,
                   max_steps: Optional[int]) -> Dict[str, Any]:
    """``record`` (files, sha256, ...) with the planned figures of the text and settings."""
    planned = {**record, "sentences_planned": sentences, "tokens_planned": words}
    if max_steps is None:
        planned["epochs_planned"] = epochs
    else:   # (the trainer then takes max_steps steps, whatever --epochs says)
        planned["steps_planned"] = max_steps
    return planned


def with_trained(record: Mapping[str, Any], trained: Mapping[str, Any]) -> Dict[str, Any]:
    """``record`` with what the run trained (:meth:`elmo.training.trainer.TrainingRun.trained_figures`)."""
    return {**record, "steps_trained": int(trained["steps"]), "tokens_trained": int(trained["tokens"]),
            "epochs_trained": float(trained["epochs"])}


def is_older_record(record: Any) -> bool:
    """Whether ``record`` was written before the trained figures were (its figures are the plan)."""
    return isinstance(record, dict) and "steps_trained" not in record


def trained_text(record: Any) -> str:
    """How much an ``adapted_on`` record says the model trained on, in words, e.g.
    ``12 steps, 1,920 tokens, 0.45 of an epoch; planned 1 epoch``; for an older record
    ``amount trained not recorded; planned 3,000 tokens, 1 epoch``; "" for a record that
    gives no figure at all."""
    if not isinstance(record, dict):
        return ""
    planned_epochs = record.get("epochs_planned", record.get("epochs"))
    if is_older_record(record):
        planned_tokens = record.get("tokens_trained")   # (an older record's "trained" was the plan)
        parts = [f"{_number(planned_tokens)} tokens" if is_number(planned_tokens) else "",
                 _epochs(planned_epochs) if is_number(planned_epochs) else ""]
        plan = ", ".join(p for p in parts if p)
        return f"amount trained not recorded; planned {plan}" if plan else ""
    done = [f"{_number(record['steps_trained'])} steps"] if is_number(record["steps_trained"]) else []
    if is_number(record.get("tokens_trained")):
        done.append(f"{_number(record['tokens_trained'])} tokens")
    if is_number(record.get("epochs_trained")):
        epochs = float(record["epochs_trained"])
        done.append(f"{epochs:.2g} of an epoch" if epochs < 1 else _epochs(epochs))
    text = ", ".join(done)
    if is_number(record.get("steps_planned")):
        text += f"; planned {_number(record['steps_planned'])} steps"
    elif is_number(planned_epochs):
        text += f"; planned {_epochs(planned_epochs)}"
    return text


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"


def _epochs(value: float) -> str:
    return f"{float(value):.4g} epoch{'' if float(value) == 1 else 's'}"
