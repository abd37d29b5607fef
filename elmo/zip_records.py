"""The integrity of a zip archive that ``torch.save`` wrote, which ``torch.load`` does not check.

torch.load reads a record where the central directory says it is, trusting everything else:
it skips each record's CRC-32 (a flipped byte of a weight loaded as another value), takes the
data's start from the local header even where it disagrees with the directory (a flipped bit
in a name's length moved the data read), and reads a record flagged as a directory as empty
(the tensor on it kept whatever memory held). Python's zip reader checks all of these; a file
that it refuses is damaged. Each reader of torch files (the ELMoForManyLangs .pkl files, the
training checkpoints) raises its own error with :func:`zip_damage`'s phrase.

A file saved after ``torch.serialization.set_crc32_options(False)`` (PyTorch 2.6 on) holds 0
for every CRC-32; torch.load reads it, so its headers are checked but not its checksums.
"""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Optional

#: How every zip archive opens: a local file header. A torch file in the legacy format (PyTorch
#: before 1.6) is a pickle, holds no checksums, and is left to torch.load.
LOCAL_HEADER = b"PK\x03\x04"


def zip_damage(path: str | Path) -> Optional[str]:
    """What is wrong with the zip archive ``path``, a phrase for a message after ``PATH: ``; None
    where Python's zip reader reads every record whole, or where the file is no zip archive.

    Raises the OS's own error (which names the file) where it cannot be read at all."""
    with open(path, "rb") as f:
        if f.read(len(LOCAL_HEADER)) != LOCAL_HEADER:
            return None
    try:
        with zipfile.ZipFile(path) as archive:
            unchecked = all(i.CRC == 0 for i in archive.infolist())
            damaged = _unreadable_record(archive) if unchecked else archive.testzip()
            check = "local header" if unchecked else "CRC-32 check"
            folder = next((i.filename for i in archive.infolist() if i.is_dir() or i.external_attr & 0x10), None)
    except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError, RuntimeError, OSError) as e:
        if isinstance(e, OSError) and e.filename is not None:
            raise   # (the OS's own error about the file, which names it)
        # (RuntimeError: a flag bit read as "encrypted"; a bare OSError: a directory offset
        # damaged, the seek to it refused; UnicodeDecodeError: a name's length damaged)
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:120]
        return f"a damaged or incomplete zip archive ({reason})"
    if folder is not None:
        return f"record '{folder}' is marked as a directory (MS-DOS attribute 0x10)"
    if damaged is not None:
        return f"record '{damaged}' fails its {check}"
    return None


def _unreadable_record(archive: zipfile.ZipFile) -> Optional[str]:
    """The first record of an archive saved without CRC-32s whose local header Python's zip
    reader refuses, or None. Each record is read whole (data that ends early raises EOFError);
    the reader's CRC-32 refusal at the end, against a 0 written for none, is let pass."""
    for info in archive.infolist():
        try:
            with archive.open(info) as record:
                while record.read(1 << 20):
                    pass
        except zipfile.BadZipFile as e:
            if not str(e).startswith("Bad CRC-32"):   # (the reader's words since Python 2)
                return info.filename
    return None
