"""The hub's errors: :class:`DownloadError`, one line with any URL's login hidden, and
:func:`brief_message` for the long messages of the libraries under it.

Like :mod:`elmo.hub.download`, which a process may load alone to fetch a file, this module
needs nothing of the package but its siblings (loaded by their paths then, see there).
"""
from __future__ import annotations

try:
    from .urls import redact_url
except ImportError:     # (loaded alone: elmo.hub.download put its siblings in sys.modules first)
    from hub_urls import redact_url  # type: ignore[no-redef]


class DownloadError(RuntimeError):
    """A model could not be downloaded or unpacked; the message is one line for the user.

    A URL's ``user:password@`` in the message is shown as ``user:***@`` (:func:`redact_url`):
    the message reaches terminals, logs and bug reports."""

    def __init__(self, message: object = "") -> None:
        super().__init__(redact_url(str(message)))


class Unreachable(DownloadError):
    """The file could not be got at all: offline (or ``ELMO_OFFLINE`` with no cached copy), a
    server's HTTP error, a connection that failed. Not a damaged download, a full disk or a
    setting: a caller may say what works without the download."""


def brief_message(error: BaseException) -> str:
    """``error``'s message on one line, cut to 300 characters (a requests or zip error can
    nest long ones); also used for an archive's errors (:mod:`elmo.hub.archive`)."""
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:297] + "..."
