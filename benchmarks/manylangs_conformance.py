"""How close the ELMoForManyLangs fixture is reproduced: max |ours - original| per way of running.

    python benchmarks/manylangs_conformance.py

For both tiny models (tests/fixtures/elmoformanylangs: ``model`` without and ``model_word``
with a word embedding): all 40 sentences in one batch, in batches of 7, one at a time, through
the ``Embedder`` (sorted batches of 6), and the stateful second call; each compared with the
original's outputs (all three layers and their average). The fixture's tolerance is 1e-5.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import h5py
import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import elmo  # noqa: E402
from elmo.runtime import set_threads  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "elmoformanylangs"


def layers_of(bilm, sentences):
    with torch.no_grad():
        return torch.stack(bilm(bilm.token_ids(sentences))["activations"]).numpy()


def main() -> None:
    set_threads(1)
    sentences = json.loads((FIXTURE / "sentences.json").read_text(encoding="utf-8"))
    for name, expected_file in (("model", "expected.hdf5"), ("model_word", "expected_word.hdf5")):
        bilm = elmo.from_pretrained(FIXTURE / name)
        with h5py.File(FIXTURE / expected_file, "r") as f:
            want = [f[f"s{k}"][()] for k in range(len(sentences))]
            want_avg = [f[f"avg{k}"][()] for k in range(len(sentences))]
            group = f["stateful"]
            order1, order2 = list(group.attrs["call1_row_order"]), list(group.attrs["call2_row_order"])
            want_stateful = {k: group[f"s{k}"][()] for k in order2}

        def worst(arrays):
            return max(max(np.abs(a - w).max(), np.abs(a.mean(0) - v).max())
                       for a, w, v in zip(arrays, want, want_avg))

        row = {}
        for batch in (40, 7, 1):
            arrays = []
            for start in range(0, len(sentences), batch):
                chunk = sentences[start:start + batch]
                out = layers_of(bilm, chunk)
                arrays += [out[:, b, :len(s)] for b, s in enumerate(chunk)]
            row[f"batch {batch}"] = worst(arrays)
        row["Embedder (batches of 6)"] = worst(elmo.Embedder(bilm, batch_size=6).embed_sentences(sentences))
        stateful = elmo.from_pretrained(FIXTURE / name, stateful=True)
        layers_of(stateful, [sentences[k] for k in order1])
        out = layers_of(stateful, [sentences[k] for k in order2])
        row["stateful call 2"] = max(np.abs(out[:, r, :len(sentences[k])] - want_stateful[k]).max()
                                     for r, k in enumerate(order2))
        print(f"{name:10s} " + "  ".join(f"{k}: {v:.1e}" for k, v in row.items()))


if __name__ == "__main__":
    main()
