"""elmo.runtime: the one place torch's thread count is set, and what a measurement ran on."""
from __future__ import annotations

import os
import re

import pytest
import torch

from elmo.runtime import cpu_model, machine_description, set_threads, threads


def test_set_threads_and_keep():
    assert set_threads(2) == 2 == torch.get_num_threads()
    assert set_threads(None) == 2 and set_threads(0) == 2  # unset: torch's setting stays
    with pytest.raises(ValueError, match="threads must be at least 0, got -3"):
        set_threads(-3)
    for n in (2.5, "2", True):  # (True set one thread; 2.5 two)
        with pytest.raises(TypeError, match="threads must be an integer"):
            set_threads(n)
    assert torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="threads: 1000000 is more than 8 per CPU"):
        set_threads(1_000_000)                             # (it ended the process in OpenMP)
    assert torch.get_num_threads() == 2


def test_threads_block_restores_also_on_error():
    set_threads(1)
    with threads(2) as n:
        assert n == 2 == torch.get_num_threads()
    assert torch.get_num_threads() == 1
    with pytest.raises(RuntimeError, match="boom"):
        with threads(3):
            raise RuntimeError("boom")
    assert torch.get_num_threads() == 1
    with threads(None) as n:
        assert n == 1


def test_cpu_model_reads_the_first_model_name(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
                    "model name\t: AMD EPYC\n\nprocessor\t: 1\nmodel name\t: Other\n")
    assert cpu_model(info) == "AMD EPYC (family 25 model 1)"
    info.write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz\n")
    assert cpu_model(info) == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    info.write_text("processor\t: 0\nmodel name\t:\n")  # empty: the fallback, never ""
    assert cpu_model(info) and cpu_model(info) != ""
    assert cpu_model(tmp_path / "missing")  # no file: the fallback


def test_machine_description_names_cpu_threads_and_versions():
    with threads(1):
        m = machine_description()
    assert m["threads"] == 1 and m["torch"] == torch.__version__
    assert isinstance(m["cpu"], str) and m["cpu"]
    assert m["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert isinstance(m["cores"], int) and m["cores"] >= 1
    assert m["highway_products"] in ("oneDNN", "PyTorch")


def test_machine_description_names_the_library_of_the_highway_products(monkeypatch):
    from elmo.modules import dense
    monkeypatch.setattr(dense, "BACKEND", "default")
    assert machine_description()["highway_products"] == "PyTorch"
    if dense._onednn_linear_available():
        monkeypatch.setattr(dense, "BACKEND", "onednn")
        assert machine_description()["highway_products"] == "oneDNN"


def test_a_forked_child_runs_torch_after_its_parent_ran_parallel_work(tmp_path):
    """torch's OpenMP threads do not survive fork: a multiprocessing pool over a loaded model
    waited for ever in its first parallel operation; ``import elmo`` makes children use one
    thread."""
    import subprocess
    import sys
    from pathlib import Path
    script = tmp_path / "fork.py"
    script.write_text(
        "import multiprocessing as mp, torch, elmo\n"
        "torch.set_num_threads(2)\n"
        "def work(n):\n"
        "    x = torch.ones(n)\n"
        "    return float((x * 2).sum()), torch.get_num_threads()\n"
        "if __name__ == '__main__':\n"
        "    parent = work(1 << 22)       # (large enough for both threads; the sum exact)\n"
        "    with mp.get_context('fork').Pool(1) as pool:\n"
        "        child = pool.apply_async(work, (1 << 22,)).get(timeout=60)\n"
        "    print(parent[0] == child[0], child[1])\n")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "1"]


@pytest.mark.parametrize("env, named", [({"WORLD_SIZE": ""}, "WORLD_SIZE=''"), ({"RANK": "x"}, "RANK='x'"),
                                        ({"LOCAL_RANK": "1.5"}, "LOCAL_RANK='1.5'"),
                                        ({"WORLD_SIZE": "2", "RANK": "2"}, "RANK=2, WORLD_SIZE=2"),
                                        ({"WORLD_SIZE": "0"}, "WORLD_SIZE=0")])
def test_torchruns_variables_that_make_no_launch_name_themselves(monkeypatch, env, named):
    """A WORLD_SIZE left empty by a script (or a rank outside the world) failed in int() with
    "invalid literal for int() with base 10: ''", naming no variable; train, finetune and embed
    read them through launch_env, which names it."""
    from elmo.runtime import launch_env
    from elmo.training.distributed import is_main_process, launched_world_size
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert launch_env() == (0, 1, 0)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for read in (launch_env, is_main_process, launched_world_size):
        with pytest.raises(ValueError, match=re.escape(named)):
            read()


@pytest.mark.parametrize("bf16, amx, onednn, native", [
    (False, False, True, False),   # no bfloat16 instructions (Zen 3, older Xeons)
    (True, False, False, False),   # the CPU has them, oneDNN may not use them (ONEDNN_MAX_CPU_ISA)
    (True, False, True, True), (False, True, True, True)])
def test_native_bfloat16_needs_the_instructions_and_onednn_allowed_to_use_them(monkeypatch, bf16, amx, onednn, native):
    from elmo.runtime import cpu_multiplies_bfloat16

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: onednn)
    assert cpu_multiplies_bfloat16() is native
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    assert cpu_multiplies_bfloat16() is None   # a PyTorch without the probe: not known


def test_onednn_held_below_avx512_does_not_multiply_bfloat16_natively():
    """ONEDNN_MAX_CPU_ISA=SSE41 (and ATEN_CPU_CAPABILITY=default) simulate a CPU without
    native bfloat16 on any x86 machine; on others oneDNN's variable does nothing."""
    import platform
    import subprocess
    import sys

    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("ONEDNN_MAX_CPU_ISA names x86 instruction sets")
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="SSE41", ATEN_CPU_CAPABILITY="default")
    done = subprocess.run([sys.executable, "-c", "from elmo.runtime import cpu_multiplies_bfloat16 as f; "
                           "print(f())"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("False", "None")
