"""Task examples from your own files: CoNLL columns, ``word/TAG``, TSV and JSON lines.

A *format* says how one file becomes :class:`~elmo.tasks.datasets.Example` objects for a
task *kind* (:mod:`.kinds`: ``tagging``, ``classification``, ``pair``, ``regression``,
``pair_regression``)::

    {"type": "conll", "word": 0, "label": -1}          # one token a line, blank line between
    {"type": "conllu", "label": "upos"}               # Universal Dependencies' CoNLL-U
    {"type": "word_tag", "separator": "/"}            # one sentence a line: The/at dog/nn
    {"type": "tsv", "text": "sentence", "label": "label", "text_b": null, "header": true}
    {"type": "tsv", "text": 0, "label": 1, "header": false, "delimiter": ","}   # CSV, quoted
    {"type": "jsonl", "text": "tokens", "label": "label", "text_b": "evidence"}

* CoNLL columns are separated by tabs (a line without one: by spaces); every word line has
  the same number of columns, so a word with a space cannot shift its line's columns.
* CoNLL-U reads the FORM column and the label column (``upos``, ``xpos``, another column's
  name or number); comment lines, multiword-token ranges (``1-2``) and empty nodes (``8.1``)
  are not words. A plain ``conll`` file that looks like CoNLL-U is refused, as its comments
  and ranges would become words.
* CoNLL, CoNLL-U and ``word/TAG`` are for tagging. TSV and JSON lines are for any kind; for tagging
  their label is one tag per token (a list, or a string of tags separated by spaces).
* TSV columns are named (with a header line, the default when a name is given) or counted
  from 0; JSON fields are named. ``delimiter`` (a tab) may be another character; ``quoting``
  ``csv`` (the default for any delimiter but a tab) reads double-quoted fields as csv does,
  ``none`` (a tab's default) keeps every quote as a character of the text. A text is a list of tokens, a string, or for JSON a list of
  lists (sentences, joined); a list of field names joins their texts (``["title", "body"]``).
* A string is split on whitespace, or with ``"tokenize": true`` (a key of the task spec) by
  the project's tokenizer (:func:`elmo.tokenize.tokenize`); never into characters. Tagging
  texts are never re-tokenized: the tags belong to the given tokens.
* ``max_tokens`` / ``max_tokens_b`` cut texts on purpose; without them nothing is cut.
* A ``span_qa`` task (extractive question answering) is read from JSON lines: ``text`` names
  the question, ``text_b`` the context, ``label`` the answers, a non-empty list of
  ``{"text": "the original answer", "start": 3, "end": 5}``, the token span ``[start, end)``
  of the context (counted from 0 in the whole context, before ``max_tokens_b`` cuts it)::

      {"type": "jsonl", "text": "question", "text_b": "context", "label": "answers"}

  A span outside the context, one with ``start >= end``, or an answer without its three
  fields is refused naming the file and line.
* A ``regression`` or ``pair_regression`` label is a number (a JSON number, or its text in
  TSV and JSON): one that is not, or is NaN or infinite, is refused naming its line; the class
  rules below do not apply to it.
* A JSON label or tag that is not a string is spelt as a text file would spell it: ``true``
  is ``"true"``, ``1`` and ``1.0`` are both ``"1"``; labels and tags lose surrounding space, and
  one holding a tab or a line end is refused (predict writes labels into TSV and CoNLL lines),
  in every format, ``str.splitlines``'s line ends too (``\\x85``, U+2028, ...); a tag holding
  any whitespace is refused (predict's TSV separates a sentence's tags by spaces).
  A class label that is a whole number with a decimal point, written (``"1.0"``) or JSON's
  (``1.0``), is the whole number (``"1"``), in every format.

Every malformed line raises :class:`TaskDataError` naming the file and the line.
"""
from __future__ import annotations

import csv
import math
import re
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union

from ..data.fetch import sha256_file
from ..record_lines import breaks_a_line
from ..text_files import decode_text, json_objects, text_lines
from .datasets import Answer, Example, Label, SourceText
from .kinds import MAX_TARGET, task_kind

FORMATS = ("conll", "conllu", "word_tag", "tsv", "jsonl")
FORMAT_KEYS = {"conll": {"word", "label", "separator"},
               "conllu": {"word", "label"},
               "word_tag": {"separator"},
               "tsv": {"text", "label", "text_b", "header", "delimiter", "quoting"},
               "jsonl": {"text", "label", "text_b"}}

#: How a TSV format reads double quotes: ``none`` as text, ``csv`` as csv's quoting.
TSV_QUOTING = ("none", "csv")
#: The line ends a label may not hold, as its message names them (:data:`elmo.record_lines.LINE_BREAKS`).
_LINE_ENDS = "\\n, \\r, \\x0b, \\x0c, \\x1c-\\x1e, \\x85, U+2028, U+2029"
_WHITESPACE = re.compile(r"\s")    # (str.isspace's characters)

LabelMap = Callable[[str], Optional[str]]       # a preset's label rule; None drops the example

#: CoNLL-U's ten columns, by the lower-case names a format may use for ``word`` and ``label``.
CONLLU_COLUMNS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")
#: Lines by which a file read as plain CoNLL shows itself to be CoNLL-U: its sentence comments,
#: and a multiword-token range or empty node as the first of ten tab-separated columns.
_CONLLU_COMMENT = re.compile(r"#\s*(sent_id|text|newdoc|newpar|global\.columns)\b")
_CONLLU_NOT_A_WORD = re.compile(r"\d+[-.]\d+")
#: A label that is a whole number written with a decimal point: ``1.0``, ``-2.00``, ``3.``.
_WHOLE_NUMBER = re.compile(r"([+-]?\d+)\.0*")
#: A graded target written as text: ASCII decimal or scientific notation. Python's float()
#: also takes "1_5" (15: a typo read as a number), other scripts' digits and "nan"/"inf".
_TARGET_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class TaskDataError(ValueError):
    """A task file, line or format setting that cannot be read (the message names it)."""


#: A file's SHA-256 (hex): the one the corpus fetcher checks archives with.
file_sha256 = sha256_file


class FileDigest(NamedTuple):
    """A file's SHA-256 (hex) and its size in bytes, both of one reading."""
    sha256: str
    size: int


def file_digest(path: Path) -> FileDigest:
    """:class:`FileDigest` of ``path``: the bytes hashed are the bytes counted (a size taken
    by ``stat`` apart from the hash could be another version's, the file edited between)."""
    import hashlib
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return FileDigest(digest.hexdigest(), size)


def check_format(fmt: object, kind: str, where: str) -> dict:
    """``fmt`` (as read from a config: anything) with its defaults, or a
    :class:`TaskDataError` naming the bad setting."""
    if not isinstance(fmt, dict) or fmt.get("type") not in FORMATS:
        raise TaskDataError(f"{where}: format.type must be one of {', '.join(FORMATS)}, "
                            f"got {fmt.get('type') if isinstance(fmt, dict) else fmt!r}")
    t = fmt["type"]
    unknown = set(fmt) - FORMAT_KEYS[t] - {"type"}
    if unknown:
        raise TaskDataError(f"{where}: unknown {t} format settings {sorted(unknown)}; "
                            f"known: {sorted(FORMAT_KEYS[t])}")
    spec = task_kind(kind)
    if t in ("conll", "conllu", "word_tag") and not spec.token_labels:
        raise TaskDataError(f"{where}: format {t} is for tagging tasks, not {kind}")
    if spec.span_answers and t != "jsonl":   # (an answer is a list of objects: no TSV column holds one)
        raise TaskDataError(f"{where}: a {kind} task is read from JSON lines (format.type jsonl), "
                            f"not {t}")
    out = dict(fmt)
    if t == "conll":
        out.setdefault("word", 0)
        out.setdefault("label", -1)
        if out.get("separator") is not None:
            _check_separator(out["separator"], "separator", where)
        for key in ("word", "label"):
            if not isinstance(out[key], int) or isinstance(out[key], bool):
                raise TaskDataError(f"{where}: format.{key} must be a column number (0 = the "
                                    f"first, -1 = the last), got {out[key]!r}")
    elif t == "conllu":
        out.setdefault("word", "form")
        out.setdefault("label", "upos")
        for key in ("word", "label"):
            value = out[key]
            if isinstance(value, str) and value.lower() in CONLLU_COLUMNS:
                out[key] = CONLLU_COLUMNS.index(value.lower())
            elif not (isinstance(value, int) and not isinstance(value, bool) and 1 <= value < 10):
                raise TaskDataError(f"{where}: format.{key} must be a CoNLL-U column: one of "
                                    f"{', '.join(CONLLU_COLUMNS[1:])}, or its number 1 to 9, got {value!r}")
    elif t == "word_tag":
        out.setdefault("separator", "/")
        _check_separator(out["separator"], "separator", where)
    else:
        for key in ("text", "label"):
            if out.get(key) is None:
                raise TaskDataError(f"{where}: the {t} format needs format.{key}")
        if spec.pair and out.get("text_b") is None:
            raise TaskDataError(f"{where}: a pair task's {t} format needs format.text_b")
        if not spec.pair and out.get("text_b") is not None:
            raise TaskDataError(f"{where}: format.text_b is only for pair tasks")
        if t == "tsv":
            for key in ("text", "label", "text_b"):
                col = out.get(key)
                if col is not None and not (isinstance(col, str) or (
                        isinstance(col, int) and not isinstance(col, bool) and col >= 0)):
                    raise TaskDataError(f"{where}: format.{key} must be a header name or a "
                                        f"column number from 0, got {col!r}")
            named = any(isinstance(out.get(k), str) for k in ("text", "label", "text_b"))
            out.setdefault("header", named)
            out.setdefault("delimiter", "\t")
            if not isinstance(out["header"], bool):   # ("false" read the first row as the header)
                raise TaskDataError(f"{where}: format.header must be true or false, got "
                                    f"{out['header']!r}")
            _check_separator(out["delimiter"], "delimiter", where, one_character=True)
            # A comma-separated file quotes every text holding a comma (csv's convention), so its
            # quotes are csv quoting; a tab-separated one's are mostly the text's own ("Hi," he
            # said), which csv quoting would strip or run across lines.
            out.setdefault("quoting", "none" if out["delimiter"] == "\t" else "csv")
            if out["quoting"] not in TSV_QUOTING:
                raise TaskDataError(f"{where}: format.quoting must be one of "
                                    f"{', '.join(TSV_QUOTING)}, got {out['quoting']!r}")
            if named and not out["header"]:
                raise TaskDataError(f"{where}: TSV columns given by name need a header line "
                                    f"(format.header true), or give column numbers")
    return out


def _check_separator(value, key: str, where: str, one_character: bool = False) -> None:
    """A format's separator or delimiter: a string that is not empty (csv's delimiter: one
    character) and holds no line end. Else a TaskDataError naming format.KEY (a number or an
    empty TSV delimiter was a TypeError traceback from str.split or csv)."""
    if not isinstance(value, str) or not value or (one_character and len(value) != 1) \
            or "\n" in value or "\r" in value:
        raise TaskDataError(f"{where}: format.{key} must be "
                            + ("one character" if one_character else "a non-empty string")
                            + f" other than a line end, got {value!r}")


class _Reader:
    """Reads one file of one format into examples (see the module docstring)."""

    def __init__(self, path: Path, kind: str, fmt: dict, tokenize: bool = False,
                 max_tokens: Optional[int] = None, max_tokens_b: Optional[int] = None,
                 label_map: Optional[LabelMap] = None, skip_empty: bool = False):
        self.path, self.kind, self.fmt = path, task_kind(kind), fmt
        self.tokenize, self.max_tokens, self.max_tokens_b = tokenize, max_tokens, max_tokens_b
        self.label_map, self.skip_empty = label_map, skip_empty
        self.whole_numbers: Set[str] = set()    # labels read as the whole number ("1.0" -> "1")

    def error(self, line: int, message: str) -> TaskDataError:
        return TaskDataError(f"{self.path}:{line}: {message}")

    # ------------------------------------------------------------------ texts and labels
    def tokens(self, value, line: int, what: str) -> List[str]:
        if isinstance(value, tuple):                # several fields, joined in order
            return [t for v in value for t in self.tokens(v, line, what)]
        if isinstance(value, str):
            if self.tokenize and not self.kind.token_labels:
                from ..tokenize import tokenize
                return tokenize(value)
            return value.split()
        if isinstance(value, list):
            out: List[str] = []
            for item in value:
                if isinstance(item, list):          # sentences of tokens, joined
                    out += self.tokens(item, line, what)
                elif isinstance(item, str):
                    if not item.strip():   # (no text file gives one: predict cannot either)
                        raise self.error(line, f"{what}: token {len(out) + 1} is "
                                               f"{'empty' if not item else 'only spaces'} ({item!r})")
                    out.append(item)
                else:
                    raise self.error(line, f"{what}: tokens must be strings, got {item!r}")
            return out
        raise self.error(line, f"{what} must be a string or a list of tokens, got "
                               f"{type(value).__name__}")

    def label(self, value, line: int) -> Optional[str]:
        if isinstance(value, (list, dict)) or value is None:
            raise self.error(line, f"the label must be a single value, got {value!r}")
        text = self.label_text(value, line)
        if self.label_map is not None:
            try:
                return self.label_map(text)
            except ValueError as e:
                raise self.error(line, f"label {text!r}: {e}") from None
        if not text:
            raise self.error(line, "empty label")
        # "1.0" is the class "1", as JSON's 1.0 is: a column of whole numbers written as floats
        # (pandas does, where a value is missing) made "1.0" a class of its own beside "1", or a
        # test label no training example had
        whole = _WHOLE_NUMBER.fullmatch(text)
        if whole:
            self.whole_numbers.add(text)
        return whole.group(1) if whole else text

    def target(self, value, line: int) -> float:
        """A graded task's label: a finite number (JSON's number, or its text in any format)."""
        number = None
        try:
            if isinstance(value, str) and _TARGET_TEXT.fullmatch(value.strip()):
                number = float(value.strip())
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                number = float(value)
        except (ValueError, OverflowError):    # not a number; a JSON integer past float's range
            pass
        if number is None or not math.isfinite(number):
            raise self.error(line, f"the target {value!r} is not a finite number, which a "
                                   f"{self.kind.name} task's label must be")
        if abs(number) > MAX_TARGET:
            raise self.error(line, f"the target {value!r} is beyond ±{MAX_TARGET:.3g}, the range a graded "
                                   f"task takes (its std and correlations square targets); rescale the column")
        return number

    def label_text(self, value, line: int) -> str:
        """A JSON label value as the label's text, spelt as a text file would give it.

        JSON's ``true`` is ``"true"`` (Python's str gave ``"True"``), and a whole number is
        one label whether written ``1`` or ``1.0`` (they were two classes); surrounding
        space is no part of a label."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            if not math.isfinite(value):
                raise self.error(line, f"a label cannot be {value!r}")
            return str(int(value)) if value.is_integer() else repr(value)
        text = str(value).strip()
        if breaks_a_line(text):
            # (predict writes labels into TSV and CoNLL lines: one with a tab read back as two
            # columns, one with a line end, \x85 or U+2028 as two lines for str.splitlines)
            raise self.error(line, f"the label {text!r} holds a tab or a line end ({_LINE_ENDS}), "
                                   f"which no label may: predict's TSV and CoNLL output could not hold it")
        return text

    def answers(self, value, n: int, line: int) -> Tuple[Answer, ...]:
        """A span_qa label: a non-empty list of ``{"text", "start", "end"}``, each a token span
        ``[start, end)`` of a context of ``n`` tokens (the whole context, before any cut)."""
        if not isinstance(value, list) or not value:
            raise self.error(line, f"the answers must be a non-empty list of {{\"text\", \"start\", "
                                   f"\"end\"}} objects, got {value!r}"[:300])
        out = []
        for k, a in enumerate(value, start=1):
            if not isinstance(a, dict) or not {"text", "start", "end"} <= set(a):
                raise self.error(line, f"answer {k}: needs the fields text, start and end, got {a!r}"[:300])
            text, start, end = a["text"], a["start"], a["end"]
            if not isinstance(text, str) or not text.strip():
                raise self.error(line, f"answer {k}: text must be a non-empty string, got {text!r}")
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
                raise self.error(line, f"answer {k}: start and end must be token positions "
                                       f"(whole numbers), got {start!r} and {end!r}")
            if not 0 <= start < end <= n:
                raise self.error(line, f"answer {k}: the span [{start}, {end}) is not inside the "
                                       f"context's {n} tokens with start < end (end is exclusive)")
            out.append(Answer(text, start, end))
        return tuple(out)

    def tags(self, value, n: int, line: int) -> List[str]:
        tags = value.split() if isinstance(value, str) else value
        if isinstance(tags, list) and all(isinstance(t, (str, int, float)) for t in tags):
            tags = [self.label_text(t, line) for t in tags]   # ["O ", "B-PER"] and [0, 1] alike
        if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
            raise self.error(line, f"tags must be a list of non-empty strings, got {value!r}")
        if len(tags) != n:
            raise self.error(line, f"{len(tags)} tags for {n} tokens")
        return [self.tag(t, line) for t in tags]

    def tag(self, tag: str, line: int) -> str:
        """One tag through ``label_map`` (a preset's rule, or a check that refuses a tag); a
        tag holding whitespace is refused: predict's TSV separates a sentence's tags by spaces,
        and a line break split its CoNLL line."""
        if _WHITESPACE.search(tag):
            raise self.error(line, f"tag {tag!r} holds whitespace, which no tag may: predict's TSV "
                                   f"output separates tags by spaces")
        if self.label_map is None:
            return tag
        try:
            mapped = self.label_map(tag)
        except ValueError as e:
            raise self.error(line, f"tag {tag!r}: {e}") from None
        if mapped is None:
            raise self.error(line, f"tag {tag!r} has no mapping")
        return mapped

    def example(self, text, label, text_b, line: int) -> Optional[Example]:
        toks = self.tokens(text, line, "text")
        source_b: Optional[SourceText] = None
        toks_b: Optional[List[str]]
        if self.kind.span_answers and isinstance(text_b, str):    # answers are read back from it
            toks_b, source_b = SourceText.split(text_b, self.tokenize)
        else:
            toks_b = self.tokens(text_b, line, "text_b") if self.kind.pair else None
        if not toks or (toks_b is not None and not toks_b):
            if self.skip_empty:
                return None
            raise self.error(line, "empty text" if not toks else "empty text_b")
        if self.kind.token_labels:
            return Example(toks, self.tags(label, len(toks), line))
        lab: Optional[Label]
        if self.kind.span_answers:
            lab = self.answers(label, len(toks_b or []), line)
        else:
            lab = self.target(label, line) if self.kind.graded else self.label(label, line)
        if lab is None:
            return None
        if self.max_tokens:
            toks = toks[:self.max_tokens]
        if toks_b is not None and self.max_tokens_b:
            toks_b = toks_b[:self.max_tokens_b]
        return Example(toks, lab, toks_b, source_b)

    # ------------------------------------------------------------------ formats
    def read(self) -> List[Example]:
        text = decode_text(self.path.read_bytes(), self.path, TaskDataError)
        lines = text_lines(text, self.error)     # (a lone \r is refused, naming its line)
        out = getattr(self, "_" + self.fmt["type"])(lines)
        return [ex for ex in out if ex is not None]

    def _conll(self, lines: List[str]) -> List[Optional[Example]]:
        out: List[Optional[Example]] = []
        words: List[str] = []
        tags: List[str] = []
        wcol, lcol = int(self.fmt["word"]), int(self.fmt["label"])
        sep = self.fmt.get("separator")

        def columns(line: str) -> List[str]:
            return line.split(sep) if sep else (line.split("\t") if "\t" in line else line.split())

        # Every word line has the file's columns: a word with a space in a file separated by
        # spaces ("New York B-LOC") made one more, so column 0 or -1 read another word, column
        # 1 a word as the tag, and nothing said so.
        counts = Counter(len(columns(line)) for line in lines
                         if line.strip() and not line.startswith("-DOCSTART-"))
        usual = counts.most_common(1)[0][0] if counts else 0
        for i, line in enumerate(lines + [""], start=1):
            if not line.strip() or line.startswith("-DOCSTART-"):
                if words:
                    out.append(Example(words, tags))
                words, tags = [], []
                continue
            cols = columns(line)
            if _CONLLU_COMMENT.match(line) or (len(cols) == 10 and _CONLLU_NOT_A_WORD.fullmatch(cols[0])):
                raise self.error(i, "this looks like CoNLL-U (a sentence comment, or a multiword "
                                    "range or empty node), whose lines would become words: use "
                                    "format type conllu")
            try:
                word, tag = cols[wcol], cols[lcol]
            except IndexError:
                raise self.error(i, f"{len(cols)} columns; the format reads column {wcol} "
                                    f"(word) and {lcol} (label)") from None
            if len(cols) != usual:
                raise self.error(i, f"{len(cols)} columns, where most word lines have {usual}: "
                                    f"every word line needs the same columns (a word with a space "
                                    f"in a file separated by spaces? separate the columns by tabs)")
            if not word.strip() or not tag.strip():
                raise self.error(i, f"empty {'word' if not word.strip() else 'label'} column")
            words.append(word.strip())
            tags.append(self.tag(tag.strip(), i))
        return out

    def _conllu(self, lines: List[str]) -> List[Optional[Example]]:
        out: List[Optional[Example]] = []
        words: List[str] = []
        tags: List[str] = []
        wcol, lcol = self.fmt["word"], self.fmt["label"]
        for i, line in enumerate(lines + [""], start=1):
            if not line.strip():
                if words:
                    out.append(Example(words, tags))
                words, tags = [], []
                continue
            if line.startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) != 10:
                raise self.error(i, f"{len(cols)} tab-separated columns; a CoNLL-U word line has 10")
            if _CONLLU_NOT_A_WORD.fullmatch(cols[0]):
                continue        # a multiword token's range (its words follow) or an empty node
            # (as plain CoNLL's: a space around a tag made 'NOUN ' a tag of its own beside
            # 'NOUN', and an empty FORM an empty word)
            word, tag = cols[wcol].strip(), cols[lcol].strip()
            if not word:
                raise self.error(i, f"empty {CONLLU_COLUMNS[wcol]} column ({cols[wcol]!r})")
            if tag == "_" or not tag:
                raise self.error(i, f"no {CONLLU_COLUMNS[lcol]} label ('{tag}') for {word!r}; "
                                    f"choose another format.label column")
            words.append(word)
            tags.append(self.tag(tag, i))
        return out

    def _word_tag(self, lines: Sequence[str]) -> List[Optional[Example]]:
        sep = self.fmt["separator"]
        out: List[Optional[Example]] = []
        for i, line in enumerate(lines, start=1):
            words, tags = [], []
            for tok in line.split():
                word, found, tag = tok.rpartition(sep)
                if not found or not word or not tag:
                    raise self.error(i, f"token {tok!r} is not word{sep}TAG")
                words.append(word)
                tags.append(self.tag(tag, i))
            if words:
                out.append(Example(words, tags))
        return out

    def _column(self, key: str, header: Optional[List[str]]) -> Optional[int]:
        col = self.fmt.get(key)
        if col is None:
            return None
        if isinstance(col, int):
            return col
        if header is None or col not in header:
            raise self.error(1, f"no column {col!r} (format.{key}) in the header "
                                f"{header if header is not None else ''}")
        if header.count(col) > 1:       # (the first was read, the others' values ignored)
            raise self.error(1, f"{header.count(col)} columns named {col!r} (format.{key}) in the "
                                f"header {header}; name the one to read by its number, with "
                                f"format.header true")
        return header.index(col)

    def _rows(self, lines: Sequence[str]) -> List[Tuple[int, List[str]]]:
        """(line number, fields) of each row; an empty line is a row without fields.

        ``quoting`` ``none`` splits each line at the delimiter (a quote is a character of its
        text); ``csv`` reads double-quoted fields as csv does (a delimiter or line end inside
        quotes, ``""`` for a quote), its rows numbered by the line they start on."""
        delimiter = self.fmt["delimiter"]
        if self.fmt["quoting"] == "none":
            # (csv.reader with QUOTE_NONE did the same, but stopped on a field of 128 KiB, a
            # long document, with a traceback: "field larger than field limit")
            return [(i, line.split(delimiter) if line else [])
                    for i, line in enumerate(lines, start=1)]
        rows: List[Tuple[int, List[str]]] = []
        start = 1
        limit = csv.field_size_limit()
        # csv's field limit is the module's: raised to this file's size for this read only
        csv.field_size_limit(max(limit, sum(len(line) + 1 for line in lines)))
        reader = csv.reader((line + "\n" for line in lines), delimiter=delimiter, strict=True)
        try:
            for row in reader:
                rows.append((start, row))
                start = reader.line_num + 1
        except csv.Error as e:
            raise self.error(start, f"{e} (format.quoting csv reads double quotes as csv "
                                    f"quoting; \"quoting\": \"none\" reads them as text)") from None
        finally:
            csv.field_size_limit(limit)
        return rows

    def _tsv(self, lines: Sequence[str]) -> List[Optional[Example]]:
        numbered = self._rows(lines)
        rows = [row for _, row in numbered]
        start, header = 0, None
        if self.fmt["header"]:
            if not rows:
                raise self.error(1, "no header line")
            # (a header name is matched without its surrounding spaces: " label " was no column
            # "label", though the values of the column lose theirs)
            header, start = [name.strip() for name in rows[0]], 1
        cols = {k: self._column(k, header) for k in ("text", "label", "text_b")}
        need = max(c for c in cols.values() if c is not None)
        text_col, label_col, b_col = cols["text"], cols["label"], cols["text_b"]
        assert text_col is not None and label_col is not None    # check_format requires both
        # Every row has the header's columns (without one: most rows'): a tab inside a text made
        # one column more, so the text lost its words after the tab, or a label column read
        # a word of the text, and nothing said so.
        if header is not None:
            usual, of = len(header), "the header line has"
        else:
            counts = Counter(len(row) for row in rows if row and "".join(row).strip())
            usual, of = (counts.most_common(1)[0][0] if counts else 0), "most rows have"
        delimiter = self.fmt["delimiter"]
        inside = "a tab" if delimiter == "\t" else f"a {delimiter!r}"
        out: List[Optional[Example]] = []
        for line, row in numbered[start:]:
            if not row or not "".join(row).strip():
                continue
            if len(row) <= need:
                raise self.error(line, f"{len(row)} columns, the format needs {need + 1}")
            if len(row) != usual:
                raise self.error(line, f"{len(row)} columns, where {of} {usual}: every row needs "
                                       f"the same columns ({inside} inside a text?)")
            out.append(self.example(row[text_col], row[label_col],
                                    row[b_col] if b_col is not None else None, line))
        return out

    def _field(self, rec: dict, name, line: int):
        if isinstance(name, list):                      # several fields, joined
            return tuple(self._field(rec, n, line) for n in name)
        if name not in rec:
            raise self.error(line, f"no field {name!r}; the record has {sorted(rec)}")
        return rec[name]

    def _jsonl(self, lines: Sequence[str]) -> List[Optional[Example]]:
        out: List[Optional[Example]] = []
        for i, rec in json_objects(lines, self.error):
            text = self._field(rec, self.fmt["text"], i)
            text_b = self._field(rec, self.fmt["text_b"], i) if self.kind.pair else None
            out.append(self.example(text, self._field(rec, self.fmt["label"], i), text_b, i))
        return out


def read_examples(path: Union[str, Path], kind: str, fmt: dict, *, tokenize: bool = False,
                  max_tokens: Optional[int] = None, max_tokens_b: Optional[int] = None,
                  label_map: Optional[LabelMap] = None, skip_empty: bool = False) -> List[Example]:
    """The examples of one task file.

    Args:
        path: the file (UTF-8).
        kind: a name in :data:`~elmo.tasks.kinds.TASK_KINDS`.
        fmt: a format (module docstring), as returned by :func:`check_format`.
        tokenize: split string texts with :func:`elmo.tokenize.tokenize` (not for tagging).
        max_tokens, max_tokens_b: cut the first / second text to this many tokens.
        label_map: a preset's rule from a raw label to the label (None drops the example;
            for tagging, a ValueError refuses the tag, named with its line).
        skip_empty: drop examples with an empty text instead of raising (presets only).
    """
    path = Path(path)
    if not path.is_file():
        raise TaskDataError(f"{path}: no such task file")
    return _Reader(path, kind, fmt, tokenize, max_tokens, max_tokens_b, label_map,
                   skip_empty).read()


def whole_number_labels(path: Union[str, Path], kind: str, fmt: dict) -> List[str]:
    """The class labels of a task file that are whole numbers written with a decimal point
    (``1.0``), which are read as the whole number (``1``; they were classes of their own), as
    written, sorted: whether runs recorded before that were trained on other labels. Examples
    with an empty text are passed over; a malformed file raises :class:`TaskDataError`."""
    reader = _Reader(Path(path), kind, fmt, skip_empty=True)
    reader.read()
    return sorted(reader.whole_numbers)


def describe_files(files: Dict[str, Path],
                   digests: Optional[Mapping[str, Optional[FileDigest]]] = None) -> Dict[str, dict]:
    """split -> {"path", "bytes", "sha256"}: what results.json records of the data read.
    ``digests`` (split -> :class:`FileDigest`) are the files' hashes and sizes taken before
    they were read, which the runs' fingerprints count: hashed again here, after the read, a
    file edited meanwhile was recorded with a SHA-256 its runs' fingerprints disagreed with.
    Size and hash are always of one reading (a size taken after the read, with the hash of
    before it, described no version of an edited file)."""
    digests = digests or {}
    described = {}
    for split, p in files.items():
        digest = digests.get(split) or file_digest(Path(p))
        described[split] = {"path": str(Path(p).resolve()), "bytes": digest.size,
                            "sha256": digest.sha256}
    return described
