"""Would a fused elementwise LSTM cell pay? The per-step elementwise work of the training
LSTM, eager against ``torch.compile`` (inductor's fused C++ loops), in one process.

    python benchmarks/cell_fusion.py [--threads 2] [--batch 32] [--cells 1024]

The two functions repeat what :class:`elmo.modules.lstm_autograd.LSTMSequence` does at one
time step between its matrix products, for both directions at once (D = 2):

* forward: the gate nonlinearities, the cell update, its clip and clip mask, tanh(c) and
  m = sigmoid(o) * tanh(c);
* backward: from the gradients reaching m and c, the four gates' gradients and the cell
  gradient passed to the step before.

It prints the compile time, the largest difference to eager (fp32), and per call the eager
and compiled times with their ratio, at a full batch and at a part-finished one (packed
sequences shrink). Multiply a call by 40 (2 layers x 20 steps) for a training step of the
small configuration, and compare with a step's time from ``benchmarks/train.py``. Needs a C++
compiler for inductor.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line, time_interleaved  # noqa: E402

CLIP = 3.0


def forward_step(gates: torch.Tensor, c_prev: torch.Tensor):
    """gates (D, B, 4H) pre-activations, c_prev (D, B, H) -> activations (D, B, 4H), clipped
    cell, its clip mask, tanh(cell) and m, each (D, B, H)."""
    gi, gj, gf, go = gates.chunk(4, -1)
    gi, gj, gf, go = torch.sigmoid(gi), torch.tanh(gj), torch.sigmoid(gf), torch.sigmoid(go)
    c = gi * gj + gf * c_prev
    mask = c.abs() <= CLIP
    c = c.clamp(-CLIP, CLIP)
    tc = torch.tanh(c)
    return torch.cat([gi, gj, gf, go], -1), c, mask, tc, go * tc


def backward_step(dm, dc, acts, tc, c_prev, mask):
    """Gradients at m and c (D, B, H) -> the gates' gradient (D, B, 4H) and c_prev's."""
    gi, gj, gf, go = acts.chunk(4, -1)
    dc = torch.where(mask, dc + dm * go * (1 - tc * tc), 0.0)
    d_gates = torch.cat([dc * gj * (gi * (1 - gi)), dc * gi * (1 - gj * gj),
                         dc * c_prev * (gf * (1 - gf)), dm * tc * (go * (1 - go))], -1)
    return d_gates, dc * gf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--cells", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"machine: {machine_line()}; D 2, batch {args.batch}, {args.cells} cells")
    torch.manual_seed(0)
    d, h = 2, args.cells
    gates, c_prev = torch.randn(d, args.batch, 4 * h), 2 * torch.randn(d, args.batch, h)
    dm, dc = torch.randn(d, args.batch, h), torch.randn(d, args.batch, h)
    compiled = {}
    for name, fn in (("forward", forward_step), ("backward", backward_step)):
        compiled[name] = torch.compile(fn, dynamic=True)
    acts, c, mask, tc, m = forward_step(gates, c_prev)
    for name, eager_args in (("forward", (gates, c_prev)), ("backward", (dm, dc, acts, tc, c_prev, mask))):
        t = time.perf_counter()
        got = compiled[name](*eager_args)
        took = time.perf_counter() - t
        want = (forward_step if name == "forward" else backward_step)(*eager_args)
        diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(want, got))
        print(f"{name}: compiled in {took:.1f} s; largest difference to eager {diff:.1e}")
    print(f"{'rows':>5} {'step':>9} {'eager us':>9} {'compiled us':>12} {'ratio':>6}")
    for rows in (args.batch, max(1, args.batch // 2 + 1)):
        g, cp, m_, c_ = (t[:, :rows].contiguous() for t in (gates, c_prev, dm, dc))
        a_, _, mk, tc_, _ = forward_step(g, cp)
        for name, fn, fn_args in (("forward", forward_step, (g, cp)),
                                  ("backward", backward_step, (m_, c_, a_, tc_, cp, mk))):
            def repeat(f=fn, xs=fn_args):
                for _ in range(50):
                    f(*xs)
            fused = compiled[name]
            times = time_interleaved({"eager": repeat, "compiled": lambda xs=fn_args: [fused(*xs) for _ in range(50)]},
                                     min_seconds=args.seconds)
            e, f = times["eager"] / 50 * 1e6, times["compiled"] / 50 * 1e6
            print(f"{rows:>5} {name:>9} {e:>9.1f} {f:>12.1f} {e / f:>5.2f}x")


if __name__ == "__main__":
    main()
