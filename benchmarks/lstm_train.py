"""One LSTM layer's training step (forward + backward): the fast path against autograd per step.

    python benchmarks/lstm_train.py [--threads 1] [--rounds 9]

Both directions of one layer of the small configuration (1024 cells, projection 128, input
128, clips 3), 32 rows x 20 steps: ``elmo.modules.lstm.run_lstm_layer`` with autograd
recording every step, against ``elmo.modules.lstm_autograd.run_lstm_layer_autograd`` (the
sequence as one autograd function). Where that runs its products through oneDNN
(``elmo.modules.dense.lstm_training_in_onednn``: float32 on AMD's CPUs with AVX-512), the row
``fast-mkl`` times it with PyTorch's products instead. Timed in alternating rounds in one
process (A B C, then C B A); the ratio is of medians. All are checked to give the same
gradients first.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import benchmark_parser, machine_line, parse_args  # noqa: E402
from elmo.modules import dense  # noqa: E402
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

    def step(name):
        run, dense.LSTM_TRAINING_ONEDNN = impls[name]
        w_ih, bias, w_hh, w_proj = params
        out, _ = run(x, w_ih, bias, sizes, w_hh, w_proj, state, 3.0, 3.0)
        grads = torch.autograd.grad(out.square().sum(), params)
        dense.LSTM_TRAINING_ONEDNN = True
        return grads

    impls = {"per-step": (run_lstm_layer, True), "fast": (run_lstm_layer_autograd, True)}
    if dense.lstm_training_in_onednn(x):
        impls["fast-mkl"] = (run_lstm_layer_autograd, False)
    reference = step("per-step")
    worst = max(float((a - b).abs().max() / b.abs().max()) for name in list(impls)[1:]
                for a, b in zip(step(name), reference))
    print(f"{machine_line()}; layer 2 x {rows} x {steps}, {hid} cells, projection {proj}; "
          f"worst relative gradient difference {worst:.1e}")
    names = list(impls)
    times = {name: [] for name in names}
    for r in range(args.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            t = time.perf_counter()
            step(name)
            times[name].append(time.perf_counter() - t)
    base = statistics.median(times["per-step"])
    for name in names:
        med = statistics.median(times[name])
        print(f"{name:>9}: {med * 1e3:8.1f} ms  {base / med:.2f}x")
    if "fast-mkl" in impls:
        rounds = sorted(m / o for m, o in zip(times["fast-mkl"], times["fast"]))
        print(f"fast against fast-mkl: {statistics.median(times['fast-mkl']) / statistics.median(times['fast']):.2f}x "
              f"(per round {rounds[0]:.2f} to {rounds[-1]:.2f})")

if __name__ == "__main__":
    main()
