"""Unpack a downloaded model archive (zip, tar, tar.gz, tar.bz2, tar.xz) safely and find the
model folder inside.

Every member is checked before anything is written: a name that is absolute or contains
``..``, a link (zip members that are symlinks, tar symlinks or hard links pointing outside the
folder), a device or a FIFO, or a zip member that is encrypted or packed in a way zipfile
cannot read makes the whole archive refused, and so does an archive whose members would not
fit on the disk or that holds more than :data:`MAX_MEMBERS` of them. Tar files are then
extracted with Python's ``"data"`` filter as a second guard; the checksums of the format
(zip's per member, the gzip/xz/bzip2 stream's at its end) are checked before the folder
counts. Nothing is unpickled or executed; the archive is only copied out. The result appears
atomically: members go to a temporary folder beside the target, which is renamed when
complete, so a folder that exists is a whole archive.
"""
from __future__ import annotations

import lzma
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Iterable, List, Optional

from .errors import DownloadError, brief_message
from ..io import give_ordinary_mode

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
        if why is None:
            why = _unreadable_zip_member(z, info)
        if why:
            raise ArchiveError(f"{archive.name}: member {info.filename!r} has {why}; "
                               "refusing to unpack")


def _unreadable_zip_member(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> Optional[str]:
    """Why zipfile cannot read a member, or None. Opening it (no data is read) is where zipfile
    refuses one: its RuntimeError and NotImplementedError went through as a traceback."""
    try:
        with z.open(info):
            pass
    except NotImplementedError:     # e.g. Deflate64, which Windows uses for large files
        return (f"a compression method this Python cannot read (zip method {info.compress_type}: "
                "pack it again with deflate)")
    except RuntimeError:            # zipfile's "... is encrypted, password required"
        return "encryption (it needs a password)"
    return None


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


#: The most members an archive may hold: a model folder has a handful of files, and an archive of
#: many empty members passes the size check while it fills the disk's inodes (50,000 files from
#: 64 kB of tar.xz) and, for a tar, holds every member's header in memory.
MAX_MEMBERS = 10_000


def _check_count(archive: Path, count: int) -> None:
    if count > MAX_MEMBERS:
        raise ArchiveError(f"{archive.name}: holds more than {MAX_MEMBERS:,} members (a model "
                           "has a few files); refusing to unpack")


def _tar_members(archive: Path, t: tarfile.TarFile) -> List[tarfile.TarInfo]:
    """The members of ``t``, read one header at a time so that too many are refused before
    they are all in memory."""
    members = []
    for m in t:
        members.append(m)
        _check_count(archive, len(members))
    return members


#: Bytes left free after unpacking: an archive that would leave less is refused before anything
#: is written (a model cache on a nearly full disk, or a decompression bomb).
FREE_SPACE_RESERVE = 256 << 20


def unpack(archive: Path, dest: Path) -> Path:
    """Unpack ``archive`` into the folder ``dest`` (created atomically); return ``dest``.

    The members' sizes (from the archive's index) must fit on the disk with
    :data:`FREE_SPACE_RESERVE` to spare; otherwise nothing is written.

    Raises:
        ArchiveError: an unsafe member (nothing is written), an unreadable archive, too little
            free space, or a folder that cannot be written (named with the reason).
    """
    archive, dest = Path(archive), Path(dest)
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    try:
        # A tar first: is_zipfile finds a zip's end record in the last 64 kB of any file, so an
        # uncompressed tar whose last member is a zip was unpacked as that inner zip (its files
        # in place of the model's, without a word). A zip is never a tar (a tar header has a
        # checksum).
        if zipfile.is_zipfile(archive) and not tarfile.is_tarfile(archive):
            with zipfile.ZipFile(archive) as z:
                _check_count(archive, len(z.infolist()))
                _check_zip(archive, z)
                _check_room(archive, dest.parent, sum(i.file_size for i in z.infolist()))
                bad = z.testzip()
                if bad is not None:
                    raise ArchiveError(f"{archive.name}: member {bad!r} fails its CRC check "
                                       "(corrupt download?)")
                try:
                    z.extractall(tmp)
                except OSError as e:
                    raise _write_error(archive, dest, e) from None
        else:
            try:
                with tarfile.open(archive, mode="r:*") as t:
                    members = _tar_members(archive, t)
                    _check_tar(archive, members)
                    _check_room(archive, dest.parent, sum(m.size for m in members if m.isfile()))
                    t.extractall(tmp, members=members, filter="data")
                    _read_to_end(t.fileobj)
            except tarfile.FilterError as e:
                raise ArchiveError(f"{archive.name}: refusing to unpack: {e}") from None
            except OSError as e:
                if e.errno:     # the file system's (a full disk), not the archive's
                    raise _write_error(archive, dest, e) from None
                raise ArchiveError(f"{archive.name}: not a readable zip or tar archive "
                                   f"(truncated or corrupt?): {brief_message(e)}") from None
            except (tarfile.TarError, EOFError, lzma.LZMAError, zlib.error) as e:
                raise ArchiveError(f"{archive.name}: not a readable zip or tar archive "
                                   f"(truncated or corrupt?): {brief_message(e)}") from None
        give_ordinary_mode(tmp)   # (mkdtemp's is its owner's only: a cache shared by a group hid it)
        os.replace(tmp, dest)
    except (zipfile.BadZipFile, zlib.error) as e:   # zlib's: a damaged deflate stream
        raise ArchiveError(f"{archive.name}: not a readable zip archive: {brief_message(e)}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _read_to_end(stream) -> None:
    """Read a tar's (decompressed) stream to its end: tarfile stops at the end-of-archive
    blocks, before the gzip/xz/bzip2 check that follows, so a damaged byte inside a member
    would be unpacked without an error. Reading on makes the decompressor check it."""
    while stream.read(1 << 20):
        pass


def _check_room(archive: Path, folder: Path, needed: int) -> None:
    free = shutil.disk_usage(folder).free
    if needed + FREE_SPACE_RESERVE > free:
        raise ArchiveError(f"{archive.name}: unpacks to {needed / 1e6:,.1f} MB but {folder} has "
                           f"{free / 1e6:,.1f} MB free (and {FREE_SPACE_RESERVE >> 20} MB are kept "
                           "free); make room or point ELMO_HOME at a larger disk")


def _write_error(archive: Path, dest: Path, e: OSError) -> ArchiveError:
    return ArchiveError(f"{dest.parent}: cannot unpack {archive.name} there: "
                        f"{os.strerror(e.errno) if e.errno else e}; nothing was kept")


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
