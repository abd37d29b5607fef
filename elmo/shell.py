"""Command lines stored as text that a shell runs again (``elmo embed``'s ``command_line``).

A file name need not be UTF-8 on Linux: Python hands such bytes over as the surrogates
U+DC80..U+DCFF (``os.fsdecode``), which no UTF-8 text can hold, so an HDF5 string attribute
refused them. Such a word is written in bash's ``$'...'`` quoting with the bytes as ``\\xHH``,
which bash and zsh read back as the same bytes; every other word as :func:`shlex.quote` does.
"""
from __future__ import annotations

import shlex
from typing import Iterable


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:          # a byte that was not UTF-8 (os.fsdecode's escape)
        return f"\\x{code - 0xDC00:02x}"
    if char in "'\\":
        return "\\" + char
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if 0xD800 <= code <= 0xDFFF:          # any other lone surrogate: no bytes stand for it
        return f"\\u{code:04x}"
    return char


def shell_quote(word: str) -> str:
    """``word`` quoted for a POSIX shell; in ``$'...'`` form when it holds bytes that are not
    UTF-8 (the result is then always valid UTF-8 text)."""
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in word):
        return shlex.quote(word)
    return "$'" + "".join(_escaped(c) for c in word) + "'"


def shell_join(words: Iterable[str]) -> str:
    """The words as one command line (like :func:`shlex.join`, with :func:`shell_quote`)."""
    return " ".join(shell_quote(w) for w in words)
