"""Whether a cached file is whole: its pinned SHA-256 (:func:`finished_download`,
:func:`sha256_file`), or for an unpinned file, a look cheap enough for every load
(:func:`damage`: empty, an HDF5 file that does not open, JSON that does not parse).

Like :mod:`elmo.hub.download`, which a process may load alone to fetch a file, this module
needs nothing of the package but its siblings (loaded by their paths then, see there).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

try:
    from .errors import brief_message
except ImportError:     # (loaded alone: elmo.hub.download put its siblings in sys.modules first)
    from hub_errors import brief_message  # type: ignore[no-redef]


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
