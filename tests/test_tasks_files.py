"""Tasks from your own files: each kind from a format written here, trained for a few steps;
optional dev; file:line errors; save -> load -> predict equal to evaluation; the command line."""
from __future__ import annotations

import json
import math
import os
import random
import re
import zlib
from pathlib import Path

import pytest
import torch

from elmo.cli import main
from elmo.tasks.datasets import load_task
from elmo.tasks.files import TaskDataError
from elmo.tasks.experiment_config import load_config, normalise_config
from elmo.tasks.runner import run_experiment

ANIMALS = ("cat", "dog", "cow")
WORDS = "the a cat dog cow sat ran on under mat rug big small".split()


def _sentences(n: int, seed: int):
    rng = random.Random(seed)
    return [[rng.choice(WORDS) for _ in range(rng.randint(2, 6))] for _ in range(n)]


def write_conll(path: Path, n: int, seed: int) -> None:
    """Tagging, CoNLL columns: word, a dummy column, BIO tag in the third column."""
    blocks = []
    for s in _sentences(n, seed):
        blocks.append("\n".join(f"{w}\tX\t{'B-ani' if w in ANIMALS else 'O'}" for w in s))
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")


def write_tsv(path: Path, n: int, seed: int) -> None:
    """Classification, TSV with a header: label, then the raw text (to be tokenized)."""
    rows = ["label\tsentence"]
    for s in _sentences(n, seed):
        rows.append(f"{'big' if 'big' in s else 'other'}\t{' '.join(s).capitalize()}.")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def write_jsonl(path: Path, n: int, seed: int) -> None:
    """Pair, JSON lines: premise / hypothesis token lists, label."""
    recs = []
    for a, b in zip(_sentences(n, seed), _sentences(n, seed + 100)):
        recs.append(json.dumps({"premise": a, "hypothesis": " ".join(b),
                                "gold": "overlap" if set(a) & set(b) else "none"}))
    path.write_text("\n".join(recs) + "\n", encoding="utf-8")


TASKS = {
    "tagging": ({"type": "conll", "word": 0, "label": 2}, write_conll, "conll", "span_f1"),
    "classification": ({"type": "tsv", "text": "sentence", "label": "label"}, write_tsv, "tsv",
                       None),
    "pair": ({"type": "jsonl", "text": "premise", "text_b": "hypothesis", "label": "gold"},
             write_jsonl, "jsonl", None),
}


def write_task(root: Path, kind: str, dev: bool = True) -> dict:
    """The data of one kind under root/data/ and its task spec (paths relative to root)."""
    fmt, writer, ext, metric = TASKS[kind]
    data = root / "data"
    data.mkdir(exist_ok=True)
    files = {}
    for split, n in (("train", 24), ("dev", 6), ("test", 8)):
        if split == "dev" and not dev:
            continue
        writer(data / f"{kind}-{split}.{ext}", n, zlib.crc32(f"{kind}{split}".encode()) % 1000)
        files[split] = f"data/{kind}-{split}.{ext}"
    spec = {"task": kind, "name": f"my-{kind}", "format": fmt, "files": files}
    if metric:
        spec["metric"] = metric
    if kind == "classification":
        spec["tokenize"] = True
    return spec


def write_config(root: Path, tasks, **extra) -> Path:
    cfg = {"name": "mine", "seeds": 1, "threads": 1, "bilm": "fixture",
           "embeddings": {"random_dim": 8}, "train": {"epochs": 2, "patience": 1, "batch_size": 8},
           "model": {"hidden": 8, "classifier_hidden": 8}, "tasks": tasks,
           "variants": [{"name": "baseline"}, {"name": "elmo", "elmo": {}}]}
    cfg.update(extra)
    path = root / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def test_each_kind_from_its_own_format_trains_with_paths_relative_to_the_config(tmp_path, monkeypatch):
    specs = [write_task(tmp_path, kind) for kind in TASKS]
    config = write_config(tmp_path, specs)
    monkeypatch.chdir(tmp_path.parent)               # not the config's folder
    results = run_experiment(load_config(config), out=tmp_path / "res", log=lambda s: None)
    rows = {(r["task"], r["variant"]): r for r in results["summary"]}
    assert set(rows) == {(f"my-{k}", v) for k in TASKS for v in ("baseline", "elmo")}
    assert rows[("my-tagging", "baseline")]["metric"] == "span_f1"
    for kind in TASKS:
        data = results["data"][f"my-{kind}"]
        src = data["source"]
        assert src["preset"] is None and src["corpus"] is None and src["kind"] == kind
        for split in ("train", "dev", "test"):
            path = Path(src["files"][split]["path"])
            assert path == (tmp_path / "data" / path.name).resolve()
            import hashlib
            assert src["files"][split]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    cls = load_task(load_config(config)["tasks"][1])
    assert cls.labels == ["big", "other"]
    assert cls.splits["train"][0].tokens[-1] == "."          # tokenized: the period split off
    pair = load_task(load_config(config)["tasks"][2])
    assert all(ex.tokens_b for ex in pair.splits["test"])


def test_without_a_dev_file_part_of_train_is_held_out_or_early_stopping_is_off(tmp_path):
    spec = write_task(tmp_path, "tagging", dev=False)
    spec["files"] = {k: str(tmp_path / v) for k, v in spec["files"].items()}
    held = load_task(spec)
    assert held.sizes()["dev"] == round(0.1 * 24) and held.sizes()["train"] == 24 - held.sizes()["dev"]
    assert held.source["dev"].startswith("2 of 24 training examples held out")
    assert [e.tokens for e in load_task(spec).splits["dev"]] == [e.tokens for e in held.splits["dev"]]
    none = dict(spec, dev_fraction=0)
    cfg = json.loads(write_config(tmp_path, [none]).read_text())
    cfg["train"] = {"epochs": 3, "patience": 1, "batch_size": 8}
    results = run_experiment(normalise_config(cfg), out=tmp_path / "r", log=lambda s: None)
    for run in results["runs"]:
        assert run["epochs"] == 3 and run["best_epoch"] == 3 and math.isnan(run["dev"])
        assert 0.0 <= run["test"] <= 100.0
    assert "no early stopping" in results["data"]["my-tagging"]["source"]["dev"]
    saved = json.loads((tmp_path / "r" / "results.json").read_text())
    assert all(r["dev"] is None for r in saved["runs"])            # strict JSON: NaN as null


@pytest.mark.parametrize("kind, fmt, text, message", [
    ("tagging", {"type": "word_tag"}, "The/at dog/nn\nA/at dog barked/vbd\n",
     ":2: token 'dog' is not word/TAG"),
    ("tagging", {"type": "conll", "word": 0, "label": 2}, "a\tX\tO\nb\tO\n",
     ":2: 2 columns; the format reads column 0 (word) and 2 (label)"),
    ("tagging", {"type": "jsonl", "text": "tokens", "label": "tags"},
     '{"tokens": ["a", "b"], "tags": ["O", "O"]}\n{"tokens": ["a", "b"], "tags": ["O"]}\n',
     ":2: 1 tags for 2 tokens"),
    ("classification", {"type": "tsv", "text": 1, "label": 0}, "pos\tgood\nneg\n",
     ":2: 1 columns, the format needs 2"),
    ("classification", {"type": "tsv", "text": "text", "label": "label"}, "label\ttext\npos\t \n",
     ":2: empty text"),
    ("classification", {"type": "jsonl", "text": "text", "label": "label"},
     '{"text": "fine", "label": "a"}\n\n{"text": "fine", "label": "a",}\n',
     ":3: not JSON"),
    ("classification", {"type": "jsonl", "text": "text", "label": "label"},   # (the last value was taken)
     '{"text": "fine", "label": "a", "label": "b"}\n', ":1: the key 'label' appears twice in one object"),
    ("classification", {"type": "jsonl", "text": ["title", "body"], "label": "label"},
     '{"title": "x", "body": "fine", "label": "a"}\n{"body": "no title", "label": "b"}\n',
     ":2: no field 'title'"),
    ("pair", {"type": "jsonl", "text": "a", "text_b": "b", "label": "label"},
     '{"a": "x", "b": "y", "label": ["l"]}\n', ":1: the label must be a single value"),
])
def test_malformed_lines_name_file_and_line(tmp_path, kind, fmt, text, message):
    path = tmp_path / "train.txt"
    path.write_text(text, encoding="utf-8")
    spec = {"task": kind, "format": fmt, "files": {"train": str(path), "test": str(path)}}
    with pytest.raises(TaskDataError) as err:
        load_task(spec)
    assert str(err.value).startswith(str(path) + ":") and message in str(err.value)


def test_bad_specs_name_the_setting(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("a/b\n")
    files = {"train": str(path), "test": str(path)}
    with pytest.raises(TaskDataError, match="unknown task 'classifcation'"):
        load_task({"task": "classifcation", "files": files})
    with pytest.raises(TaskDataError, match="format conll is for tagging"):
        load_task({"task": "classification", "format": {"type": "conll"}, "files": files})
    with pytest.raises(TaskDataError, match="test file .*nope.txt does not exist"):
        load_task({"task": "tagging", "format": {"type": "word_tag"},
                   "files": {"train": str(path), "test": str(tmp_path / "nope.txt")}})
    with pytest.raises(TaskDataError, match="unknown keys \\['max_token'\\]"):
        load_task({"task": "tagging", "format": {"type": "word_tag"}, "files": files,
                   "max_token": 5})
    with pytest.raises(TaskDataError, match="format.label must be a header name or a column number"):
        load_task({"task": "classification", "files": files,
                   "format": {"type": "tsv", "text": 0, "label": -1}})
    with pytest.raises(TaskDataError, match="format.word must be a column number"):
        load_task({"task": "tagging", "files": files, "format": {"type": "conll", "word": "w"}})
    with pytest.raises(TaskDataError, match="max_tokens is not for tagging"):
        load_task({"task": "tagging", "format": {"type": "word_tag"}, "files": files,
                   "max_tokens": 5})
    with pytest.raises(TaskDataError, match="metric 'span_f1' is not for classification"):
        load_task({"task": "classification", "metric": "span_f1", "files": files,
                   "format": {"type": "tsv", "text": 0, "label": 1}})


@pytest.mark.parametrize("kind, fmt, message", [
    ("classification", {"type": "tsv", "text": 0, "label": 1, "delimiter": ""}, "format.delimiter must be one character"),
    ("classification", {"type": "tsv", "text": 0, "label": 1, "delimiter": ", "}, "format.delimiter must be one character"),
    ("classification", {"type": "tsv", "text": 0, "label": 1, "delimiter": 9}, "format.delimiter must be one character"),
    ("classification", {"type": "tsv", "text": 0, "label": 1, "header": "false"}, "format.header must be true or false"),
    ("tagging", {"type": "word_tag", "separator": 5}, "format.separator must be a non-empty string"),
    ("tagging", {"type": "conll", "separator": 5}, "format.separator must be a non-empty string"),
    ("tagging", {"type": "conll", "separator": "\n"}, "format.separator must be a non-empty string"),
])
def test_format_separators_and_header_of_the_wrong_type_name_the_setting(tmp_path, kind, fmt, message):
    """A TSV delimiter that is not one character, or a separator that is not a string, was a
    TypeError traceback from csv or str.split; "header": "false" read the first example as the
    header line, dropping it without a word."""
    path = tmp_path / "t.txt"
    path.write_text("a\tb\nc\td\n", encoding="utf-8")
    with pytest.raises(TaskDataError, match=f"task 'x': {message}"):
        load_task({"task": kind, "name": "x", "format": fmt, "files": {"train": str(path), "test": str(path)}})


def test_labels_outside_training_are_named_in_the_log_and_results(tmp_path):
    """A dev or test label that no training example has cannot be predicted, so every example
    (tagging: token) with it is an error: 'positve' in a test file cost its examples without a
    word. The log and --plan name such labels with their counts; results.json records them."""
    from elmo.tasks.runner import plan
    spec = write_task(tmp_path, "classification")
    test = tmp_path / spec["files"]["test"]
    test.write_text(test.read_text() + "positve\tThe cat.\npositve\tA dog.\nbig\tBig.\n", encoding="utf-8")
    config = write_config(tmp_path, [spec], variants=[{"name": "baseline"}], train={"epochs": 1, "batch_size": 8})
    assert load_task(load_config(config)["tasks"][0]).unseen_labels() == {"test": {"positve": 2}}
    said = "my-classification: labels no training example has, which the model cannot predict " \
           "(each is scored as an error): test 'positve' (2 examples)"
    assert said in plan(load_config(config))
    logs = []
    run_experiment(load_config(config), out=tmp_path / "res", log=logs.append)
    assert said in logs
    saved = json.loads((tmp_path / "res" / "results.json").read_text())
    assert saved["data"]["my-classification"]["unseen_labels"] == {"test": {"positve": 2}}
    md = (tmp_path / "res" / "results.md").read_text()
    assert ("Dev and test labels that no training example has (each example or token with one is "
            "scored as an error):\n\n* my-classification: test 'positve' (2)\n") in md
    tagging = write_task(tmp_path, "tagging")             # tags: counted per token
    test = tmp_path / tagging["files"]["test"]
    test.write_text(test.read_text() + "\ncat\tX\tB-ani\ndog\tX\tI-ani\ncow\tX\tI-ani\n", encoding="utf-8")
    assert load_task(load_config(write_config(tmp_path, [tagging]))["tasks"][0]).unseen_labels() == \
        {"test": {"I-ani": 2}}
    test.write_text(test.read_text() + "\nleek\tX\tB-veg\n", encoding="utf-8")   # one: "1 token"
    said = load_task(load_config(write_config(tmp_path, [tagging]))["tasks"][0]).describe_unseen()
    assert said is not None and said.endswith(": test 'B-veg' (1 token), 'I-ani' (2 tokens)"), said


def test_results_are_not_overwritten_without_resume_or_overwrite(tmp_path, capsys):
    config = write_config(tmp_path, [write_task(tmp_path, "tagging")],
                          variants=[{"name": "baseline"}], train={"epochs": 1, "batch_size": 8})
    out = tmp_path / "res"
    assert main(["experiment", str(config), "--out", str(out), "--quiet"]) == 0
    before = (out / "results.json").read_text()
    assert main(["experiment", str(config), "--out", str(out), "--quiet"]) == 1
    assert "--resume keeps its finished runs, --overwrite starts again" in capsys.readouterr().err
    assert (out / "results.json").read_text() == before
    assert main(["experiment", str(config), "--out", str(out), "--quiet", "--overwrite"]) == 0
    first = json.loads((out / "results.json").read_text())["runs"]
    assert main(["experiment", str(config), "--out", str(out), "--quiet", "--resume"]) == 0
    assert json.loads((out / "results.json").read_text())["runs"] == first   # nothing new
    train = tmp_path / "data" / "tagging-train.conll"                  # the data changes:
    train.write_text(train.read_text().replace("\tO\n", "\tO\n", 1) + "\ncat\tX\tB-ani\n")
    assert main(["experiment", str(config), "--out", str(out), "--quiet", "--resume"]) == 0
    again = json.loads((out / "results.json").read_text())["runs"]
    assert len(again) == 1 and again[0]["fingerprint"] != first[0]["fingerprint"]


@pytest.mark.parametrize("damaged, message", [
    ('{"config": {}, "runs": [{"task": "my-tagg', "results.json: not a results.json (Unterminated string"),
    ("[]", "results.json: not the results.json of an experiment (it has no 'runs')"),
    ('{"runs": [{"task": "my-tagging", "variant": "baseline"}]}', "results.json: run 0 is not a run"),
])
def test_resume_from_a_damaged_results_file_names_it_and_keeps_it(tmp_path, damaged, message):
    """--resume read results.json with a bare json.loads: a truncated file was JSON's message
    naming no file, a list an AttributeError and a run without its seed a KeyError traceback."""
    config = write_config(tmp_path, [write_task(tmp_path, "tagging")], variants=[{"name": "baseline"}],
                          train={"epochs": 1, "batch_size": 8})
    out = tmp_path / "res"
    out.mkdir()
    (out / "results.json").write_text(damaged)
    with pytest.raises(ValueError, match=re.escape(f"{out / message}")):
        run_experiment(load_config(config), out=out, log=lambda s: None, resume=True)
    assert (out / "results.json").read_text() == damaged


def test_variants_that_name_no_variant_are_refused(tmp_path, capsys):
    """--variants '' ran every variant; --variants , ran none, and with --overwrite replaced
    results.json by one with no runs."""
    config = write_config(tmp_path, [write_task(tmp_path, "tagging")], variants=[{"name": "baseline"}],
                          train={"epochs": 1, "batch_size": 8})
    out = tmp_path / "res"
    assert main(["experiment", str(config), "--out", str(out), "--quiet"]) == 0
    before = (out / "results.json").read_text()
    for names in ("", ",", " , "):
        assert main(["experiment", str(config), "--out", str(out), "--quiet", "--overwrite",
                     "--variants", names]) == 1
        assert f"--variants {names!r} names no variant; the config has baseline" in capsys.readouterr().err
    assert (out / "results.json").read_text() == before


def test_a_second_experiment_into_the_same_folder_is_refused(tmp_path):
    """Two at once each wrote their own runs over the other's results.json, and both saved
    models into the same folders."""
    from elmo.io import OutputBusy
    from elmo.output_lock import output_lock
    config = write_config(tmp_path, [write_task(tmp_path, "tagging")], variants=[{"name": "baseline"}],
                          train={"epochs": 1, "batch_size": 8})
    out = tmp_path / "res"
    out.mkdir()
    logs = []
    with output_lock(out / "results.json"):          # as an experiment in another process holds it
        with pytest.raises(OutputBusy, match=f"{out} is already being written by PID"):
            run_experiment(load_config(config), out=out, log=logs.append, resume=True)
    assert not logs and not (out / "results.json").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match="is a file, but the results folder must be a folder"):
        run_experiment(load_config(config), out=tmp_path / "file", log=logs.append)


def _metric(name, gold, guess):
    from elmo.tasks.metrics import METRICS
    return 100.0 * METRICS[name](gold, guess)


def test_saved_models_predict_what_evaluation_scored(tmp_path, capsys):
    """save -> load -> predict on the test files gives the test scores of results.json, for
    every kind, with and without ELMo; a second test set is scored and saved too."""
    from elmo.tasks.models import TaskModel
    specs = [write_task(tmp_path, kind) for kind in TASKS]
    write_conll(tmp_path / "data" / "other.conll", 5, 77)
    specs[0]["files"]["test_other"] = "data/other.conll"
    config = write_config(tmp_path, specs, variants=[
        {"name": "baseline"}, {"name": "elmo", "elmo": {}},
        {"name": "tuned", "elmo": {"finetune": True, "positions": ["output"]}}],
        train={"epochs": 1, "batch_size": 8})
    out = tmp_path / "res"
    results = run_experiment(load_config(config), out=out, log=lambda s: None, save_models=True)
    assert len(results["runs"]) == 9
    for run in results["runs"]:
        folder = Path(run["saved_model"])
        assert folder == out / "models" / run["task"] / run["variant"] / "seed-1"
        model = TaskModel.load(folder)
        data = load_task(load_config(config)["tasks"][[f"my-{k}" for k in TASKS].index(run["task"])])
        for split, expected in [("test", run["test"])] + list(run.get("extra_tests", {}).items()):
            examples = data.splits[split]
            if data.kind == "pair":
                texts = [(ex.tokens, ex.tokens_b) for ex in examples]
            else:
                texts = [ex.tokens for ex in examples]
            guess = model.predict(texts)
            assert _metric(run["metric"], [ex.label for ex in examples], guess) == expected, (
                run["task"], run["variant"], split)
    tagging = next(r for r in results["runs"] if r["task"] == "my-tagging" and r["extra_tests"])
    assert set(tagging["extra_tests"]) == {"test_other"}
    md = (out / "results.md").read_text()
    assert "| my-tagging | elmo | test_other |" in md and "other.conll" in md
    config_json = json.loads((out / "models/my-tagging/elmo/seed-1/config.json").read_text())
    assert config_json["elmo"]["bilm"]["spec"] == "fixture" and config_json["elmo"]["bilm"]["sha256"]
    assert config_json["elmo"]["layer_cache"] == "float16"
    assert not any("_elmo_lstm" in k for k in _safetensor_keys(out / "models/my-tagging/elmo/seed-1"))
    assert any("_elmo_lstm" in k for k in _safetensor_keys(out / "models/my-tagging/tuned/seed-1"))

    # the command line: CoNLL for the tagger, TSV for the classifier, from a file and stdin
    text = tmp_path / "new.txt"
    text.write_text("the cat sat\na dog ran on the mat\n", encoding="utf-8")
    model_dir = out / "models/my-tagging/elmo/seed-1"
    expect = TaskModel.load(model_dir).predict([["the", "cat", "sat"], "a dog ran on the mat"])
    assert main(["predict", str(model_dir), str(text), "--quiet"]) == 0
    blocks = capsys.readouterr().out.split("\n\n")
    assert [[line.split("\t")[1] for line in b.splitlines()] for b in blocks if b.strip()] == expect
    target = tmp_path / "pred.jsonl"
    assert main(["predict", str(out / "models/my-classification/baseline/seed-1"), str(text),
                 "-o", str(target), "--format", "jsonl", "--quiet"]) == 0
    recs = [json.loads(line) for line in target.read_text().splitlines()]
    assert [r["text"] for r in recs] == ["the cat sat", "a dog ran on the mat"]
    assert all(r["label"] in ("big", "other") for r in recs)
    import io
    import sys
    monkey = pytest.MonkeyPatch()
    monkey.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"the cat sat\tthe dog\n")))
    assert main(["predict", str(out / "models/my-pair/elmo/seed-1"), "--quiet"]) == 0
    monkey.undo()
    line = capsys.readouterr().out
    assert line.startswith("the cat sat\tthe dog\t") and line.split("\t")[2].strip() in ("overlap", "none")
    assert main(["predict", str(out / "models/my-pair/baseline/seed-1"), str(text), "--quiet"]) == 1
    assert f"{text}:1: a pair model needs text_a<TAB>text_b" in capsys.readouterr().err
    # a task's own TSV or CoNLL file: its label and tag columns were read as words
    for model, data in (("my-classification/elmo", "classification-test.tsv"),
                        ("my-tagging/baseline", "tagging-test.conll")):
        assert main(["predict", str(out / "models" / model / "seed-1"), str(tmp_path / "data" / data),
                     "--quiet"]) == 1
        captured = capsys.readouterr()
        assert f"{data}:1: a tab; a " in captured.err and "(is this a TSV or CoNLL file?)" in captured.err
        assert not captured.out
    assert main(["predict", str(model_dir), str(text), "--quiet", "--batch-size", "0"]) == 1
    assert "elmo predict: error: --batch-size must be at least 1, got 0" in capsys.readouterr().err

    # lines without tokens: a defined result and a note saying what they got
    text.write_text("the cat\n\nsat on\n", encoding="utf-8")
    assert main(["predict", str(model_dir), str(text), "--quiet"]) == 0
    got = capsys.readouterr()
    assert "\n\n\n" not in got.out and len([b for b in got.out.split("\n\n") if b.strip()]) == 2
    assert f"{text}: line 2 without tokens: no block in the CoNLL output" in got.err
    assert main(["predict", str(model_dir), str(text), "--quiet", "--format", "jsonl"]) == 0
    got = capsys.readouterr()
    assert [json.loads(line)["tags"] for line in got.out.splitlines()][1] == [] and "no tags" in got.err
    classifier = out / "models/my-classification/elmo/seed-1"
    for blank in ("", "   "):  # one empty text alone in its batch, then among others
        assert len(TaskModel.load(classifier).predict([blank])) == 1
    text.write_text("   \nthe cat\n", encoding="utf-8")
    assert main(["predict", str(classifier), str(text), "--quiet", "--batch-size", "1"]) == 0
    got = capsys.readouterr()
    assert len(got.out.splitlines()) == 2 and "line 1 without tokens: the label the model gives" in got.err


def _safetensor_keys(folder: Path):
    from safetensors import safe_open
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return list(f.keys())


def _tagger_on_a_copy_of_the_fixture(tmp_path):
    """(the biLM folder, a saved tagger trained with it): a copy of the fixture biLM in
    ``tmp_path/bilm`` and one experiment run saved."""
    import shutil
    import elmo
    bilm = tmp_path / "bilm"
    shutil.copytree(elmo.model_path("fixture"), bilm)
    config = write_config(tmp_path, [write_task(tmp_path, "tagging")], bilm=str(bilm),
                          variants=[{"name": "baseline"}, {"name": "elmo", "elmo": {}}],
                          train={"epochs": 1, "batch_size": 8})
    run_experiment(load_config(config), out=tmp_path / "res", log=lambda s: None, save_models=True)
    return bilm, tmp_path / "res/models/my-tagging/elmo/seed-1"


def test_a_changed_bilm_is_refused(tmp_path):
    from elmo.tasks.models import TaskModel
    from elmo.tasks.saved import TaskModelError
    bilm, folder = _tagger_on_a_copy_of_the_fixture(tmp_path)
    moved = tmp_path / "moved"
    bilm.rename(moved)
    with pytest.raises(TaskModelError, match="is gone"):
        TaskModel.load(folder)
    assert TaskModel.load(folder, bilm=str(moved)).predict(["the cat"])[0][0] in ("O", "B-ani")
    options = next(p for p in moved.iterdir() if p.suffix == ".json" and p.name != "metadata.json")
    # (the fixture's metadata.json holds only its files' SHA-256, which refuses any edit: without it,
    # the edits below reach the task model's own check)
    (moved / "metadata.json").unlink()
    options.write_text(options.read_text() + " ")     # other bytes, the same model
    assert TaskModel.load(folder, bilm=str(moved)).predict(["the cat"])[0][0] in ("O", "B-ani")
    import h5py
    with h5py.File(moved / "weights.hdf5", "r+") as h5:   # one weight changed: another model
        h5["CNN_proj/b_proj"][0] += 0.5
    with pytest.raises(TaskModelError, match="not the one this task model was trained with: its "
                                             "weights differ .options.json, weights.hdf5 differ"):
        TaskModel.load(folder, bilm=str(moved))


def test_a_saved_models_edited_elmo_settings_are_refused_naming_the_file(tmp_path, capsys):
    """config.json's elmo block was used unchecked: "dropout": "x" and "finetune": "yes" were
    TypeError tracebacks from torch, "lambda": "x" float()'s bare message naming no file, and
    "finetune": true on a frozen model's folder loaded (its biLM was not the one trained)."""
    import shutil
    from elmo.tasks.models import TaskModel
    _, folder = _tagger_on_a_copy_of_the_fixture(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    edited = tmp_path / "edited"
    for key, value, message in [("dropout", "x", "elmo: setting dropout: expected float, got 'x'"),
                                ("finetune", "yes", "elmo: setting finetune: expected bool, got 'yes'"),
                                ("lambda", "x", "elmo: setting lambda: expected float, got 'x'"),
                                ("positions", "input", "elmo: setting positions"),
                                ("finetune", True, "elmo: finetune true with bilm_weights_saved false")]:
        shutil.rmtree(edited, ignore_errors=True)
        shutil.copytree(folder, edited)
        (edited / "config.json").write_text(json.dumps(dict(config, elmo=dict(config["elmo"], **{key: value}))))
        with pytest.raises(ValueError, match=re.escape(f"{edited / 'config.json'}: {message}")):
            TaskModel.load(edited)
        assert main(["predict", str(edited), "-", "--quiet"]) == 1
        assert f"error: {edited / 'config.json'}: {message}" in capsys.readouterr().err


def test_a_frozen_bilms_weights_in_a_saved_models_file_are_refused(tmp_path):
    """A saved model of a frozen biLM whose model.safetensors held biLM weights (its config.json
    says none are saved) loaded them over the biLM checked against its record, silently."""
    from safetensors.torch import load_file, save_file
    from elmo.tasks.models import TaskModel
    from elmo.tasks.saved import BILM_MODULE, TaskModelError
    _, folder = _tagger_on_a_copy_of_the_fixture(tmp_path)
    bilm = {k: t for k, t in TaskModel.load(folder).state_dict().items() if k.startswith(BILM_MODULE + ".")}
    name = sorted(bilm)[0]
    state = load_file(str(folder / "model.safetensors"))
    assert not any(k.startswith(BILM_MODULE + ".") for k in state)
    save_file({**state, name: bilm[name] + 1.0}, str(folder / "model.safetensors"))
    with pytest.raises(TaskModelError, match=re.escape(f"{folder / 'model.safetensors'}: holds biLM weights "
                                                       f"('{name}'), but config.json says the biLM was frozen")):
        TaskModel.load(folder)


def test_a_converted_copy_of_the_bilm_is_accepted(tmp_path, capsys):
    """elmo predict --bilm with the biLM converted to the other layout (elmo convert) was refused:
    the checksums are per file name. The same weights, as loaded, now pass; another biLM is
    still refused in one line, also for a task model saved before the weights digest was kept."""
    import json
    import shutil
    from elmo.cli import main
    from elmo.tasks.models import TaskModel
    from elmo.tasks.saved import TaskModelError
    bilm, folder = _tagger_on_a_copy_of_the_fixture(tmp_path)
    expected = TaskModel.load(folder).predict(["the cat sat"])
    assert main(["convert", str(bilm), str(tmp_path / "native")]) == 0
    assert TaskModel.load(folder, bilm=str(tmp_path / "native")).predict(["the cat sat"]) == expected
    assert main(["convert", "default", str(tmp_path / "other")]) == 0
    with pytest.raises(TaskModelError, match=r"is not the one this task model was trained with: its "
                                             r"weights differ \(config.json, model.safetensors, "
                                             r"options.json, weights.hdf5 differ"):
        TaskModel.load(folder, bilm=str(tmp_path / "other"))
    capsys.readouterr()
    assert main(["predict", str(folder), "-", "--bilm", str(tmp_path / "other")]) == 1
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    # saved when the digest had its earlier form (every value, no dtype): recognised as such
    import elmo
    from tests.test_embedding_file import _old_digest
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    cfg["elmo"]["bilm"]["weights_digest"] = _old_digest(elmo.from_pretrained(bilm), stride=1)
    path.write_text(json.dumps(cfg))
    assert TaskModel.load(folder, bilm=str(tmp_path / "native")).predict(["the cat sat"]) == expected
    with pytest.raises(TaskModelError, match="its weights differ"):
        TaskModel.load(folder, bilm=str(tmp_path / "other"))
    # saved before the digest was recorded: the recorded folder, still there, gives it
    del cfg["elmo"]["bilm"]["weights_digest"]
    path.write_text(json.dumps(cfg))
    assert TaskModel.load(folder, bilm=str(tmp_path / "native")).predict(["the cat sat"]) == expected
    with pytest.raises(TaskModelError, match="its weights differ"):
        TaskModel.load(folder, bilm=str(tmp_path / "other"))
    shutil.rmtree(bilm)
    with pytest.raises(TaskModelError, match="records no digest of its weights"):
        TaskModel.load(folder, bilm=str(tmp_path / "native"))


def test_a_bfloat16_biLM_is_fine_tuned_in_float32(tmp_path):
    """A biLM saved in bfloat16 loads as bfloat16 (dtypes are restored), and a finetune variant
    trained its weights in bfloat16, the optimizer's small steps rounded away; it is fine-tuned
    in float32 (as before), the saved task model keeps those weights, and loads them unrounded."""
    import torch
    import elmo
    from safetensors.torch import load_file
    from elmo.tasks.models import TaskModel
    from elmo.tasks.saved import BILM_MODULE
    bilm = tmp_path / "bilm"
    elmo.save_pretrained(elmo.from_pretrained("fixture").to(torch.bfloat16), bilm)
    config = write_config(tmp_path, [write_task(tmp_path, "tagging")], bilm=str(bilm),
                          variants=[{"name": "baseline"}, {"name": "ft", "elmo": {"finetune": True}}],
                          train={"epochs": 1, "batch_size": 8})
    run_experiment(load_config(config), out=tmp_path / "res", log=lambda s: None, save_models=True)
    folder = tmp_path / "res/models/my-tagging/ft/seed-1"
    saved = {k: t for k, t in load_file(folder / "model.safetensors").items() if k.startswith(BILM_MODULE + ".")}
    assert saved and {t.dtype for t in saved.values() if t.is_floating_point()} == {torch.float32}
    loaded = TaskModel.load(folder).state_dict()
    for k, t in saved.items():
        assert loaded[k].dtype == t.dtype and torch.equal(loaded[k], t), k


def test_a_random_control_and_its_trained_biLM_are_not_taken_for_each_other(tmp_path):
    """A random: control's biLM and the trained one record the same files: bilm= (elmo predict
    --bilm) with the folder of a random control, without the prefix, predicted with the trained
    weights (and the reverse with random ones), silently. Now refused, naming the prefix."""
    import shutil
    import elmo
    from elmo.model_digest import model_digest
    from elmo.tasks.saved import TaskModelError, _load_bilm, bilm_reference
    bilm = tmp_path / "bilm"
    shutil.copytree(elmo.model_path("fixture"), bilm)
    control = bilm_reference("random:" + str(bilm))
    with pytest.raises(TaskModelError, match="trained with random weights.*pass 'random:'"):
        _load_bilm(control, str(bilm))
    assert model_digest(_load_bilm(control, "random:" + str(bilm))) == control["weights_digest"]
    trained = bilm_reference(str(bilm))
    with pytest.raises(TaskModelError, match="trained weights of .*without 'random:'"):
        _load_bilm(trained, "random:" + str(bilm))
    assert model_digest(_load_bilm(trained, str(bilm))) == trained["weights_digest"]


def test_a_biLM_given_by_a_relative_path_loads_from_any_working_folder(tmp_path, monkeypatch):
    """The saved model loaded the spec as written in the config (`bilm/`), relative to the
    folder it was loaded from: elsewhere the biLM, still where it was recorded, was "no model
    folder", and a folder of that name there was checked instead of it."""
    import shutil
    import elmo
    from elmo.tasks.models import TaskModel
    shutil.copytree(elmo.model_path("fixture"), tmp_path / "bilm")
    config = write_config(tmp_path, [write_task(tmp_path, "tagging")], bilm="bilm",
                          train={"epochs": 1, "batch_size": 8})
    monkeypatch.chdir(tmp_path)
    run_experiment(load_config(config), out=tmp_path / "res", log=lambda s: None, save_models=True)
    folder = tmp_path / "res/models/my-tagging/elmo/seed-1"
    expected = TaskModel.load(folder).predict(["the cat sat"])
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert TaskModel.load(folder).predict(["the cat sat"]) == expected
    shutil.copytree(elmo.model_path("default"), tmp_path / "elsewhere" / "bilm")   # another biLM of that name
    assert TaskModel.load(folder).predict(["the cat sat"]) == expected


def test_a_malformed_file_stops_the_experiment_before_any_training(tmp_path):
    good = write_task(tmp_path, "tagging")
    bad = write_task(tmp_path, "classification")
    path = tmp_path / bad["files"]["test"]
    path.write_text(path.read_text() + "big\n", encoding="utf-8")       # no text column
    n = len(path.read_text().splitlines())
    config = write_config(tmp_path, [good, bad])
    logs = []
    with pytest.raises(TaskDataError, match=f"classification-test.tsv:{n}: 1 columns"):
        run_experiment(load_config(config), out=tmp_path / "r", log=logs.append)
    assert not any("seed" in line for line in logs)
    assert not (tmp_path / "r" / "results.json").exists()


def test_relative_paths_follow_the_config_file(tmp_path):
    from elmo.tasks.experiment_config import resolve_paths
    cfg = resolve_paths({"tasks": [{"task": "pos", "data_dir": "brown"},
                                   {"task": "tagging", "files": {"train": "a/t.txt", "test": "/abs/t"}}],
                         "embeddings": {"glove": "vectors/glove.txt"}}, tmp_path)
    assert cfg["tasks"][0]["data_dir"] == str(tmp_path / "brown")
    assert cfg["tasks"][1]["files"] == {"train": str(tmp_path / "a/t.txt"), "test": "/abs/t"}
    assert cfg["embeddings"]["glove"] == str(tmp_path / "vectors/glove.txt")


def test_a_bilm_folder_beside_the_config_is_found_there(tmp_path, monkeypatch):
    """A relative biLM folder was looked up from the working folder only: a config beside its
    own model read another folder of that name where the command ran."""
    from elmo.config import ConfigError
    from elmo.tasks.experiment_config import read_config
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "models" / "mine").mkdir(parents=True)
    (project / "models" / "adapted").mkdir(parents=True)
    elsewhere.mkdir()
    config = project / "exp.json"
    config.write_text(json.dumps({"bilm": "models/mine", "variants": [
        {"name": "baseline"}, {"name": "adapted", "elmo": {"bilm": "random:models/adapted"}},
        {"name": "named", "elmo": {"bilm": "fixture"}}]}))
    monkeypatch.chdir(elsewhere)
    cfg = read_config(config)
    assert cfg["bilm"] == str(project / "models" / "mine")
    assert cfg["variants"][1]["elmo"]["bilm"] == "random:" + str(project / "models" / "adapted")
    assert cfg["variants"][2]["elmo"]["bilm"] == "fixture"                 # a name stays a name
    monkeypatch.chdir(project)                    # the same folder both ways: kept as written
    assert read_config(config)["bilm"] == "models/mine"
    (elsewhere / "models" / "mine").mkdir(parents=True)
    monkeypatch.chdir(elsewhere)                  # two different folders of that name: refused
    with pytest.raises(ConfigError, match="names two different folders"):
        read_config(config)
    (project / "models" / "mine").rmdir()         # only the working folder's: as before
    assert read_config(config)["bilm"] == "models/mine"


def test_glove_is_fetched_with_a_message_or_read_from_your_file(tmp_path, monkeypatch, capsys):
    import numpy as np
    from elmo.data import sources
    from elmo.tasks import embeddings
    folder = tmp_path / "glove"
    folder.mkdir()
    (folder / "vocab.txt").write_text("the\ncat\n")
    np.save(folder / "vectors.npy", np.ones((2, 3), dtype=np.float32))
    monkeypatch.setattr(embeddings, "_GLOVE_CACHE", {})
    monkeypatch.setattr(sources, "is_ready", lambda name, home=None: False)
    fetched = []
    monkeypatch.setattr(sources, "get", lambda name, log=print: fetched.append(name) or folder)
    vocab, matrix, info = embeddings.build_embeddings([["the", "dog"]], [], {"glove": None})
    assert fetched == ["glove-50d"] and matrix.shape == (4, 3)
    err = capsys.readouterr().err
    assert "fetching it now" in err and "--glove PATH" in err
    text = tmp_path / "mine.txt"
    text.write_text("the 1 2\ncat 3 4\n")
    vocab, matrix, info = embeddings.build_embeddings([["the"]], [], {"glove": str(text)})
    assert matrix.shape == (3, 2) and fetched == ["glove-50d"]
    with pytest.raises(FileNotFoundError, match="nope.txt: no such GloVe file"):
        embeddings.build_embeddings([["the"]], [], {"glove": str(tmp_path / "nope.txt")})


def test_a_glove_file_with_a_vector_that_is_not_finite_is_refused_naming_the_word(tmp_path, monkeypatch, capsys):
    """'nan' in a GloVe text file gave its word NaN vectors: each batch with it had a NaN loss,
    skipped, and a frequent word stopped the run as 'diverged: lower train.lr'; a rare one's
    test sentences scored NaN, predicted as the first label."""
    from elmo.tasks import embeddings
    monkeypatch.setattr(embeddings, "_GLOVE_CACHE", {})
    text = tmp_path / "mine.txt"
    text.write_text("the 1 2\ncat nan 4\ndog 1 inf\n")
    with pytest.raises(ValueError, match=re.escape(f"{text}: the GloVe vector of 'cat' (row 2) is not finite "
                                                   f"(NaN or inf), as are 1 other rows")):
        embeddings.build_embeddings([["the"]], [], {"glove": str(text)})
    spec = write_task(tmp_path, "classification")
    config = write_config(tmp_path, [spec], variants=[{"name": "baseline"}], embeddings={"glove": str(text)})
    assert main(["experiment", str(config), "--out", str(tmp_path / "res"), "--quiet"]) == 1
    assert "error: " + str(text) + ": the GloVe vector of 'cat'" in capsys.readouterr().err


@pytest.mark.parametrize("kind, fmt, text", [
    ("tagging", {"type": "conll"}, "The\tO\r\ncat\tB-x\r\n\r\n"),
    ("tagging", {"type": "word_tag"}, "The/O cat/B-x\r\n"),
    ("classification", {"type": "tsv", "text": "text", "label": "label"}, "text\tlabel\r\nThe cat\tB-x\r\n"),
    ("classification", {"type": "jsonl", "text": "text", "label": "label"},
     '{"text": "The cat", "label": "B-x"}\r\n'),
])
def test_a_byte_order_mark_and_crlf_are_no_part_of_the_data(tmp_path, kind, fmt, text):
    """A file saved by an editor that writes a BOM: the first word kept it (CoNLL, word/TAG),
    a TSV header name or JSON did not match."""
    from elmo.tasks.files import check_format, read_examples
    path = tmp_path / "t.txt"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    examples = read_examples(path, kind, check_format(fmt, kind, "x"))
    label = ["O", "B-x"] if kind == "tagging" else "B-x"
    assert [(e.tokens, e.label) for e in examples] == [(["The", "cat"], label)]


def test_broken_utf8_in_a_task_file_names_the_line(tmp_path):
    from elmo.tasks.files import check_format, read_examples
    path = tmp_path / "t.conll"
    path.write_bytes(b"\xef\xbb\xbfa\tO\n\nb\t\xffO\n")
    with pytest.raises(TaskDataError, match=r"t.conll: not UTF-8 text \(line 3: byte 0xff at byte offset 10\)"):
        read_examples(path, "tagging", check_format({"type": "conll"}, "tagging", "x"))


def test_a_nul_byte_or_utf16_in_a_task_file_names_the_line(tmp_path):
    """UTF-16 text without a byte-order mark is valid UTF-8 (a NUL between its letters), and
    was read as tokens such as "a\\x00"."""
    from elmo.text_files import UTF16_HINT
    from elmo.tasks.files import check_format, read_examples
    path, fmt = tmp_path / "t.conll", check_format({"type": "conll"}, "tagging", "x")
    path.write_bytes(b"a\tO\n\nb\0c\tO\n")
    with pytest.raises(TaskDataError, match=re.escape(f"{path}: line 3: a NUL byte (0x00) at byte offset 6 (")):
        read_examples(path, "tagging", fmt)
    path.write_bytes("a\tO\n\nb\tO\n".encode("utf-16-le"))
    with pytest.raises(TaskDataError, match=re.escape(f"{path}: line 1: a NUL byte (0x00) at byte offset 1 ({UTF16_HINT})")):
        read_examples(path, "tagging", fmt)
    path.write_bytes("a\tO\n".encode("utf-16"))      # with a byte-order mark: not UTF-8, and why
    with pytest.raises(TaskDataError, match=re.escape(f"line 1: byte 0xff at byte offset 0 (a UTF-16 byte-order mark; {UTF16_HINT})")):
        read_examples(path, "tagging", fmt)


def test_predict_input_lines_lose_a_byte_order_mark_and_name_a_broken_line(tmp_path):
    from elmo.commands.predict import _input_lines
    path = tmp_path / "in.txt"
    path.write_bytes(b"\xef\xbb\xbfthe cat\r\n\r\nsat")
    assert list(_input_lines(str(path))) == ["the cat", "", "sat"]
    path.write_bytes(b"\xef\xbb\xbfthe\n\n\xff\n")
    with pytest.raises(ValueError, match="in.txt: line 3: byte 0xff at byte offset 8 is not valid UTF-8"):
        list(_input_lines(str(path)))
    path.write_bytes(b"\xef\xbb\xbfa\xffb\n")      # (counted from the file's first byte)
    with pytest.raises(ValueError, match="in.txt: line 1: byte 0xff at byte offset 4 is not valid UTF-8"):
        list(_input_lines(str(path)))


@pytest.mark.parametrize("kind, fmt, data, line", [
    ("tagging", {"type": "word_tag"}, b"a/x b/y\rc/x d/y\r", 1),          # old Mac line ends
    ("tagging", {"type": "conll"}, b"a\tB\rb\tO\r\rc\tO\r", 1),
    ("classification", {"type": "tsv", "text": 0, "label": 1}, b"a cat\tx\r\nthe\rdog\ty\r\n", 2),
])
def test_a_carriage_return_inside_a_line_of_a_task_file_is_refused(tmp_path, kind, fmt, data, line):
    """Lines end at \\n or \\r\\n: a file with lone \\r line ends was one line, so word/TAG made
    every sentence one sentence and CoNLL kept its first word, without a word; a \\r inside a
    TSV line was csv's traceback."""
    from elmo.tasks.files import check_format, read_examples
    path = tmp_path / "t.txt"
    path.write_bytes(data)
    with pytest.raises(TaskDataError, match=rf"t.txt:{line}: a carriage return \(\\r\) inside the line"):
        read_examples(path, kind, check_format(fmt, kind, "x"))


@pytest.mark.parametrize("label", [1, -1])
def test_a_conll_line_with_other_columns_than_the_file_is_refused(tmp_path, label):
    """A word with a space in a CoNLL file separated by spaces made its line one column more:
    with the label in column 1 the word's second half became its tag ('York', a class of its
    own), with -1 the word was its first half; neither said a word."""
    from elmo.tasks.files import check_format, read_examples
    path = tmp_path / "t.conll"
    path.write_text("Ada B-per\nlives O\n\nin O\nNew York B-loc\ntoday O\n", encoding="utf-8")
    fmt = check_format({"type": "conll", "word": 0, "label": label}, "tagging", "x")
    with pytest.raises(TaskDataError, match=r"t.conll:5: 3 columns, where most word lines have 2"):
        read_examples(path, "tagging", fmt)
    path.write_text("Ada\tB-per\nlives\tO\n\nNew York\tB-loc\n", encoding="utf-8")   # tabs: one word
    assert [ex.tokens for ex in read_examples(path, "tagging", fmt)] == [["Ada", "lives"], ["New York"]]


@pytest.mark.parametrize("fmt, text, message", [
    ({"text": "text", "label": "label"}, "label\ttext\npos\tgreat\tfilm\nneg\tbad\n",
     ":2: 3 columns, where the header line has 2"),
    ({"text": 1, "label": 0}, "pos\tgreat\nneg\tbad\tfilm\nneg\tdull\n", ":2: 3 columns, where most rows have 2"),
    ({"text": "text", "label": "label"}, "text\tlabel\tlabel\ngood\tpos\tneg\n",
     ":1: 2 columns named 'label' (format.label) in the header"),
])
def test_a_tsv_row_with_other_columns_than_the_file_or_an_ambiguous_header_is_refused(tmp_path, fmt, text, message):
    """A tab inside a text made its row one column more: the text lost its words after the tab
    ('great' for 'great<TAB>film'), or a label column read a word, without a word; of two
    header columns with the format's name the first was read."""
    from elmo.tasks.files import check_format, read_examples
    path = tmp_path / "t.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TaskDataError, match=re.escape(f"t.tsv{message}")):
        read_examples(path, "classification", check_format(dict(fmt, type="tsv"), "classification", "x"))


@pytest.mark.parametrize("kind, line", [
    ("classification", '{"text": "a cat", "label": "big\\tcat"}'),
    ("tagging", '{"text": ["a", "cat"], "label": ["O", "B-\\nani"]}'),
    # (str.splitlines ends a line at each: predict's output line was two records for it)
    ("classification", '{"text": "a cat", "label": "big\\u2028cat"}'),
    ("classification", '{"text": "a cat", "label": "big\\u0085cat"}'),
    ("tagging", '{"text": ["a", "cat"], "label": ["O", "B-\\u000bani"]}'),
])
def test_a_json_label_with_a_tab_or_a_line_end_is_refused(tmp_path, kind, line):
    """A JSON label or tag may hold a tab or a newline, which a text file's cannot: such a
    model's predict output had a TSV line of one column more, or a CoNLL block cut in two."""
    from elmo.tasks.files import check_format, read_examples
    path = tmp_path / "t.jsonl"
    first = '{"text": "a dog", "label": "O O"}' if kind == "tagging" else '{"text": "a dog", "label": "x"}'
    path.write_text(first + "\n" + line + "\n", encoding="utf-8")
    fmt = check_format({"type": "jsonl", "text": "text", "label": "label"}, kind, "x")
    with pytest.raises(TaskDataError, match=r"t.jsonl:2: the label .* holds a tab or a line end"):
        read_examples(path, kind, fmt)


@pytest.mark.parametrize("fmt, ext, text, message", [
    ({"type": "tsv", "text": 0, "label": 1}, "tsv", "a cat\tbig\u2029cat\n", "t.tsv:1: the label 'big\\u2029cat' holds a tab or a line end"),
    ({"type": "conll", "word": 0, "label": 1}, "conll", "a\tO\ncat\tB ani\n", "t.conll:2: tag 'B ani' holds whitespace"),
    ({"type": "conll", "word": 0, "label": 1}, "conll", "a\tO\ncat\tB\x85ani\n", "t.conll:2: tag 'B\\x85ani' holds whitespace"),
    ({"type": "conllu", "word": 1, "label": 3}, "conllu", "1\tcat\t_\tNO\u2028UN\t_\t_\t_\t_\t_\t_\n",
     "t.conllu:1: tag 'NO\\u2028UN' holds whitespace"),
])
def test_a_label_or_tag_that_would_break_a_predict_line_is_refused(tmp_path, fmt, ext, text, message):
    """A text file's label or tag could hold what str.splitlines ends a line at (\\x85, U+2029)
    and a tag a space: the model's predict TSV or CoNLL line then read back as two lines, or a
    TSV line of tags separated by spaces as more tags than tokens."""
    from elmo.tasks.files import check_format, read_examples
    kind = "classification" if ext == "tsv" else "tagging"
    path = tmp_path / f"t.{ext}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TaskDataError, match=re.escape(message)):
        read_examples(path, kind, check_format(fmt, kind, "x"))


@pytest.mark.parametrize("kind, record, message", [
    ("tagging", '{"text": ["a", "", "cat"], "label": ["O", "O", "B-ani"]}', "text: token 2 is empty ('')"),
    ("classification", '{"text": ["a", " "], "label": "x"}', "text: token 2 is only spaces (' ')"),
])
def test_an_empty_token_in_a_json_token_list_is_refused(tmp_path, kind, record, message):
    """A JSON token list could hold '' or ' ', which no text file's line gives and predict
    cannot be given: the tagger trained and was scored on a word of no characters."""
    from elmo.tasks.files import check_format, read_examples
    path = tmp_path / "t.jsonl"
    path.write_text(record + "\n", encoding="utf-8")
    fmt = check_format({"type": "jsonl", "text": "text", "label": "label"}, kind, "x")
    with pytest.raises(TaskDataError, match=re.escape(f"t.jsonl:1: {message}")):
        read_examples(path, kind, fmt)


def test_predict_refuses_a_carriage_return_inside_an_input_line(saved_classifier, tmp_path, capsys):
    """A file with lone \\r line ends was one text (its \\r read as spaces): three lines got one
    label, exit 0."""
    text = tmp_path / "in.txt"
    text.write_bytes(b"the big cat\rsat on\ra mat\r")
    assert main(["predict", str(saved_classifier), str(text), "--quiet"]) == 1
    got = capsys.readouterr()
    assert not got.out and f"{text}:1: a carriage return (\\r) inside the line" in got.err
    text.write_bytes(b"the big cat\r\nsat on\r\n")                   # CRLF: two texts
    assert main(["predict", str(saved_classifier), str(text), "--quiet"]) == 0
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == ["the big cat", "sat on"]


@pytest.mark.parametrize("data, message", [
    (b"the cat\na\xffb\n", "stdin: line 2: byte 0xff at byte offset 9 is not valid UTF-8"),
    (b"the cat\rsat\n", "stdin:1: a carriage return (\\r) inside the line"),
    (b"the cat\n\tbig\n", "stdin:2: a tab; a classification model reads one text a line"),
])
def test_predict_names_stdin_in_the_errors_of_its_input(saved_classifier, monkeypatch, capsys, data, message):
    """An error in text read from stdin began '-:1:' or '-: line 1:', where predict's notes
    (lines without tokens, lines cut) say 'stdin'."""
    import io
    import sys
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["predict", str(saved_classifier), "--quiet"]) == 1
    assert f"elmo predict: error: {message}" in capsys.readouterr().err


def test_predict_draws_its_progress_bar_on_a_terminal_only(saved_classifier, tmp_path, monkeypatch, capsys):
    """Without --quiet, predict's bar was written into a log file or pipe as well."""
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    text = tmp_path / "in.txt"
    text.write_text("the big cat\nsat on\n")
    assert main(["predict", str(saved_classifier), str(text)]) == 0
    assert capsys.readouterr().err == ""                          # (capsys: no terminal)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["predict", str(saved_classifier), str(text)]) == 0
    assert "predict: 100%" in terminal.getvalue()


def test_predict_refuses_an_output_that_would_replace_what_it_reads(tmp_path, capsys):
    """-o naming the input replaced the text with its predictions; -o naming a file of the
    saved model replaced that; a folder was named by its temporary file."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "labels.json").write_text('["a"]\n')
    text = tmp_path / "in.txt"
    text.write_text("the cat\n")
    for output, message in [(text, "is the input file"), (model / "labels.json", "is a file of the saved model"),
                            (tmp_path, "is a directory; the predictions must be a file path")]:
        assert main(["predict", str(model), str(text), "-o", str(output), "--quiet"]) == 1
        assert f"{output}: {message}" in capsys.readouterr().err
    assert text.read_text() == "the cat\n" and (model / "labels.json").read_text() == '["a"]\n'


def test_predict_refuses_an_output_that_is_a_link_to_what_it_reads(saved_classifier, tmp_path, capsys):
    """A link named preds.txt to the saved model's labels.json, or a hard link to the input,
    passed the checks by name: with --overwrite the predictions replaced the file."""
    import shutil

    model = Path(shutil.copytree(saved_classifier, tmp_path / "model"))
    labels = (model / "labels.json").read_text()
    text = tmp_path / "in.txt"
    text.write_text("the cat\n")
    (tmp_path / "preds.txt").symlink_to(model / "labels.json")
    os.link(text, tmp_path / "hard.txt")
    for output, message in [(tmp_path / "preds.txt", "is a file of the saved model"),
                            (tmp_path / "hard.txt", "is the input file")]:
        code = main(["predict", str(model), str(text), "-o", str(output), "--overwrite", "--quiet"])
        assert f"{output}: {message}" in capsys.readouterr().err and code == 1
    assert text.read_text() == "the cat\n" and (model / "labels.json").read_text() == labels


def _saved_baseline(root: Path, kind: str) -> Path:
    """A ``kind`` model without ELMo and without dev saved by an experiment (one epoch)."""
    task = dict(write_task(root, kind, dev=False), dev_fraction=0)
    config = write_config(root, [task], variants=[{"name": "baseline"}],
                          train={"epochs": 1, "batch_size": 8})
    run_experiment(load_config(config), out=root / "r", log=lambda s: None, save_models=True)
    return root / f"r/models/my-{kind}/baseline/seed-1"


@pytest.fixture(scope="module")
def saved_classifier(tmp_path_factory):
    """A classifier without ELMo and without dev saved by an experiment (one epoch)."""
    return _saved_baseline(tmp_path_factory.mktemp("saved"), "classification")


@pytest.fixture(scope="module")
def saved_tagger(tmp_path_factory):
    """A tagger without ELMo and without dev saved by an experiment (one epoch)."""
    return _saved_baseline(tmp_path_factory.mktemp("saved_tagger"), "tagging")


def _cut_copy(saved: Path, where: Path, max_tokens: int) -> Path:
    """A copy of a saved model that reads only the first ``max_tokens`` tokens of a text."""
    import shutil
    folder = where / "cut"
    shutil.copytree(saved, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(config, max_tokens=max_tokens)))
    return folder


def test_loading_a_saved_model_onto_a_device_that_is_not_there_names_the_device(saved_classifier):
    """TaskModel.load(device=...) moved the model with module.to(): a CUDA device this machine
    lacks was torch's AssertionError or RuntimeError, an unknown name torch's list of device
    types, each after the whole model had loaded; the rest of the API names the device."""
    from elmo.tasks.models import TaskModel
    for device, message in [("cuda:99", "device cuda:99: "), ("nope", "device 'nope': expected cpu, cuda"),
                            ("meta", "device meta: the meta device holds no values")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            TaskModel.load(saved_classifier, device=device)
    assert TaskModel.load(saved_classifier, device="cpu").predict(["the cat"])[0] in ("big", "other")


def test_predict_output_says_which_tokens_a_tagger_read(saved_tagger, tmp_path, capsys):
    """A model reads a text's first max_tokens tokens: a tagger's CoNLL output lost the rest
    of the sentence (zip stopped at the tags), and JSON lines did not say what was read."""
    from elmo.tasks.models import TaskModel
    folder = _cut_copy(saved_tagger, tmp_path, 2)
    text = tmp_path / "in.txt"
    text.write_text("the cat sat on\na dog\n", encoding="utf-8")
    read = TaskModel.load(saved_tagger).predict([["the", "cat"], ["a", "dog"]])
    assert TaskModel.load(folder).predict([["the", "cat", "sat", "on"], ["a", "dog"]]) == \
        [read[0] + [None, None], read[1]]
    assert main(["predict", str(folder), str(text), "--quiet"]) == 0
    got = capsys.readouterr()
    blocks = [b.splitlines() for b in got.out.split("\n\n") if b.strip()]
    assert blocks == [[f"{w}\t{t}" for w, t in zip(["the", "cat", "sat", "on"], read[0] + ["_", "_"])],
                      [f"{w}\t{t}" for w, t in zip(["a", "dog"], read[1])]]
    assert f"{text}: line 1 longer than the model reads (max_tokens 2" in got.err
    assert "the tokens past them have the tag '_' (not read)" in got.err
    assert main(["predict", str(folder), str(text), "--quiet", "--format", "tsv"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"the cat sat on\t{' '.join(read[0])} _ _"
    assert main(["predict", str(folder), str(text), "--quiet", "--format", "jsonl"]) == 0
    got = capsys.readouterr()
    assert [json.loads(line) for line in got.out.splitlines()] == [
        {"tokens": ["the", "cat", "sat", "on"], "tags": read[0] + [None, None], "tokens_read": 2},
        {"tokens": ["a", "dog"], "tags": read[1], "tokens_read": 2}]
    assert "tokens_read in each record says how many; the others have tag null" in got.err


def test_predict_output_says_which_tokens_a_classifier_read(saved_classifier, tmp_path, capsys):
    """JSON lines printed every token of a text as "tokens", although the model read only its
    first max_tokens: the output now says how many it read, and stderr which lines were cut."""
    from elmo.tasks.models import TaskModel
    folder = _cut_copy(saved_classifier, tmp_path, 2)
    text = tmp_path / "in.txt"
    text.write_text("the big cat sat\nbig\n", encoding="utf-8")
    read = TaskModel.load(saved_classifier).predict([["the", "big"], ["big"]])
    assert main(["predict", str(folder), str(text), "--quiet", "--format", "jsonl"]) == 0
    got = capsys.readouterr()
    assert [json.loads(line) for line in got.out.splitlines()] == [
        {"text": "the big cat sat", "tokens": ["the", "big", "cat", "sat"], "label": read[0], "tokens_read": 2},
        {"text": "big", "tokens": ["big"], "label": read[1], "tokens_read": 1}]
    assert f"{text}: line 1 longer than the model reads (max_tokens 2" in got.err
    assert main(["predict", str(folder), str(text), "--quiet"]) == 0
    got = capsys.readouterr()
    assert got.out == f"the big cat sat\t{read[0]}\nbig\t{read[1]}\n"
    assert "the label is of those tokens (--format jsonl records how many: tokens_read)" in got.err
    assert main(["predict", str(saved_classifier), str(text), "--quiet"]) == 0
    assert capsys.readouterr().err == ""        # nothing cut: nothing said


def test_predict_output_says_which_tokens_a_pair_model_read(tmp_path, capsys):
    """A pair's JSON record said nothing of the cut (max_tokens_b of a preset cuts the second
    text): it records how many tokens of each text the model read."""
    from elmo.tasks.models import TaskModel
    task = dict(write_task(tmp_path, "pair", dev=False), dev_fraction=0)
    config = write_config(tmp_path, [task], variants=[{"name": "baseline"}], train={"epochs": 1, "batch_size": 8})
    run_experiment(load_config(config), out=tmp_path / "r", log=lambda s: None, save_models=True)
    saved = tmp_path / "r/models/my-pair/baseline/seed-1"
    folder = tmp_path / "cut"
    import shutil
    shutil.copytree(saved, folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(cfg, max_tokens_b=1)))
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\ta dog ran\n")
    expect = TaskModel.load(saved).predict([(["the", "cat", "sat"], ["a"])])[0]
    assert main(["predict", str(folder), str(text), "--quiet", "--format", "jsonl"]) == 0
    got = capsys.readouterr()
    assert json.loads(got.out) == {"text_a": "the cat sat", "text_b": "a dog ran", "label": expect,
                                   "tokens_read_a": 3, "tokens_read_b": 1}
    assert "line 1 longer than the model reads (max_tokens_b 1" in got.err


def test_a_word_glove_knows_but_no_task_file_held_gets_its_glove_vector(tmp_path, capsys):
    """A word outside the saved vocabulary was <unk> at prediction (a vector trained, if at
    all, as the unknown word), though the model was built over GloVe: had the word been in a
    test file it would have had its GloVe vector. It gets that vector now, from the GloVe file
    recorded (by a digest) with the model."""
    import shutil
    import numpy as np
    from elmo.tasks.models import TaskModel
    rng = np.random.default_rng(3)
    words = list(WORDS) + ["kitten", "puppy"]
    vectors = rng.normal(0, 1, (len(words), 4)).astype(np.float32)
    glove = tmp_path / "glove.txt"
    glove.write_text("".join(w + " " + " ".join(f"{x:.6f}" for x in v) + "\n" for w, v in zip(words, vectors)))
    read = dict(zip(words, np.loadtxt(glove, usecols=range(1, 5), dtype=np.float32)))
    task = dict(write_task(tmp_path, "tagging", dev=False), dev_fraction=0)
    config = write_config(tmp_path, [task], variants=[{"name": "baseline"}], embeddings={"glove": str(glove)},
                          train={"epochs": 1, "batch_size": 8})
    run_experiment(load_config(config), out=tmp_path / "r", log=lambda s: None, save_models=True)
    folder = tmp_path / "r/models/my-tagging/baseline/seed-1"
    assert "kitten" not in json.loads((folder / "vocab.json").read_text())

    def word_vectors(model, tokens):
        seen = []
        hook = model.encoder.words.register_forward_hook(lambda m, i, out: seen.append(out))
        model.predict([tokens])
        hook.remove()
        return seen[0][0]

    model = TaskModel.load(folder)
    got = word_vectors(model, ["Kitten", "cat", "zebra"])
    unk = model.encoder.words.embed.weight[1]
    assert got[0].tolist() == read["kitten"].tolist()         # lower-cased, as GloVe 6B is
    assert got[1].tolist() == model.encoder.words.embed.weight[model.saved.vocab.stoi["cat"]].tolist()
    assert got[2].tolist() == unk.tolist()                    # GloVe does not know it either
    # a model saved before the GloVe was recorded keeps working as it did
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    cfg = json.loads((old / "config.json").read_text())
    del cfg["embeddings"]
    (old / "config.json").write_text(json.dumps(cfg))
    assert word_vectors(TaskModel.load(old), ["kitten"])[0].tolist() == unk.tolist()
    # the GloVe file moved: one line, and --glove (glove=) with its new place
    moved = tmp_path / "moved.txt"
    glove.rename(moved)
    text = tmp_path / "in.txt"
    text.write_text("kitten sat\n")
    assert main(["predict", str(folder), str(text), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"the GloVe file {glove} this task model was built with is gone" in err and "--no-glove" in err
    # or, asked for, without it: the words outside the vocabulary are <unk>, as before
    assert main(["predict", str(folder), str(text), "--quiet", "--no-glove"]) == 0
    assert word_vectors(TaskModel.load(folder, glove=False), ["kitten"])[0].tolist() == unk.tolist()
    assert main(["predict", str(folder), str(text), "--quiet", "--glove", str(moved)]) == 0
    assert word_vectors(TaskModel.load(folder, glove=str(moved)), ["kitten"])[0].tolist() == read["kitten"].tolist()
    # another GloVe (one value differs) is refused, not used
    other = tmp_path / "other.txt"
    other.write_text(moved.read_text().replace(f"kitten {vectors[-2][0]:.6f}", "kitten 9.5"))
    assert other.read_text() != moved.read_text()
    assert main(["predict", str(folder), str(text), "--quiet", "--glove", str(other)]) == 1
    assert "is not the one this task model was built with" in capsys.readouterr().err


def test_glove_true_is_refused_in_one_line_before_the_model_loads(tmp_path):
    """TaskModel.load(folder, glove=True) (glove takes a path, None or False) reached
    Path(True) inside the GloVe reader of a model built over GloVe: a TypeError about
    os.PathLike, after the whole model had loaded. It is now refused first, saying what
    glove takes."""
    import numpy as np
    from elmo.tasks.models import TaskModel
    vectors = np.random.default_rng(0).normal(0, 1, (len(WORDS), 4))
    glove = tmp_path / "glove.txt"
    glove.write_text("".join(w + " " + " ".join(f"{x:.6f}" for x in v) + "\n" for w, v in zip(WORDS, vectors)))
    task = dict(write_task(tmp_path, "classification", dev=False), dev_fraction=0)
    config = write_config(tmp_path, [task], variants=[{"name": "baseline"}], embeddings={"glove": str(glove)},
                          train={"epochs": 1, "batch_size": 8})
    run_experiment(load_config(config), out=tmp_path / "r", log=lambda s: None, save_models=True)
    folder = tmp_path / "r/models/my-classification/baseline/seed-1"
    assert TaskModel.load(folder, glove=str(glove)).saved.glove is not None    # (a GloVe model)
    with pytest.raises(TypeError, match=r"^glove must be the path of the GloVe file the model was "
                                        r"built with, None for the one it records, or False"):
        TaskModel.load(folder, glove=True)


def test_an_overwritten_experiment_names_the_saved_models_it_does_not_list(tmp_path):
    """--overwrite with fewer seeds left the dropped seed's saved model beside the new results
    without a word; it is kept (a whole trained model) and named."""
    task = dict(write_task(tmp_path, "classification", dev=False), dev_fraction=0)
    train = {"epochs": 1, "batch_size": 8}
    lines: list = []
    for seeds, overwrite in ((2, False), (1, True)):
        config = write_config(tmp_path, [task], variants=[{"name": "baseline"}], train=train, seeds=seeds)
        lines.clear()
        run_experiment(load_config(config), out=tmp_path / "r", log=lines.append, save_models=True,
                       overwrite=overwrite)
    models = tmp_path / "r/models"
    assert (models / "my-classification/baseline/seed-2").is_dir()
    assert lines[-1] == (f"{models}: 1 saved model(s) from an earlier run, not in results.json, are kept: "
                         "my-classification/baseline/seed-2")


def test_a_saved_model_whose_run_was_trained_again_unsaved_is_named(tmp_path):
    """Trained again without --save-models (--overwrite, or --resume after the data changed),
    a run left the earlier run's model in its folder, and that folder, named like the run's,
    was taken for it: predict on it disagreed with results.json without a word."""
    task = dict(write_task(tmp_path, "classification", dev=False), dev_fraction=0)
    config = write_config(tmp_path, [task], variants=[{"name": "baseline"}], train={"epochs": 1, "batch_size": 8})
    lines: list = []
    run_experiment(load_config(config), out=tmp_path / "r", log=lines.append, save_models=True)
    assert "saved model" not in lines[-1]
    results = run_experiment(load_config(config), out=tmp_path / "r", log=lines.append, overwrite=True)
    assert "saved_model" not in results["runs"][0]
    assert lines[-1] == (f"{tmp_path / 'r/models'}: 1 saved model(s) from an earlier run, not in results.json, "
                         "are kept: my-classification/baseline/seed-1")


def test_predict_output_dash_is_stdout_and_an_empty_one_is_refused(saved_classifier, tmp_path, capsys,
                                                                   monkeypatch):
    """-o - wrote a file named '-' (INPUT - is stdin); -o '' wrote to stdout as no -o does."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("the cat\n")
    assert main(["predict", str(saved_classifier), "in.txt", "-o", "-", "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("the cat\t") and not (tmp_path / "-").exists()
    assert main(["predict", str(saved_classifier), "in.txt", "-o", "", "--quiet"]) == 1
    captured = capsys.readouterr()
    assert "-o: an empty path; give a file path, or '-' for stdout" in captured.err and not captured.out


def test_predict_keeps_an_existing_output_unless_overwrite(saved_classifier, tmp_path, capsys):
    """-o naming an existing file (a data file given by mistake, say) replaced it without a word."""
    (tmp_path / "in.txt").write_text("the cat\n")
    kept = tmp_path / "train.tsv"
    kept.write_text("a good film\t4\n")
    argv = ["predict", str(saved_classifier), str(tmp_path / "in.txt"), "-o", str(kept), "--quiet"]
    assert main(argv) == 1
    assert f"{kept}: exists; it is kept: pass --overwrite to replace it" in capsys.readouterr().err
    assert kept.read_text() == "a good film\t4\n"
    assert main(argv + ["--overwrite"]) == 0
    assert kept.read_text().startswith("the cat\t")
    empty = tmp_path / "empty.tsv"   # an empty file holds nothing to lose
    empty.touch()
    assert main(argv[:4] + [str(empty), "--quiet"]) == 0 and empty.read_text().startswith("the cat\t")


def test_a_task_model_given_for_a_bilm_is_named_as_such(saved_classifier, tmp_path, capsys):
    """(it was "config.json: lstm: missing", from every command that takes a biLM)"""
    for argv in (["info", str(saved_classifier)],
                 ["analyze", str(saved_classifier), "--only", "contrast", "--out", str(tmp_path / "x")]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert ("config.json: the config of a task model saved by `elmo experiment --save-models`, "
                "not of a biLM; `elmo predict` runs it") in err and err.count("\n") == 1


def _edit_json(name, change):
    def edit(folder):
        value = json.loads((folder / name).read_text())
        (folder / name).write_text(json.dumps(change(value)))
    return edit


def _edit_weights(change):
    """A damage that rewrites model.safetensors with ``change`` made to its tensors (by name);
    ``change`` gets the tensors and the name of the first float one."""
    from safetensors.torch import load_file, save_file

    def edit(folder):
        state = load_file(str(folder / "model.safetensors"))
        change(state, sorted(k for k, t in state.items() if t.is_floating_point())[0])
        save_file(state, str(folder / "model.safetensors"))
    return edit


def _flip_a_weights_bit(folder):
    """A weight's last bit flipped in the file's data (a failing disk): still finite, the header
    intact; it loaded, and the model predicted with the damaged weight."""
    import struct
    path = folder / "model.safetensors"
    data = bytearray(path.read_bytes())
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    name = sorted(k for k in header if k != "__metadata__")[0]
    data[8 + length + header[name]["data_offsets"][0]] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, message", [
    (lambda f: (f / "vocab.json").unlink(), "vocab.json: cannot read it"),
    (lambda f: (f / "model.safetensors").unlink(), "model.safetensors: missing"),
    (lambda f: (f / "config.json").write_text('{"format": "elmo-t'), "config.json: not JSON"),
    (lambda f: (f / "labels.json").write_bytes(b'["\xff"]'),
     "labels.json: not UTF-8 text (line 1: byte 0xff at byte offset 2)"),
    (lambda f: (f / "model.safetensors").write_bytes((f / "model.safetensors").read_bytes()[:40]),
     "model.safetensors: unreadable safetensors file"),
    (_edit_json("config.json", lambda c: {**c, "version": 2}),
     "elmo-task-model version 2, but this elmo reads version 1; upgrade"),
    (_edit_json("config.json", lambda c: {k: v for k, v in c.items() if k != "kind"}),
     "config.json: 'kind' is missing"),
    (_edit_json("labels.json", lambda labels: labels + ["extra"]),
     "has shape (2,), config.json and labels.json (3 labels) make it (3,)"),
    (_edit_json("vocab.json", lambda words: words[:-1]), "vocab.json: not the vocabulary of config.json"),
    (lambda f: (f / "model.safetensors").write_bytes((f / "model.safetensors").read_bytes()[:-8]),
     "model.safetensors: unreadable safetensors file"),
    (lambda f: ((f / "model.safetensors").unlink(), (f / "model.safetensors").mkdir()),
     "model.safetensors: is a directory"),
    (_edit_weights(lambda s, k: s[k].view(-1).__setitem__(0, float("nan"))),
     "holds 1 non-finite values (NaN or inf), the first at index (0,)"),
    (_flip_a_weights_bit, "model.safetensors: damaged: tensor '"),
    (_flip_a_weights_bit, "does not hold the values it was saved with (CRC-32 "),
    (_flip_a_weights_bit, "restore it from a copy, or save the task model again"),
    (_edit_weights(lambda s, k: s.__setitem__(k, s[k].reshape(-1)[:1].clone())), "has shape (1,)"),
    (_edit_weights(lambda s, k: s.pop(k)), "model.safetensors: does not fit config.json (missing ['"),
    (_edit_weights(lambda s, k: s.__setitem__("head.extra", torch.zeros(2))),
     "does not fit config.json (missing [], unexpected ['head.extra'])"),
    (_edit_weights(lambda s, k: s.__setitem__(k, s[k].to(torch.int64))), "holds int64 values, the model's are float32"),
    (_edit_weights(lambda s, k: s.__setitem__(k, s[k] > 0)), "holds bool values, the model's are float32"),
])
def test_a_damaged_saved_model_is_one_error_naming_its_file(saved_classifier, tmp_path, damage, message):
    """Each was a bare JSON or KeyError message, a SafetensorError or a load_state_dict size
    traceback; a vocabulary one word short loaded, its last word read as <unk>."""
    import shutil
    from elmo.tasks.models import TaskModel
    from elmo.tasks.saved import TaskModelError
    folder = tmp_path / "m"
    shutil.copytree(saved_classifier, folder)
    assert TaskModel.load(folder).predict(["the cat"])[0] in ("big", "other")
    damage(folder)
    with pytest.raises(TaskModelError, match=re.escape(message)) as raised:
        TaskModel.load(folder)
    assert str(raised.value).startswith(str(folder)) and "\n" not in str(raised.value)


@pytest.mark.parametrize("fmt, text, message", [
    ({"type": "conll"}, "a\tO\nb\tB-per\n\nc\tPER\n", ":4: tag 'PER': not a BIO tag"),
    ({"type": "word_tag"}, "a/O b/B-\n", ":1: tag 'B-': not a BIO tag"),
    ({"type": "jsonl", "text": "t", "label": "tags"}, '{"t": "a b", "tags": "O X-per"}\n',
     ":1: tag 'X-per': not a BIO tag"),
])
def test_span_f1_tags_that_are_not_bio_stop_before_training(tmp_path, fmt, text, message):
    """They stopped the experiment at the first scoring, after an epoch, naming no file."""
    good = tmp_path / "good.txt"
    good.write_text({"conll": "a\tO\nb\tB-x\n", "word_tag": "a/O b/B-x\n"}.get(
        fmt["type"], '{"t": "a b", "tags": "O B-x"}\n'))
    bad = tmp_path / "bad.txt"
    bad.write_text(text)
    spec = {"task": "tagging", "metric": "span_f1", "format": fmt, "dev_fraction": 0,
            "files": {"train": str(good), "test": str(bad)}}
    with pytest.raises(TaskDataError) as err:
        load_task(spec)
    assert str(err.value).startswith(f"{bad}:") and message in str(err.value)
    assert "use metric token_accuracy" in str(err.value)
    assert load_task(dict(spec, metric="token_accuracy")).sizes()["test"] >= 1


ENTITIES = "a/O b/B-x\nc/O d/B-x\n"


@pytest.mark.parametrize("texts, extra, message", [
    ({"dev": ENTITIES, "test": "a/O b/O\n"}, {},
     "test.txt: no entity in the test examples: span F1 is 0 whatever the model tags"),
    ({"dev": ENTITIES, "test": "b/B-x\na/O\n"}, {"max_test": 1},   # the sample drawn is "a/O"
     "test.txt: no entity in the test examples (the 1 of 2 kept by max_test 1)"),
    ({"dev": "a/O\n", "test": ENTITIES}, {}, "dev.txt: no entity in the dev examples: span F1"),
    ({"test": ENTITIES}, {"dev_fraction": 0.5},                      # holds out 2 without entities
     "train.txt (the dev examples held out of it): no entity in the dev examples"),
])
def test_span_f1_on_a_set_without_entities_is_refused(tmp_path, texts, extra, message):
    """Under span_f1 a test set without one entity scored 0.00 whatever the model tagged (no
    gold span to find), and such a dev set kept the first epoch whatever followed."""
    files = {}
    for split, text in {"train": "a/O b/B-x\nc/O\nd/O\ne/O\n", **texts}.items():
        files[split] = str(tmp_path / f"{split}.txt")
        Path(files[split]).write_text(text)
    spec = {"task": "tagging", "metric": "span_f1", "format": {"type": "word_tag"}, "files": files, **extra}
    with pytest.raises(TaskDataError, match=re.escape(message)) as err:
        load_task(spec)
    assert str(err.value).startswith(str(tmp_path)) and str(err.value).endswith("or use metric token_accuracy")
    assert load_task(dict(spec, metric="token_accuracy")).sizes()["test"] >= 1


@pytest.mark.parametrize("kind, fmt, text, message", [
    ("classification", {"type": "tsv", "text": 1, "label": 0}, "en\tthe cat\nen\ta dog\n",
     "every training example has the label 'en'; a classification task needs two or more "
     "(is format.label the right column?)"),
    ("tagging", {"type": "word_tag"}, "a/O b/O\nc/O\n",
     "every training token has the tag 'O'; a tagging task needs two or more"),
])
def test_a_training_file_with_one_label_is_refused(tmp_path, kind, fmt, text, message):
    """It trained a model that can only give that label, and scored it."""
    path = tmp_path / "train.txt"
    path.write_text(text)
    spec = {"task": kind, "format": fmt, "dev_fraction": 0, "files": {"train": str(path), "test": str(path)}}
    with pytest.raises(TaskDataError, match=re.escape(f"{path}: {message}")):
        load_task(spec)


def test_a_max_train_sample_of_one_label_is_refused_naming_the_lost_labels(tmp_path):
    """The two-label check ran on the whole training file, before max_train drew its sample:
    a sample whose examples all had one label trained a model that answers only that."""
    path = tmp_path / "train.txt"
    path.write_text("".join(f"en\tthe cat {i}\n" for i in range(20)) + "de\tder Hund\n")
    spec = {"task": "classification", "format": {"type": "tsv", "text": 1, "label": 0},
            "dev_fraction": 0, "files": {"train": str(path), "test": str(path)}, "max_train": 3}
    from elmo.tasks.datasets import subsample
    lines = path.read_text().splitlines()
    # a seed whose sample misses the one 'de' line (most do), and one whose sample keeps it
    seed = next(s for s in range(100) if not any(x.startswith("de") for x in subsample(lines, 3, s)))
    keeps = next(s for s in range(100) if any(x.startswith("de") for x in subsample(lines, 3, s)))
    with pytest.raises(TaskDataError, match=re.escape(
            f"the 3 training examples kept by max_train 3 (of 21, subset_seed {seed}) all have the "
            f"label 'en'; the sample lost 'de'")):
        load_task(dict(spec, subset_seed=seed))
    assert load_task(dict(spec, subset_seed=keeps)).labels == ["de", "en"]


def test_results_without_dev_are_read_back_by_resume_report_and_compare(saved_classifier, tmp_path):
    """results.json holds a run without dev as "dev": null; --resume, experiment-report and
    compare_results summarised the runs read back with statistics.fmean, a TypeError on None."""
    import shutil
    from elmo.tasks.compare import comparison_markdown, read_results
    from elmo.tasks.runner import rewrite_reports
    root = saved_classifier.parents[4]
    out = tmp_path / "r"
    out.mkdir()
    shutil.copy(root / "r/results.json", out / "results.json")
    assert json.loads((out / "results.json").read_text())["runs"][0]["dev"] is None
    rows = rewrite_reports(out)["summary"]
    assert math.isnan(rows[0]["dev_mean"]) and 0.0 <= rows[0]["test_mean"] <= 100.0
    assert "| n/a | " in (out / "results.md").read_text()
    results = read_results(out)
    assert "| my-classification | accuracy % | baseline |" in comparison_markdown(results, results)
    lines: list = []
    resumed = run_experiment(load_config(root / "config.json"), out=out, resume=True, log=lines.append)
    assert "resuming: 1 of 1 runs" in lines[0] and len(resumed["runs"]) == 1


def test_tasks_of_one_kind_on_other_files_are_no_training_size_curve(tmp_path):
    """Every entry of one kind was a point of one curve: a tagger on NER files (span F1) and
    one on POS files (token accuracy) at other sizes were plotted as one task, "tagging", at
    several training sizes; only entries that differ in nothing but name and max_train are."""
    from elmo.tasks.report import plot_training_sizes, training_size_curves
    ner = {"task": "tagging", "metric": "span_f1", "files": {"train": "/d/ner.conll", "test": "/d/t.conll"}}
    pos = {"task": "tagging", "files": {"train": "/d/pos.txt", "test": "/d/pt.txt"}}
    tasks = [dict(ner, name="ner"), dict(pos, name="pos"), dict(pos, name="pos-5", max_train=5)]
    sizes = {"ner": 30, "pos": 20, "pos-5": 5}
    metrics = {"ner": "span_f1", "pos": "token_accuracy", "pos-5": "token_accuracy"}
    results = {"config": {"name": "x", "tasks": tasks},
               "data": {n: {"sizes": {"train": k}} for n, k in sizes.items()},
               "summary": [{"task": n, "variant": "baseline", "metric": metrics[n], "test_mean": float(k),
                            "test_std": None} for n, k in sizes.items()]}
    assert training_size_curves(results) == {"tagging: pos, pos-5": {"baseline": [(5, 5.0, 0.0), (20, 20.0, 0.0)]}}
    assert plot_training_sizes(results, tmp_path / "sizes.png")
    results["config"]["tasks"] = tasks[:2]
    assert training_size_curves(results) == {}


@pytest.mark.parametrize("elmo_settings, cache, message", [
    ({"finetune": True}, True, "fine-tuning a biLM whose characters go through a dictionary"),
    ({}, False, "runs in task experiments only from the layer cache: set cache_layers true"),
])
def test_a_dictionary_bilm_used_as_it_cannot_run_is_refused_before_any_run(tmp_path, elmo_settings, cache,
                                                                          message):
    """An ELMoForManyLangs biLM fine-tuned, or frozen with cache_layers false, failed at its
    variant's first run, after the baseline before it had trained and been written."""
    from elmo.config import ConfigError
    from tests.conftest import FIXTURES
    manylangs = str(FIXTURES / "elmoformanylangs" / "model")
    config = write_config(tmp_path, [write_task(tmp_path, "classification")], cache_layers=cache,
                          variants=[{"name": "baseline"}, {"name": "ml", "elmo": {"bilm": manylangs, **elmo_settings}}],
                          train={"epochs": 1, "batch_size": 8})
    logs: list = []
    with pytest.raises(ConfigError, match=re.escape(f"variant ml: biLM {manylangs!r}: ") + ".*" + re.escape(message)):
        run_experiment(load_config(config), out=tmp_path / "r", log=logs.append)
    assert not any("seed 1" in line for line in logs) and not (tmp_path / "r/results.json").exists()


def test_a_report_with_nothing_to_plot_leaves_no_earlier_plot(saved_classifier, tmp_path):
    """layer_weights.png and training_sizes.png of an earlier experiment into the folder (or of
    an earlier report) stayed beside results without ELMo mixes or training sizes."""
    import shutil
    from elmo.tasks.runner import rewrite_reports
    out = tmp_path / "r"
    out.mkdir()
    shutil.copy(saved_classifier.parents[3] / "results.json", out / "results.json")
    for name in ("layer_weights.png", "training_sizes.png"):
        (out / name).write_bytes(b"an earlier plot")
    rewrite_reports(out)
    assert sorted(p.name for p in out.iterdir()) == ["results.json", "results.md"]


def test_a_saved_config_is_strict_json(saved_classifier):
    """Trained without dev, its record's dev score was written as NaN, which is no JSON."""
    def refuse(constant):
        raise ValueError(f"{constant} in config.json")
    config = json.loads((saved_classifier / "config.json").read_text(), parse_constant=refuse)
    assert config["trained"]["dev"] is None


def test_predict_refuses_one_string_for_a_list_of_texts(saved_classifier):
    """predict("the cat") labelled each character as a text."""
    from elmo.tasks.models import TaskModel
    model = TaskModel.load(saved_classifier)
    for texts in ("the cat", b"the cat", None):
        with pytest.raises(TypeError, match="texts must be a list of texts, got .*; for one text pass \\[text\\]"):
            model.predict(texts)
    assert len(model.predict(t for t in ["the cat", "a dog"])) == 2


CONLLU = """# newdoc id = d1
# sent_id = 1
# text = They don't sleep.
1\tThey\tthey\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tsleep\tsleep\tVERB\tVB\t_\t0\troot\t_\tSpaceAfter=No
4.1\tsnore\t_\t_\t_\t_\t_\t_\t_\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = 2
1\t#\t#\tSYM\tNN\t_\t0\troot\t_\t_
"""


@pytest.mark.parametrize("label, tags", [
    (None, [["PRON", "AUX", "PART", "VERB", "PUNCT"], ["SYM"]]),
    ("xpos", [["PRP", "VBP", "RB", "VB", "."], ["NN"]]),
    (7, [["nsubj", "aux", "advmod", "root", "punct"], ["root"]]),
])
def test_conllu_reads_the_words_and_the_chosen_column(tmp_path, label, tags):
    from elmo.tasks.files import check_format, read_examples
    path = tmp_path / "t.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    fmt = {"type": "conllu"} if label is None else {"type": "conllu", "label": label}
    examples = read_examples(path, "tagging", check_format(fmt, "tagging", "x"))
    # comments, the multiword range "don't" and the empty node "snore" are not words
    assert [e.tokens for e in examples] == [["They", "do", "n't", "sleep", "."], ["#"]]
    assert [e.label for e in examples] == tags


def test_json_labels_are_spelt_as_a_text_file_gives_them(tmp_path):
    """JSON's true was the label "True" and 1.0 a class of its own beside 1; tags kept spaces."""
    from elmo.tasks.files import check_format, read_examples
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps({"text": "x", "label": v}) for v in (True, 1, 1.0, 0.5, " pos "))
                    + "\n", encoding="utf-8")
    fmt = check_format({"type": "jsonl", "text": "text", "label": "label"}, "classification", "x")
    assert [e.label for e in read_examples(path, "classification", fmt)] == ["true", "1", "1", "0.5", "pos"]
    path.write_text('{"tokens": ["a", "b", "c"], "tags": ["B-PER ", "O", 0]}\n', encoding="utf-8")
    fmt = check_format({"type": "jsonl", "text": "tokens", "label": "tags"}, "tagging", "x")
    assert read_examples(path, "tagging", fmt)[0].label == ["B-PER", "O", "0"]
    path.write_text('{"tokens": ["a"], "tags": [" "]}\n', encoding="utf-8")
    with pytest.raises(TaskDataError, match="tags must be a list of non-empty strings"):
        read_examples(path, "tagging", fmt)
    path.write_text('{"text": "x", "label": "a"}\n{"text": "x", "label": NaN}\n', encoding="utf-8")
    fmt = check_format({"type": "jsonl", "text": "text", "label": "label"}, "classification", "x")
    with pytest.raises(TaskDataError, match=r"c.jsonl:2: a label cannot be nan"):
        read_examples(path, "classification", fmt)


@pytest.mark.parametrize("fmt, named", [
    ({"type": "conll", "word": 1, "label": 3}, r"t.conllu:1: this looks like CoNLL-U .* use format type conllu"),
    ({"type": "conllu", "label": "feats"}, r"t.conllu:4: no feats label \('_'\) for 'They'"),
])
def test_conllu_read_the_wrong_way_is_named(tmp_path, fmt, named):
    # as plain CoNLL, '# text = ...' became the word 'text' tagged 'They', and the range
    # '2-3 don't' a word tagged '_', with no error
    from elmo.tasks.files import check_format, read_examples
    path = tmp_path / "t.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    with pytest.raises(TaskDataError, match=named):
        read_examples(path, "tagging", check_format(fmt, "tagging", "x"))
    path.write_text(CONLLU.split("\n", 3)[3], encoding="utf-8")     # no comments: the range shows it
    if fmt["type"] == "conll":
        with pytest.raises(TaskDataError, match=r"t.conllu:2: this looks like CoNLL-U"):
            read_examples(path, "tagging", check_format(fmt, "tagging", "x"))


def test_conllu_format_settings_are_checked(tmp_path):
    from elmo.tasks.files import check_format, read_examples
    with pytest.raises(TaskDataError, match="format.label must be a CoNLL-U column"):
        check_format({"type": "conllu", "label": "pos"}, "tagging", "x")
    with pytest.raises(TaskDataError, match="format conllu is for tagging"):
        check_format({"type": "conllu"}, "classification", "x")
    bad = tmp_path / "b.conllu"
    bad.write_text("1\ta\tb\tc\td\n", encoding="utf-8")
    with pytest.raises(TaskDataError, match="b.conllu:1: 5 tab-separated columns"):
        read_examples(bad, "tagging", check_format({"type": "conllu"}, "tagging", "x"))


def test_predict_refuses_a_bilm_for_a_model_without_elmo(saved_classifier, tmp_path, capsys):
    """--bilm for a baseline model was ignored without a word (exit 0)."""
    (tmp_path / "in.txt").write_text("the cat\n")
    argv = ["predict", str(saved_classifier), str(tmp_path / "in.txt"), "--bilm", str(tmp_path / "nowhere")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "a model without ELMo (the baseline) uses no biLM; leave out the biLM given" in err
    assert err.count("\n") == 1


def test_a_second_predict_into_the_same_new_file_is_refused_while_the_first_runs(saved_classifier, tmp_path,
                                                                                  capsys, monkeypatch):
    """Two predictions into one new -o (two inputs, no --overwrite) both found it free while
    their models loaded, and the second replaced the first's predictions without a word. Now
    the second is refused, naming the first, and the file holds the first's predictions."""
    from elmo.tasks.models import TaskModel

    (tmp_path / "a.txt").write_text("the cat\n")
    (tmp_path / "b.txt").write_text("a dog\n")
    out = tmp_path / "pred.tsv"
    load, started, codes = TaskModel.load.__func__, [], []

    def start_another_then_load(cls, *args, **kwargs):
        if not started:   # the first has checked -o and is loading its model
            started.append(True)
            codes.append(main(["predict", str(saved_classifier), str(tmp_path / "b.txt"), "-o", str(out),
                               "--quiet"]))
        return load(cls, *args, **kwargs)
    monkeypatch.setattr(TaskModel, "load", classmethod(start_another_then_load))
    assert main(["predict", str(saved_classifier), str(tmp_path / "a.txt"), "-o", str(out), "--quiet"]) == 0
    assert codes == [1]
    assert f"{out} is already being written by PID" in capsys.readouterr().err
    assert out.read_text().startswith("the cat\t")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt", "pred.tsv"]


def test_a_saved_model_cuts_new_texts_as_its_test_texts_were_cut(tmp_path, monkeypatch):
    """Examples of a task with max_tokens / max_tokens_b keep only their first tokens, in
    training and in the test score; a saved model read new texts whole, so predicting the
    test file's own texts labelled them from other input than results.json scored."""
    import elmo.tasks.batching as batching
    from elmo.tasks.models import TaskModel
    cls, pair = write_task(tmp_path, "classification"), write_task(tmp_path, "pair")
    cls["max_tokens"], pair["max_tokens_b"] = 2, 3
    config = write_config(tmp_path, [cls, pair], variants=[{"name": "baseline"}],
                          train={"epochs": 1, "batch_size": 8})
    out = tmp_path / "res"
    run_experiment(load_config(config), out=out, log=lambda s: None, save_models=True)
    read = []
    real = batching.make_batch
    monkeypatch.setattr(batching, "make_batch", lambda examples, *a, **k: (
        read.extend(examples), real(examples, *a, **k))[1])
    for spec, name in ((cls, "my-classification"), (pair, "my-pair")):
        folder = out / "models" / name / "baseline" / "seed-1"
        config_json = json.loads((folder / "config.json").read_text())
        assert (config_json["max_tokens"], config_json["max_tokens_b"]) == \
            (spec.get("max_tokens"), spec.get("max_tokens_b"))
        task = load_config(config)["tasks"][0 if spec is cls else 1]
        whole = {k: v for k, v in task.items() if k not in ("max_tokens", "max_tokens_b")}
        test = load_task(whole).splits["test"]                  # the test file's texts, uncut
        assert any(len(ex.tokens) > 2 for ex in test) if spec is cls else \
            any(len(ex.tokens_b) > 3 for ex in test)
        texts = [(ex.tokens, ex.tokens_b) if spec is pair else ex.tokens for ex in test]
        read.clear()
        TaskModel.load(folder).predict(texts)
        cut = load_task(task).splits["test"]                    # what the test score read
        assert [(ex.tokens, ex.tokens_b) for ex in read] == [(ex.tokens, ex.tokens_b) for ex in cut]
    # a hand-edited limit that is not a count is one error naming the file
    from elmo.tasks.saved import TaskModelError
    folder = out / "models" / "my-classification" / "baseline" / "seed-1"
    config_json = json.loads((folder / "config.json").read_text())
    config_json["max_tokens"] = 0
    (folder / "config.json").write_text(json.dumps(config_json))
    with pytest.raises(TaskModelError, match="'max_tokens' must be null or a positive whole number, got 0"):
        TaskModel.load(folder)


@pytest.mark.parametrize("kind, metric, texts, message", [
    ("classification", "accuracy", {"train": "neg\ta\npos\tb\n", "dev": "neg\tc\n", "test": "0\ta\n1\tb\n"},
     "test.txt: none of the test labels ('0' (1), '1' (1)) is a training label: accuracy is 0 whatever"),
    ("classification", "accuracy", {"train": "neg\ta\npos\tb\n", "dev": "1\tc\n", "test": "neg\ta\n"},
     "dev.txt: none of the dev labels ('1' (1)) is a training label: accuracy is 0 whatever"),
    ("tagging", "token_accuracy", {"train": "a/nn b/vb\n", "dev": "a/nn\n", "test": "a/NN b/VB\n"},
     "test.txt: none of the test tags ('NN' (1), 'VB' (1)) is a training tag: token_accuracy is 0 whatever"),
    ("tagging", "span_f1", {"train": "a/O b/B-x\n", "dev": "b/B-x\n", "test": "a/O b/B-X c/I-X\n"},
     "test.txt: none of the test spans' entity types ('X' (1)) is one the training tags have: span_f1 is 0 whatever"),
])
def test_a_set_none_of_whose_labels_training_has_is_refused(tmp_path, kind, metric, texts, message):
    """A dev or test set none of whose labels (tags; under span_f1 entity types) a training
    example has scored 0.00 whatever the model predicted, shown as a real score (labels written
    otherwise: 0 / 1 against neg / pos, NN against nn, B-X against B-x); such a dev set kept the
    first epoch. Only the labels were named in the log. Refused now, naming the file."""
    files = {}
    for split, text in texts.items():
        files[split] = str(tmp_path / f"{split}.txt")
        Path(files[split]).write_text(text)
    fmt = {"type": "word_tag"} if kind == "tagging" else {"type": "tsv", "header": False, "text": 1, "label": 0}
    spec = {"task": kind, "metric": metric, "format": fmt, "files": files}
    with pytest.raises(TaskDataError, match=re.escape(message)) as err:
        load_task(spec)
    assert str(err.value).startswith(str(tmp_path)) and "is format.label the right" in str(err.value)
    if kind == "tagging":       # one tag (entity type) that training has is enough to be scored
        test = Path(files["test"])
        test.write_text(test.read_text() + ("b/B-x\n" if metric == "span_f1" else "a/nn\n"))
        assert load_task(spec).sizes()["test"] == 2
