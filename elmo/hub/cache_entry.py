"""One entry of the model cache, made under its lock: the steps the two caches share.

An entry is a path ``DEST`` that one URL owns: a downloaded file (:mod:`elmo.hub.download`,
the file cache) or the folder an archive is unpacked into (:mod:`elmo.hub.resolve`, the
unpacked cache). :func:`make` returns what the entry serves, making it where needed, in the
same steps for both caches; each supplies only its own checks and how its copy is made
(:class:`CacheEntry`):

1. a kept copy (whole, and matching its pinned SHA-256 if any) with no old names beside it is
   served at once, without the lock (each load from the cache takes this path);
2. with ``ELMO_OFFLINE`` set, a missing or invalid copy is the cache's one-line error;
3. the lock ``DEST+.lock`` is taken (its folder made first; a line is logged once another
   process holds it). Where it cannot be taken (a read-only or shared cache), a kept copy is
   still served, as it is;
4. under the lock: where another URL's file or folder took ``DEST``'s place, or a folder above
   it, after the caller chose it, the attempt ends in :class:`InTheWay` (the caller asks for
   the URL's place again); what versions before the ``+`` names left beside ``DEST`` is tidied
   (:mod:`elmo.hub.old_names`); a copy that another process made while this one waited is
   served;
5. else the entry produces its copy: in a staging place of its own, checked there, and moved
   onto ``DEST`` only when whole and checked (a refused or failed one leaves ``DEST`` as it was).

Cache layout, the names every entry may have (each cache's module lists its own)::

    DEST              the entry: a cached file, or an unpacked folder
    DEST+.lock        its lock; never deleted, so it also marks DEST as a URL's own
    DEST.lock         the lock of versions before the "+" names (old_names tidies it away)

The cache's own names beside ``DEST`` hold a ``+`` before their dot (:func:`helper_file`). Like
:mod:`elmo.hub.download`, which a process may load alone to fetch a file, this module needs
nothing of the package but :mod:`elmo.env_switch`, loaded by its path when alone (old names are
looked for only where the package is there).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Protocol, Type, TypeVar

try:
    from ..env_switch import env_switch
except ImportError:     # (this file loaded alone, by its path: see elmo.hub.download)
    def _env_switch_module():
        import importlib.util
        spec = importlib.util.spec_from_file_location("elmo_env_switch", Path(__file__).parents[1] / "env_switch.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    env_switch = _env_switch_module().env_switch

Served = TypeVar("Served", covariant=True)


def offline() -> bool:
    """``ELMO_OFFLINE`` switched on (``1``, ``true``, ``yes``, ``on``: :mod:`elmo.env_switch`): use
    the cache only. A value that is neither on nor off is a ValueError naming the variable."""
    return env_switch("ELMO_OFFLINE")


def helper_file(dest: Path, suffix: str) -> Path:
    """The cache's own file ``suffix`` (``.lock``, ``.part``, ...) for the cached file ``dest``:
    ``NAME+SUFFIX``. They were ``NAME.lock``, ``NAME.part``, ``NAME.part.json`` and
    ``.NAME.staging``, the cached names of URLs ending so: ``/m/elmo.lock`` was handed ``/m/elmo``'s
    empty lock file, and a download of ``/m/elmo`` resumed from ``/m/elmo.part``'s file. A URL's
    cached name holds a ``+`` only in :func:`~.cache_paths._short`'s ``+name-``, never before a dot."""
    return dest.with_name(f"{dest.name}+{suffix}")


class InTheWay(Exception):
    """Another URL's file or folder took the entry's place, or a folder above it, after the
    caller chose it. ``ready``: what this attempt finished and checked (a download), for the
    attempt at the URL's next place to use instead of making it again; None if nothing."""

    def __init__(self, ready: Optional[Path] = None):
        super().__init__("in the way")
        self.ready = ready


class CacheEntry(Protocol[Served]):
    """What a cache supplies to :func:`make` for its entry at ``dest`` (a subclass defines
    every method but :meth:`waiting`)."""

    dest: Path
    #: The cache's one-line error: what :meth:`make_folder` raises.
    error: Type[Exception] = Exception
    #: What an earlier attempt left ready (see :class:`InTheWay`), for :meth:`produce` to use.
    ready: Optional[Path] = None

    def kept(self) -> bool:
        """Whether ``dest`` holds a valid copy: whole, and matching its pin, if any."""
        ...

    def served(self) -> Served:
        """What the caller gets for the valid copy at ``dest``."""
        ...

    def offline_error(self) -> Exception:
        """The one-line error for ``ELMO_OFFLINE`` without a valid copy."""
        ...

    def make_folder(self) -> None:
        """Create the folder ``dest`` goes in (raising :attr:`error` where it cannot be)."""
        ...

    #: The :attr:`error` for a lock that cannot be taken in a folder (a read-only cache).
    unwritable: Callable[[Path, OSError], Exception]

    def waiting(self) -> None:
        """Called once where another process holds the lock (it is making the entry)."""
        return None

    def in_the_way(self, locked: bool) -> bool:
        """Whether another URL's file or folder is in ``dest``'s way: asked under the lock
        (``locked``), and where the lock could not be taken (not ``locked``)."""
        ...

    def tidy(self, old_names: Any) -> None:
        """Adopt or remove what versions before the ``+`` names left beside ``dest``, with the
        module :mod:`elmo.hub.old_names` (the lock held)."""
        ...

    def produce(self) -> None:
        """Make the copy (the lock held, no valid copy there): in a staging place of its own,
        checked there and moved onto ``dest`` only when whole and checked; a refused or
        failed one raises, and what was staged goes unless it is :class:`InTheWay`'s ready."""
        ...


def make(entry: CacheEntry[Served]) -> Served:
    """What ``entry`` serves, made where it is not kept yet (the module's steps 1-5).

    Raises:
        InTheWay: another URL's file or folder took the entry's place.
        entry.error: offline without a valid copy, a cache that cannot be written, or what
            :meth:`~CacheEntry.produce` raises (a failed download, a refused copy).
    """
    from filelock import FileLock, Timeout

    old = _old_names()
    kept = entry.kept()
    if kept and not (old is not None and old.left_beside(entry.dest)):   # (else tidied first)
        return entry.served()
    if offline() and not kept:
        raise entry.offline_error()
    lock = FileLock(str(helper_file(entry.dest, ".lock")))
    try:
        entry.make_folder()
        try:
            lock.acquire(timeout=0.2)
        except Timeout:
            entry.waiting()
            lock.acquire()
    except (OSError, entry.error) as e:
        if kept:                # (a read-only cache: its copies are served, their leftovers stay)
            return entry.served()
        if entry.in_the_way(locked=False):
            raise InTheWay(entry.ready) from None
        if isinstance(e, entry.error) or not isinstance(e, OSError):
            raise e from None
        raise entry.unwritable(entry.dest.parent, e) from None
    try:
        if entry.in_the_way(locked=True):       # (before making a copy that could not go there)
            raise InTheWay(entry.ready)
        if old is not None:
            entry.tidy(old)
        if entry.kept():        # another process made it while this one waited
            return entry.served()
        entry.produce()
    finally:
        lock.release()
    return entry.served()


def _old_names() -> Any:
    """The module that tidies what versions before the ``+`` names left (None where this file
    is loaded alone, without its package, as :mod:`elmo.hub.download` may be)."""
    try:
        from . import old_names
    except ImportError:
        return None
    return old_names
