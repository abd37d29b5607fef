"""The training loop: stateful LM batches, shared (sampled) softmax, Adagrad, exact resume.

Recipe defaults are the original's: Adagrad (lr 0.2, initial accumulator 1.0), global
gradient-norm clip 10, dropout 0.1, 8192 shared negatives, batch 128 rows x 20 steps per
process. One ``step`` is one batch on every process; with data parallelism the gradients are
averaged over processes (DistributedDataParallel), so W processes of B rows train like one
process of W x B rows.

Everything a run writes goes under ``output``:
``train_config.json``, ``log.jsonl`` (the learning curve), ``checkpoints/`` and, at the end,
``model/`` (see :mod:`elmo.training.export`). Starting again with the same ``output``
resumes from the newest checkpoint.
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch
from torch.nn.parallel import DistributedDataParallel

from ..allocator import keep_freed_memory
from ..config import ElmoOptions
from ..data.corpus import CorpusStream, count_tokens, expand_paths, iter_file_sentences
from ..data.lm_batches import BucketedLMBatches, PackedLMBatches
from ..modules.softmax import Candidates, LogUniformSampler
from ..vocab import Vocabulary
from ..weights import atomic_write_text
from . import distributed
from .checkpoint import latest_checkpoint, load_checkpoint, rng_state, save_checkpoint, set_rng_state, writing
from .evaluate import perplexity, reset_rows
from .export import export_model, load_language_model, options_with_training_keys
from .model import LanguageModel
from .resume import check_allow_change, check_resume


@dataclass
class TrainConfig:
    """Everything that defines a training run (saved as ``train_config.json``)."""

    train: List[str]                      # files, globs or folders; one tokenized sentence a line
    vocab: str                            # vocabulary file (words by descending frequency)
    output: str                           # run folder
    options: Dict[str, Any] = field(default_factory=dict)  # model options (lstm, char_cnn)
    valid: List[str] = field(default_factory=list)  # held-out text for perplexity
    init_from: Optional[str] = None       # a trained model folder to continue from
    batch_size: int = 128                 # rows per process
    unroll_steps: int = 20
    layout: str = "packed"                # "packed" (stateful) or "bucketed" (stateless)
    state_reset_every: int = 0            # packed: zero each row's state every K batches, staggered (0 = never)
    epochs: float = 10.0
    max_steps: Optional[int] = None       # overrides epochs
    max_seconds: Optional[float] = None   # stop (and finish: evaluate, export) after this much training time
    optimizer: str = "adagrad"            # or "adam"
    lr: float = 0.2
    adagrad_init: float = 1.0
    clip_norm: float = 10.0
    dropout: float = 0.1
    n_negative: int = 8192                # shared negatives per batch; 0 = full softmax
    shuffle: bool = True
    seed: int = 0
    checkpoint_every: int = 1000          # steps
    keep_checkpoints: int = 3
    log_every: int = 20                   # steps
    eval_every: int = 0                   # steps; 0 = only at the end
    eval_batch_size: int = 32
    device: str = "auto"
    bf16: bool = False
    progress: bool = True
    export: bool = True
    metadata: Dict[str, Any] = field(default_factory=dict)  # extra facts for metadata.json
    allow_change: List[str] = field(default_factory=list)  # settings a resume may change (see resume.py)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TrainConfig":
        return cls(**json.loads(text))


def _batches(cfg: TrainConfig, vocab: Vocabulary, max_chars: int, ctx: distributed.Context):
    stream = CorpusStream(cfg.train, seed=cfg.seed, shuffle=cfg.shuffle, rank=ctx.rank,
                          world_size=ctx.world_size)
    if cfg.layout == "packed":
        return PackedLMBatches(stream, vocab, cfg.batch_size, cfg.unroll_steps, max_chars)
    if cfg.layout == "bucketed":
        return BucketedLMBatches(stream, vocab, cfg.batch_size, max_chars, seed=cfg.seed + 7 * ctx.rank)
    raise ValueError(f"layout must be 'packed' or 'bucketed', got {cfg.layout!r}")


def _optimizer(cfg: TrainConfig, params) -> torch.optim.Optimizer:
    if cfg.optimizer == "adagrad":
        return torch.optim.Adagrad(params, lr=cfg.lr, initial_accumulator_value=cfg.adagrad_init)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr)
    raise ValueError(f"optimizer must be 'adagrad' or 'adam', got {cfg.optimizer!r}")


def total_steps(cfg: TrainConfig, world_size: int, corpus_stats: Dict[str, int]) -> int:
    """Steps for ``cfg.epochs`` passes (or ``max_steps``)."""
    if cfg.max_steps is not None:
        return cfg.max_steps
    if cfg.layout == "packed":
        per_step = cfg.batch_size * cfg.unroll_steps * world_size
        return max(1, math.ceil(cfg.epochs * corpus_stats["tokens"] / per_step))
    return max(1, math.ceil(cfg.epochs * corpus_stats["sentences"] / (cfg.batch_size * world_size)))


def build_model(cfg: TrainConfig, vocab: Vocabulary) -> LanguageModel:
    """A fresh model from ``cfg.options``, or the trained model ``cfg.init_from``."""
    if cfg.init_from:
        model, model_vocab = load_language_model(cfg.init_from, dropout=cfg.dropout)
        if model_vocab.words != vocab.words:
            raise ValueError(f"{cfg.vocab}: not the vocabulary of {cfg.init_from}")
        return model
    options = options_with_training_keys(
        ElmoOptions.from_dict(cfg.options), n_tokens_vocab=len(vocab), unroll_steps=cfg.unroll_steps,
        dropout=cfg.dropout, n_negative_samples_batch=cfg.n_negative or None)
    return LanguageModel(options, len(vocab), vocab.bos, vocab.eos, cfg.dropout)


def load_training_vocabulary(path: str | Path) -> Vocabulary:
    """The vocabulary file, with its counts when ``elmo vocab build`` wrote them beside it
    (``NAME.counts.tsv``), so the exported model keeps them."""
    vocab = Vocabulary.load(path)
    counts_file = Path(path).with_name(Path(path).stem + ".counts.tsv")
    if vocab.counts is None and counts_file.exists():
        with_counts = Vocabulary.load(counts_file)
        if with_counts.words == vocab.words:
            return with_counts
    return vocab


class _Log:
    """The JSON-lines learning curve. On resume, lines past the checkpoint's step are dropped
    (a killed run may have logged steps that will be trained again)."""

    def __init__(self, path: Path, enabled: bool, resume_step: Optional[int]):
        self.path, self.enabled = path, enabled
        if enabled and resume_step is not None and path.exists():
            kept = [line for line in path.read_text(encoding="utf-8").splitlines()
                    if line.strip() and json.loads(line).get("step", 0) <= resume_step]
            with writing(path):
                atomic_write_text(path, "".join(line + "\n" for line in kept))
        elif enabled and resume_step is None:
            with writing(path):
                atomic_write_text(path, "")

    def write(self, record: Dict[str, Any]) -> None:
        if self.enabled:
            with writing(self.path), open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record, sort_keys=True) + "\n")


def _state_to(state, device):
    return None if state is None else [(c.to(device), h.to(device)) for c, h in state]


def _out_of_time(cfg: TrainConfig, ctx: distributed.Context, elapsed: float) -> bool:
    """Whether the time budget is spent; every rank takes rank 0's answer, so all stop together."""
    if cfg.max_seconds is None:
        return False
    flag = 1.0 if (ctx.is_main and elapsed >= cfg.max_seconds) else 0.0
    return distributed.all_reduce_sum(ctx, [flag])[0] > 0


def train(cfg: TrainConfig, stop_after: Optional[int] = None) -> Dict[str, Any]:
    """Train (or resume) the run ``cfg.output``. Returns a summary of the run.

    ``stop_after``: return after this many steps of this session (the run stays resumable;
    checkpoints are written as configured, plus one at the stopping step).
    """
    ctx = distributed.setup(cfg.device)
    if ctx.device.type == "cpu":
        keep_freed_memory()  # no page-fault storm from re-allocating each step's activations
    try:
        return _train(cfg, ctx, stop_after)
    finally:
        distributed.teardown(ctx)


def _train(cfg: TrainConfig, ctx: distributed.Context, stop_after: Optional[int]) -> Dict[str, Any]:
    out_dir = Path(cfg.output)
    ckpt_dir = out_dir / "checkpoints"
    vocab = load_training_vocabulary(cfg.vocab)
    torch.manual_seed(cfg.seed)  # the same initial weights on every rank
    model = build_model(cfg, vocab).to(ctx.device)
    model.train()
    max_chars = model.options.char_cnn.max_characters_per_token
    batches = _batches(cfg, vocab, max_chars, ctx)
    optimizer = _optimizer(cfg, model.parameters())
    sampler = (LogUniformSampler(len(vocab), seed=cfg.seed * 1000 + ctx.rank)
               if 0 < cfg.n_negative < len(vocab) else None)
    n_sampled = cfg.n_negative
    torch.manual_seed(cfg.seed * 1000 + 17 + ctx.rank)  # dropout: a different stream per rank

    stats_path = out_dir / "corpus_stats.json"
    if stats_path.exists():
        corpus_stats = json.loads(stats_path.read_text())
    else:
        corpus_stats = count_tokens(cfg.train)
    n_steps = total_steps(cfg, ctx.world_size, corpus_stats)

    step, tokens_done, elapsed, state = 0, 0, 0.0, None
    if ctx.is_main and ckpt_dir.is_dir():
        for stale in ckpt_dir.glob(".checkpoint-*.tmp"):  # left by a run killed while saving
            stale.unlink(missing_ok=True)
    check_allow_change(cfg.allow_change)
    resume_from = latest_checkpoint(ckpt_dir)
    if resume_from is not None:
        ckpt = load_checkpoint(resume_from)
        stored = ckpt.get("config")
        if stored is None and (out_dir / "train_config.json").exists():
            stored = json.loads((out_dir / "train_config.json").read_text(encoding="utf-8"))
        changed = check_resume(stored or {}, asdict(cfg), str(out_dir))
        if ctx.is_main:
            print(f"resuming from checkpoint {ckpt['step']} ({resume_from})"
                  + "".join(f"; {c}" for c in changed), file=sys.stderr, flush=True)
        if len(ckpt["ranks"]) != ctx.world_size:
            raise ValueError(f"{resume_from} was written by {len(ckpt['ranks'])} processes; "
                             f"resume it with the same number")
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        lr_before = optimizer.param_groups[0]["lr"]
        for group in optimizer.param_groups:  # the run's lr wins (it differs only when allowed: --allow-change lr)
            group["lr"] = cfg.lr
        step, tokens_done, elapsed = ckpt["step"], ckpt["tokens"], ckpt["elapsed"]
        mine = ckpt["ranks"][ctx.rank]
        batches.load_state_dict(mine["batches"])
        state = _state_to(mine["lstm_state"], ctx.device)
        set_rng_state(mine["rng"], ctx.device)
        if sampler is not None:
            sampler.load_state_dict(mine["sampler"])
        if _out_of_time(cfg, ctx, elapsed):
            n_steps = min(n_steps, step)
    if ctx.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        with writing(out_dir / "train_config.json"):
            atomic_write_text(out_dir / "train_config.json", cfg.to_json() + "\n")
        with writing(stats_path):
            atomic_write_text(stats_path, json.dumps(corpus_stats) + "\n")
    log = _Log(out_dir / "log.jsonl", ctx.is_main, step if resume_from is not None else None)
    valid_sentences = list(iter_file_sentences(expand_paths(cfg.valid))) if cfg.valid else []

    n_params = sum(p.numel() for p in model.parameters())
    if ctx.is_main and resume_from is None:
        log.write({"event": "start", "step": 0, "params": n_params, "params_bilm": sum(
            p.numel() for p in model.bilm.parameters()), "steps": n_steps, "world_size": ctx.world_size,
            "corpus": corpus_stats, "device": str(ctx.device), "threads": torch.get_num_threads()})
    elif ctx.is_main:
        log.write({"event": "resume", "step": step, "from": resume_from.name, "lr": cfg.lr, "lr_before": lr_before,
                   "state_reset_every": cfg.state_reset_every})

    net = DistributedDataParallel(model) if ctx.distributed else model
    autocast = dict(device_type=ctx.device.type, dtype=torch.bfloat16, enabled=cfg.bf16)
    per_step_tokens = cfg.batch_size * cfg.unroll_steps  # packed layout; bucketed counts its own
    # exp(training loss): with sampled negatives it is not a perplexity of the model (the sampled
    # softmax normalises over a few thousand words), so it is never labelled like the validation one
    train_ppl_key = "sampled_ppl" if sampler is not None else "train_ppl"

    def save(step_now: int) -> None:
        mine = {"batches": batches.state_dict(), "lstm_state": _state_to(state, "cpu"),
                "rng": rng_state(ctx.device), "sampler": sampler.state_dict() if sampler else None}
        ranks = distributed.gather_objects(ctx, mine)
        if ctx.is_main:
            save_checkpoint(ckpt_dir, step_now, {
                "step": step_now, "tokens": tokens_done, "elapsed": elapsed,
                "model": model.state_dict(), "optimizer": optimizer.state_dict(), "ranks": ranks,
                "config": cfg.to_json()}, keep=cfg.keep_checkpoints)

    def evaluate(step_now: int) -> Optional[Dict[str, float]]:
        result = None
        if ctx.is_main and valid_sentences:
            result = perplexity(model, valid_sentences, vocab, cfg.eval_batch_size, ctx.device,
                                torch.bfloat16 if cfg.bf16 else None)
            log.write({"event": "eval", "step": step_now, "split": "valid", "epoch": tokens_done / corpus_stats["tokens"],
                       **{k: round(v, 4) for k, v in result.items()}})
        distributed.barrier(ctx)
        return result

    from tqdm import tqdm
    bar = tqdm(total=n_steps, initial=step, disable=not (cfg.progress and ctx.is_main),
               unit="step", dynamic_ncols=True)
    window = {"loss": 0.0, "n": 0, "tokens": 0, "t0": time.perf_counter(), "gnorm": 0.0}
    session_steps = 0
    last_valid = None
    t_last = time.perf_counter()
    while step < n_steps and (stop_after is None or session_steps < stop_after):
        batch = batches.next_batch().to(ctx.device)
        if cfg.layout == "bucketed":
            state = None
        elif cfg.state_reset_every and state is not None:
            state = reset_rows(state, step, cfg.state_reset_every, ctx.rank * cfg.batch_size)
        negatives = Candidates.draw(sampler, n_sampled, ctx.device) if sampler is not None else None
        with torch.autocast(**autocast):
            out = net(batch, state, negatives)
        out["loss"].backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        state = out["state"] if cfg.layout == "packed" else None
        step += 1
        session_steps += 1
        n_tok = batch.n_tokens if cfg.layout == "bucketed" else per_step_tokens
        now = time.perf_counter()
        elapsed += now - t_last
        t_last = now
        window["loss"] += float(out["loss"].detach())
        window["gnorm"] += float(gnorm)
        window["n"] += 1
        window["tokens"] += n_tok
        tokens_done += n_tok * ctx.world_size

        if step % cfg.log_every == 0 or step == n_steps:
            loss_sum, tok_sum = distributed.all_reduce_sum(ctx, [window["loss"], window["tokens"]])
            dt = max(time.perf_counter() - window["t0"], 1e-9)
            loss = loss_sum / (window["n"] * ctx.world_size)
            record = {"event": "train", "step": step, "epoch": round(tokens_done / corpus_stats["tokens"], 4),
                      "loss": round(loss, 5), train_ppl_key: round(math.exp(min(loss, 50)), 3),
                      "tokens_per_s": round(tok_sum / dt, 1), "grad_norm": round(window["gnorm"] / window["n"], 4),
                      "tokens": tokens_done, "elapsed_s": round(elapsed, 2)}
            log.write(record)
            bar.set_postfix({"tok/s": f"{record['tokens_per_s']:.0f}", "loss": f"{loss:.3f}",
                             train_ppl_key.replace("_", "-"): f"{record[train_ppl_key]:.1f}"}, refresh=False)
            window = {"loss": 0.0, "n": 0, "tokens": 0, "t0": time.perf_counter(), "gnorm": 0.0}
        bar.update(1)
        if cfg.eval_every and step % cfg.eval_every == 0 and step < n_steps:
            last_valid = evaluate(step)
            t_last = time.perf_counter()  # evaluation time is not training time
        if _out_of_time(cfg, ctx, elapsed) and step < n_steps:
            n_steps = step  # out of time: this is the last step
            log.write({"event": "time_limit", "step": step, "elapsed_s": round(elapsed, 1)})
        if step % cfg.checkpoint_every == 0 or step == n_steps:
            save(step)
            t_last = time.perf_counter()
    bar.close()
    finished = step >= n_steps
    if not finished and step % cfg.checkpoint_every != 0:
        save(step)  # stopped early on purpose: keep the exact position
    summary: Dict[str, Any] = {"step": step, "steps": n_steps, "finished": finished, "tokens": tokens_done,
                               "elapsed_s": elapsed, "tokens_per_s": tokens_done / max(elapsed, 1e-9),
                               "params": n_params}
    if finished:
        last_valid = evaluate(step)
        if last_valid:
            summary["valid"] = last_valid
        if cfg.export and ctx.is_main:
            meta = {"trained_on": [str(p) for p in expand_paths(cfg.train)], "steps": step,
                    "tokens": tokens_done, "elapsed_s": round(elapsed, 1), "params": n_params,
                    "train_config": asdict(cfg), **cfg.metadata}
            with writing(out_dir / "model"):
                export_model(model, vocab, out_dir / "model", meta)
            summary["model"] = str(out_dir / "model")
        distributed.barrier(ctx)
    return summary
