"""A small, dependency-free tokenizer for raw text, close to the one of ELMo's training data.

The released ELMo models were trained on the 1 Billion Word Benchmark, which is tokenized
roughly like the Penn Treebank: punctuation is split off words and English clitics are split
off their host. :func:`tokenize` follows those conventions with one regular expression:

* words (letters, digits, underscores; inner hyphens kept): ``well-known`` -> ``well-known``
* numbers with inner ``. , : /`` stay whole: ``3.14``, ``1,000``, ``12:30``, ``1/2``
* abbreviations of single letters and periods stay whole: ``U.S.``, ``e.g.``
* clitics are split: ``don't`` -> ``do n't``, ``John's`` -> ``John 's``, ``we'll`` -> ``we 'll``
* ``...`` and ``--`` are single tokens; every other punctuation mark or symbol is a token
  of its own: ``(hello)!`` -> ``( hello ) !``, ``$5`` -> ``$ 5``

Quotes follow the default model's training corpus (:mod:`elmo.data.tokenize`): curly quotes
and apostrophes become ASCII first, and a straight double quote becomes ```` `` ```` where it
opens and ``''`` where it closes. Nothing else changes (no lower-casing), and sentences are
not split: one input line stays one sentence. Other apostrophes (``O'Neill``) become a token
of their own.

For Chinese (ELMoForManyLangs' models), :func:`tokenize_zh` segments words with jieba, an
optional package (``pip install 'elmo-pytorch[zh]'``) imported on first use; :func:`get_tokenizer`
picks a tokenizer by name (``elmo embed --tokenize en|zh``).
"""
from __future__ import annotations

import re
from typing import List

from .data.tokenize import CHAR_MAP, quote_token

_TOKEN = re.compile(r"""
      (?:[^\W\d_]\.){2,}(?![^\W\d_])         # abbreviations: U.S. e.g.
    | \d+(?:[.,:/]\d+)+(?!\w)                 # numbers with inner separators: 3.14 1,000 12:30
    | \w+(?=n't\b)                            # the host of n't: do|n't
    | n't\b                                   # the clitic itself
    | (?<=\w)'(?:s|re|ve|ll|d|m)\b            # clitics: 's 're 've 'll 'd 'm
    | \w+(?:-\w+)*                            # words, hyphenated words, plain numbers
    | \.{2,} | -{2,}                          # ellipsis, dashes
    | \S                                      # any other single character
""", re.VERBOSE | re.IGNORECASE)


def tokenize(text: str) -> List[str]:
    """Split raw text into tokens (see the module doc). Whitespace only separates tokens."""
    tokens: List[str] = []
    end = 0
    for match in _TOKEN.finditer(text.translate(CHAR_MAP)):
        token = match.group()
        if token == '"':
            token = quote_token(tokens[-1] if tokens else None, match.start() > end)
        tokens.append(token)
        end = match.end()
    return tokens


#: Tokenizers by name, for ``--tokenize NAME`` / ``embed_file(tokenize=NAME)``.
TOKENIZERS = ("en", "zh")


class TokenizerUnavailable(ValueError):
    """A tokenizer whose optional package is not installed (the message says how to get it)."""


def _jieba():
    """The jieba module, imported on first use, quiet."""
    try:
        import jieba
    except ImportError:
        raise TokenizerUnavailable("Chinese segmentation (--tokenize zh) needs the jieba package: "
                                   "pip install 'elmo-pytorch[zh]'") from None
    import logging
    jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict ..." on every start
    return jieba


def tokenize_zh(text: str) -> List[str]:
    """Segment raw Chinese text into words with jieba (its default dictionary and HMM for
    unknown words). Whitespace separates tokens and is dropped; nothing else changes.

    Text that is already segmented needs no tokenizer: split it on whitespace.
    """
    return [t for t in _jieba().lcut(text) if not t.isspace()]


def get_tokenizer(name):
    """The tokenizer for ``name``: ``"en"`` (or True) :func:`tokenize`, ``"zh"``
    :func:`tokenize_zh`; None or False: split on whitespace. Checks that it is usable."""
    if name is None or name is False:
        return str.split
    if name is True or name == "en":
        return tokenize
    if name == "zh":
        _jieba()
        return tokenize_zh
    raise ValueError(f"tokenize must be one of {', '.join(TOKENIZERS)} (or None), got {name!r}")
