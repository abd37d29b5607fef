"""The ``elmo`` command's conventions: usage errors, ``-`` as a path, download bars off a
terminal, and Ctrl-C while the package loads."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from elmo.cli import main
from elmo.hub import download, registry
from tests.hub_server import FileServer
from tests.test_hub import OPTIONS, WEIGHTS, fixture_files
from tests.test_tasks_compare import _results

ROOT = Path(__file__).resolve().parents[1]


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


@pytest.mark.parametrize("argv, command", [
    (["train", "corpus.txt", "--min-count", "3"], "elmo train"),
    (["models", "list", "--bogus"], "elmo models list"),
    (["embed", "in.txt", "out.hdf5", "--no-such-option", "--model", "fixture"], "elmo embed"),
])
def test_an_unknown_option_is_the_commands_usage_error(argv, command, capsys):
    """An unknown option of a command was reported by the top parser: "usage: elmo [-h]
    [--version] [--debug] COMMAND ..." and "elmo: error: unrecognized arguments", which shows
    none of the command's options. It is now the command's usage line and name, status 2."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"usage: {command} ") and f"{command}: error: unrecognized arguments: " in err


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


@pytest.fixture
def fixture_model(monkeypatch, tmp_path):
    """A published-model entry served by a local server (started by the test)."""
    monkeypatch.setenv("ELMO_HOME", str(tmp_path / "elmo-home"))
    monkeypatch.delenv("ELMO_OFFLINE", raising=False)
    monkeypatch.setenv("ELMO_DOWNLOAD_RETRIES", "0")

    def entry(server):
        model = registry.PretrainedModel(
            name="test-bars", format="original", language="English", language_code="en",
            training_data="none (test weights)", licence="Apache-2.0",
            urls={"options": server.url(OPTIONS), "weights": server.url(WEIGHTS)})
        monkeypatch.setitem(registry.MODELS, model.name, model)
        return model.name
    return entry


def _spy_on_download_bars(monkeypatch) -> list:
    """Records whether each download was asked to draw its bar (and draws none)."""
    asked = []
    real = download._download

    def spy(url, dest, sha256, progress, log):
        asked.append(progress)
        return real(url, dest, sha256, False, log)
    monkeypatch.setattr(download, "_download", spy)
    return asked


@pytest.mark.parametrize("terminal, argv, drawn", [
    (False, ["models", "get"], False),
    (True, ["models", "get"], True),
    (False, ["info"], False),
    (True, ["info"], True),
])
def test_download_bars_follow_the_terminal_check(terminal, argv, drawn, fixture_model, monkeypatch, capsys):
    """`elmo models get` (and any command that downloads a model it names) drew its download
    bars into log files and pipes; the other commands' bars are drawn only on a terminal, and
    now downloads follow the same check."""
    asked = _spy_on_download_bars(monkeypatch)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal, raising=False)
    with FileServer(fixture_files()) as server:
        assert main(argv + [fixture_model(server)]) == 0
    assert asked and all(shown is drawn for shown in asked)


def test_download_bars_follow_quiet(fixture_model, monkeypatch, tmp_path, capsys):
    """On a terminal, embed's --quiet turned its bar off but not the download's."""
    asked = _spy_on_download_bars(monkeypatch)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    text = tmp_path / "in.txt"
    text.write_text("a b\n", encoding="utf-8")
    with FileServer(fixture_files()) as server:
        assert main(["embed", str(text), str(tmp_path / "out.hdf5"), "--quiet",
                     "--model", fixture_model(server)]) == 0
    assert asked == [False, False]


#: Python source that sends this process SIGINT the moment torch's import starts, the way a
#: user's Ctrl-C falls while a command loads (an import finder put first in line).
CTRL_C_AT_TORCH = textwrap.dedent("""
    import os, signal, sys

    class CtrlCAtTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch":
                os.kill(os.getpid(), signal.SIGINT)
            return None

    sys.meta_path.insert(0, CtrlCAtTorch())
    """)


def _console_entry_point() -> str:
    import tomllib
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["scripts"]["elmo"]


def test_ctrl_c_while_the_package_loads_is_one_line(tmp_path):
    """Ctrl-C in the second or so in which `elmo` imports the package and torch printed
    Python's traceback of an import. The console command's entry point (pyproject.toml) now
    says `elmo: interrupted` and exits 130, as Ctrl-C during a command. The signal is sent the
    moment torch's import starts, the way a user's Ctrl-C falls: as a command runs (`elmo
    --version` and every --help load no torch, see test_cli_imports.py)."""
    module, function = _console_entry_point().split(":")
    script = CTRL_C_AT_TORCH + textwrap.dedent(f"""
        import importlib
        assert "torch" not in sys.modules
        sys.exit(getattr(importlib.import_module({module!r}), {function!r})(["info", "fixture"]))
        """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr, done.stdout) == (130, "elmo: interrupted\n", "")


def test_ctrl_c_while_python_m_elmo_loads_is_one_line(tmp_path):
    """The same under `python -m elmo`, which imports the package before its __main__: the
    package imported torch and every model module eagerly, so a Ctrl-C there was Python's
    traceback. `import elmo` now loads them when first used; the signal still falls the moment
    torch's import starts (a sitecustomize module, which Python imports at its start, puts the
    finder in place), in the real `python -m`."""
    (tmp_path / "sitecustomize.py").write_text(CTRL_C_AT_TORCH)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "elmo", "info", "fixture"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr, done.stdout) == (130, "elmo: interrupted\n", "")


def test_import_elmo_loads_no_torch_and_every_name_loads_when_used():
    """What the test above relies on, and that the names still resolve: each of ``__all__``
    (and a submodule, as `import elmo` gave them before) loads on first use, is then kept, and
    is the object of the module that defines it."""
    script = textwrap.dedent("""
        import importlib, sys
        import elmo
        assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("elmo"))
        for name in elmo.__all__:
            value = getattr(elmo, name)
            assert name in dir(elmo) and vars(elmo)[name] is value, name
            home = importlib.import_module(getattr(value, "__module__", "elmo"))
            assert getattr(home, name) is value, name
        assert elmo.weights is sys.modules["elmo.weights"] and elmo.hub.registry.MODELS
        try:
            elmo.no_such_name
        except AttributeError as e:
            assert str(e) == "module 'elmo' has no attribute 'no_such_name'", e
        else:
            raise AssertionError("no AttributeError")
        """)
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_name_that_is_no_attribute_of_elmo_is_an_attribute_error():
    """A dotted name was looked up as a submodule path: "a.b" raised ModuleNotFoundError (so
    hasattr raised too) and "modules.bilm" gave that module."""
    import elmo
    import elmo.embedding
    for package in (elmo, elmo.embedding):   # (both load their names lazily: elmo.lazy_names)
        for name in ("a.b", ".x", "x.", "modules.bilm", "no such name"):
            assert not hasattr(package, name), name
            with pytest.raises(AttributeError, match=f"^module '{package.__name__}' has no attribute "
                                                     f"{re.escape(repr(name))}$"):
                getattr(package, name)
    assert hasattr(elmo, "modules") and hasattr(elmo, "Elmo")
    assert hasattr(elmo.embedding, "windows") and hasattr(elmo.embedding, "Embedder")


@pytest.mark.parametrize("argv", [
    ["embed", "in.txt", "out.hdf5"],
    ["analyze", "fixture"],
    ["train", "corpus.txt", "--vocab", "vocab.txt", "-o", "run"],
    ["finetune", "corpus.txt", "--from", "default", "-o", "run"],
])
def test_the_set_example_of_each_commands_help_is_one_of_its_settings(argv, tmp_path, monkeypatch, capsys):
    """`elmo embed --help` and `elmo analyze --help` showed `--set lr=0.01`, which both refuse
    as an unknown setting; each command's example now sets one of its own settings."""
    from elmo.cli import build_parser
    with pytest.raises(SystemExit):
        build_parser().parse_args([argv[0], "--help"])
    found = re.search(r"e\.g\. --set (\w+)=(\S+?)\)", " ".join(capsys.readouterr().out.split()))
    assert found, "no --set example in the help"
    key, value = found.groups()
    monkeypatch.chdir(tmp_path)
    assert main(argv + ["--print-config"]) == 0
    settings = json.loads(capsys.readouterr().out)
    assert key in settings, f"the help's --set {key}=... is not a setting of elmo {argv[0]}"
    default = settings[key]
    assert main(argv + ["--set", f"{key}={value}", "--print-config"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)[key] == json.loads(value) != default


@pytest.mark.parametrize("argv", [
    ["info", "small"],
    ["convert", "small", "out"],
    ["demo", "--model", "small"],
    ["embed", "in.txt", "out.hdf5", "--model", "small"],
    ["analyze", "small", "--only", "contrast", "--out", "report"],
    ["neighbors", "the bank", "--word", "bank", "--corpus", "in.txt", "--no-glove", "--model", "small"],
])
def test_every_model_argument_takes_a_published_name_and_says_so(argv, tmp_path, monkeypatch, capsys):
    """The README: every CLI model argument takes a bundled or published name, a folder or a
    URL. They all do (offline, a published name is looked up in the download cache), but
    `elmo demo --help`, `elmo analyze --help` and `elmo neighbors --help` said a bundled name
    or a folder only."""
    from elmo.cli import build_parser
    with pytest.raises(SystemExit):
        build_parser().parse_args([argv[0], "--help"])
    text = " ".join(capsys.readouterr().out.split())
    model_help = re.search(r"(?:^| )(?:--model MODEL|model) +(bundled .*?)(?: --| positional| options:|$)", text)
    assert model_help, f"elmo {argv[0]} --help names no model argument"
    assert "published" in model_help.group(1) and "URL" in model_help.group(1), model_help.group(1)
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    monkeypatch.setenv("ELMO_HOME", str(tmp_path / "home"))
    (tmp_path / "in.txt").write_text("the bank closed .\n", encoding="utf-8")
    status, err = _run_in(tmp_path, argv, capsys)
    assert status == 1 and "ELMO_OFFLINE is set" in err, err     # it went to the published model


def test_train_reads_its_text_back_from_the_config_it_printed(tmp_path, monkeypatch, capsys):
    """README: `elmo train ... --print-config` prints the settings and `--config FILE` reads them
    back; the file holds the training text ("train"), yet `elmo train --config FILE` stopped
    with "the following arguments are required: corpus". The text is now the file's when
    CORPUS is left out, and CORPUS given wins over it."""
    monkeypatch.chdir(tmp_path)
    assert main(["train", "corpus.txt", "--vocab", "vocab.txt", "-o", "run", "--print-config"]) == 0
    (tmp_path / "run.json").write_text(capsys.readouterr().out, encoding="utf-8")
    assert main(["train", "--config", "run.json", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["train"] == ["corpus.txt"]
    assert main(["train", "other.txt", "--config", "run.json", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["train"] == ["other.txt"]
    (tmp_path / "empty.json").write_text('{"train": []}', encoding="utf-8")
    for argv in (["train"], ["train", "--config", "empty.json"]):     # no text anywhere: usage error
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2
        assert "the following arguments are required: corpus" in capsys.readouterr().err


def _command_parsers(parser, name="elmo"):
    """(``elmo CMD [ACTION]``, its parser) for every command and sub-command."""
    import argparse
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, sub_parser in action.choices.items():
                yield from _command_parsers(sub_parser, f"{name} {sub}")
    yield name, parser


def test_every_option_an_options_help_names_is_one_of_that_commands():
    """`elmo finetune --help` said --lr-decay "needs --valid", an option finetune does not have
    (it validates on its held-out text). An option named after another command's name
    ("elmo train --vocab", "give train --vocab") is that command's, and left aside."""
    from elmo.cli import build_parser
    parser = build_parser()
    commands = {name.split()[-1] for name, _ in _command_parsers(parser)}
    wrong = []
    for name, command in _command_parsers(parser):
        options = {flag for action in command._actions for flag in action.option_strings}
        for action in command._actions:
            for before, flag in re.findall(r"(\S+)?\s*(?<![\w-])(--[a-z][a-z0-9-]*)", action.help or ""):
                if flag not in options and before not in commands:
                    wrong.append(f"{name} {'/'.join(action.option_strings) or action.dest}: {flag}")
    assert not wrong


def _long_options(parser) -> dict:
    """A command parser's long options -> the option strings of their action."""
    return {o: set(a.option_strings) for a in parser._actions for o in a.option_strings if o.startswith("--")}


#: The modules whose ``build_parser()`` is a command line: the elmo command's and the
#: ``python -m`` scripts'.
PARSER_MODULES = ["elmo.cli", "elmo.demo.build_data", "elmo.training.precision", "elmo.training.ship"]


def _every_parser(parser):
    """``parser`` and every (sub)command parser under it."""
    import argparse
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _every_parser(sub)


@pytest.mark.parametrize("module", PARSER_MODULES)
def test_no_parser_takes_a_prefix_of_an_option_for_the_option(module):
    """argparse takes any unique prefix for the whole option (allow_abbrev): `elmo embed ...
    --overw` was --overwrite and `--lay top` --layers, so a script that abbreviated broke as
    soon as another option began so, or silently got another option after a rename. Every
    parser of the command lines now takes an option only as spelled (each prefix, alone or
    with =VALUE, is an unknown argument: the usage error that names the option meant)."""
    import importlib
    taken = []
    for parser in _every_parser(importlib.import_module(module).build_parser()):
        options = {o for action in parser._actions for o in action.option_strings}
        for option in sorted(o for o in options if o.startswith("--")):
            for prefix in (option[:end] for end in range(3, len(option)) if option[:end] not in options):
                for typed in (prefix, prefix + "=1"):
                    found = parser._parse_optional(typed)
                    if found is None or found[0] is not None:
                        taken.append(f"{parser.prog}: {typed} -> {option}")
    assert taken == []


def test_the_scripts_of_benchmarks_and_experiments_take_no_prefix_of_an_option_either():
    """The measuring scripts are run from RESULTS.md and shell scripts by the command lines
    written there: one that abbreviated an option would break, or silently mean another
    option, once a new option shared the prefix. Each parser they build is read from the
    source (they build it inside ``main``) and must pass ``allow_abbrev=False``."""
    import ast
    root = Path(__file__).resolve().parent.parent
    built = []
    for path in sorted([*root.glob("benchmarks/**/*.py"), *root.glob("experiments/**/*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "ArgumentParser":
                flags = {k.arg: k.value for k in node.keywords}
                takes_prefixes = not (isinstance(flags.get("allow_abbrev"), ast.Constant)
                                      and flags["allow_abbrev"].value is False)
                built.append((f"{path.relative_to(root)}:{node.lineno}", takes_prefixes))
    assert len(built) >= 10   # (the parsers are found at all)
    assert [where for where, takes_prefixes in built if takes_prefixes] == []


@pytest.mark.parametrize("argv, command, typed, meant", [
    (["experiment", "cfg.json", "--seed", "3"], "elmo experiment", "--seed 3", "--seeds"),
    (["experiment", "cfg.json", "--seed=3"], "elmo experiment", "--seed=3", "--seeds"),
    (["predict", "model", "--to", "x.txt"], "elmo predict", "--to x.txt", "--tokenize"),
    (["embed", "in.txt", "out.hdf5", "--layer", "top"], "elmo embed", "--layer top", "--layers"),
    (["train", "c.txt", "--lr-decay-treshold", "0.1"], "elmo train", "--lr-decay-treshold 0.1",
     "--lr-decay-threshold"),
    (["embed", "in.txt", "out.hdf5", "--overw"], "elmo embed", "--overw", "--overwrite"),
    (["embed", "in.txt", "out.hdf5", "--lay", "top"], "elmo embed", "--lay top", "--layers"),
    (["train", "c.txt", "--vocab", "v.txt", "-o", "run", "--max-st", "3"], "elmo train", "--max-st 3",
     "--max-steps"),
])
def test_an_unknown_option_names_the_close_ones(argv, command, typed, meant, capsys):
    """An unknown option said only "unrecognized arguments"; it now names the command's
    options it may have meant (never a hidden one, such as embed's AllenNLP spellings)."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"{command}: error: unrecognized arguments: {typed} (did you mean {meant}")
    assert "--average" not in line and "--top" not in line


@pytest.mark.parametrize("argv", [
    ["experiment", "cfg.json"], ["analyze", "fixture"], ["data", "build-corpus"]])
def test_the_folder_written_is_named_by_output_o_and_out_alike(argv):
    """`elmo experiment`, `analyze` and `data build-corpus` took only --out, where train,
    finetune, vocab build, predict, plot-curve and experiment-table take --output and -o:
    `elmo experiment cfg.json --output res` was a usage error. Each takes all three now."""
    from elmo.cli import build_parser
    for flag in ("--out", "--output", "-o"):
        assert build_parser().parse_args([*argv, flag, "res"]).out == "res"


def test_every_output_and_progress_option_has_every_spelling():
    """The shared options have one set of names: a command's --out or --output is also the other
    (--out as an abbreviation, where it is not spelled out) and -o; its --quiet (embed, predict,
    experiment) is also --no-progress (train, finetune) and the other way round."""
    from elmo.cli import build_parser
    missing = []
    for name, command in _command_parsers(build_parser()):
        for option, aliases in _long_options(command).items():
            for family in ({"--out", "--output", "-o"}, {"--quiet", "--no-progress"}):
                if option in family and not family - {"--out"} <= aliases:
                    missing.append(f"{name} {option}: {sorted(family - aliases)}")
                if option in family and "-o" in family and command._parse_optional("--out")[1] not in aliases:
                    missing.append(f"{name} {option}: --out")
    assert missing == []


@pytest.mark.parametrize("argv", [
    ["train", "c.txt", "--vocab", "v.txt", "-o", "run", "--quiet"],
    ["finetune", "c.txt", "--from", "fixture", "-o", "run", "--quiet"],
    ["embed", "in.txt", "out.hdf5", "--no-progress"],
])
def test_quiet_and_no_progress_turn_the_bar_off_in_every_command(argv, capsys):
    """`elmo train --quiet` was a usage error (training spelled it --no-progress only) and
    `elmo embed --no-progress` too (embed spelled it --quiet only)."""
    assert main([*argv, "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["progress"] is False


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("carry", [[], ["--carry-state"]])
def test_perplexity_shows_its_progress_on_a_terminal_only(carry, tmp_path, monkeypatch, capsys):
    """`elmo perplexity` said nothing until its full softmax had read the whole text (minutes
    for a large vocabulary). It draws a bar over the forward targets on a terminal (words plus
    one boundary a sentence: 7 + 5 here), none in a log file or pipe, none with --quiet."""
    from elmo.training.export import export_model
    from training_helpers import tiny_lm_and_batch
    text = tmp_path / "t.txt"
    model, vocab, _ = tiny_lm_and_batch(text, "a b c d e f\ng h a b\n", 2, 5)
    folder = str(export_model(model, vocab, tmp_path / "lm", {}))
    argv = ["perplexity", folder, str(text), "--device", "cpu", *carry]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert printed.err == "" and "average" in printed.out      # (capsys: no terminal)
    for quiet, drawn in (([], True), (["--quiet"], False), (["--no-progress"], False)):
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        assert main([*argv, *quiet]) == 0
        assert ("perplexity" in terminal.getvalue() and "12/12" in terminal.getvalue()) is drawn
        assert (terminal.getvalue() == "") is not drawn
        assert capsys.readouterr().out == printed.out


@pytest.mark.parametrize("argv", [["--debug", "info", "no-such-model"], ["info", "no-such-model", "--debug"],
                                  ["models", "path", "no-such-model", "--debug"]])
def test_debug_shows_the_traceback_before_or_after_the_command(argv, monkeypatch, capsys):
    """`elmo info X --debug` (the usual place to add a flag to a command that failed) was
    "unrecognized arguments: --debug", status 2: only `elmo --debug info X` showed the error
    itself. Either place now lets the error through with its traceback."""
    monkeypatch.delenv("ELMO_DEBUG", raising=False)
    with pytest.raises((ValueError, OSError, LookupError)) as raised:
        main(argv)
    assert "no-such-model" in str(raised.value)
    capsys.readouterr()
    assert main([a for a in argv if a != "--debug"]) == 1      # (without it: one line)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("elmo ") and "no-such-model" in lines[0]


def test_vocab_build_counts_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    """`elmo vocab build` read a corpus of a billion words (minutes) without a sign of life.
    It counts the sentences read on a terminal; in a log file or a pipe, and with --quiet or
    --no-progress, nothing but its notes goes to stderr."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c\nb c\nc\n", encoding="utf-8")
    for n, (terminal, quiet) in enumerate([(False, []), (True, []), (True, ["--quiet"]), (True, ["--no-progress"])]):
        err = _Terminal() if terminal else io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        assert main(["vocab", "build", str(corpus), "-o", str(tmp_path / f"v{n}.txt"), *quiet]) == 0
        drawn = terminal and not quiet
        assert ("counting" in err.getvalue() and "3" in err.getvalue()) is drawn
        assert (err.getvalue() == "") is not drawn
        assert (tmp_path / f"v{n}.txt").read_text() == "<S>\n</S>\n<UNK>\nc\nb\na\n"
    capsys.readouterr()


def test_no_help_reads_as_a_default_it_does_not_have():
    """`elmo finetune --help` said --from takes "a model's name (default)", which reads as an
    option that defaults to something, though --from is required (the bundled model's name,
    default, was meant); `elmo perplexity --help` said the same of MODEL, and `elmo embed
    --help` ended --model with "(default default)". A required argument's help says no
    "(default)" and no help repeats the word as its default."""
    from elmo.cli import build_parser
    misleading = []
    for name, command in _command_parsers(build_parser()):
        for action in command._actions:
            text = " ".join((action.help or "").split())
            if (action.required and re.search(r"\(default[ )]", text)) or "(default default)" in text:
                misleading.append(f"{name} {'/'.join(action.option_strings) or action.dest}: {text}")
    assert not misleading
