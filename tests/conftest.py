"""Shared fixtures: the conformance data in tests/fixtures and small random models."""
from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import pytest
import torch

from elmo import BiLM, ElmoOptions
from elmo.runtime import threads

FIXTURES = Path(__file__).parent / "fixtures"
ALLENNLP = FIXTURES / "allennlp-elmo"
NOSKIP = FIXTURES / "bilm-tf-noskip"

# A test's subprocess that dies of a fatal signal (a torchrun process's rare SIGABRT as the
# job ends, seen about once in 35 to 300 runs) prints its threads' Python stacks in its stderr,
# which the failing assertion shows: where it died, not only that it did.
os.environ.setdefault("PYTHONFAULTHANDLER", "1")

# A test run started in the background by a shell without job control (`pytest &` in a
# script, `nohup ... &`) inherits SIGINT ignored: Python then installs no Ctrl-C handler, here
# or in the commands the tests start, and every test of Ctrl-C saw no KeyboardInterrupt. Their
# subject is the package's handling of Ctrl-C, not the shell's: Python's own handler is put
# back (and the commands started from here get it too, a handled signal being reset by exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def one_thread():
    """Tests use one torch thread: their models are tiny, and on a busy 2-core machine a second
    thread mostly waits for the first."""
    with threads(1):
        yield


@pytest.fixture(autouse=True)
def no_withdrawn_packages_remembered():
    """Each test starts with no package remembered as withdrawn (elmo.data.fetch keeps what
    the registry said for the rest of the process: a test that faked it would bind the next)."""
    from elmo.data import fetch
    fetch._WITHDRAWN.clear()
    yield


def tiny_options(skip: bool = True, n_layers: int = 2, cells: int = 12, proj: int = 6,
                 max_chars: int = 50, activation: str = "relu") -> ElmoOptions:
    return ElmoOptions.from_dict({
        "lstm": {"dim": cells, "projection_dim": proj, "n_layers": n_layers, "cell_clip": 3,
                 "proj_clip": 3, "use_skip_connections": skip},
        "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 6], [3, 8]], "n_highway": 1,
                     "n_characters": 262, "max_characters_per_token": max_chars, "activation": activation},
    })


def random_bilm(seed: int = 0, **kwargs) -> BiLM:
    """A small biLM with random weights, biases included (zero biases would hide bugs)."""
    torch.manual_seed(seed)
    bilm = BiLM(tiny_options(**kwargs))
    with torch.no_grad():
        for p in bilm.parameters():
            p.uniform_(-0.5, 0.5)
        bilm.token_encoder.char_embedding.weight[0].zero_()
    return bilm.eval()


@pytest.fixture
def cuda_like_autocast():
    """The CPU's autocast cast as CUDA's does, for the test (tests/cuda_autocast.py). Code
    that relies on the CPU's casts fails here as it fails under ``torch.autocast("cuda")``."""
    from tests.cuda_autocast import cpu_autocast_as_cudas
    with cpu_autocast_as_cudas():
        yield


@pytest.fixture
def fixture_model():
    from elmo import load_original
    return load_original(ALLENNLP / "options.json", ALLENNLP / "lm_weights.hdf5")


#: Test modules whose assertions rest on floating-point results (conformance to a tolerance,
#: gradients, training that must learn). `.ci/run` runs them again under other kernel sets
#: (ATEN_CPU_CAPABILITY=default and avx2, with oneDNN's and MKL's capped to match), so a CPU
#: unlike the developer's is exercised.
NUMERICS_MODULES = {"test_conformance", "test_bilm", "test_elmo", "test_scalar_mix", "test_softmax",
                    "test_lstm", "test_lstm_autograd", "test_training", "test_training_resume",
                    "test_tasks_models", "test_tasks_runner", "test_default_model",
                    "test_analysis_probes", "test_embedding", "test_allennlp_compat",
                    "test_manylangs", "test_ship", "test_lstm_inference", "test_conv_pool",
                    "test_dense", "test_embedding_differential", "test_tasks_regression_precision"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.stem in NUMERICS_MODULES:
            item.add_marker(pytest.mark.numerics)


class FullDisk:
    """Wraps the file under :class:`elmo.hdf5_writer.GuardedFile`: after ``limit`` bytes every write
    fails with ENOSPC, as on a full disk (fault injection that needs no mount or root)."""

    def __init__(self, raw, limit: int):
        self.raw, self.limit, self.written = raw, limit, 0

    def write(self, data):
        import errno
        if self.written + len(data) > self.limit:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.written += len(data)
        return self.raw.write(data)

    def __getattr__(self, name):
        return getattr(self.raw, name)


def load_script(path: Path, name: str):
    """The repository's script at ``path`` (under benchmarks/ or experiments/: no package
    module) loaded as a module named ``name``, for a test to call its functions."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fill_disk_on_open(monkeypatch, limit: int, which=lambda n: True):
    """Make the ``n``-th GuardedFile opened (counting from 0) a :class:`FullDisk` when
    ``which(n)``; returns the list of opened paths."""
    from elmo import hdf5_writer
    opened, real_init = [], hdf5_writer.GuardedFile.__init__

    def init(self, path):
        real_init(self, path)
        if which(len(opened)):
            self._file = FullDisk(self._file, limit)
        opened.append(path)
    monkeypatch.setattr(hdf5_writer.GuardedFile, "__init__", init)
    return opened


@pytest.fixture
def model_digest_calls(monkeypatch):
    """The calls of :func:`elmo.model_digest.model_digest` in the test, one entry each (the
    neighbour index's module, which imports it by name, counted too)."""
    from elmo import model_digest as digests
    from elmo.analysis import neighbors
    calls: list = []
    real = digests.model_digest

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(digests, "model_digest", counted)
    monkeypatch.setattr(neighbors, "model_digest", counted)
    return calls


@contextmanager
def immutable(path: Path, *moved_to: Path) -> Iterator[None]:
    """The file ``path`` made immutable for the block (``chattr +i``: not even root may delete
    it, as a user may not delete another's file in a folder of theirs); the test is skipped
    where that cannot be done. After the block it is mutable again, at ``path`` and at each of
    ``moved_to`` (where the block may have renamed its folder)."""
    try:
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot run chattr: {e}")
    if done.returncode != 0:
        pytest.skip(f"cannot make a file immutable here: {done.stderr.strip()}")
    try:
        yield
    finally:
        for place in (path, *moved_to):
            subprocess.run(["chattr", "-i", str(place)], capture_output=True, timeout=30)


def killed_between_the_fallback_renames(monkeypatch, capsys, folder: Path, command) -> None:
    """Run the CLI ``command`` (or call it, a function) with every folder swap on the
    fallback's two renames (no renameat2: NFS, another system; for the rest of the test) and
    stop it (KeyboardInterrupt, as a kill) between them: ``folder`` is left renamed aside as
    FOLDER.replaced, the new one as FOLDER.partial."""
    from elmo import folder_swap
    from elmo.cli import main

    monkeypatch.setattr(folder_swap, "_exchange", lambda a, b: False)
    rename, fired = Path.rename, []

    def killed_at_the_new_folder(self, target):
        if self.name == f"{folder.name}.partial":
            fired.append(target)
            raise KeyboardInterrupt   # the process is stopped here
        return rename(self, target)
    with monkeypatch.context() as m:
        m.setattr(Path, "rename", killed_at_the_new_folder)
        try:
            command() if callable(command) else main(command)
        except KeyboardInterrupt:
            pass
    capsys.readouterr()
    assert fired == [folder] and not folder.exists()


def side_by_side(commands: list, envs: Optional[list] = None, timeout: float = 120, check: bool = False,
                 **popen) -> list:
    """Run independent ``commands`` (argument lists) at once, each with its environment of
    ``envs`` (else this one's) and ``popen``'s keywords: a test that only reads their outputs
    waits for the slowest instead of the sum (on two cores one is idle while a child imports
    torch). Their ``CompletedProcess``, in order, stdout and stderr as text; any still running
    when one fails to finish in ``timeout`` seconds is killed. ``check``: each must exit 0."""
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
             for command, env in zip(commands, envs or [None] * len(commands))]
    try:
        outputs = [proc.communicate(timeout=timeout) for proc in procs]
    finally:
        for proc in procs:   # (a no-op for those that ended)
            proc.kill()
            proc.wait()
    done = [subprocess.CompletedProcess(proc.args, proc.returncode, out, err) for proc, (out, err) in zip(procs, outputs)]
    assert not check or all(d.returncode == 0 for d in done), [d.stderr[-2000:] for d in done]
    return done
