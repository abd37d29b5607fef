"""Data parallelism through ``torch.distributed``, set up from ``torchrun``'s environment.

``torchrun`` sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT. We use gloo on
CPU and nccl on CUDA. Without those variables everything runs in one process.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

import torch
import torch.distributed as dist

from ..runtime import launch_env, resolve_device


@dataclass(frozen=True)
class Context:
    """This process's place in the job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def is_main_process() -> bool:
    """Whether this process is rank 0 (or alone), before :func:`setup` has joined the group."""
    return launch_env()[0] == 0


def launched_world_size() -> int:
    """How many processes torchrun started for this job (1 alone), before :func:`setup`."""
    return launch_env()[1]


def setup(device: str = "auto") -> Context:
    """Join the process group when launched by torchrun; otherwise a single-process context."""
    rank, world_size, local_rank = launch_env()
    dev = resolve_device(device, local_rank)
    if world_size > 1 and not dist.is_initialized():
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    return Context(rank, world_size, local_rank, dev)


def teardown(ctx: Context) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()


def gather_objects(ctx: Context, obj: Any) -> List[Any]:
    """Every rank's ``obj``, in rank order, on every rank (one object per rank)."""
    if not ctx.distributed:
        return [obj]
    out: List[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(ctx: Context, obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (what the others pass is ignored; None will do)."""
    if not ctx.distributed:
        return obj
    box = [obj if ctx.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


class JobFailed(ValueError):
    """Another process of the job met an error (its message, naming its rank): this one stops too."""


def raise_together(ctx: Context, error: Optional[Exception]) -> None:
    """Raise on every process of the job the error that one of them met, if any did; call it
    where every process comes. A process that raised alone (rank 0 refused by the run's lock,
    a rank whose part of the corpus holds no sentence) left the others in their next
    collective, which ended them with the process group's traceback ("Connection closed by
    peer") or, on GPUs, held them until torchrun stopped them. This process's own ``error`` is
    raised as it is; the others raise :class:`JobFailed` with the lowest failing rank's message."""
    if not ctx.distributed:
        if error is not None:
            raise error
        return
    said = gather_objects(ctx, None if error is None else str(error))
    if error is not None:
        raise error
    rank, message = next(((r, m) for r, m in enumerate(said) if m is not None), (None, None))
    if message is not None:
        raise JobFailed(f"{message} (the process of rank {rank} stopped on it, and with it the job)")


def all_reduce_sum(ctx: Context, values: List[float]) -> List[float]:
    """Sum floats over ranks (for logging)."""
    if not ctx.distributed:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64,
                     device=ctx.device if ctx.device.type == "cuda" else "cpu")
    dist.all_reduce(t)
    return t.tolist()


def barrier(ctx: Context) -> None:
    if ctx.distributed:
        dist.barrier()
