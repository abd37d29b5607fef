"""The word vocabulary file of the original: one word a line, ``<S>``, ``</S>``, ``<UNK>`` first,
then words by descending frequency (the order the log-uniform sampler relies on)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

BOS, EOS, UNK = "<S>", "</S>", "<UNK>"
SPECIAL = (BOS, EOS, UNK)


class Vocabulary:
    """Words and their ids. Unknown words map to ``<UNK>``."""

    def __init__(self, words: Sequence[str], counts: Optional[Sequence[int]] = None):
        words = list(words)
        missing = [w for w in SPECIAL if w not in words]
        if missing:
            raise ValueError(f"a vocabulary must contain {', '.join(SPECIAL)}; missing {', '.join(missing)}")
        if len(set(words)) != len(words):
            dup = next(w for i, w in enumerate(words) if w in words[:i])
            raise ValueError(f"the vocabulary lists {dup!r} twice")
        self.words: List[str] = words
        self.counts: Optional[List[int]] = list(counts) if counts is not None else None
        self.index: Dict[str, int] = {w: i for i, w in enumerate(words)}
        self.bos, self.eos, self.unk = self.index[BOS], self.index[EOS], self.index[UNK]

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def id(self, word: str) -> int:
        return self.index.get(word, self.unk)

    def ids(self, tokens: Iterable[str]) -> List[int]:
        return [self.index.get(t, self.unk) for t in tokens]

    @classmethod
    def load(cls, path: str | Path) -> "Vocabulary":
        """Read a vocabulary file (one word a line; a second tab-separated column is a count)."""
        words, counts = [], []
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line:
                    continue
                word, _, count = line.partition("\t")
                words.append(word)
                counts.append(int(count) if count else None)
        has_counts = all(c is not None for c in counts)
        return cls(words, counts if has_counts else None)

    def save(self, path: str | Path, with_counts: bool = False) -> None:
        """Write one word a line (the original format); ``with_counts`` adds a tab and the count."""
        from .weights import atomic_write_text

        if with_counts and self.counts is None:
            raise ValueError("this vocabulary has no counts")
        lines = ([f"{w}\t{c}" for w, c in zip(self.words, self.counts)] if with_counts else self.words)
        atomic_write_text(path, "\n".join(lines) + "\n")
