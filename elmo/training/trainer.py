"""The training loop: stateful LM batches, shared (sampled) softmax, Adagrad, exact resume.

Recipe defaults make the original's updates: Adagrad at lr 0.2, dropout 0.1, 8192 shared
negatives, batch 128 rows x 20 steps per process. The gradient is that of the mean loss, where
the original's is that of T = unroll_steps times it, so its initial accumulator of 1.0 and
its clip of 10 are 1/T^2 and 10/T here (:func:`~elmo.training.config.recipe_defaults`; a warm
start keeps 1.0 and 10, and runs begun before keep the values they were started with). One
``step`` is one batch on every process; with data parallelism the gradients are averaged over
processes (DistributedDataParallel), so W processes of B rows train like one process of W x B
rows.

Everything a run writes goes under ``output``:
``train_config.json``, ``log.jsonl`` (the learning curve), ``checkpoints/`` and, at the end,
``model/`` (see :mod:`elmo.training.export`). Starting again with the same ``output``
resumes from the newest checkpoint. SIGTERM or Ctrl-C ends a run after the step under way,
with a checkpoint of it (:mod:`elmo.training.stop`).

The run's settings are :mod:`.config`, its optimizer :mod:`.optim`, the checks on its folder
and text :mod:`.run_folder` (with the warm start's record), those once it is set up
:mod:`.preflight`, its corpus size :mod:`.corpus_stats`, what may differ on resume
:mod:`.resume`, its vocabulary :mod:`.training_vocab`, its learning curve and log window
:mod:`.run_log`, and a diverged run's messages and final finiteness check :mod:`.divergence`;
this module holds the loop (:class:`TrainingRun`: setup, resume, the step, evaluation, saving
and the export) and :func:`train`.
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch.nn.parallel import DistributedDataParallel

from ..allocator import keep_freed_memory
from ..checks import is_number
from ..config import ElmoOptions
from ..data.corpus import CorpusStream, expand_paths, iter_file_sentences
from ..data.lm_batches import MAX_PIECE_LENGTH, BucketedLMBatches, PackedLMBatches
from ..modules.lstm import LayerState
from ..modules.softmax import softmax_loss
from ..vocab import Vocabulary
from ..io import atomic_write_text, no_empty_folder_on_failure
from ..output_checks import check_output_dir
from ..text_files import read_json
from . import distributed
from .checkpoint import (CheckpointError, latest_checkpoint, load_checkpoint, rng_state, save_checkpoint,
                         set_rng_state, writing)
from .checkpoint_contents import RunParts, checkpoint_problem
from .config import TrainConfig, restart_settings, with_recipe_defaults
from .corpus_stats import check_text_unchanged, read_corpus_stats, write_corpus_stats
from .divergence import MAX_NONFINITE_STEPS, check_outputs_finite, diverged_message
from .evaluate import likelihood_sums, perplexity_from_sums, reset_rows, unk_targets
from .export import VOCAB_FILE, export_model, load_language_model, options_with_training_keys
from .model import LanguageModel
from .optim import build_optimizer, load_optimizer_state
from .preflight import (check_every_rank_has_text, check_same_settings, warn_bf16_not_native, warn_uneven_shards,
                        warn_vocabulary_order)
from .resume import ResumeMismatch, check_allow_change, check_line_split, check_resume, check_vocabulary_unchanged
from .run_folder import (StartModel, check_no_model_to_replace, check_run_folders, check_start_model,
                         check_text_outside_run, check_text_choice, check_vocabulary_not_text, job_lock, warm_start_metadata,
                         warm_start_of_run)
from .run_log import SINCE_RESUME, WINDOW_SUMS, RunLog, new_window, train_record, weighted_window
from .stop import StopRequests, TrainingStopped
from .training_vocab import load_training_vocabulary, vocabulary_digest


def _batches(cfg: TrainConfig, vocab: Vocabulary, max_chars: int, ctx: distributed.Context):
    stream = CorpusStream(cfg.train, seed=cfg.seed, shuffle=cfg.shuffle, rank=ctx.rank,
                          world_size=ctx.world_size, balance=line_balance(cfg))
    if cfg.layout == "packed":
        return PackedLMBatches(stream, vocab, cfg.batch_size, cfg.unroll_steps, max_chars)
    if cfg.layout == "bucketed":
        return BucketedLMBatches(stream, vocab, cfg.batch_size, max_chars, seed=cfg.seed + 7 * ctx.rank)
    raise ValueError(f"layout must be 'packed' or 'bucketed', got {cfg.layout!r}")


def line_balance(cfg: TrainConfig) -> str:
    """What the processes' blocks of a file's unshuffled lines hold about equal amounts of: what
    the layout reads as much of a step on every process (packed: tokens; bucketed: rows)."""
    return "lines" if cfg.layout == "bucketed" else "tokens"


def total_steps(cfg: TrainConfig, world_size: int, corpus_stats: Dict[str, int],
                rows: str = "pieces") -> int:
    """Steps for ``cfg.epochs`` passes (or ``max_steps``). ``rows``: what a bucketed epoch
    counts, ``pieces`` (now) or ``sentences`` (a run begun by a version before the pieces)."""
    if cfg.max_steps is not None:
        return cfg.max_steps
    if cfg.layout == "packed":
        per_step = cfg.batch_size * cfg.unroll_steps * world_size
        return max(1, math.ceil(cfg.epochs * corpus_stats["tokens"] / per_step))
    # a bucketed row is a piece of a sentence: counting sentences made an epoch of a text with
    # long sentences a fraction of a pass (a third for sentences of 450 words)
    return max(1, math.ceil(cfg.epochs * corpus_stats[rows] / (cfg.batch_size * world_size)))


def epoch_positions(cfg: TrainConfig, corpus_stats: Dict[str, int]) -> int:
    """Input positions one pass over the text gives, as the training counts its tokens: the
    packed stream's every token (``<S>`` and ``</S>`` included); the bucketed layout's rows,
    a piece of n words being n + 1 inputs (its ``</S>`` is only a target). Dividing the
    bucketed count by the packed one logged an epoch as 0.86 on 5-word sentences."""
    if cfg.layout == "packed":
        return corpus_stats["tokens"]
    words = corpus_stats["tokens"] - 2 * corpus_stats["sentences"]
    return words + corpus_stats["pieces"]


def build_model(cfg: TrainConfig, vocab: Vocabulary, start: Optional[StartModel] = None) -> LanguageModel:
    """A fresh model from ``cfg.options``, or the trained model ``cfg.init_from``: taken from
    ``start`` where :func:`~elmo.training.run_folder.check_start_model` loaded it already."""
    if cfg.init_from:
        if start is not None and start.model is not None:
            model, model_vocab = start.take()
            model.set_dropout(cfg.dropout)   # (the check loaded it as load_language_model does, without)
        else:
            model, model_vocab = load_language_model(cfg.init_from, dropout=cfg.dropout)
        if model_vocab.words != vocab.words:
            # (the bare "not the vocabulary of" said neither how nor what to give instead)
            at = next((i for i, (a, b) in enumerate(zip(vocab.words, model_vocab.words)) if a != b),
                      min(len(vocab), len(model_vocab)))
            mine = repr(vocab.words[at]) if at < len(vocab) else "its end"
            theirs = repr(model_vocab.words[at]) if at < len(model_vocab) else "its end"
            raise ValueError(f"{cfg.vocab}: not the vocabulary of {cfg.init_from} ({len(vocab):,} words, the "
                             f"model's {len(model_vocab):,}; word {at + 1} is {mine} there, {theirs} in the "
                             f"model): a warm start keeps the model's softmax, a row per word of its vocabulary, "
                             f"so give the model's {VOCAB_FILE} (or leave --vocab out)")
        # the exported options.json said the start model's training keys (its negatives,
        # unroll steps and dropout), not those this run trained with
        model.bilm.options = _with_training_keys(model.bilm.options, cfg, vocab)
        return model
    options = _with_training_keys(ElmoOptions.from_dict(cfg.options), cfg, vocab)
    return LanguageModel(options, len(vocab), vocab.bos, vocab.eos, cfg.dropout)


def _with_training_keys(options: ElmoOptions, cfg: TrainConfig, vocab: Vocabulary) -> ElmoOptions:
    """``options`` with the original's training keys of this run (no ``n_negative_samples_batch``
    with the full softmax)."""
    options = options_with_training_keys(
        options, n_tokens_vocab=len(vocab), unroll_steps=cfg.unroll_steps, dropout=cfg.dropout,
        n_negative_samples_batch=cfg.n_negative or None)
    if not cfg.n_negative:
        options.extra.pop("n_negative_samples_batch", None)
    return options


def _state_to(state, device):
    return None if state is None else [(c.to(device), h.to(device)) for c, h in state]


def _out_of_time(cfg: TrainConfig, ctx: distributed.Context, elapsed: float) -> bool:
    """Whether the time budget is spent; every rank takes rank 0's answer, so all stop together."""
    if cfg.max_seconds is None:
        return False
    flag = 1.0 if (ctx.is_main and elapsed >= cfg.max_seconds) else 0.0
    return distributed.all_reduce_sum(ctx, [flag])[0] > 0


def _stop_flags(cfg: TrainConfig, ctx: distributed.Context, elapsed: float, signalled: bool) -> Tuple[bool, bool]:
    """(the time budget is spent, a stop signal came) as every rank sees them, in one
    all-reduce: the time is rank 0's to judge, a signal counts from any rank (a scheduler may
    signal one process only), so all ranks stop at the same step."""
    late = cfg.max_seconds is not None and ctx.is_main and elapsed >= cfg.max_seconds
    if not ctx.distributed:
        return late, signalled
    late_sum, signal_sum = distributed.all_reduce_sum(ctx, [float(late), float(signalled)])
    return late_sum > 0, signal_sum > 0


#: What :func:`train`'s ``export_metadata`` is given: the run's own counters at the export.
TrainedFigures = Dict[str, Any]


def train(cfg: TrainConfig, stop_after: Optional[int] = None, lock: bool = True,
          checked_start: Optional[StartModel] = None,
          export_metadata: Optional[Callable[[TrainedFigures], Dict[str, Any]]] = None) -> Dict[str, Any]:
    """Train (or resume) the run ``cfg.output``. Returns a summary of the run.

    ``stop_after``: return after this many steps of this session (the run stays resumable;
    checkpoints are written as configured, plus one at the stopping step).
    ``lock``: take the run's lock (:func:`~elmo.training.run_folder.run_lock`); False where the
    caller holds it.
    ``checked_start``: what :func:`~elmo.training.run_folder.check_start_model` returned where
    the caller ran it on this ``init_from`` and ``output`` already (finetune, before it writes
    its text files); the run starts from the model it loaded. None: the check runs here.
    ``export_metadata``: called at the export with what the whole run trained (see
    :meth:`TrainingRun.trained_figures`, counted across resumes); its keys go into the exported
    ``metadata.json`` last (finetune's ``adapted_on`` record, which must say what was trained,
    not what the text and settings planned).
    """
    out = Path(cfg.output)
    check_output_dir(out, "run folder")   # a file there: named, not "File exists"
    check_run_folders(out, cfg.export)
    if checked_start is None:
        checked_start = check_start_model(cfg)   # (its model is the run's start: loaded once)
        check_no_model_to_replace(out)
    check_text_outside_run(cfg.output, {"training text": cfg.train, "--valid": cfg.valid})
    check_vocabulary_not_text([*cfg.train, *cfg.valid], cfg.vocab)
    check_text_choice(cfg.train, {"--valid": cfg.valid})
    ctx = distributed.setup(cfg.device)
    if ctx.device.type == "cpu":
        keep_freed_memory()  # no page-fault storm from re-allocating each step's activations
    try:   # (a run that fails before it writes a file leaves no empty run folder; a process that fails
        # alone, mid-run, has every other one stop with its line, not the process group's traceback)
        with distributed.failures_told(ctx), no_empty_folder_on_failure(out), job_lock(out, ctx, take=lock):
            return TrainingRun(cfg, ctx, export_metadata, checked_start).run(stop_after)
    finally:
        distributed.teardown(ctx)


def read_step_figures(loss: torch.Tensor, gnorm: torch.Tensor) -> Tuple[float, float]:
    """A step's loss and gradient norm (0-dim, on the device) as floats, in one read of the
    device (each read waits until the GPU has done all the work queued before it, so the host
    cannot queue the next step meanwhile). Read in the wider of their two dtypes, which holds
    each exactly: the floats ``float(loss)`` and ``float(gnorm)`` gave, NaN and inf included.
    (Not float64 always: an MPS device has none.)"""
    wide = torch.promote_types(loss.dtype, gnorm.dtype)
    loss_value, gnorm_value = torch.stack([loss.detach().to(wide), gnorm.detach().to(wide)]).tolist()
    return loss_value, gnorm_value


class TrainingRun:
    """One session of the training run ``cfg.output``, as named steps.

    :meth:`run` calls them in order: :meth:`setup` (vocabulary, model, batches, optimizer,
    sampler), :meth:`resume` (from the newest checkpoint, if any), :meth:`open_log`, then
    :meth:`step` per batch with :meth:`log` / :meth:`evaluate` / :meth:`save` as configured,
    and :meth:`finish` (final evaluation and export). Everything a checkpoint must restore
    exactly (``step``, ``tokens_done``, ``elapsed``, the LSTM ``state``, the batches', the
    sampler's and the random generators' positions) is an attribute, so ``save`` reads the
    current values and nothing else.
    """

    n_steps: int   # the run's last step: set by setup, lowered by a time limit

    def __init__(self, cfg: TrainConfig, ctx: distributed.Context,
                 export_metadata: Optional[Callable[[TrainedFigures], Dict[str, Any]]] = None,
                 start: Optional[StartModel] = None):
        # the accumulator and clip not given, which a resume takes from its checkpoint (_take_stored_recipe)
        self.recipe_unset = [name for name in ("adagrad_init", "clip_norm") if getattr(cfg, name) is None]
        cfg = with_recipe_defaults(cfg)   # (a resumed run's own accumulator and clip)
        self.cfg, self.ctx = cfg, ctx
        self.export_metadata = export_metadata  # (see train)
        self.start = start   # the start model loaded by train()'s check (see build_model)
        self.out_dir = Path(cfg.output)
        self.ckpt_dir = self.out_dir / "checkpoints"
        self.stats_path = self.out_dir / "corpus_stats.json"
        self.step_no, self.tokens_done, self.elapsed = 0, 0, 0.0
        self.tokens_unsynced = 0  # bucketed layout: this rank's tokens not yet in tokens_done
        self.state: Optional[List[LayerState]] = None  # the LSTM state carried to the next batch (packed layout)
        self.resume_from: Optional[Path] = None
        self.lr_before: Optional[float] = None
        self.lr_restarted = False  # whether this session's resume restarted the learning rate
        self.last_valid: Optional[Dict[str, float]] = None
        self.valid_losses: Tuple[float, float] = (0.0, 0.0)   # the latest validation's, on every rank
        self.schedule = cfg.new_schedule()
        self.warm_start: Optional[Dict[str, Any]] = None  # where a warm-started run began
        self.skipped_steps = 0        # steps whose gradient was not finite (no update), in all
        self.nonfinite_in_a_row = 0   # the latest of them in a row
        self.window_resumed: Optional[Dict[str, Any]] = None  # the checkpoint's unlogged steps' sums

    def run(self, stop_after: Optional[int] = None) -> Dict[str, Any]:
        """Train until the run's last step (or ``stop_after`` steps of this session)."""
        cfg = self.cfg
        self.setup()
        check_same_settings(cfg, self.ctx)
        self.resume()
        check_every_rank_has_text(self.batches.stream, self.ctx)
        self.record_warm_start()
        self.open_log()
        # wrapped after resume: DDP broadcasts rank 0's (restored) weights when it is built
        self.net = DistributedDataParallel(self.model) if self.ctx.distributed else self.model
        from tqdm import tqdm
        bar = tqdm(total=self.n_steps, initial=self.step_no, disable=not (cfg.progress and self.ctx.is_main),
                   unit="step", dynamic_ncols=True)
        self.window = new_window()
        if self.window_resumed:  # the log line due next averages the steps before the checkpoint too
            self.window.update(weighted_window(self.window_resumed, self.cfg))
        session_steps = 0
        self.t_last = time.perf_counter()
        stopped_by = None
        with StopRequests() as stops:   # SIGTERM, Ctrl-C: finish the step, checkpoint it, stop
            while self.step_no < self.n_steps and (stop_after is None or session_steps < stop_after):
                self.step()
                session_steps += 1
                if self.step_no % cfg.log_every == 0 or self.step_no == self.n_steps:
                    self.log(bar)
                bar.update(1)
                if cfg.eval_every and self.step_no % cfg.eval_every == 0 and self.step_no < self.n_steps:
                    self.last_valid = self.evaluate()
                    self._decay_on_plateau(self.last_valid)
                    self.t_last = time.perf_counter()  # evaluation time is not training time
                late, signalled = _stop_flags(cfg, self.ctx, self.elapsed, stops.requested)
                if late and self.step_no < self.n_steps:
                    self.n_steps = self.step_no  # out of time: this is the last step
                    if self.step_no % cfg.log_every != 0:   # (not known to be the last above: its
                        self.log(bar)                        # steps' loss had no line in log.jsonl)
                    self.log_file.write({"event": "time_limit", "step": self.step_no,
                                         "elapsed_s": round(self.elapsed, 1)})
                if self.step_no % cfg.checkpoint_every == 0 or self.step_no == self.n_steps:
                    self.save()
                    self.t_last = time.perf_counter()
                if signalled and self.step_no < self.n_steps:
                    stopped_by = stops.received or "a signal to another process of the job"
                    self.log_file.write({"event": "stopped", "step": self.step_no, "signal": stopped_by})
                    break
            bar.close()
            summary = self.finish()   # (unfinished: the checkpoint of this step, if not written yet)
        if stopped_by is not None:
            raise TrainingStopped(stopped_by, summary)
        return summary

    def setup(self) -> None:
        """Vocabulary, model, batches, optimizer and sampler; the corpus size and step count."""
        cfg, ctx = self.cfg, self.ctx
        start = self.start.vocab if self.start is not None else None
        # (a warm start from a model's own vocab.txt read the file the check's load had just read)
        self.vocab = load_training_vocabulary(cfg.vocab, notes=ctx.is_main, loaded=(
            (cfg.init_from, start) if cfg.init_from and start is not None else None))
        self.vocab_sha256 = vocabulary_digest(self.vocab)
        torch.manual_seed(cfg.seed)  # the same initial weights on every rank
        self.model = build_model(cfg, self.vocab, self.start).to(ctx.device)
        self.model.train()
        max_chars = self.model.options.char_cnn.max_characters_per_token
        self.batches = _batches(cfg, self.vocab, max_chars, ctx)
        self.optimizer = build_optimizer(cfg, self.model.parameters())
        self.softmax_loss = softmax_loss(len(self.vocab), cfg.n_negative, seed=cfg.seed * 1000 + ctx.rank)
        warn_vocabulary_order(self.vocab, cfg.vocab, self.softmax_loss.name, ctx.is_main)
        warn_uneven_shards(cfg, ctx, line_balance(cfg))
        warn_bf16_not_native(cfg, ctx)
        torch.manual_seed(cfg.seed * 1000 + 17 + ctx.rank)  # dropout: a different stream per rank
        self.read_corpus_stats()
        self.n_steps = total_steps(cfg, ctx.world_size, self.corpus_stats)
        self.autocast: Dict[str, Any] = dict(device_type=ctx.device.type, dtype=torch.bfloat16, enabled=cfg.bf16)
        # exp(training loss): with sampled negatives it is not a perplexity of the model (the sampled
        # softmax normalises over a few thousand words), so it is never labelled like the validation one
        self.train_ppl_key = self.softmax_loss.train_ppl_key

    def read_corpus_stats(self) -> None:
        """The corpus's size (:func:`~elmo.training.corpus_stats.read_corpus_stats`) and what it
        plans: the positions of an epoch, whose rows count pieces unless a resume keeps a run's
        sentences (:meth:`_keep_epoch_rows`)."""
        self.corpus = read_corpus_stats(self.cfg.train, self.stats_path)
        self.corpus_stats = self.corpus.counts
        self.epoch_rows = "pieces"
        self.epoch_positions = max(1, epoch_positions(self.cfg, self.corpus_stats))

    def record_warm_start(self) -> None:
        """A warm-started run's start (:func:`~elmo.training.run_folder.warm_start_of_run`)."""
        if self.cfg.init_from:
            self.warm_start = warm_start_of_run(self.cfg.init_from, self.out_dir, self.resume_from is not None,
                                                self.ctx.is_main)

    def resume(self) -> None:
        """Restore the newest checkpoint, if there is one: weights, optimizer, position, RNGs."""
        cfg, ctx = self.cfg, self.ctx
        if ctx.is_main and self.ckpt_dir.is_dir():
            for stale in self.ckpt_dir.glob(".checkpoint-*.tmp"):  # left by a run killed while saving
                stale.unlink(missing_ok=True)
        check_allow_change(cfg.allow_change)
        self.resume_from = latest_checkpoint(self.ckpt_dir)
        if self.resume_from is None:
            if cfg.lr_restart:
                # The run starts at --lr: that is this command's restart, made. Else its rerun
                # after a kill found no restart recorded and restarted the decayed rate.
                self.schedule.restart = {"step": 0, "lr": self.schedule.lr, "settings": restart_settings(cfg)}
            return
        ckpt = load_checkpoint(self.resume_from)
        self._check_checkpoint_contents(ckpt)
        # Before the settings: a run resumed with another number of processes was told that a
        # setting differed where finetune fits its batch to the processes ("setting batch_size
        # was 3, now 6"), which no flag of the command it was told to rerun could mend.
        if len(ckpt["ranks"]) != ctx.world_size:
            n = len(ckpt["ranks"])
            raise ResumeMismatch(f"cannot resume {self.out_dir}: {self.resume_from} was written by {n} "
                                 f"process{'es' if n > 1 else ''}, and this run has {ctx.world_size}; "
                                 f"resume it with {n} (the number of processes torchrun starts), "
                                 f"or use another --output")
        stored = ckpt.get("config")
        path = self.out_dir / "train_config.json"
        if stored is None and path.exists():
            stored = read_json(path, ResumeMismatch, what="JSON", expected="the run's settings",
                               hint="correct it, or use another --output")
            if not isinstance(stored, dict):
                raise ResumeMismatch(f"{path}: holds no training settings (a JSON object is needed, got "
                                     f"{type(stored).__name__}); correct it, or use another --output")
        cfg = self._take_stored_recipe(ckpt.get("config"))
        changed = check_resume(stored or {}, asdict(cfg), str(self.out_dir))
        check_text_unchanged(self.corpus, self.out_dir, ctx.is_main, (stored or {}).get("output"))
        check_line_split(ckpt.get("line_split", "(unrecorded)"), self.batches.stream.line_split, str(self.out_dir))
        check_vocabulary_unchanged(ckpt.get("vocab_sha256"), self.vocab_sha256, self.cfg.vocab, str(self.out_dir),
                                   self.resume_from.name)
        if ctx.is_main:
            print(f"resuming from checkpoint {ckpt['step']} ({self.resume_from})"
                  + "".join(f"; {c}" for c in changed), file=sys.stderr, flush=True)
        try:
            self.model.load_state_dict(ckpt["model"])
        except RuntimeError as e:  # e.g. a vocabulary of another size, in a checkpoint without its digest
            detail = [line.strip() for line in str(e).splitlines()[1:] if line.strip()] or [str(e)]
            raise CheckpointError(f"{self.resume_from}: its weights do not fit this run's model ({detail[0]}); "
                                  f"rerun with the model and vocabulary it was started with, or use another "
                                  f"--output") from None
        self._check_checkpoint_contents(ckpt, loaded=True)
        load_optimizer_state(self.optimizer, ckpt["optimizer"])  # (the device may have changed)
        self._keep_epoch_rows()
        self.lr_before = self.optimizer.param_groups[0]["lr"]
        self._resume_schedule(ckpt)
        self.step_no, self.tokens_done, self.elapsed = ckpt["step"], ckpt["tokens"], ckpt["elapsed"]
        self.skipped_steps = ckpt.get("skipped_steps", 0)
        mine = ckpt["ranks"][ctx.rank]
        try:   # (what _check_checkpoint_contents cannot tell from the form alone)
            self.batches.load_state_dict(mine["batches"])
            self.state = _state_to(mine["lstm_state"], ctx.device)
            set_rng_state(mine["rng"], ctx.device)
            self.softmax_loss.load_state_dict(mine["sampler"])
        except (ValueError, TypeError, KeyError, RuntimeError) as e:
            raise CheckpointError(f"{self.resume_from}: damaged or not of this run: its position in the "
                                  f"text cannot be restored ({str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}); "
                                  f"delete it to resume from the one before, or use another --output") from e
        self.nonfinite_in_a_row = ckpt.get("nonfinite_in_a_row", 0)
        self.window_resumed = mine.get("log_window")
        if _out_of_time(cfg, ctx, self.elapsed):
            self.n_steps = min(self.n_steps, self.step_no)

    def _check_checkpoint_contents(self, ckpt: Dict[str, Any], loaded: bool = False) -> None:
        """CheckpointError naming the checkpoint where a value of it is not of the form this run
        writes (:func:`~.checkpoint_contents.checkpoint_problem`): restored as it was, a damaged one failed later, in
        a traceback of the code that used it, or resumed without a word."""
        problem = checkpoint_problem(ckpt, RunParts(self.model, self.batches, self.softmax_loss, self.optimizer,
                                                    self.ctx.rank), loaded)
        if problem is not None:
            raise CheckpointError(f"{self.resume_from}: damaged or not of this run: {problem}; delete it to "
                                  f"resume from the one before, or use another --output")

    def _take_stored_recipe(self, stored: Optional[Dict[str, Any]]) -> TrainConfig:
        """The run's config with the accumulator and clip that were not given taken from the
        checkpoint's settings (``stored``), where ``train_config.json`` (which filled them in)
        said otherwise: deleted, it gave the earlier defaults, and another run's file its own
        values, and the resume was refused as a change of setting that no one had made (which
        ``--allow-change clip-norm`` would have made)."""
        def plausible(name: str, value: Any) -> bool:   # (anything else is left to check_resume to name)
            return is_number(value) or (
                value is None and name == "adagrad_init")   # (None: an optimizer without the accumulator)

        taken = {name: stored[name] for name in self.recipe_unset if isinstance(stored, dict) and name in stored
                 and plausible(name, stored[name]) and stored[name] != getattr(self.cfg, name)}
        if taken:
            shown = ", ".join(f"{name} {json.dumps(value)}" for name, value in taken.items())
            if self.ctx.is_main:
                print(f"note: {self.out_dir / 'train_config.json'}: missing or not this run's settings; the "
                      f"checkpoint's are taken ({shown})", file=sys.stderr, flush=True)
            self.cfg = dataclasses.replace(self.cfg, **taken)
        return self.cfg

    def _keep_epoch_rows(self) -> None:
        """A resumed bucketed run begun when an epoch counted sentences keeps the steps it
        planned: the pieces' count (larger where sentences are over MAX_PIECE_LENGTH words)
        would change its length mid-run, and train a finished run again."""
        cfg = self.cfg
        if not (self.corpus.begun_counting_sentences and cfg.layout == "bucketed" and cfg.max_steps is None):
            return
        self.epoch_rows = "sentences"
        planned = total_steps(cfg, self.ctx.world_size, self.corpus_stats, rows="sentences")
        if planned != self.n_steps and self.ctx.is_main:
            print(f"note: this run began counting its epochs in sentences, not in the rows they make "
                  f"(sentences over {MAX_PIECE_LENGTH} words are cut into pieces); it keeps its "
                  f"{planned} steps ({self.n_steps} in pieces)", file=sys.stderr, flush=True)
        self.n_steps = planned

    def _resume_schedule(self, ckpt: Dict[str, Any]) -> None:
        """The learning rate to go on with: the run's lr when it differs (only when allowed:
        --allow-change lr) or on --lr-restart, else the schedule's decayed one.

        A restart is made once: it is recorded in the schedule
        (:class:`~elmo.training.schedule.PlateauDecay`'s ``restart``), and a checkpoint that
        holds the record of this same command's restart was written after it, so the rerun of a
        killed session goes on with the schedule (the rate decayed since) instead of restarting
        it again. A later phase with other settings (a longer --max-steps) restarts anew."""
        cfg, ctx = self.cfg, self.ctx
        stored = ckpt.get("lr_schedule") or {}
        settings = restart_settings(cfg)
        made = stored.get("restart") or {}
        again = cfg.lr_restart and made.get("settings") == settings   # this command's restart is made
        restart = cfg.lr_restart and not again
        if stored:
            self.schedule.load_state_dict(stored, restart=restart)
        if restart:
            self.schedule.restart = {"step": ckpt["step"], "lr": self.schedule.lr, "settings": settings}
        self.lr_restarted = restart
        self._set_lr(self.schedule.lr)
        if restart and ctx.is_main:
            print(f"learning rate restarted at {self.schedule.lr:g} (it was {self.lr_before:g})",
                  file=sys.stderr, flush=True)
        elif again and ctx.is_main:
            assert self.resume_from is not None   # (resume() found the checkpoint read here)
            print(f"learning rate not restarted again: {self.resume_from.name} was written after this command's "
                  f"restart at step {made['step']} (to {made['lr']:g}); the schedule goes on at "
                  f"{self.schedule.lr:g}", file=sys.stderr, flush=True)

    def _set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def open_log(self) -> None:
        """Write the run's config and corpus size, open the learning curve, read the held-out text."""
        cfg, ctx = self.cfg, self.ctx
        # read before the run's files are written: a run refused for its held-out text left
        # a config and a log behind, as if it had begun
        self.valid_sentences = list(iter_file_sentences(expand_paths(cfg.valid))) if cfg.valid else []
        if cfg.valid and not self.valid_sentences:  # else the run would end with no validation, silently
            raise ValueError(f"--valid {' '.join(cfg.valid)}: holds no sentence to validate on")
        if ctx.is_main:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            with writing(self.out_dir / "train_config.json"):
                atomic_write_text(self.out_dir / "train_config.json", cfg.to_json() + "\n")
            write_corpus_stats(self.stats_path, self.corpus, self.epoch_rows)
        resumed = self.resume_from is not None
        self.log_file = RunLog(self.out_dir / "log.jsonl", ctx.is_main, self.step_no if resumed else None)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        if ctx.is_main and not resumed:
            self.log_file.write({
                "event": "start", "step": 0, "params": self.n_params,
                "params_bilm": sum(p.numel() for p in self.model.bilm.parameters()), "steps": self.n_steps,
                "world_size": ctx.world_size, "corpus": self.corpus_stats, "device": str(ctx.device),
                "threads": torch.get_num_threads()})
        elif ctx.is_main:
            assert self.resume_from is not None   # (resumed)
            self.log_file.write({"event": "resume", "step": self.step_no, "from": self.resume_from.name,
                                 "lr": self.schedule.lr, "lr_before": self.lr_before,
                                 "lr_restart": self.lr_restarted, "state_reset_every": cfg.state_reset_every})

    def step(self) -> None:
        """One batch: forward, backward, clip, optimizer step; advances the position. It reads
        the device once (:func:`read_step_figures`): each read waits for the GPU's queue to drain."""
        cfg, ctx = self.cfg, self.ctx
        host_batch = self.batches.next_batch()   # (its counts are read here, not from the device)
        batch = host_batch.to(ctx.device)
        if cfg.layout == "bucketed":
            self.state = None
        elif cfg.state_reset_every and self.state is not None:
            self.state = reset_rows(self.state, self.step_no, cfg.state_reset_every, ctx.rank * cfg.batch_size)
        negatives = self.softmax_loss.candidates(ctx.device)
        mean_over = self._mean_over(host_batch)
        with torch.autocast(**self.autocast):
            out = self.net(batch, self.state, negatives, mean_over=mean_over)
        out["loss"].backward()
        assert cfg.clip_norm is not None   # (filled in by with_recipe_defaults in __init__)
        gnorm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm)
        loss, norm = read_step_figures(out["loss"], gnorm)
        # The same norm on every rank (DDP has averaged the gradients), so all skip together.
        finite = math.isfinite(norm)  # a NaN or infinite loss makes it non-finite too
        if finite:
            self.optimizer.step()   # (fused: its writes are counted by weight_cache's hook)
        self.optimizer.zero_grad(set_to_none=True)
        # a skipped step's state would carry its NaNs into every later batch: those rows start afresh
        self.state = out["state"] if cfg.layout == "packed" and finite else None
        self.step_no += 1
        # packed layout: every batch is full; bucketed counts its own
        n_tok = host_batch.n_tokens if cfg.layout == "bucketed" else cfg.batch_size * cfg.unroll_steps
        now = time.perf_counter()
        self.elapsed += now - self.t_last
        self.t_last = now
        self.window["tokens"] += n_tok
        if cfg.layout == "bucketed":  # each rank's rows have their own lengths: added up at the next sync
            self.tokens_unsynced += n_tok
        else:
            self.tokens_done += n_tok * ctx.world_size
        if finite:
            # the step's loss is a mean over this many targets a direction: the log line weighs
            # it by them, so that it is the mean over the window's targets (bucketed batches
            # differ in size; a mean of the steps' means weighed a short batch's targets more)
            weight = mean_over[0] if mean_over else float(n_tok)
            self.window["loss"] += loss * weight
            self.window["weight"] += weight
            self.window["gnorm"] += norm
            self.window["n"] += 1
            self.nonfinite_in_a_row = 0
        else:
            self._skipped(loss, norm)

    def _mean_over(self, batch) -> Optional[Tuple[float, float]]:
        """The target counts this process divides its summed losses by: the global batch's
        per process, where the processes' batches hold different numbers of targets
        (bucketed layout, several processes); None (the batch's own) otherwise. ``batch``: the
        batch on the host (its masks summed there wait for no device).

        DDP averages the processes' gradients: of their own means, that weighted a target of
        a process with short sentences more than one of a process with long ones, unlike one
        process on the global batch, which the run is meant to equal."""
        if self.cfg.layout != "bucketed" or not self.ctx.distributed:
            return None  # (packed batches are full: every process holds the same count)
        total_f, total_b = distributed.all_reduce_sum(self.ctx, [float(batch.fwd_mask.sum()),
                                                                 float(batch.bwd_mask.sum())])
        return total_f / self.ctx.world_size, total_b / self.ctx.world_size

    def _skipped(self, loss: float, gnorm: float) -> None:
        """Log a step whose gradient was not finite (no update was applied); stop the run when
        :data:`~elmo.training.divergence.MAX_NONFINITE_STEPS` such steps come in a row (its weights are those of the last
        finite step, and so are any checkpoints written meanwhile)."""
        self.skipped_steps += 1
        self.window["skipped"] += 1
        self.nonfinite_in_a_row += 1
        self.log_file.write({"event": "nonfinite", "step": self.step_no, "loss": loss,
                             "grad_norm": gnorm})
        if self.nonfinite_in_a_row >= MAX_NONFINITE_STEPS:
            raise FloatingPointError(diverged_message(self.step_no, self.nonfinite_in_a_row, self.ckpt_dir))

    def _sync_tokens(self) -> None:
        """Add every rank's unsynced tokens to ``tokens_done`` (bucketed layout; the packed one
        counts them exactly as it goes). Each rank's count times the ranks, as before, was off
        by how the ranks' batch lengths differ: the logged tokens and epochs and the model's
        metadata."""
        if self.cfg.layout == "bucketed":  # (the same on every rank: all join the all-reduce)
            (total,) = distributed.all_reduce_sum(self.ctx, [float(self.tokens_unsynced)])
            self.tokens_done += int(total)
            self.tokens_unsynced = 0

    def log(self, bar) -> None:
        """One learning-curve record of the steps since the last one (averaged over ranks)."""
        self._sync_tokens()
        w = self.window
        totals = distributed.all_reduce_sum(self.ctx, [w["loss"], w["weight"], w["tokens"]])
        record, shown = train_record(w, totals, self.step_no, self.tokens_done, self.epoch_positions, self.elapsed,
                                     self.train_ppl_key)
        if shown is not None:
            bar.set_postfix(shown, refresh=False)
        self.log_file.write(record)
        self.window = new_window()

    def evaluate(self) -> Optional[Dict[str, float]]:
        """Held-out perplexity (when there is held-out text), logged; the result on rank 0, None
        on the others and without held-out text.

        Every rank scores its share of the sentences (every W-th by length) and the sums are
        added up: the stateless figure of the whole text, W times sooner. (Rank 0 scoring all
        of it while the others waited in a barrier could outlast the process group's timeout on
        a large held-out text, ending the job, and left W - 1 devices idle.)"""
        cfg, ctx = self.cfg, self.ctx
        self._sync_tokens()
        if not self.valid_sentences:
            return None
        mine = sorted(self.valid_sentences, key=len)[ctx.rank::ctx.world_size]
        # exact fp32 even under --bf16: validation measures the weights as they are used
        sums = likelihood_sums(self.model, mine, self.vocab, cfg.eval_batch_size, ctx.device)
        result = {**perplexity_from_sums(distributed.all_reduce_sum(ctx, sums), len(self.valid_sentences)),
                  "unk_targets": unk_targets(self.valid_sentences, self.vocab)}
        self.valid_losses = (result["loss_fwd"], result["loss_bwd"])   # (every rank's: see finish)
        if not ctx.is_main:
            return None
        if (self.step_no, result["sentences"], result["targets"]) not in self.log_file.evals:
            self.log_file.write({"event": "eval", "step": self.step_no, "split": "valid",
                                 "epoch": self.tokens_done / self.epoch_positions,
                                 **{k: round(v, 4) for k, v in result.items()}})
        return result

    def _decay_on_plateau(self, result: Optional[Dict[str, float]]) -> None:
        """Rank 0 decides from its validation run; every rank takes the new rate."""
        ctx = self.ctx
        lowered = 1.0 if (result is not None and self.schedule.update(result["ppl"])) else 0.0
        if distributed.all_reduce_sum(ctx, [lowered])[0] > 0:
            if not ctx.is_main:  # the same decision on every rank, so the same rate
                self.schedule.decay()
            self._set_lr(self.schedule.lr)
            self.log_file.write({"event": "lr_decay", "step": self.step_no, "lr": self.schedule.lr,
                                 "best_ppl": round(self.schedule.best or 0.0, 4)})

    def save(self) -> None:
        """A checkpoint of the current step: weights, optimizer and every rank's position. The
        newest ``keep_checkpoints`` are kept, and none is deleted while steps are being skipped."""
        ctx = self.ctx
        self._sync_tokens()
        mine = {"batches": self.batches.state_dict(), "lstm_state": _state_to(self.state, "cpu"),
                "rng": rng_state(ctx.device), "sampler": self.softmax_loss.state_dict(),
                "log_window": {k: self.window[k] for k in (*WINDOW_SUMS, SINCE_RESUME) if k in self.window}}
        ranks = distributed.gather_objects(ctx, mine)
        failed: Optional[OSError] = None
        try:
            if ctx.is_main:
                self._save_checkpoint(ranks)
        except OSError as e:   # (a full disk: the others, gone on to the next step's all-reduce,
            failed = e         # ended in the process group's traceback; now each says this line)
        distributed.raise_together(ctx, failed)

    def _save_checkpoint(self, ranks) -> None:
        """Rank 0's part of :meth:`save`: the checkpoint file, and the older ones pruned."""
        save_checkpoint(self.ckpt_dir, self.step_no, {
            "step": self.step_no, "tokens": self.tokens_done, "elapsed": self.elapsed,
            "skipped_steps": self.skipped_steps, "nonfinite_in_a_row": self.nonfinite_in_a_row,
            "vocab_sha256": self.vocab_sha256,
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "ranks": ranks,
            "lr_schedule": self.schedule.state_dict(), "config": self.cfg.to_json(),
            "line_split": self.batches.stream.line_split},
            # during a run of non-finite steps, prune nothing: the older checkpoints may be the
            # last ones before the update that broke the model (see divergence.diverged_message)
            keep=0 if self.nonfinite_in_a_row else self.cfg.keep_checkpoints)

    def trained_figures(self) -> TrainedFigures:
        """What the run has trained on so far, from its own counters (restored by a resume, so
        they cover every session): ``steps`` taken, ``tokens`` (input positions, as the log
        counts them; :func:`epoch_positions`) and ``epochs``, those tokens over one pass's
        (a fraction where ``--max-steps`` or ``--max-seconds`` ended the run early). The
        bucketed layout's tokens are those of the last sync (:meth:`finish` syncs first)."""
        return {"steps": self.step_no, "tokens": self.tokens_done,
                "epochs": round(self.tokens_done / self.epoch_positions, 4)}

    def finish(self) -> Dict[str, Any]:
        """The session's summary; at the run's end also the final evaluation and the exported model."""
        cfg, ctx, step = self.cfg, self.ctx, self.step_no
        self._sync_tokens()
        finished = step >= self.n_steps
        if not finished and step % cfg.checkpoint_every != 0:
            self.save()  # stopped early on purpose: keep the exact position
        summary: Dict[str, Any] = {"step": step, "steps": self.n_steps, "finished": finished,
                                   "tokens": self.tokens_done, "epochs": self.trained_figures()["epochs"],
                                   "elapsed_s": self.elapsed,
                                   "tokens_per_s": self.tokens_done / max(self.elapsed, 1e-9),
                                   "params": self.n_params, "skipped_steps": self.skipped_steps}
        if not finished:
            return summary
        if self.nonfinite_in_a_row:  # (the same count on every rank: they all stop here)
            raise FloatingPointError(diverged_message(self.step_no, self.nonfinite_in_a_row, self.ckpt_dir,
                                                      at_end=True))
        self.last_valid = self.evaluate()
        if cfg.export:
            check_outputs_finite(self.model, self.vocab, self.valid_sentences, self.valid_losses, cfg.train,
                                 cfg.eval_batch_size, ctx.device, step, self.ckpt_dir)
        if self.last_valid:
            summary["valid"] = self.last_valid
        failed: Optional[OSError] = None
        try:
            if cfg.export and ctx.is_main:
                summary["model"] = self._export()
        except OSError as e:   # (a full disk: the others waited in a barrier and ended in its traceback)
            failed = e
        distributed.raise_together(ctx, failed)   # (the barrier: every rank returns once the model is written)
        return summary

    def _export(self) -> str:
        """Rank 0's export of the finished model to ``OUTPUT/model``, with its metadata; the folder."""
        cfg, step = self.cfg, self.step_no
        trained = self.trained_figures()   # (synced in finish, on every rank)
        meta = {"trained_on": [str(Path(p).resolve()) for p in expand_paths(cfg.train)], "steps": step,
                "skipped_steps": self.skipped_steps,
                "tokens": self.tokens_done, "epochs_trained": trained["epochs"],
                "elapsed_s": round(self.elapsed, 1), "params": self.n_params,
                "train_config": asdict(cfg), **warm_start_metadata(self.warm_start, self.tokens_done),
                **cfg.metadata}
        if self.export_metadata is not None:
            meta.update(self.export_metadata(trained))
        with writing(self.out_dir / "model"):
            export_model(self.model, self.vocab, self.out_dir / "model", meta)
        return str(self.out_dir / "model")
