"""The forward and training passes read the device a fixed number of times, whatever the
sentence length or batch size: the per-step loop never waits for the host (README, "GPU").
Counted on the CPU with tests/host_reads.py, as a GPU would sync."""
from __future__ import annotations

import pytest
import torch

from elmo import batch_to_ids
from elmo.modules.softmax import Candidates, LogUniformSampler

from conftest import random_bilm
from host_reads import HostReads
from training_helpers import NetAside, tiny_lm_and_batch, toy_run_config, toy_sentences, training_run


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


def test_a_forward_checks_its_ids_and_counts_its_tokens_in_one_read(monkeypatch):
    """The BiLM checked the ids' range, looked for padding before a token, and found the
    sentences' ends, and the character CNN checked the ids again and found the tokens: 8 reads
    before the CNN's first computation. They are now one, stopped at its first step."""
    from elmo.modules import char_cnn

    class Stopped(Exception):
        pass

    def stop(ids):
        raise Stopped

    for bilm, sentences in ((random_bilm(), [["a", "b", "c"], ["d"], []]),
                            (elmo_from_pretrained_manylangs(), [["a", "b"]])):
        ids = bilm.token_ids(sentences)
        with torch.no_grad():
            bilm(ids)
            with monkeypatch.context() as patch:
                patch.setattr(char_cnn, "unique_rows", stop)
                with HostReads() as reads, pytest.raises(Stopped):
                    bilm(ids)
        assert reads.total == 1, dict(reads.counts)


def elmo_from_pretrained_manylangs():
    """A dictionary model (its ids are also checked for how each token starts)."""
    from elmo import from_pretrained
    from conftest import FIXTURES
    return from_pretrained(FIXTURES / "elmoformanylangs" / "model_word")


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


def test_the_sampled_softmax_reads_nothing_back():
    """Its accidental hits (a negative that is a row's true word) were found with a nonzero and
    cut into the chunks with a tolist: two waits for a GPU at every step, after the LSTMs. They
    are now removed row by row without a read, the loss and gradients as before (the
    differential test of the softmax compares them with the formula)."""
    from elmo.modules.softmax import SharedSoftmax
    torch.manual_seed(0)
    softmax = SharedSoftmax(30, 8)
    hidden = torch.randn(40, 8, requires_grad=True)
    targets, sampled = torch.randint(0, 30, (40,)), torch.randperm(30)[:12]
    assert torch.isin(targets, sampled).any()   # (hits there are)
    for chunk_rows in (None, 7):
        with HostReads() as reads:
            loss = softmax.sampled_nll(hidden, targets, sampled, torch.zeros(12), torch.zeros(40), chunk_rows)
            loss.sum().backward()
        assert reads.total == 0, dict(reads.counts)


def test_the_readmes_counts_are_the_counts(tmp_path):
    """The README quoted 23 to 25 reads for a training step long after they had become 29 and
    31; its figures are now read from it and compared with what is counted here."""
    import re
    from pathlib import Path
    text = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8").split())
    quoted = re.search(r"a fixed number of times \((\d+), and (\d+)(?: (?:or|to) (\d+))? with a full or", text)
    assert quoted, "the README's count of host reads (section GPU) is gone or reworded: update this test"
    forward = _forward_reads(random_bilm(), [["a", "b", "c"], ["d"]]).total
    full, sampled = (_training_reads(tmp_path, 2, 4, s).total for s in (False, True))
    said_forward, said_full, said_sampled = quoted.groups()
    assert (int(said_forward), int(said_full), int(said_sampled or said_full)) == (forward, full, sampled)


LAYOUTS = [dict(layout="packed", n_negative=20, state_reset_every=3), dict(layout="bucketed", n_negative=20),
           dict(layout="packed"), dict(layout="bucketed")]


@pytest.mark.parametrize("settings", LAYOUTS)
def test_a_trainer_step_reads_the_device_once_besides_the_net(tmp_path, monkeypatch, settings):
    """The step read the device 3 times besides the net (the norm's finiteness, the loss, the
    norm; the bucketed layout the batch's length too): each read makes the host wait for the
    GPU's queue to drain, so none of the next step's work was queued meanwhile. It reads the
    loss and norm together now. The host's own reads (the batch's counts, the sampler's draws,
    made on the CPU before anything is copied) are no device's and are left out here."""
    from elmo.data.lm_batches import LMBatch
    run = training_run(tmp_path, **settings)
    reads = HostReads()
    run.net = NetAside(run.net, reads.paused)
    host_count, to = LMBatch.n_tokens.fget, LMBatch.to
    monkeypatch.setattr(LMBatch, "to", lambda b, device: _on_device(to(b, device)))
    monkeypatch.setattr(LMBatch, "n_tokens", property(  # (counted if read from the "device" batch)
        lambda b: host_count(b) if getattr(b, "on_device", False) else _paused_call(reads, host_count, b)))
    draw = run.softmax_loss.candidates
    monkeypatch.setattr(run.softmax_loss, "candidates", lambda device: _paused_call(reads, draw, device))
    counts = []
    for _ in range(4):   # (the third resets rows of the carried state, where asked)
        with reads:
            run.step()
        counts.append(dict(reads.counts))
        reads.counts.clear()
    assert run.window["n"] == 4
    assert counts == [{"tolist": 1}] * 4, counts


def _on_device(batch):
    batch.on_device = True
    return batch


def _paused_call(reads, func, *args):
    with reads.paused():
        return func(*args)


def test_the_steps_one_read_gives_the_floats_the_separate_reads_gave():
    """Read together, in the wider of their dtypes, a float32, bfloat16 or float64 loss and
    norm are the floats ``float(t)`` gave, the extremes, -0.0, inf and NaN included (the skip
    decides by them)."""
    from elmo.training.trainer import read_step_figures
    f32 = torch.finfo(torch.float32)
    values = [0.1, -0.0, f32.max, f32.tiny, f32.tiny / 8, 1 / 3, float("inf"), float("-inf"), float("nan")]
    dtypes = (torch.float32, torch.bfloat16, torch.float64)
    for loss_dtype, norm_dtype in ((a, b) for a in dtypes for b in dtypes):
        for loss in values:
            for gnorm in (2.5, float("nan"), f32.max, 1 / 3):
                loss_t, gnorm_t = torch.tensor(loss, dtype=loss_dtype), torch.tensor(gnorm, dtype=norm_dtype)
                got = read_step_figures(loss_t, gnorm_t)
                want = (float(loss_t), float(gnorm_t))
                assert list(map(repr, got)) == list(map(repr, want))   # (repr: exact, -0.0 and nan alike)


@pytest.mark.parametrize("layout", ["packed", "bucketed"])
def test_training_with_one_read_a_step_trains_and_logs_as_with_separate_reads(tmp_path, monkeypatch, layout):
    """The weights after a few steps, a step made NaN among them (skipped, logged), and every
    log line but its timings, bit for bit those of the same run reading the loss and norm
    separately (as the step did before it read them together)."""
    import json
    from elmo.training import trainer
    from elmo.training.checkpoint import latest_checkpoint, load_checkpoint
    from elmo.training.model import LanguageModel
    forward, calls = LanguageModel.forward, []

    def nan_at_third(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        calls.append(1)
        return {**out, "loss": out["loss"] * float("nan")} if len(calls) == 3 else out

    monkeypatch.setattr(LanguageModel, "forward", nan_at_third)
    runs = {}
    for name, read in (("separate", lambda loss, gnorm: (float(loss.detach()), float(gnorm))), ("one", None)):
        if read is not None:
            monkeypatch.setattr(trainer, "read_step_figures", read)
        else:
            monkeypatch.undo()
            monkeypatch.setattr(LanguageModel, "forward", nan_at_third)
        calls.clear()
        trainer.train(toy_run_config(tmp_path / name, layout=layout, n_negative=20, max_steps=6, log_every=2,
                                     checkpoint_every=6))
        lines = [json.loads(x) for x in (tmp_path / name / "run" / "log.jsonl").read_text().splitlines()]
        runs[name] = ([{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed_s")} for r in lines],
                      load_checkpoint(latest_checkpoint(tmp_path / name / "run" / "checkpoints"))["model"])
    (lines_before, weights_before), (lines, weights) = runs["separate"], runs["one"]
    assert lines == lines_before and sum(r["event"] == "nonfinite" for r in lines) == 1, lines
    assert weights.keys() == weights_before.keys()
    assert all(torch.equal(weights[k], weights_before[k]) for k in weights)


@pytest.mark.parametrize("lengths, steps", [([3, 1, 0, 3], 4), ([10_000], 10_000), ([], 5), ([0, 0], 3)])
def test_the_packing_reads_a_lengths_tensor_once_and_host_ints_never(lengths, steps):
    """It read a mask index, a tolist and a nonzero from the lengths' device: a GPU wait each.
    (On the CPU every read counts, as if the tensor were on a GPU.)"""
    from elmo.modules.packing import Packing
    for given, most in ((torch.tensor(lengths, dtype=torch.long), 1), (lengths, 0), (tuple(lengths), 0)):
        with HostReads() as reads:
            Packing.from_lengths(given, steps)
        assert reads.total <= most, (given, dict(reads.counts))


@pytest.mark.parametrize("n_groups", [1, 3, 6])
def test_the_cnns_length_groups_read_the_device_twice_for_any_number_of_groups(n_groups):
    """They read the distinct lengths, their values, their counts, then a nonzero per group."""
    from elmo.modules.char_cnn import length_groups
    lengths = (torch.arange(40) % n_groups) * 3 + 5      # n_groups distinct lengths
    with HostReads() as reads:
        groups = length_groups(lengths, 4, 0.0)          # (no overhead: a group per length)
    assert len(groups) == n_groups
    assert reads.total <= 2, dict(reads.counts)
