"""The embed and analyze jobs as typed configs (EmbedConfig, AnalysisConfig): the options made
from them, --config / --set / --print-config, and embed_file's config and keyword settings."""
from __future__ import annotations

import dataclasses
import json
import shlex

import h5py
import pytest

from elmo.analysis.report import AnalysisConfig
from elmo.cli import build_parser, main
from elmo.commands.analysis import analysis_config
from elmo.commands.embed import command_defaults, command_line
from elmo.embedding import EmbedConfig, embed_file
from elmo.jobconfig import from_args
from tests.conftest import random_bilm


def _text(tmp_path, lines=("the bank closed .", "", "she sat by the river bank .")):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _settings(path):
    with h5py.File(path, "r") as f:
        return json.loads(f.attrs["settings"]), f.attrs["command_line"]


# ------------------------------------------------------------------------------ embed

def test_embed_cli_defaults_and_the_command_line_it_stores():
    args = build_parser().parse_args(["embed", "in.txt", "out.hdf5"])
    cfg = from_args(EmbedConfig, args, defaults=command_defaults())
    assert cfg == EmbedConfig(model="default", progress=True, device="auto")
    # every option spelled out, in the form earlier versions stored (and still parse)
    assert command_line("in.txt", "out.hdf5", cfg) == (
        "elmo embed in.txt out.hdf5 --model default --layers all --gamma 1.0 --dtype float32 --errors strict "
        "--batch-size 64 --max-tokens 256 --overlap 64 --cache-min-count 2 --cache-max-words 50000 "
        "--cache-sample 100000 --segment-lines 4096 --device auto --wait-timeout 1800.0")
    changed = dataclasses.replace(cfg, sort_by_length=False, token_cache=False, stateful=True, tokenize="zh",
                                  cache_sample_lines=7, device="cpu", progress=False)
    again = build_parser().parse_args(shlex.split(command_line("in.txt", "o.hdf5", changed))[1:])
    # (the overlap used is spelled out: the default, min(64, max_tokens // 2), resolved)
    assert from_args(EmbedConfig, again, defaults=command_defaults()) == dataclasses.replace(
        changed, progress=True, overlap=64)
    shorter = command_line("in.txt", "o.hdf5", dataclasses.replace(cfg, max_tokens=50))
    assert "--max-tokens 50 --overlap 25 " in shorter


@pytest.mark.parametrize("paths", [("-in.txt", "-out.hdf5"), ("in.txt", "-out.hdf5"), ("-in.txt", "out.hdf5")])
def test_embed_stored_command_line_parses_back_with_values_that_start_with_a_dash(paths):
    # a path, a model folder or a number in exponent form that starts with "-" was read back as
    # an option: the stored command stopped with a usage error instead of resuming the run
    cfg = dataclasses.replace(EmbedConfig(model="default", progress=True), model="-my-model",
                              layers="mix:1,1,1", gamma=-1e-05, device="cpu")
    args = build_parser().parse_args(shlex.split(command_line(*paths, cfg))[1:])
    assert (args.input, args.output) == paths
    assert from_args(EmbedConfig, args, defaults=command_defaults()) == dataclasses.replace(cfg, overlap=64)


def test_embed_print_config_feeds_back_as_config(tmp_path, capsys):
    argv = ["embed", "in.txt", "out.hdf5", "--model", "fixture", "--layers", "top", "--batch-size", "3",
            "--no-sort", "--tokenize", "--cache-sample", "10", "--quiet", "--set", "cache_max_words=7"]
    assert main(argv + ["--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == dataclasses.asdict(EmbedConfig(
        model="fixture", layers="top", batch_size=3, sort_by_length=False, tokenize="en", cache_sample_lines=10,
        progress=False, cache_max_words=7, device="auto"))
    (tmp_path / "embed.json").write_text(json.dumps(printed))
    again = ["embed", "in.txt", "out.hdf5", "--config", str(tmp_path / "embed.json"), "--print-config"]
    assert main(again) == 0
    assert json.loads(capsys.readouterr().out) == printed
    assert main(again + ["--batch-size", "5"]) == 0   # an option given wins over the file
    assert json.loads(capsys.readouterr().out) == {**printed, "batch_size": 5}
    assert not (tmp_path / "out.hdf5").exists()


def test_embed_set_reaches_embed_file(tmp_path, capsys):
    inp, out = _text(tmp_path), tmp_path / "out.hdf5"
    assert main(["embed", str(inp), str(out), "--model", "fixture", "--quiet", "--batch-size", "2",
                 "--set", "segment_lines=2", "--set", "batch_size=3", "--set", "layers=top"]) == 0
    settings, cmd = _settings(out)
    assert (settings["segment_lines"], settings["batch_size"], settings["layers"]) == (2, 3, "top")
    assert "--segment-lines 2 --" in cmd and "--batch-size 3 " in cmd


def test_embed_unknown_set_key_is_one_error(tmp_path, capsys):
    inp = _text(tmp_path)
    assert main(["embed", str(inp), str(tmp_path / "o.hdf5"), "--model", "fixture", "--quiet",
                 "--set", "batchsize=3"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown setting batchsize" in err
    assert main(["embed", str(inp), str(tmp_path / "o.hdf5"), "--set", "gamma=big"]) == 1
    assert "setting gamma: expected float, got 'big'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [inp]


def test_embed_file_takes_a_config_and_keyword_settings(tmp_path):
    inp, bilm = _text(tmp_path), random_bilm(seed=3)
    cfg = EmbedConfig(batch_size=2, segment_lines=2, layers="average", token_cache=False)
    out = embed_file(inp, tmp_path / "a.hdf5", bilm, cfg, batch_size=1, command_line="x")
    settings, cmd = _settings(out)
    assert (settings["batch_size"], settings["segment_lines"], settings["layers"]) == (1, 2, "average")
    assert settings["token_cache"] is None and cmd == "x"
    assert cfg.batch_size == 2   # the caller's config is left as it was
    with pytest.raises(TypeError, match="unexpected keyword argument 'bach_size'"):
        embed_file(inp, tmp_path / "b.hdf5", bilm, bach_size=4)
    assert not (tmp_path / "b.hdf5").exists()


# ---------------------------------------------------------------------------- analyze

def _analyze_config(argv):
    return analysis_config(build_parser().parse_args(["analyze", "fixture", *argv]))


@pytest.mark.parametrize("explicit", [False, True])
def test_analysis_options_parse_back_to_the_config(explicit):
    changed = AnalysisConfig(seed=3, pos_train_sentences=50, pos_test_sentences=7, pos_l2=2.5e-7,
                             pos_iterations=9, wsd_max_lemmas=20, wsd_test_fraction=0.25,
                             contrast_file="my pairs.tsv", contrast_l2=0.5, neighbors_corpus="brown:test",
                             neighbors_sentences=11, neighbors_k=2, pca_word="bank", mix_weights="w.json",
                             similarity_sets="my pairs.tsv,simlex999", similarity_corpus="brown:test",
                             untrained_control=False, batch_size=4)
    assert all(getattr(changed, f.name) != f.default for f in dataclasses.fields(AnalysisConfig))
    for cfg in (AnalysisConfig(), changed, AnalysisConfig(untrained_control=True, pos_l2=1e-3)):
        assert _analyze_config(cfg.options(explicit=explicit)) == cfg
    assert AnalysisConfig().options() == []


def test_analyze_print_config_feeds_back_as_config(tmp_path, capsys):
    assert main(["analyze", "fixture", "--seed", "4", "--no-untrained-control", "--set", "neighbors_k=3",
                 "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == dataclasses.asdict(AnalysisConfig(seed=4, untrained_control=False, neighbors_k=3))
    (tmp_path / "a.json").write_text(json.dumps(printed))
    assert main(["analyze", "fixture", "--config", str(tmp_path / "a.json"), "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out) == printed
    assert main(["analyze", "fixture", "--set", "neighbours_k=3"]) == 1
    assert "unknown setting neighbours_k" in capsys.readouterr().err
