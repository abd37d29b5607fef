"""The word vocabulary file of the original: one word a line, ``<S>``, ``</S>``, ``<UNK>`` first,
then words by descending frequency (the order the log-uniform sampler relies on)."""
from __future__ import annotations

import re
from itertools import repeat
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from .checks import require_count, shown
from .text_files import decode_text, text_lines

BOS, EOS, UNK = "<S>", "</S>", "<UNK>"
SPECIAL = (BOS, EOS, UNK)
_STR = frozenset([str])


def _check_word(i: int, word) -> None:
    """Refuse word ``i`` where the file :meth:`Vocabulary.save` writes would not give it back
    at its id: an empty word was skipped by :meth:`Vocabulary.load` and a line break split a
    word in two, so every later word came back one id off (the softmax rows of a trained model
    then belonged to other words); a tab or a space is refused by ``load``, and so is a NUL
    byte; a lone surrogate cannot be written as UTF-8 (``save`` failed on a bare codec error).
    Any other whitespace (a no-break space, U+2028) is refused too: the text is split on it, so
    no token is ever such a word (``the\xa040``, a count after a no-break space, made every
    ``the`` of the text an ``<UNK>``, silently)."""
    if not isinstance(word, str):
        raise TypeError(f"a vocabulary's words are strings; word {i} is {type(word).__name__}: {shown(word)}")
    found = _NOT_IN_A_WORD.search(word)
    if word and found is None:
        return
    bad = found.group() if found is not None else ""
    what = "is empty" if not word else f"holds {bad!r}"
    if bad == "\x00":
        why = "text holds no NUL byte (a vocabulary file with one is refused), so no token is ever it"
    elif "\ud800" <= bad <= "\udfff":
        why = ("a lone surrogate, which UTF-8 cannot encode (a vocabulary file could not hold it), "
               "and character ids drop it")
    else:
        why = "a vocabulary file is one word a line, split from the text on whitespace, so no token is ever it"
    raise ValueError(f"word {i} of the vocabulary ({word!r}) {what}: {why}")


#: A character that no word holds (:func:`_check_word`): whitespace (what ``str.isspace``
#: calls whitespace, as ``\s`` matches: the text's tokens and a file's lines and fields are
#: split at it), a NUL byte and a lone surrogate.
_NOT_IN_A_WORD = re.compile(r"[\s\x00\ud800-\udfff]")
#: Whitespace inside a vocabulary file's line (its line ends aside): a count, or a word no
#: token is ever (:meth:`Vocabulary.load` looks at such a file line by line).
_WITHIN_A_LINE = re.compile(r"[^\S\n\r]")


def _check_words(words: List) -> None:
    """:func:`_check_word` for every word: a vocabulary's 50,000 words, one at a time, were half
    the time of a model's load; they are looked at together, and one at a time only where one
    of them is refused, to name the first."""
    if (all(map(isinstance, words, repeat(str))) and "" not in words
            and not _NOT_IN_A_WORD.search("".join(words))):
        return
    for i, word in enumerate(words):
        _check_word(i, word)


#: What a vocabulary file is, ending the message of each way one is not.
_FILE_FORM = "a vocabulary file is UTF-8, one word[<TAB>count] a line"


class Vocabulary:
    """Words and their ids. Unknown words map to ``<UNK>``."""

    def __init__(self, words: Sequence[str], counts: Optional[Sequence[int]] = None):
        if isinstance(words, str):  # its characters would be the words
            raise TypeError("Vocabulary expects a list of words, not a string")
        if not isinstance(words, Iterable):  # (None was "'NoneType' object is not iterable")
            raise TypeError(f"Vocabulary expects a list of words, got {type(words).__name__}: {shown(words)}")
        words = list(words)
        if counts is not None:  # (a generator of counts was "has no len()"; a string's characters)
            if isinstance(counts, (str, bytes)) or not isinstance(counts, Iterable):
                raise TypeError(f"Vocabulary's counts must be a list of whole numbers, one per word, got "
                                f"{type(counts).__name__}: {shown(counts)}")
            counts = list(counts)
        _check_words(words)
        index = dict(zip(words, range(len(words))))   # (a word listed twice is refused below)
        missing = [w for w in SPECIAL if w not in index]
        if missing:
            raise ValueError(f"a vocabulary must contain {', '.join(SPECIAL)}; missing {', '.join(missing)}")
        if len(index) != len(words):
            seen: set[str] = set()   # (a set: scanning the list for each word is quadratic)
            for dup in words:
                if dup in seen:
                    break
                seen.add(dup)
            raise ValueError(f"the vocabulary lists {dup!r} twice")
        if counts is not None and len(counts) != len(words):  # save(with_counts) would drop words
            raise ValueError(f"{len(counts)} counts for {len(words)} words")
        if counts is not None:  # (-4 or 2.5 was saved, and the file then refused by load)
            counts = [require_count(f"the count of {w!r}", c, least=0) for w, c in zip(words, counts)]
        self.words: List[str] = words
        self.counts: Optional[List[int]] = list(counts) if counts is not None else None
        self.index: Dict[str, int] = index
        self.bos, self.eos, self.unk = self.index[BOS], self.index[EOS], self.index[UNK]

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def id(self, word: str) -> int:
        return self.index.get(word, self.unk)

    def ids(self, tokens: Iterable[str]) -> List[int]:
        """The id of each token (``<UNK>``'s for a word not listed). A token that is not a
        string is a TypeError naming it: None or a number was silently ``<UNK>``."""
        if isinstance(tokens, str):  # its characters would be looked up as the words
            raise TypeError("Vocabulary.ids expects a list of tokens, not a string")
        if not isinstance(tokens, Iterable):
            raise TypeError(f"Vocabulary.ids expects a list of tokens, got {type(tokens).__name__}: {shown(tokens)}")
        tokens = tokens if isinstance(tokens, list) else list(tokens)
        if not _STR.issuperset(map(type, tokens)):  # (at C speed: batching calls this for every row)
            for j, token in enumerate(tokens):  # (numpy's str_ is a str)
                if not isinstance(token, str):
                    raise TypeError(f"Vocabulary.ids: token {j} is {type(token).__name__}, not a string: "
                                    f"{shown(token)}")
        return [self.index.get(t, self.unk) for t in tokens]

    def out_of_frequency_order(self) -> Optional[str]:
        """Where the words (the specials left aside) stop being in descending order of their
        counts, e.g. ``'cat' (40) after 'dog' (3), ids 7 and 6``; None when they are in
        order or the counts are not known. (The sampled softmax draws word k with a
        probability falling in k: in another order it over-samples rare words.)"""
        if self.counts is None:
            return None
        ranked = [(i, w, c) for i, (w, c) in enumerate(zip(self.words, self.counts)) if w not in SPECIAL]
        for (i, w, c), (j, v, d) in zip(ranked, ranked[1:]):
            if d > c:
                return f"{v!r} ({d}) after {w!r} ({c}), ids {j} and {i}"
        return None

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], min_count: int = 1,
                    max_size: Optional[int] = None) -> "Vocabulary":
        """``<S>``, ``</S>``, ``<UNK>``, then the words seen at least ``min_count`` times by
        descending count (ties alphabetical), at most ``max_size`` entries in all.

        The specials' counts are those in ``counts`` (0 when absent); ``<UNK>`` also gets the
        occurrences of the words left out. A count that is not a whole number of 0 or more is
        refused naming its word (it was summed into ``<UNK>``'s count, and the error named
        ``<UNK>``), and so is a ``max_size`` below the three specials (the vocabulary was
        larger than ``max_size``, without a word).
        """
        if not isinstance(counts, Mapping):  # (a list of pairs: "'list' object has no attribute 'items'")
            raise TypeError(f"Vocabulary.from_counts expects a mapping of words to counts (a dict or "
                            f"Counter), got {type(counts).__name__}: {shown(counts)}")
        if not all(type(count) is int and count >= 0 for count in counts.values()):  # (the usual case, fast)
            for word, count in counts.items():
                require_count(f"the count of {word!r}", count, least=0)
        min_count = require_count("min_count", min_count, least=0)
        if max_size is not None:
            max_size = require_count("max_size", max_size, least=len(SPECIAL),
                                     hint=f" (the entries {', '.join(SPECIAL)} always come first)")
        ranked = sorted(((w, c) for w, c in counts.items() if w not in SPECIAL and c >= min_count),
                        key=lambda wc: (-wc[1], wc[0]))
        if max_size is not None:
            ranked = ranked[:max_size - len(SPECIAL)]
        kept = sum(c for _, c in ranked)
        dropped = sum(c for w, c in counts.items() if w not in SPECIAL) - kept
        special_counts = [counts.get(BOS, 0), counts.get(EOS, 0), counts.get(UNK, 0) + dropped]
        return cls([*SPECIAL, *(w for w, _ in ranked)], special_counts + [c for _, c in ranked])

    @classmethod
    def load(cls, path: str | Path) -> "Vocabulary":
        """Read a vocabulary file (one word a line; a second tab-separated column is a count).

        A file that is not UTF-8 or holds a NUL byte (UTF-16 or UTF-32 text without a byte-order
        mark: it was said to lack the special entries), a count that is not a whole number of 0
        or more, counts on some lines only (they were all dropped), a word holding a space or any
        other whitespace (a count after a space or a no-break space, not a tab), a carriage return inside a line (read as a line end, it
        split a word in two) or a file without the special entries is a ValueError
        naming the file (and the line), not a bare codec or ``int()`` message nor a vocabulary
        whose words no text ever holds."""
        words: List[str] = []
        counts: List[Optional[int]] = []
        numbers: List[int] = []   # (the line of each word, to name one)
        text = decode_text(Path(path).read_bytes(), path, ValueError, expected=_FILE_FORM)

        def bad_line(number: int, what: str) -> ValueError:
            return ValueError(f"{path}: line {number}: {what}; {_FILE_FORM}")

        # (a lone \r is refused, naming its line: read as a line end, it split one word in two)
        lines = text_lines(text, bad_line)
        if not _WITHIN_A_LINE.search(text):   # (one word a line, no count: nothing to refuse
            # line by line, where the loop below took a third of a model's load)
            return cls._read(path, [line for line in lines if line], None)
        for number, line in enumerate(lines, start=1):
            if not line:
                continue
            word, _, count = line.partition("\t")
            spaced = _WITHIN_A_LINE.search(word)
            if spaced:   # (never a token of the text, which is split on whitespace: "word 12"
                # lines, or "word\xa012", trained every word as <UNK>, silently)
                what = "a space" if spaced.group() == " " else f"whitespace ({spaced.group()!r})"
                raise bad_line(number, f"the word {word!r} holds {what}, so no token of a text (split "
                                       f"on whitespace) is ever it")
            if count and not count.strip().isdecimal():
                raise bad_line(number, f"the count {count!r} of {word!r} is not a whole number")
            words.append(word)
            counts.append(int(count) if count else None)
            numbers.append(number)
        has_counts = all(c is not None for c in counts)
        if not has_counts and any(c is not None for c in counts):   # (all were dropped, silently)
            bare = counts.index(None)
            counted = next(i for i, c in enumerate(counts) if c is not None)
            raise ValueError(f"{path}: line {numbers[bare]}: {words[bare]!r} has no count, while line "
                             f"{numbers[counted]} has one; give every word a count (word<TAB>count) or none")
        return cls._read(path, words, [c for c in counts if c is not None] if has_counts else None)

    @classmethod
    def _read(cls, path: str | Path, words: List[str], counts: Optional[List[int]]) -> "Vocabulary":
        """The vocabulary of the file ``path``, whose errors name it."""
        try:
            return cls(words, counts)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def save(self, path: str | Path, with_counts: bool = False) -> None:
        """Write one word a line (the original format); ``with_counts`` adds a tab and the count."""
        from .io import atomic_write_text

        atomic_write_text(path, self.text(with_counts))

    def text(self, with_counts: bool = False) -> str:
        """What :meth:`save` writes: one word a line (with a tab and its count)."""
        lines = self.words
        if with_counts:
            if self.counts is None:
                raise ValueError("this vocabulary has no counts")
            lines = [f"{w}\t{c}" for w, c in zip(self.words, self.counts)]
        return "\n".join(lines) + "\n"
