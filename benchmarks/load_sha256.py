"""What checking a model folder's files against the SHA-256 its metadata.json records adds to
loading it, in one process.

    python benchmarks/load_sha256.py [--configs original] [--threads N]

Loads, in alternating rounds (from the page cache after the first), with the checks
(:class:`elmo.folder_checksums.LoadChecks`) left out (the load as it was before the record was
kept), with the record checked and each file hashed again (a process's first load:
:data:`elmo.folder_checksums._VERIFIED` cleared), and with the record checked a second time in
the process (the files' size, times and inode seen unchanged: no hash). The bundled default model is loaded as ``elmo.from_pretrained`` (the biLM:
options.json and weights.hdf5, 10.8 MB) and as ``load_language_model`` (perplexity, finetune,
train --from: the softmax and vocabulary too, 24 MB); each configuration of ``--configs`` is a
random model of that size saved with its record (``elmo.save_pretrained``, original layout).
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import elmo  # noqa: E402
import elmo.folder_checksums as folder_checksums  # noqa: E402
import elmo.training.export as export  # noqa: E402
from benchmarks.common import CONFIGS, benchmark_parser, machine_line, parse_args, random_model, \
    time_interleaved  # noqa: E402

def _timed(load: Callable[[], object], mode: str) -> Callable[[], None]:
    """``load`` as ``mode`` runs it: "unchecked", "hashed" (every file hashed) or "seen"."""
    def run() -> None:
        checks = folder_checksums.LoadChecks
        real = checks.verify
        if mode == "unchecked":   # (every loader's checks, and so their confirmations, of no file)
            setattr(checks, "verify", lambda self, paths: [])
        elif mode == "hashed":
            folder_checksums._VERIFIED.clear()
        try:
            load()
        finally:
            setattr(checks, "verify", real)
    return run


def _row(what: str, mb: float, load: Callable[[], object]) -> None:
    t = time_interleaved({mode: _timed(load, mode) for mode in ("unchecked", "hashed", "seen")},
                         min_seconds=2.0, min_rounds=5)
    print(f"{what:>28} {mb:8.1f} {t['unchecked']:12.3f} {t['hashed']:10.3f} {t['seen']:8.3f} "
          f"{t['hashed'] / t['unchecked']:7.2f}x {t['seen'] / t['unchecked']:7.2f}x")


def _recorded_folder(name: str, tmp: Path) -> Path:
    folder = elmo.save_pretrained(random_model(name), tmp / name, fmt="original")
    record = folder_checksums.record_files(folder, ["options.json", "weights.hdf5"])
    (folder / "metadata.json").write_text(json.dumps({folder_checksums.RECORD_KEY: record}))
    # (a file written within RACY_NS of its hash is hashed at every check: "seen" is of older ones)
    time.sleep(folder_checksums.RACY_NS / 1e9)
    return folder


def main() -> None:
    parser = benchmark_parser(__doc__, threads=None)   # (a load runs on all of torch's threads)
    parser.add_argument("--configs", nargs="*", choices=sorted(CONFIGS), default=["original"])
    args = parse_args(parser)
    print(machine_line())
    print(f"{'load':>28} {'files MB':>8} {'unchecked s':>12} {'hashed s':>10} {'seen s':>8} {'hashed':>8} {'seen':>8}")
    default = elmo.model_path("default")
    size = sum((default / n).stat().st_size for n in ("options.json", "weights.hdf5")) / 1e6
    _row("default from_pretrained", size, lambda: elmo.from_pretrained("default"))
    size = sum((default / n).stat().st_size for n in folder_checksums.read_record(default) or {}) / 1e6
    _row("default load_language_model", size, lambda: export.load_language_model(default))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.configs:
            folder = _recorded_folder(name, Path(tmp))
            size = sum((folder / n).stat().st_size for n in ("options.json", "weights.hdf5")) / 1e6
            _row(f"{name} from_pretrained", size, lambda: elmo.from_pretrained(folder))


if __name__ == "__main__":
    main()
