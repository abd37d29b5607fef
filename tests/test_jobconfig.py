"""Job configurations (elmo.jobconfig): the command line made from a dataclass, --config,
--set and --print-config, in that order of precedence."""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import pytest

from elmo.cli import main
from elmo.config import ConfigError
from elmo.jobconfig import add_arguments, add_config_arguments, build, from_args, load, save, setting, to_dict
from elmo.training.config import TrainConfig


@dataclass
class Job:
    name: str = setting(help="the job's name")
    size: int = setting(8, help="a size")
    rate: float = setting(0.5, help="a rate")
    seconds: Optional[float] = setting(None, flag="--hours", scale=3600.0, help="time limit")
    fast: bool = setting(False, help="go fast")
    shuffle: bool = setting(True, help="keep the file order")
    files: List[str] = setting(default_factory=list, help="files")
    nested: Dict[str, Any] = field(default_factory=dict)


def parse(argv):
    p = argparse.ArgumentParser()
    add_arguments(p, Job)
    add_config_arguments(p, example="lr=0.01")
    return p.parse_args(argv)


def test_options_come_from_the_fields_with_their_defaults():
    p = argparse.ArgumentParser()
    add_arguments(p, Job)
    text = p.format_help()
    assert "--size SIZE" in text and "(default 8)" in text and "--hours HOURS" in text
    assert "--no-shuffle" in text and "--fast" in text and "--nested" not in text
    assert from_args(Job, parse(["--name", "a"])) == Job(name="a")


def test_precedence_defaults_then_file_then_options_then_set(tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"name": "from-file", "size": 3, "rate": 0.25}))
    cfg = from_args(Job, parse(["--config", str(path), "--size", "4", "--hours", "0.5", "--no-shuffle",
                                "--set", "rate=1", "--set", "nested.a.b=[1, 2]", "--set", "files=[\"x\"]"]))
    assert cfg == Job(name="from-file", size=4, rate=1.0, seconds=1800.0, shuffle=False, files=["x"],
                      nested={"a": {"b": [1, 2]}})
    assert isinstance(cfg.rate, float)


def test_bad_settings_are_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="unknown setting sise"):
        from_args(Job, parse(["--name", "a", "--set", "sise=3"]))
    with pytest.raises(ConfigError, match="setting size: expected int, got 'big'"):
        from_args(Job, parse(["--name", "a", "--set", "size=big"]))
    with pytest.raises(ConfigError, match="missing setting name"):
        from_args(Job, parse([]))
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        from_args(Job, parse(["--name", "a", "--set", "size"]))
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(ConfigError, match="a config is a JSON object"):
        load(Job, tmp_path / "list.json")
    with pytest.raises(ConfigError, match="not a JSON config"):
        (tmp_path / "broken.json").write_text("{")
        load(Job, tmp_path / "broken.json")
    (tmp_path / "twice.json").write_text('{"name": "a", "size": 2, "size": 3}')   # (size 3, silently)
    with pytest.raises(ConfigError, match="twice.json: not a JSON config \\(the key 'size' appears twice in one object\\)"):
        load(Job, tmp_path / "twice.json")


def test_save_and_load_round_trip(tmp_path):
    cfg = build(Job, {"name": "a", "size": 2, "files": ["f"], "nested": {"k": 1}})
    assert load(Job, save(cfg, tmp_path / "job.json")) == cfg


@dataclass
class Mix:
    lam: float = field(default=0.1, metadata={"key": "lambda"})   # a Python keyword in the file
    layers: str = "all"


def test_a_field_is_read_and_written_under_its_file_key(tmp_path):
    assert build(Mix, {"lambda": 1}) == Mix(lam=1.0)
    assert to_dict(Mix(lam=2.0)) == {"lambda": 2.0, "layers": "all"}
    assert load(Mix, save(Mix(lam=3.0), tmp_path / "mix.json")) == Mix(lam=3.0)
    with pytest.raises(ConfigError, match=r"^task pos: unknown mix settings: lam \(known: lambda, layers\)$"):
        build(Mix, {"lam": 1}, source="task pos", block="mix")
    with pytest.raises(ConfigError, match="^task pos: mix: setting lambda: expected float, got 'big'$"):
        build(Mix, {"lambda": "big"}, source="task pos", block="mix")
    with pytest.raises(ConfigError, match="^mix: expected an object of settings, got 3$"):
        build(Mix, 3, source="", block="mix")


def test_train_print_config_feeds_back_as_config(tmp_path, capsys):
    argv = ["train", "corpus.txt", "--vocab", "v.txt", "-o", str(tmp_path / "run"), "--optimizer", "adam",
            "--max-hours", "2", "--negatives", "100", "--dim", "32", "--set", "options.lstm.cell_clip=5"]
    assert main(argv + ["--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["lr"] == 0.001 and printed["max_seconds"] == 7200.0 and printed["n_negative"] == 100
    assert printed["options"]["lstm"]["dim"] == 32 and printed["options"]["lstm"]["cell_clip"] == 5
    (tmp_path / "train.json").write_text(json.dumps(printed))
    assert main(["train", "corpus.txt", "--config", str(tmp_path / "train.json"), "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out) == printed
    # an option given on the command line wins over the file
    assert main(["train", "corpus.txt", "--config", str(tmp_path / "train.json"), "--lr", "0.01",
                 "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["lr"] == 0.01
    assert TrainConfig.from_json(json.dumps(printed)) == build(TrainConfig, printed)


def test_train_reads_its_config_file_once(tmp_path, capsys, monkeypatch):
    import elmo.jobconfig as jobconfig

    reads = []
    read = jobconfig.read_json
    monkeypatch.setattr(jobconfig, "read_json", lambda path: reads.append(path) or read(path))
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"vocab": "v.txt", "output": str(tmp_path / "run"), "lr": 0.5}))
    assert main(["train", "corpus.txt", "--config", str(path), "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["lr"] == 0.5 and reads == [str(path)]


def test_train_print_config_shows_the_accumulator_and_clip_the_run_takes(tmp_path, capsys):
    """(they are unset until a run resolves them: --print-config shows the resolved values)"""
    argv = ["train", "corpus.txt", "--vocab", "v.txt", "-o", str(tmp_path / "run"), "--unroll-steps", "10"]
    assert main(argv + ["--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["adagrad_init"], printed["clip_norm"]) == (0.01, 1.0)
    assert main(argv + ["--clip-norm", "3", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["clip_norm"] == 3.0
