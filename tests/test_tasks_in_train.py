"""A dev or test set that holds training texts (a dev file that is the training file) is
named, with counts, in --plan, the log and results.json: its scores measure the data the
model was trained on, and were shown as any other split's without a word."""
from __future__ import annotations

import json
from pathlib import Path

from elmo.tasks.datasets import load_task
from elmo.tasks.experiment_config import normalise_config
from elmo.tasks.runner import plan, run_experiment

HEADER = "text\tlabel\n"
TRAIN = HEADER + "".join(f"w{i} x\t{'ab'[i % 2]}\n" for i in range(12))


def _spec(tmp_path: Path, dev: str, test: str) -> dict:
    for name, text in (("train", TRAIN), ("dev", dev), ("test", test)):
        (tmp_path / f"{name}.tsv").write_text(text, encoding="utf-8")
    return {"task": "classification", "name": "c",
            "format": {"type": "tsv", "text": "text", "label": "label"},
            "files": {k: str(tmp_path / f"{k}.tsv") for k in ("train", "dev", "test")}}


def test_a_dev_file_that_is_the_training_file_is_named(tmp_path):
    spec = _spec(tmp_path, TRAIN, HEADER + "w1 x\tb\nw1\tb\nnew words\ta\n")
    data = load_task(spec)
    # test: 'w1 x' is a training text, whatever its label; 'w1' alone is not
    assert data.in_train() == {"dev": 12, "test": 1}
    said = ("c: examples whose text is also a training text (their scores measure what the "
            "model was trained on): dev all 12 of 12; test 1 of 3")
    assert data.describe_in_train() == said
    cfg = normalise_config({"name": "x", "seeds": 1, "threads": 1, "embeddings": {"random_dim": 4},
                            "train": {"epochs": 1, "batch_size": 8}, "model": {"hidden": 4},
                            "tasks": [spec], "variants": [{"name": "baseline"}]})
    assert said in plan(cfg)
    logs: list = []
    run_experiment(cfg, out=tmp_path / "res", log=logs.append)
    assert said in logs
    saved = json.loads((tmp_path / "res" / "results.json").read_text())
    assert saved["data"]["c"]["in_train"] == {"dev": 12, "test": 1}
    # results.md, the report that is shared, said nothing of it
    md = (tmp_path / "res" / "results.md").read_text()
    assert ("Dev and test examples whose text is also a training text (their scores measure what "
            "the model was trained on):\n\n* c: dev all 12 of 12; test 1 of 3\n") in md


def test_splits_without_training_texts_say_nothing(tmp_path):
    data = load_task(_spec(tmp_path, HEADER + "v1 y\ta\nv2\tb\n", HEADER + "u1\ta\nu2 u\tb\n"))
    assert data.in_train() == {} and data.describe_in_train() is None


def test_a_pair_is_in_train_only_with_both_texts(tmp_path):
    from elmo.tasks.datasets import Example, TaskData
    train = [Example(["a"], "x", ["b"]), Example(["c"], "y", ["d"])]
    data = TaskData("p", "pair", "accuracy", ["x", "y"],
                    {"train": train, "dev": [Example(["a"], "x", ["d"])],
                     "test": [Example(["c"], "x", ["d"]), Example(["a"], "y", ["b"])]})
    assert data.in_train() == {"test": 2}
