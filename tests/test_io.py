"""Writing outputs safely (elmo/io.py, elmo/output_lock.py, elmo/output_checks.py,
elmo/hdf5_writer.py) and the CLI's errors: the output lock between real processes, a full disk,
a read-only folder, a directory in the way, non-finite values, a closed pipe. Every failure
must be one line naming the path and leave no temporary file."""
import errno
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import pytest
import torch

from elmo import embed_file
from elmo.cli import main as cli_main
from elmo.embedding import NonFiniteOutput
from elmo.embedding.output import parts_dir
from elmo.io import OutputBusy, OutputError, atomic_target
from elmo.output_lock import lock_path, output_lock
from tests.conftest import fill_disk_on_open, immutable, random_bilm
from tests.test_embedding import random_sentences
from tests.test_embedding_file import assert_same_datasets, write_lines

ROOT = Path(__file__).resolve().parent.parent


def leftovers(folder):
    """Temporary and lock files anywhere under ``folder`` (there must be none after a run)."""
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*")
                  if ".tmp" in p.name or p.name.endswith(".lock"))


def env():
    return dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")


@pytest.fixture
def bilm():
    return random_bilm(seed=21)


@pytest.fixture
def lines():
    return [" ".join(s) for s in random_sentences(40, seed=22)]


def one_error_line(err):
    """The CLI's stderr holds exactly one line, an error without a traceback."""
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err


# ---------------------------------------------------------------------- the output lock
PAUSED_WRITER = """
import sys, time
from pathlib import Path
from elmo.embedding import output
from elmo.cli import main

real_write = output.SegmentWriter.write
def paused(self, *args):
    if self.path.name == "segment-00000001.hdf5" and not Path(sys.argv[4]).exists():
        Path(sys.argv[3]).touch()                     # started: segment 1's temporary file exists
        while not Path(sys.argv[4]).exists():         # wait for the go-ahead
            time.sleep(0.02)
    return real_write(self, *args)
output.SegmentWriter.write = paused
sys.exit(main(["embed", sys.argv[1], sys.argv[2], "--model", "fixture", "--segment-lines", "2",
               "--quiet", "--no-token-cache"]))
"""


def test_a_second_writer_is_refused_and_the_first_keeps_its_files(tmp_path):
    """Two real processes on one output: the second is told who writes it and deletes nothing."""
    inp = write_lines(tmp_path / "in.txt", [" ".join(s) for s in random_sentences(6, seed=5)])
    out, started, go = tmp_path / "out.hdf5", tmp_path / "started", tmp_path / "go"
    first = subprocess.Popen([sys.executable, "-c", PAUSED_WRITER, str(inp), str(out), str(started),
                              str(go)], env=env(), cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not started.exists():
            assert first.poll() is None, first.stderr.read()
            assert time.time() < deadline, "the first writer never reached segment 1"
            time.sleep(0.05)
        own_tmp = parts_dir(out) / f".segment-00000001.hdf5.tmp-{first.pid}"
        assert own_tmp.exists() and lock_path(out).exists()

        # the same command in a second process: refused at once, in one line naming the holder
        second = subprocess.run([sys.executable, "-m", "elmo", "embed", str(inp), str(out), "--model",
                                 "fixture", "--segment-lines", "2", "--quiet"], env=env(), cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 1
        err = one_error_line(second.stderr)
        assert f"{out} is already being written by PID {first.pid}" in err
        assert f"(lock file {lock_path(out)})" in err

        # a rank of another torchrun job that wants the same segment: refused by its lock
        with pytest.raises(OutputBusy, match=rf"PID {first.pid} .*segment-00000001.hdf5.lock"):
            embed_file(inp, out, "fixture", segment_lines=2, rank=1, world_size=2, token_cache=False)
        assert own_tmp.exists(), "another process's start-up deleted the live temporary file"
    finally:
        go.touch()
        first.wait(timeout=120)
    assert first.returncode == 0, first.stderr.read()
    assert out.exists() and leftovers(tmp_path) == []
    fresh = embed_file(inp, tmp_path / "fresh.hdf5", "fixture", segment_lines=2, token_cache=False)
    assert_same_datasets(out, fresh)


def test_a_lock_left_by_a_killed_process_does_not_block(tmp_path, bilm, lines):
    """The lock is the kernel's flock, not the file: a file left by a dead writer is reused."""
    inp = write_lines(tmp_path / "in.txt", lines[:4])
    out = tmp_path / "out.hdf5"
    lock_path(out).write_text("999999 gone-host\n")
    assert embed_file(inp, out, bilm) == out
    assert leftovers(tmp_path) == []


def test_output_lock_is_exclusive_and_removed(tmp_path):
    target = tmp_path / "x.hdf5"
    with output_lock(target) as file:
        assert file.read_text().split()[0] == str(os.getpid())
        code = ("import sys; from pathlib import Path; from elmo.output_lock import output_lock\n"
                "with output_lock(Path(sys.argv[1]), wait=0.2): pass")
        other = subprocess.run([sys.executable, "-c", code, str(target)], env=env(), cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
        assert other.returncode != 0 and f"already being written by PID {os.getpid()}" in other.stderr
    assert not file.exists()
    with output_lock(target):   # free again
        pass


@pytest.mark.parametrize("mine", [b'{"package": "mine"}\n', b"\x89HDF\r\n\x1a\n\0\0", b"123 host\nmore\n",
                                  b"9" * 600])
def test_a_file_of_the_users_at_the_lock_files_name_is_kept(tmp_path, mine):
    """OUTPUT.lock that holds more than a lock record (poetry.lock beside an output named
    poetry) is not the package's: taking the lock emptied it and releasing it deleted it."""
    target = tmp_path / "poetry"
    lock_path(target).write_bytes(mine)
    with pytest.raises(OutputError, match=re.escape(f"{target}: its lock file's name, {lock_path(target)}, "
                                                    f"is taken by a file that is no lock")):
        with output_lock(target):
            pass
    assert lock_path(target).read_bytes() == mine


@pytest.mark.parametrize("record", [b"", b"\n", b"4194305\n", f"4194305 {'h' * 255}\n".encode()])
def test_a_lock_files_own_records_are_taken(tmp_path, record):
    """An empty lock file (made, not yet marked) or a dead writer's "PID HOST" is a lock file."""
    target = tmp_path / "x.hdf5"
    lock_path(target).write_bytes(record)
    with output_lock(target) as file:
        assert file.read_text().split()[0] == str(os.getpid())
    assert not file.exists()


def test_embed_keeps_a_file_at_its_lock_files_name(tmp_path, lines, capsys):
    inp = write_lines(tmp_path / "in.txt", lines[:3])
    mine = tmp_path / "flake.lock"
    mine.write_text('{"nodes": {}}\n')
    assert cli_main(["embed", str(inp), str(tmp_path / "flake"), "--model", "fixture", "--quiet"]) == 1
    assert "is taken by a file that is no lock" in one_error_line(capsys.readouterr().err)
    assert mine.read_text() == '{"nodes": {}}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flake.lock", "in.txt"]


def test_output_lock_with_a_filelock_that_has_no_on_acquired_hook(tmp_path, monkeypatch):
    """Older filelock releases (as on a GPU machine's image) take no ``on_acquired``: the lock
    still excludes, records its holder for the second writer's message, and is removed."""
    import filelock

    real = filelock.FileLock

    def old_file_lock(path, timeout=-1):  # an unknown keyword is a TypeError, as there
        return real(path, timeout=timeout)

    monkeypatch.setattr(filelock, "FileLock", old_file_lock)
    target = tmp_path / "x.hdf5"
    with output_lock(target) as file:
        assert file.read_text().split()[0] == str(os.getpid())
        with pytest.raises(OutputBusy, match=f"already being written by PID {os.getpid()}"):
            with output_lock(target, wait=0.1):
                pass
    assert not file.exists()



def test_a_reentrant_output_lock_passes_the_same_files_lock_in_its_body_only(tmp_path):
    """``reentrant=True`` lets the holder's own nested lock of the file through (by another
    spelling of its path too), and nothing else: another file's lock is taken, a thread's
    lock of the file is refused, and after the block the file locks as before."""
    import threading
    target = tmp_path / "x.hdf5"
    refused = []

    def other_thread():
        try:
            with output_lock(target, wait=0.1):
                pass
        except OutputBusy:
            refused.append(True)

    with output_lock(target, reentrant=True) as file:
        with output_lock(tmp_path / "." / "x.hdf5", wait=0.1) as inner:
            assert os.path.samefile(inner, file)
        assert file.exists()   # (the nested lock did not delete the holder's lock file)
        with output_lock(tmp_path / "y.hdf5") as other:
            assert other.exists()
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert refused == [True]
    assert not file.exists()
    with output_lock(target):
        with pytest.raises(OutputBusy):
            with output_lock(target, wait=0.1):
                pass


# ---------------------------------------------------------------------- a full disk
def _mount_tmpfs(folder: Path, options: str) -> None:
    folder.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot run mount: {e}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}")


@pytest.fixture
def tmpfs(tmp_path):
    """A folder on a small tmpfs of its own; skipped where mounting is not allowed."""
    mounted = []

    def mount(options):
        folder = tmp_path / f"tmpfs{len(mounted)}"
        _mount_tmpfs(folder, options)
        mounted.append(folder)
        return folder
    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)


def test_full_disk_on_a_real_tmpfs(tmp_path, tmpfs, bilm, capsys):
    """ENOSPC from the file system itself: one line, no temporary file, and once space is freed
    the same command finishes from the segments it kept."""
    disk = tmpfs("size=4m")
    lines = [" ".join(s) for s in random_sentences(300, seed=23)]   # about 1.3 MB of float32
    inp = write_lines(tmp_path / "in.txt", lines)
    reference = embed_file(inp, tmp_path / "reference.hdf5", bilm, segment_lines=50)
    filler = disk / "filler"
    filler.write_bytes(b"\0" * (3 * 2**20 + 2**19))               # 0.5 MB left
    out = disk / "out.hdf5"
    with pytest.raises(OutputError, match=rf"{out}: cannot write .*No space left on device"):
        embed_file(inp, out, bilm, segment_lines=50)
    assert leftovers(disk) == [] and not out.exists()
    kept = sorted(parts_dir(out).glob("segment-*.hdf5"))
    filler.unlink()
    assert embed_file(inp, out, bilm, segment_lines=50) == out
    assert_same_datasets(out, reference)
    assert leftovers(disk) == [] and all(not p.exists() for p in kept)
    # through the CLI: one line, exit status 1
    filler.write_bytes(b"\0" * (3 * 2**20 + 2**19))
    assert cli_main(["embed", str(inp), str(disk / "cli.hdf5"), "--model", "fixture", "--quiet"]) == 1
    assert "No space left on device" in one_error_line(capsys.readouterr().err)
    assert leftovers(disk) == []


@pytest.mark.parametrize("where", ["segment", "merge"])
def test_full_disk_by_fault_injection(tmp_path, bilm, lines, monkeypatch, where):
    """The OS refuses a write with ENOSPC inside HDF5's writing (of the third segment, or of the
    merged file): the same guarantees as on a real full disk, on any machine, root or not."""
    inp = write_lines(tmp_path / "in.txt", lines)
    reference = embed_file(inp, tmp_path / "reference.hdf5", bilm, segment_lines=10)
    out = tmp_path / "run" / "out.hdf5"
    failing_file = 2 if where == "segment" else 4        # files 0-3: the 4 segments; 4: merged
    fill_disk_on_open(monkeypatch, 20_000, lambda n: n == failing_file)
    with pytest.raises(OutputError) as e:
        embed_file(inp, out, bilm, segment_lines=10)
    message = str(e.value)
    assert message.startswith(f"{out}: cannot write the ") and "\n" not in message
    assert "No space left on device" in message and "run the same command again" in message
    assert leftovers(out.parent) == [] and not out.exists()
    kept = len(list(parts_dir(out).glob("segment-*.hdf5")))
    assert kept == (2 if where == "segment" else 4)   # nothing finished is lost
    monkeypatch.undo()
    assert embed_file(inp, out, bilm, segment_lines=10) == out
    assert_same_datasets(out, reference)
    assert leftovers(out.parent) == []


# ---------------------------------------------------------------------- paths that cannot be written
def test_read_only_file_system(tmp_path, tmpfs, lines, capsys):
    disk = tmpfs("ro,size=1m")
    inp = write_lines(tmp_path / "in.txt", lines[:3])
    assert cli_main(["embed", str(inp), str(disk / "out.hdf5"), "--model", "fixture", "--quiet"]) == 1
    err = one_error_line(capsys.readouterr().err)
    assert f"{disk / 'out.hdf5'}: cannot write in {disk}: Read-only file system" in err


def _train_argv(text: Path, out: Path, start: list) -> list:
    """The argv of a one-step ``elmo train`` (``start``: its vocabulary) or ``finetune``
    (``start``: ``--from MODEL``) of a tiny model on ``text``."""
    tiny = ["--dim", "16", "--projection-dim", "8", "--filters", "1:4"] if start[0] == "--vocab" else []
    return ["train" if start[0] == "--vocab" else "finetune", str(text), *start, "-o", str(out), *tiny,
            "--batch-size", "2", "--max-steps", "1", "--negatives", "0", "--no-progress", "--device", "cpu"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(training text, its vocabulary, a model trained one step on it)."""
    from tests.training_helpers import write_toy_corpus

    folder = tmp_path_factory.mktemp("trained")
    text, _, vocab = write_toy_corpus(folder, n_train=40, n_heldout=10)
    assert cli_main(_train_argv(text, folder / "run", ["--vocab", str(vocab)])) == 0
    return text, vocab, folder / "run" / "model"


def test_training_into_a_read_only_file_system(trained, tmpfs, capsys):
    """train and finetune said "ro/run: Read-only file system" (or "Operation not
    permitted"), where every other command names the folder it cannot write in."""
    text, vocab, model = trained
    capsys.readouterr()
    disk = tmpfs("ro,size=1m")
    for start in (["--vocab", str(vocab)], ["--from", str(model)]):
        for out in (disk / "run", disk / "new" / "run"):
            assert cli_main(_train_argv(text, out, start)) == 1
            err = one_error_line(capsys.readouterr().err)
            assert f"{out}: cannot write in {disk}: Read-only file system" in err, err


def test_training_into_a_folder_it_may_not_write(trained, tmp_path, monkeypatch, capsys):
    """The same line where making the run's folder is not permitted (EPERM, as a folder of
    another user's, or one that cannot change, gives), as root or not."""
    text, vocab, model = trained
    capsys.readouterr()
    folder = tmp_path / "ro"
    folder.mkdir()
    make = Path.mkdir

    def refused(self, *args, **kwargs):
        if self.parent == folder:
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), str(self))
        return make(self, *args, **kwargs)
    monkeypatch.setattr(Path, "mkdir", refused)
    for start in (["--vocab", str(vocab)], ["--from", str(model)]):
        assert cli_main(_train_argv(text, folder / "run", start)) == 1
        err = one_error_line(capsys.readouterr().err)
        assert f"{folder / 'run'}: cannot write in {folder}: {os.strerror(errno.EPERM)}" in err, err


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root may write to a read-only folder (the tmpfs test covers it)")
def test_read_only_folder(tmp_path, lines, capsys):
    inp = write_lines(tmp_path / "in.txt", lines[:3])
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert cli_main(["embed", str(inp), str(folder / "out.hdf5"), "--model", "fixture", "--quiet"]) == 1
    finally:
        folder.chmod(0o755)
    assert "Permission denied" in one_error_line(capsys.readouterr().err)


def test_output_paths_are_checked_before_computing(tmp_path, lines, monkeypatch, capsys):
    """A directory (even with --overwrite) or a file where a folder belongs is refused before
    the input is read or the model loaded, and nothing is created."""
    from elmo.embedding import run

    def no_work(*args, **kwargs):
        raise AssertionError("work started before the output was checked")
    monkeypatch.setattr(run, "index_input", no_work)
    inp = write_lines(tmp_path / "in.txt", lines[:3])
    (tmp_path / "out.hdf5").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "taken.hdf5.parts").write_text("x")
    cases = {"out.hdf5": "out.hdf5: is a directory", "file/out.hdf5": "is not a directory",
             "taken.hdf5": "taken.hdf5.parts: is a file"}
    for name, expected in cases.items():
        before = sorted(tmp_path.rglob("*"))
        assert cli_main(["embed", str(inp), str(tmp_path / name), "--overwrite", "--quiet"]) == 1
        assert expected in one_error_line(capsys.readouterr().err)
        assert sorted(tmp_path.rglob("*")) == before


# ---------------------------------------------------------------------- non-finite values
def test_nan_weights_and_gamma_are_refused_by_the_cli(tmp_path, lines, capsys):
    import elmo
    inp = write_lines(tmp_path / "in.txt", lines[:3])
    elmo.save_pretrained(random_bilm(), tmp_path / "nan-model", fmt="original")
    with h5py.File(tmp_path / "nan-model" / "weights.hdf5", "a") as f:   # (save_pretrained refuses NaN)
        f["CNN_proj/b_proj"][0] = float("nan")
        del f["CNN_proj/b_proj"].attrs["elmo_crc32"]   # (as another tool writes it: no checksum to fail first)
    assert cli_main(["embed", str(inp), str(tmp_path / "a.hdf5"), "--model",
                     str(tmp_path / "nan-model"), "--quiet"]) == 1
    err = one_error_line(capsys.readouterr().err)
    assert "weights.hdf5: dataset 'CNN_proj/b_proj' holds 1 non-finite values" in err
    assert cli_main(["embed", str(inp), str(tmp_path / "b.hdf5"), "--model", "fixture",
                     "--layers", "mix:0.2,0.3,0.5", "--gamma", "nan", "--quiet"]) == 1
    assert "gamma (--gamma) must be a finite number that float32 holds" in one_error_line(capsys.readouterr().err)
    for settings in (["--layers", "mix:1e39,0,0"], ["--layers", "mix:1,1,1", "--gamma", "1e39"]):
        # (the mix became inf, and the error blamed the model's weights)
        assert cli_main(["embed", str(inp), str(tmp_path / "c.hdf5"), "--model", "fixture", *settings,
                         "--quiet"]) == 1
        assert "float32 holds" in one_error_line(capsys.readouterr().err)
    assert not list(tmp_path.glob("*.hdf5"))


@pytest.mark.filterwarnings("error:overflow encountered in cast:RuntimeWarning")  # (printed before the error)
def test_non_finite_output_is_an_error_naming_the_line(tmp_path, bilm, lines):
    inp = write_lines(tmp_path / "in.txt", ["", *lines[:5]])
    with torch.no_grad():   # a model given in memory skips the load-time check
        bilm.lstm.layers[1].weight_proj[0][0, 0] = float("nan")
    with pytest.raises(NonFiniteOutput, match=r"in.txt: line 2: the model gave non-finite values"):
        embed_file(inp, tmp_path / "out.hdf5", bilm)
    assert not (tmp_path / "out.hdf5").exists() and leftovers(tmp_path) == []
    assert not parts_dir(tmp_path / "out.hdf5").exists()   # (it was left empty)
    huge = random_bilm(seed=21)
    with torch.no_grad():   # finite, but past float16's range
        huge.token_encoder.projection.bias.fill_(1e5)
    with pytest.raises(NonFiniteOutput, match="use --dtype float32"):
        embed_file(inp, tmp_path / "half.hdf5", huge, dtype="float16")
    assert embed_file(inp, tmp_path / "full.hdf5", huge).exists()


# ---------------------------------------------------------------------- the CLI
def test_a_closed_pipe_ends_quietly():
    """`elmo info | head`: the reader goes away; no BrokenPipeError traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "elmo", "info", "fixture"], env=env(), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()   # before the command has written anything
    assert proc.wait(timeout=120) == 141
    assert proc.stderr.read() == b""


def test_os_errors_are_one_line_and_debug_shows_the_traceback(tmp_path, lines, monkeypatch, capsys):
    inp = write_lines(tmp_path / "in.txt", lines[:3])
    (tmp_path / "out.hdf5").mkdir()
    args = ["embed", str(inp), str(tmp_path / "out.hdf5"), "--model", "fixture", "--quiet"]
    assert cli_main(args) == 1
    one_error_line(capsys.readouterr().err)
    with pytest.raises(OutputError):
        cli_main(["--debug", *args])
    monkeypatch.setenv("ELMO_DEBUG", "1")
    with pytest.raises(OutputError):
        cli_main(args)
    # a plain OSError from deeper down reads 'path: reason'
    monkeypatch.delenv("ELMO_DEBUG")
    from elmo.commands import core

    def denied(args):
        raise PermissionError(errno.EACCES, "Permission denied", "/some/file")
    monkeypatch.setattr(core, "info", denied)
    assert cli_main(["info", "fixture"]) == 1
    assert one_error_line(capsys.readouterr().err) == "elmo info: error: /some/file: Permission denied\n"


def test_an_atomic_write_reaches_the_disk_before_and_after_its_rename(tmp_path, monkeypatch):
    """The data was renamed into place without an fsync: after a power cut the name could point
    at an empty or partial file (delayed allocation), which a rerun would take as finished."""
    from elmo.io import atomic_write_text
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
                        or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: events.append(("replace", str(b))) or real_replace(a, b))
    target = tmp_path / "out.txt"
    atomic_write_text(target, "done\n")
    assert [e[0] for e in events] == ["fsync", "replace", "fsync"]
    assert Path(events[0][1]).name.startswith(".out.txt.") and events[1][1] == str(target) and events[2][1] == str(tmp_path)
    assert target.read_text() == "done\n"


def test_a_killed_writers_temporary_is_removed_by_the_next_write_and_a_live_ones_is_kept(tmp_path):
    """A run killed mid-write (SIGKILL, no cleanup) left ``.NAME.*.tmp`` beside its output
    for ever: checkpoints of hundreds of MB piled up over preempted runs."""
    from elmo.io import atomic_target, atomic_write_text
    target = tmp_path / "checkpoint.pt"
    code = ("import sys, time; from pathlib import Path; from elmo.io import atomic_target; "
            "t = atomic_target(Path(sys.argv[1])); t.write_bytes(b'part'); print(t, flush=True); "
            "time.sleep(float(sys.argv[2]))")
    children = [subprocess.Popen([sys.executable, "-c", code, str(target), seconds], env=env(),
                                 stdout=subprocess.PIPE, text=True) for seconds in ("600", "600")]
    killed, live = children
    try:
        killed_tmp, live_tmp = (Path(child.stdout.readline().strip()) for child in children)
        killed.kill()
        killed.wait()
        assert killed_tmp.exists() and live_tmp.exists()
        unnamed = tmp_path / ".checkpoint.pt.abc123.tmp"     # an older run's name: no writer known
        unnamed.write_bytes(b"?")
        mine = atomic_target(target)
        assert not killed_tmp.exists()                       # its process is gone
        assert live_tmp.exists() and unnamed.exists()        # a live writer's, and one of no known writer
        mine.unlink()
        atomic_write_text(tmp_path / "other.txt", "x")       # another output's sweep leaves these alone
        assert live_tmp.exists()
    finally:
        live.kill()
        live.wait()


class _SignalledWhileFinalized:
    """An object whose finalizer is where a stop signal's exception is raised."""

    def __init__(self, signum):
        self.signum = signum

    def __del__(self):
        signal.raise_signal(self.signum)
        sum(range(1000))                 # bytecode, where the handler runs and raises


def _stop_signals():
    from elmo.cli import Terminated
    return [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)]


def _stops_within(seconds: float, signum, raised) -> None:
    """A command whose finalizer meets the stop signal, then works on for ``seconds``: it must
    stop with ``raised`` before then."""
    import gc

    from elmo.cli import _stop_signals_raise

    started = time.monotonic()
    with pytest.raises(raised):
        with _stop_signals_raise():
            obj = _SignalledWhileFinalized(signum)
            del obj
            gc.collect()
            while time.monotonic() - started < seconds:   # the command's own work, long
                time.sleep(0.001)
    assert time.monotonic() - started < seconds      # stopped, not run to the end


@pytest.mark.parametrize("case", range(2), ids=["sigterm", "ctrl-c"])
def test_a_stop_signal_met_inside_a_finalizer_still_stops_the_command(case):
    """Raised inside a __del__ (a weakref callback during `elmo embed`), SIGTERM's exception
    and Ctrl-C's KeyboardInterrupt were printed as 'Exception ignored' and dropped, and the
    command ran on to its end and exited 0 (seen once in about 20 embed runs)."""
    signum, raised = _stop_signals()[case]
    before = signal.getsignal(signum), sys.unraisablehook
    _stops_within(10, signum, raised)
    assert (signal.getsignal(signum), sys.unraisablehook) == before


class _CopyComesInStart(threading.Timer):
    """A timer whose first start() has its signal come while start() still runs, as on a loaded
    machine where the main thread waits for the timer's thread to start past the timer's delay."""
    started = 0

    def start(self):
        type(self).started += 1
        if type(self).started == 1:
            os.kill(os.getpid(), self.args[1])
            sum(range(1000))   # bytecode, where the handler runs and raises
        super().start()


@pytest.mark.parametrize("case", range(2), ids=["sigterm", "ctrl-c"])
def test_a_stop_signals_copy_that_comes_while_it_is_sent_again_is_not_lost(case, monkeypatch):
    """The copy, sent 10 ms after the first was dropped in a finalizer, came while the hook
    that sent it still waited in Thread.start() (seen once in about 40 runs under load): raised
    there, it was dropped as the hook's own "Exception ignored", and the command ran to its end."""
    signum, raised = _stop_signals()[case]
    monkeypatch.setattr(_CopyComesInStart, "started", 0)
    monkeypatch.setattr(threading, "Timer", _CopyComesInStart)
    _stops_within(5, signum, raised)
    assert _CopyComesInStart.started >= 2      # the copy lost in start() was sent again


@pytest.mark.parametrize("case", range(2), ids=["sigterm", "ctrl-c"])
def test_a_stop_signal_dropped_in_a_finalizer_at_the_blocks_end_is_raised_on_the_way_out(case):
    import gc

    from elmo.cli import _stop_signals_raise

    signum, raised = _stop_signals()[case]
    with pytest.raises(raised):
        with _stop_signals_raise():
            obj = _SignalledWhileFinalized(signum)
            del obj
            gc.collect()
    time.sleep(0.1)               # the signal is not sent again after the block (it would kill us)


def test_ctrl_c_while_the_command_line_is_read_is_one_line_and_status_130(monkeypatch, capsys):
    """Ctrl-C while the subcommands' modules were imported (before the command ran) ended
    in an import's traceback."""
    import elmo.cli

    def interrupted():
        raise KeyboardInterrupt
    monkeypatch.setattr(elmo.cli, "build_parser", interrupted)
    assert cli_main(["info", "fixture"]) == 130
    assert capsys.readouterr().err == "elmo: interrupted\n"


def test_a_closed_stderr_does_not_stop_the_command(tmp_path, monkeypatch):
    """With stderr closed (`elmo embed IN OUT 2>&-`) Python's sys.stderr is None: the progress
    bar's first write raised AttributeError, and the run ended with status 1, no output and no
    word said."""
    inp = write_lines(tmp_path / "in.txt", ["a b", "c"])
    monkeypatch.setattr(sys, "stderr", None)
    assert cli_main(["embed", str(inp), str(tmp_path / "out.hdf5"), "--model", "fixture"]) == 0
    assert (tmp_path / "out.hdf5").is_file()


def test_a_closed_stdout_is_one_line_for_a_command_that_prints(tmp_path, monkeypatch, capsys):
    """`elmo info MODEL >&-` (sys.stdout None) ended in an AttributeError's traceback; a
    command that prints nothing runs as usual."""
    monkeypatch.setattr(sys, "stdout", None)
    assert cli_main(["info", "fixture"]) == 1
    assert capsys.readouterr().err == "elmo info: error: stdout: Bad file descriptor\n"
    monkeypatch.setattr(sys, "stdout", None)
    inp = write_lines(tmp_path / "in.txt", ["a b"])
    assert cli_main(["embed", str(inp), str(tmp_path / "out.hdf5"), "--model", "fixture", "--quiet"]) == 0


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_a_full_stdout_is_one_line_that_names_stdout(unbuffered):
    """`elmo info MODEL > /dev/full` read "[Errno 28] No space left on device", as if an output
    file were full; with Python's buffered stdout it was a traceback from the final flush and
    a second error from Python's own flush at exit (status 120); `elmo --version`, unbuffered,
    printed nothing and exited 0."""
    for args, command in ((["info", "fixture"], "elmo info"), (["--version"], "elmo")):
        with open("/dev/full", "w") as full:
            done = subprocess.run([sys.executable, "-m", "elmo", *args], env=dict(env(), PYTHONUNBUFFERED=unbuffered),
                                  cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
        assert (done.returncode, done.stderr) == (1, f"{command}: error: stdout: No space left on device\n")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_output_in_a_folder_that_takes_no_files_is_not_called_busy(tmp_path, capsys):
    """filelock takes 'no such file' in an existing folder (/proc) for a lock its holder just
    deleted: the output was said to be "already being written by another process"."""
    for folder in ("/proc", "/proc/self"):
        with pytest.raises(OutputError) as refused:
            with output_lock(Path(folder) / "x.hdf5", wait=0.1):
                pass
        assert not isinstance(refused.value, OutputBusy)
        # (root: "no such file", the case; another user is refused the folder's permission)
        assert re.match(rf"{folder}/x.hdf5: cannot (create a file|write) in {folder} ", str(refused.value))
    inp = write_lines(tmp_path / "in.txt", ["a b"])
    assert cli_main(["embed", str(inp), "/proc/x.hdf5", "--model", "fixture", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("elmo embed: error: /proc/x.hdf5: cannot ") and err.count("\n") == 1
    assert "being written" not in err


def _stopping_command(monkeypatch, error):
    """``elmo train`` as a command whose work ends in ``error`` (a stop)."""
    import argparse

    import elmo.cli

    def stop(args):
        raise error

    def build_parser():
        parser = argparse.ArgumentParser(prog="elmo")
        parser.add_argument("--debug", action="store_true")
        parser.add_subparsers(dest="command").add_parser("train").set_defaults(func=stop)
        return parser
    monkeypatch.setattr(elmo.cli, "build_parser", build_parser)


@pytest.mark.parametrize("stop", ["sigterm", "checkpointed"])
def test_a_stop_message_reads_the_rank_as_launch_env_does(monkeypatch, capsys, stop):
    """The stop message was printed where RANK was the string "0": a RANK launch_env refuses
    ("x", "-1") silently counted as another rank's and the stop went unexplained."""
    from elmo.cli import Terminated
    from elmo.training.stop import TrainingStopped
    error = Terminated() if stop == "sigterm" else TrainingStopped("SIGTERM", {"step": 7, "steps": 12})
    said = "stopped by SIGTERM"
    _stopping_command(monkeypatch, error)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert cli_main(["train"]) == 143 and said in capsys.readouterr().err
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert cli_main(["train"]) == 143 and capsys.readouterr().err == ""
    for rank, problem in (("x", "RANK='x' in the environment is not a whole number"),
                          ("-1", "RANK=-1, WORLD_SIZE=2, LOCAL_RANK=0 in the environment")):
        monkeypatch.setenv("RANK", rank)
        assert cli_main(["train"]) == 143
        err = capsys.readouterr().err
        assert err.startswith(f"elmo train: error: {problem}") and err.count("\n") == 2 and said in err


def test_a_device_or_pipe_as_output_is_refused_not_replaced(tmp_path, lines, capsys):
    """Renaming the new file onto the path replaced the device node itself (``/dev/full``
    became a regular file); a named pipe stands for any such path (no root needed)."""
    inp = write_lines(tmp_path / "in.txt", lines[:3])
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for argv in (["embed", str(inp), str(pipe), "--model", "fixture", "--quiet", "--overwrite"],
                 ["vocab", "build", str(inp), "-o", str(pipe)]):
        assert cli_main(argv) == 1
        assert "pipe: is not a regular file" in one_error_line(capsys.readouterr().err)
        assert pipe.is_fifo()
    with pytest.raises(OutputError, match="is not a regular file"):
        atomic_target(pipe)


def test_embed_refuses_its_input_as_output_even_with_overwrite(tmp_path, lines, capsys):
    inp = write_lines(tmp_path / "in.txt", lines[:3])
    before = inp.read_bytes()
    argv = ["embed", str(inp), str(tmp_path / "." / "in.txt"), "--model", "fixture", "--quiet", "--overwrite"]
    assert cli_main(argv) == 1
    assert "in.txt: is the input file" in one_error_line(capsys.readouterr().err)
    assert inp.read_bytes() == before                      # (it became the HDF5 output)
    assert cli_main(["embed", str(tmp_path), str(tmp_path / "o.hdf5"), "--model", "fixture", "--quiet"]) == 1
    assert "is a directory; the input must be a text file" in one_error_line(capsys.readouterr().err)


def test_embed_names_an_input_that_is_not_a_regular_file(tmp_path, capsys):
    """A pipe or a device was "no such input file", though it exists."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for inp in (pipe, Path(os.devnull)):
        assert cli_main(["embed", str(inp), str(tmp_path / "o.hdf5"), "--model", "fixture", "--quiet"]) == 1
        assert f"{inp}: is not a regular file; the input is read twice" in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "o.hdf5").exists()


def test_small_outputs_replace_their_own_kind_only(tmp_path, capsys):
    """vocab build, plot-curve and experiment-table -o replaced any file there; now only an
    earlier output of theirs (or an empty file), and a read-only folder names the user's path."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    assert cli_main(["vocab", "build", str(corpus), "-o", str(notes)]) == 1
    assert "notes.txt: exists and is not a vocabulary; it is kept" in one_error_line(capsys.readouterr().err)
    log = tmp_path / "log.jsonl"
    log.write_text('{"event": "train", "step": 1, "loss": 3.0, "tokens": 10}\n')
    assert cli_main(["plot-curve", str(log), "-o", str(notes)]) == 1
    assert "notes.txt: exists and is not a PNG picture" in one_error_line(capsys.readouterr().err)
    assert notes.read_text() == "mine\n"
    vocab = tmp_path / "v.txt"
    for _ in range(2):  # a re-run replaces its own output
        assert cli_main(["vocab", "build", str(corpus), "-o", str(vocab)]) == 0
    assert vocab.read_text().startswith("<S>\n") and capsys.readouterr()


def test_an_unwritable_folder_names_the_users_path_not_a_temporary(tmp_path, monkeypatch):
    """(mkstemp's error named ``.v.txt.HOST-PID-RANDOM.tmp``; root ignores chmod, so the
    refusal is injected)"""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / ".v.txt.host-1-x.tmp"))
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(OutputError, match=r"v.txt: cannot write in .*: Permission denied$") as caught:
        atomic_target(tmp_path / "v.txt")
    assert ".tmp" not in str(caught.value)


def _bad_utf8_readers():
    """(file name, reader) of every reader that decodes a user's file, for the test below."""
    from elmo.analysis.contrast import load_pairs
    from elmo.config import ElmoOptions
    from elmo.data.corpus import read_sentences
    from elmo.embedding.reader import read_sentences as embed_sentences
    from elmo.jobconfig import read_json
    from elmo.training.curves import read_log
    from elmo.vocab import Vocabulary
    return [("corpus.txt", read_sentences), ("embed.txt", lambda p: list(embed_sentences(p))),
            ("vocab.txt", Vocabulary.load), ("options.json", ElmoOptions.from_file),
            ("log.jsonl", read_log), ("job.json", read_json), ("pairs.tsv", load_pairs)]


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_every_reader_gives_the_same_position_of_bad_utf8(tmp_path, bom):
    """The line from 1 and the byte offset in the file from 0, in every message: embed counted
    the byte from 1 within the line, the options file from 1 in the file, the task files
    from 0 in the file, and the vocabulary and the training log gave no position at all."""
    import re
    data = bom + b'{"a": 1}\n{"b": "caf\xe9"}\n'
    offset = len(bom) + 9 + 10   # line 2 starts after line 1's 9 bytes; the 0xe9 is its 11th byte
    for name, read in _bad_utf8_readers():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(Exception) as info:
            read(path)
        assert re.search(rf"line 2: byte 0xe9 at byte offset {offset}\b", str(info.value)), (name, str(info.value))


@pytest.mark.parametrize("fmt", ["safetensors", "original"])
def test_saving_a_model_to_a_full_disk_is_one_line_and_leaves_no_folder(tmp_path, tmpfs, bilm, fmt):
    """convert to a full disk in the safetensors layout was a traceback ending in
    safetensors' own error, and left an empty model folder."""
    import elmo
    disk = tmpfs("size=64k")
    (disk / "filler").write_bytes(b"\0" * (60 * 1024))
    with pytest.raises(OutputError, match="cannot write the .*: No space left on device") as info:
        elmo.save_pretrained(bilm, disk / "model", fmt=fmt)
    assert len(str(info.value).splitlines()) == 1
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_saving_a_model_that_fails_leaves_none_of_the_folders_it_made(tmp_path, bilm, monkeypatch):
    """(the model folder was removed, but not the folders made above it: ``elmo convert MODEL
    new/sub/model`` on a full disk left new/sub, empty)"""
    import elmo
    from elmo import weights

    def full(state, path, metadata=None):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    monkeypatch.setattr(weights, "write_safetensors", full)
    with pytest.raises(OutputError, match="No space left on device"):
        elmo.save_pretrained(bilm, tmp_path / "new" / "sub" / "model")
    assert list(tmp_path.iterdir()) == []


def test_a_safetensors_write_error_is_an_os_error_with_its_errno(tmp_path, monkeypatch):
    from safetensors import SafetensorError
    import safetensors.torch

    from elmo.weights import write_safetensors

    def full(*args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    with pytest.raises(OSError) as info:
        write_safetensors({"w": torch.zeros(2)}, tmp_path / "m.safetensors")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "m.safetensors")


def test_a_failed_block_removes_the_empty_folders_it_made_and_keeps_the_rest(tmp_path):
    from elmo.io import no_empty_folder_on_failure

    def fail_in(folder, make=()):
        with pytest.raises(RuntimeError):
            with no_empty_folder_on_failure(folder):
                for path in make:
                    path.mkdir(parents=True, exist_ok=True) if not path.suffix else path.write_text("x")
                raise RuntimeError("failed")

    out = tmp_path / "a" / "b" / "out"
    fail_in(out, [out / "parts" / "empty"])                 # made and left empty: all gone
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    fail_in(out, [out / "parts", out / "done.txt"])          # a file written: kept, with its folders
    assert sorted(p.name for p in out.iterdir()) == ["done.txt"]   # (the empty parts/ goes)
    (out / "done.txt").unlink()
    fail_in(out)                                             # there before: kept, though empty
    assert out.is_dir()
    (tmp_path / "elsewhere" / "empty").mkdir(parents=True)
    with pytest.raises(RuntimeError):                        # a link made there is kept, and not followed
        with no_empty_folder_on_failure(tmp_path / "new"):
            (tmp_path / "new").mkdir()
            (tmp_path / "new" / "link").symlink_to(tmp_path / "elsewhere")
            raise RuntimeError("failed")
    assert (tmp_path / "new" / "link").is_symlink() and (tmp_path / "elsewhere" / "empty").is_dir()
    with no_empty_folder_on_failure(tmp_path / "ok"):        # no failure: nothing removed
        (tmp_path / "ok").mkdir()
    assert (tmp_path / "ok").is_dir()


def test_embed_that_fails_leaves_no_folder_it_made(tmp_path, lines, capsys):
    """(the output's lock made its folder before the model loaded: a model that is not one left
    the folder, empty)"""
    inp = write_lines(tmp_path / "in.txt", lines[:3])
    assert cli_main(["embed", str(inp), str(tmp_path / "new" / "sub" / "out.hdf5"), "--model",
                     str(tmp_path / "no-model"), "--quiet"]) == 1
    assert "no-model" in one_error_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_hdf5_closing_after_its_guarded_file_is_closed_is_quiet(tmp_path):
    """An aborted writer closes its file under h5py (a SIGTERM in the middle of a write, say);
    HDF5 then flushed and truncated it when its handle was freed, and the closed file raised:
    a SystemError from close, or at exit an ignored exception's traceback after the SIGTERM's
    one-line message (a flaky test_embedding_file test). Those late calls are now dropped."""
    import gc

    import h5py
    import numpy as np

    from elmo.hdf5_writer import GuardedFile

    raw = GuardedFile(tmp_path / "x.h5")
    f = h5py.File(raw, "w")
    f.create_dataset("a", data=np.zeros(1000))
    raw.close()
    unraisable: list = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        f.close()
        del f
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert unraisable == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the one-step swap is Linux's renameat2")
def test_a_replaced_folder_is_never_missing_or_half_deleted(tmp_path, monkeypatch):
    """atomic_folder (a trained run's model/, an experiment's saved task models) deleted the old
    folder before renaming the new one: a reader (predict, from_pretrained) then found no model,
    and a kill while deleting left weights without their config. Now the new folder takes the
    old one's place first; the deletion of the old one, killed half-way here, harms neither."""
    import shutil

    import elmo.folder_swap
    from elmo.folder_swap import atomic_folder

    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        (folder / name).write_text(f"old {name}")
    rmtree = shutil.rmtree

    class Killed(BaseException):
        pass

    def killed_half_way(path, *args, **kwargs):
        files = sorted(Path(path).glob("*")) if Path(path).is_dir() else []
        if not files:
            return rmtree(path, *args, **kwargs)
        files[0].unlink()   # one file gone, then the process dies
        raise Killed
    monkeypatch.setattr(elmo.folder_swap.shutil, "rmtree", killed_half_way)
    with pytest.raises(Killed):
        with atomic_folder(folder) as tmp:
            for name in ("config.json", "model.safetensors"):
                (tmp / name).write_text(f"new {name}")
    assert {p.name: p.read_text() for p in folder.iterdir()} == {
        "config.json": "new config.json", "model.safetensors": "new model.safetensors"}
    monkeypatch.setattr(elmo.folder_swap.shutil, "rmtree", rmtree)
    with atomic_folder(folder) as tmp:   # the next writer deletes what the killed one left
        (tmp / "config.json").write_text("newer")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    assert [p.name for p in folder.iterdir()] == ["config.json"]


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_lock_taken_on_a_full_disk_leaves_no_lock_file(tmp_path, monkeypatch):
    """With no byte left, the holder's PID cannot be written into the lock file: the lock is
    still held (a second writer is refused, unnamed) and its file removed when released. The
    run stopped with "cannot write in FOLDER" and left OUTPUT.lock behind for every later run."""
    out = tmp_path / "out.hdf5"
    monkeypatch.setattr(os, "pwrite", no_space)
    with output_lock(out) as file:
        assert file.exists()
        with pytest.raises(OutputBusy, match="another process"):
            with output_lock(out, wait=0.01):
                pass
    assert leftovers(tmp_path) == []


def test_full_disk_in_a_text_file_names_the_file(tmp_path, monkeypatch, capsys):
    """A text file written atomically (here elmo vocab build's) on a full disk: one line naming
    the file, no temporary. It read "[Errno 28] No space left on device", naming nothing."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\nb c\n")
    monkeypatch.setattr(Path, "write_text", no_space)
    vocab = tmp_path / "out" / "vocab.txt"
    assert cli_main(["vocab", "build", str(corpus), "-o", str(vocab)]) == 1
    assert one_error_line(capsys.readouterr().err).strip() == f"elmo vocab build: error: {vocab}: No space left on device"
    assert not (tmp_path / "out").exists()    # (no temporary, and no folder made for it: see vocab build)


def test_atomic_folder_through_a_link_replaces_the_linked_folder(tmp_path):
    """A folder written whole through a symbolic link (a run's model/ linked to other storage)
    ended in a bare 'Cannot call rmtree on a symbolic link' after every file was written, the
    new files left in LINK.partial. The linked folder is now replaced and the link kept."""
    from elmo.folder_swap import atomic_folder
    real = tmp_path / "storage" / "model"
    real.mkdir(parents=True)
    (real / "old.txt").write_text("old\n")
    link = tmp_path / "model"
    link.symlink_to(real, target_is_directory=True)
    with atomic_folder(link) as tmp:
        (tmp / "new.txt").write_text("new\n")
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert sorted(p.name for p in real.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "storage"]
    assert sorted(p.name for p in real.parent.iterdir()) == ["model"]


def test_a_folder_output_that_is_a_dangling_link_is_one_line(tmp_path, capsys):
    """A model folder given as a symbolic link to a folder not there: save_pretrained raised a
    bare '[Errno 17] File exists', and convert stopped naming its own temporary folder ('.LINK
    .HOST-PID-....converting: Not a directory'). Both now name the link and where it points."""
    import elmo
    from elmo.io import OutputError
    from tests.conftest import random_bilm
    link = tmp_path / "model"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutputError, match=f"^{link}: is a symbolic link to {tmp_path / 'nowhere'}, "
                                          f"which does not exist"):
        elmo.save_pretrained(random_bilm(seed=0), link)
    assert cli_main(["convert", "fixture", str(link)]) == 1
    err = capsys.readouterr().err
    assert f"{link}: is a symbolic link to" in err and ".converting" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


@pytest.mark.parametrize("reader, name, text", [
    ("read_json", "job.json", "[" * 100_000),
    ("read_json", "job.json", '{"a": ' * 100_000),
    ("read_toml", "job.toml", "a = " + "[" * 100_000),
    ("read_toml", "job.toml", "a = " + "{b = " * 100_000),
])
def test_the_shared_readers_refuse_nesting_too_deep_in_one_line(tmp_path, reader, name, text):
    """Brackets nested thousands deep ended json.loads and tomllib in a RecursionError, whose
    traceback every command that reads a JSON or TOML file showed; now the reader's one line."""
    import elmo.text_files
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{re.escape(str(path))}: not .* \\(values nested too deeply to read\\)$"):
        getattr(elmo.text_files, reader)(path)


def test_an_atomic_text_file_written_in_parts_appears_whole_or_not_at_all(tmp_path):
    """``atomic_text_file``: a file written a part at a time (elmo predict's output) is the old
    one until the block ends; an error in the block keeps it and leaves no temporary."""
    from elmo.io import atomic_text_file
    target = tmp_path / "out.txt"
    target.write_text("earlier\n")
    with pytest.raises(ValueError, match="bad line"):
        with atomic_text_file(target) as f:
            f.write("part 1\n")
            f.flush()
            assert target.read_text() == "earlier\n"
            raise ValueError("bad line")
    assert target.read_text() == "earlier\n" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    with atomic_text_file(target) as f:
        for part in ("part 1\n", "part 2 é\n"):
            f.write(part)
        assert target.read_text() == "earlier\n"
    assert target.read_text(encoding="utf-8") == "part 1\npart 2 é\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.parametrize("data", [b"", b"\n", b"a\nb", b"a\r\nb\r\n", b"\xef\xbb\xbfx y\n\nz", b"a\r",
                                  b"\n\n\n", b"a\rb\n", b"ok\na\r\rb\n", b"\xef\xbb\xbf\xc3\xa9\n\xc3\n",
                                  b"a\n\xef\xbb\xbfb\n", b"\xef\xbb\xbf\xff"])
def test_utf8_lines_read_a_line_at_a_time_are_the_lines_of_the_whole_text(tmp_path, data):
    """``utf8_lines`` (a file read a line at a time) gives the lines, the errors and the byte
    offsets that decoding the whole file (utf-8-sig) and ``text_lines`` give."""
    from elmo.text_files import text_lines, utf8_error_where, utf8_lines

    def error(number, what):
        return ValueError(f"{number}: {what}")

    def whole():
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ValueError(utf8_error_where(e.object, e, offset=len(data) - len(e.object))) from None
        return text_lines(text, error)

    path = tmp_path / "in.txt"
    path.write_bytes(data)
    with open(path, "rb") as f:
        lines = utf8_lines(f, error, ValueError)
        try:
            expected = whole()
        except ValueError as e:
            with pytest.raises(ValueError, match=f"^{re.escape(str(e))}$"):
                list(lines)
        else:
            assert list(lines) == expected


def test_os_errors_naming_names_the_path_where_the_error_names_no_file(tmp_path):
    """The public name of the helper that predict imported by its private name (_naming)."""
    from elmo.io import os_errors_naming
    with pytest.raises(OSError) as caught:
        with os_errors_naming(tmp_path / "out.txt"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(tmp_path / "out.txt")
    named = OSError(errno.EACCES, os.strerror(errno.EACCES), "/elsewhere")
    for kept in (named, FileNotFoundError(errno.ENOENT, "gone")):   # (its own file, or a subclass)
        with pytest.raises(OSError) as caught:
            with os_errors_naming(tmp_path / "out.txt"):
                raise kept
        assert caught.value is kept


def test_no_command_imports_a_private_name_of_elmo_io():
    from pathlib import Path
    commands = Path(__file__).resolve().parent.parent / "elmo" / "commands"
    private = [f"{path.name}: {line.strip()}" for path in sorted(commands.glob("*.py"))
               for line in path.read_text(encoding="utf-8").splitlines()
               if re.search(r"from \.\.io import .*\b_\w", line)]
    assert private == []


@pytest.mark.parametrize("killed_at", ["the new folder's rename", "the old folder's deletion",
                                       "the old folder's deletion, its mark gone"])
def test_a_folder_replaced_without_renameat2_survives_a_kill(tmp_path, monkeypatch, killed_at):
    """Where two folders cannot swap in one step (no renameat2: NFS, another system), atomic_folder
    deleted the old folder and then renamed the new one: a kill between left no folder at all,
    and the next writer deleted the new one as a killed writer's FOLDER.partial. The old folder is
    now renamed aside first: after a kill anywhere the next writer finds the old folder or the
    new one, and leaves nothing beside it."""
    import elmo.folder_swap
    from elmo.folder_swap import atomic_folder

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("old")
    monkeypatch.setattr(elmo.folder_swap, "_exchange", lambda a, b: False)

    class Killed(BaseException):
        pass
    rename, remove_entry, remove_if_empty = Path.rename, elmo.folder_swap._remove_entry, elmo.folder_swap._remove_if_empty

    def kill_at_rename(self, target):
        if self.name == "model.partial":
            raise Killed
        return rename(self, target)

    def kill_in_deletion(path, *args, **kwargs):   # (the old folder set aside: killed half-way)
        remove_entry(path, *args, **kwargs)
        if Path(path).parent.name == "model.replaced":
            raise Killed

    def kill_before_the_last_rmdir(path):   # (its files and its mark deleted, the folder not yet)
        if path.name == "model.replaced" and path.is_dir():
            raise Killed
        remove_if_empty(path)
    with monkeypatch.context() as m:
        if killed_at == "the new folder's rename":
            m.setattr(Path, "rename", kill_at_rename)
        elif killed_at == "the old folder's deletion":
            m.setattr(elmo.folder_swap, "_remove_entry", kill_in_deletion)
        else:
            m.setattr(elmo.folder_swap, "_remove_if_empty", kill_before_the_last_rmdir)
        with pytest.raises(Killed):
            with atomic_folder(folder) as tmp:
                (tmp / "config.json").write_text("new")
    with atomic_folder(folder) as tmp:   # the next writer
        assert [p.read_text() for p in folder.iterdir()] in (["old"], ["new"])
        (tmp / "config.json").write_text("newer")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    assert (folder / "config.json").read_text() == "newer"


@pytest.mark.parametrize("swap", ["renameat2", "renames"])
def test_an_old_folder_that_cannot_be_deleted_does_not_fail_the_replacement(tmp_path, monkeypatch, swap):
    """The old folder, swapped with the new one (renameat2: it is FOLDER.partial then) or renamed
    aside (FOLDER.replaced), is deleted once the new one is in place: a file in it that cannot be
    deleted (here made immutable; another user's) failed the write after it had succeeded (after
    a swap with a bare "Operation not permitted: 'config.json'", and the next write with a bare
    "File exists"). What is left of it now stays beside the folder, and the next write is
    refused before it begins, in one line naming it."""
    import elmo.folder_swap
    from elmo.io import OutputError
    from elmo.folder_swap import atomic_folder

    folder = tmp_path / "model"
    folder.mkdir()
    stuck = folder / "config.json"
    stuck.write_text("old")
    exchanged, exchange = [], elmo.folder_swap._exchange
    monkeypatch.setattr(elmo.folder_swap, "_exchange", lambda a, b: exchanged.append(swap == "renameat2" and exchange(a, b))
                        or exchanged[-1])
    left, what = ((tmp_path / "model.partial", f"what an earlier write of {folder} left") if swap == "renameat2"
                  else (tmp_path / "model.replaced", f"the old copy of {folder} that an earlier write set aside"))
    with immutable(stuck, left / "config.json"):
        with atomic_folder(folder) as tmp:
            (tmp / "config.json").write_text("new")
        if exchanged != [swap == "renameat2"]:
            pytest.skip("no renameat2 swap on this file system")
        assert (folder / "config.json").read_text() == "new" and left.is_dir()
        began = []
        with pytest.raises(OutputError, match=f"^{left}: {what} cannot be deleted \\(Operation not permitted\\); "
                                              f"remove it and run again$"):
            with atomic_folder(folder) as tmp:
                began.append(tmp)
        assert began == [] and (folder / "config.json").read_text() == "new"
