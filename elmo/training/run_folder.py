"""The run folder and the text a run reads, checked before anything is written: the files a
run writes there (:func:`run_files`), text that would take them in or the vocabulary, a start
model that the export would replace; the run's lock; the record of a warm start."""
from __future__ import annotations

import json
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ..data.corpus import expand_paths, would_find
from ..data.text_choice import HELDOUT_HINT, check_heldout_not_training, check_not_whole_corpus, trained_text
from ..io import OutputError, atomic_write_text
from ..output_checks import check_output_dir, make_folder, same_file
from ..output_lock import output_lock
from ..text_files import read_json
from ..vocab import Vocabulary
from . import distributed
from .checkpoint import checkpoint_path, latest_checkpoint, writing
from .config import TrainConfig
from .export import LM_FILES, load_language_model, read_metadata
from .model import LanguageModel
from .resume import ResumeMismatch
from .vocab_build import default_counts_path


WARM_START_FILE = "warm_start.json"
#: finetune's start: the held-out perplexity before and the start model's metadata
FINETUNE_START_FILE = "finetune_start.json"


def warm_start_record(init_from: str) -> Dict[str, Any]:
    """Where a warm-started run began: the model folder (absolute), its weights' SHA-256, and the
    tokens and steps it had seen. Taken when the run starts (see
    :func:`warm_start_of_run`), so it still names the start
    when that folder is later replaced, e.g. by shipping this run's model.

    Also the texts the start model was adapted on (``adapted_on``) and whether it saw extra
    data (``extra_data``): the new model's weights come from them, so its metadata keeps them
    (a warm start from an adapted model was exported with ``adapted_on: []``, and an experiment
    described it as not domain-adapted), and every text file its weights trained on
    (``trained_on``, :func:`~elmo.data.text_choice.trained_text`), so that ``elmo perplexity``
    on one of them says so for the new model too."""
    from ..data.fetch import sha256_file

    base = read_metadata(init_from)
    weights = Path(init_from) / "weights.hdf5"
    adapted = list(base.get("adapted_on") or [])
    return {"from": str(Path(init_from).resolve()), "weights_sha256": sha256_file(weights) if weights.exists() else None,
            "tokens_before": int(base.get("tokens_total", base.get("tokens", 0))),
            "steps_before": base.get("steps"), "base_train_config": base.get("train_config"),
            "adapted_on": adapted, "extra_data": bool(adapted) or base.get("extra_data") is True,
            "trained_on": sorted(trained_text(base))}


def warm_start_of_run(init_from: str, out_dir: Path, resumed: bool, is_main: bool) -> Dict[str, Any]:
    """A warm-started run's start (from ``init_from``), written once to ``OUTPUT/warm_start.json``
    and read back on every resume (``resumed``): the start folder may have changed since (a run
    that continues the shipped model, which was then replaced). A run begun before this file
    existed records the folder as it is now, and says so. Rank 0 (``is_main``) writes and speaks."""
    path = out_dir / WARM_START_FILE
    if resumed and path.exists():
        record = read_json(path, ResumeMismatch, what="JSON", expected="the record of the run's start",
                           hint="put it back, or use another --output")
        if not isinstance(record, dict):
            raise ResumeMismatch(f"{path}: not the record of the run's start (a JSON object is needed, got "
                                 f"{type(record).__name__}); put it back, or use another --output")
        now = warm_start_record(init_from)["weights_sha256"]
        problem = warm_start_problem(record, init_from, now)
        if problem:   # (else a KeyError at the export, after every step, or a wrong tokens_total)
            raise ResumeMismatch(f"{path}: {problem}; put back the run's own record, or delete it to record the "
                                 f"start as {init_from} is now")
        then = record.get("weights_sha256")
        if is_main and then and now != then:
            print(f"note: {init_from} has changed since this run began (weights SHA-256 {then[:12]}… "
                  f"then, {(now or 'none')[:12]}… now); the run goes on from its checkpoint, not from "
                  f"the folder's weights", file=sys.stderr, flush=True)
        return record
    record = warm_start_record(init_from)
    if is_main:
        if resumed:
            print(f"note: {path} is missing (a run begun before it was written); the warm start is "
                  f"recorded as {init_from} is now", file=sys.stderr, flush=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        with writing(path):
            atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return record


def warm_start_problem(record: Dict[str, Any], init_from: str, weights_sha256: Optional[str] = None) -> Optional[str]:
    """Why ``record``, read back from ``warm_start.json``, is not the record of a warm start
    from ``init_from`` (whose weights have ``weights_sha256`` now) that :func:`warm_start_record`
    writes (a key edited away or into another type, another run's record copied in), or None:
    its figures go into the exported model's metadata as they are."""
    start, then = Path(init_from).resolve(), record.get("from")
    # (a record written before the path was resolved holds it as given: resolved here alike; one
    # naming another path but these very weights is this run's, its folders moved since: the
    # settings check already holds init_from to the path given when the run began)
    same_weights = weights_sha256 is not None and record.get("weights_sha256") == weights_sha256
    if not (isinstance(then, str) and (Path(then).resolve() == start or same_weights)):
        return f"it records a start from {then}, and this run starts from {start}"
    checks = (("tokens_before", "a count of tokens", lambda v: isinstance(v, int) and not isinstance(v, bool)
               and v >= 0),
              ("weights_sha256", "a SHA-256", lambda v: v is None or isinstance(v, str)),
              ("adapted_on", "a list", lambda v: v is None or isinstance(v, list)),
              ("extra_data", "true or false", lambda v: v is None or isinstance(v, bool)))
    for key, kind, fits in checks:
        if not fits(record.get(key)):
            return f"its {key} is {json.dumps(record.get(key))}, not {kind}"
    return None


def warm_start_metadata(warm_start: Optional[Dict[str, Any]], tokens_done: int) -> Dict[str, Any]:
    """The exported model's ``warm_start`` and ``tokens_total`` (the tokens of all phases: the
    start's and this run's ``tokens_done``), and the start model's ``adapted_on`` and
    ``extra_data`` where it was adapted: its weights carry that text on (finetune's own
    metadata extends the list). Empty without a warm start."""
    if not warm_start:
        return {}
    meta = {"warm_start": warm_start,
            "tokens_total": int(warm_start["tokens_before"]) + tokens_done}
    if warm_start.get("adapted_on") or warm_start.get("extra_data"):
        meta.update(adapted_on=list(warm_start.get("adapted_on") or []), extra_data=True)
    return meta


class StartModel:
    """The start model (``--from``) as :func:`check_start_model` loaded it, on the CPU, with
    its vocabulary: handed on to the run, which starts from it (:meth:`take`) instead of
    reading the weights again (every process read them twice, finetune's rank 0 three times:
    seconds each for a large model). ``model`` is None once taken, or without ``--from``."""

    def __init__(self, loaded: Optional[Tuple[LanguageModel, Vocabulary]] = None):
        self.model: Optional[LanguageModel] = loaded[0] if loaded is not None else None
        self.vocab: Optional[Vocabulary] = loaded[1] if loaded is not None else None

    def take(self) -> Tuple[LanguageModel, Vocabulary]:
        """The model and its vocabulary, let go of here: the run's model is then the only
        reference, so the weights are freed with it (and not kept after a move to a GPU)."""
        if self.model is None or self.vocab is None:
            raise RuntimeError("the start model was taken already, or none was loaded")
        loaded = (self.model, self.vocab)
        self.model = self.vocab = None
        return loaded


def check_start_model(cfg: TrainConfig) -> StartModel:
    """Refuse, before anything is written, a start model (``--from``) that is not a trained
    language model's folder or that does not load: a vocabulary, options, weights or softmax
    that is damaged (finetune wrote its text files into OUTPUT first, then failed on the
    model, leaving the run folder behind), and a run whose export,
    ``OUTPUT/model``, is the model it starts from (``--from run1/model --output run1``): the
    export replaced the start model's weights, softmax and metadata with the new ones, and the
    metadata then named itself as what it was adapted from.

    Returns the model loaded (on the CPU, for the run to start from: see :class:`StartModel`;
    empty without ``--from``); the files' checks (truncated, NaN, a key missing) run in that
    load, before finetune has written its text files."""
    if cfg.init_from and same_file(Path(cfg.output) / "model", Path(cfg.init_from)):
        raise OutputError(f"{cfg.output}: its model folder is {cfg.init_from}, the model this run starts "
                          f"from (--from), which the export would replace; give another --output")
    return StartModel(load_language_model(cfg.init_from) if cfg.init_from else None)


def check_run_folders(output: str | Path, export: bool = True) -> None:
    """Refuse, before anything is read or written, a file where a folder of the run folder
    ``output`` belongs: ``checkpoints/`` (a file there hid the checkpoints: the run began
    again from scratch, emptied its log.jsonl, trained, and stopped at its first checkpoint
    with "File exists (the previous checkpoints are intact)") and, where the run exports (``export``),
    ``model/`` (found at the export, after every step)."""
    out = Path(output)
    check_output_dir(out / "checkpoints", "checkpoints folder")
    if export:
        check_output_dir(out / "model", "exported model's folder")


def check_no_model_to_replace(output: str | Path) -> None:
    """Refuse a run that would start from scratch in a folder holding an exported model and no
    checkpoint to resume from (a finished run whose checkpoints were deleted to save space, or
    a model put there): the command emptied the folder's ``log.jsonl`` at once and replaced its
    ``model/`` with the new one at the end, without a word. A run killed before its first
    checkpoint has exported nothing, and starts again as before."""
    out = Path(output)
    model = out / "model"
    if model.is_dir() and any(model.iterdir()) and latest_checkpoint(out / "checkpoints") is None:
        raise OutputError(f"{out}: holds a trained model ({model}) and no checkpoint to resume from; a new run "
                          f"there would start from scratch and replace that model and its learning curve: "
                          f"give another --output, or remove {model} to train there again")


def run_files(out: Path) -> List[Path]:
    """Files that a run writes in its folder ``out`` (one of each kind: the checkpoints and the
    exported model's files, also in its ``model.partial`` while it is written). The temporary
    files, whose names start with a dot, are left out: no folder or glob of text finds them."""
    model = ("options.json", "weights.hdf5", *LM_FILES)
    return [out / name for name in ("train.lock", "train_config.json", "corpus_stats.json", "log.jsonl",
                                    WARM_START_FILE, FINETUNE_START_FILE)] + [checkpoint_path(out / "checkpoints", 1)] + [
        out / folder / name for folder in ("model", "model.partial") for name in model]


def check_text_outside_run(output: str | Path, texts: Dict[str, Sequence[str]], *, own_names: Sequence[str] = (),
                           found: Optional[Sequence[Path]] = None) -> None:
    """Refuse text that would take in the run's own files: ``texts`` maps an option (for the
    message) to its files, folders or globs. Every file below a folder is read as text, so a
    folder that holds the run folder ``output`` (``elmo train corpus/ -o corpus``, or ``-o
    corpus/run``), a glob that matches its files, or one of them named is refused: the first
    session trained on the lock file, and a resume read the checkpoints and log as text and
    failed on "not valid UTF-8" or "the training text has changed". A text file of its own
    inside the run folder, or a folder of text there, is taken. ``own_names`` are the further
    files the command writes at the top of the run folder (finetune's ``adapt_*.txt``).

    ``found``, the files that ``texts`` lists now, asks for finetune's stricter rule first:
    any of them inside the run folder is refused unless it was named on its own (and is not
    one of ``own_names``), a folder or glob of text there included. (That rule came first,
    for ``elmo finetune texts/ -o texts``; it is kept as it was, since train's rule alone
    would make finetune take text it refuses.) The rule above applies to finetune too: found
    files cannot see a run folder not yet written (``elmo finetune texts/ -o texts/run`` was
    taken, and its rerun then refused)."""
    out = Path(output)
    if found is not None:
        run = out.resolve()
        named = {Path(p).resolve() for patterns in texts.values() for p in patterns if Path(p).is_file()}
        for path in found:
            full = Path(path).resolve()
            own = full.parent == run and full.name in own_names
            if full.is_relative_to(run) and (full not in named or own):
                raise ValueError(f"{path}: in the run folder {out}, where finetune writes its own files (checkpoints, "
                                 f"{', '.join(own_names)}); name the text files themselves, or give another --output")
    own_files = run_files(out) + [out / name for name in own_names]
    for option, patterns in texts.items():
        for pattern in patterns:
            hit = next((path for path in own_files if would_find(pattern, path)), None)
            if hit is not None:
                raise ValueError(f"{option} {pattern}: would read the files of the run folder {output} "
                                 f"(its {hit.relative_to(out)}, checkpoints, log) as text; give "
                                 f"another --output, or name the text files themselves")


def check_vocabulary_not_text(patterns: List[str], vocab: str | Path, option: str = "--vocab") -> None:
    """Refuse a vocabulary file (or the counts file read beside it) that the text ``patterns``
    take in: ``elmo vocab build corpus/ -o corpus/vocab.txt``, then ``elmo train corpus/``,
    trained on the vocabulary's lines (and the counts' ``word<TAB>count`` lines) as sentences."""
    if not vocab or not Path(vocab).is_file():   # (a missing one is named where it is read)
        return
    vocab = Path(vocab)
    for path in (vocab, default_counts_path(vocab)):
        within = next((p for p in patterns if path.is_file() and would_find(p, path)), None)
        if within is not None:
            raise ValueError(f"{option}: {path} would be read as text too, as a file of {within} (every file "
                             f"below a folder, or matching a glob, is); move the vocabulary out of the text, "
                             f"or name the text files themselves")


def check_text_choice(train: Sequence[str], heldout: Dict[str, Sequence[str]]) -> None:
    """Refuse training text that takes in a whole corpus folder (its held-out text and
    ``stats.json`` with its ``train.txt``), held-out text (``heldout``: option -> its files,
    folders or globs) that takes in a corpus folder's training text, and held-out files that
    are training files too (see :mod:`elmo.data.text_choice`)."""
    check_not_whole_corpus("training text", train)
    train_files = expand_paths(train)
    for option, patterns in heldout.items():
        if patterns:
            check_not_whole_corpus(option, patterns, HELDOUT_HINT)
            check_heldout_not_training(option, train_files, expand_paths(patterns))


def run_lock(out: Path):
    """The lock rank 0 holds on ``OUTPUT/train.lock`` while it trains: a second ``elmo train``
    (or ``finetune``) into the same folder is refused at once, naming the holder. Without it
    the second resumed from the first's newest checkpoint and both wrote checkpoints and log
    lines into one run. (Other ranks write nothing there.)"""
    make_folder(out)
    return output_lock(out / "train", name=out)


@contextmanager
def job_lock(out: Path, ctx: distributed.Context, take: bool = True) -> Iterator[None]:
    """:func:`run_lock`, taken by rank 0 for the whole job (``take`` False: the caller holds
    it), its outcome known to every process: a second job into a busy folder stops on each
    of its processes with the lock's one line. Its other ranks, which take no lock, went on
    into the process group that rank 0 had left, and ended in its traceback ("Connection
    closed by peer")."""
    if not take:
        yield
        return
    with ExitStack() as held:
        error: Optional[OSError] = None
        if ctx.is_main:
            try:
                held.enter_context(run_lock(out))
            except OSError as e:   # (busy, or no folder or lock file can be made there)
                error = e
        distributed.raise_together(ctx, error)
        yield
