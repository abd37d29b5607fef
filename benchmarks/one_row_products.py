"""One-row products with the LSTM's weights, by each library and layout, in one process.

    python benchmarks/one_row_products.py [--threads 2] [--copies 8] [--dtype bfloat16]

At batch 1 every LSTM step multiplies one row by W_hh (4H x P) and W_proj (P x H) of each
direction: 2 FLOPs per weight read, so the step runs at the speed at which the library
streams the weight from memory. For the weight shapes of the bundled default, small and
original models this times, per product (median of 200 calls):

* ``mkl-rows``: ``torch.mm(x (1, K), W^T)`` with W^T a contiguous (K, N) copy (the re-laid
  W_hh of :meth:`elmo.modules.lstm.BiLSTMLayer.recurrent_weight_rows`);
* ``mkl-mv``: ``torch.mv(W, x)`` with W in its stored (N, K) layout (how W_proj is multiplied
  without oneDNN);
* ``onednn``: oneDNN's product with W in its stored layout (``elmo.modules.dense.onednn_mm``),
  where this PyTorch has it.

With ``--dtype bfloat16`` the same three calls in bfloat16 (the ``mkl`` columns are then
PyTorch's own bfloat16 products, whatever library serves them).

``--copies`` distinct weights of each shape are multiplied in turn, as a model's layers and
directions are, so that a shape smaller than the last-level cache is timed from the cache
and a larger one from memory, as in a real step. It prints GB/s of weight read and oneDNN's
speed against the faster of the two MKL calls; ``elmo.modules.dense.recurrent_in_onednn``
uses oneDNN from ``RECURRENT_MIN_BYTES`` on.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import machine_line  # noqa: E402
from elmo.modules import dense  # noqa: E402

#: (model, weight, N outputs, K inputs)
SHAPES = [("bundled default", "W_hh", 2048, 128), ("bundled default", "W_proj", 128, 512),
          ("small", "W_hh", 4096, 128), ("small", "W_proj", 128, 1024),
          ("original", "W_hh", 16384, 512), ("original", "W_proj", 512, 4096)]


def median_seconds(fn: Callable[[], object], calls: int = 200) -> float:
    for _ in range(10):
        fn()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--copies", type=int, default=8, help="distinct weights of each shape, used in turn")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                        help="the weights' and the row's type (bfloat16: the opt-in bf16 model, whose "
                             "one-row steps keep W_hh in its stored layout: elmo.modules.lstm.one_row_relaid)")
    args = parser.parse_args()
    if args.copies < 1:
        parser.error("--copies must be at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    has_onednn = dense._onednn_linear_available() if dtype == torch.float32 else dense._onednn_bf16_available()
    print(f"machine: {machine_line()}; {args.dtype}; {args.copies} copies of each weight; oneDNN from "
          f"{dense.RECURRENT_MIN_BYTES / 2**20:g} MiB (elmo.modules.dense)")
    print(f"{'model':>16} {'weight':>7} {'N x K':>12} {'MiB':>5} {'mkl-rows us':>12} {'mkl-mv us':>10} "
          f"{'onednn us':>10} {'GB/s onednn':>12} {'onednn / best mkl':>18}")
    for model, name, n, k in SHAPES:
        weights = [torch.randn(n, k, dtype=dtype) for _ in range(args.copies)]
        transposed = [w.t().contiguous() for w in weights]
        x, out_row, out_vec = (torch.randn(1, k, dtype=dtype), torch.empty(1, n, dtype=dtype),
                               torch.empty(n, dtype=dtype))
        turn = iter(range(10 ** 12))

        def rows() -> None:
            torch.mm(x, transposed[next(turn) % args.copies], out=out_row)

        def mv() -> None:
            torch.mv(weights[next(turn) % args.copies], x[0], out=out_vec)

        def onednn() -> None:
            dense.onednn_mm(x, weights[next(turn) % args.copies])

        t_rows, t_mv = median_seconds(rows), median_seconds(mv)
        t_onednn = median_seconds(onednn) if has_onednn else float("nan")
        size = n * k * weights[0].element_size()
        print(f"{model:>16} {name:>7} {f'{n} x {k}':>12} {size / 2**20:>5.1f} {t_rows * 1e6:>12.0f} {t_mv * 1e6:>10.0f} "
              f"{t_onednn * 1e6:>10.0f} {size / t_onednn / 1e9:>12.1f} "
              f"{min(t_rows, t_mv) / t_onednn:>17.2f}x", flush=True)


if __name__ == "__main__":
    main()
