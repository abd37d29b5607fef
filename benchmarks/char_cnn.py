"""The character CNN with its distinct tokens grouped by length against one group, in one process.

    python benchmarks/char_cnn.py [--config default] [--tokens 640 3000] [--threads 1]

For each size, it takes windows of that many running tokens of real Brown text, keeps their
distinct tokens (what the CNN sees for one batch), and times ``encode_tokens`` forward, and
forward plus backward, with the length groups of :func:`elmo.modules.char_cnn.length_groups`
and with a single group trimmed to the longest token (the previous computation); and, on the
CPU, the length groups with ``nn.Conv1d`` in place of the convolutions as matrix multiplies
(``char_cnn.CONV_AS_MATMUL = False``). It checks that all give the same vectors and prints
the ratios. ``--config`` is a bundled model name
(``default``) or ``small`` / ``original`` (random weights, the released models' shapes).
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import CONFIGS, benchmark_parser, brown_sentences, brown_source, parse_args, random_model, time_interleaved  # noqa: E402
from elmo import batch_to_ids, from_pretrained  # noqa: E402
from elmo.modules import char_cnn  # noqa: E402


def distinct_token_batches(n_tokens: int, n_batches: int = 4):
    """(N, 50) char ids of the distinct tokens of consecutive windows of ``n_tokens`` tokens."""
    words = [w for s in brown_sentences(20000) for w in s]
    out = []
    for b in range(n_batches):
        window = words[b * n_tokens:(b + 1) * n_tokens]
        out.append(batch_to_ids([sorted(set(window))])[0])
    return out


def main(argv=None) -> None:
    ap = benchmark_parser(__doc__)
    ap.add_argument("--config", default="default", help="default, small or original")
    ap.add_argument("--tokens", type=int, nargs="+", default=[640, 3000],
                    help="running tokens per batch (640 = the trainer's 32 x 20)")
    args = parse_args(ap, argv)
    bilm = random_model(args.config) if args.config in CONFIGS else from_pretrained(args.config)
    encoder = bilm.token_encoder
    brown_sentences(1)                 # loads the text, so that its source is known
    print(f"char CNN of {args.config!r}: filters {encoder.config.filters}; {args.threads} thread(s); "
          f"text: {brown_source()}")

    def encode(batches, overhead, backward, as_matmul=True):
        def run():
            char_cnn.GROUP_OVERHEAD_MACS = overhead
            char_cnn.CONV_AS_MATMUL = as_matmul
            for ids in batches:
                if backward:
                    encoder.encode_tokens(ids).sum().backward()
                else:
                    with torch.no_grad():
                        encoder.encode_tokens(ids)
        return run

    default_overhead = char_cnn.GROUP_OVERHEAD_MACS
    one_group = 10 ** 15          # no split is ever worth this much
    try:
        for n_tokens in args.tokens:
            batches = distinct_token_batches(n_tokens)
            with torch.no_grad():
                encode(batches, one_group, False)()
                outputs = {}
                for name, overhead, as_matmul in (("plain", one_group, True), ("grouped", default_overhead, True),
                                                  ("conv1d", default_overhead, False)):
                    char_cnn.GROUP_OVERHEAD_MACS, char_cnn.CONV_AS_MATMUL = overhead, as_matmul
                    outputs[name] = [encoder.encode_tokens(ids) for ids in batches]
                char_cnn.GROUP_OVERHEAD_MACS, char_cnn.CONV_AS_MATMUL = default_overhead, True
            diff = max(float((a - b).abs().max()) for other in ("grouped", "conv1d")
                       for a, b in zip(outputs["plain"], outputs[other]))
            lengths = ((batches[0] != 261) & (batches[0] != 0)).sum(dim=1)
            groups = char_cnn.length_groups(lengths, encoder.config.max_width,
                                            encoder._group_overhead_positions())
            print(f"\n{n_tokens} running tokens -> {sum(len(b) for b in batches) / len(batches):.0f} "
                  f"distinct a batch; groups of the first (tokens, width kept): "
                  f"{[(len(i), k) for i, k in groups]}; largest difference {diff:.1e}")
            for backward in (False, True):
                encoder.train(backward)
                t = time_interleaved({"one group": encode(batches, one_group, backward),
                                      "length groups": encode(batches, default_overhead, backward),
                                      "conv1d": encode(batches, default_overhead, backward, False)})
                label = "forward + backward" if backward else "forward"
                print(f"  {label:18s} one group {t['one group'] * 1e3:7.1f} ms, length groups "
                      f"{t['length groups'] * 1e3:7.1f} ms: {t['one group'] / t['length groups']:.2f}x; "
                      f"with conv1d {t['conv1d'] * 1e3:7.1f} ms: matrix multiplies "
                      f"{t['conv1d'] / t['length groups']:.2f}x as fast")
    finally:
        char_cnn.GROUP_OVERHEAD_MACS, char_cnn.CONV_AS_MATMUL = default_overhead, True


if __name__ == "__main__":
    main()
