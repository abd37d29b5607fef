"""benchmarks/gpu/run.sh --smoke: the GPU session's script, end to end on the CPU at a tiny size."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_script_smoke_runs_end_to_end(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), PYTHON=sys.executable)
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu" / "run.sh"), "--smoke"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8 and all(p.stat().st_size <= 16e6 for p in files)  # what a session can bring back
    results = json.loads((out / "results.json").read_text())
    assert "passed" in results["tests"] and "FAILED" not in results["tests"]
    impls = {r["impl"] for r in results["inference"] if "tok_s" in r}
    assert {"reference", "elmo", "elmo-bf16"} <= impls
    assert all(r["tok_s"] > 0 for r in results["inference"] if "tok_s" in r)
    assert any(r["impl"] == "eager" for r in results["step_loop"])
    assert {r["mode"] for r in results["train_step"]} == {"fp32", "bf16 autocast"}
    training = results["training"]
    assert training["steps"] > 0 and training["heldout_ppl_after"] > 0
    from elmo.training.export import load_language_model
    model, vocab = load_language_model(out / "model")  # the trained weights load back
    assert len(vocab) == model.softmax.weight.shape[0]
