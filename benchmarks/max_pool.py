"""The character CNN's max over positions: PyTorch's ``max(dim=1)`` against ours, in one process.

    python benchmarks/max_pool.py [--threads 2]

For maps of (tokens, positions, filters) shaped as the small model's convolutions give them
for a training batch (a few hundred distinct tokens, 8 to 16 positions, 512 to 2048
filters), it times ``x.max(dim=1)`` (values and positions: what autograd through the plain
max-pool runs), :func:`elmo.modules.conv_pool.max_with_first_index` (the same values and
positions, what training runs) and ``x.amax(dim=1)`` (values only, what inference runs), in
alternating rounds, after checking that the first two agree exactly (ties included).
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import benchmark_parser, machine_line, parse_args, time_interleaved  # noqa: E402
from elmo.modules.conv_pool import max_with_first_index  # noqa: E402

SHAPES = [(200, 10, 1024), (200, 12, 512), (100, 16, 1024), (448, 8, 2048)]


def main() -> None:
    parse_args(benchmark_parser(__doc__, threads=2))   # (sets torch's threads)
    print(machine_line())
    print(f"{'tokens x positions x filters':>30} {'max ms':>8} {'ours ms':>8} {'amax ms':>8} {'ours':>7} {'amax':>7}")
    for shape in SHAPES:
        torch.manual_seed(0)
        x = torch.randn(*shape)
        x[:, 3] = x[:, 1]   # tied positions, as identical windows give
        want, got = x.max(dim=1), max_with_first_index(x)
        assert torch.equal(want.values, got[0]) and torch.equal(want.indices, got[1]), "they disagree"
        t = time_interleaved({"max": lambda: x.max(dim=1), "ours": lambda: max_with_first_index(x),
                              "amax": lambda: x.amax(dim=1)})
        print(f"{' x '.join(map(str, shape)):>30} {t['max'] * 1e3:8.3f} {t['ours'] * 1e3:8.3f} "
              f"{t['amax'] * 1e3:8.3f} {t['max'] / t['ours']:6.2f}x {t['max'] / t['amax']:6.2f}x")


if __name__ == "__main__":
    main()
