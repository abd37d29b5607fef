"""No command or writer of the package writes into a bundled model's folder (elmo/resources/NAME):
a file there replaced or shadowed ``from_pretrained("default")`` for every program of the
installation. Shipping the bundled model (elmo.training.ship) is the one writer let in."""
from __future__ import annotations

from pathlib import Path

import pytest

import elmo
from elmo.cli import main
from elmo.io import OutputError
from elmo.folder_swap import atomic_folder
from elmo.vocab import Vocabulary

RESOURCES = Path(elmo.model_path("default")).parent


def _files():
    """Every path under the package's resources (and beside them: RESOURCES.lock), with its mtime."""
    paths = [*RESOURCES.rglob("*"), *RESOURCES.parent.glob(RESOURCES.name + "?*")]
    return {p: p.stat().st_mtime_ns for p in paths}


@pytest.fixture
def package_kept():
    """Fails a test that changed the package's resources, and removes what it wrote there."""
    before = _files()
    try:
        yield
    finally:   # (without the checks new files were written: leave the package as it was)
        for path in sorted(set(_files()) - set(before), reverse=True):
            path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
    assert _files() == before


def _one_line_error(capsys, name: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "error: " in err, err
    assert f"the bundled model {name!r}" in err, err
    return err


def test_commands_refuse_outputs_in_a_bundled_models_folder(tmp_path, capsys, package_kept):
    default, fixture = elmo.model_path("default"), elmo.model_path("fixture")
    text = tmp_path / "in.txt"
    text.write_text("a b c\nd e\n", encoding="utf-8")
    # an embedding file beside the bundled weights
    assert main(["embed", str(text), str(default / "x.hdf5"), "--model", "fixture"]) != 0
    _one_line_error(capsys, "default")
    # a converted model inside a bundled folder, and in a folder that holds them all
    assert main(["convert", "fixture", str(fixture / "copy"), "--to", "original"]) != 0
    _one_line_error(capsys, "fixture")
    assert main(["convert", "fixture", str(RESOURCES), "--to", "original", "--overwrite"]) != 0
    assert "holds the folder of" in _one_line_error(capsys, "default")
    # a vocabulary built over the bundled one (elmo train reads vocab.txt from there)
    assert main(["vocab", "build", str(text), "-o", str(default / "vocab.txt")]) != 0
    _one_line_error(capsys, "default")


def test_library_writers_refuse_a_bundled_models_folder(package_kept):
    default = elmo.model_path("default")
    vocab = Vocabulary.load(default / "vocab.txt")
    with pytest.raises(OutputError, match=r"vocab\.txt: is inside the folder of the bundled model 'default'"):
        vocab.save(default / "vocab.txt")
    # a folder written whole that replaces the resources (and every bundled model with them)
    with pytest.raises(OutputError, match=r"holds the folder of the bundled model"):
        with atomic_folder(RESOURCES):
            pass
