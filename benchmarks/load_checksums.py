"""What checking a saved model's weight checksums adds to loading it, in one process.

    python benchmarks/load_checksums.py [--configs original small] [--threads N]

For each configuration, a model with random weights is saved in both layouts with
``elmo.save_pretrained`` (``model.safetensors`` records a CRC-32 per tensor, and each dataset
of the original layout's ``weights.hdf5`` carries its own: :mod:`elmo.checksums`) and then
loaded with ``elmo.from_pretrained`` in alternating rounds: as the package loads it (every
checksum checked) and with the checks left out (the reference: the load as it was before the
checksums were kept). The files are read from the page cache after the first load, so the
difference is the checksum pass itself, not the disk.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import elmo  # noqa: E402
import elmo.native_layout  # noqa: E402
import elmo.original_layout  # noqa: E402
from benchmarks.common import CONFIGS, benchmark_parser, machine_line, parse_args, random_model, \
    time_interleaved  # noqa: E402

#: The two checks the loaders call, by the module that calls each (safetensors: the file's
#: record; HDF5: each dataset's attribute).
CHECKS = ((elmo.native_layout, "checksum_problem"), (elmo.original_layout, "dataset_checksum_problem"))


def _load(folder: Path, checked: bool) -> None:
    """``elmo.from_pretrained(folder)``, with the checksum checks left out unless ``checked``."""
    real = [(module, name, getattr(module, name)) for module, name in CHECKS]
    if not checked:
        for module, name in CHECKS:
            setattr(module, name, lambda *args: None)
    try:
        elmo.from_pretrained(folder)
    finally:
        for module, name, check in real:
            setattr(module, name, check)


def main() -> None:
    parser = benchmark_parser(__doc__, threads=None)   # (a load runs on all of torch's threads)
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=["original", "small"])
    args = parse_args(parser)
    print(machine_line())
    print(f"{'model':>10} {'layout':>12} {'file MB':>8} {'unchecked s':>12} {'checked s':>10} {'added s':>8} "
          f"{'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.configs:
            bilm = random_model(name)
            for layout, weights in (("safetensors", "model.safetensors"), ("original", "weights.hdf5")):
                folder = elmo.save_pretrained(bilm, Path(tmp) / f"{name}-{layout}", fmt=layout)
                size = (folder / weights).stat().st_size / 1e6
                t = time_interleaved({"unchecked": lambda: _load(folder, False),
                                      "checked": lambda: _load(folder, True)}, min_seconds=2.0, min_rounds=5)
                print(f"{name:>10} {layout:>12} {size:8.1f} {t['unchecked']:12.3f} {t['checked']:10.3f} "
                      f"{t['checked'] - t['unchecked']:8.3f} {t['checked'] / t['unchecked']:6.2f}x")


if __name__ == "__main__":
    main()
