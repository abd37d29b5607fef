"""The forward and training passes read the device a fixed number of times, whatever the
sentence length or batch size: the per-step loop never waits for the host (README, "GPU").
Counted on the CPU with tests/host_reads.py, as a GPU would sync."""
from __future__ import annotations

import torch

from elmo import batch_to_ids
from elmo.modules.softmax import Candidates, LogUniformSampler

from conftest import random_bilm
from host_reads import HostReads
from training_helpers import tiny_lm_and_batch, toy_sentences


def _forward_reads(bilm, sentences) -> HostReads:
    ids = batch_to_ids(sentences)
    with torch.no_grad():
        bilm(ids)  # first calls of a process probe the CPU's kernels and make caches once
        with HostReads() as reads:
            bilm(ids)
    return reads


def test_a_forward_reads_the_device_as_often_for_any_length_and_batch():
    bilm = random_bilm()
    short = _forward_reads(bilm, [["a", "b", "c"], ["d"]])
    long = _forward_reads(bilm, [[f"w{i}" for i in range(40)], ["d"]])
    wide = _forward_reads(bilm, [[f"w{i}" for i in range(40)]] + [["x", f"y{j}"] for j in range(7)])
    print(f"forward: {short.total} host reads {dict(short.counts)}")   # (the README's figure; -rP shows it)
    assert short.total > 0                                 # (the counter sees the reads there are)
    assert long.counts == short.counts and wide.counts == short.counts, (short.counts, long.counts, wide.counts)


def test_the_mix_with_layer_norm_reads_the_device_no_more_than_without():
    """Layer norm read its count of tokens back once per layer (a GPU sync each)."""
    from elmo import Elmo
    bilm = random_bilm()
    ids = batch_to_ids([["a", "b", "c"], ["d"]])
    counts = []
    for norm in (False, True):
        elmo = Elmo(module=bilm, dropout=0.0, do_layer_norm=norm)
        with torch.no_grad():
            elmo(ids)
            with HostReads() as reads:
                elmo(ids)
        counts.append(reads.counts)
    assert counts[1] == counts[0], counts


def _training_reads(tmp_path, rows: int, steps: int, sampled: bool) -> HostReads:
    lines = "\n".join(" ".join(s) for s in toy_sentences(200, 0)) + "\n"
    model, vocab, batch = tiny_lm_and_batch(tmp_path / "t.txt", lines, rows, steps)
    negatives = Candidates.draw(LogUniformSampler(len(vocab), seed=0), 20) if sampled else None
    model(batch, None, negatives)["loss"].backward()  # (as above: one-time probes and caches)
    with HostReads() as reads:
        model(batch, None, negatives)["loss"].backward()
    return reads


def test_a_training_step_reads_the_device_as_often_for_any_unroll_and_rows(tmp_path):
    for sampled in (False, True):
        small = _training_reads(tmp_path, 2, 4, sampled)
        large = _training_reads(tmp_path, 6, 24, sampled)
        print(f"training step, {'sampled' if sampled else 'full'} softmax: {small.total} host reads "
              f"{dict(small.counts)}")
        assert small.total > 0
        assert large.counts == small.counts, (sampled, small.counts, large.counts)


def test_the_readmes_counts_are_the_counts(tmp_path):
    """The README quoted 23 to 25 reads for a training step long after they had become 29 and
    31; its figures are now read from it and compared with what is counted here."""
    import re
    from pathlib import Path
    text = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8").split())
    quoted = re.search(r"a fixed number of times \((\d+), and (\d+) (?:or|to) (\d+)", text)
    assert quoted, "the README's count of host reads (section GPU) is gone or reworded: update this test"
    forward = _forward_reads(random_bilm(), [["a", "b", "c"], ["d"]]).total
    full, sampled = (_training_reads(tmp_path, 2, 4, s).total for s in (False, True))
    assert tuple(map(int, quoted.groups())) == (forward, full, sampled)
