"""One LSTM layer's training step (forward + backward): the fast path against autograd per step.

    python benchmarks/lstm_train.py [--threads 1] [--rounds 9]

Both directions of one layer of the small configuration (1024 cells, projection 128, input
128, clips 3), 32 rows x 20 steps: ``elmo.modules.lstm.run_lstm_layer`` with autograd
recording every step, against ``elmo.modules.lstm_autograd.run_lstm_layer_autograd`` (the
sequence as one autograd function). Timed in alternating rounds in one process; the ratio is of
medians. Both are checked to give the same gradients first.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import benchmark_parser, parse_args  # noqa: E402
from elmo.modules.lstm import run_lstm_layer  # noqa: E402
from elmo.modules.lstm_autograd import run_lstm_layer_autograd  # noqa: E402


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    args = parse_args(parser)
    torch.manual_seed(0)
    d, rows, steps, inp, hid, proj = 2, 32, 20, 128, 1024, 128
    x = torch.randn(d, rows * steps, inp) * 0.5
    params = [(torch.randn(d, inp, 4 * hid) * 0.05).requires_grad_(), torch.zeros(d, 1, 4 * hid, requires_grad=True),
              (torch.randn(d, proj, 4 * hid) * 0.05).requires_grad_(), (torch.randn(d, hid, proj) * 0.05).requires_grad_()]
    state = (torch.zeros(d, rows, hid), torch.zeros(d, rows, proj))
    sizes = [rows] * steps

    def step(run):
        w_ih, bias, w_hh, w_proj = params
        out, _ = run(x, w_ih, bias, sizes, w_hh, w_proj, state, 3.0, 3.0)
        return torch.autograd.grad(out.square().sum(), params)

    impls = {"per-step": run_lstm_layer, "fast": run_lstm_layer_autograd}
    worst = max(float((a - b).abs().max() / b.abs().max())
                for a, b in zip(step(impls["fast"]), step(impls["per-step"])))
    print(f"{args.threads} threads; layer 2 x {rows} x {steps}, {hid} cells, projection {proj}; "
          f"worst relative gradient difference {worst:.1e}")
    times = {name: [] for name in impls}
    for _ in range(args.rounds):
        for name, run in impls.items():
            t = time.perf_counter()
            step(run)
            times[name].append(time.perf_counter() - t)
    base = statistics.median(times["per-step"])
    for name in impls:
        med = statistics.median(times[name])
        print(f"{name:>9}: {med * 1e3:8.1f} ms  {base / med:.2f}x")


if __name__ == "__main__":
    main()
