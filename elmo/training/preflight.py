"""The checks a training run makes once it is set up, before its first step: that every process
was started with the same settings and has text to read, and the warnings on what would make
the run slower or its epochs uneven (shards shared out unevenly, bfloat16 emulated, a
vocabulary out of frequency order). The checks of the run folder and of the text it is given,
before anything is loaded, are :mod:`.run_folder`'s; those of a resume, :mod:`.resume`'s."""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Optional

import torch

from .. import runtime
from ..data.corpus import CorpusStream, expand_paths, line_shares, shard_shares
from ..vocab import Vocabulary
from . import distributed
from .config import TrainConfig

#: How much larger than the smallest a process's part of an epoch may be before it is said.
UNEVEN_SHARDS = 1.05

#: Settings each process may have its own value of: ``auto`` picks each one's GPU, and only
#: rank 0 shows progress and writes the export's metadata (finetune's holds the perplexity
#: each process measured before, which rounding may tell apart).
PER_PROCESS = frozenset({"device", "progress", "metadata"})


def warn_uneven_shards(cfg: TrainConfig, ctx: distributed.Context, unit: str) -> None:
    """Say so when the processes read whole shards (at least as many files as processes)
    and their parts of an epoch differ in size: every process reads as many rows a step as
    the others, so the one with the smaller part goes through it again while the others are
    still in theirs, and an epoch (the steps of one pass over the text) reads some text twice
    and some not at all (3 equal files on 2 processes, not shuffled: a sixth of the text
    twice, another sixth never). Nothing said it; the run is left as it is (a resumed run's
    position depends on the split). Likewise where unshuffled lines are cut into blocks of
    about equal tokens (or rows) that a few or long lines keep apart. ``unit``: what those
    blocks balance (:func:`~elmo.training.trainer.line_balance`)."""
    if not (ctx.is_main and ctx.distributed):
        return
    uneven = "each reads as much a step as the others, so an epoch reads some text twice and some not at all"
    shares = shard_shares(cfg.train, ctx.world_size, seed=cfg.seed, shuffle=cfg.shuffle)
    if shares is not None and max(shares) > UNEVEN_SHARDS * max(1, min(shares)):
        n = len(expand_paths(cfg.train))
        print(f"warning: the training text's {n} files are shared out whole among the {ctx.world_size} "
              f"processes, and their parts of an epoch differ in size ({min(shares):,} to {max(shares):,} "
              f"bytes): {uneven}; give files of equal size in a number that {ctx.world_size} divides, or "
              f"one file (whose lines are shared out in even parts)", file=sys.stderr, flush=True)
    shares = line_shares(cfg.train, ctx.world_size, shuffle=cfg.shuffle, balance=unit)
    if shares is not None and max(shares) > UNEVEN_SHARDS * max(1, min(shares)):
        print(f"warning: the training text's lines are cut into a block of consecutive lines for each of the "
              f"{ctx.world_size} processes, and the blocks cannot hold about the same {unit} (a few lines, "
              f"or long ones: {min(shares):,} to {max(shares):,} {unit} an epoch): {uneven}; give more text, "
              f"start fewer processes, or shuffle", file=sys.stderr, flush=True)


def check_same_settings(cfg: TrainConfig, ctx: distributed.Context) -> None:
    """Refuse, on every process at once, a job whose processes were started with other
    settings than rank 0's (torchrun on several machines, each given its own command
    line). DistributedDataParallel checks only the weights' shapes: another --lr, --seed,
    --dropout, --batch-size or text on one machine trained on without a word, its weights
    drifting from rank 0's, which alone are saved; another --max-steps, --eval-every or
    --checkpoint-every left the others waiting for it in a collective until the group's
    timeout."""
    if not ctx.distributed:
        return
    mine = {k: v for k, v in asdict(cfg).items() if k not in PER_PROCESS}
    ranks = distributed.gather_objects(ctx, json.loads(json.dumps(mine)))   # (as plain JSON values)
    for rank, theirs in enumerate(ranks):
        differ = sorted(k for k in set(ranks[0]) | set(theirs) if ranks[0].get(k) != theirs.get(k))
        if differ:
            shown = "; ".join(f"{k}: {json.dumps(ranks[0].get(k))} on rank 0, {json.dumps(theirs.get(k))} "
                              f"on rank {rank}" for k in differ)
            raise ValueError(f"the processes of this job were started with other settings ({shown}); "
                             f"start every process with the same command")


def warn_bf16_not_native(cfg: TrainConfig, ctx: distributed.Context) -> None:
    """Say so when --bf16 runs on a CPU that does not multiply bfloat16 natively
    (:func:`elmo.runtime.cpu_multiplies_bfloat16`), or on a GPU that emulates it (before
    compute capability 8.0, Ampere): the run is as correct as anywhere,
    but its products are converted to float32 and back, slower than the float32 run it was
    asked to speed up, and nothing said why."""
    if not (cfg.bf16 and ctx.is_main):
        return
    # (compute capability 8.0, Ampere, brought bfloat16 arithmetic; asked of the device, not
    # torch.cuda.is_bf16_supported, whose including_emulation is newer than torch 2.4)
    if ctx.device.type == "cuda" and torch.cuda.get_device_capability(ctx.device)[0] < 8:
        print(f"warning: --bf16: this GPU ({torch.cuda.get_device_name(ctx.device)}) has no "
              f"bfloat16 arithmetic of its own (compute capability below 8.0), so bfloat16 autocast "
              f"is emulated, slower than float32; leave --bf16 out on this machine",
              file=sys.stderr, flush=True)
    elif ctx.device.type == "cpu" and runtime.cpu_multiplies_bfloat16() is False:
        print("warning: --bf16: this CPU does not multiply bfloat16 natively (no AVX512-BF16 or "
              "AMX, or ONEDNN_MAX_CPU_ISA turns them off), so bfloat16 autocast runs slower than "
              "float32 here, and its results are no better; leave --bf16 out on this machine",
              file=sys.stderr, flush=True)


def check_every_rank_has_text(stream: CorpusStream, ctx: distributed.Context) -> None:
    """Refuse, on every process and before the run writes a file, a job in which a process's
    part of the training text holds no sentence (one sentence on 2 processes, or whole files
    shared out and one process given only empty ones). That process stopped at its first
    batch with its own line; the others, left in the step's all-reduce, ended with the
    process group's traceback, and the run folder held a config and a log as if it had
    begun. The next sentence of ``stream`` is read where the run stands (the file it loads is
    the one the first batch reads), and the stream is put back."""
    where = stream.state_dict()
    error: Optional[ValueError] = None
    try:
        stream.next_sentence()
    except ValueError as e:
        error = e
    finally:
        stream.load_state_dict(where)
    distributed.raise_together(ctx, error)


def warn_vocabulary_order(vocab: Vocabulary, vocab_path: str, softmax_name: str, is_main: bool) -> None:
    """Say so when the sampled softmax trains on a vocabulary whose counts show it is not
    in descending frequency order (the log-uniform sampler's assumption): the loss is
    still corrected for how the negatives were drawn, but with frequent words drawn as
    rarely as rare ones it is a poorer estimate. Unknown counts cannot be checked.
    ``vocab_path``: the file as the run was given it; ``softmax_name``: the loss's name."""
    problem = vocab.out_of_frequency_order()
    if problem and softmax_name == "sampled" and is_main:
        print(f"warning: {vocab_path}: the words are not in descending order of their counts "
              f"({problem}); the sampled softmax draws its negatives as if they were (word k "
              f"with a probability falling in k), a poorer estimate of the loss: sort the file "
              f"(elmo vocab build) or train with the full softmax (--negatives 0)",
              file=sys.stderr, flush=True)
