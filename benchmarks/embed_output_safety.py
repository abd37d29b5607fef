"""Cost of the safety of ``elmo embed``'s output, as ratios measured in one process.

``embed_file`` with its defaults, three ways, in alternating rounds (median time of each):

    safe       as shipped: HDF5 writes through :class:`elmo.embedding.output.GuardedFile`
               (a full disk becomes one clear error), every line's vectors checked for NaN/inf
    no-check   the same without the NaN/inf check
    native     without the check, HDF5 writing with its own file driver (the code before)

and prints each time relative to ``native``; then the safeguards' own costs without the model
(one segment of the same vectors written both ways, and the NaN/inf check, as shares of the
model's time for those lines), which the whole-run ratios are too noisy to resolve on a
shared machine. The "fixture" configuration is the tiny test
model, where writing is the largest share of the time (the worst case for the overhead); the
"small" one is a random-weight model of the released small configuration.

    python benchmarks/embed_output_safety.py                  # fixture and small, 5 rounds
    python benchmarks/embed_output_safety.py --configs small --lines 512 --rounds 7
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import benchmark_parser, parse_args, random_model  # noqa: E402
from elmo import from_pretrained  # noqa: E402
from elmo.embedding import embed_file, output, run  # noqa: E402
from tests.test_embedding import random_sentences  # noqa: E402


class NativeFile:
    """h5py's own driver behind the GuardedFile interface (what the code did before)."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.file = __import__("h5py").File(tmp, "w")

    def check(self) -> None:
        pass

    def commit(self, path: Path) -> None:
        self.file.close()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp.replace(path)

    def abort(self) -> None:
        self.file.close()
        self.tmp.unlink(missing_ok=True)


@contextmanager
def way(name: str):
    """Patch the module for one way of running (see the module docstring)."""
    saved = output.HDF5Writer, run._check_finite
    if name in ("no-check", "native"):
        run._check_finite = lambda *args: None
    if name == "native":
        output.HDF5Writer = NativeFile
    try:
        yield
    finally:
        output.HDF5Writer, run._check_finite = saved


def parts_alone(bilm, sentences, rounds: int) -> str:
    """The two safeguards' own costs, without the model: writing one segment of these lines'
    vectors (guarded vs native HDF5 writes) and checking them for NaN/inf, as a share of the
    model's time for the same lines."""
    from elmo.embedding import Embedder
    embedder = Embedder(bilm)
    start = time.perf_counter()
    arrays = embedder.embed_sentences(sentences)
    model_s = time.perf_counter() - start
    times = {"native": [], "guarded": [], "check": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds + 1):
            for name in ("native", "guarded") if r % 2 == 0 else ("guarded", "native"):
                saved = output.HDF5Writer
                if name == "native":
                    output.HDF5Writer = NativeFile
                try:
                    start = time.perf_counter()
                    writer = output.SegmentWriter(Path(tmp) / f"{name}.hdf5", 0, len(arrays), "{}")
                    for i, a in enumerate(arrays):
                        writer.create(i, a.shape, a.dtype)
                        writer.write(i, 0, a)
                    writer.commit()
                    elapsed = time.perf_counter() - start
                finally:
                    output.HDF5Writer = saved
                if r:
                    times[name].append(elapsed)
            start = time.perf_counter()
            for a in arrays:
                np.isfinite(a).all()
            if r:
                times["check"].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    return (f"model {model_s:.3f} s; writing native {med['native'] / model_s:.3f}, guarded "
            f"{med['guarded'] / model_s:.3f} of it (guarded/native {med['guarded'] / med['native']:.2f}); "
            f"NaN check {med['check'] / model_s:.4f} of it")


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--configs", nargs="+", default=["fixture", "small"])
    parser.add_argument("--lines", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    args = parse_args(parser)
    ways = ["native", "no-check", "safe"]
    print(f"embed_file, defaults, {args.lines} random lines of 0-20 words, {args.rounds} rounds "
          f"(+1 untimed), {args.threads} thread(s); time relative to native (median)")
    for config in args.configs:
        bilm = from_pretrained("fixture") if config == "fixture" else random_model(config)
        with tempfile.TemporaryDirectory() as tmp:
            inp = Path(tmp) / "in.txt"
            inp.write_text("".join(" ".join(s) + "\n" for s in random_sentences(args.lines, seed=1)))
            times = {w: [] for w in ways}
            for r in range(args.rounds + 1):
                order = ways if r % 2 == 0 else ways[::-1]
                for w in order:
                    out = Path(tmp) / f"{w}-{r}.hdf5"
                    with way(w):
                        start = time.perf_counter()
                        embed_file(inp, out, bilm)
                        elapsed = time.perf_counter() - start
                    if r:
                        times[w].append(elapsed)
                    out.unlink()
            base = statistics.median(times["native"])
            cells = "  ".join(f"{w} {statistics.median(times[w]) / base:.3f}" for w in ways)
            spread = max(np.std(times[w]) / statistics.median(times[w]) for w in ways)
            print(f"{config:8s} native {base:.3f} s   {cells}   (largest relative std {spread:.2f})")
            sentences = random_sentences(args.lines, seed=1)
            print(f"{'':8s} {parts_alone(bilm, sentences, args.rounds)}")


if __name__ == "__main__":
    main()
