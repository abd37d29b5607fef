"""``embed_file`` and ``elmo embed``: layout, bad input, resuming, sharding, stateful replay."""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import torch
import pytest

from elmo import Embedder, batch_to_ids, embed_file, load_original
from elmo.cli import main as cli_main
from elmo.embedding import InputError, SettingsMismatch
from elmo.embedding.output import SegmentWriter, parts_dir, segment_path
from tests.conftest import ALLENNLP, random_bilm
from tests.test_embedding import random_sentences

ROOT = Path(__file__).resolve().parent.parent


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read_all(path):
    """{name: array or JSON object} and the root attributes of an output file."""
    with h5py.File(path, "r") as f:
        data = {}
        f.visititems(lambda name, obj: data.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
        return data, dict(f.attrs)


def assert_same_datasets(a, b, exact=True):
    da, _ = read_all(a)
    db, _ = read_all(b)
    assert sorted(da) == sorted(db)
    for name in da:
        if name == "sentence_to_index":
            assert json.loads(da[name][0]) == json.loads(db[name][0])
        elif exact:
            np.testing.assert_array_equal(da[name], db[name], err_msg=name)
        else:
            np.testing.assert_allclose(da[name], db[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.fixture
def bilm():
    return random_bilm(seed=11)


@pytest.fixture
def lines():
    return [" ".join(s) for s in random_sentences(30, seed=12)]


# ---------------------------------------------------------------------- layout
def original_layout_file(path, sentences, arrays):
    """The file the original command writes for these arrays, written the way it does."""
    with h5py.File(path, "w") as f:
        index = {}
        for i, (sentence, array) in enumerate(zip(sentences, arrays)):
            index[sentence] = str(i)
            f.create_dataset(str(i), array.shape, dtype="float32", data=array)
        ds = f.create_dataset("sentence_to_index", (1,), dtype=h5py.special_dtype(vlen=str))
        ds[0] = json.dumps(index)


def test_layout_matches_the_original_command(tmp_path, bilm, lines):
    lines = lines[:8] + [lines[2]]   # a repeated sentence maps to its last line, as in the original
    inp = write_lines(tmp_path / "in.txt", [" " + lines[0] + " \r"] + lines[1:])
    out = embed_file(inp, tmp_path / "out.hdf5", bilm, batch_size=3, segment_lines=4)
    sentences = [line.strip() for line in lines]
    arrays = Embedder(bilm).embed_sentences([s.split() for s in sentences])
    original_layout_file(tmp_path / "reference.hdf5", sentences, arrays)
    with h5py.File(out, "r") as got, h5py.File(tmp_path / "reference.hdf5", "r") as want:
        assert sorted(got.keys()) == sorted(want.keys())
        for name in want:
            assert got[name].shape == want[name].shape
            assert got[name].dtype == want[name].dtype
            if name != "sentence_to_index":
                np.testing.assert_allclose(got[name][()], want[name][()], rtol=1e-5, atol=1e-6)
        assert h5py.check_string_dtype(got["sentence_to_index"].dtype).encoding == "utf-8"
        assert json.loads(got["sentence_to_index"][0]) == json.loads(want["sentence_to_index"][0])
        assert json.loads(got["sentence_to_index"][0])[sentences[2]] == "8"
        assert json.loads(got.attrs["model_config"]) == bilm.options.to_dict()
        assert got.attrs["stateful"] == False  # noqa: E712 (numpy bool)
        assert "command_line" in got.attrs and got.attrs["layers"] == "all"
    assert not parts_dir(out).exists()


def test_average_top_and_float16_files(tmp_path, bilm, lines):
    inp = write_lines(tmp_path / "in.txt", lines[:6])
    full, _ = read_all(embed_file(inp, tmp_path / "all.hdf5", bilm))
    average, _ = read_all(embed_file(inp, tmp_path / "avg.hdf5", bilm, layers="average"))
    top, _ = read_all(embed_file(inp, tmp_path / "top.hdf5", bilm, layers="top", dtype="float16"))
    for i in range(6):
        np.testing.assert_allclose(average[str(i)], full[str(i)].mean(axis=0), rtol=1e-6, atol=1e-6)
        assert top[str(i)].dtype == np.float16
        np.testing.assert_allclose(top[str(i)], full[str(i)][-1], rtol=1e-3, atol=1e-3)
    assert (tmp_path / "top.hdf5").stat().st_size < 0.6 * (tmp_path / "avg.hdf5").stat().st_size + 4096


def test_sentence_keys_and_forget_sentences(tmp_path, bilm):
    inp = write_lines(tmp_path / "in.txt", ["the bank .", "a river bank", "and/or the water"])
    data, _ = read_all(embed_file(inp, tmp_path / "keys.hdf5", bilm, sentence_keys=True))
    assert sorted(data) == sorted(["the bank .", "a river bank", "and/or the water"])
    assert data["a river bank"].shape == (3, 3, bilm.output_dim)
    with h5py.File(tmp_path / "keys.hdf5", "r") as f:
        assert f["and/or the water"].shape == (3, 3, bilm.output_dim)
    data, _ = read_all(embed_file(inp, tmp_path / "forget.hdf5", bilm, forget_sentences=True))
    assert sorted(data) == ["0", "1", "2"]
    dup = write_lines(tmp_path / "dup.txt", ["the bank .", "x", "the bank ."])
    with pytest.raises(InputError, match="line 3 repeats line 1"):
        embed_file(dup, tmp_path / "dup.hdf5", bilm, sentence_keys=True)
    for lines, message in [(["and/or", "x", "and"], "line 3 names the same HDF5 path as line 1"),
                           (["x", "."], "line 2: '.' cannot name"), (["x", ""], "line 2 is empty"),
                           # (these two were called "empty" and a repeat of line 1)
                           (["x", "/"], "line 2: '/' names no HDF5 dataset \\(only '/'\\)"),
                           (["b/", "b"], "line 2 names the same HDF5 path as line 1"),
                           # HDF5 ends a name at NUL: "a\0b" was stored as "a", and a second
                           # such line failed the merge, after every vector was computed (no
                           # text holds a NUL: it is refused with or without sentence keys)
                           (["a\0b x", "a\0c y"], "line 1: a NUL byte \\(0x00\\) at byte offset 1")]:
        with pytest.raises(InputError, match=message):
            embed_file(write_lines(tmp_path / "bad.txt", lines), tmp_path / "bad.hdf5", bilm, sentence_keys=True)


# ---------------------------------------------------------------------- bad input
def test_empty_long_and_broken_lines(tmp_path, bilm):
    long_line = " ".join(["abc"] * 11_000)       # 43,999 characters, 11,000 tokens
    one_token = "x" * 44_000                      # one 44,000-character token
    inp = tmp_path / "in.txt"
    inp.write_bytes(b"the bank\n\n   \n" + long_line.encode() + b"\n" + one_token.encode() + b"\n")
    data, _ = read_all(embed_file(inp, tmp_path / "out.hdf5", bilm, max_tokens=64, overlap=16))
    dim = bilm.output_dim
    assert data["1"].shape == (3, 0, dim) and data["2"].shape == (3, 0, dim)
    assert data["3"].shape == (3, 11_000, dim) and np.isfinite(data["3"]).all()
    assert data["4"].shape == (3, 1, dim)
    # bounded memory: no batch row is longer than the window
    pieces = Embedder(bilm, max_tokens=64, overlap=16).plan([long_line.split()])
    assert max(p.n_tokens for batch in pieces for p in batch) == 64

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nbroken \xff\xfe here\nfine\n")
    # the offset in the file, from 0, as every message of the package gives it (it was 1-based in the line)
    with pytest.raises(InputError, match=r"bad.txt: line 2: byte 0xff at byte offset 17 is not valid UTF-8"):
        embed_file(bad, tmp_path / "bad.hdf5", bilm)
    assert not (tmp_path / "bad.hdf5").exists()
    data, _ = read_all(embed_file(bad, tmp_path / "bad.hdf5", bilm, errors="replace"))
    assert data["1"].shape == (3, 3, dim)
    assert "broken \ufffd\ufffd here" in json.loads(data["sentence_to_index"][0])


def test_a_byte_order_mark_opening_the_file_is_no_part_of_the_first_word(tmp_path, bilm):
    # as Windows editors save UTF-8; str.strip() keeps U+FEFF, so it stayed on "The" and
    # changed that word's vector without a word of warning
    plain = write_lines(tmp_path / "plain.txt", ["The bank closed .", "Hi"])
    marked = tmp_path / "marked.txt"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert_same_datasets(embed_file(plain, tmp_path / "plain.hdf5", bilm),
                         embed_file(marked, tmp_path / "marked.hdf5", bilm))
    data, _ = read_all(tmp_path / "marked.hdf5")
    assert json.loads(data["sentence_to_index"][0]) == {"The bank closed .": "0", "Hi": "1"}


def test_cli_names_its_spelling_of_allennlp_elmo_options(tmp_path, capsys):
    """AllenNLP's `elmo IN OUT --top` was only 'unrecognized arguments: --top'."""
    inp = write_lines(tmp_path / "in.txt", ["a b"])
    for given, spelled in ((["--top"], "--layers top"), (["--all"], "--layers all"),
                           (["--average"], "--layers average"),
                           (["--use-sentence-keys"], "--sentence-keys"),
                           (["--cuda-device", "0"], "--device cuda:N"),
                           (["--weight-file", "w.hdf5"], "--model FOLDER")):
        with pytest.raises(SystemExit) as stop:
            cli_main(["embed", str(inp), str(tmp_path / "o.hdf5"), "--model", "fixture", *given])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert f"{given[0]} is an option of AllenNLP's elmo command; here it is {spelled}" in err
    assert not (tmp_path / "o.hdf5").exists()


def test_cli_reports_bad_input_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xc3\x28\n")
    assert cli_main(["embed", str(bad), str(tmp_path / "o.hdf5"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "line 2" in err and "UTF-8" in err and "Traceback" not in err


def test_a_wait_timeout_that_never_ends_is_refused(tmp_path, bilm):
    inp = write_lines(tmp_path / "in.txt", ["a b"])
    for timeout in (float("nan"), 0.0, -5.0):  # NaN compares false: it would wait forever
        with pytest.raises(ValueError, match="wait_timeout must be a positive number"):
            embed_file(inp, tmp_path / "out.hdf5", bilm, wait_timeout=timeout)


def test_embed_file_gives_the_model_back_its_own_token_cache(tmp_path):
    """A model's token cache (Elmo's vocab_to_cache over it) was replaced by the file's
    frequent words, then cleared at the end: the caller's Elmo lost it without a word."""
    from elmo import Elmo, batch_to_ids
    bilm = random_bilm()
    elmo = Elmo(module=bilm, dropout=0.0, vocab_to_cache=["river", "bank"])
    encoder = bilm.token_encoder
    before = encoder.token_cache_size
    inp = write_lines(tmp_path / "in.txt", ["a b c", "a b c d", "a b"])
    embed_file(inp, tmp_path / "out.hdf5", bilm, cache_min_count=2)
    assert encoder.token_cache_size == before == 4   # (the two words and <S>, </S>)
    ids = batch_to_ids([["river", "bank"]])
    cached = elmo(ids)["elmo_representations"][0]
    encoder.clear_token_cache()
    assert torch.allclose(cached, elmo(ids)["elmo_representations"][0], atol=1e-6)
    # a model without one is left without one
    embed_file(inp, tmp_path / "again.hdf5", bilm, cache_min_count=2)
    assert encoder.token_cache_size == 0


def test_embed_file_gives_a_stateful_model_back_its_own_carried_state(tmp_path, lines):
    """A stateful model passed in kept the file's last LSTM state: the caller's next call was
    conditioned on the file's text instead of on what the caller had run before."""
    bilm = random_bilm()
    bilm.stateful = True
    ids = batch_to_ids([["the", "river", "bank"], ["a", "b"]])
    with torch.no_grad():
        bilm(ids)                                   # the caller's own carried state
    before = [(c.clone(), h.clone()) for c, h in bilm.get_states()]
    inp = write_lines(tmp_path / "in.txt", lines)
    embed_file(inp, tmp_path / "out.hdf5", bilm, batch_size=4, segment_lines=8)
    after = bilm.get_states()
    assert after is not None and len(after) == len(before)
    for (c0, h0), (c1, h1) in zip(before, after):
        assert torch.equal(c0, c1) and torch.equal(h0, h1)
    # a stateless model run statefully for the file is left stateless, with no state
    plain = random_bilm()
    embed_file(inp, tmp_path / "again.hdf5", plain, stateful=True, batch_size=4)
    assert plain.stateful is False and plain.get_states() is None


def test_token_cache_settings_below_one_are_refused_unless_the_cache_is_off(tmp_path, bilm):
    """A negative --cache-sample read no line and cached nothing, without a word."""
    inp = write_lines(tmp_path / "in.txt", ["a b", "a b"])
    for name in ("cache_min_count", "cache_max_words", "cache_sample_lines"):
        with pytest.raises(ValueError, match=f"{name} must be at least 1, got -1"):
            embed_file(inp, tmp_path / "out.hdf5", bilm, **{name: -1})
    assert embed_file(inp, tmp_path / "out.hdf5", bilm, token_cache=False, cache_sample_lines=-1).exists()


def test_tokenize_option(tmp_path, bilm):
    inp = write_lines(tmp_path / "in.txt", ["I don't know, John's (maybe)."])
    data, _ = read_all(embed_file(inp, tmp_path / "out.hdf5", bilm, tokenize=True))
    assert data["0"].shape[1] == 11   # I do n't know , John 's ( maybe ) .


# ---------------------------------------------------------------------- resuming
def test_an_interrupted_run_resumes_to_the_same_file(tmp_path, bilm, lines, monkeypatch):
    inp = write_lines(tmp_path / "in.txt", lines)
    reference = embed_file(inp, tmp_path / "reference.hdf5", bilm, batch_size=4, segment_lines=4)
    out = tmp_path / "out.hdf5"
    # Crash at a random batch: the segments finished before it stay, the one in progress goes.
    from elmo.embedding import embedder as embedder_module
    real_run_batch, calls = embedder_module.Embedder._run_batch, []
    crash_at = random.Random(0).randrange(2, 8)

    def crashing(self, *args):
        calls.append(1)
        if len(calls) == crash_at:
            raise KeyboardInterrupt
        return real_run_batch(self, *args)

    monkeypatch.setattr(embedder_module.Embedder, "_run_batch", crashing)
    with pytest.raises(KeyboardInterrupt):
        embed_file(inp, out, bilm, batch_size=4, segment_lines=4)
    monkeypatch.setattr(embedder_module.Embedder, "_run_batch", real_run_batch)
    done = sorted(parts_dir(out).glob("segment-*.hdf5"))
    assert not out.exists() and 0 < len(done) < 8
    assert not list(parts_dir(out).glob(".*tmp*"))
    # a half-written segment file (as after a kill during a rename-less copy) is redone
    segment_path(parts_dir(out), 7).write_bytes(b"\x89HDF\r\n garbage")
    before = {p: p.stat().st_mtime_ns for p in done}
    embed_file(inp, out, bilm, batch_size=4, segment_lines=4)
    assert_same_datasets(out, reference)
    assert not parts_dir(out).exists()
    assert all(not p.exists() for p in before)  # merged and cleaned up


def test_a_finished_output_run_again_removes_the_merge_file_a_killed_overwrite_left(tmp_path, bilm, lines):
    """A --overwrite run killed while merging leaves its merged temporary beside the previous
    OUTPUT; the same command without --overwrite finds OUTPUT complete and returned at once,
    leaving that file (as large as the output) behind for good."""
    inp = write_lines(tmp_path / "in.txt", lines[:5])
    out = embed_file(inp, tmp_path / "out.hdf5", bilm)
    left = tmp_path / ".out.hdf5.tmp-999999999"   # the merge file of a dead process
    left.write_bytes(b"\x89HDF\r\n half a merge")
    parts_dir(out).mkdir()
    assert embed_file(inp, out, bilm) == out
    assert not left.exists() and not parts_dir(out).exists()


def test_an_interrupted_overwrite_run_resumes_and_a_finished_one_starts_again(tmp_path, bilm, lines, monkeypatch):
    """The same --overwrite command run again after a stop deleted the segments that run had
    finished and made them again; now it resumes them. A finished --overwrite run leaves no
    mark, so the next one starts afresh, and a stale earlier segment is never kept."""
    inp = write_lines(tmp_path / "in.txt", lines)
    reference = embed_file(inp, tmp_path / "reference.hdf5", bilm, layers="top", batch_size=4, segment_lines=4)
    out = embed_file(inp, tmp_path / "out.hdf5", bilm, batch_size=4, segment_lines=4)   # all layers
    parts = parts_dir(out)
    parts.mkdir()
    stale = segment_path(parts, 5)                         # left by an earlier run: must not be kept
    stale.write_bytes(b"\x89HDF\r\n stale")
    from elmo.embedding import embedder as embedder_module
    real_run_batch, calls = embedder_module.Embedder._run_batch, []

    def crashing(self, *args):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real_run_batch(self, *args)

    monkeypatch.setattr(embedder_module.Embedder, "_run_batch", crashing)
    with pytest.raises(KeyboardInterrupt):
        embed_file(inp, out, bilm, layers="top", batch_size=4, segment_lines=4, overwrite=True)
    done = {p: p.stat().st_mtime_ns for p in parts.glob("segment-*.hdf5")}
    assert 0 < len(done) < 8 and stale not in done
    monkeypatch.setattr(embedder_module.Embedder, "_run_batch", real_run_batch)
    made = []
    real_commit = SegmentWriter.commit
    monkeypatch.setattr(SegmentWriter, "commit", lambda self: made.append(1) or real_commit(self))
    embed_file(inp, out, bilm, layers="top", batch_size=4, segment_lines=4, overwrite=True)
    assert len(made) == 8 - len(done)                      # the finished segments were resumed
    assert_same_datasets(out, reference)
    assert not parts.exists()
    made.clear()
    embed_file(inp, out, bilm, layers="top", batch_size=4, segment_lines=4, overwrite=True)
    assert len(made) == 8                                  # a finished --overwrite run: afresh
    assert_same_datasets(out, reference)


def test_resuming_with_other_settings_is_refused(tmp_path, bilm, lines):
    inp = write_lines(tmp_path / "in.txt", lines[:5])
    out = embed_file(inp, tmp_path / "out.hdf5", bilm)
    assert embed_file(inp, out, bilm) == out   # same command: already complete
    with pytest.raises(SettingsMismatch, match="differs in: layers"):
        embed_file(inp, out, bilm, layers="top")
    embed_file(inp, out, bilm, layers="top", overwrite=True)
    assert read_all(out)[0]["0"].ndim == 2
    foreign = tmp_path / "foreign.hdf5"
    foreign.write_text("not hdf5")
    with pytest.raises(SettingsMismatch, match="not an HDF5 file"):
        embed_file(inp, foreign, bilm)


def test_a_stateful_run_resumes_whatever_its_sorting_and_an_older_record_still_resumes(tmp_path, bilm, lines):
    """A stateful run keeps its batches in input order whatever --no-sort says, yet it recorded
    sort_by_length, so resuming it with --no-sort was refused for nothing. Now it records only
    what changes the vectors; a record written before that (with sort_by_length and errors)
    still resumes with the same command, and a setting that changes bits is still refused."""
    inp = write_lines(tmp_path / "in.txt", lines)
    kw = dict(stateful=True, batch_size=4, segment_lines=4)
    reference = embed_file(inp, tmp_path / "reference.hdf5", bilm, sort_by_length=False, **kw)
    assert_same_datasets(embed_file(inp, tmp_path / "sorted.hdf5", bilm, **kw), reference)   # ignored
    out = tmp_path / "out.hdf5"
    assert embed_file(inp, out, bilm, rank=1, world_size=2, **kw) is None   # sorted
    assert "sort_by_length" not in json.loads(h5py.File(segment_path(parts_dir(out), 1), "r").attrs["settings"])
    with h5py.File(segment_path(parts_dir(out), 3), "r+") as f:   # as written before the change
        f.attrs["settings"] = json.dumps(dict(json.loads(f.attrs["settings"]), sort_by_length=True,
                                              errors="strict"), sort_keys=True)
    with pytest.raises(SettingsMismatch, match=r"differs in: token_cache\)"):
        embed_file(inp, out, bilm, token_cache=False, rank=1, world_size=2, **kw)
    assert embed_file(inp, out, bilm, sort_by_length=False, rank=0, world_size=2, **kw) == out
    assert_same_datasets(out, reference)
    # a stateless run does sort: there the setting counts
    embed_file(inp, out, bilm, batch_size=4, segment_lines=4, overwrite=True)
    with pytest.raises(SettingsMismatch, match=r"differs in: sort_by_length\)"):
        embed_file(inp, out, bilm, batch_size=4, segment_lines=4, sort_by_length=False)


def test_overwrite_rank0_does_not_merge_what_a_slower_rank_is_about_to_delete(tmp_path, bilm, lines, monkeypatch):
    """A killed run left rank 1's segments, with the same settings. Under --overwrite, rank 0
    took them as done and merged before rank 1 had started: rank 1 then deleted them, made
    OUTPUT.parts again and left it behind with its new segments. Now rank 0 waits for rank 1's
    mark (its old segments deleted) before it counts that rank's segments."""
    inp = write_lines(tmp_path / "in.txt", lines)
    out, kw = tmp_path / "out.hdf5", dict(segment_lines=7, world_size=2)
    assert embed_file(inp, out, bilm, rank=1, **kw) is None          # the killed run's rank 1
    from elmo.embedding import run as run_module
    arrived = []

    def rank1_starts(seconds):   # rank 0 waits: the slow rank 1 starts now
        if not arrived:
            arrived.append(embed_file(inp, out, bilm, rank=1, overwrite=True, **kw))
        time.sleep(min(seconds, 0.01))

    monkeypatch.setattr(run_module, "time", type("Time", (), dict(
        monotonic=staticmethod(time.monotonic), perf_counter=staticmethod(time.perf_counter),
        sleep=staticmethod(rank1_starts))))
    assert embed_file(inp, out, bilm, rank=0, overwrite=True, wait_timeout=30, **kw) == out
    if not arrived:   # rank 0 merged without waiting: rank 1 starts only now
        assert embed_file(inp, out, bilm, rank=1, overwrite=True, **kw) is None
    assert not parts_dir(out).exists()
    assert arrived == [None]
    assert_same_datasets(out, embed_file(inp, tmp_path / "one.hdf5", bilm, segment_lines=7))


def _rank1_runs_while_rank0_waits(monkeypatch, inp, out, bilm, **kw):
    """While rank 0 waits for the other rank's segments, rank 1 runs once with ``kw``; returns
    the list that receives what it returned."""
    from elmo.embedding import run as run_module
    arrived = []

    def rank1_starts(seconds):
        if not arrived:
            arrived.append(embed_file(inp, out, bilm, rank=1, world_size=2, segment_lines=7, **kw))
        time.sleep(min(seconds, 0.01))

    monkeypatch.setattr(run_module, "time", type("Time", (), dict(
        monotonic=staticmethod(time.monotonic), perf_counter=staticmethod(time.perf_counter),
        sleep=staticmethod(rank1_starts))))
    return arrived


@pytest.mark.parametrize("earlier", [False, True])
def test_overwrite_rank0_refuses_at_once_a_rank_started_with_other_settings(tmp_path, bilm, lines, monkeypatch,
                                                                            earlier):
    """Under --overwrite, rank 1 started with another --batch-size marked its share with its
    settings and wrote its segments; rank 0, waiting for a mark of its own settings, waited its
    whole --wait-timeout (30 minutes by default), then asked whether a rank had stopped. Now the
    mark, written since rank 0 started, is refused at once, naming the settings that differ.
    (``earlier``: rank 1's mark of those settings was already there, a killed run's that rank 1
    resumes; it writes the mark again, so rank 0 tells it from a stale one.)"""
    inp = write_lines(tmp_path / "in.txt", lines)
    out = tmp_path / "sharded.hdf5"
    if earlier:
        assert embed_file(inp, out, bilm, segment_lines=7, rank=1, world_size=2, overwrite=True, batch_size=3) is None
    arrived = _rank1_runs_while_rank0_waits(monkeypatch, inp, out, bilm, overwrite=True, batch_size=3)
    started = time.monotonic()
    with pytest.raises(SettingsMismatch, match=r"overwrite-rank-1-of-2\.json: rank 1 of this run was started with "
                                               r"other settings than rank 0 \(it differs in: batch_size\)"):
        embed_file(inp, out, bilm, segment_lines=7, rank=0, world_size=2, overwrite=True, wait_timeout=5)
    assert arrived == [None] and time.monotonic() - started < 4
    assert not out.exists()


def test_overwrite_rank0_waits_for_a_rank_whose_mark_of_other_settings_is_a_killed_runs(
        tmp_path, bilm, lines, monkeypatch):
    """A killed --overwrite run with another --batch-size left rank 1's mark and segments. A
    new run's rank 0 does not take that mark for its own rank 1's: it waits until rank 1
    starts, replaces them and finishes, then merges."""
    inp = write_lines(tmp_path / "in.txt", lines)
    out = tmp_path / "sharded.hdf5"
    assert embed_file(inp, out, bilm, segment_lines=7, rank=1, world_size=2, overwrite=True, batch_size=3) is None
    arrived = _rank1_runs_while_rank0_waits(monkeypatch, inp, out, bilm, overwrite=True)
    assert embed_file(inp, out, bilm, segment_lines=7, rank=0, world_size=2, overwrite=True, wait_timeout=30) == out
    assert arrived == [None] and not parts_dir(out).exists()
    assert_same_datasets(out, embed_file(inp, tmp_path / "one.hdf5", bilm, segment_lines=7))


def _run_cli(args, **kwargs):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-m", "elmo", "embed", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def _wait_for_segments(proc, out, count: int) -> None:
    """Return once ``count`` segments of ``out`` are complete, with ``proc`` still running."""
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if len(list(parts_dir(out).glob("segment-*.hdf5"))) >= count:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be stopped; use a larger input"


def test_sigterm_is_one_line_exit_143_no_temporary_and_the_same_command_resumes(tmp_path):
    """SIGTERM (a scheduler, kill) ended the process with no word, its segment's temporary
    file left behind."""
    lines = [" ".join(s) for s in random_sentences(1200, seed=14, max_len=25)]
    inp = write_lines(tmp_path / "in.txt", lines)
    common = ["--model", "fixture", "--segment-lines", "40", "--batch-size", "16", "--quiet"]
    out = tmp_path / "out.hdf5"
    proc = _run_cli([str(inp), str(out), *common])
    _wait_for_segments(proc, out, 3)
    proc.send_signal(signal.SIGTERM)
    status, err = proc.wait(timeout=60), proc.stderr.read().decode()
    assert (status, err) == (143, "elmo embed: stopped by SIGTERM\n")
    assert not out.exists()
    assert not [p.name for p in tmp_path.rglob("*") if ".tmp" in p.name]
    resumed = _run_cli([str(inp), str(out), *common])
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()
    with h5py.File(out, "r") as f:
        assert len(f) == len(lines) + 1                     # every line, and sentence_to_index


def test_killed_process_resumes_to_the_same_file(tmp_path):
    """SIGKILL at a random moment of a real run, then the same command again."""
    lines = [" ".join(s) for s in random_sentences(1200, seed=13, max_len=25)]
    inp = write_lines(tmp_path / "in.txt", lines)
    common = ["--model", "fixture", "--segment-lines", "40", "--batch-size", "16", "--quiet"]
    out = tmp_path / "out.hdf5"
    proc = _run_cli([str(inp), str(out), *common])
    _wait_for_segments(proc, out, random.Random(1).randrange(2, 20))   # kill once these are complete
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    done = list(parts_dir(out).glob("segment-*.hdf5"))
    assert 0 < len(done) < 30
    for path in done:   # every segment on disk is complete and readable
        with h5py.File(path, "r") as f:
            assert f.attrs["complete"]
    resumed = _run_cli([str(inp), str(out), *common])
    try:   # the run never stopped, in this process meanwhile (the same command line)
        assert cli_main(["embed", str(inp), str(tmp_path / "fresh.hdf5"), *common]) == 0
        assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()
    finally:
        resumed.kill()   # (a no-op once it has ended)
        resumed.wait()
    assert_same_datasets(out, tmp_path / "fresh.hdf5")


# ---------------------------------------------------------------------- sharding
def test_two_ranks_equal_one_process(tmp_path, bilm, lines):
    inp = write_lines(tmp_path / "in.txt", lines)
    single = embed_file(inp, tmp_path / "single.hdf5", bilm, segment_lines=7)
    out = tmp_path / "sharded.hdf5"
    assert embed_file(inp, out, bilm, segment_lines=7, rank=1, world_size=2) is None
    assert sorted(p.name for p in parts_dir(out).glob("segment-*")) == [
        "segment-00000001.hdf5", "segment-00000003.hdf5"]
    assert embed_file(inp, out, bilm, segment_lines=7, rank=0, world_size=2) == out
    assert_same_datasets(out, single)


def test_rank0_gives_up_when_another_rank_never_finishes(tmp_path, bilm, lines):
    """Rank 1 never runs (as if it died): rank 0 stops with a clear error instead of waiting
    forever, keeps its own segments, and a later run with rank 1 completes the file."""
    inp = write_lines(tmp_path / "in.txt", lines)
    out = tmp_path / "sharded.hdf5"
    with pytest.raises(TimeoutError, match="still missing 2"):
        embed_file(inp, out, bilm, segment_lines=7, rank=0, world_size=2, wait_timeout=0.5)
    assert not out.exists()
    assert len(list(parts_dir(out).glob("segment-*"))) == 3          # segments 0, 2 and 4
    assert embed_file(inp, out, bilm, segment_lines=7, rank=1, world_size=2) is None
    assert embed_file(inp, out, bilm, segment_lines=7, rank=0, world_size=2) == out
    assert_same_datasets(out, embed_file(inp, tmp_path / "one.hdf5", bilm, segment_lines=7))


@pytest.mark.skipif(shutil.which("torchrun", path=str(Path(sys.executable).parent)) is None,
                    reason="torchrun not installed")
def test_torchrun_two_ranks_on_cpu_equal_one_process(tmp_path):
    lines = [" ".join(s) for s in random_sentences(60, seed=14)]
    inp = write_lines(tmp_path / "in.txt", lines)
    args = [str(inp), "--model", "fixture", "--segment-lines", "8", "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    torchrun = str(Path(sys.executable).parent / "torchrun")
    one = _run_cli([args[0], str(tmp_path / "one.hdf5"), *args[1:]])   # alongside: this process only waits
    done = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", "-m", "elmo", "embed",
                           args[0], str(tmp_path / "two.hdf5"), *args[1:]],
                          cwd=ROOT, env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert one.wait(timeout=120) == 0, one.stderr.read().decode()
    assert_same_datasets(tmp_path / "two.hdf5", tmp_path / "one.hdf5")


def test_a_bfloat16_model_embeds_a_file(tmp_path, lines):
    """Embedder runs a bfloat16 model, but embed_file stopped at the model's digest with numpy's
    "Got unsupported ScalarType BFloat16" before computing anything."""
    import torch
    from elmo.model_digest import model_digest

    bilm = random_bilm(seed=11).to(torch.bfloat16)
    inp = write_lines(tmp_path / "in.txt", lines)
    # one segment, the cache off and the batch size of the Embedder below: the same batches
    # through the same kernels, so the same bits
    data, _ = read_all(embed_file(inp, tmp_path / "out.hdf5", bilm, batch_size=8, token_cache=False))
    want = Embedder(bilm, batch_size=8).embed_sentences([line.split() for line in lines])
    for i, array in enumerate(want):
        np.testing.assert_array_equal(data[str(i)], array)
    # it names the bfloat16 weights: not its float32 copy, whose vectors differ
    assert model_digest(bilm) != model_digest(random_bilm(seed=11))
    assert model_digest(bilm) != model_digest(random_bilm(seed=11).to(torch.bfloat16).float())


def test_the_output_names_its_precision_and_another_precision_does_not_resume_it(tmp_path, lines):
    """int8 recurrent weights and autocast change the vectors, but not the weights the model
    digest hashes: an int8 run, or one under bfloat16 autocast, took a float32 run's finished
    output (or its segments) as its own, and no output said which precision made it."""
    import copy

    from elmo.modules.lstm_inference import int8_supported

    bilm = random_bilm(seed=11)
    inp = write_lines(tmp_path / "in.txt", lines)
    kw = dict(batch_size=4, segment_lines=4)
    out = embed_file(inp, tmp_path / "out.hdf5", bilm, **kw)
    plain = read_all(out)[1]
    assert plain["precision"] == "float32" and "precision" not in json.loads(plain["settings"])
    low = [("bfloat16 autocast", bilm, torch.autocast("cpu", dtype=torch.bfloat16))]
    if int8_supported(torch.device("cpu")):
        int8 = copy.deepcopy(bilm)
        int8.lstm.use_int8()
        low.append(("int8 recurrent weights", int8, torch.no_grad()))
    for name, model, mode in low:
        with mode:
            with pytest.raises(SettingsMismatch, match=r"differs in: precision\)"):
                embed_file(inp, out, model, **kw)
            other = tmp_path / f"{name}.hdf5"
            assert embed_file(inp, other, model, rank=1, world_size=2, **kw) is None   # segments only
        with pytest.raises(SettingsMismatch, match=r"differs in: precision\)"):
            embed_file(inp, other, bilm, rank=0, world_size=2, **kw)   # not mixed with float32's
        with mode:   # (that float32 rank wrote its own segments before it met the other's)
            attrs = read_all(embed_file(inp, other, model, overwrite=True, **kw))[1]
        assert attrs["precision"] == f"float32, {name}" == json.loads(attrs["settings"])["precision"]
    bf16 = read_all(embed_file(inp, tmp_path / "bf16.hdf5", copy.deepcopy(bilm).to(torch.bfloat16), **kw))[1]
    assert bf16["precision"] == "bfloat16"


def test_the_model_digest_sees_a_change_of_one_weight():
    """The digest hashed every 97th value of each tensor: a model that differed from another in
    a few weights (one character's embedding) resumed the other's segments as its own."""
    from elmo.model_digest import model_digest

    bilm = random_bilm(seed=3)
    before = model_digest(bilm)
    weight = bilm.token_encoder.char_embedding.weight
    with torch.no_grad():
        weight[5, 3] += 1.0   # flat index 23 (4 columns), between the samples at 0 and 97
    assert model_digest(bilm) != before


# ---------------------------------------------------------------------- stateful
def test_stateful_file_reproduces_the_original_carried_state(tmp_path):
    """The reference activations were made by a stateful model fed batch i = [list0[i], list1[i],
    list2[i]]: the same lines, interleaved, in batches of 3 in file order."""
    lists = json.loads((ALLENNLP / "sentences.json").read_text())
    lines = [lists[k][i].strip() for i in range(10) for k in range(3)]
    inp = write_lines(tmp_path / "in.txt", lines)
    bilm = load_original(ALLENNLP / "options.json", ALLENNLP / "lm_weights.hdf5")
    out = embed_file(inp, tmp_path / "out.hdf5", bilm, stateful=True, batch_size=3)
    data, attrs = read_all(out)
    assert attrs["stateful"] == True  # noqa: E712
    p = bilm.output_dim // 2
    for i in range(10):
        for k in range(3):
            with h5py.File(ALLENNLP / f"lm_embeddings_{k}.hdf5", "r") as f:
                want = f[str(i)][()]
            top = data[str(3 * i + k)][-1]
            got = np.stack([top[:, :p], top[:, p:]])
            assert np.allclose(got, want, atol=1e-6), (i, k)
    # and the default, stateless file does not match it (the comparison can fail)
    data, attrs = read_all(embed_file(inp, tmp_path / "stateless.hdf5", bilm, batch_size=3))
    assert attrs["stateful"] == False  # noqa: E712
    top = data[str(3 * 9)][-1]
    with h5py.File(ALLENNLP / "lm_embeddings_0.hdf5", "r") as f:
        assert not np.allclose(np.stack([top[:, :p], top[:, p:]]), f["9"][()], atol=1e-6)


def test_cli_help_and_run(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli_main(["embed", "--help"])
    text = capsys.readouterr().out
    for option in ("--layers", "--dtype", "--sentence-keys", "--stateful", "--max-tokens",
                   "--errors", "--tokenize", "--overwrite", "torchrun"):
        assert option in text
    inp = write_lines(tmp_path / "in.txt", ["the bank closed .", ""])
    assert cli_main(["embed", str(inp), str(tmp_path / "o.hdf5"), "--model", "fixture",
                     "--layers", "mix:0.2,0.3,0.5", "--gamma", "2", "--quiet"]) == 0
    data, attrs = read_all(tmp_path / "o.hdf5")
    assert data["0"].shape == (4, 32) and data["1"].shape == (0, 32)
    assert attrs["command_line"].startswith("elmo embed") and "mix:0.2,0.3,0.5" in attrs["command_line"]


def _old_digest(bilm, stride=97):
    """model_digest as embed computed it before it hashed every weight (every 97th value), and
    (stride 1) before the package's one digest (elmo.model_digest), which hashes dtypes too."""
    import hashlib
    h = hashlib.blake2b(bilm.options.to_json().encode(), digest_size=16)
    for name, tensor in sorted(bilm.state_dict().items()):
        h.update(f"{name}{tuple(tensor.shape)}".encode())
        h.update(tensor.detach().reshape(-1)[::stride].cpu().numpy().tobytes())
    return h.hexdigest()


def _record_old_digest(path, bilm, stride=97):
    with h5py.File(path, "r+") as f:
        f.attrs["settings"] = json.dumps(dict(json.loads(f.attrs["settings"]), model_digest=_old_digest(bilm, stride)),
                                         sort_keys=True)


def test_another_model_is_named_in_words_beside_its_digest_key(tmp_path, bilm, lines):
    """`elmo embed in.txt out.hdf5` into a file written with `--model fixture` said only "it
    differs in: model_digest", a recorded key no option or page names; a newcomer could not
    tell that the model was what differed. The key is kept (resumes and tests name it) and
    said in words; a setting that is an option (batch_size) is left as it was."""
    inp = write_lines(tmp_path / "in.txt", lines[:6])
    out = embed_file(inp, tmp_path / "out.hdf5", bilm, batch_size=4)
    with pytest.raises(SettingsMismatch, match=r"differs in: batch_size, model_digest "
                                               r"\(another model, or other weights\)\)"):
        embed_file(inp, out, random_bilm(seed=12), batch_size=2)


@pytest.mark.parametrize("stride", [97, 1])
def test_segments_and_a_file_of_the_older_digest_resume_and_count_as_done(tmp_path, bilm, lines, stride):
    """Since the digest hashes every weight, the segments and finished files written before
    (whose digest hashed every 97th value) were refused as another model's ('differs in:
    model_digest'), so the same command could neither resume nor find its file done. Now a
    record of this model's older digest is taken as this model's; another model's is still
    refused, and --overwrite records the new digest. (So is the digest recorded before the
    package had one digest, stride 1: every value, no dtype.)"""
    from elmo.model_digest import model_digest

    inp = write_lines(tmp_path / "in.txt", lines)
    kw = dict(batch_size=4, segment_lines=4)
    reference = embed_file(inp, tmp_path / "reference.hdf5", bilm, **kw)
    out = tmp_path / "out.hdf5"
    assert embed_file(inp, out, bilm, rank=1, world_size=2, **kw) is None    # half the segments
    done = sorted(parts_dir(out).glob("segment-*.hdf5"))
    for path in done:
        _record_old_digest(path, bilm, stride)
    with pytest.raises(SettingsMismatch, match=r"differs in: model_digest \(another model"):
        embed_file(inp, out, random_bilm(seed=12), **kw)
    with h5py.File(done[0], "r+") as f:      # marked, to see that it is taken, not computed again
        first = int(f.attrs["first_line"])
        f[str(first)][...] = 7.0
    assert embed_file(inp, out, bilm, rank=0, world_size=2, wait_timeout=10, **kw) == out   # the rest, merged
    with h5py.File(out, "r") as f, h5py.File(reference, "r") as ref:
        assert (f[str(first)][...] == 7.0).all()
        for key in ref:
            if key not in (str(first), "sentence_to_index"):
                np.testing.assert_array_equal(f[key][...], ref[key][...])
    # a finished file of the older digest is done
    _record_old_digest(reference, bilm, stride)
    stamp = reference.stat().st_mtime_ns
    assert embed_file(inp, reference, bilm, **kw) == reference and reference.stat().st_mtime_ns == stamp
    assert not parts_dir(reference).exists()
    embed_file(inp, reference, bilm, overwrite=True, **kw)
    assert json.loads(h5py.File(reference, "r").attrs["settings"])["model_digest"] == model_digest(bilm)


def test_rank0_refuses_at_once_a_segment_another_rank_wrote_with_other_settings(tmp_path, bilm, lines):
    """(rank 1 started with another --batch-size, or another model on a second machine, wrote
    its segments with its settings and finished; rank 0 waited its whole --wait-timeout, 30
    minutes by default, for segments of its own settings that no rank would write, then asked
    "Did a rank stop?")"""
    inp = write_lines(tmp_path / "in.txt", lines)
    out = tmp_path / "sharded.hdf5"
    assert embed_file(inp, out, bilm, segment_lines=7, rank=1, world_size=2, batch_size=3) is None
    started = time.monotonic()
    with pytest.raises(SettingsMismatch, match=r"segment-00000001\.hdf5 was written by a different command "
                                               r"\(it differs in: batch_size\)"):
        embed_file(inp, out, bilm, segment_lines=7, rank=0, world_size=2, wait_timeout=20)
    assert time.monotonic() - started < 15
    assert not out.exists()
    # rank 1 run again with rank 0's command refuses its segments in turn; --overwrite mends them
    assert embed_file(inp, out, bilm, segment_lines=7, rank=1, world_size=2, overwrite=True) is None
    assert embed_file(inp, out, bilm, segment_lines=7, rank=0, world_size=2) == out
    assert_same_datasets(out, embed_file(inp, tmp_path / "one.hdf5", bilm, segment_lines=7))


def test_embed_file_names_a_config_that_is_not_an_embed_config(tmp_path):
    # a dict of settings was "replace() should be called on dataclass instances"
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    with pytest.raises(TypeError, match=r"^config must be an EmbedConfig .* got dict; pass settings as keywords"):
        embed_file(tmp_path / "in.txt", tmp_path / "out.hdf5", config={"model": "fixture"})
    assert not (tmp_path / "out.hdf5").exists()
