"""Training on bad input and in bad conditions: crafted or old checkpoints, a resume with other
settings, undecodable text, a full disk; and the perplexity definition's independence of the
batch size."""
from __future__ import annotations

import dataclasses
import errno
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest
import torch

from elmo.cli import main
from elmo.training import checkpoint as ckpt_mod
from elmo.training.checkpoint import (CheckpointError, CheckpointWriteError, latest_checkpoint, list_checkpoints,
                                      load_checkpoint, save_checkpoint)
from elmo.training.config import MAX_SEED
from elmo.training.finetune import _refuse_heldout_in_training
from elmo.training.resume import ResumeMismatch
from elmo.training.trainer import train
from training_helpers import tiny_config, unrecord, write_toy_corpus


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_corpus(tmp_path_factory.mktemp("toy"), n_train=120, n_heldout=30)


class _WritesMarker:
    """Unpickling this object would create ``marker`` (what a crafted checkpoint does)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


# ------------------------------------------------------------------ checkpoints: safe loading
@pytest.mark.parametrize("writer", ["torch.save", "pickle"])
def test_crafted_checkpoint_is_refused_and_never_runs(tmp_path, toy, writer):
    train_txt, _, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4)
    train(cfg, stop_after=2)
    marker = tmp_path / "marker"
    crafted = tmp_path / "run" / "checkpoints" / "checkpoint-00000099.pt"  # the newest: resume picks it
    payload = {"step": 99, "tokens": 0, "elapsed": 0.0, "model": _WritesMarker(marker), "optimizer": {},
               "ranks": []}
    if writer == "torch.save":
        torch.save(payload, crafted)
    else:
        crafted.write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(CheckpointError, match="checkpoint-00000099.pt: refused to load"):
        train(cfg)
    assert not marker.exists()
    with pytest.raises(CheckpointError):
        load_checkpoint(crafted)
    assert not marker.exists()


def test_checkpoints_hold_plain_data_and_old_format_still_resumes(tmp_path, toy):
    train_txt, _, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4, n_negative=8)
    train(cfg, stop_after=2)
    path = latest_checkpoint(tmp_path / "run" / "checkpoints")
    raw = torch.load(path, weights_only=True)  # nothing but tensors, containers, numbers, strings
    assert raw["format"] == ckpt_mod.FORMAT and isinstance(raw["config"], str)
    assert raw["ranks"][0]["rng"]["torch"].dtype == torch.uint8
    # The first format: the same data, the config as a dict, no "format" key.
    old = {k: v for k, v in raw.items() if k != "format"}
    old["config"] = json.loads(raw["config"])
    torch.save(old, path)
    assert load_checkpoint(path)["config"]["max_steps"] == 4
    assert train(cfg)["finished"]


def test_truncated_checkpoint_names_the_file(tmp_path, toy):
    train_txt, _, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4)
    train(cfg, stop_after=2)
    path = latest_checkpoint(tmp_path / "run" / "checkpoints")
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match=f"{path.name}: not a readable checkpoint"):
        train(cfg)


def test_a_checkpoint_cut_to_a_tenth_names_the_file(tmp_path, toy):
    """Found by fuzzing: cut short early, torch's zip reader raised "[Errno 22] Invalid argument",
    a line that named no file."""
    train_txt, _, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4)
    train(cfg, stop_after=2)
    path = latest_checkpoint(tmp_path / "run" / "checkpoints")
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 10])
    with pytest.raises(CheckpointError, match=f"{path.name}: not a readable checkpoint"):
        train(cfg)


def test_a_damaged_byte_of_a_checkpoints_tensor_is_named(tmp_path, toy):
    """Found by fuzzing: one bit flipped in a tensor's data resumed the run with that value,
    without a word, although the zip file torch.save writes holds a CRC-32 of every record."""
    train_txt, _, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4)
    train(cfg, stop_after=2)
    path = latest_checkpoint(tmp_path / "run" / "checkpoints")
    with zipfile.ZipFile(path) as archive:
        record = max(archive.infolist(), key=lambda r: r.file_size)   # (a weight's data)
    data = bytearray(path.read_bytes())
    data[record.header_offset + 30 + len(record.filename.encode()) + len(record.extra) + record.file_size // 2] ^= 4
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=f"{path.name}: not a readable checkpoint, truncated or corrupt: "
                                              f"record '{re.escape(record.filename)}' fails its CRC-32 check"):
        train(cfg)


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory, toy):
    """A run folder stopped at step 2 of 4 (sampled softmax: its sampler has a state), and its config."""
    train_txt, _, vocab_txt = toy
    run = tmp_path_factory.mktemp("stopped") / "run"
    train(tiny_config(run, train_txt, vocab_txt, max_steps=4, n_negative=8, export=False), stop_after=2)
    return run


def _drop_layer(ckpt):
    ckpt["ranks"][0]["lstm_state"].pop()


def _nan(tensors, name):
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] = float("nan")


#: Damaged checkpoints the fuzzer found, each with what the error now says. Each was a traceback
#: of the code that used the value (KeyError, TypeError, AttributeError, IndexError) at or after
#: the first step, a resume without a word (a state begun afresh, integers read as floats), or a
#: NaN resumed into "training diverged", which blamed the run.
DAMAGED_CHECKPOINTS = {
    "group without eps": (lambda c: c["optimizer"]["param_groups"][0].pop("eps"),
                          r"its optimizer's param_groups\[0\]\['eps'\] is missing"),
    "a parameter's state deleted": (lambda c: c["optimizer"]["state"].pop(5), r"its optimizer's state\[5\] is missing"),
    "a sum of one number": (lambda c: c["optimizer"]["state"][1].update(sum=2),
                            r"its optimizer's state\[1\]\['sum'\] is int, expected a torch.float32 tensor of shape"),
    "a sum of integers": (lambda c: c["optimizer"]["state"][1].update(sum=c["optimizer"]["state"][1]["sum"].int()),
                          r"its optimizer's state\[1\]\['sum'\] is a torch.int32 tensor"),
    "a sum of NaN": (lambda c: _nan(c["optimizer"]["state"][1], "sum"), r"its optimizer's state\[1\]\['sum'\] holds non-finite"),
    "a parameter id that is a dict": (lambda c: c["optimizer"]["param_groups"][0]["params"].__setitem__(3, {}),
                                      r"its optimizer's param_groups\[0\]\['params'\] is not a list of \d+ parameter ids"),
    "elapsed a dict": (lambda c: c.update(elapsed={}), r"checkpoint\['elapsed'\] is \{\}, expected a number"),
    "a word that is a number": (lambda c: c["ranks"][0]["batches"]["fwd"][0].__setitem__(0, 0.5),
                                r"its position in the text cannot be restored \(the checkpoint's unread words"),
    "a sampler state that is a number": (lambda c: c["ranks"][0].update(sampler=3),
                                         r"checkpoint\['ranks'\]\[0\]\['sampler'\] is int, expected a dict"),
    "an LSTM layer's state missing": (_drop_layer, r"its carried LSTM state is not \(cell, output\) tensors"),
    "a weight of integers": (lambda c: c["model"].update({"softmax.bias": c["model"]["softmax.bias"].int()}),
                             r"its weight softmax.bias is torch.int32, expected torch.float32"),
    "a weight of NaN": (lambda c: _nan(c["model"], "softmax.bias"), r"its weight softmax.bias holds non-finite"),
    "a log window that is text": (lambda c: c["ranks"][0].update(log_window="x"), r"its log window is not a dict"),
}


@pytest.mark.parametrize("damage", DAMAGED_CHECKPOINTS)
def test_a_damaged_checkpoint_is_named_before_the_run_resumes(tmp_path, toy, stopped_run, damage):
    train_txt, _, vocab_txt = toy
    shutil.copytree(stopped_run, tmp_path / "run")
    path = latest_checkpoint(tmp_path / "run" / "checkpoints")
    ckpt = torch.load(path, weights_only=True)
    edit, message = DAMAGED_CHECKPOINTS[damage]
    edit(ckpt)
    torch.save(ckpt, path)
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4, n_negative=8, export=False)
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(path))}: damaged or not of this run: {message}"):
        train(cfg)


def test_a_run_given_a_whole_number_rate_resumes_after_its_rate_decayed(tmp_path, toy):
    """TrainConfig(lr=1) builds an optimizer whose group holds the int 1; the decayed rate the
    checkpoint holds is 0.5. Both are numbers of PyTorch's float settings: the resume was
    refused as a damaged checkpoint ("param_groups[0]['lr'] is 0.5, expected int")."""
    train_txt, heldout_txt, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4, export=False, lr=1,
                      valid=[str(heldout_txt)], eval_every=1, lr_decay=0.5)
    train(cfg, stop_after=2)
    saved = torch.load(latest_checkpoint(tmp_path / "run" / "checkpoints"), weights_only=True)
    assert saved["optimizer"]["param_groups"][0]["lr"] == 0.5     # (the case: decayed, a float)
    assert train(cfg)["finished"]


# ------------------------------------------------------------------ resume with other settings
def _cli_train(run, train_txt, vocab_txt, *extra):
    return main(["train", str(train_txt), "--vocab", str(vocab_txt), "-o", str(run), "--dim", "16",
                 "--projection-dim", "8", "--filters", "1:4,2:4", "--char-dim", "4", "--batch-size", "4",
                 "--unroll-steps", "8", "--negatives", "0", "--no-progress", "--threads", "1",
                 "--device", "cpu", *extra])


def test_resume_refuses_a_changed_setting_and_names_it(tmp_path, toy, capsys):
    train_txt, _, vocab_txt = toy
    run = tmp_path / "run"
    assert _cli_train(run, train_txt, vocab_txt, "--max-steps", "2") == 0
    capsys.readouterr()
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    # Another --dim: refused before any load_state_dict size mismatch; another --lr: refused too.
    assert _cli_train(run, train_txt, vocab_txt, "--max-steps", "4", "--dim", "12", "--lr", "0.1") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "setting options.lstm.dim was 16, now 12" in err
    assert "setting lr was 0.2, now 0.1 (pass --allow-change lr" in err
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before  # nothing touched
    # Run length, intervals and threads may change; a resume says where it resumes from.
    assert _cli_train(run, train_txt, vocab_txt, "--max-steps", "4", "--log-every", "1", "--threads", "2") == 0
    ckpt = run / "checkpoints" / "checkpoint-00000002.pt"
    assert f"resuming from checkpoint 2 ({ckpt})" in capsys.readouterr().err
    # A change on request is announced.
    assert _cli_train(run, train_txt, vocab_txt, "--max-steps", "6", "--lr", "0.1", "--allow-change", "lr") == 0
    assert "; lr was 0.2, now 0.1" in capsys.readouterr().err
    assert _cli_train(run, train_txt, vocab_txt, "--max-steps", "6", "--allow-change", "dim") == 1
    assert "--allow-change dim: only" in capsys.readouterr().err


def test_resume_refuses_a_vocabulary_rebuilt_under_the_same_name(tmp_path, toy):
    """(two words swapped resumed silently, each softmax row now scoring the other word; a word
    more was a size-mismatch RuntimeError traceback from load_state_dict)"""
    train_txt, _, vocab_txt = toy
    vocab = tmp_path / "vocab.txt"
    words = vocab_txt.read_text(encoding="utf-8").splitlines()
    vocab.write_text("\n".join(words) + "\n", encoding="utf-8")
    cfg = tiny_config(tmp_path / "run", train_txt, vocab, max_steps=4)
    train(cfg, stop_after=2)
    words[3], words[4] = words[4], words[3]
    vocab.write_text("\n".join(words) + "\n", encoding="utf-8")
    with pytest.raises(ResumeMismatch, match=f"the vocabulary {vocab} has changed since checkpoint-00000002.pt"):
        train(cfg)
    # a checkpoint from before the digest was recorded: a vocabulary of another size is still named
    path = latest_checkpoint(tmp_path / "run" / "checkpoints")
    raw = torch.load(path, weights_only=True)
    del raw["vocab_sha256"]
    torch.save(raw, path)
    vocab.write_text("\n".join(words + ["extra"]) + "\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match=f"{path.name}: its weights do not fit this run's model "
                                              r"\(size mismatch for softmax.weight"):
        train(cfg)


def test_corpus_counts_belong_to_the_text_they_were_made_of(tmp_path, toy):
    """A corpus_stats.json left by an earlier attempt on another text set the step count of
    --epochs (1 epoch was 1 step); resuming on a changed text went on silently from the old
    position."""
    train_txt, _, vocab_txt = toy
    text = tmp_path / "train.txt"
    text.write_bytes(train_txt.read_bytes())
    run = tmp_path / "run"
    run.mkdir()
    (run / "corpus_stats.json").write_text('{"sentences": 5, "tokens": 40}\n', encoding="utf-8")
    cfg = tiny_config(run, text, vocab_txt, epochs=1.0, unroll_steps=10, batch_size=4)
    partial = train(cfg, stop_after=2)
    tokens = sum(len(line.split()) + 2 for line in text.read_text(encoding="utf-8").splitlines())
    assert partial["steps"] == -(-tokens // 40)   # this text's epoch, not the stale file's
    with text.open("a", encoding="utf-8") as f:
        f.write("the cat sees a dog .\n")
    with pytest.raises(ResumeMismatch, match=f"the training text has changed since the run began "
                                             rf"\({re.escape(str(text))}: [\d,]+ bytes then, [\d,]+ now\)"):
        train(cfg)


def test_resuming_on_training_text_rewritten_with_the_same_size_is_refused(tmp_path, toy):
    """(the record held each file's size only: the text reshuffled, or a corpus rebuilt with
    another seed, has the same size, and the run went on at its old position in other text)"""
    train_txt, _, vocab_txt = toy
    text = tmp_path / "train.txt"
    lines = train_txt.read_text(encoding="utf-8").splitlines(keepends=True)
    text.write_text("".join(lines), encoding="utf-8")
    cfg = tiny_config(tmp_path / "run", text, vocab_txt, max_steps=4)
    train(cfg, stop_after=2)
    text.write_text("".join(lines[1:] + lines[:1]), encoding="utf-8")   # (the same bytes, in another order)
    with pytest.raises(ResumeMismatch, match=rf"the training text has changed since the run began "
                                             rf"\({re.escape(str(text))}: the same size, other bytes: rewritten "
                                             rf"or reshuffled\)"):
        train(cfg)
    text.write_text("".join(lines), encoding="utf-8")   # the text it began with: resumed
    assert train(cfg)["steps"] == 4


def test_a_run_recorded_with_the_sizes_alone_still_resumes(tmp_path, toy):
    """A run begun before the sampled bytes were recorded ([path, size] per file) resumes on the
    same files, and its counts are taken from the record."""
    train_txt, _, vocab_txt = toy
    run = tmp_path / "run"
    cfg = tiny_config(run, train_txt, vocab_txt, max_steps=4)
    train(cfg, stop_after=2)
    stats = json.loads((run / "corpus_stats.json").read_text(encoding="utf-8"))
    stats["files"] = [entry[:2] for entry in stats["files"]]
    stats["tokens"] += 2   # (recognisable: taken from the record, not counted again)
    (run / "corpus_stats.json").write_text(json.dumps(stats), encoding="utf-8")
    assert train(cfg)["steps"] == 4
    assert json.loads((run / "corpus_stats.json").read_text(encoding="utf-8"))["tokens"] == stats["tokens"]


def test_a_run_begun_reading_a_file_twice_is_told_why_it_cannot_resume(tmp_path, toy):
    """A file named twice (here through a link beside it) is read once now; a run begun when it
    was read twice recorded both names, and a resume said the link was "no longer there"."""
    train_txt, _, vocab_txt = toy
    text = tmp_path / "text" / "train.txt"
    text.parent.mkdir()
    text.write_bytes(train_txt.read_bytes())
    (text.parent / "link.txt").symlink_to("train.txt")
    run = tmp_path / "run"
    cfg = tiny_config(run, text.parent, vocab_txt, max_steps=4)
    train(cfg, stop_after=2)
    stats = json.loads((run / "corpus_stats.json").read_text(encoding="utf-8"))
    assert [entry[0] for entry in stats["files"]] == [str(text.parent / "link.txt")]   # (read once)
    stats["files"].append([str(text), text.stat().st_size])   # (as the earlier version recorded it)
    (run / "corpus_stats.json").write_text(json.dumps(stats), encoding="utf-8")
    with pytest.raises(ResumeMismatch, match=rf"\({re.escape(str(text))}: the same file as another one named, "
                                             r"read once now\)"):
        train(cfg)


def test_a_finished_run_started_again_logs_its_final_validation_once(tmp_path, toy):
    """(the final validation comes after the last checkpoint: running a finished run's command
    again, or a run killed while exporting, logged the same figure at the same step twice)"""
    train_txt, held_txt, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4, eval_every=2, valid=[str(held_txt)])
    first = train(cfg)
    again = train(cfg)
    assert again["valid"] == first["valid"] and (tmp_path / "run" / "model").is_dir()
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [(r["event"], r["step"]) for r in log if r["event"] in ("eval", "resume")] == [
        ("eval", 2), ("eval", 4), ("resume", 4)]
    # other held-out text is another measurement: logged
    more = tmp_path / "more.txt"
    more.write_text("the cat sees a dog .\n", encoding="utf-8")
    cfg.valid = [str(held_txt), str(more)]
    train(cfg)
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if r["event"] == "eval"] == [2, 4, 4]


def test_a_log_line_cut_short_is_dropped_on_resume(tmp_path, toy, capsys):
    """(a run killed or out of disk while appending a line left it torn, and every resume
    stopped on json's 'Unterminated string' with no file named)"""
    train_txt, _, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4, log_every=1)
    train(cfg, stop_after=2)
    log = tmp_path / "run" / "log.jsonl"
    whole = log.read_text(encoding="utf-8")
    log.write_text(whole + '{"elapsed_s": 0.1, "epo', encoding="utf-8")
    capsys.readouterr()
    assert train(cfg)["finished"]
    assert f"{log}: its last line was cut short" in capsys.readouterr().err
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [r["step"] for r in records if r["event"] == "train"] == [1, 2, 3, 4]
    # a damaged line elsewhere is named, not guessed at
    log.write_text(whole.replace("\n", "\nnot json\n", 1), encoding="utf-8")
    with pytest.raises(ValueError, match="log.jsonl: line 2: not JSON"):
        train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=6, log_every=1))


# ------------------------------------------------------------------ a full disk
class _FullDisk:
    """A binary file on a disk that fills up after ``room`` bytes (fault injection)."""

    def __init__(self, path, room: int):
        self.f, self.room = open(path, "wb"), room

    def write(self, data) -> int:
        n = len(memoryview(data).cast("B"))
        if n > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= n
        return self.f.write(data)

    def flush(self):
        self.f.flush()

    def fileno(self):
        return self.f.fileno()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def _fail_a_checkpoint(tmp_path, toy, monkeypatch, writer, expected):
    """A run checkpointed at step 2 that trains on with ``writer(path, room=...)`` as its
    checkpoints' file: the error raised (``expected``) and the run's config, once it is checked
    that the checkpoint of step 2 is untouched and still the newest, and no temporary file is left."""
    train_txt, _, vocab_txt = toy
    run = tmp_path / "run"
    cfg = tiny_config(run, train_txt, vocab_txt, max_steps=6, checkpoint_every=2, keep_checkpoints=1)
    train(cfg, stop_after=2)
    first = run / "checkpoints" / "checkpoint-00000002.pt"
    saved = first.read_bytes()
    monkeypatch.setattr(ckpt_mod, "_open_for_writing", lambda path: writer(path, room=20_000))
    with pytest.raises(expected) as info:
        train(cfg)
    assert list_checkpoints(run / "checkpoints") == [first] and first.read_bytes() == saved
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [first.name]
    return info.value, cfg


def _small_train_args(toy, output) -> list:
    train_txt, _, vocab_txt = toy
    return ["train", str(train_txt), "--vocab", str(vocab_txt), "-o", str(output), "--dim", "16",
            "--projection-dim", "8", "--filters", "1:4", "--batch-size", "4", "--max-steps", "2",
            "--negatives", "0", "--no-progress", "--device", "cpu"]


def test_full_disk_during_training_keeps_the_previous_checkpoint(tmp_path, toy, monkeypatch, capsys):
    error, cfg = _fail_a_checkpoint(tmp_path, toy, monkeypatch, _FullDisk, CheckpointWriteError)
    message = str(error)
    assert error.errno == errno.ENOSPC and len(message.splitlines()) == 1
    assert f"cannot write checkpoint {tmp_path / 'run' / 'checkpoints' / 'checkpoint-00000004.pt'}: no space left" \
        in message
    assert "enforce fail" not in message
    # The command line says it in one line.
    capsys.readouterr()
    assert main(_small_train_args(toy, tmp_path / "cli")) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no space left on device" in err and "checkpoint-00000002.pt" in err
    monkeypatch.undo()
    assert train(cfg)["finished"]  # space again: the run resumes from the kept checkpoint


class _CtrlCTwice(_FullDisk):
    """A checkpoint's file that gets Ctrl-C twice after ``room`` bytes: the first asks the run to
    stop after its step, the second (a user who will not wait for the write) interrupts at once."""

    def write(self, data) -> int:
        if len(memoryview(data).cast("B")) > self.room:
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
        return super().write(data)


def test_ctrl_c_twice_while_a_checkpoint_is_written_interrupts_and_keeps_the_previous_one(
        tmp_path, toy, monkeypatch, capsys):
    """(torch.save turned the interrupt raised in its write into "cannot write checkpoint ...:
    [enforce fail at inline_container.cc] unexpected pos", and the command exited 1, not 130)"""
    error, cfg = _fail_a_checkpoint(tmp_path, toy, monkeypatch, _CtrlCTwice, KeyboardInterrupt)
    assert type(error) is KeyboardInterrupt   # (not a write error, nor a stop after a checkpoint)
    # The command line says it was interrupted and exits as Ctrl-C does.
    capsys.readouterr()
    assert main(_small_train_args(toy, tmp_path / "cli")) == 130
    assert capsys.readouterr().err.strip() == "elmo train: interrupted"
    monkeypatch.undo()
    assert train(cfg)["finished"]   # the run resumes from the kept checkpoint


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG], ids=["ENOSPC", "EDQUOT", "EFBIG"])
def test_full_disk_says_how_many_checkpoints_must_fit(tmp_path, monkeypatch, code):
    """The oldest checkpoint is deleted only after the new one is written, so K + 1 must fit:
    the error line says so and suggests a lower --keep-checkpoints (it only said the disk was full)."""
    folder = tmp_path / "checkpoints"
    kept = [save_checkpoint(folder, step, {"step": step}, keep=2) for step in (1, 2)]

    def failing(error: int):
        def open_for_writing(path):
            raise OSError(error, os.strerror(error))
        return open_for_writing

    monkeypatch.setattr(ckpt_mod, "_open_for_writing", failing(code))
    with pytest.raises(CheckpointWriteError) as info:
        save_checkpoint(folder, 3, {"step": 3}, keep=2)
    message = str(info.value)
    assert info.value.errno == code and len(message.splitlines()) == 1
    assert "with --keep-checkpoints 2, 3 checkpoints must fit" in message
    assert "lower --keep-checkpoints" in message
    assert list_checkpoints(folder) == kept   # (the safe order stays: nothing was deleted)
    # keeping one, there is nothing lower to suggest; another error is not about room at all
    with pytest.raises(CheckpointWriteError) as info:
        save_checkpoint(folder, 3, {"step": 3}, keep=1)
    assert "2 checkpoints must fit" in str(info.value) and "lower" not in str(info.value)
    monkeypatch.setattr(ckpt_mod, "_open_for_writing", failing(errno.EACCES))
    with pytest.raises(CheckpointWriteError) as info:
        save_checkpoint(folder, 3, {"step": 3}, keep=2)
    assert "must fit" not in str(info.value)


def test_a_lower_keep_checkpoints_as_the_full_disk_advises_makes_room(tmp_path, monkeypatch):
    """A disk with room for 3 checkpoints and a run keeping 3: the 4th fails, and the line
    advises a lower --keep-checkpoints. Resumed with --keep-checkpoints 1, the run still kept
    the 3 until its new one was written, so it failed again ("with --keep-checkpoints 1, 2
    checkpoints must fit", on a disk that held 3). Those past the newest K now go first."""
    import torch
    folder = tmp_path / "checkpoints"
    payload = {"weights": torch.arange(20_000, dtype=torch.float32)}
    for step in (1, 2, 3):
        save_checkpoint(folder, step, {"step": step, **payload}, keep=3)
    size = (folder / "checkpoint-00000003.pt").stat().st_size
    real_open = ckpt_mod._open_for_writing

    def on_a_small_disk(path):   # room for 3 checkpoints (and a half), counting what the folder holds
        used = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
        return _FullDisk(path, room=int(3.5 * size) - used) if path.parent == folder else real_open(path)
    monkeypatch.setattr(ckpt_mod, "_open_for_writing", on_a_small_disk)
    with pytest.raises(CheckpointWriteError, match="lower --keep-checkpoints"):
        save_checkpoint(folder, 4, {"step": 4, **payload}, keep=3)
    assert [p.name for p in list_checkpoints(folder)] == [f"checkpoint-0000000{s}.pt" for s in (1, 2, 3)]
    save_checkpoint(folder, 4, {"step": 4, **payload}, keep=1)
    assert [p.name for p in list_checkpoints(folder)] == ["checkpoint-00000004.pt"]
    assert torch.load(folder / "checkpoint-00000004.pt", weights_only=True)["step"] == 4   # (whole)


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def test_real_full_tmpfs(tmp_path):
    """The same on a real full file system: a 1 MiB tmpfs (needs the right to mount)."""
    disk = tmp_path / f"disk-{uuid.uuid4().hex[:8]}"
    if sys.platform != "linux" or os.geteuid() != 0 or not _mount_tmpfs(disk, "1m"):
        pytest.skip("cannot mount a small tmpfs here (needs root on Linux)")
    try:
        folder = disk / "checkpoints"
        first = save_checkpoint(folder, 1, {"model": {"w": torch.zeros(50_000)}})  # 200 kB
        with pytest.raises(CheckpointWriteError, match="checkpoint-00000002.pt: no space left on device"):
            save_checkpoint(folder, 2, {"model": {"w": torch.zeros(500_000)}})  # 2 MB
        assert list_checkpoints(folder) == [first] and sorted(os.listdir(folder)) == [first.name]
        assert torch.equal(torch.load(first, weights_only=True)["model"]["w"], torch.zeros(50_000))
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True, timeout=30)


# ------------------------------------------------------------------ text that is not UTF-8
def test_bad_utf8_names_file_line_and_byte(tmp_path, toy, capsys):
    import gzip

    from elmo.data.corpus import CorpusError, count_tokens, read_sentences

    _, _, vocab_txt = toy
    good = b"the cat sees a dog .\nno bird !\n"
    bad = tmp_path / "bad.txt"
    bad.write_bytes(good + b"a caf\xe9 helps .\n")  # Latin-1, not UTF-8: line 3, 0-based offset 31 + 5
    expected = f"{bad}: line 3: byte 0xe9 at byte offset {len(good) + 5} is not valid UTF-8"
    with pytest.raises(CorpusError, match=re.escape(expected)):
        read_sentences(bad)
    with pytest.raises(CorpusError, match=re.escape(expected)):
        count_tokens([bad])
    packed = tmp_path / "bad.txt.gz"
    packed.write_bytes(gzip.compress(bad.read_bytes()))
    with pytest.raises(CorpusError, match=f"{packed}: line 3: .* of the decompressed text"):
        read_sentences(packed)
    # through the command line: one line naming the file and the line, for training and held-out text
    for corpus, valid in ((bad, []), (tmp_path / "ok.txt", ["--valid", str(bad)])):
        (tmp_path / "ok.txt").write_bytes(good)
        assert main(["train", str(corpus), *valid, "--vocab", str(vocab_txt), "-o", str(tmp_path / "run"),
                     "--dim", "16", "--projection-dim", "8", "--filters", "1:4", "--batch-size", "2",
                     "--max-steps", "1", "--negatives", "0", "--no-progress", "--device", "cpu"]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and expected in err, err


# ------------------------------------------------------------------ perplexity and finetune on small texts
@pytest.mark.numerics
def test_perplexity_does_not_depend_on_batch_size_or_order(toy):
    import elmo
    from elmo.data.corpus import iter_file_sentences
    from elmo.training.evaluate import perplexity
    from elmo.training.model import LanguageModel
    from elmo.vocab import Vocabulary
    from training_helpers import tiny_model_options

    _, held_txt, vocab_txt = toy
    vocab = Vocabulary.load(vocab_txt)
    torch.manual_seed(3)
    model = LanguageModel(elmo.ElmoOptions.from_dict(tiny_model_options()), len(vocab), vocab.bos, vocab.eos)
    with torch.no_grad():  # larger weights: context moves the predictions (batch-1 and batch-32 figures
        for p in model.parameters():  # differed by 6% in the old carried-rows definition); float32 stays
            p.mul_(2)                 # within 5e-8 of float64 here, far inside the tolerance below
    sentences = list(iter_file_sentences([held_txt]))[:25] + [["the", "cat"] * 30, ["dog"]]
    results = {b: perplexity(model, sentences, vocab, batch_size=b) for b in (1, 7, 32)}
    results["reversed"] = perplexity(model, sentences[::-1], vocab, batch_size=7)
    one = results[1]
    assert one["targets"] == sum(len(s) + 1 for s in sentences) and one["sentences"] == len(sentences)
    for key, r in results.items():
        assert r["targets"] == one["targets"]
        for k in ("loss_fwd", "loss_bwd"):
            assert r[k] == pytest.approx(one[k], rel=1e-5, abs=1e-6), (key, k)
    # the model's state is not carried: a sentence alone scores as it does among others
    alone = perplexity(model, sentences[:1], vocab, batch_size=1)
    first = perplexity(model, sentences[:1] + sentences[:1], vocab, batch_size=32)
    assert first["loss_fwd"] == pytest.approx(alone["loss_fwd"], rel=1e-5)


def test_finetune_on_a_small_text_takes_enough_steps(tmp_path, toy):
    from elmo.training.finetune import MIN_STEPS_PER_EPOCH, finetune

    train_txt, _, vocab_txt = toy
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))
    task = tmp_path / "task.txt"  # 100 lines: 90 to train on, 10 held out
    task.write_text("".join(f"the happy farmer {v} the old river .\n" for v in ["sees", "likes"] * 50))
    cfg = tiny_config(tmp_path / "adapted", task, "", init_from=str(tmp_path / "base" / "model"),
                      batch_size=128, unroll_steps=20, epochs=1.0)
    report = finetune(cfg)
    positions = 90 * (8 + 2)
    assert report["batch_size"] == positions // (20 * MIN_STEPS_PER_EPOCH) == 2
    assert report["steps"] >= MIN_STEPS_PER_EPOCH
    assert report["before"]["targets"] == report["after"]["targets"] == 10 * 9
    # Rerun into the same folder with another text: it would resume on the old text, so refused.
    import dataclasses
    other = tmp_path / "other.txt"
    other.write_text("".join(f"a small child {v} the red house !\n" for v in ["sees", "likes"] * 50))
    with pytest.raises(ResumeMismatch, match="adapt_train.txt differs"):
        finetune(dataclasses.replace(cfg, train=[str(other)]))


# ------------------------------------------------------------------ the training figure's label
def test_sampled_training_figure_is_labelled_and_old_logs_still_plot(tmp_path, toy):
    from elmo.training.curves import plot_learning_curve, read_log

    train_txt, _, vocab_txt = toy
    for name, negatives, key in (("sampled", 8, "sampled_ppl"), ("full", 0, "train_ppl")):
        train(tiny_config(tmp_path / name, train_txt, vocab_txt, max_steps=4, log_every=2, n_negative=negatives))
        records = [r for r in read_log(tmp_path / name) if r["event"] == "train"]
        assert [r["step"] for r in records] == [2, 4]
        assert all(key in r and "ppl" not in r for r in records)
    pytest.importorskip("matplotlib")
    old = tmp_path / "old" / "log.jsonl"  # a log written before the keys were split
    old.parent.mkdir()
    old.write_text(json.dumps({"event": "train", "step": 2, "tokens": 80, "loss": 4.0, "ppl": 54.6}) + "\n")
    out = plot_learning_curve([tmp_path / "sampled", tmp_path / "full", old], tmp_path / "curve.png")
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_a_run_whose_validation_loss_passes_exp_range_finishes_and_logs_inf(tmp_path, toy, monkeypatch):
    from elmo.training import trainer as trainer_mod
    from elmo.training.curves import read_log
    train_txt, held_txt, vocab_txt = toy
    real = trainer_mod.likelihood_sums

    def diverged(*args, **kwargs):  # the held-out text's sums, as a diverged model gives them
        nll_f, nll_b, n_f, n_b = real(*args, **kwargs)
        return [1000.0 * n_f, 1000.0 * n_b, n_f, n_b]

    monkeypatch.setattr(trainer_mod, "likelihood_sums", diverged)
    train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=2, valid=[str(held_txt)]))
    evals = [r for r in read_log(tmp_path / "run") if r["event"] == "eval"]
    assert evals and all(r["ppl"] == r["ppl_fwd"] == "inf" and r["loss_fwd"] == 1000.0 for r in evals)
    assert (tmp_path / "run" / "model").is_dir()  # exported after its final validation
    for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in the log: not strict JSON"))


def test_a_model_whose_outputs_are_nan_has_no_perplexity(tmp_path):
    """Weights from a diverged run (here one NaN in the softmax): perplexity printed nan and
    exited 0; NaN is no perplexity at all (an infinite loss still gives inf, below)."""
    from elmo.training.evaluate import perplexity
    from training_helpers import tiny_lm_and_batch
    model, vocab, _ = tiny_lm_and_batch(tmp_path / "t.txt", "a b c d e f\ng h a b\n", 2, 5)
    with torch.no_grad():
        model.softmax.weight[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="log-likelihood of the text is NaN"):
        perplexity(model.eval(), [["a", "b", "c"], ["g", "h"]], vocab)


def test_perplexity_of_text_without_sentences_names_the_files(tmp_path, capsys):
    """(empty or blank-line files were a bare "no text to evaluate", naming neither file)"""
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "blank.txt").write_text("\n  \n\t\n", encoding="utf-8")
    files = [str(tmp_path / "empty.txt"), str(tmp_path / "blank.txt")]
    assert main(["perplexity", "default", *files, "--device", "cpu"]) == 1
    assert capsys.readouterr().err.strip() == (f"elmo perplexity: error: {files[0]}, {files[1]}: no text to "
                                               f"evaluate (only empty or blank lines)")


def test_a_text_the_model_gives_next_to_no_probability_has_infinite_perplexity(tmp_path):
    """A mean loss above 709 nats (diverged weights) is an infinite perplexity, not an
    OverflowError in the final validation of a run; the log writes it as "inf" (strict JSON)
    and the curve draws it as a gap."""
    from elmo.training.curves import plot_learning_curve, read_log
    from elmo.training.evaluate import perplexity
    from training_helpers import tiny_lm_and_batch
    model, vocab, _ = tiny_lm_and_batch(tmp_path / "t.txt", "a b c d e f\ng h a b\n", 2, 5)
    with torch.no_grad():
        model.softmax.weight.mul_(1e8)  # logits near 1e8: finite losses, far past exp's range
    result = perplexity(model.eval(), [["a", "b", "c"], ["g", "h"]], vocab)
    assert 709 < result["loss_fwd"] < float("inf") and 709 < result["loss_bwd"] < float("inf")
    assert result["ppl_fwd"] == result["ppl_bwd"] == result["ppl"] == float("inf")
    log = tmp_path / "log.jsonl"
    records = [{"event": "eval", "step": 2, "epoch": 0.5, "ppl_fwd": 40.0, "ppl_bwd": 41.0, "ppl": 40.5},
               {"event": "eval", "step": 4, "epoch": 1.0, "ppl_fwd": "inf", "ppl_bwd": "inf", "ppl": "inf"}]
    log.write_text("".join(json.dumps(r, allow_nan=False) + "\n" for r in records), encoding="utf-8")
    assert [r["ppl"] for r in read_log(log)] == [40.5, "inf"]
    pytest.importorskip("matplotlib")
    assert plot_learning_curve([log], tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"


def test_a_log_that_is_not_one_is_a_clear_error(tmp_path):
    from elmo.training.curves import plot_learning_curve, read_log
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"event": "train", "step": 1}\nnot json\n', encoding="utf-8")
    with pytest.raises(ValueError, match="broken.jsonl: line 2: not JSON"):
        read_log(broken)
    pytest.importorskip("matplotlib")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no training or validation records in .*empty.jsonl"):
        plot_learning_curve([empty], tmp_path / "curve.png")  # not a picture without a curve
    assert not (tmp_path / "curve.png").exists()


@pytest.mark.parametrize("line, problem", [
    ('{"event": "train", "step": 1, "ppl": 3.0}', "'train' record without a number 'tokens'"),
    ('{"event": "eval", "step": 1, "ppl": 3.0}', "'eval' record without a number 'epoch'"),
    ('{"event": "train", "step": 1, "ppl": 3.0, "tokens": "x"}', "'train' record without a number 'tokens'"),
])
def test_a_log_record_without_the_numbers_of_a_curve_names_its_line(tmp_path, line, problem):
    from elmo.training.curves import read_log
    log = tmp_path / "log.jsonl"
    log.write_text(f'{{"event": "start", "step": 0}}\n{line}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=f"log.jsonl: line 2: {problem}"):  # not a KeyError in the plot
        read_log(log)


def test_a_log_in_broken_utf8_is_named(tmp_path):
    from elmo.training.curves import read_log
    log = tmp_path / "log.jsonl"
    log.write_bytes(b'{"event": "train"}\n\xff\n')
    with pytest.raises(ValueError, match="log.jsonl: not UTF-8 text"):
        read_log(log)


def test_plot_curve_of_a_run_writing_its_log_leaves_out_the_line_being_written(tmp_path, capsys):
    """plot-curve of a live run caught the trainer half-way through appending a line (or a run
    killed there left it so), and refused the whole log: "line 3: not JSON ...; not a training
    log?". The cut-short last line is now left out, with a note; one elsewhere is still an error."""
    pytest.importorskip("matplotlib")
    from elmo.training.curves import read_log
    log = tmp_path / "log.jsonl"
    lines = [json.dumps({"event": "train", "step": s, "tokens": 80 * s, "loss": 4.0, "train_ppl": 54.6})
             for s in (2, 4, 6)]
    log.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:25], encoding="utf-8")
    assert main(["plot-curve", str(log), "-o", str(tmp_path / "curve.png")]) == 0
    assert "log.jsonl: its last line is cut short" in capsys.readouterr().err
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
    log.write_text(lines[0] + "\n" + lines[1], encoding="utf-8")   # a whole line without its newline
    assert [r["step"] for r in read_log(log)] == [2, 4]
    log.write_text(lines[0][:25] + "\n" + lines[1] + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="log.jsonl: line 1: not JSON"):
        read_log(log)

def test_plot_curve_never_writes_over_a_log_or_into_a_folder(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    run = tmp_path / "run"
    run.mkdir()
    log = run / "log.jsonl"
    text = json.dumps({"event": "train", "step": 2, "tokens": 80, "loss": 4.0, "train_ppl": 54.6}) + "\n"
    log.write_text(text, encoding="utf-8")
    assert main(["plot-curve", str(run), "-o", str(log)]) == 1   # the log would be lost
    assert "is one of the logs to draw" in capsys.readouterr().err
    assert log.read_text(encoding="utf-8") == text
    assert main(["plot-curve", str(log), "-o", str(run)]) == 1
    assert f"{run}: is a directory" in capsys.readouterr().err
    assert main(["plot-curve", str(log), "-o", str(tmp_path / "curve.png")]) == 0
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


# ------------------------------------------------------------------ non-finite steps and bad numbers
def _nan_loss_at(monkeypatch, calls):
    """Make LanguageModel's loss NaN at these forward calls (1-based), and count the calls."""
    from elmo.training.model import LanguageModel
    real, seen = LanguageModel.forward, []

    def forward(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        seen.append(1)
        if len(seen) in calls:
            out["loss"] = out["loss"] * float("nan")
        return out

    monkeypatch.setattr(LanguageModel, "forward", forward)


def test_a_non_finite_step_changes_nothing_and_is_logged(tmp_path, toy, monkeypatch):
    train_txt, _, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=5, log_every=5)
    _nan_loss_at(monkeypatch, {3, 7})  # step 3 of the first run, step 2 of the second
    train(cfg, stop_after=2)
    train(cfg, stop_after=1)   # step 3, whose loss is NaN
    before, after = (load_checkpoint(tmp_path / "run" / "checkpoints" / f"checkpoint-0000000{k}.pt")
                     for k in (2, 3))
    assert all(torch.equal(before["model"][k], v) for k, v in after["model"].items())  # no update
    assert after["ranks"][0]["lstm_state"] is None           # the carried state starts afresh
    summary = train(cfg)
    assert summary["finished"] and summary["skipped_steps"] == 1
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r for r in log if r["event"] == "nonfinite"] == [{"event": "nonfinite", "step": 3, "loss": "nan",
                                                             "grad_norm": "nan"}]
    meta = json.loads((tmp_path / "run" / "model" / "metadata.json").read_text())
    assert meta["skipped_steps"] == 1
    final = load_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint-00000005.pt")
    assert all(torch.isfinite(v).all() for v in final["model"].values())
    # in one session, the step's log line counts it and averages the other steps only
    train(tiny_config(tmp_path / "one", train_txt, vocab_txt, max_steps=5, log_every=5))
    (line,) = [json.loads(x) for x in (tmp_path / "one" / "log.jsonl").read_text().splitlines()
               if json.loads(x)["event"] == "train"]
    assert line["skipped"] == 1 and all(isinstance(line[k], float) for k in ("loss", "grad_norm"))


def test_steps_that_keep_diverging_stop_the_run_before_saving(tmp_path, toy, monkeypatch, capsys):
    train_txt, _, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=20, checkpoint_every=2)
    _nan_loss_at(monkeypatch, set(range(4, 100)))
    with pytest.raises(FloatingPointError, match=r"training diverged: the last 5 steps \(up to step 8\)"):
        train(cfg)
    # the checkpoints written during the streak hold the weights of step 3, the last good one
    names = [p.name for p in list_checkpoints(tmp_path / "run" / "checkpoints")]
    assert names[-2:] == ["checkpoint-00000004.pt", "checkpoint-00000006.pt"]
    four, six = (load_checkpoint(tmp_path / "run" / "checkpoints" / n)["model"] for n in names[-2:])
    assert all(torch.equal(four[k], v) and torch.isfinite(v).all() for k, v in six.items())
    _nan_loss_at(monkeypatch, set(range(1, 100)))
    assert main(["train", str(train_txt), "--vocab", str(vocab_txt), "-o", str(tmp_path / "cli"), "--dim", "16",
                 "--projection-dim", "8", "--filters", "1:4,2:4", "--char-dim", "4", "--batch-size", "4",
                 "--negatives", "0", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "elmo train: error: training diverged: the last 5 steps (up to step 5)" in err and "Traceback" not in err


def test_a_run_that_diverges_before_its_first_checkpoint_is_not_told_to_resume(tmp_path, toy, monkeypatch):
    """NaN from the first step: the line said "Resume with a lower --lr" where no checkpoint
    had been written. It says to run again, which (in the same --output) starts afresh."""
    train_txt, _, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=12, checkpoint_every=10)
    _nan_loss_at(monkeypatch, set(range(1, 100)))
    with pytest.raises(FloatingPointError) as info:
        train(cfg)
    message = str(info.value)
    assert message == ("training diverged: the last 5 steps (up to step 5) had a non-finite loss or gradient and "
                       "changed nothing, before the first checkpoint, so there is nothing to resume from; run again "
                       "(in this --output it starts afresh) with a lower --lr, or in float32 if --bf16 was on")
    assert not list_checkpoints(tmp_path / "run" / "checkpoints")
    monkeypatch.undo()
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=12, checkpoint_every=10, lr=0.1)
    assert train(cfg)["finished"]                       # as it says


def test_a_run_that_ends_on_non_finite_steps_is_not_exported(tmp_path, toy, monkeypatch):
    """--lr 1e30 over 2 steps: the first update gives weights near 1e28, the second loss is NaN
    and skipped, and the run ended there, "finished", exporting a model whose every loss is NaN.
    A run whose last step was not finite now stops as diverged; more steps can end the streak."""
    train_txt, _, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=5, checkpoint_every=2)
    _nan_loss_at(monkeypatch, {4, 5})
    with pytest.raises(FloatingPointError) as info:
        train(cfg)
    message = str(info.value)
    assert message.startswith("training diverged: the run ended on 2 steps in a row (up to step 5) with a "
                              "non-finite loss or gradient, so the model was not exported; the weights are "
                              "those of step 3 (as are checkpoint-00000004.pt, checkpoint-00000005.pt)")
    assert "resume with a larger --max-steps" in message and len(message.splitlines()) == 1
    assert not (tmp_path / "run" / "model").exists()
    with pytest.raises(FloatingPointError, match="the run ended on 2 steps in a row"):
        train(cfg)  # a resume of the same schedule finds the same streak, and exports nothing either
    cfg.max_steps = 6
    summary = train(cfg)   # step 6 is finite
    assert summary["finished"] and summary["skipped_steps"] == 2 and (tmp_path / "run" / "model").is_dir()


@pytest.mark.parametrize("earlier", [False, True], ids=["first-step", "after-a-checkpoint"])
def test_a_last_update_that_breaks_the_weights_is_not_exported(tmp_path, toy, capsys, earlier):
    """--lr 1e30 over one step: the step's loss is that of the weights before its update, so it
    was finite; the run finished (exit 0) and exported weights near 1e29 whose every loss is NaN."""
    train_txt, held_txt, vocab_txt = toy
    run = tmp_path / "run"
    # after a checkpoint, with held-out text: the final validation's NaN loss tells
    valid = [str(held_txt)] if earlier else []
    if earlier:   # a first phase at a sane rate, then one step at a huge one
        train(tiny_config(run, train_txt, vocab_txt, max_steps=2, checkpoint_every=2, valid=valid))
        (run / "model").rename(tmp_path / "first-model")   # (the one a resume would replace)
    cfg = tiny_config(run, train_txt, vocab_txt, max_steps=3 if earlier else 1, lr=1e30, allow_change=["lr"],
                      valid=valid)
    with pytest.raises(FloatingPointError) as info:
        train(cfg)
    message = str(info.value)
    step = 3 if earlier else 1
    assert message.startswith(f"training diverged: after the last step ({step}) the model's loss is NaN")
    assert len(message.splitlines()) == 1 and not (run / "model").exists()
    if earlier:
        assert "resume from checkpoint-00000002.pt with a lower --lr" in message
    else:
        assert "start again in another --output with a lower --lr" in message
    # the command line: one line, exit 1, nothing exported
    args = ["train", str(train_txt), "--vocab", str(vocab_txt), "-o", str(tmp_path / "cli"), "--dim", "16",
            "--projection-dim", "8", "--filters", "1:4,2:4", "--char-dim", "4", "--batch-size", "4",
            "--max-steps", "1", "--lr", "1e30", "--negatives", "0", "--no-progress", "--device", "cpu"]
    capsys.readouterr()
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "elmo train: error: training diverged: after the last step (1)" in err and "Traceback" not in err
    assert not (tmp_path / "cli" / "model").exists()


def test_a_huge_learning_rate_over_two_steps_does_not_finish(tmp_path, toy):
    train_txt, _, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=2, lr=1e30)
    with pytest.raises(FloatingPointError, match=r"training diverged: the run ended on 1 step in a row \(up to "
                                                 r"step 2\)"):
        train(cfg)
    assert not (tmp_path / "run" / "model").exists()


def test_a_diverged_run_names_the_checkpoint_from_before_the_update_that_broke_it(tmp_path, toy):
    """--lr 1e30: step 5's update is finite (weights near 1e28), every later loss NaN. The line
    said the checkpoints hold finite weights and to resume with a lower --lr; a resume took the
    newest one, written after that update, and diverged again, and again; the checkpoints of the
    streak had pruned the one from before it (--keep-checkpoints 1 here)."""
    train_txt, _, vocab_txt = toy
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=20, checkpoint_every=2, keep_checkpoints=1)
    train(cfg, stop_after=4)
    cfg.lr, cfg.allow_change = 1e30, ["lr"]
    folder = tmp_path / "run" / "checkpoints"
    with pytest.raises(FloatingPointError) as info:
        train(cfg)
    message = str(info.value)
    assert len(message.splitlines()) == 1
    assert "the weights are those of step 5 (as are checkpoint-00000006.pt, checkpoint-00000008.pt)" in message
    assert message.endswith(f"delete the checkpoints from step 5 on in {folder} and resume from "
                            f"checkpoint-00000004.pt")
    for name in ("checkpoint-00000006.pt", "checkpoint-00000008.pt"):   # as it says
        (folder / name).unlink()
    cfg.lr = 0.2
    assert train(cfg)["finished"]
    assert [p.name for p in list_checkpoints(folder)] == ["checkpoint-00000020.pt"]  # pruned as usual again
    assert all(torch.isfinite(v).all() for v in load_checkpoint(latest_checkpoint(folder))["model"].values())


@pytest.mark.parametrize("setting, value, message", [
    ("clip_norm", float("nan"), "--clip-norm must be a positive number, got nan"),
    ("clip_norm", 0.0, "--clip-norm must be a positive number"),
    ("dropout", 1.0, r"--dropout must be in \[0, 1\)"),
    ("lr", float("inf"), "--lr must be a finite number of 0 or more"),
    ("lr", -0.1, "--lr must be a finite number of 0 or more"),
    ("max_seconds", float("nan"), "--max-hours must be a positive number"),
    ("batch_size", 0, "--batch-size must be at least 1"),
    ("checkpoint_every", 0, "--checkpoint-every must be at least 1"),
    ("keep_checkpoints", 0, "--keep-checkpoints must be at least 1"),
    ("n_negative", -1, "--negatives must be at least 0"),
    ("epochs", float("inf"), "--epochs inf needs --max-steps"),  # (an OverflowError counting the steps)
    # ("Overflow when unpacking long long" from torch at the start, naming no option)
    ("seed", 2 ** 62, r"--seed must be a whole number from -2\*\*53 to 2\*\*53"),
    ("seed", -(10 ** 20), r"--seed must be a whole number from -2\*\*53 to 2\*\*53"),
])
def test_numbers_that_would_crash_or_corrupt_a_run_are_refused(tmp_path, toy, setting, value, message):
    train_txt, _, vocab_txt = toy
    with pytest.raises(ValueError, match=message):
        tiny_config(tmp_path / "run", train_txt, vocab_txt, **{setting: value})
    assert tiny_config(tmp_path / "run", train_txt, vocab_txt, clip_norm=float("inf")).clip_norm == float("inf")


@pytest.mark.parametrize("optimizer, largest", [("adam", "3.403e+37"), ("adagrad", "3.403e+38")])
def test_a_learning_rate_whose_step_is_no_float32_number_is_refused(tmp_path, toy, optimizer, largest):
    """(Adam at --lr 4e37 stopped at its first step with PyTorch's traceback "value cannot be
    converted to type float without overflow": its first step size is 10 times --lr)"""
    train_txt, _, vocab_txt = toy
    too_large = {"adam": 4e37, "adagrad": 1e300}[optimizer]
    with pytest.raises(ValueError, match=re.escape(f"--lr must be at most {largest} with --optimizer {optimizer}")):
        tiny_config(tmp_path / "run", train_txt, vocab_txt, optimizer=optimizer, lr=too_large)
    # the largest rate allowed takes its first step (a finite loss, then weights that diverge)
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, optimizer=optimizer, lr=float(largest) * 0.999,
                      max_steps=1)
    with pytest.raises(FloatingPointError, match="training diverged"):
        train(cfg)


@pytest.mark.parametrize("seed", [MAX_SEED, -MAX_SEED])
def test_the_largest_seeds_allowed_train(tmp_path, toy, seed):
    """The bound on --seed is one that every generator the run seeds from it accepts."""
    train_txt, _, vocab_txt = toy
    summary = train(tiny_config(tmp_path / "run", train_txt, vocab_txt, seed=seed, max_steps=1, n_negative=8,
                                layout="bucketed"))
    assert summary["finished"]
    summary = train(tiny_config(tmp_path / "packed", train_txt, vocab_txt, seed=seed, max_steps=1, n_negative=8))
    assert summary["finished"]


@pytest.mark.parametrize("flags, message", [
    (["--layout", "bucketed", "--state-reset-every", "4"],
     "--state-reset-every 4 applies to --layout packed, whose rows carry their LSTM state"),
    (["--optimizer", "adam", "--adagrad-init", "0.1"], "--adagrad-init 0.1 applies to --optimizer adagrad, not adam"),
    (["--layout", "bucketed", "--unroll-steps", "8"],
     "--unroll-steps 8 applies to --layout packed; --layout bucketed reads one whole sentence a row"),
    (["--eval-every", "2"], "--eval-every 2 needs held-out text (--valid) to validate on"),
    (["--lr-decay-threshold", "0.2"],
     "--lr-decay-threshold 0.2 applies to a decay (--lr-decay below 1); with --lr-decay 1 the rate is never decayed"),
    (["--lr-decay", "1", "--lr-decay-threshold", "0.2", "--eval-every", "2", "--valid", "VALID"],
     "--lr-decay-threshold 0.2 applies to a decay"),
])
def test_a_setting_that_the_other_settings_leave_without_effect_is_refused(tmp_path, toy, capsys, flags, message):
    """--state-reset-every and --unroll-steps with the bucketed layout (every row is one
    sentence from a zero state), --adagrad-init with Adam, --eval-every without --valid and
    --lr-decay-threshold without a decay trained as if they were not given, without a word;
    now one line naming the option, before anything is written."""
    train_txt, held_txt, vocab_txt = toy
    flags = [str(held_txt) if flag == "VALID" else flag for flag in flags]
    args = ["train", str(train_txt), "--vocab", str(vocab_txt), "-o", str(tmp_path / "run"), "--max-steps", "1",
            "--dim", "8", "--projection-dim", "4", "--filters", "1:4", "--device", "cpu", "--no-progress"]
    assert main(args + flags) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
    assert main(args + ["--layout", "bucketed", "--optimizer", "adam"]) == 0   # their defaults are no problem


def test_settings_without_effect_in_a_saved_config_are_not_refused(tmp_path, toy, capsys):
    """train_config.json holds every setting, defaults included (--unroll-steps 20 with the
    bucketed layout, --eval-every 0 without --valid, the 0.01 threshold without a decay): read
    back with --config and resumed with the same command, it is taken; so is an explicit
    default."""
    train_txt, _, vocab_txt = toy
    run = tmp_path / "run"
    args = ["train", str(train_txt), "--vocab", str(vocab_txt), "-o", str(run), "--dim", "8",
            "--projection-dim", "4", "--filters", "1:4", "--device", "cpu", "--no-progress", "--layout", "bucketed",
            "--checkpoint-every", "1"]
    assert main(args + ["--max-steps", "1", "--unroll-steps", "20", "--lr-decay-threshold", "0.01"]) == 0
    saved = json.loads((run / "train_config.json").read_text())
    assert (saved["unroll_steps"], saved["eval_every"], saved["lr_decay_threshold"]) == (20, 0, 0.01)
    assert main(["train", str(train_txt), "--config", str(run / "train_config.json"), "--max-steps", "2"]) == 0
    capsys.readouterr()
    assert main(["train", str(train_txt), "--config", str(run / "train_config.json"), "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["unroll_steps"] == 20
    assert main(args + ["--max-steps", "3"]) == 0
    assert "resuming from checkpoint 2" in capsys.readouterr().err


def test_a_resume_that_ends_the_decay_need_not_repeat_its_threshold(tmp_path, toy, capsys):
    """A run that decayed with a threshold of its own, resumed with --lr-decay 1 --allow-change
    lr-decay: the threshold, now without effect (and refused if given), is not compared."""
    train_txt, held_txt, vocab_txt = toy
    common = dict(eval_every=2, valid=[str(held_txt)], optimizer="adam", lr=0.01, n_negative=8, checkpoint_every=2)
    train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=2, lr_decay=0.5,
                      lr_decay_threshold=0.5, **common))
    capsys.readouterr()
    summary = train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4, allow_change=["lr-decay"],
                                **common))
    assert summary["step"] == 4
    assert "lr_decay was 0.5, now 1.0" in capsys.readouterr().err


def test_held_out_text_without_a_sentence_is_refused(tmp_path, toy):
    train_txt, _, vocab_txt = toy
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=2, valid=[str(tmp_path / "empty.txt")])
    with pytest.raises(ValueError, match="empty.txt: holds no sentence to validate on"):
        train(cfg)
    assert not (tmp_path / "run").exists()   # (it held a config and a log, as if the run had begun)


def test_finetune_held_out_text_that_is_training_text_is_refused(tmp_path, toy, capsys):
    """--heldout naming a training file, by any path or a hard link, reported the perplexity of
    trained text as held-out, before and after. (train --valid: tests/test_text_choice.py)"""
    train_txt, _, _ = toy
    link = tmp_path / "same.txt"
    os.link(train_txt, link)
    argv = ["finetune", str(train_txt), "--heldout", str(link), "--from", "default", "--device", "cpu",
            "--max-steps", "1", "-o", str(tmp_path / "ft")]
    assert main(argv) == 1
    assert "--heldout" in capsys.readouterr().err.split("same.txt: is also training text")[0]
    assert not (tmp_path / "ft").exists()


def test_finetune_held_out_text_that_is_a_copy_of_the_training_text_is_refused(tmp_path, toy, capsys):
    """A copy of the training text (here with other line endings), or the training files
    joined into one, passed the same-file check: the perplexity of trained text was reported
    as held-out. Held-out text that merely shares some sentences is taken."""
    train_txt, _, _ = toy
    lines = train_txt.read_text(encoding="utf-8").splitlines()
    copy = tmp_path / "copy.txt"
    copy.write_bytes("".join(line + "\r\n" for line in lines).encode("utf-8"))
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text("".join(line + "\n" for line in lines[:len(lines) // 2]), encoding="utf-8")
    second.write_text("".join(line + "\n" for line in lines[len(lines) // 2:]), encoding="utf-8")
    for text, named in (([train_txt], f" {train_txt};"), ([first, second], ";")):
        argv = ["finetune", *map(str, text), "--heldout", str(copy), "--from", "default", "--device", "cpu",
                "--max-steps", "1", "-o", str(tmp_path / "ft")]
        assert main(argv) == 1
        assert f"--heldout {copy}: holds the same sentences as the training text{named}" in capsys.readouterr().err
        assert not (tmp_path / "ft").exists()
    _refuse_heldout_in_training([first], [copy])   # (it holds more than the training text)


@pytest.mark.parametrize("negatives", [0, 24])
def test_bf16_training_runs_end_to_end_and_stays_near_float32(tmp_path, toy, negatives):
    """The opt-in --bf16 (autocast) through the whole trainer: the weights stay float32, the
    exported model loads, and the losses follow the float32 run's to bfloat16's precision."""
    import elmo
    train_txt, heldout_txt, vocab_txt = toy
    losses = {}
    for bf16 in (False, True):
        out = tmp_path / f"run-{bf16}"
        summary = train(tiny_config(out, train_txt, vocab_txt, max_steps=8, log_every=4, bf16=bf16,
                                    n_negative=negatives, valid=[str(heldout_txt)]))
        assert summary["finished"] and summary["skipped_steps"] == 0
        log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
        losses[bf16] = [r["loss"] for r in log if r["event"] == "train"]
        bilm = elmo.from_pretrained(str(out / "model"))
        assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in bilm.parameters())
    assert len(losses[True]) == len(losses[False]) == 2
    for low, exact in zip(losses[True], losses[False]):
        assert abs(low - exact) <= 2e-3 * exact, losses  # measured about 5e-5 apart


@pytest.mark.parametrize("native", [False, True, None])
def test_bf16_on_a_cpu_without_native_bfloat16_is_said(tmp_path, toy, capsys, monkeypatch, native):
    """--bf16 where the CPU does not multiply bfloat16 natively ran slower than float32 without
    a word; now a warning says so (the run goes on: its results are as correct as anywhere).
    Nothing is said where the CPU does, where PyTorch cannot tell, or without --bf16."""
    from elmo import runtime
    train_txt, _, vocab_txt = toy
    monkeypatch.setattr(runtime, "cpu_multiplies_bfloat16", lambda: native)
    for bf16 in (True, False):
        summary = train(tiny_config(tmp_path / f"run-{bf16}", train_txt, vocab_txt, max_steps=1, bf16=bf16))
        assert summary["finished"]
        said = "--bf16: this CPU does not multiply bfloat16 natively" in capsys.readouterr().err
        assert said == (bf16 and native is False)


def test_a_file_where_the_run_folder_belongs_is_named(tmp_path, capsys):
    """(it was "c.txt: File exists", which says neither which folder nor what to do)"""
    taken = tmp_path / "run"
    taken.write_text("mine\n", encoding="utf-8")
    (tmp_path / "c.txt").write_text("a b\n", encoding="utf-8")
    for argv in (["train", str(tmp_path / "c.txt"), "--vocab", str(tmp_path / "c.txt")],
                 ["finetune", str(tmp_path / "c.txt"), "--from", "default"]):
        assert main(argv + ["--output", str(taken), "--device", "cpu", "--max-steps", "1"]) == 1
        assert f"{taken}: is a file, but the run folder must be a folder" in capsys.readouterr().err
    assert taken.read_text(encoding="utf-8") == "mine\n"


def test_finetune_says_which_text_is_missing(tmp_path, capsys):
    one = tmp_path / "one.txt"
    one.write_text("a b\n", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    base = ["finetune", "--from", "default", "--device", "cpu", "--max-steps", "1"]
    assert main(base + [str(one), "-o", str(tmp_path / "r1")]) == 1
    assert "one.txt: no held-out text (every 10th of its 1 sentences is held out: give --heldout" \
        in capsys.readouterr().err
    assert main(base + [str(one), "--heldout", str(tmp_path / "empty.txt"), "-o", str(tmp_path / "r2")]) == 1
    assert "empty.txt: no held-out text; finetune needs both" in capsys.readouterr().err
    assert main(base + [str(one), "--heldout-every", "1", "-o", str(tmp_path / "r3")]) == 1
    assert "--heldout-every must be at least 2" in capsys.readouterr().err
    assert main(base + [str(one), "-o", str(tmp_path / "r4"), "--heldout"]) == 1   # (every 10th, silently)
    assert "--heldout names no file" in capsys.readouterr().err
    # (--heldout-every was ignored beside --heldout, without a word)
    assert main(base + [str(one), "--heldout", str(tmp_path / "empty.txt"), "--heldout-every", "5", "-o",
                        str(tmp_path / "r5")]) == 1
    assert "--heldout-every 5 applies without --heldout" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt", "one.txt"]   # (r1 to r3 were left empty)


def test_a_failed_run_leaves_no_empty_run_folder(tmp_path, toy, capsys, monkeypatch):
    """(``elmo train`` with a vocabulary that is not there, or any error before the run's first
    file, left the run folder and the folders above it that it made, empty.) A folder that was
    there before is kept, and so is one that holds a file."""
    train_txt, _, vocab_txt = toy
    base = ["train", str(train_txt), "--device", "cpu", "--max-steps", "1"]
    assert main(base + ["--vocab", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "a" / "b" / "run")]) == 1
    assert "missing.txt" in capsys.readouterr().err and not (tmp_path / "a").exists()
    (tmp_path / "there").mkdir()
    assert main(base + ["--vocab", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "there")]) == 1
    assert (tmp_path / "there").is_dir() and not list((tmp_path / "there").iterdir())
    # a run that fails after it has written: its files are kept
    from elmo.training.trainer import TrainingRun

    def fails(self):
        raise RuntimeError("a step that fails")
    monkeypatch.setattr(TrainingRun, "step", fails)
    with pytest.raises(RuntimeError):
        train(tiny_config(tmp_path / "began", train_txt, vocab_txt, max_steps=2))
    assert (tmp_path / "began" / "log.jsonl").exists()


def test_model_options_set_with_from_are_refused(tmp_path, capsys):
    """(``--set options.lstm.dim=8`` or a --config file's options, with --from, were dropped
    without a word: the run went on in the start model's shape, as though they were taken)"""
    one = tmp_path / "one.txt"
    one.write_text("a b\n", encoding="utf-8")
    for command in ("finetune", "train"):
        assert main([command, str(one), "--from", "default", "-o", str(tmp_path / command), "--device", "cpu",
                     "--max-steps", "1", "--set", "options.lstm.dim=8"]) == 1
        assert capsys.readouterr().err.strip() == (f"elmo {command}: error: options (lstm, from --config or --set) "
                                                   f"do not apply with --from: a warm start keeps the model's shape")
        assert not (tmp_path / command).exists()


def test_a_second_training_into_the_same_run_is_refused(tmp_path, toy, capsys):
    """(it resumed from the first one's newest checkpoint, and both wrote into one run)"""
    from elmo.output_lock import output_lock

    train_txt, _, vocab_txt = toy
    run = tmp_path / "run"
    run.mkdir()
    with output_lock(run / "train", name=run):   # as a first `elmo train` holds it
        with pytest.raises(OSError, match=rf"{run} is already being written by PID {os.getpid()}"):
            train(tiny_config(run, train_txt, vocab_txt, max_steps=2))
    assert sorted(p.name for p in run.iterdir()) == []     # nothing written, the lock file removed
    train(tiny_config(run, train_txt, vocab_txt, max_steps=2))   # free again
    assert not (run / "train.lock").exists() and (run / "model").is_dir()


def test_a_second_finetune_into_a_busy_run_changes_none_of_its_files(tmp_path, toy):
    """(the lock was taken by training, after finetune had written its text: a second finetune
    into a folder that one was training in replaced the text being trained on, then stopped)"""
    from elmo.output_lock import output_lock
    from elmo.training.finetune import finetune

    train_txt, _, vocab_txt = toy
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))
    run = tmp_path / "adapted"
    run.mkdir()
    (run / "adapt_train.txt").write_text("the text being trained on\n", encoding="utf-8")
    cfg = tiny_config(run, train_txt, "", init_from=str(tmp_path / "base" / "model"), max_steps=2)
    with output_lock(run / "train", name=run):   # as a first finetune holds it
        with pytest.raises(OSError, match=rf"{run} is already being written by PID {os.getpid()}"):
            finetune(cfg)
    assert sorted(p.name for p in run.iterdir()) == ["adapt_train.txt"]
    assert (run / "adapt_train.txt").read_text(encoding="utf-8") == "the text being trained on\n"
    (run / "adapt_train.txt").unlink()
    assert finetune(cfg)["steps"] == 2 and not (run / "train.lock").exists()   # free again


def test_a_run_whose_model_folder_is_its_start_model_is_refused(tmp_path, toy):
    """``--from run1/model --output run1`` (once run1's checkpoints were gone) trained and then
    exported over the start model: its weights were replaced, and its metadata said it was
    adapted from itself. Now refused before anything is written, by train and finetune alike."""
    from elmo.io import OutputError
    from elmo.training.finetune import finetune

    train_txt, _, vocab_txt = toy
    base = tmp_path / "base"
    train(tiny_config(base, train_txt, vocab_txt, max_steps=2))
    for path in (base / "checkpoints").iterdir():
        path.unlink()
    before = {p.name: p.read_bytes() for p in (base / "model").iterdir()}
    for run, cfg in ((finetune, tiny_config(base, train_txt, "", init_from=str(base / "model"), max_steps=2)),
                     (train, tiny_config(base, train_txt, vocab_txt, options=None, init_from=str(base / "model"),
                                         max_steps=2))):
        with pytest.raises(OutputError, match=rf"{base}: its model folder is .*the model this run starts from"):
            run(cfg)
    assert {p.name: p.read_bytes() for p in (base / "model").iterdir()} == before
    assert not (base / "adapt_train.txt").exists()


def test_finetune_text_found_in_its_own_run_folder_is_refused(tmp_path, toy):
    """(``elmo finetune texts/ -o texts``, or ``texts/*.txt``, read on a rerun the run's own
    checkpoints, log and adapt_heldout.txt as text: before the first checkpoint, the held-out
    part was then trained on, and its perplexity reported as held out)"""
    from elmo.training.finetune import finetune

    train_txt, _, vocab_txt = toy
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))
    base = str(tmp_path / "base" / "model")
    texts = tmp_path / "texts"
    texts.mkdir()
    (texts / "task.txt").write_text(train_txt.read_text(encoding="utf-8"), encoding="utf-8")
    for given in (texts, texts / "*.txt"):
        with pytest.raises(ValueError, match=rf"task.txt: in the run folder {texts}, where finetune writes its own"):
            finetune(tiny_config(texts, given, "", init_from=base, max_steps=2))
    assert sorted(p.name for p in texts.iterdir()) == ["task.txt"]   # nothing written
    named = tiny_config(texts, texts / "task.txt", "", init_from=base, max_steps=2)
    assert finetune(named)["steps"] == 2                  # a file named on its own there is taken
    with pytest.raises(ValueError, match=r"adapt_heldout.txt: in the run folder"):   # but not finetune's own
        finetune(named, heldout=[str(texts / "adapt_heldout.txt")])


def test_finetune_into_a_run_folder_inside_its_text_folder_is_refused_before_the_first_session(tmp_path, toy):
    """``elmo finetune texts/ -o texts/run``: the first session was taken (the run folder held
    no file yet for the text to find) and every rerun refused, as the folder then found the
    run's own files; now refused at once, by the check train uses, with nothing written."""
    from elmo.training.finetune import finetune

    train_txt, _, vocab_txt = toy
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))
    texts = tmp_path / "texts"
    texts.mkdir()
    (texts / "task.txt").write_text(train_txt.read_text(encoding="utf-8"), encoding="utf-8")
    cfg = tiny_config(texts / "run", texts, "", init_from=str(tmp_path / "base" / "model"), max_steps=2)
    with pytest.raises(ValueError, match=rf"training text {texts}: would read the files of the run folder "
                                         rf"{texts / 'run'} \(its train.lock"):
        finetune(cfg)
    assert sorted(p.name for p in texts.iterdir()) == ["task.txt"]


def test_finetune_checks_its_start_model_once(tmp_path, toy, monkeypatch):
    """finetune checked --from before writing its text files, and train() checked it again."""
    from elmo.training import finetune as finetune_mod
    from elmo.training import run_folder
    from elmo.training import trainer as trainer_mod

    train_txt, _, vocab_txt = toy
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))
    calls = []
    check = run_folder.check_start_model
    counted = lambda cfg: calls.append(cfg.init_from) or check(cfg)   # noqa: E731
    # (patched where it is looked up: train() and finetune() call the names they imported)
    monkeypatch.setattr(trainer_mod, "check_start_model", counted)
    monkeypatch.setattr(finetune_mod, "check_start_model", counted)
    cfg = tiny_config(tmp_path / "ft", train_txt, "", init_from=str(tmp_path / "base" / "model"), max_steps=1)
    assert finetune_mod.finetune(cfg)["steps"] == 1
    assert calls == [cfg.init_from]


def test_train_and_finetune_read_the_start_models_weights_once(tmp_path, toy, monkeypatch):
    """`elmo train --from` read the start model's weights twice in every process (its check
    before anything is written, then the warm start), finetune three times in its first
    process (the check, the perplexity before, the warm start): seconds each for a published
    model. The check's model is now the one measured and trained from."""
    from elmo import weights
    from elmo.training.finetune import finetune

    train_txt, _, vocab_txt = toy
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))
    start = tmp_path / "base" / "model"
    reads = []
    read = weights.read_original_arrays

    def counted(weight_file, *args, **kwargs):
        reads.append(Path(weight_file).parent == start)
        return read(weight_file, *args, **kwargs)
    monkeypatch.setattr(weights, "read_original_arrays", counted)   # (load_original reads through it)
    train(tiny_config(tmp_path / "warm", train_txt, vocab_txt, options=None, init_from=str(start), max_steps=1))
    assert reads.count(True) == 1, reads
    reads.clear()
    assert finetune(tiny_config(tmp_path / "ft", train_txt, "", init_from=str(start), max_steps=1))["steps"] == 1
    assert reads.count(True) == 1, reads   # (the adapted model, read for the perplexity after, is not counted)


def test_a_warm_start_from_the_models_own_vocabulary_reads_it_once(tmp_path, toy, monkeypatch):
    """(`train --from MODEL` without --vocab, and finetune, read MODEL/vocab.txt twice: the
    check's load of the model, then the run's vocabulary, the same file; half a second each
    for the default model's 50,000 words.)"""
    from elmo.training.finetune import finetune
    from elmo.vocab import Vocabulary

    train_txt, _, vocab_txt = toy
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))
    start = tmp_path / "base" / "model"
    reads = []
    load = Vocabulary.load.__func__

    def counted(cls, path):
        reads.append(Path(path) == start / "vocab.txt")
        return load(cls, path)
    monkeypatch.setattr(Vocabulary, "load", classmethod(counted))
    train(tiny_config(tmp_path / "warm", train_txt, str(start / "vocab.txt"), options=None,
                      init_from=str(start), max_steps=1))
    assert reads.count(True) == 1, reads
    reads.clear()
    assert finetune(tiny_config(tmp_path / "ft", train_txt, "", init_from=str(start), max_steps=1))["steps"] == 1
    assert reads.count(True) == 1, reads


def test_finetune_on_a_full_disk_names_the_file(tmp_path, toy, monkeypatch):
    """(its text and report files failed with a bare "[Errno 28] No space left on device")"""
    from elmo.training import finetune as finetune_mod
    from elmo.training.checkpoint import RunWriteError

    train_txt, _, vocab_txt = toy
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))

    def full(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(finetune_mod, "atomic_write_text", full)
    cfg = tiny_config(tmp_path / "adapted", train_txt, "", init_from=str(tmp_path / "base" / "model"), max_steps=2)
    with pytest.raises(RunWriteError, match="cannot write .*adapt_train.txt: no space left on device"):
        finetune_mod.finetune(cfg)


def test_an_infinite_perplexity_is_strict_json_in_every_file_and_line_that_reports_it(tmp_path, capsys):
    """``elmo perplexity --json`` and a model folder's metadata name an infinite perplexity
    "inf" (the finetune report and ``elmo train``'s summary go through the same
    ``strict_json.dumps``): Python's default wrote the token Infinity, which JSON has not, so
    strict parsers (JavaScript's JSON.parse among them) refused the whole output."""
    from elmo.training.export import export_model, read_metadata
    from training_helpers import tiny_lm_and_batch
    model, vocab, _ = tiny_lm_and_batch(tmp_path / "t.txt", "a b c d e f\ng h a b\n", 2, 5)
    with torch.no_grad():
        model.softmax.weight.mul_(1e8)
    folder = export_model(model, vocab, tmp_path / "diverged", {"heldout_ppl_before": {"ppl": float("inf")},
                                                                "loss": float("nan")})
    strict = {"parse_constant": lambda name: pytest.fail(f"{name}: not strict JSON")}
    meta = json.loads((folder / "metadata.json").read_text(), **strict)
    assert meta["heldout_ppl_before"] == {"ppl": "inf"} and meta["loss"] == "nan"
    assert read_metadata(folder)["heldout_ppl_before"]["ppl"] == "inf"
    assert main(["perplexity", str(folder), str(tmp_path / "t.txt"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out, **strict)
    assert printed["ppl"] == printed["ppl_fwd"] == "inf" and float(printed["ppl"]) == float("inf")
    assert 709 < printed["loss_fwd"] < float("inf")


def test_strict_json_names_or_drops_non_finite_numbers_wherever_they_sit():
    from elmo import strict_json
    value = {"a": [1.5, float("nan"), (float("-inf"), 2)], "b": {"c": float("inf")}, "d": "nan", "e": None}
    assert json.loads(strict_json.dumps(value)) == {"a": [1.5, "nan", ["-inf", 2]], "b": {"c": "inf"},
                                                    "d": "nan", "e": None}
    assert strict_json.nonfinite_as_none(value) == {"a": [1.5, None, [None, 2]], "b": {"c": None},
                                                   "d": "nan", "e": None}
    with pytest.raises(ValueError):  # what a default= hook returns is not looked into, but refused
        strict_json.dumps({"x": object()}, default=lambda _: float("nan"))


def test_a_truncated_softmax_file_is_named(tmp_path, toy):
    """(perplexity and finetune gave h5py's "Unable to synchronously open file (truncated
    file ...)", naming no file)"""
    from elmo.training.export import SOFTMAX_FILE, load_language_model
    from elmo.weights import WeightFileError

    train_txt, _, vocab_txt = toy
    train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=1))
    folder = tmp_path / "run" / "model"
    softmax = folder / SOFTMAX_FILE
    softmax.write_bytes(softmax.read_bytes()[:softmax.stat().st_size // 2])
    unrecord(folder, SOFTMAX_FILE)   # (its SHA-256 record refuses it first: this is the check without one)
    with pytest.raises(WeightFileError, match=r"softmax.hdf5: not a readable HDF5 file \(truncated"):
        load_language_model(folder)


def test_training_text_that_would_read_the_runs_own_files_is_refused(tmp_path, toy, capsys):
    """(``elmo train corpus/ -o corpus``: every file below the folder is training text, so the
    first session trained on the run's lock file, and the resume read its checkpoints and log
    as text and stopped on "not valid UTF-8", naming a checkpoint.) Now refused before anything
    is written, naming both paths; text of its own inside the run folder is still taken."""
    train_txt, heldout_txt, vocab_txt = toy
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.txt").write_text(train_txt.read_text(encoding="utf-8"), encoding="utf-8")
    refused = [(corpus, corpus, {}), (corpus, corpus / "run", {}), (f"{corpus}/**", corpus, {}),
               (f"{corpus}/*", corpus, {}), (tmp_path / "corpus" / ".." / "corpus", corpus / "run", {}),
               (corpus / "train.txt", corpus / "run", {"valid": [str(corpus)]})]
    for text, out, more in refused:
        cfg = tiny_config(out, text, vocab_txt, max_steps=1, **more)
        option = "--valid" if more else "training text"
        with pytest.raises(ValueError, match=rf"^{option} .*: would read the files of the run folder {out} "
                                             rf"\(its train.lock, checkpoints, log\) as text; give another"):
            train(cfg)
        assert sorted(p.name for p in corpus.iterdir()) == ["train.txt"]   # nothing written
    assert main(["train", str(corpus), "--vocab", str(vocab_txt), "-o", str(corpus), "--device", "cpu"]) == 1
    assert capsys.readouterr().err.count("\n") == 1

    run = tmp_path / "run"                       # the run's own files, named or matched
    train(tiny_config(run, train_txt, vocab_txt, max_steps=1))
    for text in (run / "log.jsonl", f"{run}/*/*.pt", run / "model" / "vocab.txt"):
        with pytest.raises(ValueError, match="would read the files of the run folder"):
            train(tiny_config(run, text, vocab_txt, max_steps=2))

    # harmless: a text file named in the run folder, a glob that matches only text there, a
    # folder of text inside it, a run folder inside a hidden folder of the corpus
    text = heldout_txt.read_text(encoding="utf-8")
    for k, (given, inside) in enumerate((("b.txt", False), ("*.txt", False), ("text", False), (".runs/r", True))):
        out = corpus / given if inside else tmp_path / f"harmless-{k}"
        (out / "text").mkdir(parents=True)
        (out / "text" / "a.txt").write_text(text, encoding="utf-8")
        (out / "b.txt").write_text(text, encoding="utf-8")
        (out / "valid").mkdir()   # (held-out text that is not training text, in the run folder too)
        (out / "valid" / "v.txt").write_text(text, encoding="utf-8")
        cfg = tiny_config(out, corpus if inside else out / given, vocab_txt, max_steps=1,
                          valid=[str(out / "valid" / "v.txt")])
        assert train(cfg)["finished"]


def test_a_vocabulary_inside_the_training_text_is_refused(tmp_path, toy):
    """(``elmo vocab build corpus/ -o corpus/vocab.txt`` (refused now too), then ``elmo train
    corpus/``: the run trained on the vocabulary's lines and its counts' word<TAB>count lines as
    sentences, without a word)"""
    from elmo.training.finetune import finetune

    train_txt, _, vocab_txt = toy
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.txt").write_text(train_txt.read_text(encoding="utf-8"), encoding="utf-8")
    (corpus / "vocab.txt").write_text(vocab_txt.read_text(encoding="utf-8"), encoding="utf-8")
    for text, more in ((corpus, {}), (f"{corpus}/*.txt", {}), (train_txt, {"valid": [str(corpus)]})):
        with pytest.raises(ValueError, match=rf"^--vocab: {corpus}/vocab.txt would be read as text too, as a "
                                             rf"file of {re.escape(str(text if not more else corpus))} \(every"):
            train(tiny_config(tmp_path / "run", text, corpus / "vocab.txt", max_steps=1, **more))
    assert not (tmp_path / "run").exists()
    named = tiny_config(tmp_path / "run", corpus / "train.txt", corpus / "vocab.txt", max_steps=1)
    assert train(named)["finished"]   # the text file named: the vocabulary beside it is not read
    (corpus / "vocab.counts.tsv").write_text("<S>\t1\n</S>\t1\n<UNK>\t0\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab.counts.tsv would be read as text too"):   # (read beside it)
        train(tiny_config(tmp_path / "run2", corpus / "train.txt", corpus / "vocab.txt", max_steps=1,
                          valid=[f"{corpus}/*.tsv"]))
    model = tmp_path / "run" / "model"       # finetune on text that holds the start model
    with pytest.raises(ValueError, match=rf"^--from {model}: {model}/vocab.txt would be read as text too"):
        finetune(tiny_config(tmp_path / "ft", tmp_path / "run", "", init_from=str(model), max_steps=1))
    assert not (tmp_path / "ft").exists()


@pytest.mark.parametrize("full", ["weights.hdf5", "softmax.hdf5"])
def test_full_disk_while_exporting_says_so(tmp_path, toy, monkeypatch, capsys, full):
    """The disk fills while the trained model is exported (its weights, or its softmax, which
    h5py wrote directly): one line naming the file and the full disk, and no model folder, whole
    or partial. It read "[Errno 5] cannot write RUN/model: Input/output error"."""
    from tests.conftest import fill_disk_on_open

    train_txt, _, vocab_txt = toy
    run = tmp_path / "run"
    opened = fill_disk_on_open(monkeypatch, 0, which=lambda n: n == ["weights.hdf5", "softmax.hdf5"].index(full))
    assert main(["train", str(train_txt), "--vocab", str(vocab_txt), "--output", str(run), "--dim", "16",
                 "--projection-dim", "8", "--filters", "1:4,2:4", "--char-dim", "4", "--batch-size", "4",
                 "--unroll-steps", "5", "--max-steps", "2", "--no-progress", "--threads", "1"]) == 1
    assert [Path(p).name.split(".")[1] for p in opened][-1] == full.split(".")[0]
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("elmo train: error: ") and err.endswith(f"{run / 'model' / full}: cannot write the "
                                                                   f"{full.split('.')[0]}: No space left on device")
    assert not (run / "model").exists() and not (run / "model.partial").exists()



@pytest.mark.parametrize("layout, world_size", [("packed", 1), ("packed", 2), ("packed", 3), ("bucketed", 2)])
def test_finetune_batch_leaves_enough_steps_with_several_processes(tmp_path, monkeypatch, layout, world_size):
    """Each process reads its own rows of a step: the batch fitted to a small text left one
    process its 20 steps an epoch, but 2 processes 10 and 3 processes 7. finetune fits it to
    the processes torchrun started."""
    from elmo.data.corpus import count_tokens
    from elmo.data.lm_batches import MAX_PIECE_LENGTH
    from elmo.training.distributed import launched_world_size
    from elmo.training.finetune import MIN_STEPS_PER_EPOCH, fitted_batch_size
    from elmo.training.trainer import total_steps

    sentences = [["the", "happy", "farmer", "sees", "the", "old", "river", "."]] * 600
    (tmp_path / "t.txt").write_text("".join(" ".join(s) + "\n" for s in sentences))
    stats = count_tokens([tmp_path / "t.txt"], piece_length=MAX_PIECE_LENGTH)
    cfg = tiny_config(tmp_path / "run", tmp_path / "t.txt", "", batch_size=128, layout=layout)
    batch = fitted_batch_size(cfg, sentences, world_size)
    assert 1 < batch < 128
    assert total_steps(dataclasses.replace(cfg, batch_size=batch), world_size, stats) >= MIN_STEPS_PER_EPOCH
    monkeypatch.setenv("WORLD_SIZE", str(world_size))
    assert launched_world_size() == world_size


def test_finetune_bucketed_batch_counts_the_pieces_of_long_sentences(tmp_path):
    """A bucketed epoch reads every piece of a sentence over MAX_PIECE_LENGTH words as a row of
    its own, but finetune fitted its batch to the sentence count: 200 sentences of 450 words
    (600 rows) got 10 rows a step and 60 steps an epoch, where 30 rows give the 20 promised.
    The batch now leaves 20 steps of the rows an epoch reads (not three times as many)."""
    from elmo.data.corpus import count_tokens
    from elmo.data.lm_batches import MAX_PIECE_LENGTH
    from elmo.training.finetune import MIN_STEPS_PER_EPOCH, fitted_batch_size
    from elmo.training.trainer import total_steps

    sentences = [[f"w{k % 7}" for k in range(450)]] * 200
    (tmp_path / "t.txt").write_text("".join(" ".join(s) + "\n" for s in sentences))
    stats = count_tokens([tmp_path / "t.txt"], piece_length=MAX_PIECE_LENGTH)
    cfg = tiny_config(tmp_path / "run", tmp_path / "t.txt", "", batch_size=128, layout="bucketed")
    batch = fitted_batch_size(cfg, sentences)
    steps = lambda b: total_steps(dataclasses.replace(cfg, batch_size=b), 1, stats)
    assert MIN_STEPS_PER_EPOCH <= steps(batch) <= MIN_STEPS_PER_EPOCH + 1


def test_the_validation_panel_of_many_runs_draws_each_runs_mean_only(tmp_path, monkeypatch):
    """Three lines a run (forward, backward, mean) for seven runs of a comparison hid the curves
    under a 21-line legend; for more than two runs the panel draws each run's mean alone."""
    plt = pytest.importorskip("matplotlib.pyplot")
    from elmo.training.curves import plot_learning_curve

    logs = []
    for k in range(3):
        log = tmp_path / f"run{k}" / "log.jsonl"
        log.parent.mkdir()
        log.write_text("".join(json.dumps({"event": "eval", "step": s, "epoch": s / 10, "ppl": 50.0 - s - k,
                                           "ppl_fwd": 51.0 - s, "ppl_bwd": 49.0 - s}) + "\n" for s in (1, 2)))
        logs.append(log)
    drawn = []
    real = plt.subplots
    monkeypatch.setattr(plt, "subplots", lambda *a, **k: drawn.append(real(*a, **k)) or drawn[-1])
    for chosen, lines in ((logs, 3), (logs[:1], 3), (logs[:2], 6)):
        plot_learning_curve(chosen, tmp_path / "curve.png")
        valid_panel = drawn[-1][1][1]
        assert len(valid_panel.lines) == lines
    assert [line.get_label() for line in valid_panel.lines][:3] == ["run0 ppl_fwd", "run0 ppl_bwd", "run0 ppl"]
    plot_learning_curve(logs, tmp_path / "curve.png")
    assert [line.get_label() for line in drawn[-1][1][1].lines] == ["run0 ppl", "run1 ppl", "run2 ppl"]


def test_a_model_folder_whose_vocabulary_and_counts_list_other_words_is_refused(tmp_path, toy, capsys):
    """vocab.txt edited (two words swapped: the softmax rows then belong to other words) beside
    the vocab_counts.tsv it was exported with: perplexity read the counts file alone and printed
    a figure, and finetune wrote its text files, then said the model's own vocab.txt was not its
    vocabulary. Now both refuse the folder before anything is written, naming the two files."""
    train_txt, held_txt, _ = toy
    assert main(["vocab", "build", str(train_txt), "-o", str(tmp_path / "v.txt")]) == 0   # (with its counts)
    train(tiny_config(tmp_path / "base", train_txt, tmp_path / "v.txt", max_steps=2))
    model = tmp_path / "base" / "model"
    assert main(["perplexity", str(model), str(held_txt), "--device", "cpu"]) == 0   # (the files agree)
    words = (model / "vocab.txt").read_text(encoding="utf-8").splitlines()
    words[3], words[4] = words[4], words[3]
    (model / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    unrecord(model, "vocab.txt")   # (edited, and accepted as the record's refusal says: the check beyond it)
    capsys.readouterr()
    says = (f"{model}: vocab.txt ({len(words)} words) and vocab_counts.tsv ({len(words)}) list other words "
            f"(word 4 is {words[3]!r} in vocab.txt, {words[4]!r} in vocab_counts.tsv)")
    assert main(["perplexity", str(model), str(held_txt), "--device", "cpu"]) == 1
    captured = capsys.readouterr()
    assert says in captured.err and not captured.out
    out = tmp_path / "ft"
    assert main(["finetune", str(train_txt), "--from", str(model), "-o", str(out), "--no-progress"]) == 1
    assert says in capsys.readouterr().err
    assert not out.exists()


def test_each_curve_of_plot_curve_has_a_name_of_its_own(tmp_path, monkeypatch):
    """Every log file was named by its folder: logs/a.jsonl and logs/b.jsonl drew two curves both
    named "logs", and the log.jsonl of the working folder ("elmo plot-curve log.jsonl") one named
    "", which the legend left out (with a matplotlib warning)."""
    plt = pytest.importorskip("matplotlib.pyplot")
    from elmo.training.curves import plot_learning_curve

    def write(log: Path, k: int) -> str:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(json.dumps(record) + "\n" for record in (
            {"event": "train", "step": 1, "tokens": 100, "train_ppl": 40.0 + k},
            {"event": "eval", "step": 1, "epoch": 0.5, "ppl": 30.0 + k, "ppl_fwd": 31.0, "ppl_bwd": 29.0})))
        return str(log)

    drawn = []
    real = plt.subplots
    monkeypatch.setattr(plt, "subplots", lambda *a, **k: drawn.append(real(*a, **k)) or drawn[-1])

    def names(logs):
        plot_learning_curve(logs, tmp_path / "curve.png")
        train_panel, valid_panel = drawn[-1][1]
        return [line.get_label() for line in train_panel.lines], [line.get_label() for line in valid_panel.lines]

    logs = [write(tmp_path / "logs" / "a.jsonl", 0), write(tmp_path / "logs" / "b.jsonl", 1)]
    assert names(logs) == (["a", "b"], ["a ppl_fwd", "a ppl_bwd", "a ppl", "b ppl_fwd", "b ppl_bwd", "b ppl"])
    runs = [write(tmp_path / where / "run" / "log.jsonl", 0) for where in ("x", "y")]   # (two run folders "run")
    assert names(runs)[0] == runs
    assert names([str(tmp_path / "x" / "run"), logs[0]])[0] == ["run", "a"]   # (a run folder named)
    monkeypatch.chdir(tmp_path / "x" / "run")
    assert names(["log.jsonl"])[0] == ["run"]


def test_a_boundary_token_written_in_the_text_is_a_target_in_both_directions(tmp_path):
    """The targets left out in evaluation were found by their ids: a "<S>" word of the text was
    no target forward and a "</S>" word none backward, so the two directions scored other
    targets than the words plus one boundary a sentence that the count reports. Now only the
    boundary of a join between two sentences (read after the other marker) is left out, and
    only in a stream: the stateless figure read a sentence's own words "</S> <S>" as a join and
    left one out too (a sentence alone in its row joins nothing)."""
    from elmo.chars import batch_to_ids
    from elmo.training.evaluate import likelihood_sums, perplexity
    from training_helpers import tiny_lm_and_batch
    model, vocab, _ = tiny_lm_and_batch(tmp_path / "t.txt", "a b c d\n", 1, 2)
    model = model.double().eval()
    sentences = [["a", "<S>", "b", "c"], ["d", "</S>", "a"], ["b"]]
    for carry, window in ((False, 100), (True, 1), (True, 3), (True, 100)):
        sums = likelihood_sums(model, sentences, vocab, carry_state=carry, window=window)
        assert sums[2:] == [sum(len(s) + 1 for s in sentences)] * 2, (carry, window)
    sentences.append(["c", "</S>", "<S>", "d"])   # (as a join reads in a stream, which cannot tell)
    expected = sum(len(s) + 1 for s in sentences)
    # every target scored, in float64: each sentence read alone through the biLM, the softmax applied
    p = model.options.lstm.projection_dim
    nll, largest = [0.0, 0.0], 0.0
    with torch.no_grad():
        for s in sentences:
            top = model.bilm(batch_to_ids([s]), keep_sentence_boundaries=True)["activations"][-1][0]
            ids = [vocab.bos, *vocab.ids(s), vocab.eos]
            for d, half, pairs in ((0, top[:, :p], zip(range(len(ids) - 1), ids[1:])),
                                   (1, top[:, p:], zip(range(1, len(ids)), ids[:-1]))):
                logits = half @ model.softmax.weight.t() + model.softmax.bias
                largest = max(largest, float(logits.abs().max()))
                log_p = torch.log_softmax(logits, dim=-1)
                nll[d] -= sum(float(log_p[i, t]) for i, t in pairs)
    result = perplexity(model, sentences, vocab)
    assert result["targets"] == expected
    # The model takes the softmax's cross-entropy in float32 (logits.float()): rounding a logit
    # moves it by eps * |logit|, and a log-softmax term by at most twice the largest such move
    # (plus the rounding of its own few operations); a left-out target moves a mean by ~1/11.
    tolerance = 8 * torch.finfo(torch.float32).eps * (1 + largest)
    assert result["loss_fwd"] == pytest.approx(nll[0] / expected, abs=tolerance)
    assert result["loss_bwd"] == pytest.approx(nll[1] / expected, abs=tolerance)


@pytest.mark.parametrize("emulated", [True, False])
def test_bf16_on_a_gpu_that_emulates_it_is_said(capsys, monkeypatch, emulated):
    """A GPU before compute capability 8.0 runs bfloat16 autocast emulated, slower than
    float32; it is said as for a CPU without it. CUDA is simulated: nothing reaches a GPU."""
    from types import SimpleNamespace
    from elmo.training.preflight import warn_bf16_not_native
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 0) if emulated else (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100")
    for bf16 in (True, False):
        warn_bf16_not_native(SimpleNamespace(bf16=bf16),    # type: ignore[arg-type]
                             SimpleNamespace(is_main=True, device=torch.device("cuda:0")))
        said = "--bf16: this GPU (Tesla V100) has no bfloat16 arithmetic of its own" in capsys.readouterr().err
        assert said == (bf16 and emulated)


def test_a_run_on_a_numbered_gpu_makes_it_the_current_one(monkeypatch):
    """A single process on cuda:1 left GPU 0 the current device, where CUDA's set-up made a
    context of its own (memory on a GPU the run was told not to use). CUDA is simulated."""
    from elmo.training import distributed
    chosen = []
    monkeypatch.setattr(distributed, "resolve_device", lambda device, local_rank: torch.device(device))
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    assert distributed.setup("cuda:1").device == torch.device("cuda:1")
    assert chosen == [torch.device("cuda:1")]
    distributed.setup("cpu")
    assert chosen == [torch.device("cuda:1")]


def test_a_warm_start_takes_the_counts_a_run_reading_vocab_txt_takes(tmp_path, toy):
    """A model folder's vocab.txt with counts of its own and a vocab_counts.tsv beside it: the
    start model's vocabulary, which a warm start now reuses instead of reading vocab.txt
    again, had the counts file's counts, where a run reading vocab.txt kept vocab.txt's."""
    from elmo import ElmoOptions
    from elmo.training.export import COUNTS_FILE, VOCAB_FILE, export_model, load_vocabulary
    from elmo.training.model import LanguageModel
    from elmo.training.training_vocab import load_training_vocabulary
    from elmo.vocab import Vocabulary
    from training_helpers import tiny_model_options
    _, _, vocab_txt = toy
    vocab = Vocabulary.load(vocab_txt)
    model = LanguageModel(ElmoOptions.from_dict(tiny_model_options()), len(vocab), vocab.bos, vocab.eos, 0.0)
    export_model(model, vocab, tmp_path / "lm")
    words = load_vocabulary(tmp_path / "lm").words
    (tmp_path / "lm" / VOCAB_FILE).write_text("".join(f"{w}\t{7 + i}\n" for i, w in enumerate(words)), encoding="utf-8")
    (tmp_path / "lm" / COUNTS_FILE).write_text("".join(f"{w}\t1\n" for w in words), encoding="utf-8")
    unrecord(tmp_path / "lm", VOCAB_FILE)   # (edited on purpose; the counts file is new)
    read = load_training_vocabulary(tmp_path / "lm" / VOCAB_FILE)
    reused = load_training_vocabulary(tmp_path / "lm" / VOCAB_FILE, loaded=(tmp_path / "lm", load_vocabulary(tmp_path / "lm")))
    assert read.counts == reused.counts == [7 + i for i in range(len(words))]


@pytest.mark.parametrize("damage", ["name length", "directory flag"])
def test_a_checkpoints_zip_header_damaged_is_named(tmp_path, damage):
    """Found by fuzzing the ELMoForManyLangs reader, which shares the check: a flipped bit of a
    record's local header (its name's length) moved where torch.load took the data from, and a
    record flagged as a directory was read as empty (uninitialised memory); each loaded other
    values without a word, though Python's zip reader refuses both."""
    path = tmp_path / "ckpt.pt"
    torch.save({"weights": torch.arange(64.0)}, path)
    with zipfile.ZipFile(path) as archive:
        record = next(r for r in archive.infolist() if "/data/" in r.filename)
    data = bytearray(path.read_bytes())
    if damage == "name length":
        data[record.header_offset + 27] ^= 0x01   # (the high byte of the name's length: +256)
        message = r"a damaged or incomplete zip archive \("
    else:
        entry = data.rfind(b"PK\x01\x02", 0, data.rfind(record.filename.encode()))
        data[entry + 38] ^= 0x10                  # (external attributes: MS-DOS directory)
        message = f"record '{re.escape(record.filename)}' is marked as a directory"
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=f"ckpt.pt: not a readable checkpoint, truncated or corrupt: {message}"):
        load_checkpoint(path)
