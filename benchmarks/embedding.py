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
    python benchmarks/embedding.py --configs original small --sentences 128 --rounds 2
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import CONFIGS, benchmark_parser, brown_sentences, brown_source, parse_args, random_model  # noqa: E402
from elmo import BiLM  # noqa: E402
from elmo.embedding import Embedder, embed_file  # noqa: E402
from elmo.embedding.embedder import DEFAULT_BATCH_SIZE  # noqa: E402

def brown_sample(n: int) -> tuple[List[List[str]], str]:
    """``n`` Brown sentences spread over the corpus, and where they came from."""
    sentences = brown_sentences(limit=10 ** 9)
    step = max(1, len(sentences) // n)
    return sentences[::step][:n], brown_source()


# ---------------------------------------------------------------------- measuring
def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(bilm: BiLM, sentences: List[List[str]], rounds: int, warmup: int) -> Dict[str, float]:
    """Each way's speed relative to the plain configuration: plain seconds / the way's seconds."""
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
    ways["latency: one median sentence"] = lambda: one.embed_sentences([median])
    ways["building the cache"] = lambda: (bilm.token_encoder.build_token_cache(cache_words),
                                          bilm.token_encoder.clear_token_cache())
    for _ in range(warmup):  # first calls on new shapes are slow (kernel setup): not timed
        for fn in ways.values():
            fn()
    # Rounds alternate the order (ABBA...), so a load that drifts during the run affects the
    # ways alike: each way's ratio is the geometric mean over rounds of plain/way in that round.
    names = list(ways)
    ratios: Dict[str, List[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        seconds = {name: timed(ways[name]) for name in order}
        for name in names:
            ratios[name].append(seconds["plain (batch 1)"] / seconds[name])
    result = {name: statistics.geometric_mean(values) for name, values in ratios.items()}
    result["_cache_words"] = len(cache_words)
    result["_median_len"] = len(median)
    return result


def work_figures(sentences: List[List[str]], cache_words: List[str]) -> None:
    """Machine-independent counts behind the timings: LSTM steps, CNN encodings avoided."""
    # The LSTM packs sequences, so padding costs no arithmetic; what batching and sorting change
    # is the number of sequential steps (one matrix multiply each) and the rows per step.
    real = sum(len(s) + 2 for s in sentences)                    # + <S> and </S>
    print("  LSTM steps (sequential multiplies) and mean rows per step:")
    for batch_size in (1, 32, 64, 128):
        for sort in ((False,) if batch_size == 1 else (False, True)):
            plan = Embedder.__new__(Embedder)   # plan() needs only these fields
            plan.batch_size, plan.max_tokens, plan.overlap, plan.sort_by_length = batch_size, 256, 64, sort
            plan.bilm = type("Stateless", (), {"stateful": False})()
            steps = sum(max(p.n_tokens for p in b) + 2 for b in plan.plan(sentences))
            print(f"    batch {batch_size:>3} {'sorted  ' if sort else 'in order'}: {steps:>6} steps, "
                  f"{real / steps:6.1f} rows per step")
    cached = set(cache_words)
    per_batch_distinct = sum(len({t for s in sentences[i:i + 64] for t in s} - cached)
                             for i in range(0, len(sentences), 64))
    per_batch_all = sum(len({t for s in sentences[i:i + 64] for t in s}) for i in range(0, len(sentences), 64))
    print(f"  CNN encodings with the cache / without (batches of 64 in order): "
          f"{per_batch_distinct / per_batch_all:.2f}")


def report(name: str, ratios: Dict[str, float], n_sentences: int, n_tokens: int) -> None:
    print(f"\n{name}: {n_sentences} sentences, {n_tokens} tokens")
    print(f"  {'way':<46} {'throughput vs plain':>20}")
    special = ("latency: one median sentence", "building the cache")
    for way, ratio in ratios.items():
        if not way.startswith("_") and way not in special:
            print(f"  {way:<46} {ratio:>19.2f}x")
    # ratio = plain time for all sentences / the time of one call; per sentence:
    print(f"  latency of one {ratios['_median_len']}-token sentence: "
          f"{n_sentences / ratios['latency: one median sentence']:.2f} x the plain mean time per sentence")
    print(f"  building the cache of {ratios['_cache_words']} words: "
          f"{1 / ratios['building the cache']:.3f} x the plain run's time")


def main(argv=None) -> None:
    parser = benchmark_parser(__doc__, threads=None)
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=["small", "original"])
    parser.add_argument("--sentences", type=int, default=128, help="Brown sentences per run (default 128)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds, in alternating order; ratios are their geometric mean (default 2)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    args = parse_args(parser, argv)
    sentences, source = brown_sample(args.sentences)
    n_tokens = sum(len(s) for s in sentences)
    from elmo.embedding import frequent_words
    print("work, all configurations:")
    work_figures(sentences, frequent_words(sentences, min_count=2))
    print(f"sentences: {source}; torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{os.cpu_count()} CPUs; {args.warmup} untimed + {args.rounds} timed rounds")
    for name in args.configs:
        with torch.inference_mode():
            bilm = random_model(name)
        report(name, measure(bilm, sentences, args.rounds, args.warmup), len(sentences), n_tokens)


if __name__ == "__main__":
    main()
