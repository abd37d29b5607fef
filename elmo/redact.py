"""Hiding the login of URLs in what the package shows or writes.

A biLM or model URL may hold a login (``https://user:password@host/...``, or a token alone,
``https://token@host/...``). Records written before such URLs were refused
(``results.json``, saved task models, analysis results) still hold them, and a user argument
may too. Everything that prints, logs or writes a URL into a new file passes it through
:func:`redact_url`; a record copied into a new file goes through :func:`redact_record`.
The URL itself is still what is fetched.
"""
from __future__ import annotations

from typing import Any, Tuple

# Defined beside the downloader, which runs without the rest of the package (a process that
# fetches needs no torch); this module is where the rest of the package takes them from.
from .hub.urls import holds_login, redact_url

__all__ = ["REDACTED_NOTE", "holds_login", "redact_record", "redact_url"]

#: What is said (once) where a command writes a new copy of a record that held a login.
REDACTED_NOTE = ("a URL in it held a password (or token), written as *** in the new copy; a "
                 "download reads the host's login from ~/.netrc (or $NETRC)")


def redact_record(value: Any) -> Tuple[Any, bool]:
    """A JSON value (a record read from a file: dicts, lists, strings, numbers) with every
    string, keys included, passed through :func:`redact_url`; and whether anything changed.
    The value given is not modified."""
    if isinstance(value, str):
        shown = redact_url(value)
        return shown, shown != value
    if isinstance(value, dict):
        out, changed = {}, False
        for k, v in value.items():
            key, key_changed = redact_record(k) if isinstance(k, str) else (k, False)
            item, item_changed = redact_record(v)
            out[key] = item
            changed = changed or key_changed or item_changed
        return out, changed
    if isinstance(value, (list, tuple)):
        pairs = [redact_record(v) for v in value]
        return type(value)(v for v, _ in pairs), any(c for _, c in pairs)
    return value, False
