"""One HTTP transfer into a file's part ``<file>+.part``, resumed where an earlier one stopped.

:class:`ResumingDownloader` is the downloader that :mod:`elmo.hub.download` hands pooch: it
asks only for the bytes the part lacks (an HTTP ``Range``, with ``If-Range`` where the server
named the file's version), starts the part over where the answer is not its rest, draws a
tqdm bar, and stops pooch's retries at once on an HTTP error a retry will not fix
(:class:`PermanentHTTPError`). Like :mod:`elmo.hub.download`, which a process may load alone
to fetch a file, this module needs nothing of the package but its siblings.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional, Type, Union
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from tqdm import tqdm

try:
    from .cache_entry import helper_file
except ImportError:     # (loaded alone: elmo.hub.download put its siblings in sys.modules first)
    from hub_cache_entry import helper_file  # type: ignore[no-redef]

#: Seconds to wait for a connection and between two reads of the body.
DEFAULT_TIMEOUT = (15.0, 60.0)
#: Bytes per read. A cut connection loses the chunk being read, so not too large; a 400 MB
#: file is still only ~6,000 iterations.
CHUNK_SIZE = 1 << 16


class ResumingDownloader:
    """A pooch downloader that appends to ``<dest>+.part`` and asks only for the missing bytes.

    pooch calls it with a temporary file name; when the part is complete it is moved onto that
    name, and pooch checks the checksum and moves it on. A failed attempt leaves the part for
    the next one (pooch's retries, or the next call).
    """

    def __init__(self, dest: Path, progress: bool, pinned: bool = False):
        self.part = helper_file(dest, ".part")
        self.meta = helper_file(dest, ".part.json")   # the validator for If-Range
        self.progress = progress
        self.pinned = pinned
        #: Whether the last answer continued the part (206): a checksum mismatch may then be
        #: the part's, not the server's file's.
        self.resumed = False

    def resumable(self) -> bool:
        """Whether the part may be completed with the rest of the file the server has now: it
        named the version of the file the part began with (a strong ETag or Last-Modified, for
        ``If-Range``), or a pinned checksum checks the result. Else the file may have changed
        since, and its rest appended to the old start would make a file that no check need
        catch (an HDF5 file of the same shapes loads with half of each version's weights)."""
        return self.pinned or self._validator() is not None

    def __call__(self, url: str, output_file: str, pooch_obj) -> None:
        import pooch
        import requests

        if self.part.is_file() and not self.resumable():
            self.part.unlink()      # (its start may be another version's: the file starts over)
        offset = self.part.stat().st_size if self.part.is_file() else 0
        headers = {}
        validator = self._validator()
        if offset and validator:
            headers = {"Range": f"bytes={offset}-", "If-Range": validator}
        elif offset:
            headers = {"Range": f"bytes={offset}-"}
        with open(self.part, "ab") as out:

            def check(response, *args, **kwargs):
                # Runs before the body is streamed: a 200 answer to a Range request is the whole
                # file (the server ignored Range or the file changed), so the part starts over.
                if response.status_code == 200 and out.tell():
                    out.seek(0)
                    out.truncate()
                if response.status_code == 206 and _range_start(response) != out.tell():
                    # Not the rest of the file (a broken server or proxy): appended to the
                    # part it would make a wrong file that may still load. Start over.
                    start = _range_start(response)
                    out.seek(0)
                    out.truncate()
                    self.meta.unlink(missing_ok=True)
                    raise requests.exceptions.ConnectionError(
                        f"asked to resume at byte {offset:,}, the server sent "
                        + ("an unstated range" if start is None else f"bytes from {start:,}")
                        + "; the part is dropped and the next attempt starts over")
                if response.status_code in (200, 206):
                    self.resumed = response.status_code == 206
                    self._save_validator(response)
                elif response.status_code == 416:
                    out.seek(0)   # the part is useless (longer than the file): drop it
                    out.truncate()
                elif 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                    # Not worth retrying (404, 403, ...): stop pooch's retry loop at once.
                    raise PermanentHTTPError(response)
                return response

            done = out.tell()
            # pooch takes False for no bar, or a tqdm to drive.
            bar: Union[Literal[False], "tqdm"] = False
            if self.progress:
                bar = _bar_class()(total=None, unit="B", unit_scale=True, unit_divisor=1024,
                                   miniters=1, file=sys.stderr, delay=0.5,
                                   desc=Path(urlsplit(url).path).name
                                   + (f" (resuming at {done:,} B)" if done else ""))
            try:
                try:
                    pooch.HTTPDownloader(progressbar=bar, chunk_size=CHUNK_SIZE,
                                         timeout=DEFAULT_TIMEOUT, headers=headers,
                                         hooks={"response": check})(url, out, pooch_obj)
                except requests.exceptions.HTTPError as e:
                    if e.response is None or e.response.status_code != 416 or not headers:
                        raise
                    # The part is as long as the file or longer (a run killed after the last
                    # byte, or a file that shrank): dropped above; ask again for the whole file
                    # in this same attempt rather than fail it.
                    self.meta.unlink(missing_ok=True)
                    pooch.HTTPDownloader(progressbar=bar, chunk_size=CHUNK_SIZE,
                                         timeout=DEFAULT_TIMEOUT,
                                         hooks={"response": check})(url, out, pooch_obj)
            finally:
                if bar is not False:
                    bar.close()
        os.replace(self.part, output_file)
        self.meta.unlink(missing_ok=True)

    def _validator(self) -> Optional[str]:
        try:
            return json.loads(self.meta.read_text()).get("validator")
        except (OSError, ValueError):
            return None

    def _save_validator(self, response) -> None:
        # A strong ETag or Last-Modified lets the server tell us the file changed since the part.
        etag = response.headers.get("ETag", "")
        validator = etag if etag and not etag.startswith("W/") else response.headers.get("Last-Modified")
        if response.status_code != 200:
            return
        if validator:
            self.meta.write_text(json.dumps({"validator": validator}))
        else:
            # (the part restarts as a version the server does not name: the record of the
            # version it began as stayed, and a later If-Range of it resumed the new start with
            # that version's rest, a file of neither)
            self.meta.unlink(missing_ok=True)


def _range_start(response) -> Optional[int]:
    """The first byte a 206 answer carries (``Content-Range: bytes START-END/TOTAL``)."""
    match = re.match(r"\s*bytes\s+(\d+)-", response.headers.get("Content-Range", ""))
    return int(match.group(1)) if match else None


def _bar_class() -> Type["tqdm"]:
    """tqdm with a truth value: pooch tests ``if progressbar:`` before setting the total, and a
    plain tqdm without a total refuses to be a boolean."""
    from tqdm.auto import tqdm

    class Bar(tqdm):
        def __bool__(self) -> bool:
            return True

    return Bar


class PermanentHTTPError(Exception):
    """An HTTP error that a retry will not fix. Not a requests error, so pooch's retry loop
    lets it through at once."""

    def __init__(self, response):
        super().__init__(f"HTTP {response.status_code}")
        self.response = response
