"""Domain adaptation: continue training a trained biLM on a task's unlabelled text.

The model keeps its vocabulary and shape; training runs one epoch by default. The held-out
part of the text (every N-th sentence, or files given) is not trained on; its perplexity is
measured before and after (``finetune_report.json``, and the model's ``heldout_ppl_before``
and ``heldout_ppl_after``). The adapted model's ``metadata.json`` lists every text it was
adapted on (``adapted_on``, with sha256, and how much of it was trained: see
:mod:`.adaptation`), and ``extra_data: true``: an experiment that uses it must say that the
biLM saw this text.

A task's text is often small: a batch of 128 rows x 20 steps holds 2,560 tokens, more than a
100-line text, which would make one epoch a single step. So the batch is cut to what the text
fills: at most ``batch_size`` rows, and few enough that one epoch is at least
:data:`MIN_STEPS_PER_EPOCH` steps (down to one row).
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..checks import is_number
from ..data.corpus import expand_paths, file_fingerprint, iter_file_sentences
from ..data.lm_batches import MAX_PIECE_LENGTH
from ..training.evaluate import perplexity
from ..io import atomic_write_text, no_empty_folder_on_failure
from ..output_checks import check_output_dir
from ..text_files import read_json
from ..runtime import launch_env, resolve_device
from .. import strict_json
from .checkpoint import latest_checkpoint, writing
from ..folder_checksums import RECORD_KEY
from .export import METADATA_FILE, VOCAB_FILE, load_language_model, read_metadata, write_metadata
from .resume import ResumeMismatch
from . import distributed
from .distributed import is_main_process, launched_world_size
from .adaptation import planned_record, with_trained
from .config import TrainConfig
from .run_folder import (FINETUNE_START_FILE, StartModel, check_no_model_to_replace, check_run_folders,
                         check_start_model, check_text_choice, check_text_outside_run, check_vocabulary_not_text, job_lock)
from .trainer import train

MIN_STEPS_PER_EPOCH = 20


def fitted_batch_size(cfg: TrainConfig, sentences: Sequence[List[str]], world_size: int = 1) -> int:
    """Rows per batch and process for adapting on ``sentences`` with ``world_size`` processes
    (each reads its own rows of every step): ``cfg.batch_size``, or fewer so that one epoch is
    at least :data:`MIN_STEPS_PER_EPOCH` steps (never below one row)."""
    if cfg.layout == "packed":  # a step reads rows x unroll_steps positions of the wrapped text
        positions = sum(len(s) + 2 for s in sentences)
        fits = positions // (cfg.unroll_steps * MIN_STEPS_PER_EPOCH * world_size)
    else:  # bucketed: one piece of a sentence a row (a sentence over MAX_PIECE_LENGTH words is
        # several, as the epoch counts them: fitted to the sentences, such a text got a batch
        # of a third and three times the steps)
        rows = sum(-(-len(s) // MAX_PIECE_LENGTH) for s in sentences)
        fits = rows // (MIN_STEPS_PER_EPOCH * world_size)
    return max(1, min(cfg.batch_size, fits))


def _text(sentences: Sequence[List[str]]) -> str:
    return "".join(" ".join(s) + "\n" for s in sentences)


OWN_TEXT_FILES = ("adapt_train.txt", "adapt_heldout.txt")


def heldout_file(output: str | Path) -> Path:
    """The file of the run folder ``output`` that finetune writes its held-out text to, and
    validates on (its ``valid``)."""
    return Path(output) / OWN_TEXT_FILES[1]


def _refuse_heldout_in_training(train_files: Sequence[Path], held_files: Sequence[Path]) -> None:
    """Refuse --heldout text that holds the same sentences (a copy, maybe with other line
    endings or spacing) as a training file or as the training text as a whole: its perplexity
    was reported as held-out though the model had trained on it. (The same file by another
    path or a link is refused before, by :func:`.run_folder.check_text_choice`.)"""
    if not held_files:   # (the text is read only to compare it with held-out text)
        return
    trained_digests, trained_all = _sentence_digests(train_files)
    held_digests, held_all = _sentence_digests(held_files)
    for held, digest in zip(held_files, held_digests):
        copy = next((t for t, d in zip(train_files, trained_digests) if d is not None and d == digest), None)
        if copy is not None:
            raise ValueError(f"--heldout {held}: holds the same sentences as the training text {copy}; a "
                             f"held-out perplexity needs text the model does not train on")
    if held_all is not None and held_all == trained_all:
        raise ValueError(f"--heldout {' '.join(map(str, held_files))}: holds the same sentences as the training "
                         f"text; a held-out perplexity needs text the model does not train on")


def _sentence_digests(files: Sequence[Path]) -> Tuple[List[Optional[str]], Optional[str]]:
    """SHA-256 of the sentences of each file (as training reads them: tokens, one sentence a
    line, blank lines left out; None for a file without one) and of all files in order."""
    import hashlib

    whole, each = hashlib.sha256(), []
    for path in files:
        one, n = hashlib.sha256(), 0
        for sentence in iter_file_sentences([path]):
            line = (" ".join(sentence) + "\n").encode("utf-8")
            one.update(line)
            whole.update(line)
            n += 1
        each.append(one.hexdigest() if n else None)
    return each, whole.hexdigest() if any(d is not None for d in each) else None


def _start_record(out: Path, cfg: TrainConfig, measure) -> Dict[str, Any]:
    """The start model's held-out perplexity (``before``, from ``measure()``) and metadata
    (``base_metadata``), taken when the adaptation begins and read back from
    ``OUTPUT/finetune_start.json`` when it resumes from a checkpoint: the ``--from`` folder may
    have been replaced since (a newer version of the model), and a resumed run reported that
    model's perplexity as "before" and its metadata as the start's, though its weights go on
    from the checkpoint of the first."""
    path = out / FINETUNE_START_FILE
    assert cfg.init_from is not None   # (finetune() refuses a config without one)
    if path.exists() and latest_checkpoint(out / "checkpoints") is not None:
        # (a record, tolerated: written atomically; one damaged or edited by hand is measured
        # again, as before the file existed, and said: taken as it was, a string for "before"
        # went into the report, base_metadata as a list ended in an AttributeError)
        try:
            record = read_json(path)
            problem = start_record_problem(record)
        except ValueError as e:
            record, problem = None, str(e).removeprefix(f"{path}: ")
        if problem is None:
            return record
        if is_main_process():
            print(f"note: {path}: {problem}; the start is measured again on {cfg.init_from} as it is now",
                  file=sys.stderr, flush=True)
    record = {"before": measure(), "base_metadata": read_metadata(cfg.init_from)}
    if is_main_process():
        with writing(path):
            atomic_write_text(path, strict_json.dumps(record, indent=2) + "\n")
    return record


#: The figures of a perplexity that the start record's ``before`` must hold (:func:`perplexity`'s).
_BEFORE = ("ppl", "ppl_fwd", "ppl_bwd", "loss_fwd", "loss_bwd")


def start_record_problem(record: Any) -> Optional[str]:
    """Why ``record``, read back from ``finetune_start.json``, is not what :func:`_start_record`
    writes (``before``: a perplexity's figures, numbers or strict JSON's "nan", "inf", "-inf";
    ``base_metadata``: an object, its ``adapted_on`` a list), or None."""
    if not isinstance(record, dict):
        return f"not the record of the start (a JSON object is needed, got {type(record).__name__})"
    before, base = record.get("before"), record.get("base_metadata")
    if not isinstance(before, dict) or not all(_figure(before.get(k)) for k in _BEFORE):
        return f"its \"before\" is not the start model's perplexity ({json.dumps(before)[:80]})"
    if not isinstance(base, dict) or not isinstance(base.get("adapted_on", []), list):
        return f"its \"base_metadata\" is not the start model's metadata ({json.dumps(base)[:80]})"
    return None


def _figure(value: Any) -> bool:
    """A figure as :mod:`elmo.strict_json` writes it: a finite number, or a non-finite one's name."""
    if isinstance(value, str):
        return value in strict_json.NONFINITE_NAMES
    return is_number(value) and math.isfinite(value)


def _write_own_text(out: Path, path: Path, text: str) -> None:
    """Write finetune's text file ``path`` of the run folder ``out`` unless it holds ``text``;
    refuse other text there once the run has a checkpoint (a resume would train on it)."""
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if current == text:
        return
    if current is not None and latest_checkpoint(out / "checkpoints") is not None:
        raise ResumeMismatch(f"cannot resume {out}: it was started on another text or held-out split "
                             f"({path} differs); rerun with the same text, or use another --output")
    with writing(path):
        atomic_write_text(path, text)


def finetune(cfg: TrainConfig, heldout: Optional[Sequence[str]] = None, heldout_every: int = 10) -> Dict[str, Any]:
    """Adapt ``cfg.init_from`` on ``cfg.train``; the result goes to ``cfg.output/model``.

    Returns held-out perplexity ``before`` and ``after`` (dicts as
    :func:`elmo.training.evaluate.perplexity` gives: stateless, independent of the batch size),
    the model folder, the steps taken and the batch size used (see :func:`fitted_batch_size`).
    In a distributed job rank 0 alone measures them: the other ranks return rank 0's ``before``
    and ``after`` None (rank 0 writes ``finetune_report.json`` and prints the report).
    """
    if not cfg.init_from:
        raise ValueError("finetune needs a trained model folder (init_from / --from)")
    out = Path(cfg.output)
    check_output_dir(out, "run folder")   # a file there: named, not "File exists"
    check_run_folders(out, cfg.export)
    loaded = check_start_model(cfg)   # before its text files are written there; measured and trained from
    check_no_model_to_replace(out)
    text_files, held_files = expand_paths(cfg.train), expand_paths(heldout) if heldout else []
    # (before the lock file; finetune's stricter rule, see check_text_outside_run)
    check_text_outside_run(out, {"training text": cfg.train, "--heldout": list(heldout or [])},
                           own_names=OWN_TEXT_FILES, found=text_files + held_files)
    check_vocabulary_not_text([*cfg.train, *(heldout or [])], Path(cfg.init_from) / VOCAB_FILE,
                              f"--from {cfg.init_from}")
    check_text_choice(cfg.train, {"--heldout": list(heldout or [])})
    _refuse_heldout_in_training(text_files, held_files)   # (reads the text: after the checks of its files)
    # The run's lock is taken before the text files are written (train() would take it only
    # after: a second finetune into a busy folder replaced the text the first was training on).
    # Only rank 0, holding it, writes them; the other ranks wait in the process group (joined
    # here, before train() would) until they are written: each rank wrote them itself, and the
    # other ranks of a second job into a busy folder, whose rank 0 the lock stopped, replaced
    # the running job's text. A run that fails before it writes a file leaves no empty run folder.
    # A process that fails alone before train() (rank 0 measuring the start model or writing its
    # record, a rank that cannot read the text) has the others, waiting in a broadcast or at the
    # text files, stop with its line, not with the process group's traceback.
    ctx = distributed.setup(cfg.device)
    try:
        with distributed.failures_told(ctx), no_empty_folder_on_failure(out), job_lock(out, ctx):
            return _finetune(cfg, out, ctx, loaded, (text_files, held_files), heldout, heldout_every)
    finally:
        distributed.teardown(ctx)   # (train() has left the group already where it ran)


def _finetune(cfg: TrainConfig, out: Path, ctx: distributed.Context, loaded: StartModel,
              texts: Tuple[List[Path], List[Path]], heldout: Optional[Sequence[str]],
              heldout_every: int) -> Dict[str, Any]:
    """:func:`finetune` once its checks have passed; ``loaded``: the start model they loaded,
    ``texts``: the training and held-out files."""
    text_files, held_files = texts
    start_model = cfg.init_from
    assert start_model is not None   # (finetune() refuses a config without one)
    sentences = list(iter_file_sentences(text_files))
    if heldout:
        train_part, held = sentences, list(iter_file_sentences(held_files))
    else:
        if heldout_every < 2:
            raise ValueError(f"--heldout-every must be at least 2 (every N-th sentence held out), got {heldout_every}")
        held = sentences[heldout_every - 1::heldout_every]
        train_part = [s for i, s in enumerate(sentences) if (i + 1) % heldout_every != 0]
    if not train_part or not held:  # say which side is empty, and of which files
        empty, files = ("text to train on", cfg.train) if not train_part else (
            "held-out text", heldout if heldout else cfg.train)
        hint = (f" (every {heldout_every}th of its {len(sentences)} sentences is held out: give --heldout "
                f"or more text)") if not heldout and train_part else ""
        raise ValueError(f"{', '.join(map(str, files))}: no {empty}{hint}; finetune needs both")
    # The training part is written out so training streams it like any corpus. A rerun into the
    # same folder resumes on that file, so a different text (or split) there must be refused.
    train_file, held_file = out / OWN_TEXT_FILES[0], heldout_file(out)
    refused: Optional[Exception] = None
    if ctx.is_main:   # (holding the run's lock)
        try:
            for path, part in ((train_file, train_part), (held_file, held)):
                _write_own_text(out, path, _text(part))
        except (ResumeMismatch, OSError) as e:   # (the others waited for the files, then died with the group)
            refused = e
    distributed.raise_together(ctx, refused)   # every rank trains on the files rank 0 has written

    # the held-out perplexity before and after on the device the adaptation trains on (they ran
    # on the CPU whatever --device said: minutes for a GPU run's held-out text)
    device = resolve_device(cfg.device, launch_env()[2])
    assert loaded.vocab is not None   # (loaded by the check: finetune() refuses a config without --from)
    vocab = loaded.vocab

    def measure() -> Dict[str, float]:   # (the model the check loaded: it is read once, see StartModel)
        assert loaded.model is not None   # (taken by train() only, after this)
        return perplexity(loaded.model.to(device), held, vocab, cfg.eval_batch_size, device=device)

    # Rank 0 alone measures the start model (every rank measured the whole held-out text, each
    # the same figures: the job's time spent N times) and gives the others its record: they need
    # it, as the run's metadata must be the same on every rank (train() compares settings).
    start = distributed.broadcast_object(ctx, _start_record(out, cfg, measure) if ctx.is_main else None)
    before, base_meta = start["before"], start["base_metadata"]
    batch_size = fitted_batch_size(cfg, train_part, launched_world_size())
    # absolute: read from another working folder, a relative path names another file or none
    record = planned_record(
        {"files": [str(Path(p).resolve()) for p in text_files], "sha256": [file_fingerprint(p) for p in text_files],
         "sentences_heldout": len(held), "batch_size": batch_size},
        sentences=len(train_part), words=sum(len(s) for s in train_part), epochs=cfg.epochs, max_steps=cfg.max_steps)
    earlier = list(base_meta.get("adapted_on", []))
    metadata = {"adapted_from": str(Path(start_model).resolve()), "extra_data": True,
                # (not the start folder's SHA-256 record: the adapted folder records its own files)
                "base_metadata": {k: v for k, v in base_meta.items() if k not in ("adapted_on", RECORD_KEY)},
                "heldout_ppl_before": before}
    run_cfg = dataclasses.replace(cfg, train=[str(train_file)], valid=[str(held_file)], batch_size=batch_size,
                                  vocab=str(Path(start_model) / VOCAB_FILE), metadata=metadata)
    # The record says what the run trained, from the trainer's counters at the export (the
    # figures of the text and settings alone said a whole epoch where --max-steps or
    # --max-seconds stopped the run after a few steps).
    summary = train(run_cfg, lock=False, checked_start=loaded,   # (checked above, with the same --from and -o)
                    export_metadata=lambda trained: {"adapted_on": earlier + [with_trained(record, trained)]})
    after: Optional[Dict[str, float]] = None   # (measured by rank 0 alone, which writes the report: train() has left the group)
    if ctx.is_main:
        adapted, _ = load_language_model(out / "model", device=device)
        after = perplexity(adapted, held, vocab, cfg.eval_batch_size, device=device)
        # the model records it beside the start's: a model folder travels without its run's report
        with writing(out / "model" / METADATA_FILE):
            write_metadata(out / "model", {**read_metadata(out / "model"), "heldout_ppl_after": after})
    report = {"model": str(out / "model"), "heldout_sentences": len(held), "before": before, "after": after,
              "steps": summary["step"], "tokens_trained": summary["tokens"], "epochs_trained": summary["epochs"],
              "batch_size": batch_size, "tokens_per_s": summary["tokens_per_s"]}
    if ctx.is_main:
        with writing(out / "finetune_report.json"):
            atomic_write_text(out / "finetune_report.json", strict_json.dumps(report, indent=2) + "\n")
    return report
