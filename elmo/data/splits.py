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

The LM training corpus takes no text from any labelled task except the Brown *train* files
(see :mod:`elmo.data.corpus_build`).
"""
from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Dict, List, Mapping

SPLITS = ("train", "dev", "test")
_SALT = "elmo-split-v1:"


def hashed_split(key: str) -> str:
    """``train``, ``dev`` or ``test`` for an item identified by ``key`` (80/10/10)."""
    bucket = int(hashlib.sha1((_SALT + key).encode("utf-8")).hexdigest(), 16) % 10
    return "test" if bucket == 0 else "dev" if bucket == 1 else "train"


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
