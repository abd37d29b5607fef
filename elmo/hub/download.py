"""Download a URL into the model cache: locked, resumable, verified before it counts.

The transfer itself is pooch's (``pooch.Pooch.fetch`` with ``pooch.HTTPDownloader``): it
streams with requests under a timeout, shows a tqdm bar with size and speed, retries failed
attempts with a growing wait, checks a pinned SHA-256 and writes to a temporary file that is
moved into place only when complete. On top of it this module adds what pooch leaves out:

* a lock per file (``filelock``), so two processes asking for the same URL end with one copy:
  the second waits, then finds the finished file;
* resume: the bytes received so far are kept in ``<file>+.part`` and the next attempt asks for
  the rest with an HTTP ``Range`` header (``If-Range`` makes a changed file start over); a
  server that ignores ``Range`` sends the whole file and the part is restarted, and so is an
  unpinned file from a server that names no version of it (no ``If-Range`` to send);
* a verification hook (the weight-file shape checks) that runs on the finished download before
  it is renamed to its cached name, so a corrupt file is never cached as good;
* a cached file that is not whole (empty, an HDF5 file that does not open, JSON that does not
  parse: :func:`damage`, cheap enough for every load) and has no pin is downloaded again, in a
  line that says so (a pinned one is checked by its SHA-256);
* ``ELMO_OFFLINE=1``: the cache only, and a one-line error naming what is missing.

Its parts lie in modules of their own, each also importable from here as before: where a URL's
file lies in the cache (:mod:`elmo.hub.cache_paths`), the transfer that resumes a part
(:mod:`elmo.hub.transfer`), whether a cached file is whole (:mod:`elmo.hub.file_checks`), a
URL's text and login (:mod:`elmo.hub.urls`) and :class:`DownloadError` (:mod:`elmo.hub.errors`).

The steps a cache entry is made in (the lock, old names, another URL in the way, the kept
copy, staging, moving into place) are :mod:`elmo.hub.cache_entry`'s, shared with the unpacked
cache; this module supplies the file's own (:class:`_CachedFile`).

Cache layout (``$ELMO_HOME``, default ``$XDG_CACHE_HOME/elmo``, else ``~/.cache/elmo``)::

    models/files/<host>/<url path>           a finished, verified download (DEST)
    models/files/<host>/<url path>+.part     bytes received so far (resumed by the next call)
    models/files/<host>/<url path>+.part.json  the version of the file they are of
    models/files/<host>/<url path>+.lock     the per-file lock
    models/files/<host>/.<file name>+.staging/  the download while it is written and checked
                                                (``<file name>.download`` in it once whole)
    models/files/<host>/<url folders>/+query-<hash>/<file name>   a URL with a query string
    models/files/<host>/<url folders>/+scheme-http/<file name>    an http URL (https has none)
    models/files/<host>/+tree-<hash>/<file name>   a file whose path another URL's file or
                                                   folder is in the way of
    DEST.lock, DEST.part, DEST.part.json, .<file name>.staging/   the same under the names
                                                   of versions before the "+" names

The cache's own files for a file (``+.lock``, ``+.part``, ``+.part.json``, ``+.staging``) hold
a ``+`` that no URL's cached file name has before a dot (:func:`helper_file`). What versions
before that left under the old names is resumed or removed under the lock, with care for URLs
cached under those names (:mod:`elmo.hub.old_names`). Two processes whose URLs collide
(``/m/elmo`` and ``/m/elmo/options.json``) at the same instant both succeed: the one whose
path the other took after :func:`cache_path` looked asks it again and puts its file aside
(:class:`~elmo.hub.cache_entry.InTheWay`).
"""
from __future__ import annotations

import os
import shlex
import shutil
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

try:
    from . import cache_entry, cache_paths, errors, file_checks, transfer, urls
except ImportError:     # (this file loaded alone, by its path: a process that only fetches)
    def _beside(name: str):
        import importlib.util
        spec = importlib.util.spec_from_file_location(f"hub_{name}", Path(__file__).with_name(f"{name}.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        # the siblings loaded after it import it by this name: one copy of each module (and so
        # one DownloadError class) in the process
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    # (each after the siblings it imports)
    urls = _beside("urls")
    errors = _beside("errors")
    cache_entry = _beside("cache_entry")
    cache_paths = _beside("cache_paths")
    file_checks = _beside("file_checks")
    transfer = _beside("transfer")

# What this module uses of its siblings.
DownloadError = errors.DownloadError
brief_message = errors.brief_message
redact_url = urls.redact_url
helper_file = cache_entry.helper_file
cache_path = cache_paths.cache_path
make_cache_folder = cache_paths.make_cache_folder
unwritable_cache = cache_paths.unwritable_cache
twin_note = cache_paths.twin_note
damage = file_checks.damage
finished_download = file_checks.finished_download
sha256_file = file_checks.sha256_file
ResumingDownloader = transfer.ResumingDownloader
PermanentHTTPError = transfer.PermanentHTTPError
# Names that were defined here before the split, kept importable from here.
offline = cache_entry.offline
holds_login = urls.holds_login
is_url = urls.is_url
cache_folder = cache_paths.cache_folder
elmo_home = cache_paths.elmo_home
tree_aside = cache_paths.tree_aside
cached = cache_paths.cached
# (the constants MAX_NAME, DEFAULT_TIMEOUT and CHUNK_SIZE are not copied here: a copy set here
# would change nothing; they live in cache_paths and transfer, which read them)

#: Extra attempts after a failed one (``$ELMO_DOWNLOAD_RETRIES`` overrides).
DEFAULT_RETRIES = 3


#: Whether :func:`fetch` may draw its bar at all; the ``elmo`` command sets it per run
#: (:func:`download_bars`), since a download starts deep inside a model's load.
_BARS_SHOWN: ContextVar[bool] = ContextVar("download_bars", default=True)


@contextmanager
def download_bars(shown: bool) -> Iterator[None]:
    """Inside the block, downloads draw their progress bar only if ``shown``. The ``elmo``
    command passes its terminal check (and ``--quiet``): a bar in a log file or a pipe was a
    line redrawn several times a second. Python callers keep ``fetch(progress=True)``'s bar."""
    token = _BARS_SHOWN.set(shown)
    try:
        yield
    finally:
        _BARS_SHOWN.reset(token)


def _retries() -> int:
    value = os.environ.get("ELMO_DOWNLOAD_RETRIES", "")
    try:
        return max(0, int(value)) if value else DEFAULT_RETRIES
    except ValueError:
        raise DownloadError(f"ELMO_DOWNLOAD_RETRIES must be a whole number, got {value!r}") from None


def fetch(url: str, *, dest: Optional[Path] = None, sha256: Optional[str] = None,
          verify: Optional[Callable[[Path], None]] = None, progress: bool = True,
          log: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> Path:
    """The local copy of ``url``, downloading it if it is not cached.

    Args:
        url: an http(s) URL.
        dest: where to keep it (default :func:`cache_path`).
        sha256: the pinned checksum, if any; a mismatch is an error and nothing is kept.
        verify: called with the finished download before it is renamed to ``dest``; it raises
            (e.g. :class:`~elmo.WeightFileError`) to reject the file, which is then deleted.
        progress: show a tqdm bar (never inside ``download_bars(False)``).

    Raises:
        DownloadError: offline with an empty cache, HTTP errors, a cut connection (the part is
            kept and the next call resumes), a checksum mismatch, a folder at ``dest``.
    """
    if dest is not None:
        try:
            return cache_entry.make(_CachedFile(Path(dest), url, sha256, verify, progress, log))
        except cache_entry.InTheWay:
            _remove_staging(Path(dest))
            raise DownloadError(f"{dest}: a folder, or a file where a folder must be, is in the "
                                f"way of the download of {url}; choose another path") from None
    ready: Optional[Path] = None
    ready_for: Optional[Path] = None    # (the path whose staging folder holds ready)
    try:
        for attempt in range(3):
            path = cache_path(url)
            try:
                return cache_entry.make(_CachedFile(path, url, sha256, verify, progress, log, ready))
            except cache_entry.InTheWay as e:
                # Another process cached another URL's file or folder where this one's path
                # goes, after cache_path looked (``/m/elmo`` and ``/m/elmo/options.json``
                # fetched at once): the path is asked again, and now puts this file aside (its
                # finished download, if any, is moved there rather than downloaded again).
                if e.ready is not None:
                    ready, ready_for = e.ready, path
                if cache_path(url) == path or attempt == 2:
                    raise DownloadError(f"{path}: another URL's file or folder is in the way of "
                                        f"the cached file of {url}; run again") from None
        raise AssertionError("unreachable")
    finally:
        if ready_for is not None:
            _remove_staging(ready_for)


def _remove_staging(dest: Path) -> None:
    """Remove ``dest``'s staging folder if no process holds ``dest``'s lock (one that is
    downloading ``dest`` now writes in it)."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(helper_file(dest, ".lock")))
    try:
        lock.acquire(timeout=0)
    except (Timeout, OSError):
        return
    try:
        shutil.rmtree(_staging_folder(dest), ignore_errors=True)
    finally:
        lock.release()


def _in_the_way(dest: Path) -> bool:
    """Whether a folder stands at ``dest`` or a file where a folder above it must be."""
    if dest.is_dir():
        return True
    return any(p.exists() and not p.is_dir() for p in dest.parents)


class _CachedFile(cache_entry.CacheEntry[Path]):
    """The file cache's entry: ``url``'s download at ``dest``, made by :func:`cache_entry.make`
    (:func:`fetch`'s arguments; ``ready``: a finished, checked download of ``url`` to use
    instead of downloading, what an attempt whose path another URL took left). (Not a
    dataclass: those need their module in ``sys.modules``, and this file also runs alone.)"""

    error = DownloadError
    unwritable = staticmethod(unwritable_cache)

    def __init__(self, dest: Path, url: str, sha256: Optional[str],
                 verify: Optional[Callable[[Path], None]], progress: bool,
                 log: Callable[[str], None], ready: Optional[Path] = None):
        self.dest, self.url, self.sha256, self.verify = dest, url, sha256, verify
        self.progress, self.log, self.ready = progress, log, ready
        #: Why the unpinned cached file is not whole, as :meth:`kept` last found (:func:`damage`).
        self.damaged: Optional[str] = None

    def kept(self) -> bool:
        # An unpinned cached file that a cheap look shows damaged (truncated, empty) failed at
        # every load with an error naming the cache path, while `elmo models list` said it was
        # cached: it is downloaded again, as a pinned file that fails its checksum is (said in a
        # line; the old file stays until the checked download replaces it), and offline the
        # error says to delete it.
        self.damaged = None if self.sha256 else damage(self.dest)
        return self.damaged is None and finished_download(self.dest, self.sha256)

    def served(self) -> Path:
        return self.dest

    def offline_error(self) -> Exception:
        url, dest = self.url, self.dest
        if self.damaged:
            return DownloadError(f"ELMO_OFFLINE is set and the cached download of {url} is damaged "
                                 f"({self.damaged}): delete it (rm {shlex.quote(str(dest))}) and run "
                                 "without ELMO_OFFLINE to download it again")
        what = ("its cached copy does not match the pinned sha256" if dest.is_file()
                else "is not in the cache")
        return errors.Unreachable(f"ELMO_OFFLINE is set and {url} {what} "
                             f"(expected {dest}){twin_note(url, dest)}; unset ELMO_OFFLINE to download it")

    def make_folder(self) -> None:
        make_cache_folder(self.dest.parent)

    def waiting(self) -> None:
        self.log(f"waiting for another process that is downloading {self.dest.name} ...")

    def in_the_way(self, locked: bool) -> bool:
        return _in_the_way(self.dest)

    def tidy(self, old_names: Any) -> None:
        old_names.tidy_file(self.dest, bool(self.sha256), self.log)

    def produce(self) -> None:
        dest = self.dest
        if self.damaged:
            self.log(f"{dest}: the cached file is damaged ({self.damaged}); downloading it again")
        elif dest.is_file():
            # Cached without this pin, or changed on disk since: the pin decides. The file
            # stays until the new one replaces it (os.replace below): a failed download kept
            # nothing, where a call without the pin (offline too) could still use it.
            self.log(f"{dest}: the cached file does not match the pinned sha256; downloading it again")
        staging = _staging_folder(dest)
        try:
            if self.ready is not None and self.ready.is_file():
                staged = self.ready
            else:
                staged = _download(self.url, dest, self.sha256, self.progress and _BARS_SHOWN.get(),
                                   self.log)
                if self.verify is not None:
                    self.verify(staged)
            if _in_the_way(dest):
                raise cache_entry.InTheWay(staged)
            try:
                os.replace(staged, dest)
            except OSError:
                if _in_the_way(dest):   # (taken between the look and the rename)
                    raise cache_entry.InTheWay(staged) from None
                raise
        except cache_entry.InTheWay:
            raise                           # the finished download stays for the next path
        except Exception:
            shutil.rmtree(staging, ignore_errors=True)      # refused or failed: nothing is kept
            raise
        # (Ctrl-C or SIGTERM while the finished download was checked deleted it, and the next
        # run downloaded the whole file again; now it stays, and the next run checks it)
        shutil.rmtree(staging, ignore_errors=True)


def _download(url: str, dest: Path, sha256: Optional[str], progress: bool, log) -> Path:
    """Download ``url`` through pooch into ``<dest>.download`` (complete, checksum checked)."""
    import logging

    import pooch
    import requests

    # pooch's temporary file, and the finished download until it is verified, go into a folder
    # of this file's own: in the cache's folder a killed run left an empty "tmpXXXXXXXX" each
    # time (the whole download, killed between the part's rename and pooch's move), which no
    # later run could tell from another URL's file. Under the lock, what is there is a killed
    # run's and goes.
    staging = _staging_folder(dest)
    staged = staging / (dest.name + ".download")
    if staged.is_file() and (not sha256 or sha256_file(staged) == sha256.lower()):
        # Only pooch's move names it so: a whole download (its pin checked) that a run stopped
        # while checking it (Ctrl-C) left; it is checked now instead of downloaded again.
        log(f"{redact_url(url)}: using the whole download a stopped run left ({staged})")
        return staged
    shutil.rmtree(staging, ignore_errors=True)
    make_cache_folder(staging)
    fetcher = pooch.create(path=staging, base_url="", registry={staged.name: _hash(sha256)},
                           urls={staged.name: url}, retry_if_failed=_retries())
    log(f"downloading {redact_url(url)}")
    quiet = pooch.get_logger()
    level = quiet.level
    quiet.setLevel(logging.WARNING)         # our own line above says what is fetched
    try:
        downloader = ResumingDownloader(dest, progress, pinned=bool(sha256))
        try:
            fetcher.fetch(staged.name, downloader=downloader)
        except ValueError:
            if not downloader.resumed:
                raise
            # A pinned part resumed from a server that names no version of its file may be
            # another version's start (the file changed, and its pin with it): the mix failed the
            # pin, where the whole file matches it. pooch deleted it; the file starts over once.
            log(f"{redact_url(url)}: the download resumed from bytes kept earlier does not match "
                "the pinned sha256; downloading the whole file again")
            downloader = ResumingDownloader(dest, progress, pinned=bool(sha256))
            downloader.part.unlink(missing_ok=True)
            fetcher.fetch(staged.name, downloader=downloader)
    except PermanentHTTPError as e:
        raise errors.Unreachable(f"{url}: HTTP {e.response.status_code} {e.response.reason}") from None
    except requests.exceptions.HTTPError as e:
        response = e.response
        what = f"HTTP {response.status_code} {response.reason}" if response is not None else brief_message(e)
        raise errors.Unreachable(f"{url}: {what} (after {_retries() + 1} attempts)") from None
    except requests.exceptions.RequestException as e:
        raise errors.Unreachable(f"{url}: download failed ({_reason(e)}){_resume_hint(dest, sha256)}") from None
    except ValueError as e:                 # pooch's checksum mismatch
        raise DownloadError(f"{url}: {brief_message(e)}") from None
    except OSError as e:                    # writing the part (a full disk): it read "[Errno 28] ..."
        from ..io import os_error_reason
        raise DownloadError(f"{dest}: cannot write the download of {url} ({os_error_reason(e)})"
                            f"{_resume_hint(dest, sha256)}; free space there or point ELMO_HOME at "
                            "another disk") from None
    finally:
        quiet.setLevel(level)
    return staged


def _resume_hint(dest: Path, sha256: Optional[str]) -> str:
    """The end of a failed download's message: where the bytes that arrived are kept, if any."""
    kept = _kept_part(dest, sha256)
    return (f"; the {kept:,} bytes that arrived are kept in {helper_file(dest, '.part').name} and "
            "the next call resumes from there" if kept else "")


def _kept_part(dest: Path, sha256: Optional[str]) -> int:
    """The bytes of ``dest``'s part that the next call can resume from (0: none, and a part
    that cannot be resumed, see :class:`ResumingDownloader`, is deleted)."""
    downloader = ResumingDownloader(dest, progress=False, pinned=bool(sha256))
    if not downloader.part.is_file():
        return 0
    if not downloader.resumable():
        downloader.part.unlink(missing_ok=True)
        return 0
    return downloader.part.stat().st_size


def _staging_folder(dest: Path) -> Path:
    """Beside ``dest``: the folder its download is written and checked in."""
    return dest.with_name("." + helper_file(dest, ".staging").name)


def _hash(sha256: Optional[str]) -> Optional[str]:
    return f"sha256:{sha256.lower()}" if sha256 else None


def _reason(error: BaseException) -> str:
    """A short reason for a requests failure (its own messages nest several layers)."""
    import requests

    text = str(error)
    if isinstance(error, requests.exceptions.Timeout):
        return "timed out"
    if "IncompleteRead" in text or "Connection broken" in text:
        return "the connection closed before the end of the file"
    for marker, reason in (("Connection refused", "connection refused"),
                           ("NameResolutionError", "host name not found (offline?)"),
                           ("Name or service not known", "host name not found (offline?)"),
                           ("SSLError", "TLS error")):
        if marker in text:
            return reason
    return brief_message(error)
