"""Turn a published model's name or a URL into verified local files for the existing loaders.

    resolve("small")                      -> Local(options=..., weights=...)   (original layout)
    resolve("manylangs-zh-hans")          -> Local(folder=...)                 (unpacked archive)
    resolve("https://.../elmo_x_options.json")   the weights URL beside it: ..._weights.hdf5
    resolve("https://.../model.tar.gz")   -> Local(folder=...)

Every download is verified before it is cached: an options file must parse (ConfigError) and,
for a table entry, agree with the table's dimensions; a weight file must pass the shape checks
of :func:`elmo.original_layout.read_original_arrays` (WeightFileError); an archive must unpack safely.
Local paths are returned as they are.

Single files are the file cache's (:mod:`elmo.hub.download`). An archive is unpacked into the
unpacked cache, whose entries are made in the steps of :mod:`elmo.hub.cache_entry`, shared with
the file cache; :class:`_UnpackedArchive` supplies what differs. Its layout::

    models/unpacked/<host>/<url path>/            the unpacked archive (DEST), its model
                                                  folder in it (or DEST itself)
    models/unpacked/<host>/<url path>+.lock       the per-folder lock
    models/unpacked/<host>/<url path>+.sha256     the SHA-256 of the archive it came from
    models/unpacked/<host>/<url path>+.partial/   the archive while it is unpacked and checked
    models/unpacked/<host>/.<name>+.partial.XXXXXXXX.tmp/   unpack's own temporary folder
    models/unpacked/<host>/+tree-<hash>/<name>/   a folder whose path another URL's folder is
                                                  in the way of (:func:`unpacked_path`)
    DEST.lock, DEST.sha256, DEST.partial/, DEST.unpacking/ (and their .tmp folders)
                                                  the same under the names of versions before
                                                  the "+" names (:mod:`elmo.hub.old_names`)

The archive itself is downloaded into the file cache and deleted once unpacked.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
import threading
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, Union, cast
from urllib.parse import urlsplit, urlunsplit

from ..folder_swap import atomic_folder
from . import old_names, registry
from .archive import ArchiveError, find_model_folder, is_archive, unpack
from .cache_entry import CacheEntry, InTheWay, helper_file, make
from .cache_paths import cache_path, elmo_home, make_cache_folder, tree_aside, unwritable_cache
from .download import fetch
from .errors import DownloadError, Unreachable
from .file_checks import sha256_file
from .urls import is_url, redact_url

PathOrUrl = Union[str, Path]


@dataclass(frozen=True)
class Local:
    """A model on disk: a model ``folder``, or an ``options`` + ``weights`` pair (original
    layout with any file names)."""

    folder: Optional[Path] = None
    options: Optional[Path] = None
    weights: Optional[Path] = None


# ------------------------------------------------------------------ single files
def _check_options(path: Path, entry: Optional[registry.PretrainedModel] = None):
    """Parse an options file (ConfigError if bad) and compare it with the table's facts."""
    from ..config import ConfigError, ElmoOptions

    options = ElmoOptions.from_file(path)
    if entry is not None:
        actual = {"output_dim": options.output_dim, "projection_dim": options.lstm.projection_dim,
                  "lstm_dim": options.lstm.dim, "n_layers": options.lstm.n_layers,
                  "n_filters": options.char_cnn.n_filters, "n_highway": options.char_cnn.n_highway}
        for key, value in actual.items():
            expected = getattr(entry, key)
            if expected is not None and expected != value:
                raise ConfigError(f"{entry.urls['options']}: {key} is {value} but the model table "
                                  f"says {expected} for {entry.name!r}")
    return options


def fetch_options(url: str, entry: Optional[registry.PretrainedModel] = None,
                  sha256: Optional[str] = None) -> Path:
    """The cached, checked options file of ``url``."""
    return fetch(url, sha256=sha256, verify=_naming_the_url(url, lambda p: _check_options(p, entry)))


def fetch_weights(url: str, options_file: Path, sha256: Optional[str] = None) -> Path:
    """The cached weight file of ``url``, checked against ``options_file`` before it is kept."""
    from ..config import ElmoOptions
    from ..original_layout import read_original_arrays

    options = ElmoOptions.from_file(options_file)
    return fetch(url, sha256=sha256,
                 verify=_naming_the_url(url, lambda p: read_original_arrays(p, options)))


def _naming_the_url(url: str, check: Callable[[Path], object]) -> Callable[[Path], None]:
    """``check`` of a finished download (or its unpacked folder), its errors naming ``url``
    instead of the temporary file or folder checked (which is deleted with the error)."""
    from ..config import ConfigError
    from ..weight_values import WeightFileError

    def verify(path: Path) -> None:
        try:
            check(path)
        except (ConfigError, WeightFileError, ArchiveError) as e:
            # (a password of the URL's user part is not shown: redact_url)
            message = redact_url(str(e).replace(str(path), url))
            raise type(e)(f"{message} (the download is not kept)") from None
    return verify


def with_cache_hint(message: str, *paths: PathOrUrl) -> str:
    """``message`` of a load that failed, with how to clear the first of ``paths`` that it
    names and that is in the model cache: a cached download (``$ELMO_HOME/models/files``) is
    deleted, an archive's unpacked folder (``models/unpacked``) removed, and the next load
    downloads it again. ``message`` as it is where it names none."""
    import shlex

    try:
        models = elmo_home() / "models"
        files, unpacked = (models / "files").resolve(), (models / "unpacked").resolve()
    except DownloadError:
        return message
    for path in map(Path, paths):
        if str(path) not in message:
            continue
        where = path.resolve()
        if where.is_relative_to(files):
            return (f"{message}; it is a cached download: delete it (rm {shlex.quote(str(path))}) "
                    "and load the model again to download it again")
        entry = _unpacked_entry(where, unpacked)
        if entry is not None:
            # (a model file damaged since it was unpacked failed at every load, naming the file only)
            return (f"{message}; it is in a model unpacked from a download: delete its folder "
                    f"(rm -r {shlex.quote(str(entry))}) and load the model again to download it again")
    return message


def _unpacked_entry(path: Path, root: Path) -> Optional[Path]:
    """The archive's unpacked folder under ``root`` that holds ``path`` (the cache entry, with
    its lock beside it), or None."""
    if not path.is_relative_to(root):
        return None
    for folder in (path, *path.parents):
        if folder == root:
            return None
        if _an_unpacked_url(folder):
            return folder
    return None


def local_pair(options_file: PathOrUrl, weight_file: PathOrUrl) -> Tuple[Path, Path]:
    """Local paths for an options/weights pair, downloading whichever is a URL."""
    options = fetch_options(options_file) if is_url(options_file) else Path(options_file)
    weights = fetch_weights(weight_file, options) if is_url(weight_file) else Path(weight_file)
    return options, weights


# ------------------------------------------------------------------ archives
def unpacked_path(url: str) -> Path:
    """Where the archive at ``url`` is unpacked: ``models/unpacked/<host>/<url path>``, or, where
    another URL's unpacked folder is in the way, ``<host>/+tree-<hash>/<file name>`` (as the
    file cache does, :func:`~.cache_paths.tree_aside`).

    ``https://h/m/a.zip`` is unpacked into the folder ``m/a.zip``, and ``https://h/m/a.zip/b.zip``
    went into ``m/a.zip/b.zip``, inside the other's model folder: unpacked first, its model was
    taken for ``/m/a.zip``'s (the one model folder one level down), without a word; second, it
    was deleted whenever ``/m/a.zip`` was unpacked again. A folder that is an unpacked URL's has
    its lock beside it (``DEST+.lock``, or ``DEST.lock`` of older versions); one that holds
    another URL's entries has that URL's lock inside. Every other folder keeps its path; one
    once unpacked aside is found there first."""
    base = elmo_home() / "models" / "unpacked"
    path = cache_path(url, root=base)
    aside = tree_aside(path, base)
    if aside.is_dir() or helper_file(aside, ".lock").exists():
        return aside
    folder = base / path.relative_to(base).parts[0]
    for part in path.relative_to(folder).parts[:-1]:
        folder = folder / part
        if not folder.exists():
            return path
        if not folder.is_dir() or _an_unpacked_url(folder):
            return aside
    return aside if path.exists() and (not path.is_dir() or _holds_other_urls(path)) else path


def _an_unpacked_url(folder: Path) -> bool:
    """Whether ``folder`` is an archive URL's unpacked folder: its lock lies beside it."""
    return helper_file(folder, ".lock").exists() or old_names.old_file(folder, ".lock").exists()


def _holds_other_urls(folder: Path) -> bool:
    """Whether ``folder`` holds other URLs' unpacked folders: their locks (``NAME+.lock``) are
    in it. (A model's files named so would put the URL aside: harmless, it is still found.)"""
    try:
        return any(p.name.endswith("+.lock") for p in folder.iterdir())
    except OSError:
        return False


def fetch_archive(url: str, sha256: Optional[str] = None) -> Path:
    """Download and safely unpack the archive at ``url``; return the model folder inside.

    The archive is deleted once unpacked (the folder is what is used). The model in it (native,
    original layout or ELMoForManyLangs) is loaded before it is kept.
    """
    for _ in range(3):
        try:
            return make(_UnpackedArchive(unpacked_path(url), url, sha256))
        except InTheWay:
            # Once its lock was held, the place was no longer the URL's (another process
            # unpacked a colliding URL meanwhile): asked again, unpacked_path puts it aside.
            continue
    raise DownloadError(f"{url}: another URL's unpacked folder keeps taking this archive's "
                        "place in the cache; run again")


@dataclass
class _UnpackedArchive(CacheEntry[Path]):
    """The unpacked cache's entry: the archive at ``url`` unpacked into the folder ``dest``
    (:func:`unpacked_path`), made by :func:`~.cache_entry.make`; it serves the model folder in
    it. With a pinned ``sha256`` the folder counts only where its archive matched it."""

    dest: Path
    url: str
    sha256: Optional[str]
    error = DownloadError
    unwritable = staticmethod(unwritable_cache)

    def kept(self) -> bool:
        return _unpacked(self.dest, self.sha256)

    def served(self) -> Path:
        return find_model_folder(self.dest)

    def offline_error(self) -> Exception:
        if not self.dest.is_dir():
            what = "is not in the cache"
        elif _model_folder(self.dest) is None:
            what = "has a damaged folder in the cache (its model files are gone)"
        else:
            what = "was unpacked from an archive that does not match the pinned sha256"
        return DownloadError(f"ELMO_OFFLINE is set and {self.url} {what} "
                             f"(expected {self.dest}); unset ELMO_OFFLINE to download it")

    def make_folder(self) -> None:
        make_cache_folder(self.dest.parent)

    def in_the_way(self, locked: bool) -> bool:
        if not locked or unpacked_path(self.url) == self.dest:
            return False
        if not (_archive_digest_file(self.dest).exists() or old_names.old_digest(self.dest).exists()):
            # (never unpacked here: its lock is no mark that DEST is this URL's folder)
            with suppress(OSError):
                helper_file(self.dest, ".lock").unlink(missing_ok=True)
        return True

    def tidy(self, old: Any) -> None:
        old.tidy_folder(self.dest, _archive_digest_file(self.dest))

    def produce(self) -> None:
        # A folder unpacked without this pin, or from an archive that does not match it, stays
        # until its replacement is unpacked and checked (it was deleted first: a reader found
        # no model meanwhile, and a refused or interrupted download lost it).
        # (named by the URL: the error named the temporary "NAME.download", a file the user
        # never asked for and that is deleted with it)
        url, dest = self.url, self.dest
        archive = fetch(url, sha256=self.sha256, verify=_naming_the_url(url, _check_archive))
        try:
            digest = sha256_file(archive)
            # What a killed run left: DEST+.partial (atomic_folder deletes it) and, half
            # unpacked, unpack's temporary folders: under the lock no other process is writing
            # them, and nothing else would remove them.
            old_names.remove_unpack_temporaries(dest, "+.partial")
            with atomic_folder(dest, staging=helper_file(dest, ".partial")) as staging:
                staging.rmdir()   # (unpack writes a folder of its own and gives it this name)
                unpack(archive, staging)
                _naming_the_url(url, lambda p: _check_folder(find_model_folder(p)))(staging)
                # The old folder's digest goes before the swap, the new one's after: a kill
                # between leaves a folder with no digest (fetched again under a pin), never
                # one folder with the other's digest.
                _archive_digest_file(dest).unlink(missing_ok=True)
            _archive_digest_file(dest).write_text(digest + "\n")
        except Exception:
            archive.unlink(missing_ok=True)     # refused, or it could not be unpacked: not kept
            raise
        # (deleted on Ctrl-C or SIGTERM too, a whole verified archive was downloaded again by
        # the next run; now it stays for that run, as after a kill, and is unpacked from the cache)
        archive.unlink(missing_ok=True)


def _archive_digest_file(dest: Path) -> Path:
    """Beside an unpacked folder: the SHA-256 of the archive it came from."""
    return helper_file(dest, ".sha256")


def _unpacked(dest: Path, sha256: Optional[str]) -> bool:
    """Whether ``dest`` is an unpacked archive that still holds its model folder; with a pinned
    ``sha256``, one unpacked from an archive that matched it (the archive itself is deleted
    once unpacked, so its digest is kept beside the folder)."""
    if not dest.is_dir() or _model_folder(dest) is None:
        # (a folder whose model files were deleted since was taken as the model for good: every
        # load failed with "the archive holds no folder with config.json", and `elmo models
        # list` said it was cached; now it is fetched and unpacked again)
        return False
    if not sha256:
        return True
    digest = _archive_digest_file(dest)
    if not digest.exists() and old_names.is_old_digest(old_names.old_digest(dest)):
        digest = old_names.old_digest(dest)     # (unpacked by a version before the "+" names)
    try:
        return digest.read_text().strip() == sha256.lower()
    except OSError:
        return False


def _model_folder(dest: Path) -> Optional[Path]:
    """The model folder in the unpacked ``dest``, or None where there is none (any longer)."""
    try:
        return find_model_folder(dest)
    except (ArchiveError, OSError):
        return None


def _check_archive(path: Path) -> None:
    import tarfile
    import zipfile

    if not (zipfile.is_zipfile(path) or tarfile.is_tarfile(path)):
        raise ArchiveError(f"{path}: the download is not a zip or tar archive (a web page, an "
                           "error message?)")


def _check_folder(folder: Path) -> None:
    """Check an unpacked model before it is kept: loaded, as each format this package reads
    (native, original, ELMoForManyLangs: its .pkl files with the weights-only reader, never
    unpickled). A folder without a whole model is refused too: one with a ``config.json`` and
    no weights was kept once its JSON parsed, listed as cached, and failed at every load
    without being downloaded again."""
    from ..weights import load_pretrained

    load_pretrained(folder)


# ------------------------------------------------------------------ names and URLs
def _sibling(url: str, suffix: str, replacement: str) -> str:
    """``url`` with the ``suffix`` that ends its path replaced (query kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path[: -len(suffix)] + replacement))


def resolve_url(url: str) -> Local:
    """A single URL: an archive, an ``...options.json`` (its ``...weights.hdf5`` beside it), or
    a ``...weights.hdf5`` (its ``...options.json`` beside it)."""
    path = urlsplit(url).path
    if is_archive(path):
        return Local(folder=fetch_archive(url))
    if path.endswith("options.json"):
        options_url, weights_url = url, _sibling(url, "options.json", "weights.hdf5")
    elif path.endswith("weights.hdf5"):
        options_url, weights_url = _sibling(url, "weights.hdf5", "options.json"), url
    else:
        raise DownloadError(f"{url}: expected the URL of an options.json (its weights.hdf5 "
                            "beside it), of a weights.hdf5, or of a model archive (.zip, .tar.gz, "
                            ".tar.bz2, .tar.xz); for other names use "
                            "elmo.load_original(options_url, weights_url)")
    options, weights = local_pair(options_url, weights_url)
    return Local(options=options, weights=weights)


def fetch_model(entry: registry.PretrainedModel) -> Local:
    """Download and verify a table entry. A download that cannot be made (offline, say) says
    that the bundled models need none: a newcomer offline was told only that the host was not
    found."""
    try:
        if entry.format == "original":
            options = fetch_options(entry.urls["options"], entry, entry.sha256.get("options"))
            weights = fetch_weights(entry.urls["weights"], options, entry.sha256.get("weights"))
            return Local(options=options, weights=weights)
        return Local(folder=fetch_archive(entry.urls["archive"], entry.sha256.get("archive")))
    except Unreachable as e:   # (not a damaged download or a full disk: the hint would be noise there)
        raise Unreachable(f"{e}; {BUNDLED_HINT}") from None


#: What a failed download of a published model adds.
BUNDLED_HINT = "the bundled models need no download: elmo.from_pretrained('default'), --model default"


def is_cached(entry: registry.PretrainedModel) -> bool:
    """Whether every file of the entry is in the cache (verified): a pinned file only while it
    matches its pin, as an archive's folder (a file changed on disk since was listed as cached,
    though loading it downloads it again); an unpinned one while it looks whole
    (:func:`cache_state`)."""
    return cache_state(entry) == "yes"


def cache_state(entry: registry.PretrainedModel) -> str:
    """``"yes"`` (every file cached and verified), ``"no"``, or ``"damaged"``: an unpinned
    cached file that :func:`~elmo.hub.file_checks.damage` shows is not whole (truncated, empty),
    which the next load downloads again (it was listed as cached, and failed at every load)."""
    from .file_checks import damage, finished_download
    if entry.format == "original":
        paths = {k: cache_path(entry.urls[k]) for k in ("options", "weights")}
        if any(not entry.sha256.get(k) and damage(p) for k, p in paths.items()):
            return "damaged"
        return "yes" if all(finished_download(p, entry.sha256.get(k)) for k, p in paths.items()) else "no"
    return "yes" if _unpacked(unpacked_path(entry.urls["archive"]), entry.sha256.get("archive")) else "no"


def resolve(name_or_url: PathOrUrl) -> Local:
    """A published model's name or a URL, as verified local files (downloading if needed)."""
    if is_url(name_or_url):
        return resolve_url(str(name_or_url))
    return fetch_model(registry.get(str(name_or_url)))


def as_folder(local: Local, key: str) -> Path:
    """A model folder for ``local``: the folder itself, or for a pair a folder under
    ``models/folders/`` with ``options.json`` and ``weights.hdf5`` linking to the cached files
    (so code that takes a model folder works with any pair). Where the cache cannot be written
    (read-only, shared), the links go to a private temporary folder instead
    (:func:`_private_folder`: one per pair, removed when the process ends)."""
    if local.folder is not None:
        return local.folder
    digest = hashlib.sha256(f"{local.options}\n{local.weights}".encode()).hexdigest()[:12]
    if is_url(key):     # (not a password of user:password@ in a folder's name; the digest tells users apart)
        parts = urlsplit(key)
        key = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in key)[:80]
    folder = elmo_home() / "models" / "folders" / f"{safe}-{digest}"
    if folder.is_dir():
        return folder
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = folder.with_name(folder.name + f".{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    except OSError:
        return _private_folder(folder.name, local)
    _link_pair(tmp, local)
    try:
        os.replace(tmp, folder)
    except OSError:          # another process made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


#: This process's private link folders (a read-only cache), by their name in the cache, and the
#: process that made them (a forked child that exits normally runs the exit hook too).
_PRIVATE_FOLDERS: Dict[str, Path] = {}
_PRIVATE_OWNER: List[int] = []
_PRIVATE_LOCK = threading.Lock()


def _private_folder(name: str, local: Local) -> Path:
    """The private temporary folder of links to ``local``'s pair for the cache folder ``name``:
    made at the first call and reused (each call left a new one in the temporary folder, for
    good), removed when the process ends. Not a shared path of a fixed name: another user could
    have put links there."""
    with _PRIVATE_LOCK:
        folder = _PRIVATE_FOLDERS.get(name)
        if folder is not None:
            if all((folder / f).exists() for f in ("options.json", "weights.hdf5")):
                return folder
            shutil.rmtree(folder, ignore_errors=True)   # (its links are gone: forgotten, it stayed for good)
        if not _PRIVATE_OWNER:
            _PRIVATE_OWNER.append(os.getpid())
            atexit.register(remove_private_folders)
        folder = Path(tempfile.mkdtemp(prefix=f"elmo-{name[:40]}-"))
        _link_pair(folder, local)
        _PRIVATE_FOLDERS[name] = folder
        return folder


def remove_private_folders() -> None:
    """Remove the private link folders this process made (:func:`_private_folder`); at exit."""
    if _PRIVATE_OWNER and _PRIVATE_OWNER[0] != os.getpid():
        return      # (a forked child's exit: they are its parent's)
    with _PRIVATE_LOCK:
        for folder in _PRIVATE_FOLDERS.values():
            shutil.rmtree(folder, ignore_errors=True)
        _PRIVATE_FOLDERS.clear()


def _link_pair(folder: Path, local: Local) -> None:
    (folder / "options.json").symlink_to(Path(cast(Path, local.options)).resolve())
    (folder / "weights.hdf5").symlink_to(Path(cast(Path, local.weights)).resolve())


# ------------------------------------------------------------------ identity
def model_identity(name_or_path: PathOrUrl) -> Tuple[str, ...]:
    """What a model name, URL or path stands for on disk, without fetching anything: two
    names of one model (``fixture`` and its folder's absolute path, ``./m`` and ``m``, a
    published model's name and its folder in the cache) give one identity. A folder is its
    resolved path; a folder of just ``options.json`` and ``weights.hdf5`` links (what
    :func:`as_folder` makes of a pair) is the pair of files they link to, as is a published
    pair (its files' places in the cache); a published archive is its unpacked folder, while
    there is one, else its name; a URL is itself."""
    from .. import which_model
    found = which_model(name_or_path, warn=False)
    if found.kind in ("bundled", "local", "unknown"):
        return _folder_identity(Path(found.path if found.path is not None else name_or_path))
    if found.kind != "published":
        return (found.kind, str(name_or_path))
    # (where its files are or will be, fixed by their URLs: nothing is hashed or verified)
    entry = registry.get(str(name_or_path))
    if entry.format == "original":
        return ("pair", str(cache_path(entry.urls["options"]).resolve()),
                str(cache_path(entry.urls["weights"]).resolve()))
    folder = _model_folder(unpacked_path(entry.urls["archive"]))
    return ("published", str(name_or_path)) if folder is None else _folder_identity(folder)


def _folder_identity(path: Path) -> Tuple[str, ...]:
    """:func:`model_identity` of a local path."""
    folder = path.resolve()
    links = [folder / "options.json", folder / "weights.hdf5"]
    try:
        if all(p.is_symlink() for p in links) and len(list(folder.iterdir())) == len(links):
            return ("pair", str(links[0].resolve()), str(links[1].resolve()))
    except OSError:
        pass
    return ("path", str(folder))
