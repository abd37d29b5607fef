"""Reading the input of ``elmo embed``: one sentence a line, in segments of lines.

A line is decoded as UTF-8 (bytes that are not UTF-8 raise :class:`InputError` naming the line,
or become U+FFFD with ``errors="replace"``), a trailing ``\\r`` is dropped and surrounding
whitespace is stripped, as is a byte-order mark opening the file; the stripped text is the
line's *sentence* (the key of ``sentence_to_index``). Its tokens are the whitespace-separated
words, or the output of :func:`elmo.tokenize.tokenize` with ``tokenize=True``. Lines end at ``\\n`` only.

The file is cut into *segments* of ``segment_lines`` consecutive lines: the unit of work that
is sorted by length, written to disk, resumed and shared between ranks. :func:`index_input`
reads the file once to find where each segment starts, count the lines, check the encoding
and compute a digest that identifies the content, and one per segment: a segment read again
later (to embed it, and at the merge for its keys) must have the same bytes, or
:class:`InputChanged` is raised, so a file edited during a run never gets vectors or keys of
another text.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

from ..tokenize import get_tokenizer
from ..checks import require_count
from ..text_files import WIDE_SAMPLE, nul_byte_where, utf8_error_where, wide_bom

DEFAULT_SEGMENT_LINES = 4096


class InputError(ValueError):
    """An input line that cannot be used; the message names the file and the line (1-based)."""


class InputChanged(InputError):
    """The input file's text is not what it was when the run indexed it (edited meanwhile)."""


@dataclass
class InputIndex:
    """What one pass over the input file found.

    ``segment_offsets[k]`` is the byte offset of segment k's first line (line
    ``k * segment_lines``); ``digest`` identifies the file's content, ``segment_digests[k]``
    segment k's lines, and ``n_bytes`` is the file's size.
    """

    path: Path
    n_lines: int
    segment_lines: int
    segment_offsets: List[int] = field(default_factory=list)
    digest: str = ""
    segment_digests: List[str] = field(default_factory=list)
    n_bytes: int = 0

    @property
    def n_segments(self) -> int:
        return len(self.segment_offsets)

    def segment_range(self, k: int) -> Tuple[int, int]:
        """Line numbers [first, stop) of segment k (0-based)."""
        first = k * self.segment_lines
        return first, min(first + self.segment_lines, self.n_lines)


def decode_line(raw: bytes, line_no: int, path: Path, errors: str = "strict", offset: int = 0) -> str:
    """The stripped text of one raw line; ``line_no`` is 0-based (messages say line_no + 1),
    and ``offset`` is the line's byte offset in the file (for the message on bad UTF-8).

    A UTF-8 byte-order mark opening the file (as some Windows editors save) is dropped: it
    would otherwise stay on the first word, which str.strip() keeps, and change its vector.
    A NUL byte raises InputError with either ``errors`` (:func:`elmo.text_files.nul_byte`: UTF-16
    text without a byte-order mark is valid UTF-8, a NUL between its letters)."""
    if line_no == 0 and raw.startswith(b"\xef\xbb\xbf"):
        raw, offset = raw[3:], offset + 3
    try:
        text = raw.decode("utf-8", errors=errors)
    except UnicodeDecodeError as e:
        raise _not_utf8(raw, e, line_no, path, offset) from None
    nul = _nul_byte(raw, line_no, path, offset)
    if nul is not None:
        raise nul
    return text.strip()


def _nul_byte(raw: bytes, line_no: int, path: Path, offset: int) -> Optional[InputError]:
    """The InputError naming the first NUL byte of line ``raw`` (:func:`decode_line`'s
    arguments), or None where it holds none. Only then is the file read on past the line, for
    the UTF-16 guess: a UTF-16 file's first line may be one word, too short to tell by itself."""
    if b"\0" not in raw:
        return None
    try:
        with open(path, "rb") as f:
            f.seek(offset + len(raw))
            after = f.read(WIDE_SAMPLE)
    except OSError:   # (the guess goes by the line alone)
        after = b""
    return InputError(f"{path}: {nul_byte_where(raw, line_no + 1, offset, after)}")


def _not_utf8(raw: bytes, error: UnicodeDecodeError, line_no: int, path: Path, offset: int) -> InputError:
    """The error of :func:`decode_line` for line ``raw`` that is not UTF-8. ``--errors replace``
    is suggested only where it would help: a UTF-16 or UTF-32 byte-order mark opening the file
    gets the hint to convert it (that :func:`elmo.text_files.utf8_error_where` adds), and a line holding
    a NUL byte its error (which ``--errors replace`` would meet next)."""
    where = utf8_error_where(raw, error, line_no + 1, offset)
    if offset == 0 and wide_bom(raw):
        return InputError(f"{path}: {where} is not valid UTF-8")
    nul = _nul_byte(raw, line_no, path, offset)
    if nul is not None:
        return nul
    return InputError(f"{path}: {where} is not valid UTF-8 (pass --errors replace to replace such bytes with U+FFFD)")


def split_tokens(sentence: str, tokenize: bool | str | None = False) -> List[str]:
    """The tokens of a stripped line: whitespace-separated, or by the tokenizer named by
    ``tokenize`` (True or ``"en"``: :func:`elmo.tokenize.tokenize`; ``"zh"``: jieba)."""
    return get_tokenizer(tokenize)(sentence)


def _raw_lines(path: Path, offset: int = 0) -> Iterator[Tuple[int, bytes]]:
    """(byte offset, raw line without the newline) from ``offset`` to the end of the file."""
    for pos, raw, _ in _raw_lines_sized(path, offset):
        yield pos, raw


def _raw_lines_sized(path: Path, offset: int = 0) -> Iterator[Tuple[int, bytes, int]]:
    """(byte offset, raw line without the newline, its bytes with the newline)."""
    with open(path, "rb") as f:
        f.seek(offset)
        pos = offset
        for raw in f:
            yield pos, raw.rstrip(b"\n"), len(raw)
            pos += len(raw)


def index_input(path: str | Path, segment_lines: int = DEFAULT_SEGMENT_LINES, errors: str = "strict",
                check_unique: bool = False) -> InputIndex:
    """Read the whole file once: segment offsets, line count, encoding check and digest.

    With ``check_unique`` (sentence keys), an empty or repeated sentence raises InputError,
    since it cannot name a dataset of its own.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory; the input must be a text file (one sentence a line)")
    if path.exists() and not path.is_file():  # a pipe or a device: it reads once, with no offsets to resume from
        raise InputError(f"{path}: is not a regular file; the input is read twice (to index it, then to embed "
                         f"it) and resumed from byte offsets: write the text to a file first")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such input file")
    segment_lines = require_count("segment_lines", segment_lines)
    index = InputIndex(path, 0, segment_lines)
    digest = hashlib.blake2b(digest_size=16)
    segment = hashlib.blake2b(digest_size=16)
    keys = SentenceKeys(path) if check_unique else None
    n, end = 0, 0
    for offset, raw, size in _raw_lines_sized(path):
        if n % segment_lines == 0:
            if n:
                index.segment_digests.append(segment.hexdigest())
            index.segment_offsets.append(offset)
            segment = hashlib.blake2b(digest_size=16)
        for h in (digest, segment):
            h.update(raw)
            h.update(b"\n")
        sentence = decode_line(raw, n, path, errors, offset)
        if keys is not None:
            keys.add(sentence, n)
        n, end = n + 1, offset + size
    if n:
        index.segment_digests.append(segment.hexdigest())
    index.n_lines = n
    index.n_bytes = end
    index.digest = digest.hexdigest()
    return index


class SentenceKeys:
    """Checks that sentences can name HDF5 datasets, as ``--sentence-keys`` needs.

    HDF5 reads a name as a path: ``/`` separates groups (so ``and/or`` becomes a group ``and``
    holding ``or``, as in the original command), empty parts are ignored and ``.`` is the group
    itself. A sentence is refused (InputError naming its line) if it is empty, has a ``.``
    part, or names the same dataset as an earlier sentence, or a group of one. (A NUL
    character, where HDF5 ends a name, never gets here: :func:`decode_line` refuses it.)
    """

    def __init__(self, path: Path):
        self.path = path
        self.datasets: dict = {}   # normalised name -> line
        self.groups: dict = {}     # every proper prefix of a name -> line
        self.spelled: dict = {}    # normalised name -> the sentence, where the two differ

    def add(self, sentence: str, line_no: int) -> None:
        where = f"{self.path}: line {line_no + 1}"
        parts = [p for p in sentence.split("/") if p]
        if not parts:   # ("/" was called empty too)
            what = " is empty" if not sentence else f": {sentence!r} names no HDF5 dataset (only '/')"
            raise InputError(f"{where}{what}; --sentence-keys needs a sentence to name each dataset")
        if "." in parts:
            raise InputError(f"{where}: {sentence!r} cannot name an HDF5 dataset (a '.' part); "
                             f"use line-number keys (drop --sentence-keys)")
        name = "/".join(parts)
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts))]
        clash = self.datasets.get(name, self.groups.get(name))
        if clash is None:
            clash = next((self.datasets[p] for p in prefixes if p in self.datasets), None)
        if clash is not None:
            # ("b/" after "b" was said to repeat it)
            same = self.datasets.get(name) == clash and self.spelled.get(name, name) == sentence
            what = "repeats" if same else "names the same HDF5 path as"
            raise InputError(f"{where} {what} line {clash + 1}; --sentence-keys needs every "
                             f"sentence to name a dataset of its own")
        self.datasets[name] = line_no
        if name != sentence:
            self.spelled[name] = sentence
        for p in prefixes:
            self.groups.setdefault(p, line_no)


def read_segment(index: InputIndex, k: int, errors: str = "strict") -> List[str]:
    """The stripped sentences of segment k, in order.

    Raises :class:`InputChanged` if its lines are not the bytes that :func:`index_input` read
    (the file was edited since): their vectors, or keys, would belong to another text."""
    first, stop = index.segment_range(k)
    sentences, digest = [], hashlib.blake2b(digest_size=16)
    for line_no, (offset, raw) in enumerate(_raw_lines(index.path, index.segment_offsets[k]), start=first):
        if line_no >= stop:
            break
        digest.update(raw)
        digest.update(b"\n")
        sentences.append(decode_line(raw, line_no, index.path, errors, offset))
    if len(sentences) != stop - first or digest.hexdigest() != index.segment_digests[k]:
        raise InputChanged(f"{index.path}: changed while it was being embedded (lines {first + 1}-{stop} "
                           f"are not what they were when the run started); once nothing writes to it, "
                           f"run again with --overwrite")
    return sentences


def indexed_sentences(index: InputIndex, errors: str = "strict") -> Iterator[str]:
    """The stripped sentences of the file, in order, each segment checked as
    :func:`read_segment` does, and the file's size at the end: lines added since the run
    started are an :class:`InputChanged` too (the output would silently leave them out)."""
    for k in range(index.n_segments):
        yield from read_segment(index, k, errors)
    try:
        size = index.path.stat().st_size
    except OSError:
        size = -1
    if size != index.n_bytes:
        raise InputChanged(f"{index.path}: changed while it was being embedded (it has "
                           f"{'no longer' if size < 0 else f'{size:,}'} bytes, not the {index.n_bytes:,} "
                           f"it had when the run started); once nothing writes to it, run again with --overwrite")


def read_sentences(path: str | Path, errors: str = "strict", limit: Optional[int] = None) -> Iterator[str]:
    """The stripped sentences of the file, in order (the first ``limit`` ones if given)."""
    path = Path(path)
    for line_no, (offset, raw) in enumerate(_raw_lines(path)):
        if limit is not None and line_no >= limit:
            return
        yield decode_line(raw, line_no, path, errors, offset)
