"""A leading "~" in a path the user typed (quoted on the command line, ``--output=~/x``, or in a
config file) is the home folder, as a shell makes it: never a folder named "~" (elmo.user_paths)."""
from __future__ import annotations

import json

import pytest

from elmo.cli import main
from elmo.tasks.experiment_config import read_config


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home folder of its own (HOME) and another working folder: returns (home, work)."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    (work / "in.txt").write_text("the bank of the river .\nthe bank .\n", encoding="utf-8")
    return home, work


@pytest.mark.parametrize("argv", [["-o", "~/v.txt"], ["--output=~/v.txt"]])
def test_a_quoted_tilde_on_the_command_line_is_the_home_folder(home, argv):
    # ('~/v.txt' quoted, or after "=", which no shell expands, made ./~/v.txt)
    home, work = home
    assert main(["vocab", "build", "in.txt", *argv]) == 0
    assert (home / "v.txt").is_file()
    assert not (work / "~").exists()


def test_a_tilde_in_a_job_config_file_is_the_home_folder(home, capsys):
    home, work = home
    (work / "c.json").write_text(json.dumps({"train": ["~/corpus.txt"], "vocab": "~/v.txt",
                                             "output": "~/run"}), encoding="utf-8")
    assert main(["train", "--config", "c.json", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["train"], printed["vocab"], printed["output"]) == (
        [str(home / "corpus.txt")], str(home / "v.txt"), str(home / "run"))


def test_a_tilde_of_no_such_user_is_one_error_line_and_no_folder(home, capsys):
    home, work = home
    assert main(["vocab", "build", "in.txt", "-o", "~no-such-user-elmo/v.txt"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("elmo vocab build: error: ~no-such-user-elmo/v.txt: no user") and err.count("\n") == 1
    assert sorted(p.name for p in work.iterdir()) == ["in.txt"]


def test_a_tilde_in_an_experiment_config_is_the_home_folder_not_beside_the_config(home):
    home, work = home
    (work / "cfg").mkdir()
    (home / "my bilm").mkdir()
    (work / "cfg" / "x.json").write_text(json.dumps({
        "bilm": "~/my bilm", "embeddings": {"glove": "~/glove.txt"},
        "tasks": [{"name": "t", "kind": "tagging", "data_dir": "~/data", "files": {"train": "~/a.conll"}},
                  {"name": "u", "kind": "tagging", "data_dir": "rel"}]}), encoding="utf-8")
    cfg = read_config(work / "cfg" / "x.json")
    assert cfg["bilm"] == str(home / "my bilm")
    assert cfg["embeddings"]["glove"] == str(home / "glove.txt")
    assert cfg["tasks"][0]["data_dir"] == str(home / "data")
    assert cfg["tasks"][0]["files"]["train"] == str(home / "a.conll")
    assert cfg["tasks"][1]["data_dir"] == str(work / "cfg" / "rel")   # (relative: beside the config)


def test_an_experiments_out_folder_in_its_config_or_by_set_is_under_home(home, capsys):
    # ("out": "~/results" in the config, or --set out=~/r, was a folder named "~" where it ran)
    home, work = home
    (work / "x.json").write_text(json.dumps({"out": "~/results", "tasks": [
        {"task": "tagging", "files": {"train": "in.txt", "dev": "in.txt", "test": "in.txt"}}]}),
        encoding="utf-8")
    assert read_config(work / "x.json")["out"] == str(home / "results")
    assert main(["experiment", "x.json", "--set", "out=~/r", "--set", "tasks.0.files.dev=~/d.txt",
                 "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["out"] == str(home / "r")
    assert printed["tasks"][0]["files"]["dev"] == str(home / "d.txt")


#: The command line's text values that are not paths (names, words, settings): "~" stays there
NOT_PATHS = {"config_set", "device", "layers", "name", "names", "pca_word", "sentence", "similarity_sets",
             "title", "variants", "word"}


def test_every_text_option_of_every_command_is_known_as_a_path_or_not():
    # A new option that takes a path is expanded only when elmo.user_paths.PATH_SETTINGS names it
    import argparse

    from elmo.cli import _parsers, build_parser
    from elmo.user_paths import PATH_SETTINGS
    unknown = {f"{p.prog} {a.dest}" for p in _parsers(build_parser()) for a in p._actions
               if a.nargs != 0 and not a.choices and a.type in (None, str) and a.help != argparse.SUPPRESS
               and not isinstance(a, argparse._SubParsersAction) and a.dest not in PATH_SETTINGS | NOT_PATHS}
    assert not unknown, "add each to PATH_SETTINGS (a path) or to NOT_PATHS here"


#: The modules under elmo run as ``python -m`` that parse their own arguments (``build_parser``)
SCRIPTS = ("elmo.demo.build_data", "elmo.training.precision", "elmo.training.ship")


def test_every_script_is_known_and_its_path_arguments_are_expanded():
    # (they skipped the rule: a quoted "~/m" made a folder named "~"; a new script must join them)
    import importlib
    from pathlib import Path

    from elmo.user_paths import PATH_SETTINGS
    root = Path(__file__).resolve().parents[1]
    found = {".".join(p.relative_to(root).with_suffix("").parts) for p in (root / "elmo").rglob("*.py")
             if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")}
    assert found == {"elmo.cli", *SCRIPTS}
    for name in SCRIPTS:
        parser = importlib.import_module(name).build_parser()
        unknown = {a.dest for a in parser._actions if a.nargs != 0 and not a.choices
                   and a.type in (None, str, Path) and a.dest not in PATH_SETTINGS | {"help"}}
        assert not unknown, f"{name}: add each to PATH_SETTINGS (a path) or take it otherwise"


@pytest.mark.parametrize("argv, typed", [
    (["vocab", "build", "in.txt", "-o", "v.txt/"], "-o 'v.txt/'"),
    (["vocab", "build", "in.txt", "-o", "v.txt", "--counts", "c.tsv/"], "--counts 'c.tsv/'"),
    (["embed", "in.txt", "vectors/", "--model", "fixture", "--quiet"], "OUTPUT 'vectors/'"),
    (["embed", "in.txt/", "v.hdf5", "--model", "fixture", "--quiet"], "INPUT 'in.txt/'"),
])
def test_a_file_name_ending_in_a_slash_is_refused_not_written_without_it(home, capsys, argv, typed):
    # (pathlib drops the "/": `elmo embed in.txt vectors/` wrote a file named "vectors")
    home, work = home
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"error: {typed}: ends in '/'" in err and err.count("\n") == 1
    assert sorted(p.name for p in work.iterdir()) == ["in.txt"]


def test_a_shell_variable_in_a_config_file_is_refused_not_made_a_folder(home, capsys):
    # ("$HOME/run" in a --config file made a folder named "$HOME" in the working folder)
    home, work = home
    (work / "c.json").write_text(json.dumps({"train": ["in.txt"], "vocab": "v.txt", "output": "$HOME/run"}),
                                 encoding="utf-8")
    assert main(["train", "--config", "c.json", "--print-config"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("elmo train: error: --config c.json: output: $HOME/run: a shell variable") and err.count("\n") == 1
    # named as it was given: by --set, or typed (quoted) as the option
    assert main(["train", "--config", "c.json", "--set", "output=~no-such-user-elmo/run", "--print-config"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("elmo train: error: --set output: ~no-such-user-elmo/run: no user") and err.count("\n") == 1


def test_a_tilde_after_random_in_an_experiment_config_is_the_home_folder(home):
    # ("random:~/m" was left as it was: a folder "~" beside the config or in the working folder)
    home, work = home
    (work / "x.json").write_text(json.dumps({"bilm": "random:~/m", "variants": [
        {"name": "r", "elmo": {"bilm": "random:~/n"}}]}), encoding="utf-8")
    cfg = read_config(work / "x.json")
    assert cfg["bilm"] == "random:" + str(home / "m")
    assert cfg["variants"][0]["elmo"]["bilm"] == "random:" + str(home / "n")


@pytest.mark.parametrize("value", ["$HOME/r", "~no-such-user-elmo/r"])
def test_a_path_refused_in_an_experiment_config_names_the_config(home, capsys, value):
    # (every other error of the file names it; these named only the value)
    home, work = home
    (work / "x.json").write_text(json.dumps({"out": "r", "tasks": [
        {"task": "tagging", "data_dir": value}]}), encoding="utf-8")
    assert main(["experiment", "x.json", "--print-config"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"elmo experiment: error: x.json: {value}: ") and err.count("\n") == 1
    (work / "x.json").write_text(json.dumps({"out": "r", "tasks": [
        {"task": "tagging", "data_dir": "d"}]}), encoding="utf-8")
    assert main(["experiment", "x.json", "--set", f"out={value}", "--print-config"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"elmo experiment: error: x.json with --set: {value}: ") and err.count("\n") == 1


def test_a_script_with_its_own_arguments_takes_a_quoted_tilde_as_the_home_folder(home, capsys):
    # (python -m elmo.demo.build_data --corpus "~/c" read ./~/c: the scripts skipped the rule)
    from elmo.demo.build_data import main as build_data_main
    home, work = home
    assert build_data_main(["--corpus", "~/c", "--glove", "g", "--vocab", "v.txt", "--out", "o"]) == 1
    err = capsys.readouterr().err
    assert str(home / "c" / "train.txt") in err and err.count("\n") == 1
    assert build_data_main(["--vocab", "$HOME/v.txt", "--out", "o"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m elmo.demo.build_data: error: $HOME/v.txt: a shell variable")
    assert sorted(p.name for p in work.iterdir()) == ["in.txt"]
