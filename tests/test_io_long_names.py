"""Outputs whose names are near the file-name limit (246-255 bytes are legal): the names derived
from them (temporaries, lock files, OUTPUT.parts, convert's working folder, the counts file) are
shortened to fit, alike in every process, so the lock is still found and a killed writer's
temporaries still removed."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from elmo import save_pretrained
from elmo.cli import main as cli_main
from elmo.io import (OutputBusy, atomic_target, fitting_name, name_limit, process_temporary,
                     remove_temporaries, temporary_folder)
from elmo.output_lock import lock_path, output_lock
from tests.conftest import random_bilm

ROOT = Path(__file__).resolve().parents[1]

#: Names of 250 bytes (the limit of most file systems is 255): ASCII, and 2-byte characters
#: (a derived name cut inside one would be no valid UTF-8).
NAMES = {"ascii": "x" * 246 + ".txt", "two-byte": "é" * 123 + ".txt"}


def long_name(kind: str, ending: str = ".txt") -> str:
    name = NAMES[kind][:-4] + ending
    assert len(os.fsencode(name)) == 250 - 4 + len(ending)
    return name


def byte_lengths(folder: Path) -> list:
    """The length in bytes of every name in ``folder`` and below."""
    return [len(os.fsencode(p.name)) for p in folder.rglob("*")]


@pytest.fixture
def model_and_text(tmp_path):
    model = save_pretrained(random_bilm(seed=3), tmp_path / "model")
    text = tmp_path / "in.txt"
    text.write_text("a b c\nd e\n", encoding="utf-8")
    return model, text


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_embed_vocab_and_convert_write_an_output_of_250_bytes(tmp_path, model_and_text, capsys, kind):
    model, text = model_and_text
    out = tmp_path / "out"
    out.mkdir()
    assert cli_main(["vocab", "build", str(text), "-o", str(out / long_name(kind))]) == 0
    assert cli_main(["embed", "--model", str(model), str(text), str(out / long_name(kind, ".h5"))]) == 0
    assert cli_main(["convert", str(model), str(out / long_name(kind, "")), "--to", "original"]) == 0
    assert "error" not in capsys.readouterr().err
    written = sorted(p.name for p in out.iterdir())
    counts = [n for n in written if n.endswith(".counts.tsv")]
    assert long_name(kind) in written and long_name(kind, ".h5") in written and long_name(kind, "") in written
    assert len(counts) == 1 and len(written) == 4   # no temporary, lock file or .parts folder left
    assert (out / long_name(kind, "") / "weights.hdf5").is_file()
    assert max(byte_lengths(out)) <= name_limit(out)


def test_a_name_longer_than_the_limit_is_one_line_naming_it(tmp_path, model_and_text, capsys):
    model, text = model_and_text
    name = "y" * (name_limit(tmp_path) + 1)
    assert cli_main(["vocab", "build", str(text), "-o", str(tmp_path / name)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path / name) in err and "Traceback" not in err


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_derived_names_fit_are_the_same_each_time_and_cut_no_character(tmp_path, kind):
    path = tmp_path / NAMES[kind]
    name = fitting_name(path, ".parts")
    assert name == fitting_name(path, ".parts") and len(os.fsencode(name)) <= name_limit(tmp_path)
    assert name.endswith(".parts") and name.startswith(NAMES[kind][:100])
    other = fitting_name(tmp_path / (NAMES[kind][:-5] + "y.txt"), ".parts")   # (the same start)
    assert other != name and len(os.fsencode(other)) <= name_limit(tmp_path)
    short = tmp_path / "out.h5"
    assert fitting_name(short, ".parts") == "out.h5.parts" and lock_path(short).name == "out.h5.lock"


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_a_second_writer_of_a_long_name_is_refused(tmp_path, kind):
    path = tmp_path / (NAMES[kind] + "ab")   # (252 bytes: NAME.lock would be 257)
    with output_lock(path) as file:
        assert file.exists() and len(os.fsencode(file.name)) <= name_limit(tmp_path)
        with pytest.raises(OutputBusy):
            with output_lock(tmp_path / (NAMES[kind] + "ab"), wait=0.05):
                pass
    assert not file.exists()


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_a_killed_writers_temporaries_of_a_long_name_are_removed_by_the_next_write(tmp_path, kind):
    """atomic_target's file, temporary_folder's folder and its lock file (convert's working
    folder, locked by save_pretrained), left by a process killed with SIGKILL."""
    path = tmp_path / NAMES[kind]
    code = ("import sys; from pathlib import Path; from elmo.io import atomic_target, temporary_folder; "
            "from elmo.output_lock import lock_path; "
            "p = Path(sys.argv[1]); f = temporary_folder(p, '.converting'); lock_path(f).write_text('x'); "
            "print(atomic_target(p), f, lock_path(f), sep='\\n', flush=True); sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        left = [Path(child.stdout.readline().strip()) for _ in range(3)]
    finally:
        child.kill()
        child.wait()
    assert all(p.exists() and p.parent == tmp_path for p in left)
    mine = atomic_target(path)
    folder = temporary_folder(path, ".converting")
    assert not left[0].exists()                            # swept by the next write's atomic_target
    assert not left[1].exists() and not left[2].exists()   # and by its temporary_folder
    assert sorted(tmp_path.iterdir()) == sorted([mine, folder])


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_a_dead_runs_process_temporary_of_a_long_name_is_removed(tmp_path, kind):
    path = tmp_path / NAMES[kind]
    mine = process_temporary(path)
    dead = mine.with_name(mine.name[:-len(str(os.getpid()))] + "4194304")   # (another PID)
    dead.write_bytes(b"part")
    assert len(os.fsencode(dead.name)) <= name_limit(tmp_path)
    remove_temporaries(path)
    assert not dead.exists()


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_train_checks_the_counts_file_of_a_vocabulary_of_250_bytes(tmp_path, kind):
    """``elmo train --vocab`` looks for the counts file beside the vocabulary (to refuse one the
    text takes in): it looked for NAME.counts.tsv, which no file system takes, and failed."""
    from elmo.training.run_folder import check_vocabulary_not_text
    from elmo.training.vocab_build import default_counts_path

    (tmp_path / "text").mkdir()
    vocab = tmp_path / NAMES[kind]
    vocab.write_text("a\n", encoding="utf-8")
    check_vocabulary_not_text([str(tmp_path / "text")], vocab)
    counts = default_counts_path(vocab)
    counts.write_text("a\t1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="would be read as text") as refused:   # (the counts are text)
        check_vocabulary_not_text([str(tmp_path / "*.tsv")], vocab)
    assert str(counts) in str(refused.value)
