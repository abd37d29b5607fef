"""``elmo vocab build``: count a corpus and write its vocabulary and counts."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Sequence

from ..data.corpus import count_words
from ..vocab import SPECIAL, Vocabulary


def build_vocabulary_files(corpus: Sequence[str], output: str | Path, min_count: int = 1,
                           max_size: Optional[int] = None, counts_path: Optional[str | Path] = None) -> Dict:
    """Write ``output`` (one word a line) and the word<TAB>count file; return a summary."""
    counts = count_words(corpus)
    vocab = Vocabulary.from_counts(counts, min_count=min_count, max_size=max_size)
    output = Path(output)
    counts_path = Path(counts_path) if counts_path else output.with_name(output.stem + ".counts.tsv")
    vocab.save(output)
    vocab.save(counts_path, with_counts=True)
    words_total = sum(c for w, c in counts.items() if w not in SPECIAL)
    covered = sum(c for w, c in zip(vocab.words, vocab.counts) if w not in SPECIAL)
    return {"vocab": str(output), "counts": str(counts_path), "size": len(vocab),
            "covered": covered / max(words_total, 1)}
