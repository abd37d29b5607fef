"""Unpack a downloaded model archive (zip, tar, tar.gz, tar.bz2, tar.xz) safely and find the
model folder inside.

Every member is checked before anything is written: a name that is absolute or contains
``..``, a link (zip members that are symlinks, tar symlinks or hard links pointing outside the
folder), a device or a FIFO makes the whole archive refused. Tar files are then extracted with
Python's ``"data"`` filter as a second guard. Nothing is unpickled or executed; the archive is
only copied out. The result appears atomically: members go to a temporary folder beside the
target, which is renamed when complete, so a folder that exists is a whole archive.
"""
from __future__ import annotations

import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Iterable, Optional

from .download import DownloadError

#: Suffixes understood as archives.
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


class ArchiveError(DownloadError):
    """An archive that is unreadable or holds a member that would escape its folder."""


def is_archive(name: str) -> bool:
    """True when the file name ends with one of :data:`ARCHIVE_SUFFIXES`."""
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def _unsafe_name(name: str) -> Optional[str]:
    """Why a member name is unsafe, or None."""
    if not name:
        return "an empty name"
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "an absolute path"
    if ".." in PurePosixPath(name.replace("\\", "/")).parts:
        return "a '..' component"
    return None


def _check_zip(archive: Path, z: zipfile.ZipFile) -> None:
    for info in z.infolist():
        why = _unsafe_name(info.filename)
        if why is None and stat.S_ISLNK(info.external_attr >> 16):
            why = "a symbolic link"
        if why:
            raise ArchiveError(f"{archive.name}: member {info.filename!r} has {why}; "
                               "refusing to unpack")


def _check_tar(archive: Path, members: Iterable[tarfile.TarInfo]) -> None:
    for m in members:
        why = _unsafe_name(m.name)
        if why is None and (m.issym() or m.islnk()):
            # A link target is resolved from the link's folder (symlink) or the archive root
            # (hard link); either way it must stay inside.
            base = PurePosixPath(m.name).parent if m.issym() else PurePosixPath(".")
            target = m.linkname
            if target.startswith("/") or ".." in (base / target).parts:
                why = f"a link to {target!r} outside the folder"
        if why is None and not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            why = "a special file type (device or FIFO)"
        if why:
            raise ArchiveError(f"{archive.name}: member {m.name!r} has {why}; refusing to unpack")


def unpack(archive: Path, dest: Path) -> Path:
    """Unpack ``archive`` into the folder ``dest`` (created atomically); return ``dest``.

    Raises:
        ArchiveError: an unsafe member (nothing is written) or an unreadable archive.
    """
    archive, dest = Path(archive), Path(dest)
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                _check_zip(archive, z)
                bad = z.testzip()
                if bad is not None:
                    raise ArchiveError(f"{archive.name}: member {bad!r} fails its CRC check "
                                       "(corrupt download?)")
                z.extractall(tmp)
        else:
            try:
                with tarfile.open(archive, mode="r:*") as t:
                    members = t.getmembers()
                    _check_tar(archive, members)
                    t.extractall(tmp, members=members, filter="data")
            except tarfile.FilterError as e:
                raise ArchiveError(f"{archive.name}: refusing to unpack: {e}") from None
            except (tarfile.TarError, EOFError, OSError) as e:
                raise ArchiveError(f"{archive.name}: not a readable zip or tar archive "
                                   f"(truncated or corrupt?): {e}") from None
        os.replace(tmp, dest)
    except zipfile.BadZipFile as e:
        raise ArchiveError(f"{archive.name}: not a readable zip archive: {e}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


#: Files that mark a model folder: native or ELMoForManyLangs (config.json), original layout.
MODEL_MARKERS = ("config.json", "options.json")


def find_model_folder(root: Path) -> Path:
    """The folder in an unpacked archive that holds the model: ``root`` itself or the one
    sub-folder (one level down) with a ``config.json`` or ``options.json``.

    Raises:
        ArchiveError: none, or more than one, found.
    """
    root = Path(root)
    if any((root / m).is_file() for m in MODEL_MARKERS):
        return root
    found = sorted(d for d in root.iterdir()
                   if d.is_dir() and not d.name.startswith(("__MACOSX", "."))
                   and any((d / m).is_file() for m in MODEL_MARKERS))
    if len(found) == 1:
        return found[0]
    if not found:
        raise ArchiveError(f"{root}: the archive holds no folder with {' or '.join(MODEL_MARKERS)} "
                           "at its top or one level down")
    raise ArchiveError(f"{root}: the archive holds {len(found)} model folders "
                       f"({', '.join(d.name for d in found)}); expected one")
