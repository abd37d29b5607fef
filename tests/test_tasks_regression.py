"""Graded tasks: the ``regression`` and ``pair_regression`` kinds (a float target per text or
pair, MSE on standardised targets, Pearson / Spearman), the ``sentiment_rating`` preset, the
correlation metrics against a float64 reference, float targets read with file:line errors,
and a saved regression model's predictions in the targets' units."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo.cli import main
from elmo.tasks.datasets import load_task
from elmo.tasks.files import TaskDataError
from elmo.tasks.metrics import METRICS, correlation_undefined
from elmo.tasks.experiment_config import load_config
from elmo.tasks.runner import run_experiment

WORDS = "the a cat dog cow sat ran on under mat rug big small".split()


def _reference_ranks(x):
    """Average ranks the slow way: 1 + how many are smaller + half of the other equal ones."""
    return [1 + sum(v < xi for v in x) + (sum(v == xi for v in x) - 1) / 2 for xi in x]


def _reference_r(x, y):
    a, b = np.asarray(x, np.float64), np.asarray(y, np.float64)
    a, b = a - a.mean(), b - b.mean()
    return float((a * b).sum() / math.sqrt((a * a).sum() * (b * b).sum()))


def test_pearson_and_spearman_match_a_float64_reference_on_data_with_ties():
    rng = random.Random(3)
    for n in (2, 3, 10, 57):
        gold = [float(rng.randint(0, 4)) for _ in range(n)]          # many ties
        guess = [g * 0.3 + rng.gauss(0, 1) if rng.random() < 0.8 else 1.0 for g in gold]
        if len(set(gold)) < 2:
            gold[0] += 1.0
        # all sums are of at most 57 terms of size <= ~60, in float64 on both sides
        assert METRICS["pearson"](gold, guess) == pytest.approx(_reference_r(gold, guess), abs=1e-12)
        assert METRICS["spearman"](gold, guess) == pytest.approx(
            _reference_r(_reference_ranks(gold), _reference_ranks(guess)), abs=1e-12)
    # a monotone but non-linear relation: Spearman exactly 1, Pearson below
    x = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert METRICS["spearman"](x, [v ** 3 for v in x]) == 1.0
    assert METRICS["pearson"](x, [v ** 3 for v in x]) < 0.99


@pytest.mark.parametrize("gold, guess, why", [
    ([], [], "0 items"),
    ([1.0], [2.0], "1 item"),
    ([1.0, 1.0, 1.0], [1.0, 2.0, 3.0], "constant"),
    ([1.0, 2.0, 3.0], [0.5, 0.5, 0.5], "constant"),
    ([1.0, 2.0, 3.0], [0.5, float("nan"), 1.0], "not finite"),
])
def test_an_undefined_correlation_is_nan_with_its_reason(gold, guess, why):
    for name in ("pearson", "spearman"):
        assert math.isnan(METRICS[name](gold, guess))
    assert why in correlation_undefined(gold, guess)
    assert correlation_undefined([1.0, 2.0], [2.0, 1.0]) is None
    with pytest.raises(ValueError, match="2 gold values but 1 predictions"):
        METRICS["pearson"]([1.0, 2.0], [1.0])


def _sentences(n: int, seed: int):
    rng = random.Random(seed)
    return [[rng.choice(WORDS) for _ in range(rng.randint(2, 7))] for _ in range(n)]


def _write_data(root: Path) -> list:
    """A sentence task (target: count of "big" minus half the count of "small", TSV) and a
    pair task (target: words the texts share, JSON lines), with their specs."""
    data = root / "data"
    data.mkdir()
    for split, n, seed in (("train", 120, 1), ("dev", 30, 2), ("test", 40, 3)):
        rows = ["score\tsentence"] + [f"{s.count('big') - 0.5 * s.count('small')}\t{' '.join(s)}"
                                      for s in _sentences(n, seed)]
        (data / f"count-{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
        recs = [json.dumps({"a": a, "b": " ".join(b), "sim": len(set(a) & set(b))})
                for a, b in zip(_sentences(n, seed + 10), _sentences(n, seed + 20))]
        (data / f"sts-{split}.jsonl").write_text("\n".join(recs) + "\n", encoding="utf-8")
    return [{"task": "regression", "name": "count",
             "format": {"type": "tsv", "text": "sentence", "label": "score"},
             "files": {k: f"data/count-{k}.tsv" for k in ("train", "dev", "test")}},
            {"task": "pair_regression", "name": "sts", "metric": "spearman",
             "format": {"type": "jsonl", "text": "a", "text_b": "b", "label": "sim"},
             "files": {k: f"data/sts-{k}.jsonl" for k in ("train", "dev", "test")}}]


def _config(root: Path, tasks) -> Path:
    cfg = {"name": "graded", "seeds": 1, "threads": 1, "bilm": "fixture",
           "embeddings": {"random_dim": 8},
           "train": {"epochs": 8, "patience": 3, "batch_size": 8, "lr": 0.01},
           "model": {"hidden": 8, "classifier_hidden": 8, "dropout": 0.0},
           "tasks": tasks, "variants": [{"name": "baseline"}]}
    path = root / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def test_regression_tasks_from_files_train_correlate_and_predict_in_their_units(tmp_path, capsys):
    """Both graded kinds learn a target that is a simple function of the words (a clearly
    positive correlation on test); the other correlation is recorded; the saved model loads
    with its kind and target scale and predicts, in Python and on the command line, the
    numbers evaluation scored."""
    from elmo.tasks.models import TaskModel
    config = _config(tmp_path, _write_data(tmp_path))
    out = tmp_path / "res"
    logs: list = []
    results = run_experiment(load_config(config), out=out, log=logs.append, save_models=True)
    runs = {r["task"]: r for r in results["runs"]}
    assert runs["count"]["metric"] == "pearson" and runs["sts"]["metric"] == "spearman"
    assert runs["count"]["test"] > 50.0 and runs["sts"]["test"] > 30.0, logs
    assert set(runs["count"]["other_metrics"]) == {"spearman"}
    assert set(runs["sts"]["other_metrics"]) == {"pearson"}
    assert runs["count"]["dev"] > 0 and "undefined" not in runs["count"]
    targets = results["data"]["count"]["targets"]
    assert results["data"]["count"]["labels"] == 0 and targets["min"] == -1.0
    md = (out / "results.md").read_text()
    assert "| count | Pearson r ×100 | baseline |" in md and "| sts | Spearman ρ ×100 | baseline |" in md
    assert "| count | baseline | Spearman ρ ×100 |" in md

    for task, spec in (("count", 0), ("sts", 1)):
        folder = Path(runs[task]["saved_model"])
        model = TaskModel.load(folder)
        data = load_task(load_config(config)["tasks"][spec])
        assert model.saved.kind == data.kind and model.saved.labels == []
        scale = data.targets()
        # the float64 scale exactly (float32 kept 0.25 steps of a mean of 3e6)
        assert model.target_mean.dtype == model.target_std.dtype == torch.float64
        assert float(model.target_mean) == scale["mean"] and float(model.target_std) == scale["std"]
        examples = data.splits["test"]
        texts = [(ex.tokens, ex.tokens_b) if data.kind == "pair_regression" else ex.tokens
                 for ex in examples]
        guess = model.predict(texts)
        assert all(isinstance(g, float) for g in guess)
        gold = [ex.label for ex in examples]
        assert 100.0 * METRICS[data.metric](gold, guess) == pytest.approx(runs[task]["test"], abs=1e-9)

    text = tmp_path / "new.txt"
    text.write_text("big big big cat\nsmall dog\n", encoding="utf-8")
    folder = runs["count"]["saved_model"]
    expect = TaskModel.load(folder).predict(["big big big cat", "small dog"])
    assert expect[0] > expect[1]                # three "big" against one "small"
    assert main(["predict", folder, str(text), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [float(line.split("\t")[1]) for line in lines] == expect
    assert main(["predict", folder, str(text), "--quiet", "--format", "jsonl"]) == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["label"] for r in recs] == expect and recs[1]["text"] == "small dog"


def test_a_saved_models_edited_target_scale_and_the_spacy_component_are_refused(tmp_path):
    from elmo.tasks.models import TaskModel
    from elmo.tasks.saved import TaskModelError
    specs = _write_data(tmp_path)[:1]
    out = tmp_path / "res"
    cfg = json.loads(_config(tmp_path, specs).read_text())
    cfg["train"]["epochs"] = 1
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    run = run_experiment(load_config(tmp_path / "config.json"), out=out, log=lambda s: None,
                         save_models=True)["runs"][0]
    spacy = pytest.importorskip("spacy")
    with pytest.raises(ValueError, match="a regression model predicts a number, which has no place"):
        spacy.blank("en").add_pipe("elmo_task", config={"model": run["saved_model"]})
    cfg_path = Path(run["saved_model"]) / "config.json"
    saved = json.loads(cfg_path.read_text())
    saved["target"]["std"] *= 2
    cfg_path.write_text(json.dumps(saved))
    with pytest.raises(TaskModelError, match="'target' is .* but the weights hold"):
        TaskModel.load(run["saved_model"])


def _saved_regression_model(tmp_path) -> Path:
    """The folder of a regression model trained for one epoch and saved."""
    specs = _write_data(tmp_path)[:1]
    cfg = json.loads(_config(tmp_path, specs).read_text())
    cfg["train"]["epochs"] = 1
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    run = run_experiment(load_config(tmp_path / "config.json"), out=tmp_path / "res", log=lambda s: None,
                         save_models=True)["runs"][0]
    return Path(run["saved_model"])


def test_a_saved_models_invalid_target_scale_names_the_damaged_file(tmp_path):
    """A target scale that is not a finite mean and a positive std, in config.json or in the
    weights, is a damaged file, said as such: a NaN or inf in config.json read as "the folder's
    files do not belong together" (NaN != NaN), and a std of 0 or below in the weights loaded
    when config.json said the same (every prediction the mean, or of the wrong sign)."""
    from safetensors.torch import load_file, save_file

    from elmo.tasks.models import TaskModel
    from elmo.tasks.saved import TaskModelError
    folder = _saved_regression_model(tmp_path)
    weights, cfg_path = folder / "model.safetensors", folder / "config.json"
    original_weights, original_cfg = weights.read_bytes(), cfg_path.read_text()

    def refused(target=None, **buffers) -> str:
        if target is not None:
            cfg_path.write_text(json.dumps({**json.loads(original_cfg), "target": target}))
        state = load_file(str(weights))
        state.update({k: torch.tensor(v, dtype=torch.float64) for k, v in buffers.items()})
        save_file(state, str(weights))
        try:
            with pytest.raises(TaskModelError) as err:
                TaskModel.load(folder)
        finally:
            weights.write_bytes(original_weights)
            cfg_path.write_text(original_cfg)
        assert "do not belong together" not in str(err.value)
        return str(err.value)

    good = json.loads(original_cfg)["target"]
    for bad in (math.nan, math.inf):
        message = refused({**good, "mean": bad})
        assert message.startswith(f"{cfg_path}: 'target' is ") and "not a finite mean and a positive std" in message
    for std in (0.0, -1.0):
        for target in ({**good, "std": std}, None):       # config.json saying the same, or not
            message = refused(target, target_std=std)
            assert message.startswith(f"{weights}: the saved target scale") and "damaged" in message
    # a NaN in the weights is refused as they are read, naming the tensor
    assert "tensor 'target_mean' holds 1 non-finite values" in refused({**good, "mean": math.nan}, target_mean=math.nan)
    TaskModel.load(folder)                                    # (restored: loads)


@pytest.mark.parametrize("fmt, text, line, shows", [
    ({"type": "tsv", "text": 1, "label": 0, "header": False}, "0.5\tthe cat\nabc\tthe dog\n", 2, "'abc'"),
    ({"type": "tsv", "text": 1, "label": 0, "header": False}, "nan\tthe cat\n", 1, "'nan'"),
    ({"type": "tsv", "text": 1, "label": 0, "header": False, "delimiter": ","}, "1,a\n-inf,b\n", 2, "'-inf'"),
    ({"type": "jsonl", "text": "t", "label": "y"}, '{"t": "a", "y": 1}\n{"t": "b", "y": true}\n', 2, "True"),
    ({"type": "jsonl", "text": "t", "label": "y"}, '{"t": "a", "y": "x1"}\n', 1, "'x1'"),
    ({"type": "jsonl", "text": "t", "label": "y"}, '{"t": "a", "y": null}\n', 1, "None"),
    ({"type": "jsonl", "text": "t", "label": "y"}, '{"t": "a", "y": 1e999}\n', 1, "inf"),
    # float() reads these as numbers: a typo "1_5" as 15, Arabic-Indic digits, hexadecimal
    ({"type": "tsv", "text": 1, "label": 0, "header": False}, "0.5\ta\n1_5\tb\n", 2, "'1_5'"),
    ({"type": "tsv", "text": 1, "label": 0, "header": False}, "\u0663\ta\n", 1, "'\u0663'"),
    ({"type": "jsonl", "text": "t", "label": "y"}, '{"t": "a", "y": "infinity"}\n', 1, "'infinity'"),
])
def test_a_target_that_is_not_a_finite_number_names_file_and_line(tmp_path, fmt, text, line, shows):
    path = tmp_path / "train.txt"
    path.write_text(text, encoding="utf-8")
    spec = {"task": "regression", "name": "r", "format": fmt,
            "files": {"train": str(path), "test": str(path)}}
    with pytest.raises(TaskDataError) as err:
        load_task(spec)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: the target {shows}") and "not a finite number" in message
    assert "\n" not in message


def test_targets_are_numbers_without_classes(tmp_path):
    """"1" and "1.0" are the same number, not labels; no label set, nothing "unseen"; a
    constant training target is refused, as is a max_train sample that makes it one."""
    path = tmp_path / "t.tsv"
    path.write_text("1\ta\n1.0\tb\n2.5\tc\n-3e-1\td\n", encoding="utf-8")
    test = tmp_path / "test.tsv"
    test.write_text("7\ta b\n", encoding="utf-8")
    spec = {"task": "regression", "name": "r", "dev_fraction": 0,
            "format": {"type": "tsv", "text": 1, "label": 0, "header": False},
            "files": {"train": str(path), "test": str(test)}}
    data = load_task(spec)
    assert [ex.label for ex in data.splits["train"]] == [1.0, 1.0, 2.5, -0.3]
    assert data.labels == [] and data.unseen_labels() == {} and data.describe_unseen() is None
    assert data.describe_labels().startswith("numeric targets from -0.3 to 2.5")
    path.write_text("2\ta\n2.0\tb\n", encoding="utf-8")
    with pytest.raises(TaskDataError, match=r"t.tsv: every training target is 2.0; a regression "
                                            r"task needs targets that differ"):
        load_task(spec)
    path.write_text("2\ta\n2.0\tb\n5\tc\n", encoding="utf-8")
    from elmo.tasks.datasets import subsample
    seed = next(s for s in range(100) if subsample([0, 1, 2], 2, s) == [0, 1])   # both 2s kept
    with pytest.raises(TaskDataError, match=f"2 of 3 kept by max_train 2, subset_seed {seed}"):
        load_task({**spec, "max_train": 2, "subset_seed": seed})


def test_sentiment_rating_reads_the_mean_rating_as_a_number(tmp_path):
    folder = tmp_path / "movie-sentiment"
    folder.mkdir()
    for split in ("train", "dev", "test"):
        (folder / f"{split}.tsv").write_text("a\t-3.5\tbad film\nb\t0.25\tok film\nc\t4\t\n"
                                             "d\t2\tgood film\n", encoding="utf-8")
    data = load_task({"task": "sentiment_rating", "data_dir": str(folder)})
    assert data.kind == "regression" and data.metric == "pearson" and data.labels == []
    assert [ex.label for ex in data.splits["train"]] == [-3.5, 0.25, 2.0]   # empty text skipped
    assert data.splits["test"][1].tokens == ["ok", "film"]


def test_an_undefined_test_correlation_is_nan_with_its_reason_in_the_log_and_results_md():
    """A model that predicts one number for every text has no correlation with anything: the
    record holds NaN and why, the log says it, and results.md shows n/a and the reason."""
    import torch
    from elmo.tasks.datasets import Example, TaskData
    from elmo.tasks.report import markdown
    from elmo.tasks.train_loop import split_metrics

    class Constant(torch.nn.Module):
        def predict(self, examples):
            return [0.5] * len(examples)

    test = [Example(["a"], 1.0), Example(["b"], 2.0), Example(["c"], 4.0)]
    data = TaskData("graded", "regression", "pearson", [], {"train": test, "dev": [], "test": test})
    logs: list = []
    out = split_metrics(Constant(), data, lambda examples: examples, logs.append)
    assert math.isnan(out["pearson"]) and math.isnan(out["other_metrics"]["spearman"])
    assert "constant" in out["undefined"] and logs == [f"graded: the test correlation is "
                                                       f"undefined (NaN): {out['undefined']}"]
    run = {"task": "graded", "variant": "baseline", "seed": 1, "metric": "pearson",
           "test": out["pearson"], "undefined": out["undefined"]}
    summary = [{"task": "graded", "metric": "pearson", "variant": "baseline", "elmo": None,
                "seeds": [1], "test_mean": float("nan"), "test_std": float("nan"),
                "dev_mean": float("nan"), "seconds": 1.0,
                "other_metrics_mean": {"spearman": float("nan")}}]
    md = markdown({"config": {"name": "g", "seeds": [1]}, "runs": [run], "summary": summary})
    assert "| graded | Pearson r ×100 | baseline |" in md
    assert f"* graded / baseline / seed 1: {out['undefined']}" in md
    assert "| graded | baseline | Spearman ρ ×100 | n/a |" in md


def test_further_test_sets_of_a_graded_task_record_the_other_correlation_and_why_undefined(tmp_path):
    """A further test set (a task's other ``files``) gets what test gets: the other
    correlation in the record, the summary and results.md, and why its correlation is
    undefined (a constant target) in the record, the log and results.md."""
    spec = _write_data(tmp_path)[0]
    const = tmp_path / "data" / "const.tsv"
    const.write_text("score\tsentence\n2\tbig cat\n2\tsmall dog\n2\tthe mat\n", encoding="utf-8")
    spec["files"].update(again="data/count-test.tsv", const="data/const.tsv")
    cfg = json.loads(_config(tmp_path, [spec]).read_text())
    cfg["train"]["epochs"] = 2
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    logs: list = []
    out = tmp_path / "res"
    run = run_experiment(load_config(tmp_path / "config.json"), out=out, log=logs.append)["runs"][0]
    assert set(run["extra_tests"]) == {"again", "const"} and run["extra_tests"]["again"] == run["test"]
    others = run["extra_tests_other_metrics"]
    assert others["again"] == run["other_metrics"] and math.isnan(others["const"]["spearman"])
    assert set(run["extra_tests_undefined"]) == {"const"}
    why = run["extra_tests_undefined"]["const"]
    assert "constant" in why and f"count: the const correlation is undefined (NaN): {why}" in logs
    saved = json.loads((out / "results.json").read_text())
    assert saved["runs"][0]["extra_tests_other_metrics"]["const"] == {"spearman": None}
    row = saved["summary"][0]["extra_tests_other_metrics_mean"]
    assert row["again: spearman"] == pytest.approx(run["other_metrics"]["spearman"], abs=1e-12)
    md = (out / "results.md").read_text()
    assert f"* count / baseline / seed 1 (test set `const`): {why}" in md
    assert "| count | baseline | again: Spearman ρ ×100 |" in md
    assert "| count | baseline | const: Spearman ρ ×100 | n/a |" in md


class _Weights(torch.nn.Module):
    """The least a fit() needs of a task model: one weight, a loss, no biLM."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0]))
        self.encoder = type("NoElmo", (), {"elmo": None})()

    def loss(self, batch):
        return (self.w - 3.0).pow(2).sum()


def _fit_with_dev_scores(monkeypatch, dev_scores, epochs, patience):
    """fit() on a one-weight model whose dev score per epoch is ``dev_scores``; returns the
    result, the log and the weight after each epoch."""
    from elmo.tasks import train_loop
    from elmo.tasks.datasets import Example
    model, weights, logs = _Weights(), [], []

    def fake_score(m, dev, make, metric, labels, **bar):     # (bar: fit's progress settings)
        weights.append(m.w.item())
        return dev_scores[len(weights) - 1]

    monkeypatch.setattr(train_loop, "score", fake_score)
    cfg = train_loop.FitConfig(epochs=epochs, patience=patience, lr=0.1, batch_size=1)
    result = train_loop.fit(model, [Example(["a"], 1.0)], [Example(["b"], 2.0)], lambda ex: ex,
                            "pearson", [], cfg, seed=1, log=logs.append)
    return result, logs, weights, model.w.item()


def test_early_stopping_ranks_a_nan_dev_score_below_any_finite_one(monkeypatch):
    nan = float("nan")
    result, logs, weights, kept = _fit_with_dev_scores(monkeypatch, [nan, 40.0, nan, 30.0, nan], 5, 3)
    assert result["best_epoch"] == 2 and result["best_dev"] == 40.0 and kept == weights[1]
    assert result["epochs"] == 5 and not any("every epoch" in line for line in logs)


def test_a_dev_score_undefined_in_every_epoch_keeps_the_last_epoch_and_says_why(monkeypatch):
    """Nothing to compare: the parameters kept are the last epoch's (not the untrained start),
    and one log line says why."""
    result, logs, weights, kept = _fit_with_dev_scores(monkeypatch, [float("nan")] * 5, 5, 2)
    assert result["epochs"] == 2 and result["best_epoch"] == 2 and math.isnan(result["best_dev"])
    assert kept == weights[-1] and kept != 1.0             # trained, not the start's 1.0
    said = [line for line in logs if "undefined (NaN) in every epoch" in line]
    assert len(said) == 1 and "kept the last epoch's parameters (epoch 2)" in said[0]


@pytest.mark.parametrize("rows, problem", [
    # past the range a graded task takes: became inf in the label tensor, then a torch
    # overflow traceback
    (["1e300\ta", "2\tb"], r"t.tsv:1: the target '1e300' is beyond ±1.7e\+38, the range a graded task takes"),
    (["1\ta", "-3.4e38\tb"], r"t.tsv:2: the target '-3.4e38' is beyond ±1.7e\+38"),
    # no spread float64 can divide by: the model would train on one standardised number
    (["0\ta", "5e-324\tb", "5e-324\tc"],
     r"t.tsv: the training targets \(0.0 to 5e-324\) are all one number once standardised"),
])
def test_targets_the_model_cannot_hold_apart_are_refused_naming_the_file(tmp_path, rows, problem):
    path = tmp_path / "t.tsv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    spec = {"task": "regression", "name": "r", "dev_fraction": 0,
            "format": {"type": "tsv", "text": 1, "label": 0, "header": False},
            "files": {"train": str(path), "test": str(path)}}
    with pytest.raises(TaskDataError, match=problem):
        load_task(spec)


@pytest.mark.parametrize("rows", [["100000001\ta", "100000002\tb"], ["0\ta", "1e-46\tb", "2e-46\tc"]])
def test_a_small_spread_the_float64_standardising_holds_apart_is_taken(tmp_path, rows):
    """Targets standardised in float64 differ as the model trains on them: 1e8 + 1 and 1e8 + 2
    (one number in float32, refused before) are -1 and 1."""
    from elmo.tasks.kinds import MAX_TARGET, standardised_distinct
    path = tmp_path / "t.tsv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    spec = {"task": "regression", "name": "r", "dev_fraction": 0,
            "format": {"type": "tsv", "text": 1, "label": 0, "header": False},
            "files": {"train": str(path), "test": str(path)}}
    assert len(load_task(spec).splits["train"]) == len(rows)
    assert standardised_distinct([1e-30, 2e-30, 0.0]) == 3 and standardised_distinct([1e8 + 1, 1e8 + 2]) == 2
    assert standardised_distinct([MAX_TARGET, -MAX_TARGET]) == 2
    assert standardised_distinct([0.0, 5e-324]) == 1


def test_an_experiment_whose_graded_test_is_undefined_finishes_resumes_and_is_tabled(tmp_path, capsys):
    """A constant test target: every run's test correlation is NaN (None in results.json). With
    two seeds the +ELMo gain's spread was statistics.stdev of NaNs (an AttributeError that
    stopped the experiment), and the None read back was refused by --resume,
    experiment-report and experiment-table. A classification task beside it keeps its own
    metric and gain."""
    from elmo.tasks.paired import difference_text, paired_difference
    specs = _write_data(tmp_path)[:1]
    const = tmp_path / "data" / "count-test.tsv"
    const.write_text("score\tsentence\n" + "".join(f"2\t{w} cat\n" for w in WORDS), encoding="utf-8")
    cls = tmp_path / "data" / "cls.tsv"
    cls.write_text("".join(f"{'yes' if 'big' in s else 'no'}\t{' '.join(s)}\n" for s in _sentences(40, 5)))
    specs.append({"task": "classification", "name": "cls", "format": {"type": "tsv", "text": 1, "label": 0,
                                                                        "header": False},
                  "files": {"train": "data/cls.tsv", "dev": "data/cls.tsv", "test": "data/cls.tsv"}})
    cfg = json.loads(_config(tmp_path, specs).read_text())
    cfg.update(seeds=2, variants=[{"name": "baseline"}, {"name": "elmo", "elmo": {"positions": ["input"]}}])
    cfg["train"]["epochs"] = 1
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "res"
    results = run_experiment(load_config(tmp_path / "config.json"), out=out, log=lambda s: None)
    rows = {(r["task"], r["variant"]): r for r in results["summary"]}
    assert math.isnan(rows["count", "elmo"]["gain_mean"]) and math.isnan(rows["count", "elmo"]["gain_std"])
    assert rows["cls", "elmo"]["metric"] == "accuracy" and math.isfinite(rows["cls", "elmo"]["gain_mean"])
    saved = json.loads((out / "results.json").read_text())
    assert all(r["test"] is None and r["undefined"] for r in saved["runs"] if r["task"] == "count")
    assert "undefined: a test score of the 2 paired seed(s)" in difference_text(
        paired_difference(saved, "count", "elmo", "baseline"))
    assert main(["experiment", str(tmp_path / "config.json"), "--out", str(out), "--resume", "--quiet"]) == 0
    assert main(["experiment-report", str(out)]) == 0
    assert main(["experiment-table", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| count | Pearson r ×100 | baseline |" in table and "| cls | accuracy % | baseline |" in table
