"""The ``elmo`` command's conventions: usage errors and ``-`` as a path."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from elmo.cli import main
from tests.test_tasks_compare import _results


@pytest.mark.parametrize("argv", [[], ["--debug"], ["models"], ["data"], ["vocab"]])
def test_a_missing_command_is_a_usage_error_on_stderr(argv, capsys):
    """`elmo` alone (or `elmo models`, `elmo data`, `elmo vocab` without an action) printed the
    whole help to stdout and exited 2; it is now argparse's usage error, as a subcommand's
    missing argument is: the usage line and the message on stderr, nothing on stdout, status 2."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("usage: elmo") and "error: the following arguments are required:" in err


def _run_in(folder: Path, argv, capsys):
    """main(argv) run in ``folder``: its status and its stderr."""
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        status = main(argv)
    finally:
        os.chdir(cwd)
    return status, capsys.readouterr().err


@pytest.mark.parametrize("argv, option", [
    (["vocab", "build", "corpus.txt", "-o", "-"], "-o '-'"),
    (["vocab", "build", "corpus.txt", "-o", "vocab.txt", "--counts", "-"], "--counts '-'"),
    (["embed", "-", "out.hdf5", "--model", "fixture"], "INPUT '-': elmo embed cannot read stdin"),
    (["embed", "corpus.txt", "-", "--model", "fixture"], "OUTPUT '-'"),
    (["convert", "fixture", "-"], "OUTPUT '-'"),
    (["plot-curve", "log.jsonl", "-o", "-"], "-o '-'"),
    (["train", "corpus.txt", "--vocab", "missing.txt", "-o", "-"], "--output '-'"),
    (["finetune", "corpus.txt", "--from", "fixture", "-o", "-"], "--output '-'"),
    (["analyze", "fixture", "--out", "-"], "--out '-'"),
])
def test_a_dash_where_a_file_or_folder_is_written_is_refused(argv, option, tmp_path, capsys):
    """`elmo vocab build -o -` wrote files named '-' and '-.counts.tsv' (and other commands a
    file or folder '-'); `elmo embed -` looked for a file '-'. Where '-' cannot be stdin or
    stdout it is now one line saying why, before any work, and nothing named '-' is made."""
    (tmp_path / "corpus.txt").write_text("a b c\nb c\n", encoding="utf-8")
    status, err = _run_in(tmp_path, argv, capsys)
    assert status == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and option in lines[0] and "./- names a" in lines[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


def test_experiment_table_dash_is_stdout(tmp_path, capsys):
    """experiment-table prints its table without -o; `-o -` wrote a file named '-'. It prints."""
    text = json.dumps(_results({("pos", "baseline"): [0.9, 0.91], ("pos", "elmo"): [0.95, 0.96]}, "a"))
    (tmp_path / "results.json").write_text(text, encoding="utf-8")
    assert main(["experiment-table", str(tmp_path / "results.json")]) == 0
    printed = capsys.readouterr().out
    assert printed.count("|") > 4
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["experiment-table", "results.json", "-o", "-"]) == 0
    finally:
        os.chdir(cwd)
    assert capsys.readouterr().out == printed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]
