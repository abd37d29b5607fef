"""Inference speed of elmo.BiLM against a plain per-timestep reference, in one process.

    python benchmarks/inference.py [--configs small original] [--batches 1 32 128] [--profile]

For each configuration (random weights) and batch size it embeds the same real Brown
sentences with both implementations (the reference with autograd on and frozen weights, as
AllenNLP's ElmoEmbedder runs) (timed in alternating rounds, medians), checks that they
agree, and prints tokens/s, achieved
GFLOP/s as a share of this machine's measured fp32 matmul rate, peak memory, and the ratios.
FLOPs are those of the plain computation on the real tokens (padding is not counted), so a
share above what the reference reaches means work was skipped, not that math got faster.
The process keeps freed memory (``elmo.allocator.keep_freed_memory``) as ``elmo embed`` does,
for both implementations.
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Callable, Sequence

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (brown_sentences, flops_per_token, machine_line, matmul_gflops, peak_memory_mib,  # noqa: E402
                               random_model, time_interleaved)
from benchmarks.reference import ReferenceBiLM  # noqa: E402
import elmo.modules.char_cnn as char_cnn  # noqa: E402
from elmo.allocator import keep_freed_memory  # noqa: E402
import elmo.modules.lstm as lstm_module  # noqa: E402
from elmo.modules import dense  # noqa: E402
from elmo import batch_to_ids  # noqa: E402


def batches_of(sentences, batch_size, n_batches):
    return [sentences[i * batch_size:(i + 1) * batch_size] for i in range(n_batches)]


#: Rows of ours with one module switch set back to what it was before an optimization, each
#: timed in the same process as the others: (flag, row name, module, attribute, value, batch 1
#: only, help).
SWITCHES = [
    ("general-path", "elmo-general", lstm_module, "SINGLE_SEQUENCE_PATH", False, True,
     "at batch 1, also time the LSTM's general path (before the single-sequence path)"),
    ("stored-layout", "elmo-stored", lstm_module, "RECURRENT_ROWS", False, True,
     "at batch 1, also time W_hh in its stored layout (before the re-laid copy)"),
    ("recurrent-mkl", "elmo-lstm-mkl", dense, "RECURRENT_ONEDNN", False, False,
     "also time the LSTM's per-step products by PyTorch's own (MKL) instead of oneDNN's"),
    ("unpacked", "elmo-unpacked", dense, "RECURRENT_PACKED", False, False,
     "also time the LSTM's oneDNN products of two rows or more with the weights in their stored "
     "layout instead of oneDNN's (before elmo.modules.dense.pack_for_onednn)"),
    ("conv1d", "elmo-conv1d", char_cnn, "CONV_AS_MATMUL", False, False,
     "also time the char CNN with nn.Conv1d (before the convolutions as matrix multiplies)"),
    ("dense-default", "elmo-mkl", dense, "BACKEND", "default", False,
     "also time ours with PyTorch's own products instead of oneDNN's where elmo.modules.dense "
     "would use them"),
    ("whole-chunks", "elmo-whole", lstm_module, "INPUT_CHUNK_BYTES", 1 << 62, False,
     "also time the LSTM's input products in chunks of 32 steps whatever their size (before "
     "the byte budget of elmo.modules.lstm.INPUT_CHUNK_BYTES)"),
]


def switched(fn: Callable[[], None], module, attribute: str, value) -> Callable[[], None]:
    """fn run with ``module.attribute`` set to ``value``, restored afterwards."""
    def run_switched() -> None:
        before = getattr(module, attribute)
        setattr(module, attribute, value)
        try:
            fn()
        finally:
            setattr(module, attribute, before)
    return run_switched


def run(config: str, batch_sizes, seconds: float, bf16: bool, int8: bool, sentences, n_sentences: int = 64,
        switches: Sequence[str] = (), profile: bool = False) -> None:
    """Times every batch size of one configuration; ``switches`` are flags of :data:`SWITCHES`;
    ``profile`` prints where one call of ours spends its time, by operator and input shapes."""
    # Frozen weights, as AllenNLP loads them (requires_grad=False): the reference runs with
    # autograd enabled as its ElmoEmbedder does, and records no graph.
    bilm = random_model(config).requires_grad_(False)
    reference = ReferenceBiLM(bilm)
    # The opt-in bf16 mode: a copy of the model with bfloat16 weights and activations.
    bilm_bf16 = copy.deepcopy(bilm).to(torch.bfloat16) if bf16 else None
    # The opt-in int8 mode: int8 recurrent weights (elmo.modules.lstm_inference).
    bilm_int8 = copy.deepcopy(bilm) if int8 else None
    if int8:
        bilm_int8.lstm.use_int8()
    per_token = flops_per_token(bilm.options)
    print(f"\n== {config}: {sum(p.numel() for p in bilm.parameters()) / 1e6:.1f}M parameters, "
          f"{per_token / 1e6:.1f} MFLOP per token")
    print(f"{'batch':>5} {'impl':>12} {'tok/s':>9} {'GFLOP/s':>8} {'% peak':>7} {'peak MiB':>9} {'ratio':>6}")
    for bs in batch_sizes:
        n_batches = max(1, n_sentences // bs)
        chunks = [batch_to_ids(b) for b in batches_of(sentences, bs, n_batches)]
        tokens = sum(int((c > 0).any(-1).sum()) for c in chunks)

        def ours():
            with torch.no_grad():
                for c in chunks:
                    bilm(c)

        def ours_bf16():
            with torch.no_grad():
                for c in chunks:
                    bilm_bf16(c)

        def ours_int8():
            with torch.no_grad():
                for c in chunks:
                    bilm_int8(c)

        def ref():
            for c in chunks:
                reference(c)

        with torch.no_grad():
            a, b = bilm(chunks[0])["activations"], reference(chunks[0])
        worst = max(float((x - y).abs().max()) for x, y in zip(a, b))
        assert worst < 1e-3, f"the reference disagrees with the library by {worst}"
        impls = {"reference": ref, "elmo": ours}
        if bf16:
            impls["elmo-bf16"] = ours_bf16
        if int8:
            impls["elmo-int8"] = ours_int8
        for flag, name, module, attribute, value, batch1_only, _ in SWITCHES:
            if flag in switches and (bs == 1 or not batch1_only):
                impls[name] = switched(ours, module, attribute, value)
        timings = time_interleaved(impls, min_seconds=seconds)
        base = None
        for name, fn in impls.items():
            rate = tokens / timings[name]
            gflops = rate * per_token / 1e9
            mem = peak_memory_mib(fn) if bs >= 32 else float("nan")
            base = base or rate
            print(f"{bs:>5} {name:>12} {rate:>9.1f} {gflops:>8.1f} {100 * gflops / PEAK:>6.1f}% "
                  f"{mem:>9.0f} {rate / base:>5.2f}x", flush=True)
        for name, model in (("bf16", bilm_bf16), ("int8", bilm_int8)):
            if model is None:
                continue
            with torch.no_grad():
                low = model(chunks[0])["activations"]
            dev = [float((x.float() - y).abs().max()) for x, y in zip(low, a)]
            scale = [float(y.abs().max()) for y in a]
            print(f"      {name} max |deviation| per layer: " +
                  ", ".join(f"{d:.3g} (of max {s:.3g})" for d, s in zip(dev, scale)))
        if profile:   # ours and each opt-in mode asked for (their kernels differ)
            for name, fn in impls.items():
                if name in ("elmo", "elmo-bf16", "elmo-int8"):
                    print_profile(fn, tokens, name)


def print_profile(fn: Callable[[], None], tokens: int, name: str = "elmo") -> None:
    """torch.profiler's table of one call of ``fn`` by operator and input shapes (the shapes
    tell a recurrent one-row product from an input product or a highway layer), with the
    tokens it embedded, for a time per token."""
    from torch.profiler import ProfilerActivity, profile
    fn()  # warm: caches and inference forms of the weights made outside the profile
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    print(f"      profile of one call of {name} ({tokens} tokens):")
    print(prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=12,
                                                             max_name_column_width=24,
                                                             max_shapes_column_width=60))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--configs", nargs="+", default=["small", "original"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 32, 128])
    parser.add_argument("--seconds", type=float, default=2.0, help="minimum timing per measurement")
    parser.add_argument("--bf16", action="store_true",
                        help="also time the opt-in bf16 mode (the model converted with .to(torch.bfloat16))")
    parser.add_argument("--sentences", type=int, default=64,
                        help="sentences per timed call at batch sizes below it (default 64; one batch above)")
    parser.add_argument("--int8", action="store_true",
                        help="also time the opt-in int8 recurrent weights (bilm.lstm.use_int8())")
    for flag, name, _, _, _, _, text in SWITCHES:
        parser.add_argument(f"--{flag}", action="store_true", help=f"{text} (row {name})")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--profile", action="store_true",
                        help="after timing each batch size, print torch.profiler's table of one call of ours (and of each opt-in mode asked for), "
                             "by operator and input shapes")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    keep_freed_memory()  # as `elmo embed` does; it applies to both implementations alike
    global PEAK
    PEAK = matmul_gflops()
    print(f"machine: {machine_line()}; fp32 matmul {PEAK:.0f} GFLOP/s (measured now)")
    sentences = brown_sentences(limit=2000, min_len=3)
    for config in args.configs:
        run(config, args.batches, args.seconds, args.bf16, args.int8, sentences, args.sentences,
            [flag for flag, *_ in SWITCHES if getattr(args, flag.replace("-", "_"))], args.profile)


PEAK = 1.0

if __name__ == "__main__":
    main()
