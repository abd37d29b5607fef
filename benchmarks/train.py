"""Training speed of the biLM language model against a peer-faithful reference, in one process.

    python benchmarks/train.py [--steps 5] [--threads N] [--bf16] [--negatives 8192] [--profile]

The small configuration (1024 cells, projection 128, 2048 CNN filters), a 10k-word vocabulary
built from Brown sentences, batches of 32 rows x 20 steps packed as in the original trainer,
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
batch from the same weights and must agree (fp32). Steps are timed in alternating rounds and
the ratio is of medians. Tokens/s counts text positions (each is read by both directions);
peak memory is the resident memory added during one step.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import CONFIGS, brown_sentences, peak_memory_mib  # noqa: E402
from benchmarks.reference import ReferenceBiLM  # noqa: E402
from elmo import ElmoOptions  # noqa: E402
from elmo.allocator import keep_freed_memory  # noqa: E402
from elmo.data.lm_batches import PackedLMBatches  # noqa: E402
from elmo.modules.softmax import Candidates, LogUniformSampler  # noqa: E402
from elmo.training.model import LanguageModel  # noqa: E402
from elmo.training.trainer import adagrad  # noqa: E402
from elmo.vocab import Vocabulary  # noqa: E402


class _ListStream:
    """A sentence stream over a list (what PackedLMBatches reads)."""

    def __init__(self, sentences):
        self.sentences, self.i = sentences, 0

    def next_sentence(self):
        s = self.sentences[self.i % len(self.sentences)]
        self.i += 1
        return s


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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per implementation (after one warm-up)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--unroll-steps", type=int, default=20)
    parser.add_argument("--negatives", type=int, default=8192, help="ours: shared sampled negatives")
    parser.add_argument("--no-full", action="store_true", help="skip timing ours with the full softmax")
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--bf16", action="store_true", help="also time the opt-in bf16 autocast")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--profile", action="store_true",
                        help="after timing, print torch.profiler's table of 3 steps of ours")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    keep_freed_memory()  # as `elmo train` does; it applies to both implementations alike

    sentences = brown_sentences(limit=60_000, min_len=1)
    counts = Counter(w for s in sentences for w in s)
    counts["<S>"] = counts["</S>"] = len(sentences)
    vocab = Vocabulary.from_counts(counts, max_size=args.vocab_size)
    options = ElmoOptions.from_dict(CONFIGS["small"])
    torch.manual_seed(0)
    model = LanguageModel(options, len(vocab), vocab.bos, vocab.eos, dropout=0.0).train()
    n_params = sum(p.numel() for p in model.parameters())
    batches = PackedLMBatches(_ListStream(sentences), vocab, args.batch_size, args.unroll_steps)
    sampler = LogUniformSampler(len(vocab), seed=0)
    # each its own Adagrad: the reference torch's default one (as the peer's trainer uses it),
    # ours what `elmo train` builds (the fused kernel on the CPU)
    optimizers = {"reference": torch.optim.Adagrad(model.parameters(), lr=0.2, initial_accumulator_value=1.0),
                  "elmo": adagrad(model.parameters(), 0.2, 1.0)}
    tokens = args.batch_size * args.unroll_steps
    print(f"machine: {torch.get_num_threads()} threads; model: small (1024 cells, projection 128, 2048 filters), "
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

    # 2. Timed training steps, alternating implementations so both see the same machine load.
    state = {}  # each implementation carries its own LSTM state

    def step(name: str, bf16: bool = False) -> None:
        key = f"{name}-{bf16}"
        b = batches.next_batch()
        negs = Candidates.draw(sampler, args.negatives) if name == "elmo" and args.negatives > 0 else None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            if name == "reference":
                loss = reference_loss(model, b)
            else:
                out = model(b, state.get(key), negs)
                state[key], loss = out["state"], out["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer = optimizers["reference" if name == "reference" else "elmo"]
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    impls = [("reference", "reference", False), ("elmo", "elmo", False)]
    if not args.no_full:
        impls.append(("elmo-full", "elmo-full", False))
    if args.bf16:
        impls.append(("elmo-bf16", "elmo", True))
    times = {name: [] for name, _, _ in impls}
    for name, kind, bf16 in impls:
        step(kind, bf16)  # warm-up
    for _ in range(args.steps):
        for name, kind, bf16 in impls:
            t = time.perf_counter()
            step(kind, bf16)
            times[name].append(time.perf_counter() - t)
    base = tokens / statistics.median(times["reference"])
    print(f"{'impl':>10} {'tok/s':>9} {'ratio':>6} {'peak MiB':>9}   step seconds")
    for name, kind, bf16 in impls:
        rate = tokens / statistics.median(times[name])
        mem = peak_memory_mib(lambda: step(kind, bf16))
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
