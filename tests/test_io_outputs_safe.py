"""Outputs that must not destroy what a command reads: the model's files, the input text, and
the file a symbolic link names (written through, the link kept)."""
import errno
import os
from pathlib import Path

import h5py
import pytest

import elmo
from elmo import ElmoEmbedder, embed_file, load_pretrained, save_original, save_pretrained
from elmo.cli import main as cli_main
from elmo.embedding.output import parts_dir
from elmo.io import OutputBusy, OutputError, atomic_commit, atomic_write_text, copy_file
from elmo.output_lock import output_lock
from tests.conftest import random_bilm


def snapshot(folder: Path) -> dict:
    """{name: bytes} of the files of ``folder``."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def models(tmp_path):
    """A native and an original-layout model folder, and an input text file."""
    native = save_pretrained(random_bilm(seed=3), tmp_path / "native")
    original = tmp_path / "original"
    original.mkdir()
    save_original(random_bilm(seed=3), original / "options.json", original / "weights.hdf5")
    text = tmp_path / "in.txt"
    text.write_text("a b c\nd e\n", encoding="utf-8")
    return native, original, text


@pytest.mark.parametrize("folder, name", [("native", "model.safetensors"), ("native", "config.json"),
                                          ("original", "weights.hdf5"), ("original", "options.json")])
@pytest.mark.parametrize("spelling", ["absolute", "relative", "link"])
def test_embed_refuses_an_output_that_is_a_file_of_the_model(tmp_path, models, monkeypatch, capsys,
                                                             folder, name, spelling):
    model = tmp_path / folder
    before = snapshot(model)
    out = {"absolute": model / name, "relative": Path(folder) / ".." / folder / name,
           "link": tmp_path / "vectors.hdf5"}[spelling]
    if spelling == "link":
        out.symlink_to(model / name)
    monkeypatch.chdir(tmp_path)
    # refused before the model is loaded (a published model would be downloaded first)
    monkeypatch.setattr(elmo, "from_pretrained", lambda *a, **k: pytest.fail("the model was loaded"))
    code = cli_main(["embed", "in.txt", str(out), "--model", str(model), "--overwrite", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "error:" in err[0] and "a file of the model" in err[0]
    assert snapshot(model) == before


def test_embed_refuses_the_model_folder_and_keeps_an_input_in_the_parts_folder(tmp_path, models):
    native, _, text = models
    with pytest.raises(OutputError, match="is the model folder"):
        embed_file(text, native, str(native), overwrite=True)
    # OUTPUT.parts was deleted whole once the output was merged: the input in it went with it
    out = tmp_path / "out.hdf5"
    inside = parts_dir(out) / "in.txt"
    inside.parent.mkdir()
    inside.write_bytes(text.read_bytes())
    embed_file(inside, out, random_bilm(seed=3))
    assert inside.read_bytes() == text.read_bytes() and out.is_file()


def test_python_api_refuses_to_replace_the_files_a_model_was_loaded_from(tmp_path, models):
    native, original, text = models
    before = snapshot(original)
    embedder = ElmoEmbedder(str(original / "options.json"), str(original / "weights.hdf5"))
    with pytest.raises(OutputError, match="a file of the model"):
        embedder.embed_file(str(text), str(original / "weights.hdf5"))
    with pytest.raises(OutputError, match="a file of the model"):   # an open file as the input
        with open(text, "rb") as f:
            embedder.embed_file(f, str(original / "options.json"))
    assert snapshot(original) == before
    bilm = load_pretrained(native)   # a loaded model: its files are known from the load
    with pytest.raises(OutputError, match="a file of the model"):
        embed_file(text, native / "model.safetensors", bilm, overwrite=True)
    assert load_pretrained(native).state_dict().keys() == bilm.state_dict().keys()
    embed_file(text, tmp_path / "fine.hdf5", bilm)   # any other path is written
    assert (tmp_path / "fine.hdf5").is_file()


def test_a_folder_named_like_the_parts_keeps_the_files_the_run_did_not_write(tmp_path, models):
    out = tmp_path / "out.hdf5"
    parts = parts_dir(out)
    parts.mkdir()
    (parts / "notes.txt").write_text("mine", encoding="utf-8")
    embed_file(models[2], out, random_bilm(seed=3))
    with h5py.File(out, "r") as f:
        assert sorted(f) == ["0", "1", "sentence_to_index"]
    assert [p.name for p in parts.iterdir()] == ["notes.txt"]   # (the run's segments are gone)
    embed_file(models[2], tmp_path / "other.hdf5", random_bilm(seed=3))
    assert not parts_dir(tmp_path / "other.hdf5").exists()   # a folder of the run's own: removed


# ---------------------------------------------------------------------- symbolic links
@pytest.fixture
def link(tmp_path):
    """``here/out`` -> ``elsewhere/real`` (a file in another folder), given by a relative path."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "here").mkdir()
    (tmp_path / "elsewhere" / "real").write_text("old", encoding="utf-8")
    link = tmp_path / "here" / "out"
    link.symlink_to(Path("..") / "elsewhere" / "real")
    return link


def test_atomic_writes_go_through_a_link_to_the_file_it_names(tmp_path, link):
    real = tmp_path / "elsewhere" / "real"
    atomic_write_text(link, "new")
    assert link.is_symlink() and real.read_text(encoding="utf-8") == "new"
    source = tmp_path / "source"
    source.write_text("copied", encoding="utf-8")
    copy_file(source, link)
    assert link.is_symlink() and real.read_text(encoding="utf-8") == "copied"
    # no temporary left in either folder
    assert sorted(p.name for p in (tmp_path / "here").iterdir()) == ["out"]
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["real"]


def test_embed_writes_through_a_link_and_locks_the_file_it_names(tmp_path, link, models):
    real = tmp_path / "elsewhere" / "real"
    real.unlink()   # (a link to a file not there yet: the file is made)
    embed_file(models[2], link, random_bilm(seed=3))
    assert link.is_symlink() and os.readlink(link) == os.path.join("..", "elsewhere", "real")
    with h5py.File(real, "r") as f:
        assert sorted(f) == ["0", "1", "sentence_to_index"]
    # a writer through the link and one by the file's own path write one file: one lock
    with output_lock(real):
        with pytest.raises(OutputBusy):
            with output_lock(link, wait=0.05):
                pass


def test_a_staged_file_reaches_a_link_to_another_file_system(tmp_path, link, monkeypatch):
    """A file staged in a folder of its own (ship, the analysis report) committed onto a link
    whose file is on another file system, where a rename cannot go (EXDEV)."""
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / "out").write_text("staged", encoding="utf-8")
    rename = os.replace

    def across_file_systems(source, target):   # (only renames within one folder work)
        if Path(source).parent != Path(target).parent:
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        rename(source, target)

    monkeypatch.setattr(os, "replace", across_file_systems)
    atomic_commit(stage / "out", link)
    assert link.is_symlink() and (tmp_path / "elsewhere" / "real").read_text(encoding="utf-8") == "staged"
    assert list(stage.iterdir()) == [] and sorted(p.name for p in link.resolve().parent.iterdir()) == ["real"]
