"""Training batches (``elmo.data.lm_batches``): the character ids gathered from a table of each
distinct word's ids, against the per-token build from Python tuples that the trainer used
before (kept here as the reference), in one process.

    python benchmarks/lm_batches.py [--rows 32 128] [--steps 20] [--sentences 20000]

Both encoders read the same Brown sentences through ``PackedLMBatches`` (the trainer's packed
layout); every batch must be equal, element for element, before anything is timed. A batch
is built on the CPU while the model waits, unless something overlaps them: on a GPU, whose
step takes milliseconds, this is what bounds tokens per second. Medians of alternating rounds
(benchmarks.common.time_interleaved), each round 10 batches.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, Sequence, Tuple

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import benchmark_parser, brown_sentences, brown_source, machine_line, parse_args, time_interleaved  # noqa: E402
from elmo import model_path  # noqa: E402
from elmo.chars import word_to_char_ids  # noqa: E402
from elmo.data import lm_batches  # noqa: E402
from elmo.vocab import Vocabulary  # noqa: E402


class TupleEncoder(lm_batches._Encoder):
    """The reference: each token's cached tuple of ids, and one ``torch.tensor`` of the nested
    lists, (B, T, C), for every batch (what ``_Encoder`` did before the table; it also built
    them for the targets and threw them away, which the reference leaves out)."""

    def __init__(self, vocab: Vocabulary, max_chars: int, cache_size: int = 200_000):
        super().__init__(vocab, max_chars, cache_size)
        self._tuples: Dict[str, Tuple[int, ...]] = {}

    def char_rows(self, rows: Sequence[Sequence[str]], steps: int) -> torch.Tensor:
        pad = (0,) * self.max_chars
        chars = [[self._tuple(w) for w in row] + [pad] * (steps - len(row)) for row in rows]
        return torch.tensor(chars, dtype=torch.long).reshape(len(rows), steps, self.max_chars)

    def _tuple(self, word: str) -> Tuple[int, ...]:
        ids = self._tuples.get(word)
        if ids is None:
            ids = self._tuples[word] = word_to_char_ids(word, self.max_chars)
        return ids


class _Stream:
    """The sentences again and again, as ``CorpusStream`` gives them (without files)."""

    def __init__(self, sentences):
        self.sentences, self.i = sentences, 0

    def next_sentence(self):
        self.i += 1
        return self.sentences[(self.i - 1) % len(self.sentences)]


def batches(encoder_class, sentences, vocab: Vocabulary, rows: int, steps: int) -> lm_batches.PackedLMBatches:
    made = lm_batches.PackedLMBatches(_Stream(sentences), vocab, rows, steps)  # type: ignore[arg-type]
    made.encoder = encoder_class(vocab, 50)
    return made


def main(argv=None) -> None:
    ap = benchmark_parser(__doc__)
    ap.add_argument("--rows", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--sentences", type=int, default=20000)
    args = parse_args(ap, argv)
    sentences = brown_sentences(args.sentences)
    vocab = Vocabulary.load(model_path("default") / "vocab.txt")
    print(f"machine: {machine_line()}")
    print(f"text: {len(sentences):,} Brown sentences ({brown_source()}); the default model's vocabulary "
          f"({len(vocab):,} words); packed batches of {args.steps} steps, 50 characters a token")
    print(f"{'rows':>5} {'reference ms':>13} {'table ms':>9} {'ratio':>6}")
    for n_rows in args.rows:
        made = {name: batches(cls, sentences, vocab, n_rows, args.steps)
                for name, cls in (("reference", TupleEncoder), ("table", lm_batches._Encoder))}
        for _ in range(200):                     # the same batches, well past the first sentences
            a, b = (made[name].next_batch() for name in ("reference", "table"))
            for field in lm_batches.LMBatch.__dataclass_fields__:
                if not torch.equal(getattr(a, field), getattr(b, field)):
                    raise SystemExit(f"the batches differ in {field}")
        times = time_interleaved({name: (lambda m=m: [m.next_batch() for _ in range(10)])
                                  for name, m in made.items()})
        ref, new = (1e3 * times[name] / 10 for name in ("reference", "table"))
        print(f"{n_rows:>5} {ref:>13.2f} {new:>9.2f} {ref / new:>5.2f}x")


if __name__ == "__main__":
    main()
