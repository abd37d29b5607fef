"""A graded task's precision: targets far from 0 for their spread (3e6 + N(0, 1), where
float32's spacing is 0.25) standardised and unscaled in float64, against a float64 ideal;
the float64 target scale kept through dtype casts, saving and loading; and a model saved
with the former float32 scale buffers still loads."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo.cli import main
from elmo.tasks.batching import make_batch
from elmo.tasks.datasets import Example, load_task
from elmo.tasks.embeddings import WordVocab
from elmo.tasks.features import WordFeatures
from elmo.tasks.kinds import target_scale
from elmo.tasks.metrics import METRICS
from elmo.tasks.models import Encoder, SentenceRegressor, TaskModel
from elmo.tasks.experiment_config import load_config
from elmo.tasks.runner import run_experiment
from tests.test_tasks_regression import _config, _write_data

OFFSET = 3e6 + 0.1        # (not a float32 number: its float32 neighbours are 0.25 apart)
EPS64 = 2.0 ** -52


def _model_and_batch(n: int = 200):
    """An untrained SentenceRegressor fitted to n targets 3e6 + 0.1 + N(0, 1), a batch of them
    and the targets (float64)."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    y = OFFSET + rng.normal(size=n)
    words = ["a", "b", "c"]
    vocab = WordVocab(words)
    model = SentenceRegressor(Encoder(WordFeatures(torch.randn(len(vocab), 4)), 4, 0.0),
                              hidden=4, dropout=0.0)
    examples = [Example([words[i % 3]], float(v)) for i, v in enumerate(y)]
    model.set_target_scale(*target_scale(examples))
    return model, make_batch(examples, "regression", vocab, {}, 50), y


def test_training_targets_far_from_zero_are_standardised_in_float64():
    """The loss compares the output with (target - mean) / std as float64 gives it, rounded
    once to float32: an output equal to that float32 value has loss 0 up to one float32
    rounding of each target (float32 labels and mean gave errors of up to 0.2 std)."""
    model, batch, y = _model_and_batch()
    mean, std = y.mean(), y.std()
    ideal = (y - mean) / std                                              # float64
    model.logits = lambda b: torch.from_numpy(ideal.astype(np.float32)).unsqueeze(-1)
    # each target off by at most one float32 rounding: squared, at most (|z| 2^-23)^2
    bound = (np.abs(ideal).max() * 2.0 ** -23) ** 2
    assert float(model.loss(batch)) <= bound
    model.logits = lambda b: torch.zeros(len(y), 1)
    # mean(z^2) is exactly 1 for a population std: one float32 rounding per term and a sum of
    # n terms, each within a relative 2^-24, bound the float32 loss's error
    assert float(model.loss(batch)) == pytest.approx(1.0, abs=(len(y) + 3) * 2.0 ** -24)


def test_predictions_far_from_zero_are_unscaled_in_float64():
    """output * std + mean in float64: each prediction within two float64 roundings of the
    float64 ideal, Pearson r against it 1 (float32 unscaling rounded them to 0.25 steps)."""
    model, batch, y = _model_and_batch()
    z = torch.from_numpy(((y - y.mean()) / y.std()).astype(np.float32))
    model.logits = lambda b: z.unsqueeze(-1)
    pred = np.asarray(model.predict_batch(batch))
    ideal = z.double().numpy() * y.std() + y.mean()
    assert pred.dtype == np.float64
    assert np.abs(pred - ideal).max() <= 2 * EPS64 * np.abs(ideal).max()
    # an error of at most 2 eps |3e6| against a unit spread leaves r within 1e-12 of 1
    assert METRICS["pearson"](list(ideal), list(pred)) > 1 - 1e-12
    assert not np.all(np.mod((pred - 3e6) * 4, 1) == 0)      # not on float32's 0.25 grid


@pytest.mark.parametrize("cast", [lambda m: m.half(), lambda m: m.float(), lambda m: m.bfloat16(),
                                  lambda m: m.to(torch.float32), lambda m: m.to("cpu", torch.float16),
                                  lambda m: torch.nn.Sequential(m).half()[0]])
def test_a_dtype_cast_leaves_the_target_scale_float64(cast):
    """model.half() rounded a mean of 3e6 + 0.1 to inf (float16's largest is 65504), .float()
    to 3e6: the scale stays float64, in the state dict too, and predictions keep it."""
    model, batch, y = _model_and_batch(20)
    mean, std = float(model.target_mean), float(model.target_std)
    cast(model)
    for name, value in (("target_mean", mean), ("target_std", std)):
        buf = getattr(model, name)
        assert buf.dtype == torch.float64 and float(buf) == value
        assert model.state_dict()[name].dtype == torch.float64
    assert model.encoder.lstm.lstm.weight_ih_l0.dtype != torch.float64   # (the cast did happen)
    model.float()
    # the logits as predict_batch gets them, under no_grad: with autograd on, the LSTM runs
    # other kernels (oneDNN's without it), a float32 ulp off on some inputs (3e-8 at 0.3 here
    # with ONEDNN_MAX_CPU_ISA=AVX2). So the comparison stays exact, and a float32 scale (off by
    # up to 0.11 here) fails it
    with torch.no_grad():
        z = model.logits(batch).squeeze(-1).double()
    assert model.predict_batch(batch) == (z * std + mean).tolist()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_device_move_moves_the_float64_target_scale():
    model, batch, y = _model_and_batch(20)
    mean = float(model.target_mean)
    model.to("cuda", torch.float16)
    assert model.target_mean.device.type == "cuda" and model.target_mean.dtype == torch.float64
    assert float(model.target_mean) == mean
    model.float()
    pred = model.predict_batch(batch.to("cuda"))
    assert len(pred) == 20 and all(math.isfinite(p) for p in pred)
    model.cpu()
    assert model.target_mean.device.type == "cpu" and float(model.target_mean) == mean


def _offset_task(tmp_path: Path):
    """The count task of test_tasks_regression with OFFSET added to every target, trained one
    run with its model saved: (run record, task data, config path)."""
    spec = _write_data(tmp_path)[0]
    for split in ("train", "dev", "test"):
        path = tmp_path / "data" / f"count-{split}.tsv"
        head, *rows = path.read_text(encoding="utf-8").splitlines()
        rows = [f"{float(r.split(chr(9))[0]) + OFFSET!r}\t{r.split(chr(9), 1)[1]}" for r in rows]
        path.write_text("\n".join([head] + rows) + "\n", encoding="utf-8")
    config = _config(tmp_path, [spec])
    run = run_experiment(load_config(config), out=tmp_path / "res", log=lambda s: None,
                         save_models=True)["runs"][0]
    return run, load_task(load_config(config)["tasks"][0]), config


def test_a_saved_model_far_from_zero_predicts_in_float64_after_loading(tmp_path, capsys):
    """The saved float64 scale loads exactly; the loaded model predicts what evaluation scored,
    off float32's 0.25 grid, and ``elmo predict`` writes those float64 numbers."""
    run, data, _ = _offset_task(tmp_path)
    folder = run["saved_model"]
    model = TaskModel.load(folder)
    scale = data.targets()
    assert float(model.target_mean) == scale["mean"] and float(model.target_std) == scale["std"]
    assert json.loads((Path(folder) / "config.json").read_text())["target"] == {
        "mean": scale["mean"], "std": scale["std"]}
    examples = data.splits["test"]
    guess = model.predict([ex.tokens for ex in examples])
    gold = [ex.label for ex in examples]
    assert 100.0 * METRICS["pearson"](gold, guess) == pytest.approx(run["test"], abs=1e-9)
    assert not all(((g - 3e6) * 4) % 1 == 0 for g in guess)
    text = tmp_path / "new.txt"
    text.write_text("\n".join(" ".join(ex.tokens) for ex in examples[:5]) + "\n", encoding="utf-8")
    # (the same batch as predict's: float32 outputs differ in their last bits between batches)
    expect = model.predict([ex.tokens for ex in examples[:5]])
    assert main(["predict", folder, str(text), "--quiet"]) == 0
    assert [float(line.split("\t")[1]) for line in capsys.readouterr().out.splitlines()] == expect


def test_a_model_saved_with_float32_scale_buffers_still_loads(tmp_path):
    """A model saved before the scale was float64 (float32 buffers, their values in
    config.json) loads; it unscales by those float32 values, now in float64 arithmetic."""
    from safetensors.torch import load_file, save_file
    run, data, _ = _offset_task(tmp_path)
    folder = Path(run["saved_model"])
    new = TaskModel.load(folder)
    texts = [ex.tokens for ex in data.splits["test"]]
    p_new = np.asarray(new.predict(texts))
    m64, s64 = float(new.target_mean), float(new.target_std)
    state = load_file(str(folder / "model.safetensors"))
    for name in ("target_mean", "target_std"):
        state[name] = state[name].to(torch.float32)
    save_file(state, str(folder / "model.safetensors"))
    cfg = json.loads((folder / "config.json").read_text())
    m32, s32 = float(np.float32(m64)), float(np.float32(s64))
    cfg["target"] = {"mean": m32, "std": s32}
    (folder / "config.json").write_text(json.dumps(cfg))
    old = TaskModel.load(folder)
    assert old.target_mean.dtype == torch.float64 and float(old.target_mean) == m32
    assert float(old.target_std) == s32 and m32 != m64
    p_old = np.asarray(old.predict(texts))
    # the same network outputs z: p_new = z s64 + m64, p_old = z s32 + m32 (float64 arithmetic;
    # z recovered from p_new within a few float64 roundings of numbers up to ~3e6)
    z = (p_new - m64) / s64
    assert np.abs(p_old - (z * s32 + m32)).max() <= 8 * EPS64 * np.abs(p_new).max() * max(1.0, s32 / s64)


def test_the_log_shows_targets_far_from_zero_to_their_spread():
    """Targets 3e6 +- 3 were described "from 3e+06 to 3e+06 (training mean 3e+06 ...)", as if
    constant: each number is shown to 4 digits at the size of the std."""
    from elmo.tasks.datasets import TaskData
    train = [Example(["a"], v) for v in (2999997.25, 3000000.5, 3000003.75)]
    text = TaskData("t", "regression", "pearson", [], {"train": train, "dev": [], "test": train}).describe_labels()
    std = float(np.std([2999997.25, 3000000.5, 3000003.75]))
    assert text == f"numeric targets from 2999997.25 to 3000003.75 (training mean 3000000.5, std {std:.4g})"
    train = [Example(["a"], v) for v in (-0.3, 1.0, 2.5)]          # (the common case unchanged)
    text = TaskData("t", "regression", "pearson", [], {"train": train, "dev": [], "test": train}).describe_labels()
    assert text.startswith("numeric targets from -0.3 to 2.5 (training mean 1.067, std ")


@pytest.mark.parametrize("mean, std, named", [
    (float("nan"), 1.0, "mean"), (float("inf"), 1.0, "mean"), (-float("inf"), 1.0, "mean"),
    (0.0, float("inf"), "standard deviation"), (0.0, float("nan"), "standard deviation"),
    (0.0, 0.0, "standard deviation"),
])
def test_a_target_scale_that_is_not_finite_is_refused(mean, std, named):
    """A NaN or infinite mean or std made every standardised target NaN (a NaN loss in
    training, no error); the buffers keep their former values."""
    model, _, _ = _model_and_batch(10)
    before = (float(model.target_mean), float(model.target_std))
    with pytest.raises(ValueError, match=f"the targets' {named} must be a finite"):
        model.set_target_scale(mean, std)
    assert (float(model.target_mean), float(model.target_std)) == before
