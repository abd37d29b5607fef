"""The learning-rate decay on a validation plateau (``elmo train --lr-decay``)."""
from __future__ import annotations

import dataclasses

import json

import pytest

from elmo.training.checkpoint import load_checkpoint
from elmo.training.schedule import PlateauDecay
from elmo.training.trainer import train
from training_helpers import tiny_config, write_toy_corpus


def test_plateau_decay_lowers_the_rate_only_without_enough_progress():
    s = PlateauDecay(factor=0.5, threshold=0.01, base_lr=1.0, lr=1.0)
    assert [s.update(p) for p in (100.0, 90.0, 89.5, 80.0, 85.0)] == [False, False, True, False, True]
    assert s.lr == 0.25 and s.decays == 2 and s.best == 80.0


def test_plateau_decay_of_one_never_lowers_the_rate():
    s = PlateauDecay(factor=1.0, threshold=0.01, base_lr=0.1, lr=0.1)
    for p in (10.0, 11.0, 12.0):
        s.update(p)
    assert s.lr == 0.1 and s.decays == 0 and s.best == 10.0


def test_resumed_schedule_keeps_its_rate_unless_the_configured_rate_changed():
    stored = PlateauDecay(0.5, 0.0, base_lr=1.0, lr=0.25, best=7.0, decays=2).state_dict()
    same = PlateauDecay(0.5, 0.0, base_lr=1.0, lr=1.0)
    same.load_state_dict(stored)
    assert (same.lr, same.best, same.decays) == (0.25, 7.0, 2)
    changed = PlateauDecay(0.5, 0.0, base_lr=0.1, lr=0.1)  # --lr 0.1 --allow-change lr
    changed.load_state_dict(stored)
    assert (changed.lr, changed.best) == (0.1, 7.0)


def test_a_restart_takes_the_configured_rate_again_and_keeps_the_best():
    stored = PlateauDecay(0.5, 0.0, base_lr=1.0, lr=0.25, best=7.0, decays=2).state_dict()
    restarted = PlateauDecay(0.5, 0.0, base_lr=1.0, lr=1.0)
    restarted.load_state_dict(stored, restart=True)
    assert (restarted.lr, restarted.best, restarted.decays) == (1.0, 7.0, 2)


def test_lr_restart_on_resume_starts_the_rate_again_at_the_same_lr(tmp_path):
    """A warm restart with the rate the run started from: --lr-restart, no --allow-change."""
    train_txt, held_txt, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=100, n_heldout=10)
    common = dict(eval_every=2, valid=[str(held_txt)], optimizer="adam", lr=0.01, lr_decay=0.5,
                  lr_decay_threshold=0.99, n_negative=8, checkpoint_every=2)
    train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=6, **common))
    decayed = load_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint-00000006.pt")
    assert decayed["optimizer"]["param_groups"][0]["lr"] < 0.01      # it decayed on the plateau
    kept = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=7, **common)
    train(kept)                                                       # a plain resume keeps it
    step7 = load_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint-00000007.pt")
    assert step7["optimizer"]["param_groups"][0]["lr"] == decayed["optimizer"]["param_groups"][0]["lr"]
    again = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=8, lr_restart=True, **common)
    train(again)
    restarted = load_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint-00000008.pt")
    assert restarted["optimizer"]["param_groups"][0]["lr"] == 0.01
    events = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    resumes = [e for e in events if e["event"] == "resume"]
    assert [(e["lr_restart"], e["lr"]) for e in resumes] == [(False, resumes[0]["lr_before"]), (True, 0.01)]


@pytest.mark.parametrize("factor, threshold", [(0.0, 0.01), (1.5, 0.01), (0.5, -0.1), (0.5, 1.0)])
def test_bad_decay_settings_are_refused(factor, threshold):
    with pytest.raises(ValueError, match="lr decay"):
        PlateauDecay(factor, threshold, base_lr=1.0, lr=1.0)


def test_decay_needs_validation_runs(tmp_path):
    train_txt, held_txt, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=50)
    with pytest.raises(ValueError, match="--lr-decay needs held-out text"):
        tiny_config(tmp_path / "run", train_txt, vocab_txt, lr_decay=0.5)
    with pytest.raises(ValueError, match=r"--lr-decay needs validation runs \(--eval-every STEPS\)"):
        tiny_config(tmp_path / "run", train_txt, vocab_txt, lr_decay=0.5, valid=[str(held_txt)])


def test_finetune_decays_on_a_plateau_of_its_held_out_text(tmp_path, capsys):
    """elmo finetune --lr-decay 0.5 --eval-every N was refused with "--lr-decay needs held-out
    text (--valid)", an option finetune does not have, though it always holds text out; now it
    validates on that text every N steps and decays the rate on a plateau."""
    from elmo.cli import main

    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=100, n_heldout=10)
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))
    out = tmp_path / "adapted"
    assert main(["finetune", str(train_txt), "--from", str(tmp_path / "base" / "model"), "-o", str(out),
                 "--max-steps", "6", "--eval-every", "2", "--lr-decay", "0.5", "--lr-decay-threshold", "0.99",
                 "--device", "cpu", "--no-progress"]) == 0, capsys.readouterr().err
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if r["event"] == "eval"] == [2, 4, 6]   # (6 is the final one)
    assert [(r["step"], r["lr"]) for r in log if r["event"] == "lr_decay"] == [(4, 0.1)]
    assert json.loads((out / "train_config.json").read_text())["valid"] == [str(out / "adapt_heldout.txt")]


def test_the_training_bar_is_drawn_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    """elmo train and finetune wrote their bar into a log file or pipe as well (an overnight
    run's log grew by a redrawn bar ten times a second); log.jsonl records the run either way."""
    import io
    import sys

    from elmo.cli import main

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=40, n_heldout=5)
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=1))
    argv = ["finetune", str(train_txt), "--from", str(tmp_path / "base" / "model"), "--max-steps", "1",
            "--device", "cpu"]
    assert main(argv + ["-o", str(tmp_path / "a")]) == 0
    assert "step/s" not in capsys.readouterr().err and (tmp_path / "a" / "log.jsonl").is_file()
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(argv + ["-o", str(tmp_path / "b")]) == 0
    assert "1/1" in terminal.getvalue()


def test_training_decays_on_plateau_and_resume_continues_the_schedule(tmp_path):
    """A threshold no validation run can meet (99% better than the best) decays at every
    validation run after the first; a run stopped between them and resumed ends with the same
    rate and parameters as one that never stopped."""
    train_txt, held_txt, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=100, n_heldout=10)
    common = dict(max_steps=12, eval_every=3, valid=[str(held_txt)], optimizer="adam", lr=0.01,
                  lr_decay=0.5, lr_decay_threshold=0.99, n_negative=8, checkpoint_every=4)
    train(tiny_config(tmp_path / "straight", train_txt, vocab_txt, **common))
    split = tiny_config(tmp_path / "split", train_txt, vocab_txt, **common)
    train(split, stop_after=7)
    train(split)
    for run in ("straight", "split"):
        log = [json.loads(line) for line in (tmp_path / run / "log.jsonl").read_text().splitlines()]
        decays = [(r["step"], r["lr"]) for r in log if r["event"] == "lr_decay"]
        assert decays == [(6, 0.005), (9, 0.0025)]  # validation at 3, 6, 9 (12 is the final one)
        final = load_checkpoint(tmp_path / run / "checkpoints" / "checkpoint-00000012.pt")
        assert final["optimizer"]["param_groups"][0]["lr"] == 0.0025
        assert final["lr_schedule"]["decays"] == 2
    a = load_checkpoint(tmp_path / "straight" / "checkpoints" / "checkpoint-00000012.pt")["model"]
    b = load_checkpoint(tmp_path / "split" / "checkpoints" / "checkpoint-00000012.pt")["model"]
    assert max(float((a[k] - b[k]).abs().max()) for k in a) <= 1e-6


def test_lr_restart_is_made_once_a_rerun_of_the_same_command_goes_on(tmp_path, capsys):
    """A session resumed with --lr-restart, killed after the restarted rate had decayed again
    and a checkpoint was written, then run again with the same command: it restarted the
    decayed rate once more (every rerun did). Now the restart is recorded in the schedule and
    the rerun goes on with it, saying so; a later phase with other settings restarts anew."""
    train_txt, held_txt, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=100, n_heldout=10)
    common = dict(eval_every=2, valid=[str(held_txt)], optimizer="adam", lr=0.01, lr_decay=0.5,
                  lr_decay_threshold=0.99, n_negative=8, checkpoint_every=2)
    run = tmp_path / "run"
    train(tiny_config(run, train_txt, vocab_txt, max_steps=6, **common))
    assert load_checkpoint(run / "checkpoints" / "checkpoint-00000006.pt")["lr_schedule"]["lr"] < 0.01
    restart = tiny_config(run, train_txt, vocab_txt, max_steps=12, lr_restart=True, **common)
    capsys.readouterr()
    train(restart, stop_after=4)                # restarted at 6, decayed at 8 and 10; "killed" at 10
    assert "learning rate restarted at 0.01" in capsys.readouterr().err
    at10 = load_checkpoint(run / "checkpoints" / "checkpoint-00000010.pt")["lr_schedule"]
    assert at10["lr"] == 0.0025
    # the same command again (how often it logs may change): the schedule goes on
    train(dataclasses.replace(restart, log_every=restart.log_every + 1))
    err = capsys.readouterr().err
    final = load_checkpoint(run / "checkpoints" / "checkpoint-00000012.pt")
    assert final["optimizer"]["param_groups"][0]["lr"] == final["lr_schedule"]["lr"] == 0.0025   # (0.01 again)
    assert at10["restart"]["step"] == 6 and at10["restart"]["lr"] == 0.01
    assert ("learning rate not restarted again: checkpoint-00000010.pt was written after this command's "
            "restart at step 6 (to 0.01); the schedule goes on at 0.0025") in err
    assert "learning rate restarted" not in err
    events = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [(e["step"], e["lr_restart"], e["lr"]) for e in events if e["event"] == "resume"] == [
        (6, True, 0.01), (10, False, 0.0025)]
    train(tiny_config(run, train_txt, vocab_txt, max_steps=14, lr_restart=True, **common))   # a new phase
    assert "learning rate restarted at 0.01 (it was 0.0025)" in capsys.readouterr().err
    assert load_checkpoint(run / "checkpoints" / "checkpoint-00000014.pt")["lr_schedule"]["restart"]["step"] == 12


def test_lr_restart_on_a_fresh_run_is_not_made_by_its_rerun(tmp_path, capsys):
    """A command with --lr-restart that starts a run (nothing to restart: it begins at --lr),
    killed after its rate had decayed and a checkpoint was written, then run again: the rerun
    restarted the decayed rate, though it is the same command (a script that always passes
    --lr-restart). The start counts as that command's restart now, and the schedule goes on."""
    train_txt, held_txt, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=100, n_heldout=10)
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=8, lr_restart=True, eval_every=2,
                      valid=[str(held_txt)], optimizer="adam", lr=0.01, lr_decay=0.5, lr_decay_threshold=0.99,
                      n_negative=8, checkpoint_every=2)
    train(cfg, stop_after=4)                    # decayed at 2 and 4; "killed" at 4
    at4 = load_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint-00000004.pt")["lr_schedule"]
    assert at4["lr"] < 0.01
    capsys.readouterr()
    train(cfg)
    assert "learning rate restarted" not in capsys.readouterr().err
    at6 = load_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint-00000006.pt")["lr_schedule"]
    assert at6["lr"] <= at4["lr"]
