"""A run folder whose own records (corpus_stats.json, log.jsonl, warm_start.json,
finetune_start.json, train_config.json) were damaged or edited by hand: a resume names the
file and what to do, or recovers in a defined way and says so; never a traceback, never a
resume that silently takes a wrong record."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from elmo.training.resume import ResumeMismatch
from elmo.training.trainer import train
from training_helpers import tiny_config, write_toy_corpus


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_corpus(tmp_path_factory.mktemp("toy"), n_train=120, n_heldout=30)


@pytest.fixture(scope="module")
def begun(tmp_path_factory, toy):
    """A run stopped after 2 of its 4 steps (a checkpoint of step 2), to copy and damage."""
    train_txt, _, vocab_txt = toy
    run = tmp_path_factory.mktemp("begun") / "run"
    train(tiny_config(run, train_txt, vocab_txt, max_steps=4, log_every=1), stop_after=2)
    return run


def _copy(begun, tmp_path, toy):
    """A copy of the begun run, and the config that resumes it."""
    train_txt, _, vocab_txt = toy
    run = tmp_path / "run"
    shutil.copytree(begun, run)
    return run, tiny_config(run, train_txt, vocab_txt, max_steps=4, log_every=1)


def _edit_stats(run, change) -> None:
    path = run / "corpus_stats.json"
    stats = json.loads(path.read_text(encoding="utf-8"))
    change(stats)
    path.write_text(json.dumps(stats), encoding="utf-8")


@pytest.mark.parametrize("damage", [
    lambda s: s.update(files=s["files"][0][0]),           # a string where the list was
    lambda s: s.update(files=[e[0] for e in s["files"]]),  # entries of paths alone
    lambda s: s.update(files={"train.txt": 1}),
])
def test_a_corpus_record_of_the_wrong_shape_is_named_not_taken_for_changed_text(begun, tmp_path, toy, damage):
    """(its "files" as a string was read a character at a time: the resume was refused as
    "the training text has changed (.: no longer there)", which sent the user after the text)"""
    run, cfg = _copy(begun, tmp_path, toy)
    _edit_stats(run, damage)
    stats = run / "corpus_stats.json"
    with pytest.raises(ResumeMismatch) as info:
        train(cfg)
    message = str(info.value)
    assert str(stats) in message and "has changed" not in message, message
    assert "delete it" in message and len(message.splitlines()) == 1


@pytest.mark.parametrize("content", ["", '{"sentences": 120, "tok', "[1, 2]", "not json"])
def test_a_corpus_record_that_is_not_one_is_named_on_resume(begun, tmp_path, toy, content):
    """(an empty, cut or foreign file was taken as no record, and the resume went on without
    checking that its text was the one it began on)"""
    run, cfg = _copy(begun, tmp_path, toy)
    (run / "corpus_stats.json").write_text(content, encoding="utf-8")
    with pytest.raises(ResumeMismatch, match=re.escape(str(run / "corpus_stats.json"))):
        train(cfg)


def test_a_deleted_corpus_record_resumes_and_says_what_it_cannot_check(begun, tmp_path, toy, capsys):
    run, cfg = _copy(begun, tmp_path, toy)
    (run / "corpus_stats.json").unlink()
    capsys.readouterr()
    assert train(cfg)["step"] == 4
    err = capsys.readouterr().err
    assert f"note: {run / 'corpus_stats.json'}" in err and "cannot be checked" in err, err
    assert json.loads((run / "corpus_stats.json").read_text(encoding="utf-8"))["files"]   # recorded again


@pytest.mark.parametrize("damage", [
    lambda s: s.update(tokens=str(s["tokens"])), lambda s: s.pop("sentences"),
    lambda s: s.update(tokens=float("nan")), lambda s: s.update(pieces=-1), lambda s: s.update(tokens=True),
])
def test_corpus_counts_that_are_no_counts_are_made_again(begun, tmp_path, toy, damage):
    """(a count as a string crashed with a TypeError, one missing with a KeyError, and a NaN
    count was taken: the epochs of the log were NaN)"""
    run, cfg = _copy(begun, tmp_path, toy)
    counts = {k: v for k, v in json.loads((run / "corpus_stats.json").read_text(encoding="utf-8")).items()
              if k != "files"}
    _edit_stats(run, damage)
    assert train(cfg)["step"] == 4
    stats = json.loads((run / "corpus_stats.json").read_text(encoding="utf-8"))
    assert {k: v for k, v in stats.items() if k != "files"} == counts


def test_another_runs_corpus_record_is_named_as_the_record_of_other_files(begun, tmp_path, toy):
    """(a corpus_stats.json copied in from a run on another file that is still there was
    refused as "the same file as another one named, read once now")"""
    run, cfg = _copy(begun, tmp_path, toy)
    _, held_txt, _ = toy
    _edit_stats(run, lambda s: s.update(files=[[str(held_txt), held_txt.stat().st_size, "ab"]]))
    with pytest.raises(ResumeMismatch) as info:
        train(cfg)
    message = str(info.value)
    assert "read once now" not in message and "not named now" in message, message
    assert str(run / "corpus_stats.json") in message


def _edit_log(run, change) -> None:
    path = run / "log.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    change(records)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


@pytest.mark.parametrize("step", ["1", None, 1.5, True, [1]])
def test_a_log_record_whose_step_is_no_step_is_named_on_resume(begun, tmp_path, toy, step):
    """(a step as a string or null ended the resume in a TypeError's traceback)"""
    run, cfg = _copy(begun, tmp_path, toy)
    _edit_log(run, lambda records: records[1].update(step=step))
    with pytest.raises(ValueError, match=re.escape(f"{run / 'log.jsonl'}: line 2: its step is "
                                                   f"{json.dumps(step)}, not a step number")):
        train(cfg)


@pytest.mark.parametrize("damage", ["emptied", "deleted"])
def test_a_log_that_lost_the_steps_before_the_checkpoint_says_so(begun, tmp_path, toy, capsys, damage):
    """(an emptied or deleted log.jsonl went on from the resume without a word: a learning
    curve that began at the checkpoint's step, as if the run had)"""
    run, cfg = _copy(begun, tmp_path, toy)
    log = run / "log.jsonl"
    log.write_text("", encoding="utf-8") if damage == "emptied" else log.unlink()
    capsys.readouterr()
    assert train(cfg)["step"] == 4
    assert f"note: {log}: holds no record of the steps up to 2" in capsys.readouterr().err
    assert [json.loads(line)["event"] for line in log.read_text(encoding="utf-8").splitlines()][0] == "resume"


def test_a_folder_where_the_log_belongs_is_named_on_resume(begun, tmp_path, toy):
    run, cfg = _copy(begun, tmp_path, toy)
    (run / "log.jsonl").unlink()
    (run / "log.jsonl").mkdir()
    with pytest.raises(ValueError, match=re.escape(f"{run / 'log.jsonl'}: cannot read the learning curve (")):
        train(cfg)


@pytest.fixture(scope="module")
def warm_begun(tmp_path_factory, toy):
    """A warm-started run (from a model trained 2 steps) stopped after 1 of its 3 steps."""
    train_txt, _, vocab_txt = toy
    where = tmp_path_factory.mktemp("warm")
    train(tiny_config(where / "base", train_txt, vocab_txt, max_steps=2))
    run = where / "run"
    train(_warm_config(run, train_txt, where / "base" / "model"), stop_after=1)
    return run


def _warm_config(run, train_txt, start):
    return tiny_config(run, train_txt, start / "vocab.txt", init_from=str(start), max_steps=3)


@pytest.mark.parametrize("change, problem", [
    (lambda r: r.pop("tokens_before"), 'its tokens_before is null, not a count of tokens'),
    (lambda r: r.update(tokens_before="96"), 'its tokens_before is "96", not a count of tokens'),
    (lambda r: r.update(tokens_before=float("nan")), "its tokens_before is NaN, not a count of tokens"),
    (lambda r: r.update(weights_sha256=12345), "its weights_sha256 is 12345, not a SHA-256"),
    (lambda r: r.update(adapted_on="text.txt"), 'its adapted_on is "text.txt", not a list'),
    # (another run's record: another start, other weights)
    (lambda r: r.update({"from": "/elsewhere/model", "weights_sha256": "0" * 64}),
     'it records a start from /elsewhere/model'),
])
def test_a_warm_start_record_edited_into_another_is_named_on_resume(warm_begun, tmp_path, toy, change, problem):
    """(a record without tokens_before ended the run in a KeyError's traceback at its export,
    after every step; a NaN there in "cannot convert float NaN to integer"; a number for the
    SHA-256 in a TypeError at once; adapted_on as a string was exported as a list of its
    letters, and another run's record gave the model that run's tokens_total)"""
    train_txt, _, _ = toy
    run = tmp_path / "run"
    shutil.copytree(warm_begun, run)
    path = run / "warm_start.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    change(record)
    path.write_text(json.dumps(record), encoding="utf-8")
    cfg = _warm_config(run, train_txt, warm_begun.parent / "base" / "model")
    with pytest.raises(ResumeMismatch) as info:
        train(cfg)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and problem in message and "delete it" in message, message
    assert not (run / "model").exists()   # (refused before any step)



@pytest.mark.parametrize("change", [
    lambda r: r.update(before="27.0"), lambda r: r.update(base_metadata=[]),
    lambda r: r["base_metadata"].update(adapted_on="x.txt"), lambda r: r["before"].pop("ppl"),
    lambda r: r["before"].update(ppl=float("nan")),
])
def test_a_finetune_start_record_edited_into_another_is_measured_again_and_said(tmp_path, toy, capsys, change):
    """(a string for "before" went into the report and the model's heldout_ppl_before as it
    was; base_metadata as a list ended in an AttributeError's traceback; its adapted_on as a
    string was taken a letter at a time)"""
    from elmo.training.finetune import finetune

    train_txt, _, vocab_txt = toy
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))
    task = tmp_path / "task.txt"
    task.write_text("".join(f"the happy farmer {v} the old river .\n" for v in ["sees", "likes", "helps"] * 10))
    first = finetune(tiny_config(tmp_path / "adapted", task, "", init_from=str(tmp_path / "base" / "model"),
                                 max_steps=2))
    path = tmp_path / "adapted" / "finetune_start.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    change(record)
    path.write_text(json.dumps(record), encoding="utf-8")
    capsys.readouterr()
    longer = finetune(tiny_config(tmp_path / "adapted", task, "", init_from=str(tmp_path / "base" / "model"),
                                  max_steps=4))
    assert f"note: {path}: " in capsys.readouterr().err
    assert longer["before"] == first["before"]   # (measured again on the unchanged start model)
    meta = json.loads((tmp_path / "adapted" / "model" / "metadata.json").read_text(encoding="utf-8"))
    assert meta["heldout_ppl_before"] == first["before"] and len(meta["adapted_on"]) == 1


@pytest.mark.parametrize("damage", ["deleted", "another run's"])
def test_a_lost_or_foreign_train_config_takes_the_checkpoints_accumulator_and_clip(begun, tmp_path, toy, capsys,
                                                                                   damage):
    """(a deleted train_config.json filled the unset accumulator and clip with the earlier
    defaults, 1.0 and 10, and the resume was refused as "setting clip_norm was 1.0, now 10.0
    (pass --allow-change clip-norm ...)": a change the user never made, and allowing it would
    have trained on with the wrong clip; another run's file did the same with its values)"""
    run, cfg = _copy(begun, tmp_path, toy)
    path = run / "train_config.json"
    stored = json.loads(path.read_text(encoding="utf-8"))
    if damage == "deleted":
        path.unlink()
    else:
        path.write_text(json.dumps({**stored, "adagrad_init": 0.5, "clip_norm": 3.0}), encoding="utf-8")
    capsys.readouterr()
    assert train(cfg)["step"] == 4
    assert f"note: {path}: " in capsys.readouterr().err
    from elmo.training.checkpoint import latest_checkpoint, load_checkpoint
    config = load_checkpoint(latest_checkpoint(run / "checkpoints"))["config"]
    assert (config["adagrad_init"], config["clip_norm"]) == (stored["adagrad_init"], stored["clip_norm"])
    again = json.loads(path.read_text(encoding="utf-8"))
    assert (again["adagrad_init"], again["clip_norm"]) == (stored["adagrad_init"], stored["clip_norm"])


@pytest.mark.parametrize("line, problem", [
    ('{"event": "train", "step": 1, "sampled_ppl": 3.0, "tokens": "nan"}', "'train' record without a number 'tokens'"),
    ('{"event": "train", "step": 1, "sampled_ppl": 3.0, "tokens": "inf"}', "'train' record without a number 'tokens'"),
    ('{"event": "eval", "step": 1, "epoch": "inf", "ppl": 3, "ppl_fwd": 3, "ppl_bwd": 3}',
     "'eval' record without a number 'epoch'"),
    ('{"event": "train", "step": 1, "sampled_ppl": "11.2", "tokens": 8}', "'train' record whose 'sampled_ppl' is "
                                                                           "\"11.2\", not a number"),
    ('{"event": "train", "step": 1, "train_ppl": {"a": 1}, "tokens": 8}', "'train' record whose 'train_ppl' is "
                                                                           "{\"a\": 1}, not a number"),
    ('{"event": "eval", "step": 1, "epoch": 1, "ppl": "3", "ppl_fwd": 3, "ppl_bwd": 3}',
     "'eval' record whose 'ppl' is \"3\", not a number"),
])
def test_plot_curve_names_a_figure_that_is_no_number(tmp_path, line, problem):
    """(a "nan" for the tokens passed the check, as a figure's gap, and ended in a TypeError's
    traceback at the axis; a figure edited into a string of digits or an object was drawn as a
    gap in the curve without a word)"""
    from elmo.training.curves import read_log
    log = tmp_path / "log.jsonl"
    log.write_text(f'{{"event": "start", "step": 0}}\n{line}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"log.jsonl: line 2: {problem}")):
        read_log(log)


def test_plot_curve_draws_the_non_finite_figures_a_run_writes(tmp_path):
    from elmo.training.curves import read_log
    log = tmp_path / "log.jsonl"
    log.write_text('{"event": "nonfinite", "step": 1, "loss": "nan", "grad_norm": "inf"}\n'
                   '{"event": "train", "step": 2, "sampled_ppl": "inf", "tokens": 8}\n'
                   '{"event": "eval", "step": 2, "epoch": 0.5, "ppl": "inf", "ppl_fwd": "inf", "ppl_bwd": 3}\n',
                   encoding="utf-8")
    assert len(read_log(log)) == 3


_RUN = {"task": "pos", "variant": "baseline", "seed": 1, "test": 0.5, "dev": 0.4, "seconds": 2.0,
        "metric": "accuracy", "elmo": None}


@pytest.mark.parametrize("change, problem", [
    (lambda r: r.update(seconds="3"), 'its seconds is "3", not a number'),
    (lambda r: r.pop("seconds"), "its seconds is null, not a number"),
    (lambda r: r.update(dev="0.5"), 'its dev is "0.5", not a number or null'),
    (lambda r: r.update(elmo="x"), 'its elmo is "x", not an object or null'),
    (lambda r: r.pop("elmo"), "it has no elmo"),
    (lambda r: r.update(metric=["accuracy"]), 'its metric is ["accuracy"], not a string'),
    (lambda r: r.update(task=["pos"]), 'its task is ["pos"], not a string'),
    (lambda r: r.update(seed="1"), 'its seed is "1", not a whole number'),
    (lambda r: r.update(other_metrics=[1]), "its other_metrics is [1], not an object of numbers"),
    (lambda r: r.update(extra_tests={"b": "0.5"}), 'its extra_tests is {"b": "0.5"}, not an object of numbers'),
    (lambda r: r.update(extra_tests_other_metrics={"b": 1}),
     'its extra_tests_other_metrics is {"b": 1}, not an object of objects of numbers'),
])
def test_a_results_run_edited_into_another_shape_is_named(tmp_path, change, problem):
    """(elmo experiment --resume, experiment-report and experiment-table ended in a TypeError,
    KeyError, AttributeError or IndexError traceback deep in the summary for each of these)"""
    from elmo.tasks.compare import CompareError, read_results, recomputed

    config = {"name": "x", "tasks": [{"task": "pos"}], "variants": [{"name": "baseline"}]}
    run = dict(_RUN)
    change(run)
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"config": config, "runs": [dict(_RUN, seed=0), run]}), encoding="utf-8")
    with pytest.raises(CompareError, match=re.escape(f"{path}: run 1 (")) as info:
        recomputed(read_results(path, need=("config", "runs")), path)   # (what the table and report read)
    assert problem in str(info.value), info.value
    path.write_text(json.dumps({"config": config, "runs": [dict(_RUN, seed=0), dict(_RUN)]}), encoding="utf-8")
    summary = recomputed(read_results(path, need=("config", "runs")), path)["summary"]
    assert summary[0]["seeds"] == [0, 1]   # (the shape asked for is what a whole run holds)


def test_a_results_files_bilms_that_are_no_object_are_named(tmp_path):
    """(--resume and experiment-report ended in an AttributeError's traceback)"""
    from elmo.tasks.compare import CompareError, read_results

    path = tmp_path / "results.json"
    path.write_text(json.dumps({"config": {"name": "x"}, "runs": [_RUN], "bilms": []}), encoding="utf-8")
    with pytest.raises(CompareError, match=re.escape(f"{path}: its bilms is [], not an object")):
        read_results(path)


def test_a_folder_where_the_runs_lock_file_belongs_is_named(begun, tmp_path, toy):
    """(it said "RUN: cannot write in RUN: Is a directory", naming neither the lock file nor
    what to do)"""
    from elmo.io import OutputError

    run, cfg = _copy(begun, tmp_path, toy)
    (run / "train.lock").mkdir()
    with pytest.raises(OutputError, match=re.escape(f"{run}: its lock file {run / 'train.lock'} is a folder")):
        train(cfg)


@pytest.mark.parametrize("folder", ["checkpoints", "model"])
def test_a_file_where_a_folder_of_the_run_belongs_is_refused_before_a_step(begun, tmp_path, toy, folder):
    """(a file for checkpoints/ hid the checkpoints: the run started again from scratch,
    emptied its log.jsonl, trained and then stopped with "cannot write checkpoint ...: File
    exists (the previous checkpoints are intact)"; a file for model/ was found at the export,
    after every step)"""
    from elmo.io import OutputError

    run, cfg = _copy(begun, tmp_path, toy)
    shutil.rmtree(run / folder, ignore_errors=True)
    (run / folder).write_text("x", encoding="utf-8")
    log = (run / "log.jsonl").read_text(encoding="utf-8")
    with pytest.raises(OutputError, match=re.escape(f"{run / folder}: is a file, but the ")):
        train(cfg)
    assert (run / "log.jsonl").read_text(encoding="utf-8") == log


def test_a_checkpoints_clip_that_is_no_number_is_not_taken_for_a_lost_train_config(begun, tmp_path, toy):
    """The checkpoint's accumulator and clip stand in for a lost train_config.json only where
    they are numbers: another value is named as the setting that differs, not trained with."""
    import torch
    from elmo.training.checkpoint import latest_checkpoint

    run, cfg = _copy(begun, tmp_path, toy)
    (run / "train_config.json").unlink()
    path = latest_checkpoint(run / "checkpoints")
    ckpt = torch.load(path, weights_only=True)
    ckpt["config"] = json.dumps({**json.loads(ckpt["config"]), "clip_norm": "x"})
    torch.save(ckpt, path)
    with pytest.raises(ResumeMismatch, match='setting clip_norm was "x", now 10.0'):
        train(cfg)


def test_a_finetune_run_folder_moved_elsewhere_resumes(tmp_path, toy):
    """finetune's text is a file of its run folder (adapt_train.txt): moved or copied to
    another path, the folder was refused as "setting train was [OLD/adapt_train.txt], now
    [NEW/adapt_train.txt]. Rerun with the settings it was started with", which no command could
    do, and its corpus record named the old path as text no longer there."""
    from elmo.training.finetune import finetune

    train_txt, _, vocab_txt = toy
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))
    task = tmp_path / "task.txt"
    task.write_text("".join(f"the happy farmer {v} the old river .\n" for v in ["sees", "likes", "helps"] * 10))
    start = str(tmp_path / "base" / "model")
    finetune(tiny_config(tmp_path / "first", task, "", init_from=start, max_steps=2))
    shutil.move(tmp_path / "first", tmp_path / "moved")
    assert finetune(tiny_config(tmp_path / "moved", task, "", init_from=start, max_steps=4))["steps"] == 4
    log = [json.loads(line) for line in (tmp_path / "moved" / "log.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["step"] for r in log if r["event"] == "resume"] == [2]   # (resumed, not begun again)


def test_a_warm_started_run_moved_with_its_start_model_resumes(tmp_path, toy, monkeypatch):
    """A project folder (the start model and the run, named relative to it) moved elsewhere:
    the same command resumes it. Its warm_start.json names the start by its old absolute path;
    the start's weights are the same (their SHA-256), so it is the run's own record, not another
    run's."""
    train_txt, _, vocab_txt = toy
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    train(tiny_config("base", train_txt, vocab_txt, max_steps=2))
    train(_warm_config("run", train_txt, Path("base") / "model"), stop_after=1)
    shutil.move(project, tmp_path / "moved")
    monkeypatch.chdir(tmp_path / "moved")
    assert train(_warm_config("run", train_txt, Path("base") / "model"))["steps"] == 3
