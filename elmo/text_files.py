"""Reading the text files a user hands over: each way one is not text is one line naming it.

Every reader of user text (corpora, sentences to embed, task files, vocabularies, contrast
pairs, word pairs, WordNet data, configs) holds to these rules, kept here:

* UTF-8 only. A byte that is not UTF-8 is an error naming the file, the line, the byte and
  its offset counted from 0 in the file (:func:`utf8_error_where`), as ``xxd -s`` counts.
* No NUL byte. No text holds one, and UTF-16 text without a byte-order mark is valid UTF-8
  with a NUL in every second byte: read as text, it was nonsense words (:func:`nul_byte`).
* A file that looks like UTF-16 or UTF-32 (its byte-order mark, or the pattern of its NUL
  bytes over a few code units: :func:`wide_encoding`) is named as such, with an ``iconv``
  line that converts it (:data:`UTF16_HINT`); a stray NUL in UTF-8 text is not.
* Lines end at ``\\n`` or ``\\r\\n``; a lone ``\\r`` is refused, naming its line (:func:`text_lines`).
  Two readers keep their own rule for it, by design: a training corpus (and what else is read
  through :func:`elmo.data.corpus.file_lines`: a GloVe text file, the built-in data sets) ends a
  line there too, as bilm-tf's reader does, and ``elmo embed`` keeps it
  inside its line as whitespace, numbering lines at ``\\n`` only (:mod:`elmo.embedding.reader`).

:func:`decode_text` applies the first three to a whole file's bytes; :func:`utf8_lines` applies
all four to a file read a line at a time. :func:`read_json` and :func:`read_toml` read a config,
each way it can fail one line naming the file; :func:`json_objects` reads JSON lines.
"""
from __future__ import annotations

import codecs
import io
import json
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from .io import os_error_reason


def read_json(path: str | Path, error: Callable[[str], Exception] = ValueError, *, what: str = "readable JSON",
              expected: str = "a JSON file", missing: Optional[str] = None, hint: str = "",
              object_pairs_hook: Optional[Callable[[List[Tuple[str, Any]]], Any]] = None) -> Any:
    """The JSON value in file ``path``; the caller checks what it holds.

    Each way reading it fails raises ``error(message)``, one line that names the file and says
    what is wrong: not there (``missing`` where given, else the OS's reason), a directory
    (``expected`` says what should be there), unreadable (the OS's reason), not UTF-8 (the
    line, byte and offset), or not JSON (``not {what}`` and JSON's message, with its line and
    column; also a ValueError of ``object_pairs_hook``, which builds each object as
    ``json.loads``'s does, and nesting too deep for Python's parser). ``hint``, where given,
    ends every message (what to do about it)."""
    text = _read_utf8(Path(path), error, expected, missing, hint)
    return _parsed(lambda: json.loads(text, object_pairs_hook=object_pairs_hook), path, error, what, hint)


def unique_keys(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    """An ``object_pairs_hook`` for :func:`read_json`: the object, or a ValueError where a key
    appears twice in it. JSON leaves a repeated key's meaning open (Python's parser keeps the
    last value, silently): in a model's options the two values give two different models."""
    out: Dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} appears twice in one object, with {out[key]!r} and "
                             f"{value!r}: which is meant cannot be told")
        out[key] = value
    return out


def read_toml(path: str | Path, error: Callable[[str], Exception] = ValueError, *, what: str = "readable TOML",
              expected: str = "a TOML file", missing: Optional[str] = None, hint: str = "") -> Dict[str, Any]:
    """The table in TOML file ``path`` (TOML's top level always is one); each way reading it
    fails raises ``error(message)`` in one line, as :func:`read_json`'s do."""
    import tomllib

    text = _read_utf8(Path(path), error, expected, missing, hint)
    return _parsed(lambda: tomllib.loads(text), path, error, what, hint)


def _read_utf8(path: Path, error: Callable[[str], Exception], expected: str, missing: Optional[str],
               hint: str) -> str:
    """The text of ``path`` for :func:`read_json` and :func:`read_toml`, or their one-line error."""
    end = f"; {hint}" if hint else ""
    try:
        data = path.read_bytes()
    except FileNotFoundError as e:
        raise error(f"{path}: {missing or f'cannot read it ({os_error_reason(e)})'}{end}") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, expected {expected}{end}") from None
    except OSError as e:
        raise error(f"{path}: cannot read it ({os_error_reason(e)}){end}") from None
    # A UTF-8 byte-order mark opening it is dropped, as RFC 8259 lets a JSON parser do: Windows
    # editors write one, and json.loads refused the config in a programmer's words ("decode
    # using utf-8-sig"). It holds no setting, so the file reads the same with it or without.
    return decode_text(data, path, error, expected=f"expected {expected}{end}")


def _parsed(parse: Callable[[], Any], path: str | Path, error: Callable[[str], Exception], what: str,
            hint: str) -> Any:
    """``parse()``, its ValueError (JSONDecodeError, TOMLDecodeError, a number too long to
    convert, an object hook's) and RecursionError (brackets nested thousands deep, which both
    parsers descend into recursively) as ``error``'s one line naming ``path``."""
    end = f"; {hint}" if hint else ""
    try:
        return parse()
    except ValueError as e:
        raise error(f"{path}: not {what} ({e}){end}") from None
    except RecursionError:
        raise error(f"{path}: not {what} (values nested too deeply to read){end}") from None


def decode_text(data: bytes, path: str | Path, error: Callable[[str], Exception], *, expected: str = "",
                bom: bool = True) -> str:
    """The text of ``data``, the bytes of the whole file ``path``, decoded as UTF-8; where
    ``bom``, a UTF-8 byte-order mark opening it is dropped (it is no part of the first word).

    Bytes that are not UTF-8 raise ``error("PATH: not UTF-8 text (line L: byte 0xXX at byte
    offset O)")`` (:func:`utf8_error_where`), and a NUL byte ``error("PATH: line L: a NUL byte
    (0x00) at byte offset O (...)")`` (:func:`nul_byte`); each names UTF-16 or UTF-32 where the
    file looks like it. ``expected``, where given, ends either message after a ``;`` (what
    the file should be, or what to do). The NUL check scans the decoded text once; only a file
    that holds a NUL is read again, to say where."""
    skip = len(codecs.BOM_UTF8) if bom and data.startswith(codecs.BOM_UTF8) else 0
    end = f"; {expected}" if expected else ""
    try:
        text = data[skip:].decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text ({utf8_error_where(data[skip:], e, offset=skip)}){end}") from None
    nul = nul_byte_in(text, data)
    if nul is not None:
        raise error(f"{path}: {nul}{end}")
    return text


def json_objects(lines: Iterable[str], error: Callable[[int, str], Exception]) -> Iterator[Tuple[int, dict]]:
    """(line number, object) for each non-blank line of JSON lines, numbered from 1; a line
    that is not a JSON object, or has an object with a key twice (:func:`unique_keys`: which
    value is meant cannot be told; Python's parser took the last, silently), raises
    ``error(line number, what is wrong)``."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line, object_pairs_hook=unique_keys)
        except json.JSONDecodeError as e:
            raise error(number, f"not JSON ({e.msg} at column {e.colno})") from None
        except ValueError as e:   # (unique_keys')
            raise error(number, str(e)) from None
        if not isinstance(record, dict):
            raise error(number, f"a JSON object is needed, got {type(record).__name__}")
        yield number, record


def text_lines(text: str, error: Callable[[int, str], Exception]) -> List[str]:
    """The lines of a decoded text file, numbered from 1 by their index + 1: split at ``"\\n"``
    only (str.splitlines also splits at ``\\x85``, ``\\u2028``, ...), a ``"\\r"`` before it (CRLF)
    dropped, no empty last line for a final newline. A ``"\\r"`` anywhere else raises
    ``error(line number, what is wrong)``: a file with old Mac line ends (``\\r`` alone) was one
    line, whose ``\\r`` the readers took for a space (every sentence one text, a CoNLL file one
    word) or csv refused with a traceback."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [_line_end(line, number, error) for number, line in enumerate(lines, start=1)]


def _line_end(line: str, number: int, error: Callable[[int, str], Exception]) -> str:
    """Line ``number`` of a file without the ``"\\r"`` of a ``"\\r\\n"`` end; a ``"\\r"``
    anywhere else raises ``error`` (:func:`text_lines`)."""
    if line.endswith("\r"):
        line = line[:-1]
    if "\r" in line:
        raise error(number, "a carriage return (\\r) inside the line: lines end at \\n or "
                            "\\r\\n (for a file with old Mac line ends, convert them to \\n)")
    return line


def utf8_lines(raw: Iterable[bytes], error: Callable[[int, str], Exception],
               bad_utf8: Callable[[str], Exception]) -> Iterator[str]:
    """:func:`text_lines` of a file read a line at a time (``raw``: its lines as a binary file
    yields them), decoded as they come, so that only one is held: a byte-order mark before
    the first is no part of it, and a line that is not UTF-8 raises ``bad_utf8(where)``
    (:func:`utf8_error_where`, its offset counted in the file as read). A line holding a NUL
    byte raises ``error`` with :func:`nul_byte`; the lines after it help its UTF-16 guess where
    ``raw`` is a file that can seek (not stdin or a pipe, whose next lines may not be written
    yet: the error would wait for them)."""
    seekable = bool(getattr(raw, "seekable", lambda: False)())
    offset = 0
    rest = iter(raw)
    for number, data in enumerate(rest, start=1):
        skip = len(codecs.BOM_UTF8) if number == 1 and data.startswith(codecs.BOM_UTF8) else 0
        try:
            text = data[skip:].decode("utf-8")
        except UnicodeDecodeError as e:
            raise bad_utf8(utf8_error_where(data[skip:], e, number, offset + skip)) from None
        # (UTF-16 text without a byte-order mark decodes as UTF-8)
        nul = nul_byte(data, offset, following_bytes(rest) if seekable else b"") if b"\0" in data else None
        if nul is not None:
            raise error(number, nul)
        offset += len(data)
        yield _line_end(text[:-1] if text.endswith("\n") else text, number, error)


#: What to do with a text file in UTF-16, which every reader of text refuses (as not UTF-8, or
#: for its NUL bytes).
UTF16_HINT = "the file looks like UTF-16: convert it to UTF-8, e.g. iconv -f UTF-16 -t UTF-8"
#: The same for UTF-32 (its ASCII characters are three NUL bytes and a letter).
UTF32_HINT = "the file looks like UTF-32: convert it to UTF-8, e.g. iconv -f UTF-32 -t UTF-8"
_HINTS = {"UTF-16": UTF16_HINT, "UTF-32": UTF32_HINT}
#: The fewest NUL bytes each NUL position of a code unit must hold before :func:`wide_encoding`
#: calls bytes UTF-16 or UTF-32: a few code units' worth, where one stray NUL is one.
MIN_WIDE_UNITS = 4
#: How many bytes after a line that holds a NUL :func:`wide_encoding` also looks at.
WIDE_SAMPLE = 4096
# (UTF-32 first: its little-endian mark begins with UTF-16's)
_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
         (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


def wide_bom(data: bytes) -> Optional[Tuple[str, int]]:
    """(``"UTF-16"`` or ``"UTF-32"``, the mark's length in bytes) where ``data``, the start of a
    file, opens with that encoding's byte-order mark; None otherwise."""
    return next(((name, len(bom)) for bom, name in _BOMS if data.startswith(bom)), None)


def wide_encoding(data: bytes) -> Optional[str]:
    """``"UTF-32"`` or ``"UTF-16"`` where bytes ``data`` (a line, and what follows it in the
    file) look like mostly-ASCII text in that encoding, else None: for UTF-32, the bytes at
    three of the four positions modulo 4 are mostly NUL; for UTF-16, those at even or at odd
    positions are. Any alignment counts: a line after the first starts inside the newline's
    code unit. Each of those positions must hold at least :data:`MIN_WIDE_UNITS` NUL bytes: a
    stray NUL in a short UTF-8 line (``b"a\\0"``) can be most of its odd bytes, and is no sign of UTF-16."""
    def mostly_nul(part: bytes) -> bool:
        nuls = part.count(0)
        return nuls >= MIN_WIDE_UNITS and 2 * nuls >= len(part)

    if sum(mostly_nul(data[k::4]) for k in range(4)) >= 3:
        return "UTF-32"
    return "UTF-16" if mostly_nul(data[0::2]) or mostly_nul(data[1::2]) else None


def following_bytes(lines: Iterator[bytes], limit: int = WIDE_SAMPLE) -> bytes:
    """The next raw ``lines`` joined, taken until they hold ``limit`` bytes or run out (the
    bytes after a line that holds a NUL, for :func:`wide_encoding`: a UTF-16 file's first
    line may be one word, too short to tell UTF-16 from a stray NUL)."""
    taken: List[bytes] = []
    size = 0
    for raw in lines:
        taken.append(raw)
        size += len(raw)
        if size >= limit:
            break
    return b"".join(taken)[:limit]


def utf8_error_where(data: bytes, error: UnicodeDecodeError, line: Optional[int] = None, offset: int = 0) -> str:
    """Where ``data.decode("utf-8")`` failed, for a message: ``line L: byte 0xXX at byte offset O``.

    ``data`` is what was decoded: a whole file (``line`` None: counted from its newlines), or
    line ``line`` (from 1) of a file, starting at byte ``offset`` of the file. Every message of
    the package counts the offset from 0 in the file, as ``xxd -s`` and ``dd skip=`` do. A
    UTF-16 byte-order mark opening the file adds :data:`UTF16_HINT` (the message said only
    that byte 0xff was not UTF-8); a UTF-32 one, :data:`UTF32_HINT` (its big-endian mark fails
    at its third byte)."""
    if line is None:
        line = data.count(b"\n", 0, error.start) + 1
    where = f"line {line}: byte 0x{data[error.start]:02x} at byte offset {offset + error.start}"
    bom = wide_bom(data) if offset == 0 else None
    if bom is not None and error.start < bom[1]:
        where += f" (a {bom[0]} byte-order mark; {_HINTS[bom[0]]})"
    return where


def nul_byte_where(data: bytes, line: int, offset: int = 0, after: bytes = b"") -> Optional[str]:
    """Where line ``line`` (from 1) holds its first NUL byte, for a message:
    ``line L:`` and :func:`nul_byte`; None if it holds none."""
    what = nul_byte(data, offset, after)
    return None if what is None else f"line {line}: {what}"


def nul_byte(data: bytes, offset: int = 0, after: bytes = b"") -> Optional[str]:
    """Where the line ``data`` (its bytes, starting at byte ``offset`` of the file) holds its
    first NUL byte, for a message, and what to do; None if it holds none. ``after``: bytes
    that follow the line in the file, where the caller has them (:data:`WIDE_SAMPLE` of them
    are looked at), for the encoding's guess only.

    No text holds a NUL, a control character that splitting at whitespace keeps inside a word
    (``"the\\x00dog"`` was one token). It is what UTF-16 text without a byte-order mark
    decodes to as UTF-8: ASCII letters with a NUL byte between them, every one valid UTF-8,
    read as words of nonsense.
    Where the line, with ``after``, looks like UTF-16 or UTF-32 (:func:`wide_encoding`),
    :data:`UTF16_HINT` or :data:`UTF32_HINT` says so; a stray NUL in UTF-8 text gets no hint."""
    at = data.find(b"\0")
    if at < 0:
        return None
    encoding = wide_encoding(data + after[:WIDE_SAMPLE])
    why = _HINTS[encoding] if encoding else "text holds none; is it a binary file?"
    return f"a NUL byte (0x00) at byte offset {offset + at} ({why})"


def first_nul_byte(lines: Iterable[bytes]) -> Optional[str]:
    """:func:`nul_byte_where` of the first of raw ``lines`` (as a binary file yields them) that
    holds a NUL byte; None if none does. For readers that check decoded text, called only once
    it has found one, so the common case pays nothing."""
    offset = 0
    rest = iter(lines)
    for number, raw in enumerate(rest, start=1):
        if b"\0" in raw:   # (what follows it helps tell UTF-16 from a stray NUL)
            return nul_byte_where(raw, number, offset, following_bytes(rest))
        offset += len(raw)
    return None


def nul_byte_in(text: str, data: bytes) -> Optional[str]:
    """:func:`first_nul_byte` of a whole file's bytes ``data`` where ``text``, what they decoded
    to, holds a NUL (which no text does); None otherwise, at the cost of one scan of ``text``."""
    return first_nul_byte(io.BytesIO(data)) if "\0" in text else None


def first_bad_utf8(lines: Iterable[bytes]) -> Optional[str]:
    """:func:`utf8_error_where` of the first line of raw ``lines`` (as a binary file yields
    them) that is not UTF-8; None if every one is. For readers that decode as they go, called
    only once decoding has failed, so the common case pays nothing."""
    offset = 0
    for number, raw in enumerate(lines, start=1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return utf8_error_where(raw, e, number, offset)
        offset += len(raw)
    return None
