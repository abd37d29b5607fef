"""Shipping a trained model folder as a bundled model, and measuring what float16 costs."""
from __future__ import annotations

import json
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo import ElmoOptions
from elmo.training.export import export_model, load_language_model
from elmo.training.model import LanguageModel
from elmo.training.precision import compare
from elmo.training.ship import ship
from elmo.vocab import Vocabulary

from training_helpers import tiny_model_options, write_toy_corpus


@pytest.fixture
def exported(tmp_path) -> Path:
    _, _, vocab_path = write_toy_corpus(tmp_path / "corpus", n_train=200, n_heldout=20)
    vocab = Vocabulary.load(vocab_path)
    torch.manual_seed(0)
    model = LanguageModel(ElmoOptions.from_dict(tiny_model_options()), len(vocab), vocab.bos, vocab.eos, 0.0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)          # random everywhere, biases too, so that rounding shows
    meta = {"train_config": {"train": [str(Path.home() / "corpus" / "train.txt")], "state_reset_every": 0},
            "tokens": 123}
    return export_model(model, vocab, tmp_path / "model", metadata=meta)


def _state(folder):
    model, vocab = load_language_model(folder)
    return model.state_dict(), vocab


def test_float32_ship_is_exact(exported, tmp_path):
    sizes = ship(exported, tmp_path / "shipped")
    assert set(sizes) == {"options.json", "weights.hdf5", "softmax.hdf5", "vocab.txt", "metadata.json"}
    (ref, vocab), (got, vocab2) = _state(exported), _state(tmp_path / "shipped")
    assert vocab.words == vocab2.words
    for name, tensor in ref.items():
        assert torch.equal(tensor, got[name]), name
    meta = json.loads((tmp_path / "shipped" / "metadata.json").read_text())
    assert meta["tokens"] == 123 and meta["train_config"]["train"] == ["~/corpus/train.txt"]
    assert meta["shipped"]["bilm_dtype"] == "float32" and len(meta["shipped"]["source_sha256"]) == 4


def test_a_url_login_in_the_metadata_is_not_shipped(exported, tmp_path, capsys):
    """The source's metadata.json naming a URL with a password (a hand-edited or older record):
    the shipped copy holds it as ***, one warning line says so, and the source is kept as it is."""
    source = exported / "metadata.json"
    meta = json.loads(source.read_text())
    meta["train_config"]["train"].append("https://user:secret@host.invalid/c.txt")
    source.write_text(json.dumps(meta))
    ship(exported, tmp_path / "shipped")
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "secret" not in err
    shipped = json.loads((tmp_path / "shipped" / "metadata.json").read_text())
    assert shipped["train_config"]["train"][-1] == "https://user:***@host.invalid/c.txt"
    assert json.loads(source.read_text()) == meta


def test_float16_ship_rounds_exactly_the_chosen_parts(exported, tmp_path):
    ship(exported, tmp_path / "half", bilm_dtype="float32", softmax_dtype="float16")
    with h5py.File(tmp_path / "half" / "softmax.hdf5") as h5:
        assert h5["softmax/W"].dtype == np.float16 and h5["softmax/b"].dtype == np.float16
    with h5py.File(tmp_path / "half" / "weights.hdf5") as h5:
        assert h5["CNN_proj/W_proj"].dtype == np.float32
    ref, _ = _state(exported)
    got, _ = _state(tmp_path / "half")
    for name, tensor in ref.items():
        want = tensor.half().float() if name.startswith("softmax") else tensor
        assert torch.equal(got[name], want), name
    assert not torch.equal(got["softmax.weight"], ref["softmax.weight"])



def test_a_bfloat16_source_ships_as_the_dtypes_asked(exported, tmp_path):
    """A source whose weights.hdf5 records a bfloat16 model (save_original of one) shipped with
    that record: the shipped model loaded as bfloat16 (its float16 or float32 values rounded
    again), not as float32 as the shipped dtypes say. It now loads as float32."""
    import shutil
    import elmo
    from elmo.weights import load_original, save_original
    source = exported.parent / "bf16"
    shutil.copytree(exported, source)
    bilm = load_original(source / "options.json", source / "weights.hdf5").to(torch.bfloat16)
    save_original(bilm, source / "options.json", source / "weights.hdf5")
    assert elmo.from_pretrained(source).token_encoder.projection.weight.dtype == torch.bfloat16
    ship(source, tmp_path / "shipped", bilm_dtype="float32")
    shipped = elmo.from_pretrained(tmp_path / "shipped")
    assert {p.dtype for p in shipped.parameters()} == {torch.float32}
    for (n, p), (_, q) in zip(bilm.state_dict().items(), shipped.state_dict().items()):
        assert torch.equal(p.float(), q), n

def test_ship_refuses_a_vocabulary_whose_counts_list_other_words(exported, tmp_path):
    """(vocab.txt and vocab_counts.tsv were copied as they were: the shipped folder was then
    refused where it was loaded)"""
    words = (exported / "vocab.txt").read_text(encoding="utf-8").splitlines()
    words[3], words[4] = words[4], words[3]
    (exported / "vocab_counts.tsv").write_text("".join(f"{w}\t1\n" for w in words), encoding="utf-8")
    with pytest.raises(ValueError, match="vocab.txt .* and vocab_counts.tsv .* list other words"):
        ship(exported, tmp_path / "there")
    assert not (tmp_path / "there").exists()


def test_ship_refuses_more_than_the_size_limit(exported, tmp_path):
    """(the files were written over DEST's first and refused after: the bundled model was
    replaced by the copy the error said was refused)"""
    with pytest.raises(ValueError, match="more than the 0.001 MB allowed; nothing was written"):
        ship(exported, tmp_path / "big", max_mb=0.001)
    assert not (tmp_path / "big").exists()
    ship(exported, tmp_path / "there")
    before = {p.name: p.read_bytes() for p in (tmp_path / "there").iterdir()}
    with pytest.raises(ValueError, match="more than"):
        ship(exported, tmp_path / "there", bilm_dtype="float16", max_mb=0.001)
    assert {p.name: p.read_bytes() for p in (tmp_path / "there").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "model", "there"]   # no staging left
    with pytest.raises(ValueError, match="dtype"):
        ship(exported, tmp_path / "bad", bilm_dtype="int8")


def test_precision_compare(exported, tmp_path):
    held = exported.parent / "corpus" / "heldout.txt"
    same = compare(exported, exported, [str(held)])
    assert all(row["max_abs_diff"] == 0.0 for row in same["activations"])
    assert all(abs(r["relative_change"]["ppl"]) == 0.0 for r in same["perplexity"].values())
    ship(exported, tmp_path / "half", bilm_dtype="float16", softmax_dtype="float16")
    half = compare(exported, tmp_path / "half", [str(held)])
    assert half["activations"][0]["max_abs_diff"] > 0
    assert half["perplexity"]["candidate"]["ppl"] != half["perplexity"]["reference"]["ppl"]
    assert half["perplexity"]["reference"]["relative_change"]["ppl"] == 0.0
    assert half["tokens"] == sum(len(line.split()) for line in held.read_text().splitlines())


def test_ship_command_refuses_bad_limits_in_one_line_before_any_work(exported, tmp_path, capsys):
    """`--max-mb nan` shipped any size (no size is more than NaN), a negative limit was refused
    only once every file was written, and every refusal was a traceback."""
    from elmo.training.ship import main
    for limit in ("nan", "-1", "0", "inf"):
        assert main([str(exported), str(tmp_path / "out"), "--max-mb", limit]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--max-mb must be a positive number" in err, err
    assert main([str(exported), str(tmp_path / "out"), "--max-mb", "0.001"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "more than the 0.001 MB allowed" in err
    assert main([str(tmp_path / "nowhere"), str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "model"]
    with pytest.raises(ValueError, match="--max-mb"):
        ship(exported, tmp_path / "out", max_mb=float("nan"))


def test_info_says_the_dtype_size_and_shipping_of_every_kind_of_folder(exported, tmp_path, capsys):
    """`elmo info` said nothing of the dtype: a bfloat16 model, or one shipped with float16
    weights, read like a float32 one, and a shipped folder did not say it was shipped."""
    import elmo
    from elmo.cli import main
    ship(exported, tmp_path / "half", bilm_dtype="float16", softmax_dtype="float16")
    assert main(["info", str(tmp_path / "half")]) == 0
    out = capsys.readouterr().out
    assert "dtype: float32 (as loaded)" in out
    assert "weights.hdf5: 0.0" in out and "MB, stored as float16" in out
    assert re.search(r"softmax.hdf5: 0.0\d MB, stored as float16", out)
    assert "shipped: biLM float16, softmax float16" in out
    bilm = elmo.from_pretrained("fixture")
    for fmt, stored in (("safetensors", "model.safetensors: 0.2"), ("original", "weights.hdf5: 0.4")):
        elmo.save_pretrained(bilm.to(torch.bfloat16), tmp_path / fmt, fmt=fmt)
        assert main(["info", str(tmp_path / fmt)]) == 0
        out = capsys.readouterr().out
        assert "dtype: bfloat16 (as loaded)" in out and stored in out, out
        assert ("stored as bfloat16" if fmt == "safetensors" else "stored as float32") in out


def test_ship_refuses_a_folder_holding_files_it_would_not_replace(exported, tmp_path):
    """Shipped over a folder that held another model's model.safetensors, the folder embedded
    with that old model (elmo.from_pretrained loads safetensors first) and measured perplexity
    with the shipped one; now that is refused before anything is written. The vocabulary's
    counts go with the shipped copy."""
    import elmo
    from elmo.vocab import Vocabulary
    other = tmp_path / "other"
    elmo.save_pretrained(elmo.from_pretrained("fixture"), other)
    before = {p.name: p.read_bytes() for p in other.iterdir()}
    with pytest.raises(ValueError, match="also holds config.json, model.safetensors of the model there"):
        ship(exported, other)
    assert {p.name: p.read_bytes() for p in other.iterdir()} == before
    vocab = Vocabulary.load(exported / "vocab.txt")
    Vocabulary.from_counts(dict(zip(vocab.words[3:], range(100, 0, -1)))).save(
        exported / "vocab_counts.tsv", with_counts=True)
    assert "vocab_counts.tsv" in ship(exported, tmp_path / "counted")
    assert (tmp_path / "counted" / "vocab_counts.tsv").read_bytes() == (exported / "vocab_counts.tsv").read_bytes()
    (exported / "vocab_counts.tsv").unlink()
    with pytest.raises(ValueError, match="also holds vocab_counts.tsv"):
        ship(exported, tmp_path / "counted")


def test_a_folder_a_killed_swap_left_aside_is_checked_as_the_folder(exported, tmp_path):
    """A writer killed between the renames of a swap without renameat2 (NFS) leaves DEST
    renamed aside as DEST.replaced. Ship found no DEST, checked nothing, and the swap then put
    the old folder back and carried another model's weights into the shipped one (the stale
    files' check skipped). It is put back under the lock first, and checked."""
    import elmo
    from elmo.folder_swap import mark_set_aside, set_aside_folder
    other = tmp_path / "other"
    elmo.save_pretrained(elmo.from_pretrained("fixture"), other)
    before = {p.name: p.read_bytes() for p in other.iterdir()}
    other.rename(set_aside_folder(other))   # (what the kill left: the old folder aside, marked)
    mark_set_aside(set_aside_folder(other))
    with pytest.raises(ValueError, match="also holds config.json, model.safetensors of the model there"):
        ship(exported, other)
    assert {p.name: p.read_bytes() for p in other.iterdir()} == before
    assert not set_aside_folder(other).exists()


def test_a_value_past_float16_is_refused_not_shipped_as_inf(exported, tmp_path):
    """A weight above float16's 65504 became inf in a float16 copy, written without a word; the
    shipped folder was then refused at load as non-finite. Now shipping stops, naming it."""
    import elmo
    for part in ("softmax", "bilm"):
        model, vocab = load_language_model(exported)
        with torch.no_grad():
            (model.softmax.bias if part == "softmax" else model.bilm.token_encoder.projection.bias)[0] = 1e5
        src = export_model(model, vocab, tmp_path / f"big_{part}")
        with pytest.raises(ValueError, match="a value of 100000 does not fit float16"):
            ship(src, tmp_path / "out", bilm_dtype="float16", softmax_dtype="float16")
        assert not (tmp_path / "out").exists()
        ship(src, tmp_path / f"out_{part}")          # float32 holds it
    bilm = elmo.from_pretrained("fixture")
    with torch.no_grad():
        bilm.token_encoder.projection.bias[0] = -1e6
    with pytest.raises(ValueError, match="CNN_proj/b_proj.*-?1e\\+06 does not fit float16"):
        elmo.save_original(bilm, tmp_path / "o.json", tmp_path / "w.hdf5", dtype="float16")
    assert not (tmp_path / "w.hdf5").exists()


def test_a_second_ship_into_the_same_folder_is_refused_while_the_first_moves_its_files_in(
        exported, tmp_path, monkeypatch):
    """Two copies into one folder (float32 and float16), the second starting while the first
    moved its files in: the folder held one's options and weights beside the other's softmax
    and metadata, and its 'shipped' record described files that were not there. Now the second
    is refused, naming the first, and the folder is the first's copy."""
    import elmo.training.ship as shipping
    from elmo.io import OutputBusy

    dest, write, started, refused = tmp_path / "shipped", shipping._write_shipped, [], []

    def write_then_start_another(*args, **kwargs):
        sizes = write(*args, **kwargs)
        if not started:   # the first has written its files, not yet moved in
            started.append(True)
            try:
                ship(exported, dest, bilm_dtype="float16", softmax_dtype="float16")
            except OutputBusy as e:
                refused.append(str(e))
        return sizes
    monkeypatch.setattr(shipping, "_write_shipped", write_then_start_another)
    ship(exported, dest)
    assert len(refused) == 1 and f"{dest} is already being written by PID" in refused[0]
    meta = json.loads((dest / "metadata.json").read_text())
    assert meta["shipped"]["bilm_dtype"] == meta["shipped"]["softmax_dtype"] == "float32"
    with h5py.File(dest / "weights.hdf5", "r") as f:
        dtypes = set()
        f.visititems(lambda _, d: dtypes.add(d.dtype) if isinstance(d, h5py.Dataset) else None)
    assert np.dtype("float16") not in dtypes
    assert not (dest / "ship.lock").exists() and not (tmp_path / "shipped.lock").exists()


def test_a_killed_ships_staging_folder_is_removed_by_the_next(exported, tmp_path):
    """A ship killed while writing left its staging folder (``.DEST.*.shipping``, holding the
    written weights) beside DEST, under a random name no later run removed: one more per kill.
    Now it names its writer, and the next ship removes those of writers that have ended."""
    import subprocess
    import sys

    from elmo.io import _HOST

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    dest = tmp_path / "shipped"
    killed = tmp_path / f".shipped.{_HOST}-{ended.pid}-x1y2.shipping"
    killed.mkdir()
    (killed / "weights.hdf5").write_bytes(b"\0" * 1000)
    alive = tmp_path / ".shipped.otherhost-1-x1y2.shipping"   # (another host's writer may live)
    alive.mkdir()
    ship(exported, dest)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".shipped")) == [alive.name]


def test_a_full_disk_names_the_shipped_file_not_the_staging_folder(exported, tmp_path, monkeypatch):
    """The error named the staging folder's file (.DEST.RANDOM.shipping/weights.hdf5), a path
    that is gone when the user reads it; it names DEST/weights.hdf5 now, and nothing is left."""
    from elmo.io import OutputError
    from tests.conftest import fill_disk_on_open

    fill_disk_on_open(monkeypatch, 0)
    dest = tmp_path / "shipped"
    with pytest.raises(OutputError) as info:
        ship(exported, dest)
    assert str(info.value) == f"{dest / 'weights.hdf5'}: cannot write the weights: No space left on device"
    assert not any(p.name.startswith(".shipped") for p in tmp_path.iterdir()) and not dest.exists()


def test_precision_command_refuses_another_model_in_one_line(exported, tmp_path, capsys):
    """Comparing with a folder of another shape (same vocabulary) was a RuntimeError deep in
    load_state_dict, and a missing folder or another vocabulary a traceback: now each is one line."""
    from elmo.training.precision import main as precision_main
    held = str(exported.parent / "corpus" / "heldout.txt")
    vocab = Vocabulary.load(exported / "vocab.txt")
    wider = LanguageModel(ElmoOptions.from_dict(tiny_model_options(dim=24)), len(vocab), vocab.bos, vocab.eos, 0.0)
    export_model(wider, vocab, tmp_path / "wider")
    for candidate, says in ((tmp_path / "wider", "its lstm options are not those of"),
                            (tmp_path / "none", "options.json: missing")):
        assert precision_main([str(exported), str(candidate), held]) == 1
        err = capsys.readouterr().err
        assert err.startswith("python -m elmo.training.precision: error: ") and says in err
        assert err.count("\n") == 1


def test_a_ship_stopped_at_any_point_leaves_the_old_folder_or_the_new_one_whole(exported, tmp_path, monkeypatch):
    """The shipped files replaced DEST's one at a time: a ship killed between two of them (and
    a reader loading DEST meanwhile) found new weights beside the old metadata and vocabulary,
    a folder that loaded as a model that never existed. Now the new folder is written whole
    beside DEST and swapped in: stopped at any of its disk syncs, DEST is the old folder,
    unchanged and loadable, or the whole new one; a normal ship leaves exactly the new files
    (and the model card that was there), with nothing beside them."""
    import elmo
    import elmo.folder_swap
    import elmo.io

    model, vocab = load_language_model(exported)
    with torch.no_grad():
        model.softmax.bias.add_(1.0)
        model.bilm.token_encoder.projection.bias.add_(1.0)
    other = export_model(model, vocab, tmp_path / "other", metadata={"tokens": 7})
    dest = tmp_path / "shipped"
    ship(other, dest)
    (dest / "MODEL_CARD.md").write_text("the card\n", encoding="utf-8")
    old = {p.name: p.read_bytes() for p in dest.iterdir()}
    new_names = set(old)

    def is_new() -> bool:
        meta = json.loads((dest / "metadata.json").read_text())
        with h5py.File(dest / "softmax.hdf5", "r") as h5:
            half = h5["softmax/b"].dtype == np.float16
        return ({p.name for p in dest.iterdir()} == new_names and meta["tokens"] == 123 and half
                and meta["shipped"]["softmax_dtype"] == "float16"
                and (dest / "MODEL_CARD.md").read_text(encoding="utf-8") == "the card\n")

    fsync, stopped_at = elmo.io.fsync, []
    syncing = (elmo.io, elmo.folder_swap)   # (a file's writes and the folder's)

    def stop_at(n):
        calls = []

        def fsync_or_stop(path, folder=False):
            calls.append(path)
            if len(calls) == n:
                raise KeyboardInterrupt
            fsync(path, folder)
        return fsync_or_stop

    for n in range(1, 200):
        stop = stop_at(n)
        for module in syncing:
            monkeypatch.setattr(module, "fsync", stop)
        try:
            ship(exported, dest, softmax_dtype="float16")
        except KeyboardInterrupt:
            stopped_at.append(n)
        else:
            break
        finally:
            for module in syncing:
                monkeypatch.setattr(module, "fsync", fsync)
        if {p.name: p.read_bytes() for p in dest.iterdir()} != old:
            assert is_new(), f"stopped at disk sync {n}: {sorted(p.name for p in dest.iterdir())}"
            elmo.from_pretrained(dest)
            break
        elmo.from_pretrained(dest)   # the old one, whole
    assert len(stopped_at) > 3   # (the ship was stopped at several points before it was done)
    ship(exported, dest, softmax_dtype="float16")
    assert is_new()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "model", "other", "shipped"]


def test_shipping_writes_a_bundled_models_folder_that_other_writers_may_not(exported, tmp_path, monkeypatch):
    # every writer refuses a bundled model's folder (elmo.io.refuse_bundled); ship, the way a
    # maintainer writes elmo/resources/default, must still get through (here a stand-in folder)
    import elmo.io
    from elmo.io import OutputError, atomic_write_text

    bundled = tmp_path / "resources" / "default"
    bundled.mkdir(parents=True)
    (bundled / "MODEL_CARD.md").write_text("card\n")
    monkeypatch.setattr(elmo.io, "bundled_folders", lambda: {"default": bundled})
    with pytest.raises(OutputError, match="inside the folder of the bundled model 'default'"):
        atomic_write_text(bundled / "vocab.txt", "x\n")
    with pytest.raises(OutputError, match="inside the folder of the bundled model 'default'"):
        ship(exported, bundled / "inner")   # (only the bundled folder itself is shipped into)
    sizes = ship(exported, bundled)
    assert sorted(p.name for p in bundled.iterdir()) == sorted([*sizes, "MODEL_CARD.md"])
    assert _state(bundled)[1].words == _state(exported)[1].words
    with pytest.raises(OutputError, match="inside the folder of the bundled model 'default'"):
        atomic_write_text(bundled / "vocab.txt", "x\n")   # (the permission ended with the ship)


def test_the_scripts_take_a_quoted_tilde_as_the_home_folder(exported, tmp_path, monkeypatch, capsys):
    """`python -m elmo.training.ship "~/m" "~/s"` (quoted: no shell expanded it) made a folder named
    "~" in the working folder: the scripts apply the elmo command's rule (elmo.user_paths)."""
    from elmo.training.precision import main as precision_main
    from elmo.training.ship import main as ship_main
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(work)
    assert ship_main(["~/model", "~/shipped"]) == 0
    assert (tmp_path / "shipped" / "weights.hdf5").is_file()
    assert precision_main(["~/model", "~/shipped", "~/corpus/heldout.txt", "--out", "~/p.json"]) == 0
    assert json.loads((tmp_path / "p.json").read_text())["candidate"] == str(tmp_path / "shipped")
    capsys.readouterr()
    assert ship_main(["~/model", "~no-such-user-elmo/s"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m elmo.training.ship: error: ~no-such-user-elmo/s: no user") and err.count("\n") == 1
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_damaged_softmax_weight_is_refused_when_loaded_and_not_shipped(exported, tmp_path, dtype):
    """A bit flipped in softmax.hdf5's data loaded (perplexity, further training) and shipped
    into the bundled folder without a word. The export and the ship write each softmax
    dataset's CRC-32 beside it, and reading it back checks it."""
    from elmo import WeightFileError
    shipped = tmp_path / f"shipped-{dtype}"
    ship(exported, shipped, softmax_dtype=dtype)
    load_language_model(shipped)   # (as written: loads)
    for folder in (exported, shipped):
        # (the CRC-32s alone: the folder's SHA-256 record, checked first, is test_folder_checksums')
        meta = json.loads((folder / "metadata.json").read_text())
        del meta["files_sha256"]
        (folder / "metadata.json").write_text(json.dumps(meta))
        path = folder / "softmax.hdf5"
        with h5py.File(path, "r") as f:
            offset = f["softmax/W"].id.get_offset() + f["softmax/W"].dtype.itemsize * 5
        data = bytearray(path.read_bytes())
        data[offset] ^= 1
        path.write_bytes(bytes(data))
        with pytest.raises(WeightFileError, match=r"softmax.hdf5: dataset 'softmax/W' does not hold the values "
                                                  r"it was saved with"):
            load_language_model(folder)
    with pytest.raises(WeightFileError, match=r"softmax.hdf5: dataset 'softmax/W' does not hold the values"):
        ship(exported, tmp_path / "again", softmax_dtype=dtype)
    assert not (tmp_path / "again").exists()
