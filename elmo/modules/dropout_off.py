"""Dropout turned off for the calls of one thread, without touching any module's ``training``.

The embedders run a caller's model, which may be one still being trained (its LSTM dropout
on). Switching it to ``eval()`` for a call and back to ``train()`` after flips a flag that every
thread shares: two threads embedding with one model interleaved those switches, so a call ran
with dropout on (different vectors, no error) or the model was left in the wrong mode. This
switch is a context variable instead: it is seen only by the thread (or task) that set it.

    with dropout_off():
        bilm(ids)          # no dropout, and bilm.training is whatever the caller left
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

from torch import nn

_OFF: contextvars.ContextVar[bool] = contextvars.ContextVar("elmo_dropout_off", default=False)


@contextlib.contextmanager
def dropout_off() -> Iterator[None]:
    """Run the block with the biLM's dropout off for this thread only."""
    token = _OFF.set(True)
    try:
        yield
    finally:
        _OFF.reset(token)


def dropout_active(module: nn.Module) -> bool:
    """Whether ``module`` drops now: it is in training mode and this thread has not turned
    dropout off."""
    return module.training and not _OFF.get()
