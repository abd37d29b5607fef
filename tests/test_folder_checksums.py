"""The SHA-256 record of a model folder's files (metadata.json's files_sha256): written by every
writer of a folder, checked by every load (elmo/folder_checksums.py).

A weight file damaged on disk that still parsed as HDF5, or an edited vocab.txt, loaded
without a word and gave other vectors (or perplexities): the bundled default model's files
and every exported vocabulary carried no checksum at all."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from pathlib import Path

import h5py
import pytest
import torch

import elmo
from elmo import ElmoOptions
from elmo.folder_checksums import ModelFileChanged, RECORD_KEY, verify_files
from elmo.training.export import export_model, load_language_model
from elmo.training.model import LanguageModel
from elmo.vocab import Vocabulary

from training_helpers import tiny_model_options, write_toy_corpus

#: The files of an exported model folder (metadata.json itself is never in its own record).
RECORDED = ("options.json", "softmax.hdf5", "vocab.txt", "vocab_counts.tsv", "weights.hdf5")
CHANGED = re.compile(r"differs from the file that was written there .*: it is damaged or was edited since; ")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _flip_a_byte(path: Path) -> None:
    """A bit of the file's middle byte flipped, in place (a failing disk's damage)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture
def exported(tmp_path) -> Path:
    """A trained language model's folder as `elmo train` exports it (vocabulary counts too)."""
    _, _, vocab_path = write_toy_corpus(tmp_path / "corpus", n_train=200, n_heldout=20)
    vocab = Vocabulary.load(vocab_path)
    vocab.counts = [5] * len(vocab)
    torch.manual_seed(0)
    model = LanguageModel(ElmoOptions.from_dict(tiny_model_options()), len(vocab), vocab.bos, vocab.eos, 0.0)
    return export_model(model, vocab, tmp_path / "model", metadata={"tokens": 1})


def _recorded(folder: Path) -> dict:
    return json.loads((folder / "metadata.json").read_text(encoding="utf-8"))[RECORD_KEY]


def _load_all(folder: Path) -> None:
    """What perplexity, finetune and train --from read (the biLM, softmax and vocabulary)."""
    load_language_model(folder)


def test_an_export_records_each_file_it_writes(exported):
    record = _recorded(exported)
    assert sorted(record) == sorted(RECORDED)      # the counts too; metadata.json never
    for name, sha in record.items():
        assert sha == _sha256(exported / name), name
    _load_all(exported)


@pytest.mark.parametrize("name", RECORDED)
def test_a_flipped_byte_in_each_recorded_file_is_refused(exported, name):
    _flip_a_byte(exported / name)
    with pytest.raises(ModelFileChanged, match=re.escape(str(exported / name)) + ": " + CHANGED.pattern):
        _load_all(exported)
    if name in ("options.json", "weights.hdf5"):             # the biLM alone, as embed loads it
        with pytest.raises(ModelFileChanged, match=re.escape(str(exported / name))):
            elmo.from_pretrained(exported)


def test_an_edit_is_accepted_by_deleting_its_entry_as_the_message_says(exported, capsys):
    from elmo.cli import main
    vocab = exported / "vocab.txt"
    words = vocab.read_text(encoding="utf-8").splitlines()
    vocab.write_text("\n".join(words[:-1] + ["renamed"]) + "\n", encoding="utf-8")   # a word changed on purpose
    (exported / "vocab_counts.tsv").unlink()
    with pytest.raises(ModelFileChanged) as info:
        load_language_model(exported)
    said = str(info.value)
    assert len(said.splitlines()) == 1
    assert f"delete \"vocab.txt\" from '{RECORD_KEY}' in {exported / 'metadata.json'}" in said
    assert main(["info", str(exported)]) == 1     # (the biLM loads; the line names the vocabulary)
    assert ("vocab.txt: DIFFERS from its SHA-256 in metadata.json (damaged or edited; its loads are refused)"
            in capsys.readouterr().out.splitlines())
    meta = json.loads((exported / "metadata.json").read_text(encoding="utf-8"))
    del meta[RECORD_KEY]["vocab.txt"]
    (exported / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    assert load_language_model(exported)[1].words[-1] == "renamed"
    assert main(["info", str(exported)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "not in 'files_sha256' (loaded unchecked): vocab.txt" in out
    assert "vocab_counts.tsv: named by 'files_sha256' but missing" in out


def test_a_folder_without_a_record_loads_as_before(tmp_path):
    """The released AllenNLP files, older runs and conformance weights record nothing."""
    folder = tmp_path / "released"
    shutil.copytree(elmo.model_path("fixture"), folder)
    (folder / "metadata.json").unlink(missing_ok=True)
    with h5py.File(folder / "weights.hdf5", "r+") as f:
        f["CNN/b_cnn_0"][0] += 0.5
    assert verify_files([folder / "options.json", folder / "weights.hdf5"]) == []
    assert elmo.from_pretrained(folder).output_dim > 0


@pytest.mark.parametrize("name", ["default", "fixture"])
def test_the_bundled_models_load_verified(name, capsys):
    from elmo.cli import main
    folder = elmo.model_path(name)
    record = _recorded(folder)
    files = ["options.json", "weights.hdf5"] + (["softmax.hdf5", "vocab.txt"] if name == "default" else [])
    assert sorted(record) == sorted(files)
    assert verify_files([folder / n for n in files]) == [folder / n for n in files]
    assert main(["info", name]) == 0
    assert f"SHA-256 verified against metadata.json 'files_sha256': {', '.join(sorted(files))}" in \
        capsys.readouterr().out.splitlines()


def test_a_bundled_models_damage_says_to_reinstall(tmp_path, monkeypatch):
    from elmo import io
    folder = tmp_path / "default"
    shutil.copytree(elmo.model_path("default"), folder)
    monkeypatch.setattr(io, "bundled_folders", lambda: {"default": folder})
    _flip_a_byte(folder / "vocab.txt")
    with pytest.raises(ModelFileChanged, match="the package's copy is damaged: reinstall the package$"):
        load_language_model(folder)


def test_a_file_is_hashed_once_per_process_while_it_is_unchanged(exported, monkeypatch):
    from elmo import folder_checksums
    from elmo.hub import file_checks
    # (the export's files count as written long before: this file system's times are far finer
    # than folder_checksums.RACY_NS, which is for coarse ones)
    monkeypatch.setattr(folder_checksums, "RACY_NS", 0)
    hashed = []
    real = file_checks.sha256_file
    monkeypatch.setattr(file_checks, "sha256_file", lambda p: hashed.append(Path(p).name) or real(p))
    for _ in range(3):
        elmo.from_pretrained(exported)
    assert hashed.count("weights.hdf5") <= 1
    with h5py.File(exported / "weights.hdf5", "r+") as f:   # changed in place: its mtime moves on
        f["CNN/b_cnn_0"][0] += 0.5
    with pytest.raises(ModelFileChanged):
        elmo.from_pretrained(exported)


@pytest.mark.parametrize("source", ["exported", "without metadata.json"])
def test_convert_records_the_files_it_writes(request, tmp_path, source):
    """Its copy of a folder without metadata.json (the released files; the bundled fixture's
    copy here) had none, and loaded unchecked."""
    from elmo.cli import main
    if source == "exported":
        folder = request.getfixturevalue("exported")
    else:
        folder = tmp_path / "released"
        shutil.copytree(Path(elmo.__file__).parent / "resources" / "fixture", folder)
        (folder / "metadata.json").unlink()
    assert main(["convert", str(folder), str(tmp_path / "native"), "--to", "safetensors"]) == 0
    record = _recorded(tmp_path / "native")
    assert sorted(record) == ["config.json", "model.safetensors"]
    assert all(sha == _sha256(tmp_path / "native" / n) for n, sha in record.items())
    _flip_a_byte(tmp_path / "native" / "config.json")
    with pytest.raises(ModelFileChanged, match="config.json: "):
        elmo.from_pretrained(tmp_path / "native")


def test_convert_into_itself_records_the_files_it_adds(exported):
    """A model folder converted into itself kept its metadata.json: the record named the files
    of before, and a file rewritten in other bytes would be refused at the next load."""
    from elmo.cli import main
    before = _recorded(exported)
    assert main(["convert", str(exported), str(exported)]) == 0
    record = _recorded(exported)
    assert {k: v for k, v in record.items() if k in before} == before
    assert record["model.safetensors"] == _sha256(exported / "model.safetensors")
    _flip_a_byte(exported / "model.safetensors")
    with pytest.raises(ModelFileChanged, match="model.safetensors: "):
        elmo.from_pretrained(exported)


def test_ship_records_the_shipped_files_and_refuses_a_damaged_source(exported, tmp_path):
    from elmo.training.ship import ship
    ship(exported, tmp_path / "shipped", softmax_dtype="float16")
    record = _recorded(tmp_path / "shipped")
    assert sorted(record) == sorted(RECORDED)
    assert all(sha == _sha256(tmp_path / "shipped" / n) for n, sha in record.items())
    assert record["softmax.hdf5"] != _recorded(exported)["softmax.hdf5"]     # its own bytes: float16
    _load_all(tmp_path / "shipped")
    _flip_a_byte(exported / "softmax.hdf5")
    with pytest.raises(ModelFileChanged, match="softmax.hdf5: "):
        ship(exported, tmp_path / "again")
    assert not (tmp_path / "again").exists()


@pytest.mark.parametrize("fmt", ["original", "safetensors"])
def test_a_model_saved_into_a_recorded_folder_updates_its_record(exported, fmt):
    """elmo.save_pretrained (save_original) over a recorded folder's files left the record of
    the old ones: the next load refused the folder as damaged."""
    bilm = elmo.from_pretrained(exported).to(torch.bfloat16)
    elmo.save_pretrained(bilm, exported, fmt=fmt)
    names = ["options.json", "weights.hdf5"] if fmt == "original" else ["config.json", "model.safetensors"]
    record = _recorded(exported)
    assert all(record[n] == _sha256(exported / n) for n in names)
    assert elmo.from_pretrained(exported).token_encoder.projection.weight.dtype == torch.bfloat16
    load_language_model(exported)


def test_finetune_records_the_adapted_folders_files_not_its_starts(tmp_path):
    """The adapted model's metadata.json is rewritten after the export (its held-out perplexity):
    the record must stay, name the adapted files, and the start's record (of other files) must
    not travel in base_metadata."""
    from elmo.training.finetune import finetune
    from elmo.training.trainer import train
    from training_helpers import tiny_config
    train_txt, _, vocab_txt = write_toy_corpus(tmp_path / "corpus")
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=2))
    start = tmp_path / "base" / "model"
    assert sorted(_recorded(start)) == ["options.json", "softmax.hdf5", "vocab.txt", "weights.hdf5"]
    task = tmp_path / "task.txt"
    task.write_text("".join(f"the happy farmer {v} the old river .\n" for v in ["sees", "likes", "helps"] * 20))
    finetune(tiny_config(tmp_path / "adapted", task, "", init_from=str(start), max_steps=2))
    adapted = tmp_path / "adapted" / "model"
    meta = json.loads((adapted / "metadata.json").read_text(encoding="utf-8"))
    assert "heldout_ppl_after" in meta and RECORD_KEY not in meta["base_metadata"]
    assert {n: _sha256(adapted / n) for n in meta[RECORD_KEY]} == meta[RECORD_KEY]
    assert meta[RECORD_KEY]["weights.hdf5"] != _recorded(start)["weights.hdf5"]


@pytest.mark.parametrize("name", ["../secret.txt", "/etc/hostname", "sub/weights.hdf5", "..", ".", ""])
def test_a_record_naming_a_path_outside_the_folder_is_refused(tmp_path, capsys, name):
    """A record is of the folder's own files: one naming ../x or an absolute path (a model
    archive made to say so) had elmo info hash a file outside the folder, say it matched
    or that the folder was damaged by it."""
    from elmo.cli import main
    folder = tmp_path / "model"
    shutil.copytree(elmo.model_path("fixture"), folder)
    (tmp_path / "secret.txt").write_text("hello", encoding="utf-8")
    meta = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    meta[RECORD_KEY][name] = hashlib.sha256(b"hello").hexdigest()
    (folder / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    expected = re.escape(f"{folder / 'metadata.json'}: '{RECORD_KEY}' must be an object of file names")
    with pytest.raises(elmo.WeightFileError, match=expected):
        elmo.from_pretrained(folder)
    assert main(["info", str(folder)]) != 0
    said = capsys.readouterr()
    assert "secret.txt" not in said.out and "hostname" not in said.out


def test_a_file_rewritten_within_its_timestamps_tick_is_hashed_again(tmp_path, monkeypatch):
    """A file system whose times tick coarsely (whole seconds on ext3, HFS+ or NFS; two on
    FAT) keeps size, times and inode of a file rewritten in place soon after it was hashed:
    the per-process cache gave the old digest, and the edit loaded unchecked."""
    from elmo import folder_checksums
    folder = tmp_path / "model"
    shutil.copytree(elmo.model_path("fixture"), folder)
    tick = time.time_ns()   # (the one time the file system gives every write in this test)
    real = folder_checksums._file_state
    monkeypatch.setattr(folder_checksums, "_file_state", lambda p: (real(p)[0], tick, tick, *real(p)[3:]))
    assert verify_files([folder / "options.json"]) == [folder / "options.json"]
    text = (folder / "options.json").read_text(encoding="utf-8")
    with open(folder / "options.json", "r+", encoding="utf-8") as f:   # in place: the same inode and size
        f.write(text.replace('"n_highway": 2', '"n_highway": 1'))
    assert (folder / "options.json").read_text(encoding="utf-8") != text
    with pytest.raises(ModelFileChanged, match="options.json: "):
        verify_files([folder / "options.json"])


def test_a_model_folders_vocabulary_given_to_train_is_checked(exported):
    """elmo train --vocab MODEL/vocab.txt (a new model on another's words) read the file
    unchecked: an edited or damaged vocabulary trained a model without a word."""
    from elmo.training.training_vocab import load_training_vocabulary
    assert load_training_vocabulary(exported / "vocab.txt").words == load_language_model(exported)[1].words
    words = (exported / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (exported / "vocab.txt").write_text("\n".join(words[:-1] + ["renamed"]) + "\n", encoding="utf-8")
    with pytest.raises(ModelFileChanged, match="vocab.txt: "):
        load_training_vocabulary(exported / "vocab.txt")


def test_two_writers_updating_one_record_lose_neither_entry(exported, monkeypatch):
    """save_original's two files are locked, not their folder's metadata.json: two writers of
    other files of one folder both read the record, and the second to write it dropped the
    first's new SHA-256, whose file the next load refused as damaged."""
    import threading
    from elmo import folder_checksums
    for name in ("a.hdf5", "b.hdf5"):
        (exported / name).write_bytes(b"old " + name.encode())
    meta = json.loads((exported / "metadata.json").read_text(encoding="utf-8"))
    meta[RECORD_KEY].update({n: _sha256(exported / n) for n in ("a.hdf5", "b.hdf5")})
    (exported / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    (exported / "a.hdf5").write_bytes(b"new a")
    (exported / "b.hdf5").write_bytes(b"new b")
    a_has_read, go_on = threading.Event(), threading.Event()
    real = folder_checksums.record_files

    def slow_for_a(folder, names):   # the first writer, held between its read and its write
        names = list(names)
        if names == ["a.hdf5"]:
            a_has_read.set()
            go_on.wait(10)
        return real(folder, names)

    monkeypatch.setattr(folder_checksums, "record_files", slow_for_a)
    first = threading.Thread(target=folder_checksums.update_record, args=([exported / "a.hdf5"],))
    first.start()
    assert a_has_read.wait(10)
    second = threading.Thread(target=folder_checksums.update_record, args=([exported / "b.hdf5"],))
    second.start()
    second.join(0.5)    # (the second writer runs on, or waits for the first's lock)
    go_on.set()
    first.join(10)
    second.join(10)
    record = _recorded(exported)
    assert record["a.hdf5"] == _sha256(exported / "a.hdf5") and record["b.hdf5"] == _sha256(exported / "b.hdf5")
