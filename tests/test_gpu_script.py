"""benchmarks/gpu/run.sh --smoke: the GPU session's script, end to end on the CPU at a tiny size."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_script_smoke_runs_end_to_end(tmp_path):
    out = tmp_path / "out"
    # as in NVIDIA's PyTorch images: float32 products would start in TF32 (the variable is read
    # on the CPU too, so the smoke run sees what a GPU run would)
    env = dict(os.environ, OUT=str(out), PYTHON=sys.executable, TORCH_ALLOW_TF32_CUBLAS_OVERRIDE="1",
               NVIDIA_TF32_OVERRIDE="1")
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu" / "run.sh"), "--smoke"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = (out / "run.log").read_text()
    assert "matmul tf32 False" in log  # what the CUDA tests meet
    assert "== needs: ok: numpy" in log  # the interpreter imports what the tests and run.py need
    assert "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1" in log.splitlines()[0]  # what the image had, logged
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8 and all(p.stat().st_size <= 16e6 for p in files)  # what a session can bring back
    results = json.loads((out / "results.json").read_text())
    assert "passed" in results["tests"] and "FAILED" not in results["tests"]
    # float32 is float32 in every phase: cuDNN's TF32 (its default) off for the reference and cuDNN's LSTM too
    assert results["float32"]["cudnn_allow_tf32"] is False
    assert results["float32"]["cuda_matmul_allow_tf32"] is False
    assert results["float32"]["float32_matmul_precision"] == "highest"
    assert results["float32"]["NVIDIA_TF32_OVERRIDE"] == "0"
    assert results["cpu_autocast_as_cudas"] is True   # the bf16 steps cast as on a GPU
    impls = {r["impl"] for r in results["inference"] if "tok_s" in r}
    assert {"reference", "elmo", "elmo-bf16"} <= impls
    assert all(r["tok_s"] > 0 for r in results["inference"] if "tok_s" in r)
    assert any(r["impl"] == "eager" for r in results["step_loop"])
    assert {r["mode"] for r in results["train_step"]} == {"fp32", "bf16 autocast"}
    training = results["training"]
    assert training["steps"] > 0 and training["heldout_ppl_after"] > 0 and training["epochs"] > 0
    from elmo.training.export import load_language_model
    model, vocab = load_language_model(out / "model")  # the trained weights load back
    assert len(vocab) == model.softmax.weight.shape[0]


def test_gpu_script_inference_keeps_what_it_measured_before_a_failure(monkeypatch):
    """The one GPU session cannot be run again: a failure at a later batch size (out of memory,
    say) keeps the earlier batch sizes' rows, and the opt-in int8 kernel failing (its CUDA
    kernel is not the CPU's) leaves it out with its error instead of ending the phase."""
    import pytest
    import torch

    from elmo.modules import lstm_inference
    run = _load_run_py()
    calls, real_timed = [], run.timed

    def timed(fns, *args, **kwargs):
        calls.append(sorted(fns))
        if len(calls) == 2:
            raise RuntimeError("CUDA out of memory (made up)")
        return real_timed(fns, *args, **kwargs)

    def broken(*args, **kwargs):
        raise RuntimeError("int8 kernel failed (made up)")
    monkeypatch.setattr(run, "timed", timed)
    monkeypatch.setattr(lstm_inference.Int8Weights, "matvec", broken)
    monkeypatch.setattr(lstm_inference.Int8Weights, "product", broken)
    rows: list = []
    with pytest.raises(RuntimeError, match="out of memory"):
        run.inference(torch.device("cpu"), True, run.Clock(60), rows)
    assert {r["batch"] for r in rows if "tok_s" in r} == {1}
    assert {"reference", "elmo", "elmo-bf16"} <= {r["impl"] for r in rows if "tok_s" in r}
    if lstm_inference.int8_supported(torch.device("cpu")):
        assert [r["impl"] for r in rows if "error" in r] == ["elmo-int8"]
        assert "elmo-int8" not in calls[0]
    assert "failed**" in run.markdown({"device": "d", "torch": "t", "when": "w", "tests": "-",
                                      "host": {"cpu": "c", "cores": 1}, "inference": rows,
                                      "inference_error": "RuntimeError: made up"})


@pytest.fixture(autouse=True, scope="module")
def run_py_writing_none(tmp_path_factory):
    """run.sh with an option run.py does not know, started with the module: it runs beside the
    smoke run (this process only waits), and its test reads what it left. Yields the started
    run.sh and its $OUT."""
    out = tmp_path_factory.mktemp("writes_none") / "out"
    out.mkdir()
    (out / "results.json").write_text('{"stale": true}\n')  # an earlier run's: not taken for this one's
    env = dict(os.environ, OUT=str(out), PYTHON=sys.executable)
    proc = subprocess.Popen(["bash", str(ROOT / "benchmarks" / "gpu" / "run.sh"), "--smoke", "--no-such-option"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    yield proc, out
    if proc.poll() is None:   # (not waited for: its test was not run, or failed) bash and its children
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def test_gpu_script_leaves_its_results_files_when_run_py_writes_none(run_py_writing_none):
    """run.py ending before it writes anything (here: an option it does not know, as an import
    error would) still leaves results.json and RESULTS.md with the tests' outcome and its exit
    status: the one GPU session reads those two files."""
    proc, out = run_py_writing_none
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0, output[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert "passed" in results["tests"] and results["measurements_exit"] == 2
    assert "exited 2" in (out / "RESULTS.md").read_text()


def _load_run_py():
    return load_script(ROOT / "benchmarks" / "gpu" / "run.py", "gpu_run")


def test_gpu_script_float32_is_full_float32_in_process():
    """run.py run directly (not through run.sh) in a process started with TF32 products (as
    TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 starts it) puts float32 products back to float32."""
    import torch
    run = _load_run_py()
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("high")  # what the variable starts a process with
    try:
        settings = run.full_float32()
        assert torch.get_float32_matmul_precision() == "highest"
        assert settings["cuda_matmul_allow_tf32"] is False and settings["cudnn_allow_tf32"] is False
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.allow_tf32 = before[1]


def test_gpu_script_training_phase_stays_inside_the_budget():
    """The training phase trained at least 30 s whatever was left: with the earlier phases
    slow, it ran past the budget into run.sh's timeout, which killed it mid-run. Now it trains
    for what the budget holds after the phase's reserve, and is skipped where that is too little."""
    run = _load_run_py()
    reserve, least = run.TRAIN_RESERVE_S, run.TRAIN_MIN_S
    assert run.training_seconds(run.Clock(reserve + least - 5), 3.0, smoke=False) is None
    seconds = run.training_seconds(run.Clock(reserve + least + 20), 3.0, smoke=False)
    assert least <= seconds <= least + 20
    assert run.training_seconds(run.Clock(3600), 2.0, smoke=False) == 120.0  # --minutes when time allows
    out = run.training_run(None, False, run.Clock(10), 3.0, None, Path("unused"))
    assert "skipped" in out


def test_gpu_script_budget_counts_from_the_processs_start(monkeypatch, tmp_path):
    """run.sh's timeout (--budget-s plus 20 s) starts with the process, run.py's budget started
    after its imports: on a fresh GPU machine torch's import with its CUDA libraries takes
    many seconds, which the training phase, planned to end at the budget, then ran past."""
    import time
    run = _load_run_py()
    assert 0 < time.monotonic() - run.STARTED < 600   # (set as the script was loaded, before torch)
    clocks, real = [], run.Clock

    class Seen(Exception):
        pass

    def clock(seconds, started=None):
        clocks.append(real(seconds, started))
        raise Seen
    monkeypatch.setattr(run, "STARTED", time.monotonic() - 50)   # 50 s of imports
    monkeypatch.setattr(run, "Clock", clock)
    monkeypatch.setattr(sys, "argv", ["run.py", "--out", str(tmp_path), "--smoke", "--budget-s", "100"])
    with pytest.raises(Seen):
        run.main()
    assert 45 < clocks[0].left() <= 50


def test_gpu_script_training_steps_report_peak_device_memory(monkeypatch):
    """Each training-step row carries the device's peak memory, counted afresh for each
    configuration and mode (torch.cuda's peak counter: reset before the model is built, read
    after its steps); None on the CPU."""
    import torch
    run = _load_run_py()
    calls = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: calls.append(device))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 3 * 2**20 + 2**19)
    cuda = torch.device("cuda", 0)
    run.reset_peak_memory(cuda)
    assert calls == [cuda] and run.peak_memory_mib(cuda) == 3.5
    assert run.peak_memory_mib(torch.device("cpu")) is None
    resets = []
    monkeypatch.setattr(run, "reset_peak_memory", resets.append)
    rows: list = []
    run.train_steps(torch.device("cpu"), True, run.Clock(60), rows)
    assert len(resets) == len(rows) == 2 and all("peak_mib" in r for r in rows)
    assert "peak MiB" in run.markdown({"device": "d", "torch": "t", "when": "w", "tests": "-",
                                       "host": {"cpu": "c", "cores": 1}, "train_step": rows})


def test_cuda_tests_put_float32_products_back_to_float32():
    """tests/test_cuda.py run by hand (not through run.sh) in a process started with TF32
    products, as TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 starts it, runs each test (an autouse
    fixture) with float32 products in float32, for its 1e-6 tolerances."""
    import torch

    from tests import test_cuda
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # what the variable starts a process with
    try:
        with test_cuda.float32_products():
            assert torch.get_float32_matmul_precision() == "highest"
            assert torch.backends.cuda.matmul.allow_tf32 is False
        assert torch.get_float32_matmul_precision() == "high"  # given back
    finally:
        torch.set_float32_matmul_precision(before)
