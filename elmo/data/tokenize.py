"""Sentence splitting and PTB-style tokenization of raw English text, with spaCy.

spaCy's rule-based English tokenizer (``spacy.blank("en")``) and its ``sentencizer`` pipe need
no model download. Three adjustments bring its output close to the Penn Treebank conventions
that the labelled tasks use (Brown, the Twitter NER file):

* words joined by a hyphen stay one token (``well-known``), as in the PTB and Brown; dashes
  (``--``, en and em dashes) still split off;
* double quotes become ````` when they open and ``''`` when they close; curly quotes and
  apostrophes are first mapped to their ASCII forms;
* clitics split the PTB way, which spaCy already does: ``don't`` -> ``do n't``,
  ``John's`` -> ``John 's``.

Tokens never contain whitespace, so a sentence is written as its tokens joined by one space.
spaCy is imported lazily: importing this module costs nothing until a tokenizer is built.
"""
from __future__ import annotations

import re

from typing import Iterable, Iterator, List, Tuple

#: Characters mapped before tokenization: curly quotes and apostrophes, odd spaces.
CHAR_MAP = str.maketrans({
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"',
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u00b4": "'",
    "\u00a0": " ", "\u2009": " ", "\u200b": " ", "\ufeff": " ",
})

#: spaCy's infix alternatives between letters; the plain hyphen is taken out of them.
_HYPHEN_INFIX = "(?:-|–|—|--|---|——|~)"
_DASH_INFIX = "(?:–|—|--|---|——|~)"


_DASHES = re.compile(r"(\u2014|--+)")


def normalize(text: str) -> str:
    """Map curly quotes to ASCII, set em dashes and ``--`` apart with spaces (so that
    ``word\u2014"Quote`` splits), and collapse every run of whitespace to one space."""
    return " ".join(_DASHES.sub(r" \1 ", text.translate(CHAR_MAP)).split())


_CLITIC = re.compile(r"^(.+?)(n't|N'T|'s|'S|'re|'RE|'ll|'LL|'ve|'VE|'d|'D|'m|'M)$")


def split_clitics(tokens: Iterable[str]) -> List[str]:
    """Split clitics off already-tokenized text the PTB way (``isn't`` -> ``is n't``,
    ``Atlanta's`` -> ``Atlanta 's``), for corpora such as Brown that keep them attached."""
    out: List[str] = []
    for t in tokens:
        m = _CLITIC.match(t)
        if m and any(c.isalnum() for c in m.group(1)):
            out.extend(m.groups())
        else:
            out.append(t)
    return out


class Tokenizer:
    """Split raw text into sentences of PTB-style tokens.

    >>> tok = Tokenizer()
    >>> tok.sentences('I don\\'t know. He said "hi."')
    [['I', 'do', "n't", 'know', '.'], ['He', 'said', '``', 'hi', '.', "''"]]
    """

    def __init__(self) -> None:
        try:
            import spacy
            from spacy.util import compile_infix_regex
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("tokenizing raw text needs spaCy: pip install 'elmo-pytorch[data]' "
                              "(or pip install spacy)") from e
        nlp = spacy.blank("en")
        infixes = [p.replace(_HYPHEN_INFIX, _DASH_INFIX) for p in nlp.Defaults.infixes]
        nlp.tokenizer.infix_finditer = compile_infix_regex(infixes).finditer
        nlp.add_pipe("sentencizer")
        nlp.max_length = 5_000_000
        self.nlp = nlp

    def sentences(self, text: str) -> List[List[str]]:
        """The sentences of one text, each a list of tokens."""
        return next(self.pipe([text]))

    def tokens(self, text: str) -> List[str]:
        """All tokens of one text, without splitting it into sentences."""
        return [t for sent in self.sentences(text) for t in sent]

    def spans(self, text: str) -> List[Tuple[str, int, int]]:
        """``(token, start, end)`` character spans in ``text`` itself (no whitespace
        collapsing, so answer offsets such as SQuAD's stay valid)."""
        doc = self.nlp(text.translate(CHAR_MAP))
        texts = _ptb_tokens(doc[:])
        return [(t, tok.idx, tok.idx + len(tok)) for t, tok in zip(texts, doc)
                if not tok.is_space]

    def pipe(self, texts: Iterable[str], batch_size: int = 256) -> Iterator[List[List[str]]]:
        """Tokenize many texts lazily; yields one list of sentences per text, in order."""
        for doc in self.nlp.pipe((normalize(t) for t in texts), batch_size=batch_size):
            yield [_ptb_tokens(sent) for sent in doc.sents if len(sent)]


_OPENERS = ("(", "[", "{", "--", "\u2014")


def quote_token(previous: "str | None", space_before: bool) -> str:
    """A straight double quote as PTB writes it: `` where it opens (at the start, after
    whitespace or an opening bracket or dash), '' where it closes."""
    return "``" if previous is None or space_before or previous in _OPENERS else "''"


def _ptb_tokens(span) -> List[str]:
    """Token texts of a spaCy span, with straight double quotes turned into `` and ''."""
    out = []
    doc = span.doc
    for tok in span:
        text = tok.text
        if text == '"':
            prev = doc[tok.i - 1] if tok.i > 0 else None
            text = quote_token(None if prev is None else prev.text,
                               prev is not None and (bool(prev.whitespace_) or prev.is_space))
        out.append(text)
    return out
