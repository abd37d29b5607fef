"""Exact resume: a run that stops (or is killed) and resumes ends with the same parameters as
a run that never stopped."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elmo.cli import main
from elmo.training.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint
from elmo.training.resume import ResumeMismatch
from elmo.training.trainer import train
from elmo.vocab import Vocabulary
from training_helpers import tiny_config, write_toy_corpus

ROOT = Path(__file__).resolve().parents[1]


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def _final_params(run: Path, step: int) -> dict:
    return load_checkpoint(run / "checkpoints" / f"checkpoint-{step:08d}.pt")["model"]


def test_stop_and_resume_in_process_is_exact(tmp_path):
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=200)
    common = dict(max_steps=24, checkpoint_every=5, dropout=0.2, n_negative=8, keep_checkpoints=2,
                  state_reset_every=4)
    train(tiny_config(tmp_path / "straight", train_txt, vocab_txt, **common))
    split = tiny_config(tmp_path / "split", train_txt, vocab_txt, **common)
    partial = train(split, stop_after=7)  # stops between checkpoints: saves step 7 too
    assert partial["step"] == 7 and not partial["finished"]
    assert train(split)["finished"]
    assert _max_diff(_final_params(tmp_path / "straight", 24), _final_params(tmp_path / "split", 24)) <= 1e-6
    assert len(list_checkpoints(tmp_path / "split" / "checkpoints")) == 2  # the last K kept


def _command(run: Path, train_txt: Path, vocab_txt: Path, steps: int):
    return [sys.executable, "-m", "elmo", "train", str(train_txt), "--vocab", str(vocab_txt), "-o", str(run),
            "--dim", "24", "--projection-dim", "12", "--filters", "1:8,2:8,3:8", "--char-dim", "4",
            "--batch-size", "4", "--unroll-steps", "8", "--max-steps", str(steps), "--negatives", "8",
            "--dropout", "0.2", "--checkpoint-every", "3", "--keep-checkpoints", "2", "--log-every", "1",
            "--threads", "1", "--no-progress", "--device", "cpu"]


def test_killed_process_resumes_to_the_same_parameters(tmp_path):
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=300)
    steps = 150
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = tmp_path / "killed"
    proc = subprocess.Popen(_command(run, train_txt, vocab_txt, steps), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        found = latest_checkpoint(run / "checkpoints")
        if found is not None and int(found.stem.split("-")[1]) >= 6:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)  # a real kill: no handler, no cleanup
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    killed_at = int(latest_checkpoint(run / "checkpoints").stem.split("-")[1])
    assert killed_at < steps

    resumed = subprocess.Popen(_command(run, train_txt, vocab_txt, steps), env=env, stdout=subprocess.DEVNULL,
                               cwd=ROOT)
    try:   # the run that never stopped, in this process meanwhile (the same command line)
        assert main(_command(tmp_path / "straight", train_txt, vocab_txt, steps)[3:]) == 0
        assert resumed.wait(timeout=300) == 0
    finally:
        resumed.kill()   # (a no-op once it has ended)
        resumed.wait()
    diff = _max_diff(_final_params(tmp_path / "straight", steps), _final_params(run, steps))
    assert diff <= 1e-6, diff
    # The learning curve holds each step once, in order, across the kill.
    steps_logged = [json.loads(line)["step"] for line in (run / "log.jsonl").read_text().splitlines()
                    if json.loads(line)["event"] == "train"]
    assert steps_logged == list(range(1, steps + 1))


def test_resume_applies_the_configured_learning_rate(tmp_path):
    """Lowering --lr on resume (a manual decay) takes effect when asked for with
    --allow-change lr: the config wins over the learning rate stored with the optimizer state."""
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=100)
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=6, optimizer="adam", lr=0.01)
    train(cfg, stop_after=3)
    cfg.lr = 0.001
    with pytest.raises(ResumeMismatch, match="setting lr was 0.01, now 0.001"):
        train(cfg)  # a changed learning rate must be asked for
    cfg.allow_change = ["lr"]
    train(cfg)
    final = load_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint-00000006.pt")
    assert final["optimizer"]["param_groups"][0]["lr"] == 0.001
    resume = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()
              if json.loads(line)["event"] == "resume"]
    assert resume == [{"event": "resume", "step": 3, "from": "checkpoint-00000003.pt", "lr": 0.001,
                       "lr_before": 0.01, "lr_restart": False, "state_reset_every": 0}]


def test_a_resumed_run_logs_the_same_learning_curve(tmp_path):
    """(a log line due after a resume averaged only the steps of the new session: killed at
    step 5 and resumed from checkpoint 3, the line of step 4 held step 4's loss alone)"""
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=100)
    common = dict(max_steps=8, log_every=4, checkpoint_every=3, dropout=0.1, n_negative=8)
    train(tiny_config(tmp_path / "straight", train_txt, vocab_txt, **common))
    run = tmp_path / "killed"
    train(tiny_config(run, train_txt, vocab_txt, **common), stop_after=5)
    (run / "checkpoints" / "checkpoint-00000005.pt").unlink()   # as if killed after step 5
    train(tiny_config(run, train_txt, vocab_txt, **common))

    def curve(folder):
        records = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
        return [r for r in records if r["event"] == "train"]
    straight, resumed = curve(tmp_path / "straight"), curve(run)
    assert [r["step"] for r in resumed] == [r["step"] for r in straight] == [4, 8]
    for key in ("loss", "grad_norm", "tokens"):
        assert [r[key] for r in resumed] == pytest.approx([r[key] for r in straight], abs=1e-4), key


def test_an_older_bucketed_checkpoints_window_is_left_out_of_the_next_loss_and_said(tmp_path):
    """A checkpoint written before the logged loss was weighted by targets holds the sum of its
    window's step means, not their target counts. Resumed in the bucketed layout, each of its
    steps weighed one target against a new step's dozens: the next log line was nearly the new
    steps' mean, unmarked. Now that line's loss is the new steps' mean, marked as such."""
    import torch
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=100)
    common = dict(layout="bucketed", max_steps=4, checkpoint_every=2, dropout=0.0, n_negative=8, export=False)
    train(tiny_config(tmp_path / "straight", train_txt, vocab_txt, log_every=2, **common))
    run = tmp_path / "old"
    cfg = tiny_config(run, train_txt, vocab_txt, log_every=4, **common)
    train(cfg, stop_after=2)
    path = run / "checkpoints" / "checkpoint-00000002.pt"
    checkpoint = torch.load(path, weights_only=True)
    for rank in checkpoint["ranks"]:   # the earlier form: the steps' means summed, no weight
        window = rank["log_window"]
        window["loss"] = window["loss"] / window.pop("weight") * window["n"]
    torch.save(checkpoint, path)
    train(cfg, stop_after=1)   # (its checkpoint of step 3 keeps the mark for the next session)
    train(cfg)

    def curve(folder):
        records = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
        return {r["step"]: r for r in records if r["event"] == "train"}
    straight, resumed = curve(tmp_path / "straight"), curve(run)
    assert list(resumed) == [4] and "loss_since_resume" not in straight[4]
    assert resumed[4]["loss_since_resume"] is True
    assert resumed[4]["loss"] == pytest.approx(straight[4]["loss"], abs=1e-4)   # (steps 3 and 4)


def test_sigterm_checkpoints_the_step_under_way_and_resumes_exactly(tmp_path, monkeypatch):
    """(SIGTERM, as a scheduler preempting a job sends, ended the process at once: every step
    since the last checkpoint was lost)"""
    from elmo.training.stop import TrainingStopped
    from elmo.training.trainer import TrainingRun
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=200)
    common = dict(max_steps=12, checkpoint_every=5, dropout=0.2, n_negative=8, log_every=1)
    train(tiny_config(tmp_path / "straight", train_txt, vocab_txt, **common))

    step = TrainingRun.step

    def step_then_signal(self):
        step(self)
        if self.step_no == 7:       # between checkpoints 5 and 10
            signal.raise_signal(signal.SIGTERM)
    monkeypatch.setattr(TrainingRun, "step", step_then_signal)
    before = signal.getsignal(signal.SIGTERM)
    run = tmp_path / "stopped"
    with pytest.raises(TrainingStopped, match="stopped by SIGTERM at step 7 of 12") as stopped:
        train(tiny_config(run, train_txt, vocab_txt, **common))
    assert stopped.value.exit_status == 143 and not stopped.value.summary["finished"]
    assert signal.getsignal(signal.SIGTERM) is before          # the handler is put back
    assert latest_checkpoint(run / "checkpoints").name == "checkpoint-00000007.pt"
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert records[-1] == {"event": "stopped", "step": 7, "signal": "SIGTERM"}
    assert not (run / "model").exists()

    monkeypatch.setattr(TrainingRun, "step", step)
    assert train(tiny_config(run, train_txt, vocab_txt, **common))["finished"]
    assert _max_diff(_final_params(tmp_path / "straight", 12), _final_params(run, 12)) <= 1e-6
    trained = [r["step"] for r in map(json.loads, (run / "log.jsonl").read_text().splitlines())
               if r["event"] == "train"]
    assert trained == list(range(1, 13))


def test_a_second_ctrl_c_while_stopping_interrupts_at_once():
    from elmo.training.stop import StopRequests
    before = signal.getsignal(signal.SIGINT)
    with StopRequests() as stops:
        signal.raise_signal(signal.SIGINT)
        assert stops.received == "SIGINT"                   # the first one is recorded
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)              # the second is Python's own again
    assert signal.getsignal(signal.SIGINT) is before


def test_an_ignored_signal_stays_ignored():
    from elmo.training.stop import StopRequests
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)   # as under nohup
    try:
        with StopRequests() as stops:
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            signal.raise_signal(signal.SIGTERM)
            assert not stops.requested
    finally:
        signal.signal(signal.SIGTERM, before)


def test_elmo_train_stopped_by_sigterm_says_so_and_exits_143(tmp_path):
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=300)
    run = tmp_path / "run"
    command = _command(run, train_txt, vocab_txt, 100_000)
    command[command.index("--checkpoint-every") + 1] = "100000"     # no checkpoint but the stop's
    proc = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    log = run / "log.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and log.read_text().count('"event": "train"') >= 2:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    stopped = json.loads(log.read_text().splitlines()[-1])
    assert stopped["event"] == "stopped" and stopped["signal"] == "SIGTERM"
    assert latest_checkpoint(run / "checkpoints").name == f"checkpoint-{stopped['step']:08d}.pt"
    assert f"stopped by SIGTERM at step {stopped['step']} of 100000" in err
    assert "run the same command again to resume" in err


def test_an_export_cut_short_leaves_the_earlier_model_folder_whole(tmp_path, monkeypatch):
    """A run extended by --max-steps and killed while exporting left model/ with the new
    weights beside the softmax and metadata of the earlier export, and it loaded as a model."""
    import h5py
    import torch

    from elmo import ElmoOptions
    from elmo.training import export as export_mod
    from elmo.training.model import LanguageModel
    from elmo.vocab import Vocabulary
    from training_helpers import tiny_model_options

    _, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=50)
    vocab = Vocabulary.load(vocab_txt)

    def model(seed):
        torch.manual_seed(seed)
        return LanguageModel(ElmoOptions.from_dict(tiny_model_options()), len(vocab), vocab.bos, vocab.eos, 0.0)

    def weights(folder):
        found = {}
        with h5py.File(folder / "weights.hdf5", "r") as f:
            f.visititems(lambda name, obj: found.__setitem__(name, obj[()].tobytes())
                         if isinstance(obj, h5py.Dataset) else None)
        return found

    folder = export_mod.export_model(model(0), vocab, tmp_path / "model", {"steps": 12})
    before = weights(folder)

    def killed(*_args, **_kwargs):   # the last file of an export
        raise KeyboardInterrupt
    monkeypatch.setattr(export_mod, "atomic_write_text", killed)
    with pytest.raises(KeyboardInterrupt):
        export_mod.export_model(model(1), vocab, folder, {"steps": 15})
    monkeypatch.undo()
    assert weights(folder) == before and json.loads((folder / "metadata.json").read_text())["steps"] == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "toy"]
    # what a SIGKILL leaves (a half-written FOLDER.partial) is replaced by the next export
    (tmp_path / "model.partial").mkdir()
    (tmp_path / "model.partial" / "weights.hdf5").write_bytes(b"half")
    export_mod.export_model(model(1), vocab, folder, {"steps": 15})
    assert weights(folder) != before and json.loads((folder / "metadata.json").read_text())["steps"] == 15
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "toy"]


def test_resume_on_another_device_keeps_that_devices_optimizer_implementation(tmp_path, monkeypatch):
    """The CPU's Adagrad is fused (optim.adagrad); a GPU run's is not. load_state_dict took
    ``fused`` from the checkpoint, so a CPU run resumed on a GPU asked for the fused kernel
    there (PyTorch versions without a CUDA one refuse it at the first step). Simulated on the
    CPU: the resumed run builds the optimizer a GPU run builds, and must keep it."""
    import torch

    import elmo.training.optim as optim
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=120)
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4, checkpoint_every=2, n_negative=8)
    train(cfg, stop_after=2)
    saved = load_checkpoint(latest_checkpoint(tmp_path / "run" / "checkpoints"))["optimizer"]
    assert saved["param_groups"][0]["fused"] is True  # written by the CPU's fused Adagrad

    seen = []

    def gpu_like_adagrad(params, lr, initial_accumulator_value):
        opt = torch.optim.Adagrad(list(params), lr=lr, initial_accumulator_value=initial_accumulator_value)
        seen.append(opt)
        return opt

    monkeypatch.setattr(optim, "adagrad", gpu_like_adagrad)   # where build_optimizer looks it up
    real_step = torch.optim.Adagrad.step

    def step(self, *args, **kwargs):
        assert all(not g.get("fused") for g in self.param_groups), "the checkpoint's fused flag came back"
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adagrad, "step", step)
    assert train(cfg)["finished"]
    assert seen and all(not g.get("fused") for g in seen[-1].param_groups)
    assert seen[-1].state  # the checkpoint's accumulators were loaded


def test_load_optimizer_state_keeps_the_implementation_both_ways():
    """A GPU run's checkpoint (not fused) resumed on the CPU gets the CPU's fused kernel back."""
    import torch

    from elmo.training.optim import adagrad, load_optimizer_state
    params = [torch.nn.Parameter(torch.randn(4))]
    plain = torch.optim.Adagrad(params, lr=0.2, initial_accumulator_value=0.1)
    params[0].grad = torch.ones(4)
    plain.step()
    on_cpu = adagrad([torch.nn.Parameter(torch.randn(4))], 0.2, 0.1)
    load_optimizer_state(on_cpu, plain.state_dict())
    assert on_cpu.param_groups[0]["fused"] is True
    assert torch.equal(next(iter(on_cpu.state.values()))["sum"], plain.state[params[0]]["sum"])


def _old_stats(run):
    """corpus_stats.json as a version before the bucketed layout's pieces wrote it."""
    path = run / "corpus_stats.json"
    stats = json.loads(path.read_text())
    del stats["pieces"]
    path.write_text(json.dumps(stats) + "\n")


def test_a_bucketed_run_begun_before_pieces_keeps_its_step_count_on_resume(tmp_path, capsys):
    """A bucketed run begun when an epoch counted sentences (its corpus_stats.json without
    'pieces') took the pieces' larger count on resume: a run of 250-word sentences planned
    for 3 steps went on to 6 without a word, and a finished one trained again. It keeps the
    steps it began with (in every later session too) and says so; a new run counts pieces."""
    from training_helpers import tiny_model_options
    sentences = [[f"w{(i * 7 + k) % 9}" for k in range(250)] for i in range(6)]
    (tmp_path / "t.txt").write_text("".join(" ".join(s) + "\n" for s in sentences))
    Vocabulary.from_counts({f"w{k}": 1 for k in range(9)}).save(tmp_path / "v.txt")
    run = tmp_path / "run"
    cfg = tiny_config(run, tmp_path / "t.txt", tmp_path / "v.txt", layout="bucketed", batch_size=2,
                      export=False, checkpoint_every=1, options=tiny_model_options(dim=8, proj=4))
    assert train(cfg, stop_after=1)["steps"] == 6             # 12 pieces, 2 a step
    _old_stats(run)                                            # as if begun by the earlier version
    assert train(cfg, stop_after=1)["steps"] == 3             # 6 sentences, 2 a step
    assert "3 steps" in capsys.readouterr().err
    summary = train(cfg)                                       # a later session: still 3
    assert (summary["steps"], summary["step"], summary["finished"]) == (3, 3, True)
    assert train(cfg)["step"] == 3                             # finished: nothing more


def _stored_recipe(run: Path) -> dict:
    config = load_checkpoint(latest_checkpoint(run / "checkpoints"))["config"]
    return {k: config[k] for k in ("adagrad_init", "clip_norm")}


@pytest.mark.parametrize("optimizer, unroll, expected", [
    ("adagrad", 10, {"adagrad_init": 0.01, "clip_norm": 1.0}),     # 1/T^2 and 10/T
    ("adagrad", 20, {"adagrad_init": 0.0025, "clip_norm": 0.5}),
    ("adam", 10, {"adagrad_init": None, "clip_norm": 10.0}),
])
def test_a_new_run_takes_the_accumulator_and_clip_of_the_originals_updates(tmp_path, optimizer, unroll, expected):
    """The original's accumulator 1.0 and clip 10 act on unroll_steps times our gradient; taken
    as they were, Adagrad's steps were up to T times smaller than the original's. A new run
    without them set takes 1/T^2 and 10/T (Adam, whose steps do not follow the scale, 10)."""
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=60)
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=2, unroll_steps=unroll, optimizer=optimizer)
    assert cfg.adagrad_init is None and cfg.clip_norm is None    # (unset until the run resolves them)
    train(cfg, stop_after=1)
    assert _stored_recipe(tmp_path / "run") == expected
    if optimizer == "adagrad":   # the accumulator after one step: the initial value + g^2 (>= it)
        sums = load_checkpoint(latest_checkpoint(tmp_path / "run" / "checkpoints"))["optimizer"]["state"]
        assert min(float(s["sum"].min()) for s in sums.values()) == pytest.approx(expected["adagrad_init"])


@pytest.mark.parametrize("without_config_file", [False, True])
def test_a_run_begun_with_the_earlier_defaults_resumes_with_them(tmp_path, without_config_file):
    """A run begun when the defaults were 1.0 and 10 (saved as values) is resumed by the same
    command, which now leaves them unset: it keeps the values it was trained with rather than
    being refused as changed (or silently taking the new ones). A run folder without
    train_config.json (a version before it) takes the earlier defaults too."""
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=60)
    earlier = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4, adagrad_init=1.0, clip_norm=10.0)
    train(earlier, stop_after=2)
    if without_config_file:
        (tmp_path / "run" / "train_config.json").unlink()
    train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4))
    assert load_checkpoint(latest_checkpoint(tmp_path / "run" / "checkpoints"))["step"] == 4
    assert _stored_recipe(tmp_path / "run") == {"adagrad_init": 1.0, "clip_norm": 10.0}
    # a value given on resume is compared as before
    with pytest.raises(ResumeMismatch, match="setting clip_norm was 10.0, now 0.5"):
        train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=6, clip_norm=0.5))


@pytest.mark.parametrize("given, expected", [
    ({}, {"adagrad_init": 1.0, "clip_norm": 10.0}),
    ({"adagrad_init": 0.0025, "clip_norm": 0.5}, {"adagrad_init": 0.0025, "clip_norm": 0.5}),
])
def test_a_warm_start_keeps_the_gentler_accumulator_and_clip(tmp_path, given, expected):
    """A warm start's optimizer starts afresh on trained weights: with the from-scratch 1/T^2
    its first steps are about lr for every weight with a gradient (finetuning the default model
    on 100 lines of Brown made its held-out perplexity 299 from 176). It keeps 1.0 and 10 unless
    they are given."""
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=60)
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))
    base = tmp_path / "base" / "model"
    train(tiny_config(tmp_path / "warm", train_txt, base / "vocab.txt", init_from=str(base), max_steps=2, **given),
          stop_after=1)
    assert _stored_recipe(tmp_path / "warm") == expected


def test_a_finetune_resumed_with_another_number_of_processes_is_told_so(tmp_path, capsys):
    """(a finetune begun by 2 processes and resumed by 1 was refused with "setting batch_size
    was 3, now 6. Rerun with the settings it was started with": finetune fits its batch to the
    processes, so no flag mends that; the number of processes, the real cause, was not said)"""
    import torch
    from elmo.cli import main
    from elmo.training.finetune import fitted_batch_size
    from elmo.training.config import TrainConfig

    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=300)
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=1))
    run = tmp_path / "adapted"
    command = ["finetune", str(train_txt), "--from", str(tmp_path / "base" / "model"), "-o", str(run),
               "--max-steps", "2", "--no-progress", "--device", "cpu"]
    assert main(command) == 0
    # the checkpoint as two processes would have written it: a position per rank, and the
    # batch finetune fits to two
    path = latest_checkpoint(run / "checkpoints")
    ckpt = torch.load(path, weights_only=True)
    config = json.loads(ckpt["config"])
    sentences = [line.split() for line in train_txt.read_text().splitlines()]
    sentences = [s for i, s in enumerate(sentences) if (i + 1) % 10 != 0]   # (every 10th held out)
    two = fitted_batch_size(TrainConfig(**{**config, "batch_size": 128}), sentences, world_size=2)
    assert two != config["batch_size"]   # (else this test would not tell the messages apart)
    ckpt.update(ranks=ckpt["ranks"] * 2, config=json.dumps({**config, "batch_size": two}))
    torch.save(ckpt, path)
    capsys.readouterr()
    assert main([*command[:-5], "--max-steps", "4", "--no-progress", "--device", "cpu"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "written by 2 processes, and this run has 1; resume it with 2" in err[0], err


def test_a_hand_edited_recipe_value_that_is_no_number_is_one_error_naming_the_file(tmp_path):
    """A resumed run fills its unset accumulator and clip from train_config.json: a value there
    that is no number ("x") failed deep in the config's checks ('>' between str and int)."""
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=60)
    train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4), stop_after=2)
    stored_file = tmp_path / "run" / "train_config.json"
    stored = json.loads(stored_file.read_text(encoding="utf-8"))
    stored["clip_norm"] = "x"
    stored_file.write_text(json.dumps(stored), encoding="utf-8")
    with pytest.raises(ValueError, match=r"train_config.json: clip_norm is \"x\", not a number; give --clip-norm"):
        train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4))


@pytest.mark.parametrize("damage, says", [(b'{"lr": 0.2,\n', "not JSON (Expecting"), (b"[1, 2]", "holds no training settings")])
def test_a_damaged_train_config_of_a_checkpoint_without_its_settings_is_one_error_naming_it(tmp_path, damage, says):
    """A checkpoint written before it held the run's settings resumes against train_config.json:
    a damaged one was a bare JSONDecodeError (no file named), a list an AttributeError."""
    import torch
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy", n_train=60)
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=4, adagrad_init=0.1, clip_norm=1.0)
    train(cfg, stop_after=2)
    path = latest_checkpoint(tmp_path / "run" / "checkpoints")
    ckpt = torch.load(path, weights_only=True)
    del ckpt["config"]
    torch.save(ckpt, path)
    stored_file = tmp_path / "run" / "train_config.json"
    stored_file.write_bytes(damage)
    with pytest.raises(ResumeMismatch, match=re.escape(f"{stored_file}: {says}")):
        train(cfg)
