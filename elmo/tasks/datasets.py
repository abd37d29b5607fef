"""Task data for the experiments: the fixed splits written by ``elmo data get``, as examples.

Each loader reads one corpus in this project's standard form (see :mod:`elmo.data.sources`)
and returns a :class:`TaskData`. The splits are the committed, documented ones of
:mod:`elmo.data.splits`; nothing here re-splits. A task spec may ask for a smaller part of
a split (``max_train``, ``max_dev``, ``max_test``): the part is a sample drawn with a fixed
``subset_seed`` (default 0), independent of the run seeds, so every variant and seed of an
experiment sees exactly the same examples.

| task | corpus | kind | labels | metric |
|---|---|---|---|---|
| ``pos`` | brown-pos | tagging | Brown tags reduced (``nn-tl`` -> ``nn``) | token accuracy |
| ``ner`` | twitter-ner | tagging | BIO, 10 types | span F1 (conlleval rules) |
| ``sentiment5`` | movie-sentiment | classification | 5 bins of the rating, as SST-5 | accuracy |
| ``sentiment2`` | movie-sentiment | classification | negative / positive, neutral dropped, as SST-2 | accuracy |
| ``topic`` | bbc-topic | classification | 5 BBC sections | accuracy |
| ``vitaminc`` | vitaminc | pair | True / False / Neither | accuracy |
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Union

from ..data import readers

Label = Union[str, List[str]]


@dataclass
class Example:
    """One task example.

    ``tokens`` is the sentence (the claim for pairs), ``tokens_b`` the second text of a pair
    (the evidence) or None; ``label`` is a class name, or one tag per token for tagging.
    """

    tokens: List[str]
    label: Label
    tokens_b: Optional[List[str]] = None


@dataclass
class TaskData:
    """The three splits of a task and what is needed to train and score it.

    Attributes:
        name: the task name (``pos``, ``ner``, ...).
        kind: ``tagging``, ``classification`` or ``pair``.
        metric: ``token_accuracy``, ``span_f1`` or ``accuracy`` (see :mod:`.metrics`).
        labels: the label (or tag) set, sorted, taken from the training split.
        splits: ``train``, ``dev``, ``test`` -> examples.
        source: where the data came from and how it was subsampled (for the results).
    """

    name: str
    kind: str
    metric: str
    labels: List[str]
    splits: Dict[str, List[Example]]
    source: Dict[str, object] = field(default_factory=dict)

    def sizes(self) -> Dict[str, int]:
        return {k: len(v) for k, v in self.splits.items()}


# ----------------------------------------------------------------------------- file readers
def read_sentiment_tsv(path: Path) -> List[tuple]:
    """(id, rating, tokens) rows of a standard-form sentiment file
    (``id<TAB>rating<TAB>tokenized sentence``)."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3 and parts[2].strip():
                rows.append((parts[0], float(parts[1]), parts[2].split()))
    return rows


def read_jsonl(path: Path) -> List[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ----------------------------------------------------------------------------- label rules
#: SST-5 cut points on a rating rescaled to [0, 1]: very negative <= 0.2 < negative <= 0.4
#: < neutral <= 0.6 < positive <= 0.8 < very positive.
SST5_CUTS = (0.2, 0.4, 0.6, 0.8)
SST5_NAMES = ("0-very-negative", "1-negative", "2-neutral", "3-positive", "4-very-positive")


def sentiment_class(rating: float, classes: int) -> Optional[str]:
    """The class of a -4..+4 mean rating: 5 SST-5 bins of (rating + 4) / 8, or for 2 classes
    ``negative`` (<= 0.4) / ``positive`` (> 0.6) with the neutral middle dropped (None)."""
    x = (rating + 4.0) / 8.0
    bin_ = sum(x > c for c in SST5_CUTS)
    if classes == 5:
        return SST5_NAMES[bin_]
    if classes == 2:
        return "negative" if bin_ <= 1 else "positive" if bin_ >= 3 else None
    raise ValueError(f"sentiment has 2 or 5 classes, not {classes}")


# ----------------------------------------------------------------------------- loaders
def _load_pos(folder: Path, spec: dict) -> Dict[str, List[Example]]:
    out = {}
    for split in ("train", "dev", "test"):
        sents = readers.read_tagged(folder / f"{split}.txt")
        out[split] = [Example([w for w, _ in s], [readers.reduce_brown_tag(t) for _, t in s])
                      for s in sents]
    return out


def _load_ner(folder: Path, spec: dict) -> Dict[str, List[Example]]:
    out = {}
    for split in ("train", "dev", "test"):
        sents = readers.read_conll(folder / f"{split}.conll")
        out[split] = [Example([c[0] for c in s], [c[-1] for c in s]) for s in sents]
    return out


def _sentiment_loader(classes: int):
    def load(folder: Path, spec: dict) -> Dict[str, List[Example]]:
        out = {}
        for split in ("train", "dev", "test"):
            rows = read_sentiment_tsv(folder / f"{split}.tsv")
            out[split] = [Example(toks, c) for _, r, toks in rows
                          if (c := sentiment_class(r, classes)) is not None]
        return out
    return load


def _load_topic(folder: Path, spec: dict) -> Dict[str, List[Example]]:
    """A BBC article becomes its title and first sentences, cut at ``max_tokens``
    (default 100) tokens: the biLM and the task LSTM then run on short inputs."""
    limit = int(spec.get("max_tokens", 100))
    out = {}
    for split in ("train", "dev", "test"):
        examples = []
        for rec in read_jsonl(folder / f"{split}.jsonl"):
            tokens = list(rec["title"]) + [t for s in rec["sentences"] for t in s]
            examples.append(Example(tokens[:limit], rec["label"]))
        out[split] = examples
    return out


def _load_vitaminc(folder: Path, spec: dict) -> Dict[str, List[Example]]:
    """Claim (``tokens``) and evidence (``tokens_b``, cut at ``max_tokens``, default 80)."""
    limit = int(spec.get("max_tokens", 80))
    out = {}
    for split in ("train", "dev", "test"):
        out[split] = [Example(list(r["claim"]), r["label"], list(r["evidence"])[:limit])
                      for r in read_jsonl(folder / f"{split}.jsonl")
                      if r["claim"] and r["evidence"]]
    return out


@dataclass(frozen=True)
class TaskInfo:
    corpus: str          # the name in `elmo data`
    kind: str
    metric: str
    loader: Callable[[Path, dict], Dict[str, List[Example]]]


TASKS: Dict[str, TaskInfo] = {
    "pos": TaskInfo("brown-pos", "tagging", "token_accuracy", _load_pos),
    "ner": TaskInfo("twitter-ner", "tagging", "span_f1", _load_ner),
    "sentiment5": TaskInfo("movie-sentiment", "classification", "accuracy", _sentiment_loader(5)),
    "sentiment2": TaskInfo("movie-sentiment", "classification", "accuracy", _sentiment_loader(2)),
    "topic": TaskInfo("bbc-topic", "classification", "accuracy", _load_topic),
    "vitaminc": TaskInfo("vitaminc", "pair", "accuracy", _load_vitaminc),
}


def subsample(examples: Sequence[Example], limit: Optional[int], seed: int) -> List[Example]:
    """At most ``limit`` examples, drawn with ``seed`` and kept in file order."""
    if limit is None or limit >= len(examples):
        return list(examples)
    keep = sorted(random.Random(seed).sample(range(len(examples)), int(limit)))
    return [examples[i] for i in keep]


def load_task(spec: dict) -> TaskData:
    """The data of one task spec: ``{"task": "pos", "data_dir": optional folder,
    "max_train"/"max_dev"/"max_test": optional ints, "subset_seed": 0, "name": optional, ...}``.

    ``name`` (default the task) is what results are reported under, so that one experiment
    can hold the same task at several training-set sizes (``"name": "pos-500"``).

    Without ``data_dir`` the corpus is taken from the cache, fetched first if needed
    (``elmo data get``).
    """
    name = spec["task"]
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    info = TASKS[name]
    if spec.get("data_dir"):
        folder = Path(spec["data_dir"])
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such data folder for task {name}")
    else:
        from ..data.sources import get
        folder = get(info.corpus)
    splits = info.loader(folder, spec)
    seed = int(spec.get("subset_seed", 0))
    full = {k: len(v) for k, v in splits.items()}
    for split in splits:
        splits[split] = subsample(splits[split], spec.get(f"max_{split}"), seed)
    if not splits["train"]:
        raise ValueError(f"task {name}: no training examples in {folder}")
    if info.kind == "tagging":
        labels = sorted({t for ex in splits["train"] for t in ex.label})
    else:
        labels = sorted({ex.label for ex in splits["train"]})
    source = {"corpus": info.corpus, "folder": str(folder), "full_sizes": full,
              "subset_seed": seed}
    return TaskData(spec.get("name", name), info.kind, info.metric, labels, splits, source)
