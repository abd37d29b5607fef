"""A model file checked against its folder's SHA-256 record and then read is the file that was
checked (elmo/folder_checksums.py: checked_reads, LoadChecks).

Every loader hashed a file, then opened it again by path: a file renamed over it, or rewritten
in place, between the two (a writer at work on the folder: convert, save, ship) loaded bytes
that were never checked, without a word. Each test below swaps a file between the check and
the read (in the loader's first read of the folder, monkeypatched) for another model's,
valid, file: the load is refused in one line, where it gave the other model's values."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Dict

import pytest
import torch

import elmo
from elmo import ElmoOptions, folder_checksums
from elmo.folder_checksums import RECORD_KEY, ModelFileChanged, record_files
from elmo.training.export import export_model, load_language_model
from elmo.training.model import LanguageModel
from elmo.vocab import Vocabulary

from tests.conftest import FIXTURES
from training_helpers import tiny_model_options, write_toy_corpus

CHANGED_WHILE_LOADED = r": changed while it was being loaded \(replaced or rewritten after its SHA-256 was checked"


def _record(folder: Path) -> Path:
    """``folder`` with a metadata.json recording the SHA-256 of its files."""
    names = [p.name for p in folder.iterdir() if p.name != "metadata.json"]
    (folder / "metadata.json").write_text(json.dumps({RECORD_KEY: record_files(folder, names)}), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Dict[str, Path]:
    """Two models of each kind ("lm": a trained language model's export, "native": a biLM in
    config.json + model.safetensors, "manylangs": an ELMoForManyLangs folder), the second
    ("KIND-other") of the same shapes and file sizes but other weights (and, for "lm", another
    last word): each file of one loads in place of the other's."""
    root = tmp_path_factory.mktemp("models")
    _, _, vocab_path = write_toy_corpus(root / "corpus", n_train=200, n_heldout=20)
    folders = {}
    for seed, suffix in ((0, ""), (1, "-other")):
        vocab = Vocabulary.load(vocab_path)
        if seed:   # (a word of the same length: vocab.txt keeps its size)
            last = vocab.words[-1]
            vocab = Vocabulary(vocab.words[:-1] + [last[::-1] if last[::-1] != last else last.upper()])
        torch.manual_seed(seed)
        model = LanguageModel(ElmoOptions.from_dict(tiny_model_options()), len(vocab), vocab.bos, vocab.eos, 0.0)
        folders["lm" + suffix] = export_model(model, vocab, root / ("lm" + suffix))
        folders["native" + suffix] = _record(elmo.save_pretrained(model.bilm, root / ("native" + suffix)))
        many = root / ("manylangs" + suffix)
        shutil.copytree(FIXTURES / "elmoformanylangs" / "model_word", many)
        state = torch.load(many / "encoder.pkl", map_location="cpu", weights_only=True)
        torch.save({k: v + seed * 0.25 if v.is_floating_point() else v for k, v in state.items()}, many / "encoder.pkl")
        folders["manylangs" + suffix] = _record(many)
    assert folders["lm"].joinpath("vocab.txt").read_bytes() != folders["lm-other"].joinpath("vocab.txt").read_bytes()
    return folders


def _ship(folder: Path) -> object:
    from elmo.training.ship import ship
    try:
        return ship(folder, folder.parent / "shipped")
    finally:   # (refused, the shipped folder is not written)
        assert not (folder.parent / "shipped").exists()


def _training_vocabulary(folder: Path) -> object:
    from elmo.training.training_vocab import load_training_vocabulary
    return load_training_vocabulary(folder / "vocab.txt")


#: loader -> (the kind of folder it reads, the file swapped, (module, name) of the function
#: that reads the folder first, the load)
LOADERS: Dict[str, tuple] = {
    "load_original": ("lm", "weights.hdf5", ("elmo.weights", "read_original_arrays"),
                      lambda f: elmo.load_original(f / "options.json", f / "weights.hdf5")),
    "from_pretrained, original layout": ("lm", "weights.hdf5", ("elmo.weights", "ElmoOptions.from_file"),
                                         elmo.from_pretrained),
    "from_pretrained, native layout": ("native", "model.safetensors", ("elmo.weights", "ElmoOptions.from_file"),
                                       elmo.from_pretrained),
    "from_pretrained, ManyLangs": ("manylangs", "encoder.pkl", ("elmo.manylangs.folder", "read_dictionary"),
                                   elmo.from_pretrained),
    "load_language_model, softmax": ("lm", "softmax.hdf5", ("elmo.training.export", "open_hdf5"),
                                     load_language_model),
    "load_language_model, vocabulary": ("lm", "vocab.txt", ("elmo.vocab", "Vocabulary.load"), load_language_model),
    "load_training_vocabulary": ("lm", "vocab.txt", ("elmo.vocab", "Vocabulary.load"), _training_vocabulary),
    "ship": ("lm", "softmax.hdf5", ("elmo.training.ship", "write_softmax"), _ship),
}


def _swap(target: Path, replacement: Path, how: str) -> None:
    """``target`` replaced by ``replacement``'s bytes: renamed over (another inode), or
    rewritten in place (the same inode and, here, size)."""
    if how == "renamed over":
        shutil.copyfile(replacement, target.with_name(target.name + ".new"))
        os.replace(target.with_name(target.name + ".new"), target)
    else:
        with open(target, "r+b") as f:
            f.write(replacement.read_bytes())
            f.truncate()


def _swapping_first_read(monkeypatch, where: tuple, swap: Callable[[], None]) -> list:
    """Monkeypatch the reader ``where`` (module, [class.]name) to ``swap`` before its first read;
    the list it appends to when it has."""
    import importlib
    module, name = importlib.import_module(where[0]), where[1]
    owner = getattr(module, name.split(".")[0]) if "." in name else module
    attr = name.split(".")[-1]
    real, swapped = getattr(owner, attr), []

    def reader(*args, **kwargs):
        if not swapped:
            swap()
            swapped.append(True)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, attr, reader)
    return swapped


@pytest.mark.parametrize("how", ["renamed over", "rewritten in place within the clock's tick"])
@pytest.mark.parametrize("loader", list(LOADERS))
def test_a_file_swapped_between_its_check_and_its_read_is_refused(pristine, tmp_path, monkeypatch, loader, how):
    kind, name, where, load = LOADERS[loader]
    folder = shutil.copytree(pristine[kind], tmp_path / kind)
    other = pristine[kind + "-other"] / name
    assert other.read_bytes() != (folder / name).read_bytes()
    if how == "renamed over":   # (files long written: the state seen when checked is what is compared)
        monkeypatch.setattr(folder_checksums, "RACY_NS", 0)
    else:
        # a coarse clock (whole seconds: ext3, HFS+, NFS) gives the rewrite the times of the
        # write before: the size, times and inode are those checked, and only a hash tells
        assert other.stat().st_size == (folder / name).stat().st_size
        tick, real_state = time.time_ns(), folder_checksums._file_state
        monkeypatch.setattr(folder_checksums, "_file_state", lambda p: (real_state(p)[0], tick, tick, *real_state(p)[3:]))
        monkeypatch.setattr(folder_checksums, "RACY_NS", 10 ** 18)   # (every file written in the tick)
    swapped = _swapping_first_read(monkeypatch, where, lambda: _swap(folder / name, other, how))
    with pytest.raises(ModelFileChanged, match=f"^{folder / name}{CHANGED_WHILE_LOADED}.*load it again") as info:
        load(folder)
    assert swapped and len(str(info.value).splitlines()) == 1
    monkeypatch.undo()   # (the same load, with the file as it is now, checked and refused as edited)
    with pytest.raises(ModelFileChanged, match="differs from the file that was written there"):
        load(folder)


def test_an_unchanged_folder_loads_each_file_checked(pristine, tmp_path, monkeypatch):
    """The confirmation reads no file again where the times are old enough to be trusted."""
    from elmo.hub import file_checks
    folder = shutil.copytree(pristine["lm"], tmp_path / "lm")
    monkeypatch.setattr(folder_checksums, "RACY_NS", 0)
    hashed = []
    real = file_checks.sha256_file
    monkeypatch.setattr(file_checks, "sha256_file", lambda p: hashed.append(Path(p).name) or real(p))
    load_language_model(folder)
    assert sorted(hashed) == ["options.json", "softmax.hdf5", "vocab.txt", "weights.hdf5"]


@pytest.mark.parametrize("load", [load_language_model, elmo.from_pretrained], ids=["load_language_model", "from_pretrained"])
def test_one_load_reads_its_folders_metadata_json_once(pristine, monkeypatch, load):
    """load_language_model read and parsed metadata.json three times (its biLM's, vocabulary's
    and softmax's checks)."""
    from elmo import text_files
    reads = []
    real = text_files.read_json
    monkeypatch.setattr(text_files, "read_json", lambda path, *a, **k: reads.append(Path(path).name) or real(path, *a, **k))
    load(pristine["lm"])
    assert reads.count("metadata.json") == 1


def test_a_corpus_files_fingerprint_is_its_sha256(tmp_path):
    import hashlib
    from elmo.data.corpus import file_fingerprint
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"the old river .\n" * 100_000)   # (more than one block read)
    assert file_fingerprint(path) == file_fingerprint(str(path)) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_folder_replaced_between_two_files_of_one_load_is_said_to_have_changed(pristine, tmp_path, monkeypatch):
    """One load reads its folder's record once: a folder replaced whole (a save or convert
    swapping in another model) after the vocabulary was read and before the weights were
    checked had the new weights compared with the old record, and the load called them
    "damaged or edited since", advising to delete their entry from the record."""
    import elmo.training.export as export
    folder = shutil.copytree(pristine["lm"], tmp_path / "lm")
    new = shutil.copytree(pristine["lm-other"], tmp_path / "lm.partial")
    real = export.load_original

    def swapped_first(*args, **kwargs):   # (as atomic_folder's fallback does: two renames)
        os.rename(folder, tmp_path / "lm.replaced")
        os.rename(new, folder)
        return real(*args, **kwargs)
    monkeypatch.setattr(export, "load_original", swapped_first)
    with pytest.raises(ModelFileChanged, match=f"^{folder / 'weights.hdf5'}: changed while it was being loaded"
                                               f".*load it again") as info:
        load_language_model(folder)
    assert len(str(info.value).splitlines()) == 1
    monkeypatch.undo()
    load_language_model(folder)   # (the new folder, whole: loaded)


@pytest.mark.parametrize("load", ["from_pretrained", "load_manylangs"])
def test_the_model_configuration_an_elmoformanylangs_config_names_is_checked_against_the_record(tmp_path, load):
    """An ELMoForManyLangs folder's config.json names a second file, the model configuration,
    which the folder's record holds like the others: edited, it was read unchecked (and the
    model built from it), by from_pretrained and by load_manylangs alike."""
    from elmo.manylangs import load_manylangs
    many = _record(Path(shutil.copytree(FIXTURES / "elmoformanylangs" / "model_word", tmp_path / "many")))
    configuration = many / "cnn_16_8_32_64_tiny.json"
    configuration.write_text(configuration.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    loader = elmo.from_pretrained if load == "from_pretrained" else load_manylangs
    with pytest.raises(ModelFileChanged, match=r"cnn_16_8_32_64_tiny\.json: differs from the file"):
        loader(str(many))


def test_a_read_that_fails_on_a_file_swapped_in_meanwhile_names_the_change_and_other_errors_pass(tmp_path):
    """A loader's error about a file replaced while it was read (its parser refusing the other
    bytes) read as if the file were damaged: the change is named, the parser's error chained;
    an error with every file unchanged is raised as it was."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "options.json").write_text('{"a": 1}', encoding="utf-8")
    _record(folder)
    old = time.time() - 60   # (not racy: the confirmation goes by the file's state alone)
    os.utime(folder / "options.json", (old, old))
    with pytest.raises(ValueError, match="the parser's own"):
        with folder_checksums.checked_reads([folder / "options.json"]):
            raise ValueError("the parser's own")
    with pytest.raises(ModelFileChanged, match="changed while it was being loaded") as caught:
        with folder_checksums.checked_reads([folder / "options.json"]):
            (tmp_path / "other.json").write_text("{not json", encoding="utf-8")
            os.replace(tmp_path / "other.json", folder / "options.json")
            raise ValueError("not JSON")
    assert isinstance(caught.value.__cause__, ValueError)
