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
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

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


#: What the error of a damaged WordNet file suggests.
WORDNET_FIX = "rewrite it with `elmo data get wordnet --force`"


def _tsv_rows(path: Path, header: bool = True) -> Iterator[Tuple[int, List[str]]]:
    """(line number, tab-separated fields) of each line of a standard-form WordNet file, after
    its header line where it has one (``header``). A file that is not UTF-8 or has no header is
    a DataError naming it (they were the codec's message naming no file, and a bare
    StopIteration)."""
    from ..data.fetch import DataError
    from ..text_files import decode_text, text_lines

    text = decode_text(path.read_bytes(), path, DataError, expected=WORDNET_FIX)
    lines = text_lines(text, lambda n, what: DataError(f"{path}:{n}: {what}; {WORDNET_FIX}"))
    if header and not lines:
        raise DataError(f"{path}: empty, not even its header line; {WORDNET_FIX}")
    for number, line in enumerate(lines[1:] if header else lines, start=2 if header else 1):
        yield number, line.split("\t")


def _damaged(path: Path, number: int, what: str) -> Exception:
    """The error of line ``number`` of a standard-form WordNet file, naming it and the fix."""
    from ..data.fetch import DataError

    return DataError(f"{path}:{number}: {what}; {WORDNET_FIX}")


def wordnet_examples(folder: Path) -> List[SenseExample]:
    """All rows of ``examples.tsv`` (synset, comma-separated lemmas, tokenized example); a row
    with no example is skipped."""
    out = []
    path = Path(folder) / "examples.tsv"
    for number, parts in _tsv_rows(path):
        if len(parts) != 3 or "-" not in parts[0]:   # (a synset without its "-pos": an IndexError later)
            raise _damaged(path, number, "not a row of synset-pos, lemmas and example (3 tab-separated fields)")
        if parts[2].strip():
            out.append(SenseExample(parts[0], tuple(parts[1].split(",")), tuple(parts[2].split())))
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
    path = Path(folder) / "senses.tsv"
    for line, parts in _tsv_rows(path):
        # (a short row was "not enough values to unpack", a sense key of no known synset type a
        # KeyError, a count that is no number int()'s message: none named the file)
        if len(parts) != 5:
            raise _damaged(path, line, f"{len(parts)} tab-separated fields, a sense row has 5")
        key, offset, number, _tags, count = parts
        lemma, _, rest = key.partition("%")
        if not lemma or rest[:1] not in SS_TYPE:
            raise _damaged(path, line, f"{key!r} is not a sense key (lemma%type:...; type 1 to 5)")
        if not (number.isdigit() and count.isdigit()):
            raise _damaged(path, line, f"the sense number {number!r} and SemCor count {count!r} must be "
                                       f"whole numbers")
        pos = SS_TYPE[rest[0]]
        out.append(Sense(lemma, pos, f"{offset}-{pos}", int(number), int(count)))
    return out


def wordnet_definitions(folder: Path, synsets) -> Dict[str, str]:
    """Definitions of the given synset ids, from ``synsets.tsv``."""
    wanted, out = set(synsets), {}
    for _, parts in _tsv_rows(Path(folder) / "synsets.tsv", header=False):   # (a header matches no id)
        if parts[0] in wanted:
            out[parts[0]] = parts[-1] if len(parts) > 1 else ""
    return out


def glove(folder: Path):
    """``(words, vectors (V, 50))`` of the GloVe folder."""
    return readers.read_glove(folder)
