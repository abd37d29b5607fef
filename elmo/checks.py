"""Checks of the counts, switches and paths that the Python API takes, before they reach torch.

A count given as 2.5 or "4" fails deep inside torch or plain Python with a message that does
not name the argument; True passes ``operator.index`` as 1 and a negative count slices from
the end. These helpers refuse each of them with one message that names the argument:

* the wrong type (a float, a string, a bool, None) is a TypeError, and so is a switch that is
  not a bool;
* an integer out of range is a ValueError.

Integers of any type (Python's, numpy's, a 0-dimensional integer tensor) are accepted.
"""

from __future__ import annotations

import operator
import os
import sys
from pathlib import Path
from typing import Any, Optional, TypeGuard


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` for an error line: its first line, cut to ``limit`` characters. A module's
    or a tensor's repr runs over many lines (a whole model's layers), which buried the line
    that said what was wrong."""
    text = repr(value)
    first = text.split("\n", 1)[0]
    return first if first == text and len(text) <= limit else first[:limit - 3] + "..."


def integer_or_none(value: Any) -> Optional[int]:
    """``value`` as an int where it is an integer of any type, else None (2.5, 50.0, "4",
    True: a bool is a switch, not a count)."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def require_integer(name: str, value: Any) -> int:
    """``value`` as an int; anything else is a TypeError naming ``name``."""
    number = integer_or_none(value)
    if number is None:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}: {shown(value)}")
    return number


def require_seed(value: Any, name: str = "seed") -> int:
    """``value`` as a random seed that Python's, numpy's and torch's generators all take, 0 to
    2**64 - 1: numpy takes no negative seed (a bootstrap failed after every vector of an
    analysis was computed), torch no larger one, and ``random.Random(-1)`` draws as
    ``Random(1)`` does."""
    seed = require_integer(name, value)
    if not 0 <= seed < 2**64:
        raise ValueError(f"{name} must be a whole number from 0 to 2**64 - 1, got {seed}")
    return seed


def require_path(name: str, value: Any) -> Path:
    """``value`` (a string or an ``os.PathLike``) as a Path; anything else, None included, is a
    TypeError naming ``name`` (pathlib's own message does not say which argument it was)."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (a string or os.PathLike), got {type(value).__name__}: "
                        f"{shown(value)}")
    return Path(value)


def require_switch(name: str, value: Any) -> bool:
    """``value`` as a bool (numpy's too); anything else is a TypeError naming ``name``: the
    string "false" is true to Python, and 0 or 1 is more likely a misplaced count."""
    # (a numpy bool exists only once numpy is imported: not imported here, as the options of
    # `elmo --help`, which check with these helpers, need no numpy)
    numpy = sys.modules.get("numpy")
    if isinstance(value, bool) or (numpy is not None and isinstance(value, numpy.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {type(value).__name__}: {shown(value)}")


def require_count(name: str, value: Any, least: int = 1, hint: str = "") -> int:
    """``value`` as an int of at least ``least``: a TypeError for a non-integer, a ValueError
    below ``least``, each naming ``name`` (and ending with ``hint``, e.g. what 0 would mean)."""
    number = require_integer(name, value)
    if number < least:
        raise ValueError(f"{name} must be at least {least}, got {number}{hint}")
    return number


def require_utf8_text(name: str, value: str) -> str:
    """``value``, text a command takes from its command line (``name``: the argument as
    typed), unless it holds a character UTF-8 cannot encode: a lone surrogate, as which a
    byte that was not UTF-8 reaches Python (``os.fsdecode``'s escape: a Latin-1 terminal's
    ``caf\\xe9``). A ValueError names the byte; made into character ids, such a character is
    dropped, as the original drops it, and ``caf\\xe9`` silently became the word ``caf``."""
    bad = next((ord(ch) for ch in value if 0xD800 <= ord(ch) <= 0xDFFF), None)
    if bad is None:
        return value
    from .shell import shell_quote

    what = (f"byte 0x{bad - 0xDC00:02x}, which is not UTF-8" if 0xDC80 <= bad <= 0xDCFF
            else f"U+{bad:04X}, a lone surrogate, which UTF-8 cannot encode")
    raise ValueError(f"{name} holds {what} ({shell_quote(value)}); give the text in UTF-8 "
                     f"(is the terminal set to another encoding?)")


def is_number(value: Any) -> TypeGuard[int | float]:
    """Whether ``value`` read from a JSON file is a number: an int or float (a non-finite one
    too), not a bool (which is an int to Python), a string or None."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
