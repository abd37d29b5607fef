"""``char.dic`` and ``word.dic``: the dictionaries of an ELMoForManyLangs model folder.

One entry a line, ``token<TAB>id``, UTF-8. They are read with the rules of the original loader,
so that a folder gives the same ids here as there:

* the text is split at every Unicode line boundary (``str.splitlines``), not only at ``\\n``;
* each line is stripped of surrounding whitespace (all Unicode whitespace), then split at TABs;
* a line left with one field is an entry for U+3000 (ideographic space): the token of every
  whitespace entry (space, NBSP, U+3000, ...) was stripped away, and a later such line replaces
  an earlier one;
* the embedding has one row per distinct token read (checked against the weights elsewhere).

Blank lines are skipped (the original stops on them). Unlike the original, a UTF-8 byte-order
mark opening the file is dropped (as every text file of the package, :mod:`elmo.text_files`;
kept, it joined the first token), a NUL byte is refused, and two tokens with one id are
refused (the original trainer writes one id per token; two sharing a row is a damaged file).

Writing goes the other way: one line per token in id order, which reads back to the same
mapping; a token that these rules would read as another (surrounding whitespace, a TAB or
line break in it) is refused before writing.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Mapping

from ..checks import shown
from ..io import atomic_write_text
from ..output_checks import writing
from ..text_files import decode_text
from ..weight_values import WeightFileError

#: The token a whitespace-only entry is read as.
WHITESPACE_TOKEN = "\u3000"


class DictionaryError(WeightFileError):
    """A char.dic / word.dic that cannot be read; the message names the file and line."""


def read_dictionary(path: str | Path) -> Dict[str, int]:
    """Token -> id, read as the original loader does (see the module doc).

    Raises:
        DictionaryError: the file is missing, not UTF-8, or a line is not ``token<TAB>id``.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DictionaryError(f"{path}: dictionary file not found") from None
    except OSError as e:
        raise DictionaryError(f"{path}: cannot be read ({e})") from None
    # (a UTF-8 byte-order mark is dropped: kept, it joined the first token, which then matched
    # no text, silently; a NUL byte is refused, naming its line)
    text = decode_text(data, path, DictionaryError)
    entries: Dict[str, int] = {}
    lines: Dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.strip().split("\t")
        if fields == [""]:
            continue
        if len(fields) == 1:
            fields.insert(0, WHITESPACE_TOKEN)
        if len(fields) != 2:
            raise DictionaryError(f"{path}: line {number}: expected 'token<TAB>id', got {shown(line)}")
        token, raw_id = fields
        try:
            value = int(raw_id)
        except ValueError:
            raise DictionaryError(f"{path}: line {number}: id {shown(raw_id)} is not an integer "
                                  f"(a token holding a line-break character splits its line)") from None
        if value < 0:
            raise DictionaryError(f"{path}: line {number}: negative id {value}")
        entries[token], lines[token] = value, number
    if not entries:
        raise DictionaryError(f"{path}: no entries")
    _check_ids_distinct(entries, lines, path)
    return entries


def _check_ids_distinct(entries: Mapping[str, int], lines: Mapping[str, int], path: Path) -> None:
    """Two tokens may not share an id. The original trainer writes one id per token; a file
    where two share one (edited or damaged) loaded silently, both tokens on one embedding row
    and another row unused."""
    holder: Dict[int, str] = {}
    for token, value in entries.items():
        other = holder.setdefault(value, token)
        if other != token:
            raise DictionaryError(f"{path}: line {lines[token]}: id {value} of {shown(token)} is also the id of "
                                  f"{shown(other)} (line {lines[other]}); each token needs its own id")


def check_specials(entries: Mapping[str, int], path: str | Path, names) -> None:
    """Raise :class:`DictionaryError` naming ``path`` if a special token is missing."""
    missing = [n for n in names if n not in entries]
    if missing:
        raise DictionaryError(f"{path}: special token(s) {', '.join(missing)} missing")


def _read_back_as(token: str) -> str:
    """The token that :func:`read_dictionary` reads from the line ``token<TAB>id``: ``token``
    itself, or another one (ValueError where the line does not read back as one entry)."""
    line = f"{token}\t0"
    if len(line.splitlines()) != 1:
        raise ValueError("it holds a line break, which splits its line")
    fields = line.strip().split("\t")
    if len(fields) > 2:
        raise ValueError("it holds a TAB, which separates a token from its id")
    return WHITESPACE_TOKEN if len(fields) == 1 else fields[0]


def check_writable(entries: Mapping[str, int], path: str | Path) -> None:
    """Raise :class:`DictionaryError` naming ``path`` and the token if a line of ``entries``
    would not read back as written: a token with a line break or TAB, surrounding whitespace
    (stripped when read) or of whitespace only other than U+3000 (read as U+3000)."""
    for token in entries:
        try:
            read = _read_back_as(token)
        except ValueError as e:
            raise DictionaryError(f"{path}: token {token!r} cannot be written: {e}") from None
        if read != token:
            raise DictionaryError(f"{path}: token {token!r} cannot be written: it would be read back as "
                                  f"{read!r} (each line is stripped of surrounding whitespace)")


def write_dictionary(entries: Mapping[str, int], path: str | Path) -> None:
    """Write ``token<TAB>id`` lines in id order, atomically; :func:`read_dictionary` gives the
    same mapping back (the U+3000 entry is written as it is read: a line with the id alone
    after stripping). A token that would be read back as another is refused before anything
    is written (:func:`check_writable`)."""
    check_writable(entries, path)
    lines = [f"{token}\t{value}\n" for token, value in sorted(entries.items(), key=lambda kv: kv[1])]
    # (an OutputError naming the file: a folder written whole renames it to where it was going)
    with writing(Path(path), "dictionary"):
        atomic_write_text(path, "".join(lines))
