"""The labelled data of the analysis, read from the standard form that ``elmo data get`` writes.

* Brown POS: ``brown-pos/{train,dev,test}.txt`` (``word/TAG``), tags reduced the usual way
  (:func:`elmo.data.readers.reduce_brown_tag`).
* WordNet: ``wordnet/examples.tsv`` (synset, lemmas, tokenized example) and
  ``wordnet/senses.tsv`` (sense key, synset offset, sense number, tag count, SemCor count).
* GloVe: ``glove-50d/`` (``vocab.txt`` + ``vectors.npy``).

Each loader takes a folder; :func:`corpus_dir` gives the folder of a named corpus, fetching
it first when it is not there yet.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..data import readers

Tagged = List[Tuple[str, str]]

#: WordNet's synset type digit in a sense key -> the part of speech of ``examples.tsv``
#: (adjective satellites ``5`` are adjectives ``a``, as in :func:`readers.read_wordnet_data`).
SS_TYPE = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}


def corpus_dir(name: str, fetch: bool = True) -> Path:
    """The standard-form folder of corpus ``name`` (``brown-pos``, ``wordnet``, ``glove-50d``)."""
    from ..data import sources

    if sources.is_ready(name) or not fetch:
        return sources.source_dir(name)
    return sources.get(name)


def sample(items: Sequence, n: Optional[int], seed: int) -> list:
    """At most ``n`` of ``items``, drawn with ``random.Random(seed)``, in their original order."""
    if n is None or n >= len(items):
        return list(items)
    keep = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in keep]


def brown_pos(folder: Path, split: str, max_sentences: Optional[int] = None,
              seed: int = 0) -> List[Tagged]:
    """Tagged sentences of one Brown split with reduced tags (``nn-tl`` -> ``nn``)."""
    sents = [[(w, readers.reduce_brown_tag(t)) for w, t in s]
             for s in readers.read_tagged(Path(folder) / f"{split}.txt")]
    return sample(sents, max_sentences, seed)


@dataclass(frozen=True)
class SenseExample:
    """One WordNet example sentence: its synset (``00002684-n``), lemmas and tokens."""

    synset: str
    lemmas: Tuple[str, ...]
    tokens: Tuple[str, ...]

    @property
    def pos(self) -> str:
        return self.synset.rsplit("-", 1)[1]


def wordnet_examples(folder: Path) -> List[SenseExample]:
    """All rows of ``examples.tsv``."""
    out = []
    with open(Path(folder) / "examples.tsv", encoding="utf-8") as f:
        next(f)                                                 # header
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3 and parts[2].strip():
                out.append(SenseExample(parts[0], tuple(parts[1].split(",")),
                                        tuple(parts[2].split())))
    return out


@dataclass(frozen=True)
class Sense:
    """One row of ``senses.tsv``: a lemma's sense, its synset and its SemCor count."""

    lemma: str
    pos: str
    synset: str
    sense_number: int
    semcor_count: int


def wordnet_senses(folder: Path) -> List[Sense]:
    """All rows of ``senses.tsv``, with the lemma and part of speech parsed from the sense key
    (``bank%1:14:00::`` -> ``bank``, ``n``)."""
    out = []
    with open(Path(folder) / "senses.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            key, offset, number, _tags, count = line.rstrip("\n").split("\t")
            lemma, _, rest = key.partition("%")
            pos = SS_TYPE[rest[0]]
            out.append(Sense(lemma, pos, f"{offset}-{pos}", int(number), int(count)))
    return out


def wordnet_definitions(folder: Path, synsets) -> Dict[str, str]:
    """Definitions of the given synset ids, from ``synsets.tsv``."""
    wanted, out = set(synsets), {}
    with open(Path(folder) / "synsets.tsv", encoding="utf-8") as f:
        for line in f:
            sid, _, rest = line.partition("\t")
            if sid in wanted:
                out[sid] = rest.rstrip("\n").split("\t")[-1]
    return out


def glove(folder: Path):
    """``(words, vectors (V, 50))`` of the GloVe folder."""
    return readers.read_glove(folder)
