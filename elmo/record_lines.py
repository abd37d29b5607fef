"""Records written one a line (JSON lines, TSV) that every line-based reader reads back as
written, whatever the user's text holds.

A line-based reader ends a line at more than ``\\n``: Python's ``str.splitlines`` also ends
one at ``\\r``, ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029
(:data:`LINE_BREAKS`), and JavaScript's older JSON readers at U+2028 and U+2029. A text
holding one of them, written raw, broke its record in two there. Every one of them is
whitespace to the project's tokenizers (``str.isspace``), so a text's tokens never hold one.

* :func:`json_line` writes a JSON value on one line: non-ASCII text stays readable (UTF-8),
  and the three line breaks that ``json`` leaves raw (``\\x85``, U+2028, U+2029) are written
  as ``\\u`` escapes, which every JSON reader reads back as the same characters (``json``
  escapes the others, all below U+0020, itself).
* :func:`tsv_field` is a text as one TSV column: each tab and line break in it is written as
  a space. The columns stay where they are, and the text keeps its tokens (each of those
  characters separates tokens, as a space does); a text's exact characters are kept by JSON
  lines only.
"""
from __future__ import annotations

import json
import re
from typing import Any

#: The characters at which ``str.splitlines`` ends a line (``\\r\\n`` is two of them).
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"

# (json.dumps with ensure_ascii=False escapes the control characters below U+0020 only)
_RAW_IN_JSON = re.compile("[\x85\u2028\u2029]")
_NOT_IN_A_FIELD = re.compile(f"[\t{LINE_BREAKS}]")


def json_line(value: Any) -> str:
    """``value`` as one line of JSON, without the line end: UTF-8 text kept as it is, save
    each line break written as a ``\\u`` escape (``json.loads`` reads back ``value``)."""
    text = json.dumps(value, ensure_ascii=False)
    # (a raw one can only stand inside a string, where the escape means the same character)
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def tsv_field(text: str) -> str:
    """``text`` as one column of a TSV line: each tab or line break (:data:`LINE_BREAKS`) a
    space, so the line keeps its columns and ends where it should for every reader."""
    return _NOT_IN_A_FIELD.sub(" ", text)


def breaks_a_line(text: str) -> bool:
    """Whether ``text`` holds a tab or a line break (:data:`LINE_BREAKS`): what no label
    written into a TSV or CoNLL line may hold."""
    return _NOT_IN_A_FIELD.search(text) is not None
