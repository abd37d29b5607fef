"""URL text: whether a value is a URL, and the login an http(s) URL may hold, hidden.

Everything the package shows or records of a URL passes through :func:`redact_url` (the rest
of the package takes it from :mod:`elmo.redact`). Like :mod:`elmo.hub.download`, which a
process may load alone to fetch a file, this module imports nothing of the package.
"""
from __future__ import annotations

import re
from typing import TypeGuard

#: The user part of an http(s) URL in any text: up to the last ``@`` before the host's end
#: (an unescaped ``@`` in a password is taken as urlsplit takes it). ``https:/`` too: a URL
#: taken for a path (``Path(url)``, a resolved folder) has lost a slash, not its login.
_USER_PART = re.compile(r"(?i)\b(https?:/{1,2})([^\s/?#]*)@")


def redact_url(text: str) -> str:
    """``text`` (a URL, a message or a command line) with each http(s) URL's password shown as
    ``***``: ``https://user:secret@host/m`` -> ``https://user:***@host/m``; a user part
    without ``:`` (often a token by itself) becomes ``***@``. Everything the package shows
    or records of a URL goes through this (imported from :mod:`elmo.redact`, the shared place;
    it is defined in :mod:`elmo.hub` since the downloader runs without the package); the URL
    itself is still what is fetched."""
    def hide(match: "re.Match[str]") -> str:
        user, colon, _ = match.group(2).partition(":")
        return f"{match.group(1)}{user + ':***' if colon else '***'}@"
    return _USER_PART.sub(hide, text)


def holds_login(text: str) -> bool:
    """Whether ``text`` holds an http(s) URL with a user part (a password or a token): what
    :func:`redact_url` hides, and what must not be written into a record that reloads it."""
    return redact_url(text) != text


def is_url(value: object) -> TypeGuard[str]:
    """True for an ``http://`` or ``https://`` string (so mypy knows a URL is a str)."""
    return isinstance(value, str) and value.lower().startswith(("http://", "https://"))
