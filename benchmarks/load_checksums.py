"""What checking a native model file's tensor checksums adds to loading it, in one process.

    python benchmarks/load_checksums.py [--configs original small] [--threads N]

For each configuration, a model with random weights is saved with ``elmo.save_pretrained``
(its ``model.safetensors`` records a CRC-32 per tensor: :mod:`elmo.tensor_checksums`) and then
loaded with ``elmo.from_pretrained`` in alternating rounds: as the package loads it (every
checksum checked) and with the check left out (the reference: the load as it was before the
checksums were kept). The file is read from the page cache after the first load, so the
difference is the checksum pass itself, not the disk.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import elmo  # noqa: E402
import elmo.weights  # noqa: E402
from benchmarks.common import CONFIGS, benchmark_parser, machine_line, parse_args, random_model, \
    time_interleaved  # noqa: E402


def _unchecked(state, metadata):
    return None


def main() -> None:
    parser = benchmark_parser(__doc__, threads=None)   # (a load runs on all of torch's threads)
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=["original", "small"])
    args = parse_args(parser)
    print(machine_line())
    print(f"{'model':>10} {'file MB':>8} {'unchecked s':>12} {'checked s':>10} {'added s':>8} {'ratio':>7}")
    checked = elmo.weights.checksum_problem
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.configs:
            folder = elmo.save_pretrained(random_model(name), Path(tmp) / name)
            size = (folder / "model.safetensors").stat().st_size / 1e6

            def load(check):
                elmo.weights.checksum_problem = check
                try:
                    elmo.from_pretrained(folder)
                finally:
                    elmo.weights.checksum_problem = checked
            t = time_interleaved({"unchecked": lambda: load(_unchecked), "checked": lambda: load(checked)},
                                 min_seconds=2.0, min_rounds=5)
            print(f"{name:>10} {size:8.1f} {t['unchecked']:12.3f} {t['checked']:10.3f} "
                  f"{t['checked'] - t['unchecked']:8.3f} {t['checked'] / t['unchecked']:6.2f}x")


if __name__ == "__main__":
    main()
