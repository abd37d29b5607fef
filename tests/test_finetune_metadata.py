"""What an adapted model's metadata says it was adapted on: the steps and tokens the run
actually trained (``--max-steps``, a time limit, a resume), not the size of the text."""
from __future__ import annotations

import functools
import json

import pytest

from elmo.cli import main
from elmo.commands.core import provenance
from elmo.data.corpus import count_tokens
from elmo.data.lm_batches import MAX_PIECE_LENGTH
from elmo.tasks.report import bilm_lines
from elmo.training.adaptation import trained_text
from elmo.training.checkpoint import latest_checkpoint, load_checkpoint
from elmo.training.export import read_metadata, write_metadata
from elmo.training.finetune import finetune
from elmo.training.trainer import epoch_positions, train
from training_helpers import tiny_config, write_toy_corpus


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A tiny trained model (two steps of the toy language) and a task text of 60 sentences."""
    folder = tmp_path_factory.mktemp("base")
    train_txt, _, vocab_txt = write_toy_corpus(folder)
    train(tiny_config(folder / "run", train_txt, vocab_txt, max_steps=2))
    task = folder / "task.txt"
    task.write_text("".join(f"the happy farmer {v} the old river .\n" for v in ["sees", "likes", "helps"] * 20))
    return folder / "run" / "model", task


def _last_logged(run, key):
    """The last learning-curve record's ``key`` (the trainer's own count, across sessions)."""
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    return [r for r in records if r.get("event") == "train"][-1][key]


def _epoch_positions(run, cfg):
    stats = count_tokens([str(run / "adapt_train.txt")], piece_length=MAX_PIECE_LENGTH)
    return epoch_positions(cfg, stats)


@pytest.mark.parametrize("layout", ["packed", "bucketed"])
def test_a_finetune_cut_short_by_max_steps_records_the_steps_and_tokens_it_trained(tmp_path, base, layout):
    """`elmo finetune --max-steps 3` recorded the text's 54 sentences and every word of them as
    trained, and an epoch: the model had taken 3 steps of a few rows. The record now keeps those
    as the plan and adds what the trainer counted."""
    model, task = base
    cfg = tiny_config(tmp_path / "adapted", task, "", init_from=str(model), max_steps=3, layout=layout)
    report = finetune(cfg)
    record = read_metadata(tmp_path / "adapted" / "model")["adapted_on"][-1]
    positions = _epoch_positions(tmp_path / "adapted", cfg)
    assert record["steps_trained"] == report["steps"] == 3
    assert record["tokens_trained"] == _last_logged(tmp_path / "adapted", "tokens") == report["tokens_trained"]
    if layout == "packed":   # (full batches; a bucketed row is a sentence's words and <S>)
        assert record["tokens_trained"] == 3 * report["batch_size"] * cfg.unroll_steps
    else:
        assert record["tokens_trained"] == 3 * report["batch_size"] * (8 + 1)
    assert record["tokens_trained"] < positions
    assert record["epochs_trained"] == pytest.approx(record["tokens_trained"] / positions, abs=1e-4)
    assert record["epochs_trained"] < 1
    assert record["sentences_planned"] == 54 and record["tokens_planned"] == 54 * 8
    assert record["steps_planned"] == 3 and "epochs_planned" not in record
    assert "sentences_trained" not in record   # (the plan is no longer named as trained)


def test_a_finetune_stopped_by_its_time_limit_records_the_step_it_took(tmp_path, base):
    """--max-seconds ends a run early (the step under way is its last): the record said a whole
    epoch of the text had been trained."""
    model, task = base
    cfg = tiny_config(tmp_path / "adapted", task, "", init_from=str(model), max_seconds=1e-9)   # (spent by the first step)
    finetune(cfg)
    record = read_metadata(tmp_path / "adapted" / "model")["adapted_on"][-1]
    assert record["steps_trained"] == 1 and record["epochs_planned"] == 1.0
    checkpoint = latest_checkpoint(tmp_path / "adapted" / "checkpoints")   # (the trainer's count)
    assert record["tokens_trained"] == load_checkpoint(checkpoint)["tokens"] == record["batch_size"] * 10
    assert record["epochs_trained"] < 1


def test_a_resumed_finetune_records_the_whole_run(tmp_path, base, monkeypatch):
    """A finetune killed after 2 of its 5 steps and run again resumes from its checkpoint; the
    record counts the 5 steps of both sessions, not only the 3 of the last one."""
    import elmo.training.finetune as ft
    model, task = base
    cfg = tiny_config(tmp_path / "adapted", task, "", init_from=str(model), max_steps=5)
    monkeypatch.setattr(ft, "train", functools.partial(train, stop_after=2))   # the first session stops
    with pytest.raises(FileNotFoundError):   # (no model exported: the adapted one is not there to load)
        finetune(cfg)
    monkeypatch.undo()
    report = finetune(cfg)
    record = read_metadata(tmp_path / "adapted" / "model")["adapted_on"][-1]
    assert record["steps_trained"] == 5
    assert record["tokens_trained"] == _last_logged(tmp_path / "adapted", "tokens") == 5 * report["batch_size"] * 10


def test_what_reads_the_record_shows_what_was_trained(tmp_path, base, capsys):
    """`elmo info` and an experiment's list of biLMs named the adapted texts alone (and the
    record's figures were the plan): they now say the steps and tokens trained. An older record,
    whose figures were the plan, is read as such."""
    model, task = base
    finetune(tiny_config(tmp_path / "adapted", task, "", init_from=str(model), max_steps=3))
    folder = tmp_path / "adapted" / "model"
    meta = read_metadata(folder)
    record = meta["adapted_on"][-1]
    text = f"3 steps, {record['tokens_trained']:,} tokens, {record['epochs_trained']:.2g} of an epoch; planned 3 steps"
    assert f"adapted on: {task.resolve()} ({text})" in provenance(folder)
    info = {"path": str(folder), "sha256": "0" * 64, "adapted_on": meta["adapted_on"], "metadata": meta}
    assert f"domain-adapted: `{task.resolve()}` ({text})" in bilm_lines({"adapted": info})[0]
    assert main(["info", str(folder)]) == 0
    assert f"adapted on: {task.resolve()} ({text})" in capsys.readouterr().out

    older = {**{k: v for k, v in record.items() if not k.endswith(("_trained", "_planned"))},
             "sentences_trained": 54, "tokens_trained": 432, "epochs": 1.0}
    assert trained_text(older) == "amount trained not recorded; planned 432 tokens, 1 epoch"
    write_metadata(folder, {**meta, "adapted_on": [older]})
    assert f"adapted on: {task.resolve()} (amount trained not recorded; planned 432 tokens, 1 epoch)" \
        in provenance(folder)


def test_a_warm_start_carries_the_trained_figures_over(tmp_path, base):
    """`elmo train --from ADAPTED` keeps the start's adapted_on records as they were: what that
    finetune trained, not this run's figures."""
    model, task = base
    finetune(tiny_config(tmp_path / "adapted", task, "", init_from=str(model), max_steps=3))
    adapted = read_metadata(tmp_path / "adapted" / "model")["adapted_on"]
    train(tiny_config(tmp_path / "warm", task, tmp_path / "adapted" / "model" / "vocab.txt", max_steps=4,
                      init_from=str(tmp_path / "adapted" / "model")))
    meta = read_metadata(tmp_path / "warm" / "model")
    assert meta["adapted_on"] == adapted and adapted[-1]["steps_trained"] == 3
    assert meta["steps"] == 4 and meta["tokens"] == _last_logged(tmp_path / "warm", "tokens")


def test_train_records_the_tokens_and_the_fraction_of_an_epoch_it_trained(tmp_path):
    """`elmo train`'s metadata says the tokens the run took (its counter), not the corpus's size;
    with --max-steps that is part of an epoch, which it now gives too (epochs_trained)."""
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy")
    cfg = tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=3)
    summary = train(cfg)
    meta = read_metadata(tmp_path / "run" / "model")
    corpus = count_tokens(cfg.train, piece_length=MAX_PIECE_LENGTH)
    assert meta["steps"] == 3 and meta["tokens"] == summary["tokens"] == 3 * 4 * 10 < corpus["tokens"]
    assert meta["epochs_trained"] == pytest.approx(meta["tokens"] / epoch_positions(cfg, corpus), abs=1e-4)


def test_a_run_ended_by_its_time_limit_logs_its_last_step(tmp_path):
    """The step after which --max-hours is spent becomes the run's last, but whether to log was
    decided before that was known: the steps since the last log line (here the only one, with
    --log-every 10) had no train line in log.jsonl, and the learning curve ended before the
    exported model."""
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "toy")
    summary = train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_seconds=1e-9))   # (spent by step 1)
    assert summary["step"] == summary["steps"] == 1 and summary["finished"]
    records = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    lines = [r for r in records if r.get("event") == "train"]
    assert [r["step"] for r in lines] == [1] and lines[0]["tokens"] == summary["tokens"] == 4 * 10
    assert "loss" in lines[0]
    assert [r["event"] for r in records if r.get("step") == 1][:2] == ["train", "time_limit"]


def test_the_command_ends_with_the_perplexities_in_words(tmp_path, base, capsys):
    """`elmo finetune` printed only its JSON summary: a reader had to find "ppl" in the
    "before" and "after" objects among losses and counts to see whether adapting helped, and
    the adapted model's folder under "model". Its last stderr line now says both, as `elmo
    info` words them; stdout stays the one JSON object scripts read."""
    model, task = base
    out = tmp_path / "adapted"
    assert main(["finetune", str(task), "--from", str(model), "-o", str(out), "--max-steps", "2",
                 "--no-progress", "--threads", "1"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    last = captured.err.strip().splitlines()[-1]
    assert last == (f"held-out perplexity {summary['before']['ppl']:,.1f} before adapting, "
                    f"{summary['after']['ppl']:,.1f} after ({summary['heldout_sentences']} sentences); "
                    f"the adapted model: {out / 'model'}")
