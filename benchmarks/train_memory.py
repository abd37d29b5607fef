"""Resident memory and page faults of our training step over many steps, one process per variant.

    python benchmarks/train_memory.py [--steps 150] [--every 25] [--threads 2]
        [--variants shipped onednn-unrounded pytorch] [--model small] [--batch-size 32]

``benchmarks/train.py`` times steps and prints the memory one step adds. This prints what a
long run sees: whether the process keeps growing from step to step, and how many page faults
each step takes (a fault per 4 KiB page that the allocator maps afresh). Each variant runs in
a fresh process, because what it measures is process state (oneDNN's kernels, the
allocator's heap):

* ``shipped``: ours as ``elmo train`` runs it (``elmo.modules.dense``'s ``auto`` backend, the
  highway's rows rounded up to ``ROW_MULTIPLE``, 32).
* ``onednn-unrounded``: the highway in oneDNN with its rows as they come (``ROW_MULTIPLE``
  1). oneDNN builds and keeps kernels for each new row count, and the highway's row count is
  the batch's number of distinct tokens: this is what the rounding is for.
* ``pytorch``: PyTorch's own products everywhere (``BACKEND = "default"``).

On Intel CPUs ``auto`` is PyTorch's own products, so ``shipped`` and ``pytorch`` run the same.
Same workload as benchmarks/train.py: the small configuration, 32 x 20 packed batches,
8192 shared negatives, Adagrad, ``keep_freed_memory()`` as ``elmo train`` sets it.

Per variant it prints the resident size (MiB) after the warm-up step and every ``--every``
steps, the growth from step ``--every`` to the last (the first steps fill caches), the median minor page faults per step
of the last ``--every`` steps and the median step time (absolute times on shared machines
are noise; compare the variants, which ran one after another on the same machine).
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import machine_line  # noqa: E402
from benchmarks.train import MODELS, build_workload, update  # noqa: E402
from elmo.allocator import keep_freed_memory  # noqa: E402
from elmo.modules import dense  # noqa: E402
from elmo.modules.softmax import Candidates  # noqa: E402
from elmo.training.optim import adagrad  # noqa: E402

#: name -> (elmo.modules.dense.BACKEND, ROW_MULTIPLE)
VARIANTS = {"shipped": ("auto", dense.ROW_MULTIPLE), "onednn-unrounded": ("onednn", 1), "pytorch": ("default", None)}


def resident_mib() -> float:
    """This process's resident set size now, in MiB (Linux)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20


def run_variant(name: str, args: argparse.Namespace) -> dict:
    """Train ``args.steps`` steps (after one warm-up) under one variant in this process."""
    backend, row_multiple = VARIANTS[name]
    dense.BACKEND = backend
    if row_multiple is not None:
        dense.ROW_MULTIPLE = row_multiple
    if args.threads:
        torch.set_num_threads(args.threads)
    keep_freed_memory()
    shape = MODELS[args.model]
    work = build_workload(args.model, args.batch_size or shape["batch_size"], args.unroll_steps,
                          shape["vocab_size"])
    optimizer = adagrad(work.model.parameters(), 0.2, 1.0)
    negatives = shape["negatives"]
    state = None

    def step() -> None:
        nonlocal state
        out = work.model(work.batches.next_batch(), state, Candidates.draw(work.sampler, negatives))
        state = out["state"]
        update(work.model, optimizer, out["loss"])

    step()  # warm-up
    resident = [(0, resident_mib())]
    faults, seconds = [], []
    for i in range(1, args.steps + 1):
        before, t = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
        step()
        seconds.append(time.perf_counter() - t)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        if i % args.every == 0 or i == args.steps:
            resident.append((i, resident_mib()))
    return {"variant": name, "products": dense.cpu_products(), "resident": resident,
            "faults": statistics.median(faults[-args.every:]), "seconds": statistics.median(seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--steps", type=int, default=150, help="measured steps per variant (after one warm-up)")
    parser.add_argument("--every", type=int, default=25, help="report the resident size every this many steps")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--model", choices=sorted(MODELS), default="small")
    parser.add_argument("--batch-size", type=int, default=None, help="(default: the model's, 32 or 128)")
    parser.add_argument("--unroll-steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--child", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1 or args.every < 1:
        parser.error("--steps and --every must be at least 1")
    if not Path("/proc/self/statm").exists():
        parser.error("needs Linux's /proc to read the resident size")
    if args.child:  # one variant, its result as one JSON line for the parent
        print(json.dumps(run_variant(args.child, args)), flush=True)
        return

    print(f"machine: {machine_line()}; model: {args.model}; {args.steps} steps per variant, each in its own process")
    for name in args.variants:  # the child reads the same options and runs only its variant
        done = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--child", name],
                              capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"variant {name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        resident = result["resident"]
        growth = resident[-1][1] - resident[1][1] if len(resident) > 1 else 0.0
        print(f"\n{name} (products by {result['products']}): median {result['seconds']:.3f} s a step, "
              f"{result['faults']:.0f} minor page faults a step (median of the last {args.every})")
        print("  resident MiB: " + ", ".join(f"step {i}: {mib:.0f}" for i, mib in resident))
        print(f"  growth from step {resident[1][0] if len(resident) > 1 else 0} to step {resident[-1][0]}: "
              f"{growth:+.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
