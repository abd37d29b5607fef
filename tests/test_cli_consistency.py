"""The commands agree with each other: every command that runs a model takes ``--device`` (and
hands it to the library), error lines name the whole command and the option as typed, and
every ``--threads`` says what 0 means."""
from __future__ import annotations

import argparse
import json
import re
import signal

import pytest
import torch

from elmo.cli import main

BOGUS = "--device 'bogus': expected cpu, cuda, cuda:N or auto"


def _error_line(capsys) -> str:
    """The one line the command wrote on stderr (nothing on stdout, no traceback)."""
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and len(captured.err.splitlines()) == 1, captured.err
    return captured.err.rstrip("\n")


def _corpus(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank raised its rates .\nwe sat on the river bank .\n", encoding="utf-8")
    return corpus


def _argv(command: str, tmp_path) -> list:
    """A command line of ``command`` that would run (up to its model) without --device."""
    if command == "predict":
        return ["predict", str(tmp_path / "no-model"), str(_corpus(tmp_path)), "--quiet"]
    if command == "experiment":
        config = tmp_path / "cfg.json"
        config.write_text(json.dumps({"tasks": [{"task": "pos"}]}), encoding="utf-8")
        return ["experiment", str(config), "--print-config"]
    if command == "analyze":
        return ["analyze", "fixture", "--out", str(tmp_path / "report"), "--only", "contrast"]
    return ["neighbors", "the bank closed .", "--word", "bank", "--model", "fixture", "--no-glove",
            "--corpus", str(_corpus(tmp_path)), "--index-dir", str(tmp_path / "ix"), "-k", "2"]


@pytest.mark.parametrize("command", ["predict", "experiment", "analyze", "neighbors"])
def test_a_device_that_is_not_one_is_one_line_naming_device(command, tmp_path, capsys):
    """predict, experiment, analyze and neighbors had no --device (embed, train, finetune and
    perplexity have it): a GPU user could not run them there from the command line. A name
    torch does not know is refused as theirs is, one line, status 1, before any work."""
    assert main(_argv(command, tmp_path) + ["--device", "bogus"]) == 1
    assert _error_line(capsys) == f"elmo {command}: error: {BOGUS}"
    assert not (tmp_path / "report").exists() and not (tmp_path / "ix").exists()


def test_predicts_device_reaches_the_loaded_model(tmp_path, capsys, monkeypatch):
    from elmo.tasks.models import TaskModel
    seen = []

    def load(folder, bilm=None, device=None, glove=None):
        seen.append(device)
        raise ValueError("stop here")
    monkeypatch.setattr(TaskModel, "load", load)
    argv = _argv("predict", tmp_path)
    assert main(argv + ["--device", "cpu"]) == 1 and main(argv) == 1
    capsys.readouterr()
    auto = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
    assert seen == [torch.device("cpu"), auto]    # (the default: auto, as embed's and train's)


def test_experiments_device_overrides_the_configs(tmp_path, capsys):
    argv = _argv("experiment", tmp_path)
    assert main(argv + ["--device", "cpu"]) == 0
    assert json.loads(capsys.readouterr().out)["device"] == "cpu"
    assert main(argv) == 0                        # left out: the config's (none here)
    assert json.loads(capsys.readouterr().out)["device"] is None


def test_analyzes_device_reaches_run_analysis(tmp_path, capsys, monkeypatch):
    from elmo.analysis import report
    seen = []

    def run_analysis(model, out, config, only, device=None, progress=False, overwrite=False):
        seen.append(device)
        return {"findings": {}}
    monkeypatch.setattr(report, "run_analysis", run_analysis)
    assert main(_argv("analyze", tmp_path) + ["--device", "cpu"]) == 0
    assert seen == [torch.device("cpu")]


@pytest.fixture
def loads(monkeypatch):
    """The devices elmo.from_pretrained is asked for, call by call."""
    import elmo
    seen: list = []
    load = elmo.from_pretrained

    def spy(name, **kwargs):
        seen.append(kwargs.get("device"))
        return load(name, **kwargs)
    monkeypatch.setattr(elmo, "from_pretrained", spy)
    return seen


def test_run_analysis_loads_the_model_on_its_device(tmp_path, loads):
    from elmo.analysis import report
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"role\tthe {a} saw the {b} .\tthe {b} saw the {a} .\t{a}\tagent\tpatient\n"
                             for a, b in [("dog", "cat"), ("boy", "girl"), ("king", "queen"), ("fox", "owl")]))
    config = report.AnalysisConfig(contrast_file=str(pairs), untrained_control=False)
    report.run_analysis("fixture", tmp_path / "out", config, only=["contrast"], log=lambda *_: None,
                        device="cpu")
    assert loads == ["cpu"]


def test_the_untrained_control_runs_where_the_model_does():
    """The control of analyze's sections was built on the CPU whatever the model's device: an
    analysis on a GPU ran its controls on the CPU. The meta device stands in for a GPU here."""
    import elmo
    from elmo.analysis.vectors import untrained_copy
    bilm = elmo.from_pretrained("fixture")
    on_cpu = untrained_copy(bilm, seed=3)
    assert next(on_cpu.parameters()).device.type == "cpu"
    assert next(untrained_copy(bilm.to("meta"), seed=3).parameters()).device.type == "meta"
    again = untrained_copy(elmo.from_pretrained("fixture"), seed=3)   # the same weights for a seed
    assert all(torch.equal(a, b) for a, b in zip(on_cpu.state_dict().values(), again.state_dict().values()))


def test_neighbors_runs_on_the_device_given(tmp_path, capsys, loads):
    argv = _argv("neighbors", tmp_path)
    assert main(argv + ["--device", "cpu"]) == 0
    with_device = capsys.readouterr().out
    assert loads == [torch.device("cpu")]
    assert main(argv) == 0                       # (from the index the first run cached)
    cached = capsys.readouterr().out
    assert cached == with_device[with_device.index("layer 1"):]


# ------------------------------------------------------------------------ the command's name

def test_an_error_of_a_subcommand_names_the_whole_command(tmp_path, capsys):
    """"elmo vocab: error: ..." did not say which action of vocab failed."""
    assert main(["vocab", "build", str(tmp_path / "none.txt"), "-o", str(tmp_path / "v.txt")]) == 1
    assert _error_line(capsys).startswith("elmo vocab build: error: ")
    assert main(["models", "path", "no-such-model"]) == 1
    assert _error_line(capsys).startswith("elmo models path: error: ")
    assert main(["data", "get", "no-such-corpus"]) == 1            # (data's own guard too)
    assert _error_line(capsys).startswith("elmo data get: error: unknown corpus 'no-such-corpus'")


def test_sigterm_during_a_subcommand_names_the_whole_command(tmp_path, capsys, monkeypatch):
    from elmo.cli import Terminated
    from elmo.training import vocab_build

    def stopped(*args, **kwargs):
        raise Terminated()
    monkeypatch.setattr(vocab_build, "build_vocabulary_files", stopped)
    assert main(["vocab", "build", "x.txt", "-o", str(tmp_path / "v.txt")]) == 128 + signal.SIGTERM
    assert _error_line(capsys) == "elmo vocab build: stopped by SIGTERM"


# ------------------------------------------------------------------------ the option's name

@pytest.mark.parametrize("option, says", [
    (["--batch-size", "0"], "--batch-size must be at least 1, got 0"),
    (["--max-tokens", "0"], "--max-tokens must be at least 1, got 0"),
    (["--max-tokens", "4", "--overlap", "4"], "--overlap must be in [0, --max-tokens), got 4 with --max-tokens=4"),
    (["--cache-sample", "0"], "--cache-sample must be at least 1, got 0 (--no-token-cache turns the cache off)"),
    (["--segment-lines", "0"], "--segment-lines must be at least 1, got 0"),
    (["--wait-timeout", "0"], "--wait-timeout must be a positive number of seconds"),
    (["--device", "bogus"], BOGUS),
    (["--set", "batch_size=0"], "--set batch_size must be at least 1, got 0"),
    (["--threads", "-1"], "--threads must be at least 0, got -1"),
])
def test_embeds_errors_name_the_option_as_typed(option, says, tmp_path, capsys):
    """`elmo embed --batch-size 0` said "batch_size must be at least 1" (the library's name),
    where `elmo perplexity --batch-size 0` says "--batch-size"."""
    argv = ["embed", str(_corpus(tmp_path)), str(tmp_path / "out.hdf5"), "--model", "fixture", "--quiet"]
    assert main(argv + option) == 1
    assert _error_line(capsys).startswith(f"elmo embed: error: {says}")
    assert not (tmp_path / "out.hdf5").exists()


@pytest.mark.parametrize("command", ["predict", "analyze", "demo", "experiment", "perplexity"])
def test_a_negative_thread_count_names_threads(command, tmp_path, capsys):
    """(predict took it for 1 thread, demo named the library's parameter, experiment the
    config's key)"""
    argv = {"demo": ["demo"], "perplexity": ["perplexity", "fixture", str(_corpus(tmp_path))]}.get(
        command) or _argv(command, tmp_path)
    assert main(argv + ["--threads", "-1"]) == 1
    assert _error_line(capsys) == f"elmo {command}: error: --threads must be at least 0, got -1"


@pytest.mark.parametrize("seeds", ["0", "10001"])
def test_experiments_seeds_are_named_as_typed(seeds, tmp_path, capsys):
    """(it read "CONFIG: seeds must be a count ...", the config file's key, which the user had
    not written)"""
    assert main(_argv("experiment", tmp_path) + ["--seeds", seeds]) == 1
    assert _error_line(capsys) == f"elmo experiment: error: --seeds must be a count from 1 to 10000; got {seeds}"


@pytest.mark.parametrize("option, says", [
    (["--occurrence", "0"], "--occurrence must be at least 1, got 0"),
    (["--batch-size", "0"], "--batch-size must be at least 1, got 0"),
])
def test_neighbors_numbers_are_named_as_typed(option, says, tmp_path, capsys):
    assert main(_argv("neighbors", tmp_path) + option) == 1
    assert _error_line(capsys) == f"elmo neighbors: error: {says}"


def test_in_option_terms_renames_settings_only_where_they_stand_as_names():
    from elmo.embedding.config import EmbedConfig
    from elmo.jobconfig import in_option_terms
    assert in_option_terms(EmbedConfig, "batch_size must be at least 1") == "--batch-size must be at least 1"
    assert (in_option_terms(EmbedConfig, "x.h5 differs in: batch_size, segment_lines; rerun")
            == "x.h5 differs in: --batch-size, --segment-lines; rerun")
    for kept in ("runs/batch_size/out.h5: no such file",     # (a path)
                 "sort_by_length must be True or False",     # (a switch: its option is --no-sort)
                 "the overlap must be small",                 # (a plain word, not the subject)
                 "my_batch_size must be 1"):                  # (another name)
        assert in_option_terms(EmbedConfig, kept) == kept
    # (the library's device errors name the device unquoted: "device cuda:1: ...")
    assert in_option_terms(EmbedConfig, "device cuda:1: no such GPU") == "--device cuda:1: no such GPU"
    assert in_option_terms(EmbedConfig, "the device cuda: x") == "the device cuda: x"


def test_embeds_device_errors_name_the_option(tmp_path, capsys):
    """elmo embed --device meta (or cuda without CUDA) said "device meta: ...", the library's
    parameter, where every other command said "--device" as typed."""
    argv = ["embed", str(_corpus(tmp_path)), str(tmp_path / "out.hdf5"), "--model", "fixture"]
    assert main(argv + ["--device", "meta"]) == 1
    assert _error_line(capsys).startswith("elmo embed: error: --device meta: the meta device holds no values")


# ------------------------------------------------------------------------ --threads

def _threads_options():
    from elmo.cli import build_parser, _parsers
    for parser in _parsers(build_parser()):
        for action in parser._actions:
            if "--threads" in action.option_strings:
                yield parser.prog, action


def test_every_threads_option_says_that_0_is_torchs_choice():
    found = list(_threads_options())
    assert len(found) >= 8
    assert [prog for prog, action in found if "0: torch's choice" not in (action.help or "")] == []
    assert all(isinstance(action, argparse.Action) and "default" in action.help for _, action in found)


def test_predicts_threads_0_is_torchs_choice(tmp_path, capsys, monkeypatch):
    """predict took --threads 0 (and -5) for 1 thread, where every other command leaves
    torch's choice for 0 (and refuses a negative count)."""
    from elmo import runtime
    seen = []
    monkeypatch.setattr(runtime, "set_threads", lambda n, what="threads": seen.append(n))
    argv = _argv("predict", tmp_path)
    assert main(argv + ["--threads", "0"]) == 1 and main(argv) == 1
    capsys.readouterr()
    assert seen == [0, 1]


# ------------------------------------------------------------------------- --device

def test_every_device_option_says_what_it_takes_and_its_default():
    """(embed's said "torch device (default: cuda:LOCAL_RANK if available, else cpu)", where
    every other command listed cpu, cuda, cuda:N or auto)"""
    from elmo.cli import _parsers, build_parser
    from elmo.jobconfig import DEVICE_CHOICES
    found = [(parser.prog, action.help or "") for parser in _parsers(build_parser())
             for action in parser._actions if "--device" in action.option_strings]
    assert {"elmo embed", "elmo train", "elmo analyze", "elmo experiment"} <= {prog for prog, _ in found}
    assert [prog for prog, text in found if not text.startswith(DEVICE_CHOICES) or "default" not in text] == []


def test_embeds_device_auto_is_each_ranks_own_gpu_as_its_default(tmp_path, monkeypatch):
    """auto went to resolve_device, whose auto is cuda:0: every rank of a torchrun job on the
    first GPU, where the default (and the help) give each rank cuda:LOCAL_RANK. CUDA is
    simulated: only the device handed on counts."""
    from elmo import embed_file
    from elmo.embedding import run
    from elmo.runtime import resolve_device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    seen = []
    monkeypatch.setattr(run, "_embed_file_locked", lambda *a, device, **k: seen.append(device))
    for device in (None, "auto"):
        embed_file(_corpus(tmp_path), tmp_path / "out.hdf5", "fixture", layers="top", device=device)
    assert [resolve_device(d, None) for d in seen] == [torch.device("cuda:1")] * 2


def test_the_cache_folders_default_is_said_as_the_code_takes_it():
    """`elmo data --help` and `elmo models --help` said "default ~/.cache/elmo", where the code
    (and the README) take $XDG_CACHE_HOME/elmo first."""
    from elmo.cli import _parsers, build_parser
    found = {p.prog: p.description for p in _parsers(build_parser()) if p.prog in ("elmo data", "elmo models")}
    assert len(found) == 2
    for prog, description in found.items():
        assert "default $XDG_CACHE_HOME/elmo, else ~/.cache/elmo" in " ".join(description.split()), prog


def test_embeds_device_cuda_is_each_ranks_own_gpu_as_trains_is(tmp_path, monkeypatch):
    """``--device cuda`` under torchrun was torch's current GPU, the same for every rank, where
    train (and embed's auto) take it as cuda:LOCAL_RANK. CUDA is simulated: only the device
    handed on counts; cuda:N stays cuda:N."""
    from elmo import embed_file
    from elmo.embedding import run
    from elmo.runtime import resolve_device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    seen = []
    monkeypatch.setattr(run, "_embed_file_locked", lambda *a, device, **k: seen.append(device))
    for device in ("cuda", torch.device("cuda"), "cuda:0"):
        embed_file(_corpus(tmp_path), tmp_path / "out.hdf5", "fixture", layers="top", device=device)
    trains = resolve_device("cuda", local_rank=1)
    assert [resolve_device(d, None) for d in seen] == [trains, trains, torch.device("cuda:0")]


@pytest.mark.parametrize("device", ["auto", "cuda", None])
def test_a_local_rank_past_the_gpus_is_refused_by_embed_as_by_train(device, tmp_path, monkeypatch):
    """Under torchrun with more processes than GPUs, embed wrapped LOCAL_RANK round the GPUs
    (two ranks silently sharing one) where train refused it. Both refuse it now, in one line
    naming the local rank and the GPUs there are. CUDA is simulated: nothing reaches a GPU."""
    from elmo import embed_file
    from elmo.embedding import run
    from elmo.training import distributed
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "2")
    monkeypatch.setattr(run, "_embed_file_locked", lambda *a, **k: pytest.fail("embedded on a shared GPU"))
    says = "local rank 2 (LOCAL_RANK) but this machine has 2 CUDA device(s)"
    with pytest.raises(ValueError, match=r"^device (auto|cuda): " + re.escape(says)):
        embed_file(_corpus(tmp_path), tmp_path / "out.hdf5", "fixture", layers="top", device=device)
    for given in ("auto", "cuda"):
        with pytest.raises(ValueError, match=f"^--device {given}: " + re.escape(says)):
            distributed.setup(given)
    # a GPU named by its number is the user's choice, shared or not
    assert run._ranks_device("cuda:1", "fixture", 2) == "cuda:1"


def test_embeds_local_rank_past_the_gpus_is_one_line_naming_device(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "1")
    argv = ["embed", str(_corpus(tmp_path)), str(tmp_path / "out.hdf5"), "--model", "fixture", "--quiet"]
    assert main(argv) == 1
    assert _error_line(capsys).startswith("elmo embed: error: --device auto: local rank 1 (LOCAL_RANK) but "
                                          "this machine has 1 CUDA device(s)")
    assert not (tmp_path / "out.hdf5").exists()


def test_print_config_shows_the_device_the_run_takes(tmp_path, capsys):
    """`elmo embed --print-config` said "device": null where its help (and train's
    --print-config) say auto: the configuration printed is the one the run takes."""
    corpus = str(_corpus(tmp_path))
    printed = {}
    for argv in (["embed", corpus, str(tmp_path / "out.hdf5")],
                 ["train", corpus, "--vocab", corpus, "--output", str(tmp_path / "run")]):
        assert main(argv + ["--print-config"]) == 0
        printed[argv[0]] = json.loads(capsys.readouterr().out)["device"]
    assert printed == {"embed": "auto", "train": "auto"}
    assert main(["embed", corpus, str(tmp_path / "out.hdf5"), "--device", "cpu", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["device"] == "cpu"


@pytest.mark.parametrize("command", ["embed", "train"])
def test_a_bad_value_from_the_config_file_is_named_as_the_file_spells_it(command, tmp_path, capsys):
    """A number out of range in the --config file was named by its option ("--batch-size must
    be at least 1"), which the user had not typed; it names the file and its key now. Given
    as an option (over the file's value) it is still named by the option; given by --set
    (over both), as --set names it (it too was named "--batch-size")."""
    corpus = str(_corpus(tmp_path))
    config = tmp_path / "settings.json"
    config.write_text(json.dumps({"batch_size": 0}), encoding="utf-8")
    argv = {"embed": ["embed", corpus, str(tmp_path / "out.hdf5"), "--model", "fixture", "--quiet"],
            "train": ["train", corpus, "--vocab", corpus, "--output", str(tmp_path / "run")]}[command]
    assert main(argv + ["--config", str(config)]) == 1
    assert _error_line(capsys) == f"elmo {command}: error: --config {config}: batch_size must be at least 1, got 0"
    assert main(argv + ["--config", str(config), "--batch-size", "-2"]) == 1
    assert _error_line(capsys) == f"elmo {command}: error: --batch-size must be at least 1, got -2"
    for given in (["--config", str(config)], ["--batch-size", "4"], []):
        assert main(argv + given + ["--set", "batch_size=-2"]) == 1
        assert _error_line(capsys) == f"elmo {command}: error: --set batch_size must be at least 1, got -2"
    if command == "embed":      # (the setting at fault is named, not another one --set gave)
        assert main(argv + ["--set", "batch_size=3", "--set", "overlap=-1"]) == 1
        assert _error_line(capsys) == "elmo embed: error: --set overlap must be at least 0, got -1"
    assert not (tmp_path / "out.hdf5").exists() and not (tmp_path / "run").exists()


def test_in_config_terms_renames_only_the_subject_that_came_from_the_file():
    from elmo.jobconfig import in_config_terms
    args = argparse.Namespace(config_file="my.json")
    settings = {"--overlap": "overlap", "--max-tokens": "max_tokens"}
    assert (in_config_terms("--overlap must be in [0, --max-tokens), got 4", args, settings)
            == "--config my.json: overlap must be in [0, --max-tokens), got 4")
    assert in_config_terms("--overlap-x must be 1", args, settings) == "--overlap-x must be 1"
    assert in_config_terms("--batch-size must be at least 1", args, settings) == "--batch-size must be at least 1"
