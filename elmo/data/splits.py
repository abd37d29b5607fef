"""Fixed train / dev / test splits of the labelled tasks, as rules anyone can recompute.

* **Brown POS** is split by file and stratified by genre: within each genre (``cats.txt``)
  the files are sorted by id, and the file at position ``i`` goes to *test* when
  ``i % 10 == 0``, to *dev* when ``i % 10 == 5``, else to *train*. Every genre, even the
  six-file science fiction, has a test and a dev file; 10% of the files of each genre are test.
* **Every other task** is split by a stable hash of an identifier that keeps related items
  together: ``sha1("elmo-split-v1:" + key)`` modulo 10 gives 0 -> test, 1 -> dev, else train.
  The keys are: the tweet's position in the file (Twitter NER), the sentence id (movie-review
  sentiment), ``class/file`` (BBC topic), the Wikipedia page title (VitaminC, so the
  contrastive claim pairs on one page never straddle splits) and the article title (SQuAD
  dev: all questions on one article share a split).

  An item whose text repeats an earlier item's (NER, sentiment, BBC: :func:`splits_keeping_copies`)
  goes to that item's split instead: the pinned files hold exact copies (retweets, the same
  BBC article under two file names), and 19 of the 228 BBC test articles and 17 of the 225
  test tweets had a copy in train, which a model could score on by memory.

The LM training corpus takes no text from any labelled task except the Brown *train* files
(see :mod:`elmo.data.corpus_build`).
"""
from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Dict, Hashable, Iterable, List, Mapping, Tuple

SPLITS = ("train", "dev", "test")
_SALT = "elmo-split-v1:"


def hashed_split(key: str) -> str:
    """``train``, ``dev`` or ``test`` for an item identified by ``key`` (80/10/10)."""
    bucket = int(hashlib.sha1((_SALT + key).encode("utf-8")).hexdigest(), 16) % 10
    return "test" if bucket == 0 else "dev" if bucket == 1 else "train"


def splits_keeping_copies(items: Iterable[Tuple[str, Hashable]]) -> List[str]:
    """The split of each item, given in order as ``(key, text)``: :func:`hashed_split` of its
    key, except that an item whose ``text`` (any hashable form of its content) equals an
    earlier item's takes that item's split, so that no copy of a test item is in train."""
    first: Dict[Hashable, str] = {}
    return [first[text] if text in first else first.setdefault(text, hashed_split(key))
            for key, text in items]


def brown_file_splits(categories: Mapping[str, str]) -> Dict[str, str]:
    """File id -> split for the Brown corpus, genre-stratified (see the module docstring)."""
    by_genre: Dict[str, List[str]] = defaultdict(list)
    for fileid, genre in categories.items():
        by_genre[genre].append(fileid)
    out = {}
    for files in by_genre.values():
        for i, fileid in enumerate(sorted(files)):
            out[fileid] = "test" if i % 10 == 0 else "dev" if i % 10 == 5 else "train"
    return out
