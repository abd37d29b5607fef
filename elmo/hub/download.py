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

import json
import os
import re
import shlex
import shutil
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Optional, Type, TypeGuard, Union
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from tqdm import tqdm

try:
    from . import cache_entry
except ImportError:     # (this file loaded alone, by its path: a process that only fetches)
    def _beside(name: str):
        import importlib.util
        spec = importlib.util.spec_from_file_location(f"hub_{name}", Path(__file__).with_name(f"{name}.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    cache_entry = _beside("cache_entry")
helper_file = cache_entry.helper_file
offline = cache_entry.offline

#: Seconds to wait for a connection and between two reads of the body.
DEFAULT_TIMEOUT = (15.0, 60.0)
#: Extra attempts after a failed one (``$ELMO_DOWNLOAD_RETRIES`` overrides).
DEFAULT_RETRIES = 3
#: Bytes per read. A cut connection loses the chunk being read, so not too large; a 400 MB
#: file is still only ~6,000 iterations.
CHUNK_SIZE = 1 << 16


class DownloadError(RuntimeError):
    """A model could not be downloaded or unpacked; the message is one line for the user.

    A URL's ``user:password@`` in the message is shown as ``user:***@`` (:func:`redact_url`):
    the message reaches terminals, logs and bug reports."""

    def __init__(self, message: object = "") -> None:
        super().__init__(redact_url(str(message)))


#: The user part of an http(s) URL in any text: up to the last ``@`` before the host's end
#: (an unescaped ``@`` in a password is taken as urlsplit takes it). ``https:/`` too: a URL
#: taken for a path (``Path(url)``, a resolved folder) has lost a slash, not its login.
_USER_PART = re.compile(r"(?i)\b(https?:/{1,2})([^\s/?#]*)@")


def redact_url(text: str) -> str:
    """``text`` (a URL, a message or a command line) with each http(s) URL's password shown as
    ``***``: ``https://user:secret@host/m`` -> ``https://user:***@host/m``; a user part
    without ``:`` (often a token by itself) becomes ``***@``. Everything the package shows
    or records of a URL goes through this (imported from :mod:`elmo.redact`, the shared place;
    it is defined here since this module runs without the package); the URL itself is still
    what is fetched."""
    def hide(match: "re.Match[str]") -> str:
        user, colon, _ = match.group(2).partition(":")
        return f"{match.group(1)}{user + ':***' if colon else '***'}@"
    return _USER_PART.sub(hide, text)


def holds_login(text: str) -> bool:
    """Whether ``text`` holds an http(s) URL with a user part (a password or a token): what
    :func:`redact_url` hides, and what must not be written into a record that reloads it."""
    return redact_url(text) != text


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


def is_url(value: object) -> TypeGuard[str]:
    """True for an ``http://`` or ``https://`` string (so mypy knows a URL is a str)."""
    return isinstance(value, str) and value.lower().startswith(("http://", "https://"))


def cache_folder(variable: str, error: Type[Exception]) -> Path:
    """The folder ``$variable`` names, else ``$XDG_CACHE_HOME/elmo``, else ``~/.cache/elmo``. A
    file there raises ``error`` naming the variable (not "Not a directory" on a path inside it).
    (Here, not in the package's io module: this module imports nothing of the package, so a
    process can fetch with it alone.)"""
    if os.environ.get(variable):
        folder, source = Path(os.environ[variable]).expanduser(), f"${variable}"
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder, source = Path(base) / "elmo", "the cache folder"
    if folder.exists() and not folder.is_dir():
        raise error(f"{folder}: {source} is a file, not a folder; point {variable} at a folder")
    return folder


def elmo_home() -> Path:
    """The models' cache folder: ``$ELMO_HOME``, else ``$XDG_CACHE_HOME/elmo``, else
    ``~/.cache/elmo``."""
    return cache_folder("ELMO_HOME", DownloadError)


def make_cache_folder(folder: Path, variable: str = "ELMO_HOME",
                      error: Type[Exception] = DownloadError) -> None:
    """Create ``folder`` inside the cache that ``$variable`` names (the models' by default);
    one line naming the variable where the cache cannot be written (a read-only or shared
    cache), raised as ``error``."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise unwritable_cache(folder, e, variable, error) from None


def unwritable_cache(folder: Path, e: OSError, variable: str = "ELMO_HOME",
                     error: Type[Exception] = DownloadError) -> Exception:
    """The one-line error (of type ``error``) for a cache ``folder`` that cannot be written,
    naming the environment ``variable`` that points it elsewhere; shared with the unpacked
    cache (:mod:`elmo.hub.resolve`)."""
    reason = os.strerror(e.errno) if e.errno else brief_message(e)
    what = "model" if variable == "ELMO_HOME" else "data"
    return error(f"{folder}: the {what} cache cannot be written ({reason}); point {variable} at "
                 "a writable folder (what is already cached there loads without writing)")


def _retries() -> int:
    value = os.environ.get("ELMO_DOWNLOAD_RETRIES", "")
    try:
        return max(0, int(value)) if value else DEFAULT_RETRIES
    except ValueError:
        raise DownloadError(f"ELMO_DOWNLOAD_RETRIES must be a whole number, got {value!r}") from None


_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def cache_path(url: str, root: Optional[Path] = None) -> Path:
    """Where ``url`` is cached: ``models/files/<host>/<path>``, each part made a safe name.

    A URL with a query string gets a folder of its own before the file name,
    ``+query-<SHA-256 of the query, 16 digits>`` (a ``+`` no safe part of a path holds): two URLs
    that differ only in their query (a version, a signed token) are two files, where they shared
    one, the second taken from the cache as the first. So does a URL whose path holds
    characters that are not safe in a name (``+path-<SHA-256 of its path>``): they become
    ``_``, and ``/m/a b.hdf5`` and ``/m/a_b.hdf5`` shared one file; or parts that are dropped
    (``.``, ``..``, empty: ``/m/../a.hdf5`` shared ``/m/a.hdf5``'s file). A URL with neither keeps the
    path it always had. Fragments are not sent to the server and are ignored; ``.``, ``..``
    and empty parts are dropped, so a URL can never name a file outside the cache.

    The host is taken in lower case, as it has none. A user part (``user:password@host``) is
    not written into the path: its digest is, as ``+user-<SHA-256>``; a host with characters
    made ``_`` gets ``+host-<SHA-256>``. A part longer than :data:`MAX_NAME` keeps its start
    and end around ``+name-<SHA-256 of it>``.

    ``http`` and ``https`` of one URL can serve different bytes: they shared one file. The path
    without a mark is https's, unless the URL's http form is a published model's (which then
    keeps the path it always had); the other scheme gets a folder ``+scheme-http`` (or
    ``+scheme-https``) before the file name.
    """
    import hashlib

    def digest(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    parts = urlsplit(url)
    # a host name has no case: Example.COM kept a second copy of example.com's files (and a
    # published model's URL so spelled another path); the user part before an @ keeps its case
    user, at, host_port = parts.netloc.rpartition("@")
    parts = parts._replace(netloc=user + at + host_port.lower())
    # The user part (``user:password@``) is no part of the folder's name: a password stood in
    # the cache's folder names for anyone who lists them. It gets a marked folder of its digest;
    # so does a host with characters made "_" (bücher.example and böcher.example shared one).
    host = _SAFE.sub("_", host_port.lower()) or "_"
    raw = [unquote(p) for p in parts.path.split("/")]
    pieces = [p for p in (_SAFE.sub("_", r) for r in raw) if p not in ("", ".", "..")]
    if not pieces:
        raise DownloadError(f"{url}: the URL names no file")
    # made safe, 'a b' and 'a_b' are one name: such a path gets a folder of its own as well, and
    # so does one with dropped parts ('/m/../a.hdf5', the server's /a.hdf5, or '/m//a.hdf5'),
    # which was cached as '/m/a.hdf5', another file
    if any(_SAFE.search(r) or r in ("", ".", "..") for r in raw[1:]):
        pieces.insert(-1, "+path-" + digest(unquote(parts.path)))
    if parts.query:
        pieces.insert(-1, "+query-" + digest(parts.query))
    if re.search(r"[^A-Za-z0-9.:-]", host_port):
        pieces.insert(-1, "+host-" + digest(host_port.lower()))
    if at:
        pieces.insert(-1, "+user-" + digest(user))
    scheme = parts.scheme.lower()
    if scheme != _unmarked_scheme(parts):
        pieces.insert(-1, "+scheme-" + _SAFE.sub("_", scheme))
    # A part longer than a file system takes (255 bytes, less the suffixes of the lock, the
    # part and the unpacking folders) failed as "the model cache cannot be written".
    path = (root or elmo_home() / "models" / "files").joinpath(*(_short(p) for p in [host, *pieces]))
    return path if root is not None else _clear_of_other_urls(path, elmo_home() / "models" / "files")


def _clear_of_other_urls(path: Path, base: Path) -> Path:
    """``path`` (a file's place under ``base``), or where another URL's file or folder is in
    its way, ``<host>/+tree-<SHA-256 of the rest of path, 16 digits>/<file name>``.

    ``https://h/m/elmo`` is cached as the file ``m/elmo``, and ``https://h/m/elmo/options.json``
    needs ``m/elmo`` to be a folder (or the other way round): the second failed as "the model
    cache cannot be written" or a raw IsADirectoryError. It now goes to a folder that no URL's
    path can name (a safe part holds no ``+``). Every other file keeps the path it had, so what
    is cached is found as before; a file once cached aside is found there first."""
    relative = path.relative_to(base)
    aside = tree_aside(path, base)
    if aside.is_file() or path.is_dir():
        return aside
    folder = base
    for part in relative.parts[:-1]:
        folder = folder / part
        if not folder.is_dir():
            return aside if folder.exists() else path      # (a file where a folder must be)
    return path


def tree_aside(path: Path, base: Path) -> Path:
    """Where ``path`` (under ``base``) goes when another URL's file or folder is in its way:
    ``<host>/+tree-<SHA-256 of the rest of path, 16 digits>/<file name>``."""
    import hashlib

    relative = path.relative_to(base)
    mark = "+tree-" + hashlib.sha256("/".join(relative.parts[1:]).encode("utf-8")).hexdigest()[:16]
    return base / relative.parts[0] / mark / relative.name


#: The longest name a cache path's part may have: 255 bytes (most file systems) less the
#: longest suffix put after it (``.NAME+.partial.XXXXXXXX.tmp``, unpack's temporary folder).
MAX_NAME = 200


def _short(name: str) -> str:
    """``name`` (a safe, ASCII part) if it is at most :data:`MAX_NAME` long, else its start and
    end around ``+name-<SHA-256 of it, 16 digits>`` (a ``+`` no safe part holds, so it is no
    other URL's name; the end keeps the file's suffix)."""
    if len(name) <= MAX_NAME:
        return name
    import hashlib
    mark = "+name-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
    head = (MAX_NAME - len(mark)) // 2
    return name[:head] + mark + name[-(MAX_NAME - len(mark) - head):]


def _unmarked_scheme(parts) -> str:
    """The scheme whose cache path has no ``+scheme-`` mark for this URL (split): ``http``
    where the URL's http form is published in the registry and its https form is not (the
    published models keep the cache paths they had before schemes were told apart), else
    ``https``."""
    try:
        from .registry import MODELS
    except ImportError:   # this file loaded alone, without its package (no torch): no registry
        MODELS = {}

    def form(scheme: str) -> str:
        return parts._replace(scheme=scheme, fragment="").geturl()
    published = {url for m in MODELS.values() for url in m.urls.values()}
    return "http" if form("http") in published and form("https") not in published else "https"


def _twin_note(url: str, dest: Path) -> str:
    """Where the other scheme of ``url`` has a cached file, a note naming it for an offline
    error: a file cached before http and https had paths of their own lies there (the path
    without a scheme mark), and the error named only the path the URL has now."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        return ""
    twin = cache_path(parts._replace(scheme="https" if parts.scheme.lower() == "http" else "http").geturl())
    if twin == dest or not twin.is_file() or dest != cache_path(url):
        return ""
    return (f"; a file cached for its other scheme, or before http and https were cached apart, "
            f"is {twin}: copy it to the expected path if it is the one meant")


def cached(url: str) -> Optional[Path]:
    """The cached file of ``url`` if it was downloaded and verified, else None."""
    path = cache_path(url)
    return path if path.is_file() else None


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
        return DownloadError(f"ELMO_OFFLINE is set and {url} {what} "
                             f"(expected {dest}){_twin_note(url, dest)}; unset ELMO_OFFLINE to download it")

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


def finished_download(dest: Path, sha256: Optional[str]) -> bool:
    """Whether ``dest`` is a finished download; with a pinned ``sha256``, one that matches it
    (checked each time, as pooch does: a file cached before the pin, or damaged since)."""
    if not dest.is_file():
        return False
    if not sha256:
        return True
    return sha256_file(dest) == sha256.lower()


#: JSON files longer than this are not parsed by :func:`damage` (an options file is ~1 kB).
_JSON_CHECKED_BYTES = 16 << 20


def damage(path: Path) -> Optional[str]:
    """Why the cached file ``path`` is not a whole download, where a cheap look can tell (it
    runs at each load and for each file `elmo models list` shows): it is empty, it is an HDF5
    file that does not open (HDF5 compares the file's length with the length it recorded, so
    a truncated file fails here in a fraction of a millisecond), or it is a JSON file (up to
    16 MB) that does not parse. None where it looks whole, or is not there. Not a checksum:
    a pinned file's SHA-256 is checked by :func:`finished_download` instead."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size == 0:
        return "the file is empty"
    suffix = path.suffix.lower()
    try:
        if suffix in (".hdf5", ".h5"):
            import h5py
            with h5py.File(path, "r"):
                pass
        elif suffix == ".json" and size <= _JSON_CHECKED_BYTES:
            json.loads(path.read_bytes())
    except ValueError:          # (UnicodeDecodeError too)
        return "not readable JSON (truncated?)"
    except OSError as e:
        return "not a readable HDF5 file (truncated?)" if suffix in (".hdf5", ".h5") else brief_message(e)
    return None


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file, in hex."""
    import hashlib
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
        downloader = _ResumingDownloader(dest, progress, pinned=bool(sha256))
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
            downloader = _ResumingDownloader(dest, progress, pinned=bool(sha256))
            downloader.part.unlink(missing_ok=True)
            fetcher.fetch(staged.name, downloader=downloader)
    except _PermanentHTTPError as e:
        raise DownloadError(f"{url}: HTTP {e.response.status_code} {e.response.reason}") from None
    except requests.exceptions.HTTPError as e:
        response = e.response
        what = f"HTTP {response.status_code} {response.reason}" if response is not None else brief_message(e)
        raise DownloadError(f"{url}: {what} (after {_retries() + 1} attempts)") from None
    except requests.exceptions.RequestException as e:
        raise DownloadError(f"{url}: download failed ({_reason(e)}){_resume_hint(dest, sha256)}") from None
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
    that cannot be resumed, see :class:`_ResumingDownloader`, is deleted)."""
    downloader = _ResumingDownloader(dest, progress=False, pinned=bool(sha256))
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


def brief_message(error: BaseException) -> str:
    """``error``'s message on one line, cut to 300 characters (a requests or zip error can
    nest long ones); also used for an archive's errors (:mod:`elmo.hub.archive`)."""
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:297] + "..."


class _ResumingDownloader:
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
                    raise _PermanentHTTPError(response)
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


class _PermanentHTTPError(Exception):
    """An HTTP error that a retry will not fix. Not a requests error, so pooch's retry loop
    lets it through at once."""

    def __init__(self, response):
        super().__init__(f"HTTP {response.status_code}")
        self.response = response
