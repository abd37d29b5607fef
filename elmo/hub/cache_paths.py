"""The model cache's folder and where each URL's file lies in it.

:func:`elmo_home` is the folder (``$ELMO_HOME``, default ``$XDG_CACHE_HOME/elmo``, else
``~/.cache/elmo``; :func:`cache_folder` serves the data cache too), :func:`make_cache_folder`
creates a folder in it with a one-line error where it cannot be written, and
:func:`cache_path` names a URL's cached file: ``models/files/<host>/<url path>``, each part
a safe name, with ``+`` folders where the URL holds more than its path (a query, a login, the
other scheme) or where another URL's file or folder is in the way (:func:`tree_aside`).
The download that fills a path is :mod:`elmo.hub.download`'s; like it, this module needs
nothing of the package but its siblings (loaded by their paths when it runs alone).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional, Type
from urllib.parse import unquote, urlsplit

try:
    from .errors import DownloadError, brief_message
except ImportError:     # (loaded alone: elmo.hub.download put its siblings in sys.modules first)
    from hub_errors import DownloadError, brief_message  # type: ignore[no-redef]


def cache_folder(variable: str, error: Type[Exception]) -> Path:
    """The folder ``$variable`` names, else ``$XDG_CACHE_HOME/elmo``, else ``~/.cache/elmo``. A
    file there raises ``error`` naming the variable (not "Not a directory" on a path inside it).
    (Here, not in the package's io module: this module imports nothing of the package but its
    siblings, so a process can fetch with :mod:`elmo.hub.download` alone.)"""
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


def twin_note(url: str, dest: Path) -> str:
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
