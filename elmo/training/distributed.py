"""Data parallelism through ``torch.distributed``, set up from ``torchrun``'s environment.

``torchrun`` sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT. We use gloo on
CPU and nccl on CUDA. Without those variables everything runs in one process.
"""
from __future__ import annotations

import atexit
import json
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Iterator, List, Optional, Tuple

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
    if dev.type == "cuda" and dev.index is not None:
        # (alone too: a run on cuda:1 left GPU 0 current, where CUDA calls that take the current
        # device, the caching allocator's and cuBLAS's set-up among them, made a context)
        torch.cuda.set_device(dev)
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
        global _joined_a_group
        _joined_a_group = True
    return Context(rank, world_size, local_rank, dev)


#: Whether this process joined a process group (:func:`setup`), whose threads then outlive it:
#: see :func:`end_process_after_a_group`.
_joined_a_group = False


def end_process_after_a_group(status: int) -> None:
    """End this process now with ``status`` where it joined a process group; return otherwise.

    DistributedDataParallel keeps the group alive past ``destroy_process_group`` (torch's own
    leak: a DDP model made and deleted leaves gloo's three threads running to the process's
    end). At exit those threads raced the C++ runtime's teardown: about once in 35 to 300
    two-process jobs here (*scratch*: the toy job of the distributed tests run in a loop) a
    process ended in SIGABRT ("terminate called without an active exception", no Python frame
    left), its work done, and torchrun reported the job failed. So a command that joined a
    group runs the exit handlers Python would (``atexit``: finalizers of temporary files,
    logging) and flushes its streams, then ends without the interpreter's teardown. For the
    command line only: a Python caller's process is its own."""
    if not _joined_a_group:
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):   # (a reader gone, a stream closed: nothing more to say)
            pass
    os._exit(status)


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


#: Seconds a process whose collective broke waits for the failed process's line in the job's
#: store. That process wrote it before it left (and so before the collective broke): it is
#: there at once; the wait only bounds the look for one from a process killed without a word.
TOLD_WAIT_S = 3.0


@contextmanager
def failures_told(ctx: Context) -> Iterator[None]:
    """Where one process of the job fails between the meeting points of :func:`raise_together`
    (its part of the corpus not UTF-8, an error in its batch), every process stops with that
    process's line. It left the others in a collective (the step's gradient all-reduce), which
    ended them with gloo's "Connection closed by peer" traceback, burying the error.

    The failing process writes its line to the job's key-value store before it leaves; the
    others, their collective broken, read it there and raise :class:`JobFailed` with it (or,
    where none was written, say that another process stopped). Nothing is added to a step:
    the store is written and read only on the way out."""
    if not ctx.distributed:
        yield
        return
    try:
        yield
    except JobFailed:   # (every process was told already, by raise_together)
        raise
    except Exception as e:
        if not _collective_broke(e):
            if not getattr(e, "_told_job", False):   # (told already by an inner block: finetune's holds train()'s)
                _tell_job(ctx, e)   # this process's own error: the others learn it from the store
                e._told_job = True  # type: ignore[attr-defined]
            raise
        told = _told_failure()
        if told is None:
            raise JobFailed(f"another process of the job stopped (rank {ctx.rank}'s exchange with it broke "
                            f"off); its own output, or torchrun's, says why") from None
        rank, message = told
        raise JobFailed(f"{message} (the process of rank {rank} stopped on it, and with it the job)") from None


def _collective_broke(error: Exception) -> bool:
    """Whether ``error`` is the process group's, a collective that another process left: a
    :class:`torch.distributed.DistError`, or the RuntimeError that DDP's backward raises with
    gloo's (or NCCL's) message."""
    if isinstance(error, dist.DistError):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and any(
        mark in text for mark in ("Connection closed by peer", "Connection reset by peer", "gloo", "NCCL"))


def _failure_key() -> str:
    # (torchrun's store outlives an attempt of the job: a restarted one, --max-restarts, has its own key)
    return f"elmo/failed/attempt_{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"


def _job_store() -> Optional[dist.Store]:
    """The job's key-value store: the default process group's (torchrun's store, connected
    already, so nothing is opened on the way out). torch names no public accessor for it; a
    torch without this private one gives a client of the store at torchrun's MASTER_ADDR and
    MASTER_PORT. None where neither is there."""
    try:
        from torch.distributed.distributed_c10d import _get_default_store
        return _get_default_store()
    except (ImportError, RuntimeError, ValueError):
        pass
    host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not (host and port and port.isdigit()):
        return None
    try:
        return dist.TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=TOLD_WAIT_S))
    except RuntimeError:   # (gone: DistNetworkError is a RuntimeError)
        return None


def _tell_job(ctx: Context, error: Exception) -> None:
    """Write ``error``'s line and this process's rank to the job's store (the first failing
    process's stays: the others' may be what followed from it)."""
    store = _job_store()
    if store is None:
        return
    try:
        store.compare_set(_failure_key(), "", json.dumps({"rank": ctx.rank, "message": str(error)}))
    except RuntimeError:   # (the store is gone too: the others say that a process stopped)
        pass


def _told_failure() -> Optional[Tuple[int, str]]:
    """(rank, line) of the process that failed, from the job's store; None where none came
    within :data:`TOLD_WAIT_S`."""
    store = _job_store()
    if store is None:
        return None
    try:
        store.wait([_failure_key()], timedelta(seconds=TOLD_WAIT_S))
        said = json.loads(store.get(_failure_key()))
        return int(said["rank"]), str(said["message"])
    except (RuntimeError, ValueError, KeyError, TypeError):   # (none came, or not ours)
        return None


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
