"""The typed experiment config (elmo.tasks.experiment_config): the file format read into
dataclasses, `elmo experiment --print-config` and `--set`, and one-line errors that name an
unknown or wrongly typed key."""
from __future__ import annotations

import json
import re

import pytest

from elmo.cli import main
from elmo.config import ConfigError
from elmo.tasks.experiment_config import ElmoSettings, ExperimentConfig, FitConfig, ModelSettings
from elmo.tasks.experiment_config import load_config, normalise_config
from elmo.tasks.fingerprints import run_fingerprint
from test_tasks_runner import tiny_config, write_tiny_tasks


def _write(path, cfg):
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def test_blocks_are_typed_with_the_defaults_filled_in():
    cfg = normalise_config({"tasks": [{"task": "pos", "model": {"crf": True}, "train": {"epochs": 2}}],
                            "seeds": 2, "train": {"lr": 1},
                            "variants": [{"name": "b"}, {"name": "e", "elmo": {"lambda": 1, "bilm": "x"}}]})
    assert isinstance(cfg, ExperimentConfig) and cfg.seeds == [1, 2]
    assert cfg.train == FitConfig(lr=1.0) and isinstance(cfg.train.lr, float)
    assert cfg.model == ModelSettings()
    assert cfg.variants[1].elmo == ElmoSettings(lam=1.0, bilm="x")
    assert cfg.baseline.name == "b" and cfg.bilm_of(cfg.variants[1]) == "x"
    spec = cfg.tasks[0]
    assert cfg.model_for(spec).crf is True and cfg.train_for(spec) == FitConfig(epochs=2, lr=1.0)
    # the JSON key "lambda" is the field lam, and the file format is written back
    assert cfg.to_dict()["variants"][1]["elmo"]["lambda"] == 1.0
    assert normalise_config(cfg.to_dict()) == cfg


def test_results_record_keeps_the_values_as_written():
    """What results.json records (and run fingerprints hash) is the file's values over the
    defaults, as before the config was typed: earlier runs keep matching on --resume."""
    d = {"tasks": [{"task": "pos"}], "train": {"max_seconds": 100},
         "variants": [{"name": "b"}, {"name": "e", "elmo": {"lambda": 1}}]}
    rec = normalise_config(d).recorded()
    assert rec["train"] == {"max_seconds": 100} and isinstance(rec["train"]["max_seconds"], int)
    assert rec["variants"][1]["elmo"] == {"positions": ["input"], "layers": "all", "lambda": 1,
                                          "finetune": False, "dropout": 0.5, "do_layer_norm": False}
    assert rec["model"] == ModelSettings().to_dict() and rec["seeds"] == [1, 2, 3]
    a, b = normalise_config(d), normalise_config(json.loads(json.dumps(d)))
    assert run_fingerprint(a, a.tasks[0], a.variants[1]) == run_fingerprint(b, b.tasks[0], b.variants[1])


def test_print_config_reads_back_as_the_same_config(tmp_path, capsys):
    folders = write_tiny_tasks(tmp_path)
    path = _write(tmp_path / "c.json", tiny_config(folders))
    assert main(["experiment", str(path), "--print-config", "--seeds", "2"]) == 0
    printed = capsys.readouterr().out
    full = json.loads(printed)
    assert full["train"]["lr"] == FitConfig().lr and full["model"]["lstm_layers"] == 1   # defaults filled
    assert full["variants"][1]["elmo"]["lambda"] == ElmoSettings().lam
    again = _write(tmp_path / "printed.json", full)
    assert load_config(again) == normalise_config({**json.loads(path.read_text()), "seeds": 2})
    assert main(["experiment", str(again), "--print-config"]) == 0
    assert capsys.readouterr().out == printed


def test_set_reaches_the_run(tmp_path, capsys):
    folders = write_tiny_tasks(tmp_path)
    cfg = tiny_config(folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"]), "max_train": 6}],
                      train={"epochs": 3, "patience": 3, "batch_size": 8}, variants=[{"name": "baseline"}])
    path, out = _write(tmp_path / "c.json", cfg), tmp_path / "r"
    assert main(["experiment", str(path), "--out", str(out), "--quiet",
                 "--set", "train.epochs=1", "--set", "seeds=[2]", "--set", "model.hidden=4"]) == 0
    capsys.readouterr()
    results = json.loads((out / "results.json").read_text())
    (run,) = results["runs"]
    assert run["epochs"] == 1 and run["seed"] == 2
    assert results["data"]["pos"]["train"]["epochs"] == 1 and results["data"]["pos"]["model"]["hidden"] == 4
    assert results["config"]["train"]["epochs"] == 1


def test_the_run_says_where_its_results_went(tmp_path, monkeypatch, capsys):
    """`elmo experiment my.json` printed its report and never said where it had written
    results.json, results.md and the plot (experiments/results/<name>/ under the working
    folder, unless --out): a newcomer ran it from their own folder and had to look it up.
    The last stderr line names the folder and what it holds, also under --quiet."""
    folders = write_tiny_tasks(tmp_path)
    cfg = tiny_config(folders, name="mine", variants=[{"name": "baseline"}],
                      tasks=[{"task": "pos", "data_dir": str(folders["pos"]), "max_train": 6}],
                      train={"epochs": 1, "batch_size": 8})
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    path = _write(tmp_path / "c.json", cfg)
    assert main(["experiment", str(path), "--quiet", "--save-models"]) == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    folder = "experiments/results/mine"
    assert (work / folder / "results.json").is_file()
    assert last == f"elmo experiment: wrote {folder}/: results.json, results.md, models/"


@pytest.mark.parametrize("change,named", [
    ({"epochs": 3}, "unknown config keys: epochs"),
    ({"train": {"epoch": 3}}, "unknown train settings: epoch"),
    ({"model": {"hiden": 3}}, "unknown model settings: hiden"),
    ({"model": {"hidden": "3"}}, "model: setting hidden: expected int"),
    ({"variants": [{"name": "b"}, {"name": "e", "elmo": {"lamda": 1}}]},
     "variants[1] (e): unknown elmo settings: lamda"),
    ({"variants": [{"name": "b"}, {"name": "e", "elmo": {"lambda": "big"}}]},
     "variants[1] (e): elmo: setting lambda: expected float"),
    ({"variants": [{"name": "b"}, {"name": "e", "elmo": {"layers": "first"}}]}, "layers must be"),
    ({"variants": [{"name": "b", "colour": 1}]}, "variants[0]: unknown variant settings: colour"),
    ({"tasks": [{"task": "pos", "train": {"lr": "fast"}}]}, "task pos: train: setting lr: expected float"),
    ({"tasks": [{"task": "pos", "model": {"pooling": "mean"}}]}, "task pos: model: pooling must be"),
    # the embeddings block was not checked: a misspelt key fetched GloVe without a word, a
    # path of the wrong type was a TypeError traceback mid-run, and random_dim beside glove won
    ({"embeddings": {"glov": "vectors.txt"}}, "unknown embeddings settings: glov (known: glove, random_dim)"),
    ({"embeddings": {"glove": 5}}, "embeddings: glove must be null (glove-50d) or a GloVe file's path, got 5"),
    ({"embeddings": {"glove": "vectors.txt", "random_dim": 8}}, "embeddings: give glove or random_dim, not both"),
    ({"embeddings": {"random_dim": "8"}}, "embeddings: random_dim must be an integer of 1 or more, got '8'"),
])
def test_an_unknown_or_mistyped_key_is_one_error_naming_it(tmp_path, change, named):
    path = _write(tmp_path / "c.json", {"tasks": [{"task": "pos"}], **change})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert named in message and str(path) in message and "\n" not in message


@pytest.mark.parametrize("change,named", [
    ({"train": {"grad_clip": -1.0}}, "train: grad_clip must be a finite number of 0 or more, got -1.0"),
    ({"train": {"lr": float("nan")}}, "train: lr must be a finite number of 0 or more, got nan"),
    ({"train": {"epochs": 0}}, "train: epochs must be an integer of 1 or more"),
    ({"train": {"batch_size": 0}}, "train: batch_size must be an integer of 1 or more"),
    ({"model": {"dropout": 1.0}}, "model: dropout must be a number in [0, 1)"),
    ({"tasks": [{"task": "pos", "model": {"hidden": 0}}]}, "task pos: model: hidden must be an integer of 1"),
    ({"variants": [{"name": "b"}, {"name": "e", "elmo": {"lambda": -1.0}}]},
     "variants[1] (e): elmo: lambda must be a finite number of 0 or more"),
    ({"seeds": [1, 1]}, "seeds must be a non-empty list of distinct seeds"),  # one run counted twice
    ({"seeds": []}, "seeds must be a non-empty list"),
    ({"seeds": 0}, "seeds must be a count from 1 to 10000"),
    ({"seeds": 10**23}, "seeds must be a count from 1 to 10000, or a list of seeds; got 1000"),  # (overflowed)
    # random.Random(-1) shuffles as Random(1) does; 2**64 was torch's unnamed OverflowError mid-run
    ({"seeds": [1, -1]}, "seeds must be whole numbers from 0 to 2**64 - 1, got -1"),
    ({"seeds": [2**64]}, f"seeds must be whole numbers from 0 to 2**64 - 1, got {2**64}"),
    # a ValueError from random.sample naming nothing, and torch's RuntimeError once a model was built
    ({"tasks": [{"task": "pos", "max_train": -1}]}, "task pos: max_train must be a whole number of 1 or more"),
    # a run without a test score, which experiment-report, experiment-table and --resume refuse
    ({"tasks": [{"task": "pos", "max_test": 0}]}, "task pos: max_test must be a whole number of 1 or more"),
    ({"tasks": [{"task": "pos", "max_dev": "10"}]}, "task pos: max_dev must be a whole number of 1 or more"),
    # no dev to stop early on: the first run failed, naming no setting
    ({"tasks": [{"task": "tagging", "max_dev": 0}]}, "task tagging: max_dev must be a whole number of 1 or "
     "more (or absent), got 0; to train without dev (no early stopping), leave out the dev file and set "
     "dev_fraction 0 (a task from your files)"),
    # max_tokens -2 cut every text's last two tokens, "x" was a TypeError traceback; subset_seed
    # 1.7 was read as 1, "x" was a bare int() message; "tokenize": "no" tokenized
    ({"tasks": [{"task": "topic", "max_tokens": -2}]}, "task topic: max_tokens must be a whole number of 0 or more"),
    ({"tasks": [{"task": "pair", "max_tokens_b": "x"}]}, "task pair: max_tokens_b must be a whole number of 0 or more"),
    ({"tasks": [{"task": "pos", "subset_seed": 1.7}]}, "task pos: subset_seed must be a whole number of 0 or more"),
    ({"tasks": [{"task": "tagging", "dev_fraction": "x"}]}, "task tagging: dev_fraction must be a number in [0, 1), got 'x'"),
    ({"tasks": [{"task": "tagging", "dev_fraction": float("nan")}]}, "task tagging: dev_fraction must be a number in [0, 1), got nan"),
    ({"tasks": [{"task": "classification", "tokenize": "no"}]}, "task classification: tokenize must be true or false, got 'no'"),
    # TypeError tracebacks once the task was read
    ({"tasks": [{"task": "pos", "model": 5}]}, "task pos: model must be an object of settings, got 5"),
    ({"tasks": [{"task": "pos", "train": [1]}]}, "task pos: train must be an object of settings, got [1]"),
    ({"tasks": [{"task": "pos", "data_dir": 5}]}, "task pos: data_dir must be a path, got 5"),
    ({"tasks": [{"task": "tagging", "files": {"train": "t.conll", "test_web": 5}}]},
     "task tagging: files.test_web must be a path, got 5"),
    ({"device": "foo"}, "device 'foo': expected cpu, cuda, cuda:N or auto"),
    # random_dim 0 fetched GloVe instead, true gave 1-d vectors, -3 was numpy's bare message
    ({"embeddings": {"random_dim": 0}}, "embeddings: random_dim must be an integer of 1 or more, got 0"),
    ({"embeddings": {"random_dim": True}}, "embeddings: random_dim must be an integer of 1 or more, got True"),
    ({"embeddings": {"random_dim": -3}}, "embeddings: random_dim must be an integer of 1 or more, got -3"),
])
def test_a_number_out_of_range_is_one_error_naming_it(tmp_path, change, named):
    path = _write(tmp_path / "c.json", {"tasks": [{"task": "pos"}], **change})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert named in str(err.value) and str(path) in str(err.value)
    assert FitConfig.from_dict({"grad_clip": 0.0, "max_seconds": 0.0}).grad_clip == 0.0  # 0: off, allowed


def test_set_of_an_unknown_nested_key_is_one_error_naming_it(tmp_path, capsys):
    path = _write(tmp_path / "c.json", {"tasks": [{"task": "pos"}],
                                        "variants": [{"name": "b"}, {"name": "e", "elmo": {}}]})
    for assignment, named in (("variants.1.elmo.lamda=1", "variants[1] (e): unknown elmo settings: lamda"),
                              ("trian.epochs=1", "unknown config keys: trian"),
                              ("variants.5.name=x", "variants.5")):
        assert main(["experiment", str(path), "--set", assignment, "--print-config"]) == 1
        captured = capsys.readouterr()
        assert named in captured.err and captured.err.count("\n") == 1 and not captured.out


@pytest.mark.parametrize("task,named", [
    ({"task": "classification", "files": {"train": "t.tsv", "test": "t.tsv"}, "dev_fractoin": 0.1},
     "task 'classification': unknown keys ['dev_fractoin'] for a task from your own files"),
    ({"task": "pos", "max_trian": 100}, "task 'pos': unknown keys ['max_trian'] for the built-in task pos"),
    ({"task": "pos", "files": {"train": "t.txt"}}, "unknown keys ['files'] for the built-in task pos"),
    ({"task": "poss"}, "unknown task 'poss'; built-in: pos, "),
])
def test_a_misspelt_task_entry_is_refused_with_the_config(tmp_path, capsys, task, named):
    """The README: "The config is checked whole before anything runs". A task entry's keys and
    task were checked only when its data was read: load_config and --print-config accepted
    "dev_fractoin" (printing it back as a setting), and a run reached it after reading (or
    fetching) the data of the tasks before it."""
    path = _write(tmp_path / "c.json", {"tasks": [task]})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert named in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)
    assert main(["experiment", str(path), "--print-config"]) == 1
    captured = capsys.readouterr()
    assert named in captured.err and captured.err.count("\n") == 1 and not captured.out


def test_a_config_in_broken_utf8_is_named(tmp_path):
    path = tmp_path / "c.json"
    path.write_bytes(b'{"name": "x\xff"}')
    with pytest.raises(ConfigError, match="c.json: not UTF-8 text"):  # a bare codec message before
        load_config(path)


def _config_file(tmp_path, name, content):
    """``content`` written to ``tmp_path/name``: bytes as they are, None for no file, "dir" for a folder."""
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    return path


@pytest.mark.parametrize("name, content, said", [
    ("c.json", None, r"cannot read it \(No such file or directory\)"),
    ("c.toml", None, r"cannot read it \(No such file or directory\)"),
    ("c.json", "dir", r"is a directory, expected an experiment config"),
    ("c.toml", "dir", r"is a directory, expected an experiment config"),
    ("c.json", b'{"name": "x\xff"}', r"not UTF-8 text \(line 1: byte 0xff at byte offset 11\)"),
    ("c.toml", b'name = "x\xff"\n', r"not UTF-8 text \(line 1: byte 0xff at byte offset 9\)"),
    ("c.json", b'{"tasks": [}', r"not a JSON config \(Expecting value: line 1 column 12"),
    ("c.toml", b"tasks = =\n", r"not a TOML config \(Invalid value \(at line 1, column 9\)\)"),
    ("c.json", b"[1, 2]", r"an experiment config is an object of settings, got list"),
    ("c.json", b'"tasks"', r"an experiment config is an object of settings, got str"),
    # brackets nested deeper than Python's parsers recurse: a RecursionError's traceback before
    ("c.json", b"[" * 100_000, r"not a JSON config \(values nested too deeply to read\)"),
    ("c.toml", b"tasks = " + b"[" * 100_000, r"not a TOML config \(values nested too deeply to read\)"),
])
def test_an_unreadable_config_is_one_line_that_names_it(tmp_path, capsys, name, content, said):
    """The experiment config is read by the package's shared readers (elmo.text_files.read_json and
    read_toml), so each way the file fails is one line that names it, as for every other file."""
    path = _config_file(tmp_path, name, content)
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: {said}") as err:
        load_config(path)
    assert "\n" not in str(err.value)
    assert main(["experiment", str(path), "--print-config"]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(f"elmo experiment: error: {path}: ") and captured.err.count("\n") == 1
    assert not captured.out


def test_a_key_repeated_in_a_json_config_is_named(tmp_path):
    # JSON keeps the last: a second "variants" block silently replaced the first
    path = tmp_path / "c.json"
    path.write_text('{"tasks": [{"task": "pos"}], "train": {"epochs": 2, "lr": 0.1, "epochs": 3}}')
    with pytest.raises(ConfigError, match=f"{path}: not a JSON config \\(the key 'epochs' appears twice in one object\\)"):
        load_config(path)


@pytest.mark.parametrize("variants, tasks, named", [
    ([{"name": "b"}, {"name": "../../outside", "elmo": {}}], [{"task": "pos"}], "'../../outside'"),
    ([{"name": "b"}, {"name": "..", "elmo": {}}], [{"task": "pos"}], "'..'"),
    ([{"name": ""}, {"name": "e", "elmo": {}}], [{"task": "pos"}], "''"),
    ([{"name": "b"}, {"name": "e", "elmo": {}}], [{"task": "pos", "name": "/tmp/x"}], "'/tmp/x'"),
    ([{"name": "b"}, {"name": "e", "elmo": {}}], [{"task": "pos", "name": 5}], "5"),
])
def test_a_name_that_is_not_one_folder_name_is_refused(variants, tasks, named):
    # --save-models writes OUT/models/TASK/VARIANT/seed-N, replacing what is there: a name
    # with a separator or '..' placed (and replaced) folders outside OUT
    with pytest.raises(ConfigError, match=f"name {named}: a name is also a folder name"):
        normalise_config({"tasks": tasks, "variants": variants})


def test_print_config_gives_a_bilm_folder_that_reads_back_from_any_folder(tmp_path, capsys, monkeypatch):
    """A relative biLM folder is found beside the config (or in the working folder), but
    --print-config printed it as written, relative, unlike the data paths: the printed config,
    saved elsewhere or read from another folder, named no model (or another one of that name)."""
    import shutil
    import elmo
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    shutil.copytree(elmo.model_path("fixture"), project / "models" / "mine")
    elsewhere.mkdir()
    folders = write_tiny_tasks(tmp_path)
    path = _write(project / "c.json", tiny_config(folders, bilm="models/mine", variants=[
        {"name": "b"}, {"name": "r", "elmo": {"bilm": "random:models/mine"}}, {"name": "f", "elmo": {"bilm": "fixture"}}]))
    mine = str((project / "models" / "mine").resolve())
    for cwd in (project, elsewhere):
        monkeypatch.chdir(cwd)
        assert main(["experiment", str(path), "--print-config"]) == 0
        full = json.loads(capsys.readouterr().out)
        assert full["bilm"] == mine
        assert [v["elmo"] and v["elmo"]["bilm"] for v in full["variants"]] == [None, "random:" + mine, "fixture"]
    again = _write(elsewhere / "printed.json", full)
    monkeypatch.chdir(tmp_path)
    assert load_config(again).bilm == mine


@pytest.mark.parametrize("variants", [[], {}, "baseline"])
def test_variants_that_are_no_list_of_variants_are_refused(variants):
    """An empty list (or an empty mapping) ran the default baseline and ELMo pair, without a
    word; null still means that pair."""
    with pytest.raises(ConfigError, match="variants must be a list of variants"):
        normalise_config({"tasks": [{"task": "pos"}], "variants": variants})
    assert [v.name for v in normalise_config({"tasks": [{"task": "pos"}], "variants": None}).variants] == \
        [v.name for v in normalise_config({"tasks": [{"task": "pos"}]}).variants]


@pytest.mark.parametrize("train,says", [
    ({"lr": 1e38}, "train: lr 1e+38 is too large for Adam: its first step, lr / (1 - 0.9), must be a float32"),
    ({"lr": 3.41e37}, "train: lr 3.41e+37 is too large for Adam"),
    ({"bilm_lr": 1e38}, "train: bilm_lr 1e+38 is too large for Adam"),
    ({"weight_decay": 1e39}, "train: weight_decay 1e+39 is too large for Adam: it must be a float32"),
])
def test_a_learning_rate_adam_cannot_step_with_is_refused_before_any_run(train, says):
    """lr 1e38 is finite, so it was allowed, and the first run stopped with torch.optim's
    RuntimeError 'value cannot be converted to type float without overflow'."""
    with pytest.raises(ConfigError, match=re.escape(says)):
        normalise_config({"tasks": [{"task": "pos", "train": train}]})


def test_the_largest_learning_rates_allowed_are_ones_adam_steps_with():
    """The bound is the float32 one, not tighter: the largest round values it allows step."""
    import torch
    from elmo.tasks.train_loop import ADAM_BETA1, FLOAT32_MAX
    for lr, decay in ((3.4e37, 0.0), (1e-3, FLOAT32_MAX)):
        FitConfig.from_dict({"lr": lr, "bilm_lr": lr, "weight_decay": decay})
        p = torch.nn.Parameter(torch.ones(3))
        opt = torch.optim.Adam([p], lr=lr, betas=(ADAM_BETA1, 0.999), weight_decay=decay)
        p.sum().backward()
        opt.step()                     # (no RuntimeError; the weights may well be inf)


def test_negative_threads_are_refused_with_the_config(tmp_path, capsys):
    """threads -1 passed --plan and --print-config and stopped only the run, naming no file."""
    path = _write(tmp_path / "cfg.json", {"tasks": [{"task": "pos"}], "threads": -1})
    assert main(["experiment", str(path), "--print-config"]) == 1
    assert capsys.readouterr().err.strip() == (f"elmo experiment: error: {path}: threads must be a whole "
                                               f"number of 0 or more (0: torch's default), got -1")
    assert normalise_config({"tasks": [{"task": "pos"}], "threads": 0}).threads == 0


@pytest.mark.parametrize("variants, says", [
    ([{"name": "b"}, {"name": "b2", "elmo": None}, {"name": "e", "elmo": {}}],
     "variants[1] (b2): without 'elmo' it is a second baseline, the same model as 'b'"),
    ([{"name": "b"}, {"name": "e", "elmo": {}}, {"name": "b2"}],
     "variants[2] (b2): without 'elmo' it is a second baseline, the same model as 'b'"),
    # a copy-paste: the defaults written out, the config's biLM named again, 0 as 0.0
    ([{"name": "b"}, {"name": "e", "elmo": {"lambda": 0}},
      {"name": "e2", "elmo": {"positions": ["input"], "layers": "all", "lambda": 0.0, "bilm": "fixture"}}],
     "variants[2] (e2): its elmo settings (and biLM) are those of 'e'"),
])
def test_a_variant_that_repeats_an_earlier_one_is_refused_before_any_run(tmp_path, capsys, variants, says):
    """"elmo": null made a second baseline, and a copied variant a second ELMo variant of the
    same settings: each was trained under its own name, every run a repeat of the other's,
    and reported as if it were another result."""
    from elmo.tasks.runner import run_experiment
    folders = write_tiny_tasks(tmp_path)
    cfg = tiny_config(folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"])}], variants=variants)
    path = _write(tmp_path / "cfg.json", cfg)
    for flag in ("--plan", "--print-config"):
        assert main(["experiment", str(path), flag]) == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"elmo experiment: error: {path}: {says}, so each of its runs would repeat "
                              f"the run of ") and "\n" not in err
    with pytest.raises(ConfigError, match=re.escape(says)):
        run_experiment(cfg, out=tmp_path / "out", log=lambda s: None)
    assert not (tmp_path / "out").exists()
    # results written before still read (experiment-report), and variants that differ run
    assert [v.name for v in normalise_config(cfg).variants] == [v["name"] for v in variants]
    differ = [{"name": "b"}, {"name": "e", "elmo": {}}, {"name": "r", "elmo": {"bilm": "random:fixture"}},
              {"name": "io", "elmo": {"positions": ["input", "output"]}}]
    assert main(["experiment", str(_write(path, {**cfg, "variants": differ})), "--plan"]) == 0


def test_variants_naming_one_bilm_by_two_names_are_refused(tmp_path, monkeypatch):
    """The check compared the biLM specs as written: "fixture" and its folder's absolute path,
    "./m" and "m", a published model's name and its folder in the cache, were two biLMs, and
    each run of the second variant repeated the first's. Nothing is fetched to tell."""
    import shutil

    import elmo
    from elmo.hub import registry
    from elmo.hub.download import cache_path
    from elmo.hub.resolve import as_folder, Local
    from elmo.tasks.experiment_config import check_variants_differ
    monkeypatch.setenv("ELMO_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    shutil.copytree(elmo.model_path("fixture"), tmp_path / "m")
    small = registry.get("small")
    pair = [cache_path(small.urls[k]) for k in ("options", "weights")]
    cached = as_folder(Local(options=pair[0], weights=pair[1]), "small")   # (links; no file needed)
    same = [("fixture", str(elmo.model_path("fixture").resolve())), ("./m", "m"), ("m", str(tmp_path / "m")),
            ("random:fixture", "random:" + str(elmo.model_path("fixture"))), ("small", str(cached)),
            ("default", str(elmo.model_path("default")))]
    for first, second in same:
        cfg = normalise_config({"tasks": [{"task": "pos"}], "bilm": first, "variants": [
            {"name": "b"}, {"name": "e", "elmo": {}}, {"name": "e2", "elmo": {"bilm": second}}]})
        with pytest.raises(ConfigError, match=re.escape("variants[2] (e2): its elmo settings (and biLM) "
                                                        "are those of 'e'")):
            check_variants_differ(cfg)
    assert not any(p.exists() for p in pair)                       # (nothing was downloaded)
    differ = [("fixture", "m"), ("fixture", "random:fixture"), ("small", "medium"), ("m", str(cached))]
    for first, second in differ:
        check_variants_differ(normalise_config({"tasks": [{"task": "pos"}], "bilm": first, "variants": [
            {"name": "b"}, {"name": "e", "elmo": {}}, {"name": "e2", "elmo": {"bilm": second}}]}))


def test_the_command_checks_its_variants_once_and_names_its_config(tmp_path, capsys, monkeypatch):
    """(the command checked them, and plan() or run_experiment() again: each biLM named was
    resolved twice); a repeat found by the run's check names the config as the command's did"""
    from elmo.tasks import experiment_config, runner
    calls = []
    check = experiment_config.check_variants_differ

    def counted(cfg):
        calls.append(cfg)
        check(cfg)
    monkeypatch.setattr(experiment_config, "check_variants_differ", counted)
    monkeypatch.setattr(runner, "check_variants_differ", counted)
    folders = write_tiny_tasks(tmp_path)
    cfg = tiny_config(folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"])}],
                      variants=[{"name": "b"}, {"name": "e", "elmo": {}}])
    path = _write(tmp_path / "cfg.json", cfg)
    for flag in ("--plan", "--print-config"):
        calls.clear()
        assert main(["experiment", str(path), flag]) == 0 and len(calls) == 1, flag
    capsys.readouterr()
    _write(path, {**cfg, "variants": [{"name": "b"}, {"name": "b2"}]})
    calls.clear()
    assert main(["experiment", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 1
    assert capsys.readouterr().err.startswith(f"elmo experiment: error: {path}: variants[1] (b2): without "
                                              f"'elmo' it is a second baseline")
    assert len(calls) == 1 and not (tmp_path / "out").exists()


def test_plan_from_python_refuses_a_repeated_variant(tmp_path):
    """runner.plan() listed a config whose variants repeat one another; only the command
    refused it."""
    from elmo.tasks.runner import plan
    folders = write_tiny_tasks(tmp_path)
    cfg = normalise_config(tiny_config(folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"])}],
                                       variants=[{"name": "b"}, {"name": "b2"}]))
    with pytest.raises(ConfigError, match=re.escape("variants[1] (b2): without 'elmo' it is a second baseline")):
        plan(cfg)


def test_the_plan_gives_the_split_sizes_in_words(tmp_path, capsys):
    """`elmo experiment --plan` (and the run's log) showed a task's sizes as a Python dict,
    "{'train': 270, 'dev': 30, 'test': 100} examples": they are now words, every split in the
    task's order, extra test sets too."""
    folders = write_tiny_tasks(tmp_path)
    cfg = tiny_config(folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"]), "max_train": 6}],
                      variants=[{"name": "baseline"}])
    assert main(["experiment", str(_write(tmp_path / "c.json", cfg)), "--plan"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert re.match(r"pos \(token_accuracy\): train 6, dev \d+, test \d+ examples, \d+ labels", first), first
