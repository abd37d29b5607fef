"""A task model built from its ``model`` settings: the word features, the encoder (with
ELMo where the variant has it) and the kind's model on top (:meth:`TaskKind.build_model`).

Both the runner (a model to train) and :mod:`.saved` (a saved model's shape, before its
weights are loaded) build models here, so neither imports the other for it.
"""
from __future__ import annotations

from typing import List, Optional, Protocol

import torch

from .experiment_config import ModelSettings
from .features import ElmoFeatures, WordFeatures
from .kinds import task_kind
from .models import Encoder, TaskModel


class TaskShape(Protocol):
    """What :func:`build_model` reads of a task: a :class:`~elmo.tasks.datasets.TaskData`,
    or a saved model's kind and labels (:func:`.saved.load`)."""

    kind: str
    labels: List[str]


def build_model(task: TaskShape, embeddings: torch.Tensor, settings: ModelSettings,
                elmo_features: Optional[ElmoFeatures], lam: float) -> TaskModel:
    """The task model of ``task.kind`` with the given settings (``model`` block), over the
    word vectors ``embeddings`` (V, D) and, with ELMo, ``elmo_features`` whose layer weights
    are penalised by ``lam``."""
    words = WordFeatures(embeddings, trainable=settings.trainable_embeddings,
                         char_features=settings.char_features)
    encoder = Encoder(words, settings.hidden, settings.dropout, elmo_features, settings.lstm_layers)
    return task_kind(task.kind).build_model(encoder, len(task.labels), settings, lam)
