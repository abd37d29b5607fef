"""What HDF5's Fletcher-32 checksum on each line's dataset of an ``elmo embed`` output adds:
to the embed's time, to reading the file back and to its size.

    python benchmarks/embed_fletcher32.py [--model fixture] [--sentences 2000] [--threads N]

Embeds ``--sentences`` Brown sentences (one a line) with ``elmo.embed_file`` in alternating
rounds, the lines' datasets written as the package writes them (contiguous) and with the
checksum (chunked along the tokens in chunks of at most 1 MiB, h5py's chunk cache, so a long
line's windows fill a chunk in memory: :func:`checked_layout`; the merge's copy keeps the
filter), then reads every line back as AllenNLP's readers do (``f[str(i)][...]``, which verifies
the checksum). The fixture model is tiny, so its embed time is mostly the file's writing: the
worst case for the checksum's share. Each chunked dataset also costs a chunk index (about 3 kB).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import elmo  # noqa: E402
import elmo.embedding.output as output  # noqa: E402
from benchmarks.common import benchmark_parser, brown_sentences, machine_line, parse_args, \
    time_interleaved  # noqa: E402


#: The most bytes of one chunk: h5py's chunk cache per dataset.
CHUNK_BYTES = 1 << 20


def checked_layout(shape, dtype) -> dict:
    """``create_dataset``'s arguments for a line's dataset of ``shape`` ((K, n, D) or (n, D))
    with the Fletcher-32 filter; none for a line without tokens (a chunk cannot be empty)."""
    if 0 in tuple(shape):
        return {}
    per_token = int(np.prod([*shape[:-2], shape[-1]])) * np.dtype(dtype).itemsize
    tokens = max(1, min(shape[-2], CHUNK_BYTES // per_token))
    return {"chunks": (*shape[:-2], tokens, shape[-1]), "fletcher32": True}


def _create_checked(self, line: int, shape, dtype) -> None:
    """:meth:`SegmentWriter.create` with the checksum."""
    self._file.create_dataset(str(line), shape=shape, dtype=dtype, **checked_layout(shape, dtype))
    self._out.check()


def _embed(text: Path, out: Path, model, checked: bool) -> None:
    plain = output.SegmentWriter.create
    if checked:
        output.SegmentWriter.create = _create_checked   # type: ignore[method-assign]
    try:
        elmo.embed_file(text, out, model, overwrite=True, progress=False)
    finally:
        output.SegmentWriter.create = plain   # type: ignore[method-assign]


def _read(path: Path, n: int) -> None:
    with h5py.File(path, "r") as f:
        for i in range(n):
            f[str(i)][...]


def main() -> None:
    parser = benchmark_parser(__doc__, threads=1)
    parser.add_argument("--model", default="fixture")
    parser.add_argument("--sentences", type=int, default=2000)
    args = parse_args(parser)
    print(machine_line())
    model = elmo.from_pretrained(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "sentences.txt"
        sentences = brown_sentences(args.sentences)
        text.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
        n = len(sentences)
        outs = {checked: Path(tmp) / f"out-{checked}.hdf5" for checked in (False, True)}
        embed = time_interleaved({str(c): (lambda c=c: _embed(text, outs[c], model, c)) for c in outs},
                                 min_seconds=2.0, min_rounds=3)
        read = time_interleaved({str(c): (lambda c=c: _read(outs[c], n)) for c in outs},
                                min_seconds=1.0, min_rounds=3)
        with h5py.File(outs[True], "r") as f:
            assert f["0"].fletcher32
        sizes = {c: outs[c].stat().st_size / 1e6 for c in outs}
    print(f"{n} sentences, {sum(map(len, sentences)):,} tokens, model {args.model}")
    print(f"{'':>10} {'plain':>9} {'fletcher32':>11} {'ratio':>7}")
    for what, t in (("embed s", embed), ("read s", read)):
        print(f"{what:>10} {t['False']:9.3f} {t['True']:11.3f} {t['True'] / t['False']:6.3f}x")
    print(f"{'file MB':>10} {sizes[False]:9.2f} {sizes[True]:11.2f} {sizes[True] / sizes[False]:6.3f}x")


if __name__ == "__main__":
    main()
