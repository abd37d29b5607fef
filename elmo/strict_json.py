"""JSON that every parser reads: no NaN or Infinity tokens.

Python's :mod:`json` writes a non-finite float as ``NaN`` or ``Infinity``, which the JSON
standard does not have: strict parsers, JavaScript's ``JSON.parse`` among them, refuse the
whole file. Our outputs meet such values honestly (the perplexity of a diverged
model is infinite, a loss can be NaN), so they are written in one of two ways:

* :func:`dumps` (measurements: logs, reports, model metadata) names them as the strings
  ``"nan"``, ``"inf"`` and ``"-inf"``, so the value survives and a reader can tell it from a
  missing one (``float("inf")`` reads the string back);
* :func:`nonfinite_as_none` (task results, where NaN means "no score": a standard deviation of
  one seed, a run without a dev set) makes them ``null``.
"""
from __future__ import annotations

import json
import math
from typing import Any, Callable

#: How :func:`dumps` writes a float that is not finite (strict JSON has no NaN or infinity).
NONFINITE_NAMES = ("nan", "inf", "-inf")


def named_nonfinite(value: Any) -> Any:
    """A copy of a JSON-like value with each NaN or infinite float as "nan", "inf" or "-inf"."""
    return _replace_nonfinite(value, str)


def nonfinite_as_none(value: Any) -> Any:
    """A copy of a JSON-like value with each NaN or infinite float as None."""
    return _replace_nonfinite(value, lambda _: None)


def _replace_nonfinite(value: Any, replace: Callable[[float], Any]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return replace(value)
    if isinstance(value, dict):
        return {k: _replace_nonfinite(v, replace) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_replace_nonfinite(v, replace) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of ``value`` with non-finite floats named (:func:`named_nonfinite`).

    ``allow_nan=False`` stays on, so a non-finite number that hides where this cannot see it
    (a ``default=`` hook's result) raises instead of writing a token parsers refuse."""
    return json.dumps(named_nonfinite(value), allow_nan=False, **kwargs)
