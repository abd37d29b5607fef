"""save_pretrained into a folder that holds a model: the old folder or the new one, whole.

It replaced the weights, then the options, then (ELMoForManyLangs) the dictionaries, then the
SHA-256 record of metadata.json, each file atomically but not the set: a process killed between
two of them left one model's weights beside another's options or record, a folder the next load
refused as damaged (or loaded as a model never saved). See :mod:`elmo.model_replace`.

Where the disk would be at each point of a save is what the tests copy aside: at each disk sync
(of a file before its rename, of a folder after one), the folder above the model is copied as a
kill there would leave it, and each copy is loaded afterwards.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import elmo
import elmo.folder_swap
import elmo.io
from elmo.folder_checksums import RECORD_KEY, read_record, record_files
from elmo.io import OutputBusy
from tests.conftest import FIXTURES, killed_between_the_fallback_renames, random_bilm

ROOT = Path(__file__).resolve().parent.parent
MANYLANGS = FIXTURES / "elmoformanylangs" / "model_word"


def _same_model(loaded, bilm) -> bool:
    """Whether ``loaded`` is ``bilm``: its options and every tensor, exactly."""
    mine, theirs = loaded.state_dict(), bilm.state_dict()
    return (loaded.options.to_dict() == bilm.options.to_dict() and mine.keys() == theirs.keys()
            and all(torch.equal(mine[k].float(), theirs[k].float()) for k in mine))


def _two_models(kind: str):
    """An old model and a new one: other weights and, but for the dictionary model, another
    activation (an LSTM or CNN setting that the shapes do not show)."""
    if kind != "manylangs":
        return random_bilm(seed=1, activation="relu"), random_bilm(seed=2, activation="tanh")
    old, new = elmo.from_pretrained(MANYLANGS), elmo.from_pretrained(MANYLANGS)
    with torch.no_grad():
        for p in new.parameters():
            p.add_(0.25)
    return old, new


def _model_folder(area: Path, bilm, fmt: str) -> Path:
    """``area/model``: ``bilm`` saved, with a user's notes, a task model below it and a
    metadata.json that records its files' SHA-256 beside a key of its own."""
    out = elmo.save_pretrained(bilm, area / "model", fmt=fmt)
    (out / "notes.txt").write_text("mine\n")
    (out / "pos").mkdir()
    (out / "pos" / "task.json").write_text("{}\n")
    record = record_files(out, [p.name for p in out.iterdir() if p.is_file() and p.name != "notes.txt"])
    (out / "metadata.json").write_text(json.dumps({"tokens": 7, RECORD_KEY: record}))
    return out


def _kept_entries(folder: Path) -> bool:
    meta = json.loads((folder / "metadata.json").read_text())
    return ((folder / "notes.txt").read_text() == "mine\n" and (folder / "pos" / "task.json").read_text() == "{}\n"
            and meta["tokens"] == 7)


@pytest.mark.parametrize("kind, fmt", [("bytes", "safetensors"), ("bytes", "original"),
                                       ("manylangs", "safetensors")])
def test_a_save_stopped_at_any_point_leaves_the_old_model_or_the_new_one(tmp_path, monkeypatch, kind, fmt):
    old, new = _two_models(kind)
    area = tmp_path / "area"
    out = _model_folder(area, old, fmt)
    names = {p.name for p in out.iterdir()}
    snapshots = []
    real_fsync = elmo.io.fsync

    def fsync_and_copy(path, folder=False):   # (what a kill at this sync would leave)
        snapshots.append(shutil.copytree(area, tmp_path / f"at{len(snapshots)}", symlinks=True))
        real_fsync(path, folder)

    for module in (elmo.io, elmo.folder_swap):
        monkeypatch.setattr(module, "fsync", fsync_and_copy)
    elmo.save_pretrained(new, out, fmt=fmt)
    for module in (elmo.io, elmo.folder_swap):
        monkeypatch.setattr(module, "fsync", real_fsync)
    assert len(snapshots) > 4
    assert {p.name for p in area.iterdir()} == {"model"} and {p.name for p in out.iterdir()} == names
    assert _same_model(elmo.from_pretrained(out), new) and _kept_entries(out)
    assert read_record(out) == record_files(out, names - {"notes.txt"})   # (the new files' SHA-256)
    seen = set()
    for snapshot in snapshots:
        loaded = elmo.from_pretrained(snapshot / "model")   # (no refusal: its files and record agree)
        seen.add("old" if _same_model(loaded, old) else "new" if _same_model(loaded, new) else "a mix")
        assert _kept_entries(snapshot / "model")
    assert seen == {"old", "new"}
    # the next save into a folder a kill left: what was left beside it goes, the model is saved
    for snapshot in snapshots[::3]:
        elmo.save_pretrained(old, snapshot / "model", fmt=fmt)
        assert [p.name for p in snapshot.iterdir()] == ["model"] and {p.name for p in (snapshot / "model").iterdir()} == names
        assert _same_model(elmo.from_pretrained(snapshot / "model"), old) and _kept_entries(snapshot / "model")


_KILLED = """
import os, sys
import elmo, elmo.weights
from tests.conftest import random_bilm
def killed(path, text):   # the process dies between the new weights and their config
    os._exit(9)
elmo.weights.atomic_write_text = killed
elmo.save_pretrained(random_bilm(seed=2, activation="tanh"), sys.argv[1])
"""


def test_a_save_killed_between_the_weights_and_their_config_leaves_the_old_folder(tmp_path):
    old, new = _two_models("bytes")
    out = _model_folder(tmp_path, old, "safetensors")
    def files():   # (but the lock file of metadata.json, which a killed holder leaves: it names no writer)
        return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != "metadata.json.lock"}
    before = files()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _KILLED, str(out)], env=env, capture_output=True)
    assert done.returncode == 9, done.stderr.decode()
    assert files() == before
    assert _same_model(elmo.from_pretrained(out), old) and _kept_entries(out)
    elmo.save_pretrained(new, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]   # (the killed save's new folder is gone)
    assert _same_model(elmo.from_pretrained(out), new) and _kept_entries(out)
    assert not any(p.name.endswith(".lock") for p in out.iterdir())


def test_a_save_over_a_model_keeps_the_lock_rules(tmp_path, monkeypatch):
    """Saving into a folder that holds a model is still one writer at a time: (original layout)
    a save_original of the folder's pair is refused while it writes, naming it (its files in
    the old folder, written meanwhile, were lost with it). Another save_pretrained is refused
    by FOLDER.lock, taken before the folder is looked at."""
    import elmo.weights as W

    out = _model_folder(tmp_path, random_bilm(seed=1), "original")
    write, refused = W.atomic_write_text, []

    def another_writer(path, text):
        if not refused:
            busy = out / "weights.hdf5"   # (refused before it writes into the folder)
            with pytest.raises(OutputBusy, match=f"^{busy} is already being written by PID {os.getpid()}") as e:
                elmo.save_original(random_bilm(seed=5), out / "options.json", out / "weights.hdf5")
            refused.append(str(e.value))
        return write(path, text)
    monkeypatch.setattr(W, "atomic_write_text", another_writer)
    elmo.save_pretrained(random_bilm(seed=2), out, fmt="original")
    assert len(refused) == 1
    assert _same_model(elmo.from_pretrained(out), random_bilm(seed=2)) and _kept_entries(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    assert not any(p.name.endswith(".lock") for p in out.iterdir())


def test_a_process_working_in_the_folder_stays_in_it(tmp_path, monkeypatch):
    """The folder is replaced by another: a process working in it (``save_pretrained(m, ".")``)
    was left in the old one, deleted, where a relative path found no file."""
    out = _model_folder(tmp_path, random_bilm(seed=1), "safetensors")
    monkeypatch.chdir(out)
    elmo.save_pretrained(random_bilm(seed=2), ".")
    assert Path(os.getcwd()) == out.resolve() and Path("notes.txt").read_text() == "mine\n"
    assert _same_model(elmo.from_pretrained("."), random_bilm(seed=2))


def test_a_save_after_one_killed_between_the_fallback_renames_keeps_the_folders_entries(tmp_path, monkeypatch,
                                                                                           capsys):
    """Without renameat2 (NFS, macOS) the old folder is renamed aside, then the new one in: a
    save killed between the two left FOLDER.replaced and no FOLDER. The next save found no
    folder and wrote a new one, the notes and task models left aside (and the save after it
    deleted them as what a kill while deleting left); the old folder goes back first."""
    out = _model_folder(tmp_path, random_bilm(seed=1), "safetensors")
    killed_between_the_fallback_renames(monkeypatch, capsys, out, lambda: elmo.save_pretrained(random_bilm(seed=2), out))
    assert not out.exists() and (tmp_path / "model.replaced").is_dir()
    elmo.save_pretrained(random_bilm(seed=3), out)
    assert _same_model(elmo.from_pretrained(out), random_bilm(seed=3)) and _kept_entries(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    assert not (out / elmo.folder_swap.SET_ASIDE_MARK).exists()   # (the mark goes with the old copy)


def _users_folder(path: Path) -> Path:
    """A folder of the user's at ``path`` (FOLDER.replaced), with a file of notes."""
    path.mkdir()
    (path / "notes.txt").write_text("mine, not a model's\n")
    return path


@pytest.mark.parametrize("folder_there", [True, False])
def test_a_folder_of_the_users_named_as_the_old_copy_set_aside_is_left_alone(tmp_path, folder_there):
    """A folder of the user's at FOLDER.replaced was taken for the old copy a killed swap set
    aside: deleted by the next save where FOLDER was there, and renamed into FOLDER (the new
    model written among its files) where it was not. No save set it aside: it stays as it is."""
    out = _model_folder(tmp_path, random_bilm(seed=1), "safetensors") if folder_there else tmp_path / "model"
    users = _users_folder(tmp_path / "model.replaced")
    elmo.save_pretrained(random_bilm(seed=2), out)
    assert (users / "notes.txt").read_text() == "mine, not a model's\n" and len(list(users.iterdir())) == 1
    assert _same_model(elmo.from_pretrained(out), random_bilm(seed=2))
    assert _kept_entries(out) if folder_there else not (out / "notes.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "model.replaced"]


def test_without_renameat2_a_folder_of_the_users_named_as_the_old_copy_is_refused_not_deleted(tmp_path, monkeypatch):
    """Without renameat2 (NFS) the old folder is renamed aside to FOLDER.replaced: a folder of
    the user's there was deleted to make room. It is named in one line and kept, and so is the
    old model."""
    out = _model_folder(tmp_path, random_bilm(seed=1), "safetensors")
    users = _users_folder(tmp_path / "model.replaced")
    monkeypatch.setattr(elmo.folder_swap, "_exchange", lambda a, b: False)
    with pytest.raises(elmo.io.OutputError, match=f"^{users}: is in the way of {out}'s old copy"):
        elmo.save_pretrained(random_bilm(seed=2), out)
    assert (users / "notes.txt").read_text() == "mine, not a model's\n" and len(list(users.iterdir())) == 1
    assert _same_model(elmo.from_pretrained(out), random_bilm(seed=1)) and _kept_entries(out)


def test_a_folder_that_cannot_be_swapped_gets_its_files_in_place(tmp_path):
    """Where FOLDER.partial is another file of the user's, the files are replaced in the folder,
    as before; that file stays."""
    out = _model_folder(tmp_path, random_bilm(seed=1), "safetensors")
    (tmp_path / "model.partial").write_text("not ours\n")
    elmo.save_pretrained(random_bilm(seed=2), out)
    assert (tmp_path / "model.partial").read_text() == "not ours\n"
    assert _same_model(elmo.from_pretrained(out), random_bilm(seed=2)) and _kept_entries(out)


def _copies_at_each_sync(monkeypatch, area: Path, into: Path):
    """The copies of ``area`` taken at each disk sync from now on (what a kill there leaves)."""
    snapshots = []
    real_fsync = elmo.io.fsync

    def fsync_and_copy(path, folder=False):
        snapshots.append(shutil.copytree(area, into / f"at{len(snapshots)}", symlinks=True))
        real_fsync(path, folder)

    for module in (elmo.io, elmo.folder_swap):
        monkeypatch.setattr(module, "fsync", fsync_and_copy)
    return snapshots


@pytest.mark.parametrize("recorded", [True, False])
def test_a_save_original_pair_stopped_at_any_point_loads_one_model_or_is_named(tmp_path, monkeypatch, recorded):
    """save_original's two paths cannot be replaced as one (they may be in two folders): stopped
    between them, the new weights stood beside the old options. Without a SHA-256 record that
    loaded silently (new weights, old activation); with one, it was refused as a damaged file.
    Now each stop loads the old model or the new one, or is one WeightFileError naming the
    weights saved with other options; never a ModelFileChanged, never a mix."""
    from elmo import WeightFileError
    from elmo.folder_checksums import ModelFileChanged

    old, new = _two_models("bytes")
    area = tmp_path / "area"
    options, weights = area / "options.json", area / "weights.hdf5"
    elmo.save_original(old, options, weights)
    if recorded:
        (area / "metadata.json").write_text(json.dumps({RECORD_KEY: record_files(area, ["options.json", "weights.hdf5"])}))
    snapshots = _copies_at_each_sync(monkeypatch, area, tmp_path)
    elmo.save_original(new, options, weights)
    monkeypatch.undo()
    outcomes = []
    for snapshot in snapshots:
        try:
            loaded = elmo.load_original(snapshot / "options.json", snapshot / "weights.hdf5")
        except ModelFileChanged:
            outcomes.append("refused as damaged")
        except WeightFileError as e:
            assert str(e).startswith(f"{snapshot / 'weights.hdf5'}: was saved with other LSTM or CNN options")
            outcomes.append("named")
        else:
            outcomes.append("old" if _same_model(loaded, old) else "new" if _same_model(loaded, new) else "a mix")
    assert set(outcomes) == {"old", "named", "new"}
    assert _same_model(elmo.load_original(options, weights), new)
    assert not recorded or read_record(area) == record_files(area, ["options.json", "weights.hdf5"])


def test_options_edited_in_their_lstm_or_cnn_settings_are_refused_for_weights_that_record_theirs(tmp_path):
    """(as config.json beside model.safetensors): the training keys may change; a file written
    before the digest was kept (the released models) loads with any options that fit it"""
    from elmo import WeightFileError
    from tests.conftest import ALLENNLP

    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    elmo.save_original(random_bilm(seed=1), options, weights)
    config = json.loads(options.read_text())
    options.write_text(json.dumps({**config, "n_tokens_vocab": 7}))
    loaded, saved = elmo.load_original(options, weights).state_dict(), random_bilm(seed=1).state_dict()
    assert all(torch.equal(loaded[k], saved[k]) for k in saved)
    config["lstm"]["cell_clip"] = 1.5
    options.write_text(json.dumps(config))
    with pytest.raises(WeightFileError, match="was saved with other LSTM or CNN options"):
        elmo.load_original(options, weights)
    released = json.loads((ALLENNLP / "options.json").read_text())
    released["lstm"]["cell_clip"] = 1.5
    options.write_text(json.dumps(released))
    elmo.load_original(options, ALLENNLP / "lm_weights.hdf5")   # (no digest there: unchecked)


def test_a_model_file_linked_from_elsewhere_becomes_the_folders_own_and_the_target_keeps_the_old_model(tmp_path):
    """A folder whose weights are a link into a shared place: the save gives the folder a file
    of its own holding the new model, and the shared file is left as it was (other folders may
    link to it), as save_pretrained's docstring says."""
    old, new = random_bilm(seed=1), random_bilm(seed=2)
    shared, folder = tmp_path / "shared", tmp_path / "model"
    elmo.save_pretrained(old, shared)
    folder.mkdir()
    for name in ("model.safetensors", "config.json"):
        (folder / name).symlink_to(shared / name)
    before = (shared / "model.safetensors").read_bytes()
    elmo.save_pretrained(new, folder)
    assert not (folder / "model.safetensors").is_symlink() and not (folder / "config.json").is_symlink()
    assert (shared / "model.safetensors").read_bytes() == before
    assert _same_model(elmo.from_pretrained(str(folder)), new)
    assert _same_model(elmo.from_pretrained(str(shared)), old)
