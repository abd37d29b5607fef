"""Task data for the experiments, as examples: your own files, or a built-in task.

A built-in task is a preset of the file mechanism of :mod:`.files`: it reads one corpus in
this project's standard form (see :mod:`elmo.data.sources`) with a fixed format and label
rule. Its splits are the committed, documented ones of :mod:`elmo.data.splits`; nothing here
re-splits them (a task from your own files without a dev file is the one exception, see
:func:`load_task`). A task spec may ask for a smaller part of
a split (``max_train``, ``max_dev``, ``max_test``): the part is a sample drawn with a fixed
``subset_seed`` (default 0), independent of the run seeds, so every variant and seed of an
experiment sees exactly the same examples.

| task | corpus | kind | labels | metric |
|---|---|---|---|---|
| ``pos`` | brown-pos | tagging | Brown tags reduced (``nn-tl`` -> ``nn``) | token accuracy |
| ``ner`` | twitter-ner | tagging | BIO, 10 types | span F1 (conlleval rules) |
| ``sentiment5`` | movie-sentiment | classification | 5 bins of the rating, as SST-5 | accuracy |
| ``sentiment2`` | movie-sentiment | classification | negative / positive, neutral dropped, as SST-2 | accuracy |
| ``sentiment_rating`` | movie-sentiment | regression | the mean rating itself, -4 to +4 | Pearson r (and Spearman rho) |
| ``topic`` | bbc-topic | classification | 5 BBC sections | accuracy |
| ``vitaminc`` | vitaminc | pair | True / False / Neither | accuracy |
| ``squad`` | squad-dev | span_qa | the answers' token spans in the context | F1 (and exact match), SQuAD v1.1 |
"""
from __future__ import annotations

import math
import random
import string
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union, cast

from ..data import readers

if TYPE_CHECKING:
    from .files import FileDigest


@dataclass(frozen=True)
class Answer:
    """One gold answer of a ``span_qa`` example: its original ``text`` and the token span
    ``[start, end)`` of the context (``tokens_b``) it covers, counted in the whole context
    (before any ``max_tokens_b`` cut)."""

    text: str
    start: int
    end: int


#: A class name, one tag per token, a graded target, or a span_qa example's gold answers (a
#: tuple, never a list: a list is tags).
Label = Union[str, List[str], float, Tuple[Answer, ...]]


@dataclass(frozen=True)
class SourceText:
    """A text as written and the character span ``[start, end)`` in it of each of its tokens:
    a ``span_qa`` answer is read back from the context as written, not from its tokens."""

    text: str
    offsets: Tuple[Tuple[int, int], ...]

    @classmethod
    def split(cls, text: str, tokenize: bool) -> Tuple[List[str], "SourceText"]:
        """``text``'s tokens (split on whitespace, or by :func:`elmo.tokenize.tokenize`) and
        where each lies in it."""
        from ..tokenize import token_spans, whitespace_spans
        spans = token_spans(text) if tokenize else whitespace_spans(text)
        return [t for t, _, _ in spans], cls(text, tuple((a, b) for _, a, b in spans))

    def span(self, start: int, end: int) -> Tuple[str, int, int]:
        """The text from token ``start``'s first character to token ``end - 1``'s last, and
        those character offsets (``""`` and the position there for an empty span)."""
        if end <= start:
            at = self.offsets[start][0] if start < len(self.offsets) else len(self.text)
            return "", at, at
        a, b = self.offsets[start][0], self.offsets[end - 1][1]
        return self.text[a:b], a, b


@dataclass
class Example:
    """One task example.

    ``tokens`` is the sentence (the claim for pairs, the question for ``span_qa``),
    ``tokens_b`` the second text of a pair (the evidence, the context) or None; ``label`` is a
    class name, one tag per token for tagging, a float target for a graded kind
    (``regression``, ``pair_regression``), or a tuple of :class:`Answer` for ``span_qa``.
    ``source_b`` is a ``span_qa`` context given as a string, as written (None for one given as
    tokens): a predicted span's text is read from it.
    """

    tokens: List[str]
    label: Label
    tokens_b: Optional[List[str]] = None
    source_b: Optional[SourceText] = None


@dataclass
class TaskData:
    """The three splits of a task and what is needed to train and score it.

    Attributes:
        name: the task name (``pos``, ``ner``, ...).
        kind: a name in :data:`~elmo.tasks.kinds.TASK_KINDS`.
        metric: ``token_accuracy``, ``span_f1``, ``accuracy``, ``pearson`` or ``spearman``
            (see :mod:`.metrics`).
        labels: the label (or tag) set, sorted, taken from the training split (empty for a
            graded kind, which has no classes).
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

    def describe_sizes(self) -> str:
        """The split sizes for the log and ``--plan``: ``train 270, dev 30, test 100 examples``."""
        return ", ".join(f"{split} {n:,}" for split, n in self.sizes().items()) + " examples"

    def unseen_labels(self) -> Dict[str, Dict[str, int]]:
        """split -> {label: how many examples (for tags: tokens) have it} for the labels of the
        splits other than train that no training example has (none: ``{}``). The model cannot
        predict such a label, so each counts as an error when scored. A graded task's targets
        are numbers, not labels, and a span_qa task's answers spans of their context: none is
        unseen."""
        from .kinds import task_kind
        if not task_kind(self.kind).classes:
            return {}
        known = set(self.labels)
        out: Dict[str, Dict[str, int]] = {}
        for split, examples in self.splits.items():
            if split == "train":
                continue
            counts = Counter(label for ex in examples
                             for label in (ex.label if isinstance(ex.label, list) else [cast(str, ex.label)])
                             if label not in known)
            if counts:
                out[split] = dict(sorted(counts.items()))
        return out

    def targets(self) -> Optional[Dict[str, float]]:
        """A graded task's training targets: ``{"mean", "std", "min", "max"}`` (std as the
        model standardises by it); None for a task with labels."""
        from .kinds import target_scale, task_kind
        if not task_kind(self.kind).graded:
            return None
        values = [cast(float, ex.label) for ex in self.splits["train"]]
        mean, std = target_scale(self.splits["train"])
        return {"mean": mean, "std": std, "min": min(values), "max": max(values)}

    def describe_labels(self) -> str:
        """``5 labels``, or for a graded task its training targets' range, mean and std, or
        for a span_qa task what its answers are."""
        from .kinds import task_kind
        if task_kind(self.kind).span_answers:
            return "answers as token spans of the context"
        t = self.targets()
        if t is None:
            return f"{len(self.labels)} labels"
        std = t["std"]
        return (f"numeric targets from {_to_spread(t['min'], std)} to {_to_spread(t['max'], std)} "
                f"(training mean {_to_spread(t['mean'], std)}, std {std:.4g})")

    def in_train(self) -> Dict[str, int]:
        """split -> how many of its examples have a text (a pair: both texts) that a training
        example has, for the splits other than train where there are any (none: ``{}``).

        A dev or test file that is the training file, or holds its texts, scores what the
        model was trained on: its numbers were shown as any other split's, and nothing said so."""
        def text(ex: Example):
            return tuple(ex.tokens), None if ex.tokens_b is None else tuple(ex.tokens_b)
        seen = {text(ex) for ex in self.splits.get("train", [])}
        return self._count_beside_train(lambda ex: text(ex) in seen)

    def _count_beside_train(self, counts: Callable[[Example], bool]) -> Dict[str, int]:
        """split other than train -> how many of its examples ``counts`` holds for, where any."""
        out = {split: sum(map(counts, examples)) for split, examples in self.splits.items() if split != "train"}
        return {split: n for split, n in out.items() if n}

    def describe_in_train(self) -> Optional[str]:
        """A line naming :meth:`in_train` for the log, or None when no split shares a text."""
        shared = self.in_train()
        if not shared:
            return None
        sizes = self.sizes()
        parts = [f"{split} {'all ' if n == sizes[split] else ''}{n} of {sizes[split]}"
                 for split, n in shared.items()]
        return (f"{self.name}: examples whose text is also a training text (their scores "
                f"measure what the model was trained on): {'; '.join(parts)}")

    def answers_past_cut(self) -> Dict[str, int]:
        """A span_qa task's splits other than train -> how many of the questions scored there
        (after ``max_dev`` / ``max_test``) have no gold answer inside the context as read (cut
        at ``max_tokens_b``), where there are any; ``{}`` for none or another kind. The model's
        span lies inside what it read, so such a question rarely scores: it pulls the split's
        F1 and exact match down, and nothing in the scores says so."""
        from .kinds import first_answer_inside, task_kind
        if not task_kind(self.kind).span_answers:
            return {}
        return self._count_beside_train(lambda ex: first_answer_inside(ex) is None)

    def describe_answers_past_cut(self) -> Optional[str]:
        """A line naming :meth:`answers_past_cut` for the log, or None when there are none."""
        past = self.answers_past_cut()
        if not past:
            return None
        sizes = self.sizes()
        parts = [f"{split} {n} of {sizes[split]}" for split, n in past.items()]
        return (f"{self.name}: questions whose every gold answer lies past the context's cut "
                f"(max_tokens_b), scored though the model cannot point at them: {'; '.join(parts)}")

    def describe_answers_off_span(self) -> Optional[str]:
        """A line naming the gold answers whose text is not their span's tokens (counted by
        :func:`_count_answers_off_span` in the whole files), or None when there are none."""
        off = cast(Dict[str, Any], self.source.get("answers_off_span") or {})
        if not off:
            return None
        parts = [f"{split} {n} of {inside}" for split, (n, inside) in
                 ((k, v) for k, v in off.items() if k != "example")]
        return (f"{self.name}: gold answers whose text is not that of the context tokens at their span "
                f"(training points at the span, the scores compare the text): {'; '.join(parts)}; "
                f"e.g. {off['example']}")

    def describe_unseen(self) -> Optional[str]:
        """A line naming :meth:`unseen_labels` for the log, or None when there are none."""
        unseen = self.unseen_labels()
        if not unseen:
            return None
        from .kinds import task_kind
        what = "token" if task_kind(self.kind).token_labels else "example"
        parts = [f"{split} " + ", ".join(f"{label!r} ({n} {what}{'s' if n != 1 else ''})"
                                         for label, n in list(counts.items())[:10])
                 + (f" and {len(counts) - 10} more" if len(counts) > 10 else "")
                 for split, counts in unseen.items()]
        return (f"{self.name}: labels no training example has, which the model cannot predict "
                f"(each is scored as an error): {'; '.join(parts)}")


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


# ----------------------------------------------------------------------------- presets
@dataclass(frozen=True)
class TaskInfo:
    """A built-in task: a preset of the generic file mechanism (:mod:`.files`) on the
    standard form of an ``elmo data`` corpus. ``files`` maps split -> file name in the corpus
    folder; ``label_map`` and ``options`` (spec -> reader options) are the preset's rules.
    ``tokenized``: the corpus's texts are raw prose that ``elmo data`` split with
    :mod:`elmo.tokenize`'s rules (not a corpus's own tokens, as Brown's and the tweets'), so a
    saved model splits a new raw text so too (:func:`splits_raw_text`)."""

    corpus: str          # the name in `elmo data`
    kind: str
    metric: str
    files: Dict[str, str]
    format: dict
    label_map: Optional[Callable[[str], Optional[str]]] = None
    options: Callable[[dict], dict] = lambda spec: {}
    tokenized: bool = False


def _splits(ext: str) -> Dict[str, str]:
    return {s: f"{s}.{ext}" for s in ("train", "dev", "test")}


def _rating_class(classes: int) -> Callable[[str], Optional[str]]:
    def rule(text: str) -> Optional[str]:
        try:
            rating = float(text)
        except ValueError:
            raise ValueError("the rating is not a number") from None
        return sentiment_class(rating, classes)
    return rule


TASKS: Dict[str, TaskInfo] = {
    "pos": TaskInfo("brown-pos", "tagging", "token_accuracy", _splits("txt"),
                    {"type": "word_tag", "separator": "/"}, readers.reduce_brown_tag),
    "ner": TaskInfo("twitter-ner", "tagging", "span_f1", _splits("conll"),
                    {"type": "conll", "word": 0, "label": -1}),
    "sentiment5": TaskInfo("movie-sentiment", "classification", "accuracy", _splits("tsv"),
                           {"type": "tsv", "text": 2, "label": 1, "header": False},
                           _rating_class(5), lambda spec: {"skip_empty": True}, tokenized=True),
    "sentiment2": TaskInfo("movie-sentiment", "classification", "accuracy", _splits("tsv"),
                           {"type": "tsv", "text": 2, "label": 1, "header": False},
                           _rating_class(2), lambda spec: {"skip_empty": True}, tokenized=True),
    "sentiment_rating": TaskInfo("movie-sentiment", "regression", "pearson", _splits("tsv"),
                                 {"type": "tsv", "text": 2, "label": 1, "header": False},
                                 options=lambda spec: {"skip_empty": True}, tokenized=True),
    # A BBC article becomes its title and first sentences, cut at max_tokens (default 100):
    # the biLM and the task LSTM then run on short inputs.
    "topic": TaskInfo("bbc-topic", "classification", "accuracy", _splits("jsonl"),
                      {"type": "jsonl", "text": ["title", "sentences"], "label": "label"},
                      options=lambda spec: {"max_tokens": int(spec.get("max_tokens", 100))}, tokenized=True),
    # Claim and evidence, the evidence cut at max_tokens (default 80).
    "vitaminc": TaskInfo("vitaminc", "pair", "accuracy", _splits("jsonl"),
                         {"type": "jsonl", "text": "claim", "text_b": "evidence", "label": "label"},
                         options=lambda spec: {"max_tokens_b": int(spec.get("max_tokens", 80)),
                                               "skip_empty": True}, tokenized=True),
    # Question and context, the context cut at max_tokens (default 300, past 95% of SQuAD's
    # paragraphs): training drops a question whose answers all lie past the cut, and dev and
    # test keep it, scored as any question (see _drop_answers_past_cut).
    "squad": TaskInfo("squad-dev", "span_qa", "f1", _splits("jsonl"),
                      {"type": "jsonl", "text": "question", "text_b": "context", "label": "answers"},
                      options=lambda spec: {"max_tokens_b": int(spec.get("max_tokens", 300))},
                      tokenized=True),
}

#: Keys of a task spec read from your own files (see :func:`load_task`).
FILE_TASK_KEYS = {"task", "name", "metric", "format", "files", "tokenize", "max_tokens",
                  "max_tokens_b", "dev_fraction", "max_train", "max_dev", "max_test",
                  "subset_seed", "model", "train"}
PRESET_KEYS = {"task", "name", "data_dir", "max_tokens", "max_train", "max_dev", "max_test",
               "subset_seed", "model", "train"}
#: Share of the training file held out as dev when a task has no dev file.
DEFAULT_DEV_FRACTION = 0.1


def subsample(examples: Sequence[Example], limit: Optional[int], seed: int) -> List[Example]:
    """At most ``limit`` examples, drawn with ``seed`` and kept in file order."""
    if limit is None or limit >= len(examples):
        return list(examples)
    keep = sorted(random.Random(seed).sample(range(len(examples)), int(limit)))
    return [examples[i] for i in keep]


def load_task(spec: dict, digests: Optional[Mapping[str, Optional[FileDigest]]] = None) -> TaskData:
    """The data of one task spec: a built-in task (a preset) or your own files.

    Built-in: ``{"task": "pos", "data_dir": optional folder, "max_train"/"max_dev"/"max_test":
    optional ints, "subset_seed": 0, "name": optional}``. Without ``data_dir`` the corpus is
    taken from the cache, fetched first if needed (``elmo data get``).

    Your own files: ``{"task": "tagging" | "classification" | "pair" | "regression" |
    "pair_regression" | "span_qa", "name": ...,
    "metric": optional, "format": {...}, "files": {"train": path, "dev": optional path,
    "test": path, "<other name>": another test set}, "tokenize": false, "dev_fraction": 0.1}``
    (formats: :mod:`.files`). Without a dev file, ``dev_fraction`` of the training file is
    held out as dev (a fixed sample drawn with ``subset_seed``); 0 trains without dev and
    without early stopping (every epoch runs, the last one is kept).

    ``name`` (default the task) is what results are reported under, so that one experiment
    can hold the same task at several training-set sizes (``"name": "pos-500"``).
    Paths are used as given (:func:`elmo.tasks.experiment_config.load_config` makes them relative to
    the config file). ``digests`` (split -> SHA-256 and size of its file, taken before the read)
    are recorded as the files' in ``source``, rather than hashing them again after the read (see
    :func:`.files.describe_files`).
    """
    from .files import TaskDataError
    problem = task_entry_problem(spec)
    if problem:
        raise TaskDataError(problem)
    name = spec.get("task")
    assert isinstance(name, str)    # task_entry_problem refused a missing or unknown task
    if name in TASKS:
        splits, source, kind, metric = _load_preset(spec, digests)
    else:
        splits, source, kind, metric = _load_files(spec, digests)
    from .kinds import task_kind
    if task_kind(kind).span_answers:
        _count_answers_off_span(splits, source)
        _drop_answers_past_cut(splits, source)
    seed = int(spec.get("subset_seed", 0))
    full = {k: len(v) for k, v in splits.items()}
    full_labels = task_kind(kind).label_set(splits["train"])
    for split in splits:
        splits[split] = subsample(splits[split], spec.get(f"max_{split}"), seed)
    if not splits["train"]:
        raise TaskDataError(f"task {spec.get('name', name)}: no training examples in "
                            f"{source['files']['train']['path']}")
    if metric == "span_f1":
        _check_spans_to_score(spec, splits, source, full)
    labels = task_kind(kind).label_set(splits["train"])
    if task_kind(kind).classes:
        _check_labels_to_score(spec, splits, source, full, labels, metric)
    if task_kind(kind).graded:
        _check_targets_vary(spec, kind, splits["train"], source, full["train"], seed)
    lost = sorted(set(full_labels) - set(labels))
    if len(labels) < 2 and lost:
        # the whole training set had two or more (a file task's is checked when read): a
        # max_train sample of one label trained a model that answers one thing whatever it reads
        raise TaskDataError(
            f"task {spec.get('name', name)}: the {len(splits['train'])} training examples kept "
            f"by max_train {spec['max_train']} (of {full['train']}, subset_seed {seed}) all have "
            f"the {'tag' if task_kind(kind).token_labels else 'label'} {labels[0]!r}; the sample "
            f"lost {', '.join(map(repr, lost))}: raise max_train or change subset_seed")
    source.update(full_sizes=full, subset_seed=seed)
    return TaskData(spec.get("name", name), kind, metric, labels, splits, source)


def splits_raw_text(spec: Mapping[str, Any]) -> bool:
    """Whether a task's texts are words split by :mod:`elmo.tokenize` (``"tokenize": true``,
    or a built-in task whose corpus ``elmo data`` tokenized), so that a saved model splits a
    new raw text so (``great film!`` -> ``great film !``) rather than on spaces."""
    name = spec.get("task")
    return bool(spec.get("tokenize")) or (isinstance(name, str) and name in TASKS and TASKS[name].tokenized)


def text_limits(spec: Mapping[str, Any]) -> Dict[str, Optional[int]]:
    """``{"max_tokens", "max_tokens_b"}``: how many tokens of each text (text, text_b) a task
    spec's examples keep (its own keys, or a preset's rule and default); None keeps all. A
    saved model cuts new texts so too (:mod:`.saved`), as its test set was cut."""
    name = spec.get("task")
    options = TASKS[name].options(dict(spec)) if name in TASKS else spec
    return {k: int(options[k]) if options.get(k) else None for k in ("max_tokens", "max_tokens_b")}


def _drop_answers_past_cut(splits: Dict[str, List[Example]], source: dict) -> None:
    """A span_qa task's questions none of whose answers lies inside the context as read (cut at
    ``max_tokens_b``): dropped from training (the model cannot point at the answer, so the
    loss has nothing to learn from) and counted, per split, in ``source["answers_past_cut"]``.
    Dev and test keep them: they are scored as any question (the model's span, which lies
    inside what it read, rarely matches), so the scores stay those of the whole split."""
    from .kinds import first_answer_inside
    counts = {split: sum(first_answer_inside(ex) is None for ex in examples)
              for split, examples in splits.items()}
    if splits["train"] and counts["train"] == len(splits["train"]):
        from .files import TaskDataError
        raise TaskDataError(f"{source['files']['train']['path']}: every training question's answers lie "
                            f"past the context's cut (a built-in task's max_tokens, max_tokens_b of your "
                            f"own files); raise it")
    splits["train"] = [ex for ex in splits["train"] if first_answer_inside(ex) is not None]
    source["answers_past_cut"] = {**counts, "dropped_from_train": counts["train"]}


def _span_key(text: str) -> str:
    """``text`` lower-cased without spaces or punctuation (ASCII or any Unicode P* category):
    an answer's original text and its span's tokens agree when their keys do, whatever the
    tokenizer split or respelled (``3-1`` / ``3 - 1``, curly quotes / ``\u0060\u0060``)."""
    return "".join(c for c in text.lower() if not (c.isspace() or c in string.punctuation
                                                   or unicodedata.category(c).startswith("P")))


def _count_answers_off_span(splits: Dict[str, List[Example]], source: dict) -> None:
    """Count, per split, the gold answers inside the context as read whose text is not that of
    the tokens at their span, in ``source["answers_off_span"]`` (``{split: [off, inside]}`` and
    ``example``, the first one), where there are any: training points at the span while the
    scores compare the text, so a span counted in other tokens than the ones read (a file's
    own words under ``"tokenize": true``, an inclusive end) trained the model on other words
    without a word. Every training answer off its span is refused naming the file."""
    counts: Dict[str, List[int]] = {}
    first = None
    for split, examples in splits.items():
        off = inside = 0
        for ex in examples:
            context = ex.tokens_b or []
            for a in cast(Tuple[Answer, ...], ex.label):
                if a.end > len(context):
                    continue
                inside += 1
                span = " ".join(context[a.start:a.end])
                if _span_key(a.text) != _span_key(span):
                    off += 1
                    first = first or f"{split}: {a.text!r} at [{a.start}, {a.end}) reads {span!r}"[:200]
        if off:
            counts[split] = [off, inside]
    if "train" in counts and counts["train"][0] == counts["train"][1]:
        from .files import TaskDataError
        raise TaskDataError(f"{source['files']['train']['path']}: no training answer's text is that of "
                            f"the context tokens at its span ({first}); start and end count the context's "
                            f"tokens as read (after \"tokenize\"), from 0, end exclusive")
    if counts:
        source["answers_off_span"] = {**counts, "example": first}


def _split_where(spec: dict, split: str, kept: int, source: dict, full: Dict[str, int]) -> Tuple[str, str]:
    """The file a split was read from (dev held out of the training file says so) and, where
    ``max_<split>`` drew a sample of it, `` (the K of N kept by max_<split> M)``; for errors."""
    files = source.get("files") or {}
    where = files[split]["path"] if split in files else \
        f"{files['train']['path']} (the dev examples held out of it)"
    limit = spec.get(f"max_{split}")
    sample = (f" (the {kept} of {full[split]} kept by max_{split} {limit})"
              if limit is not None and limit < full[split] else "")
    return where, sample


def _check_labels_to_score(spec: dict, splits: Dict[str, List[Example]], source: dict,
                           full: Dict[str, int], labels: List[str], metric: str) -> None:
    """A dev or test set none of whose labels (tags; under span_f1 the entity types of its gold
    spans) a training example has scores 0 whatever the model predicts, since the model only
    gives training labels: such a test score was shown as a real 0.00 and such a dev set kept
    the first epoch (labels written otherwise, ``0`` / ``1`` against ``neg`` / ``pos``, ``NN``
    against ``nn``, a wrong column). Refused, naming the file; one label in common is scored
    (the others count as errors, named by :meth:`TaskData.unseen_labels`)."""
    from .files import TaskDataError
    from .metrics import bio_spans
    spans = metric == "span_f1"
    known = {t.partition("-")[2] for t in labels if t != "O"} if spans else set(labels)
    for split, examples in splits.items():
        if split == "train" or not examples:
            continue
        tagged = [ex.label if isinstance(ex.label, list) else [cast(str, ex.label)] for ex in examples]
        found = Counter(kind for tags in tagged for kind, _, _ in bio_spans(tags)) if spans else \
            Counter(t for tags in tagged for t in tags)
        if not found or set(found) & known:      # (no span at all: _check_spans_to_score's case)
            continue
        where, sample = _split_where(spec, split, len(examples), source, full)
        shown = ", ".join(f"{k!r} ({n})" for k, n in sorted(found.items())[:5]) + \
            (f" and {len(found) - 5} more" if len(found) > 5 else "")
        what, known_as = ((f"{split} spans' entity types", "one the training tags have") if spans else
                          (f"{split} tags", "a training tag") if isinstance(examples[0].label, list) else
                          (f"{split} labels", "a training label"))
        raise TaskDataError(f"{where}: none of the {what}{sample} ({shown}) is {known_as}: {metric} is 0 "
                            f"whatever the model predicts; write them as the training file does (is "
                            f"format.label the right column or field?)")


def _check_spans_to_score(spec: dict, splits: Dict[str, List[Example]], source: dict,
                          full: Dict[str, int]) -> None:
    """Under span_f1, a dev or test set without a single entity scores 0 whatever the model
    tags (there is no gold span to find, and any span it finds is wrong): such a test score
    was reported as 0.00, and such a dev set kept the first epoch. Refused, naming the file."""
    from .files import TaskDataError
    for split, examples in splits.items():
        if split == "train" or not examples or any(t != "O" for ex in examples for t in cast(List[str], ex.label)):
            continue
        where, sample = _split_where(spec, split, len(examples), source, full)
        raise TaskDataError(f"{where}: no entity in the {split} examples{sample}: span F1 is 0 "
                            f"whatever the model tags; give a {split} set with entities, or use "
                            f"metric token_accuracy")


def _to_spread(value: float, spread: float) -> str:
    """``value`` with 4 significant digits at the size of ``spread`` (> 0): targets 3e6 + N(0, 1)
    ranged "from 3e+06 to 3e+06" with ":g", as if constant; now from 2999997.3 to 3000003.2."""
    if value == 0 or not spread > 0:
        return f"{value:.4g}"
    digits = 4 + max(0, math.floor(math.log10(abs(value))) - math.floor(math.log10(spread)))
    return f"{value:.{min(digits, 17)}g}"


def _check_targets_vary(spec: dict, kind: str, train: List[Example], source: dict, full: int,
                        seed: int) -> None:
    """A graded task's training targets must differ: a constant one has no spread to
    standardise by, and a model trained on it predicts one number whatever it reads (each
    correlation is then undefined). Refused, naming the file (and the max_train sample)."""
    from .files import TaskDataError
    from .kinds import standardised_distinct
    values = {cast(float, ex.label) for ex in train}        # (graded: numbers, see kinds)
    limit = spec.get("max_train")
    sample = (f" (the {len(train)} of {full} kept by max_train {limit}, subset_seed {seed})"
              if limit is not None and limit < full else "")
    where = source['files']['train']['path']
    if len(values) < 2:
        raise TaskDataError(f"{where}: every training target{sample} is {next(iter(values))!r}; a {kind} "
                            f"task needs targets that differ (is format.label the right column or field?)")
    if standardised_distinct([cast(float, ex.label) for ex in train]) < 2:
        # (the model learnt nothing and every correlation was undefined: 0 and 5e-324 have no
        # spread that float64 can divide by)
        raise TaskDataError(f"{where}: the training targets{sample} ({min(values)!r} to {max(values)!r}) "
                            f"are all one number once standardised by their mean and std and "
                            f"rounded to float32, as the model trains on them; rescale them")


def task_entry_problem(spec: Mapping[str, Any]) -> Optional[str]:
    """What is wrong with a task entry's task or keys, or None: an unknown task, or a key that
    is not one of its kind's (``FILE_TASK_KEYS``, ``PRESET_KEYS``). The experiment config is
    checked with it when read (a misspelt key is refused before anything runs, also by
    ``--print-config``), and :func:`load_task` again."""
    from .kinds import TASK_KINDS
    name = spec.get("task")
    if isinstance(name, str) and name in TASK_KINDS:
        known, what = FILE_TASK_KEYS, "a task from your own files"
    elif isinstance(name, str) and name in TASKS:
        known, what = PRESET_KEYS, f"the built-in task {name}"
    else:
        return (f"unknown task {name!r}; built-in: {', '.join(TASKS)}; or a kind "
                f"with your own files: {', '.join(TASK_KINDS)}")
    unknown = set(map(str, spec)) - known
    if unknown:
        return (f"task {spec.get('name', name)!r}: unknown keys {sorted(unknown)} for {what}; "
                f"known: {sorted(known)}")
    return None


def _load_preset(spec: dict, digests: Optional[Mapping[str, Optional[FileDigest]]] = None):
    from .files import TaskDataError, check_format, describe_files, read_examples
    name = spec["task"]
    info = TASKS[name]
    corpus: Optional[str] = None
    if spec.get("data_dir"):
        folder = Path(spec["data_dir"])
        if not folder.is_dir():
            raise TaskDataError(f"{folder}: no such data folder for task {name}")
    else:
        from ..data.sources import get
        folder, corpus = get(info.corpus), info.corpus
    paths = {split: folder / file for split, file in info.files.items()}
    options = info.options(spec)
    fmt = check_format(info.format, info.kind, f"task {name}")
    splits = {split: read_examples(path, info.kind, fmt, label_map=info.label_map,
                                   **options)
              for split, path in paths.items()}
    source = {"preset": name, "corpus": corpus, "folder": str(folder), "format": info.format,
              "files": describe_files(paths, digests), "dev": "file"}
    return splits, source, info.kind, info.metric


def _bio_tag_for_span_f1(tag: str) -> str:
    from .metrics import bio_tag
    try:
        return bio_tag(tag)
    except ValueError:
        raise ValueError("not a BIO tag (O, B-TYPE or I-TYPE), as metric span_f1 needs; use "
                         "metric token_accuracy for other tags") from None


def _load_files(spec: dict, digests: Optional[Mapping[str, Optional[FileDigest]]] = None):
    from .files import TaskDataError, check_format, describe_files, read_examples
    from .kinds import task_kind
    kind = spec["task"]
    spec_kind = task_kind(kind)
    where = f"task {spec.get('name', kind)!r}"
    metric = spec.get("metric", spec_kind.metrics[0])
    if metric not in spec_kind.metrics:
        raise TaskDataError(f"{where}: metric {metric!r} is not for {kind}; use one of "
                            f"{', '.join(spec_kind.metrics)}")
    files = spec.get("files")
    if not isinstance(files, dict) or not files.get("train") or not files.get("test"):
        raise TaskDataError(f"{where}: 'files' must name at least 'train' and 'test' files")
    if spec.get("tokenize") and spec_kind.token_labels:
        raise TaskDataError(f"{where}: 'tokenize' is not for tagging (the tags belong to the "
                            f"tokens as given)")
    if spec_kind.token_labels and spec.get("max_tokens"):
        raise TaskDataError(f"{where}: max_tokens is not for tagging (every token is tagged "
                            f"and scored)")
    if not spec_kind.pair and spec.get("max_tokens_b"):
        raise TaskDataError(f"{where}: max_tokens_b is only for pair tasks")
    fmt = check_format(spec.get("format"), kind, where)
    paths = {split: Path(p) for split, p in files.items() if p}
    for split, path in paths.items():
        if not path.is_file():
            raise TaskDataError(f"{where}: {split} file {path} does not exist")
    # span_f1 needs BIO tags: checked when read, else its scoring fails after the first epoch,
    # naming no file
    label_map = _bio_tag_for_span_f1 if metric == "span_f1" else None
    tokenize = bool(spec.get("tokenize", False))
    splits = {split: read_examples(path, kind, fmt, tokenize=tokenize,
                                   max_tokens=spec.get("max_tokens"),
                                   max_tokens_b=spec.get("max_tokens_b"), label_map=label_map)
              for split, path in paths.items()}
    for split, examples in splits.items():
        if not examples:
            raise TaskDataError(f"{paths[split]}: no examples in the {split} file")
    seed = int(spec.get("subset_seed", 0))
    if "dev" in splits:
        dev = "file"
    else:
        fraction = float(spec.get("dev_fraction", DEFAULT_DEV_FRACTION))
        if not 0.0 <= fraction < 1.0:
            raise TaskDataError(f"{where}: dev_fraction must be in [0, 1), got {fraction}")
        train = splits["train"]
        n_dev = round(fraction * len(train))
        if fraction > 0 and not 1 <= n_dev < len(train):
            raise TaskDataError(f"{where}: {len(train)} training examples are too few to hold "
                                f"out {fraction:g} of them as dev; give a dev file or "
                                f"dev_fraction 0")
        held = set(random.Random(seed).sample(range(len(train)), n_dev)) if n_dev else set()
        splits["train"] = [ex for i, ex in enumerate(train) if i not in held]
        splits["dev"] = [ex for i, ex in enumerate(train) if i in held]
        dev = (f"{n_dev} of {len(train)} training examples held out (dev_fraction {fraction:g}, "
               f"seed {seed})" if n_dev else "none: no early stopping, the last epoch is kept")
    labels = spec_kind.label_set(splits["train"])
    # a model that can only answer one thing, scored as if it learnt (a graded task's targets
    # are checked in load_task, after any max_train sample)
    if len(labels) < 2 and spec_kind.classes:
        what = "every training token has the tag" if spec_kind.token_labels else \
            "every training example has the label"
        raise TaskDataError(f"{paths['train']}: {what} {labels[0]!r}; a {kind} task needs two "
                            f"or more (is format.label the right "
                            f"{'column' if fmt['type'] in ('conll', 'tsv') else 'field'}?)")
    order = ["train", "dev", "test"] + [k for k in splits if k not in ("train", "dev", "test")]
    splits = {k: splits[k] for k in order}
    source = {"preset": None, "corpus": None, "kind": kind, "format": fmt,
              "tokenize": tokenize, "files": describe_files(paths, digests), "dev": dev}
    return splits, source, kind, metric
