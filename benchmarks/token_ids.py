"""Token ids through the model's own id scheme (``bilm.token_ids``), in one process.

    python benchmarks/token_ids.py [--sentences 256] [--batch 32] [--threads 1]

1. A byte-id model (the bundled ``default``): a whole biLM call on ids from
   ``bilm.token_ids`` against ids from ``elmo.batch_to_ids`` directly (what the Embedder called
   before the id schemes): the same ids, so the ratio is the cost of the routing.
2. The character CNN's token lengths, now the position of the last non-padding id (so that a
   dictionary model's padding id can be anything), against the previous count of non-padding
   ids, and the check that every token's ids open with the scheme's start id (made for
   dictionary models, which it protects from byte ids; timed here on byte ids), as shares of
   ``encode_tokens``.
3. An ELMoForManyLangs model (the tiny test fixture, ``model_word``): tokens converted per
   second by its ``CharVocabulary`` against byte ids (both Python loops over the tokens).

Timings are medians of alternating rounds (benchmarks.common.time_interleaved).
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import benchmark_parser, brown_sentences, brown_source, parse_args, time_interleaved  # noqa: E402
from elmo import batch_to_ids, from_pretrained  # noqa: E402
from elmo.chars import PAD_CHAR  # noqa: E402
from elmo.modules.char_cnn import unique_rows  # noqa: E402


def main(argv=None) -> None:
    ap = benchmark_parser(__doc__)
    ap.add_argument("--sentences", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    args = parse_args(ap, argv)
    sentences = brown_sentences(args.sentences)
    batches = [sentences[i:i + args.batch] for i in range(0, len(sentences), args.batch)]
    print(f"{len(sentences)} sentences ({brown_source()}), batches of {args.batch}, "
          f"{args.threads} thread(s)")

    bilm = from_pretrained("default")
    for b in batches:
        assert torch.equal(bilm.token_ids(b), batch_to_ids(b, 50))

    def through(convert):
        def run():
            with torch.no_grad():
                for b in batches:
                    bilm(convert(b))
        return run
    t = time_interleaved({"scheme": through(bilm.token_ids), "direct": through(lambda b: batch_to_ids(b, 50))})
    print(f"1. default model, whole biLM: bilm.token_ids / batch_to_ids time = {t['scheme'] / t['direct']:.3f}")

    encoder = bilm.token_encoder
    distinct = [unique_rows(batch_to_ids(b, 50).reshape(-1, 50))[0] for b in batches]
    distinct = [d[(d > 0).any(1)] for d in distinct]

    def last_position():
        for ids in distinct:
            real = (ids != PAD_CHAR + 1) & (ids != 0)
            (real * torch.arange(1, ids.shape[1] + 1)).amax(dim=1)

    def count():
        for ids in distinct:
            ((ids != PAD_CHAR + 1) & (ids != 0)).sum(dim=1)

    def start_check():
        for ids in distinct:
            bool((ids[:, 0] == encoder.id_scheme.start_id).all())

    def encode():
        with torch.no_grad():
            for ids in distinct:
                encoder.encode_tokens(ids)
    t = time_interleaved({"last": last_position, "count": count, "check": start_check, "encode": encode})
    print(f"2. token lengths: last position {t['last'] * 1e3:.3f} ms, count {t['count'] * 1e3:.3f} ms, "
          f"encode_tokens {t['encode'] * 1e3:.1f} ms: the change is "
          f"{(t['last'] - t['count']) / t['encode'] * 100:+.2f}% of encode_tokens; the start-id "
          f"check {t['check'] * 1e3:.3f} ms ({t['check'] / t['encode'] * 100:.2f}%)")

    word_model = from_pretrained(ROOT / "tests" / "fixtures" / "elmoformanylangs" / "model_word")
    scheme = word_model.id_scheme
    n_tokens = sum(len(s) for s in sentences)

    def vocab_ids():
        scheme._cache.clear()
        scheme.batch_to_ids(sentences)

    def byte_ids():
        from elmo.chars import word_to_char_ids
        word_to_char_ids.cache_clear()
        batch_to_ids(sentences, 50)
    t = time_interleaved({"vocab": vocab_ids, "bytes": byte_ids})
    print(f"3. conversion without caches: CharVocabulary {n_tokens / t['vocab']:,.0f} tokens/s, "
          f"byte ids {n_tokens / t['bytes']:,.0f} tokens/s")


if __name__ == "__main__":
    main()
