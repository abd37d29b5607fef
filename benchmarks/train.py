"""Training speed of the biLM language model against a peer-faithful reference, in one process.

    python benchmarks/train.py [--steps 5] [--threads N] [--bf16] [--negatives 8192] [--profile] [--heap-only]
    python benchmarks/train.py --model bundled-default [--bf16] [--no-full]

The small configuration (1024 cells, projection 128, 2048 CNN filters), a 10k-word vocabulary
built from Brown sentences, batches of 32 rows x 20 steps packed as in the original trainer
(``--batch-size 128`` times the 128 rows that ``elmo train`` and the original trainer use),
Adagrad (torch's default for the reference, the fused CPU kernel that ``elmo train`` uses for
ours). One training step = forward, backward, gradient clip and optimizer update, on the same
batches for every implementation:

* ``reference``: what AllenNLP's ELMo modules do in training (its character encoder,
  ``ElmoLstm`` of ``LstmCellWithProjection`` cells, a full softmax loss), written plainly here
  (benchmarks/reference.py): the character CNN on every padded position over all 50
  characters; each LSTM direction stepping one time step at a time through the padded batch,
  the cell with its projection and both clips, its own input product per step; autograd
  through all of it; a plain full softmax (logits over the whole vocabulary, cross-entropy).
* ``elmo``: elmo.training.LanguageModel as ``elmo train`` runs it, with ``--negatives``
  (default 8192) shared sampled negatives: distinct tokens encoded once, the LSTM's input
  products for all steps at once, both directions stepped together, and the whole sequence
  of a layer as one autograd function (elmo/modules/lstm_autograd.py);
* ``elmo-full``: the same with the full softmax (``--negatives 0`` in ``elmo train``).

Before timing, ours (full softmax) and the reference compute the loss and gradients of one
batch from the same weights and must agree (fp32). Steps are timed in alternating rounds
(A B C, then C B A) and the ratio is of medians. Tokens/s counts text positions (each is
read by both directions); peak memory is the resident memory added during one step.

``--model bundled-default`` times the shape of the bundled default biLM instead (512 cells,
projection 128, 256 CNN filters; elmo/resources/default/options.json) with its training
recipe's batch of 128 x 20, 2,048 negatives and a 50k-word vocabulary (Adagrad still, for
both implementations). There the LSTM's small per-step products and elementwise work weigh
more than in the small configuration.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import CONFIGS, brown_sentences, machine_line, peak_memory_mib  # noqa: E402
from benchmarks.reference import ReferenceBiLM  # noqa: E402
from elmo import ElmoOptions  # noqa: E402
from elmo.allocator import keep_freed_memory  # noqa: E402
from elmo.data.lm_batches import PackedLMBatches  # noqa: E402
from elmo.modules import dense  # noqa: E402
from elmo.modules.softmax import Candidates, LogUniformSampler  # noqa: E402
from elmo.training.model import LanguageModel  # noqa: E402
from elmo.training.optim import adagrad  # noqa: E402
from elmo.vocab import Vocabulary  # noqa: E402


class _ListStream:
    """A sentence stream over a list (what PackedLMBatches reads)."""

    def __init__(self, sentences):
        self.sentences, self.i = sentences, 0

    def next_sentence(self):
        s = self.sentences[self.i % len(self.sentences)]
        self.i += 1
        return s


BUNDLED_DEFAULT = Path(__file__).resolve().parents[1] / "elmo" / "resources" / "default"
#: The shapes timed, with their training recipes' batch, negatives and vocabulary size.
MODELS = {
    "small": dict(options=lambda: CONFIGS["small"], shape="1024 cells, projection 128, 2048 filters",
                  batch_size=32, negatives=8192, vocab_size=10_000),
    "bundled-default": dict(options=lambda: json.loads((BUNDLED_DEFAULT / "options.json").read_text()),
                            shape="512 cells, projection 128, 256 filters",
                            batch_size=128, negatives=2048, vocab_size=50_000),
}


@dataclass
class Workload:
    """What a timed training step reads: the language model (dropout 0, training mode), its
    vocabulary, the packed batches and the sampler of the shared negatives."""
    model: LanguageModel
    vocab: Vocabulary
    batches: PackedLMBatches
    sampler: LogUniformSampler


def build_workload(model_name: str, batch_size: int, unroll_steps: int, vocab_size: int) -> Workload:
    """The model of ``MODELS[model_name]`` (seed 0) over Brown sentences, batched as
    ``elmo train`` batches them (rows packed, ``batch_size`` x ``unroll_steps``)."""
    sentences = brown_sentences(limit=60_000, min_len=1)
    counts = Counter(w for s in sentences for w in s)
    counts["<S>"] = counts["</S>"] = len(sentences)
    vocab = Vocabulary.from_counts(counts, max_size=vocab_size)
    options = ElmoOptions.from_dict(MODELS[model_name]["options"]())
    torch.manual_seed(0)
    model = LanguageModel(options, len(vocab), vocab.bos, vocab.eos, dropout=0.0).train()
    batches = PackedLMBatches(_ListStream(sentences), vocab, batch_size, unroll_steps)
    return Workload(model, vocab, batches, LogUniformSampler(len(vocab), seed=0))


def update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """The rest of a training step after the loss, as ``elmo train`` does it: backward, the
    gradient norm clipped to 10, the optimizer's step, the gradients dropped."""
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _heap_only() -> bool:
    """Stop glibc from mapping blocks of their own (``MALLOC_MMAP_MAX_=0``): blocks above the
    32 MiB cap of its mmap threshold, which keep_freed_memory cannot keep (the reference's
    padded convolution maps and (1280, 10000) logits), then come from the untrimmed heap too.
    The peak-memory column is then not comparable with a run without it."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.mallopt(-4, 0) == 1  # M_MMAP_MAX
    except (OSError, AttributeError):
        return False


def reference_loss(model: LanguageModel, batch) -> torch.Tensor:
    """The same loss as LanguageModel.forward with the full softmax (zero initial state),
    computed as the peer does: padded CNN, per-step cells, plain softmax over the vocabulary."""
    ref = ReferenceBiLM(model.bilm)
    rows = batch.fwd_chars.shape[0]
    tokens = ref.token_vectors(torch.cat([batch.fwd_chars, batch.bwd_chars]))
    fwd_in, bwd_in = tokens[:rows], tokens[rows:]
    mask = batch.fwd_mask
    lstm = model.bilm.lstm
    for j, layer in enumerate(lstm.layers):
        fwd = ref.direction(layer, 0, fwd_in, mask)
        # the backward stack reads its rows left to right: flip, run the reversed direction, flip back
        bwd = ref.direction(layer, 1, bwd_in.flip(1), mask.flip(1)).flip(1)
        if lstm.use_skip_connections and j > 0:
            fwd, bwd = fwd + fwd_in, bwd + bwd_in
        fwd_in, bwd_in = fwd, bwd
    soft = model.softmax
    losses = []
    for h, t, m in ((fwd_in, batch.fwd_targets, batch.fwd_mask), (bwd_in, batch.bwd_targets, batch.bwd_mask)):
        logits = F.linear(h[m], soft.weight, soft.bias)  # (N, V): every word of the vocabulary
        losses.append(F.cross_entropy(logits, t[m]))
    return 0.5 * (losses[0] + losses[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per implementation (after one warm-up)")
    parser.add_argument("--model", choices=sorted(MODELS), default="small",
                        help="the model shape and its batch, negatives and vocabulary defaults")
    parser.add_argument("--batch-size", type=int, default=None, help="(default: the model's, 32 or 128)")
    parser.add_argument("--unroll-steps", type=int, default=20)
    parser.add_argument("--negatives", type=int, default=None,
                        help="ours: shared sampled negatives (default: the model's, 8192 or 2048)")
    parser.add_argument("--no-full", action="store_true", help="skip timing ours with the full softmax")
    parser.add_argument("--vocab-size", type=int, default=None, help="(default: the model's, 10k or 50k)")
    parser.add_argument("--bf16", action="store_true", help="also time the opt-in bf16 autocast")
    parser.add_argument("--dense-default", action="store_true",
                        help="also time ours with PyTorch's own products instead of oneDNN's where "
                             "elmo.modules.dense would use them (row elmo-mkl)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--heap-only", action="store_true",
                        help="also keep freed blocks above glibc's 32 MiB mmap-threshold cap (M_MMAP_MAX 0), "
                             "for both implementations (see benchmarks/RESULTS.md)")
    parser.add_argument("--profile", action="store_true",
                        help="after timing, print torch.profiler's table of 3 steps of ours")
    args = parser.parse_args()
    shape = MODELS[args.model]
    for key in ("batch_size", "negatives", "vocab_size"):
        if getattr(args, key) is None:
            setattr(args, key, shape[key])
    if args.threads:
        torch.set_num_threads(args.threads)
    keep_freed_memory()  # as `elmo train` does; it applies to both implementations alike
    if args.heap_only and not _heap_only():
        parser.error("--heap-only needs glibc")

    work = build_workload(args.model, args.batch_size, args.unroll_steps, args.vocab_size)
    model, vocab, batches, sampler = work.model, work.vocab, work.batches, work.sampler
    n_params = sum(p.numel() for p in model.parameters())
    # each its own Adagrad: the reference torch's default one (as the peer's trainer uses it),
    # ours what `elmo train` builds (the fused kernel on the CPU)
    optimizers = {"reference": torch.optim.Adagrad(model.parameters(), lr=0.2, initial_accumulator_value=1.0),
                  "elmo": adagrad(model.parameters(), 0.2, 1.0)}
    tokens = args.batch_size * args.unroll_steps
    print(f"machine: {machine_line()}{'; heap only' if args.heap_only else ''}; "
          f"model: {args.model} ({shape['shape']}), "
          f"{n_params / 1e6:.1f}M parameters with the softmax; vocabulary {len(vocab):,}; batch "
          f"{args.batch_size} x {args.unroll_steps}; {args.negatives} shared negatives")

    # 1. Ours (full softmax) and the reference agree on one batch (loss and gradients).
    batch = batches.next_batch()
    ours = model(batch, None, None)["loss"]
    g_ours = torch.autograd.grad(ours, list(model.parameters()))
    theirs = reference_loss(model, batch)
    g_ref = torch.autograd.grad(theirs, list(model.parameters()))
    worst = max(float((a - b).abs().max() / (b.abs().max() + 1e-12)) for a, b in zip(g_ours, g_ref))
    print(f"agreement (full softmax): loss {float(ours.detach()):.6f} vs reference {float(theirs.detach()):.6f}; "
          f"worst relative gradient difference {worst:.2e}")
    assert abs(float(ours.detach()) - float(theirs.detach())) < 1e-4 and worst < 1e-3, "the implementations disagree"
    if args.bf16:  # how far the opt-in bf16 autocast is from fp32 on the same batch (full softmax)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(batch, None, None)["loss"]
        g_low = torch.autograd.grad(low, list(model.parameters()))
        dev = max(float((a - b).norm() / (b.norm() + 1e-12)) for a, b in zip(g_low, g_ours))
        print(f"bf16 autocast: loss {float(low.detach()):.6f} vs fp32 {float(ours.detach()):.6f}; "
              f"largest relative gradient difference (norm, per parameter) {dev:.2e}")

    # 2. Timed training steps, alternating implementations so both see the same machine load.
    state = {}  # each implementation carries its own LSTM state

    def step(name: str, bf16: bool = False, backend: str = "auto") -> None:
        key = f"{name}-{bf16}-{backend}"
        dense.BACKEND = backend
        b = batches.next_batch()
        negs = Candidates.draw(sampler, args.negatives) if name == "elmo" and args.negatives > 0 else None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            if name == "reference":
                loss = reference_loss(model, b)
            else:
                out = model(b, state.get(key), negs)
                state[key], loss = out["state"], out["loss"]
        update(model, optimizers["reference" if name == "reference" else "elmo"], loss)
        dense.BACKEND = "auto"

    impls = [("reference", "reference", False), ("elmo", "elmo", False)]
    if not args.no_full:
        impls.append(("elmo-full", "elmo-full", False))
    if args.bf16:
        impls.append(("elmo-bf16", "elmo", True))
    if args.dense_default:
        impls.append(("elmo-mkl", "elmo", False))
    backend_of = {"elmo-mkl": "default"}  # elmo.modules.dense.BACKEND of each row
    times = {name: [] for name, _, _ in impls}
    for name, kind, bf16 in impls:
        step(kind, bf16, backend_of.get(name, "auto"))  # warm-up
    for r in range(args.steps):  # A B C, C B A, ...: a change in load or order hits all alike
        for name, kind, bf16 in (impls if r % 2 == 0 else impls[::-1]):
            t = time.perf_counter()
            step(kind, bf16, backend_of.get(name, "auto"))
            times[name].append(time.perf_counter() - t)
    base = tokens / statistics.median(times["reference"])
    print(f"{'impl':>10} {'tok/s':>9} {'ratio':>6} {'peak MiB':>9}   step seconds")
    for name, kind, bf16 in impls:
        rate = tokens / statistics.median(times[name])
        mem = peak_memory_mib(lambda: step(kind, bf16, backend_of.get(name, "auto")))
        print(f"{name:>10} {rate:>9.1f} {rate / base:>5.2f}x {mem:>9.0f}   "
              + " ".join(f"{t:.2f}" for t in times[name]), flush=True)
    # the ratio of each round (same round, same machine load), as a spread for the median
    for name, _, _ in impls[1:]:
        rounds = sorted(r / o for r, o in zip(times["reference"], times[name]))
        print(f"{name}: per-round ratios {' '.join(f'{x:.2f}' for x in rounds)}")
    if args.profile:  # where a step of ours spends its time, by operator
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                step("elmo")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


if __name__ == "__main__":
    main()
