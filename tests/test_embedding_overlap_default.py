"""The windows' overlap follows ``max_tokens`` when it is not given.

Before, the overlap defaulted to 64 whatever ``max_tokens`` was, so ``--max-tokens 50`` (or
``Embedder(model, max_tokens=50)``) stopped with an error about an overlap nobody had set.
"""
import json

import h5py
import numpy as np
import pytest

from elmo import ElmoEmbedder, Embedder, embed_file, from_pretrained
from elmo.cli import main as cli_main
from elmo.embedding import DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP, EmbedConfig, plan_windows
from elmo.embedding.output import SegmentWriter, parts_dir
from elmo.embedding.windows import context_score
from tests.conftest import random_bilm
from tests.test_embedding import WORDS, alone, brute_force_owner, random_sentences
from tests.test_embedding_file import assert_same_datasets, write_lines


def long_sentence(n: int, seed: int = 3):
    return [str(w) for w in np.random.default_rng(seed).choice(WORDS, size=n)]


def settings_of(path):
    with h5py.File(path, "r") as f:
        return json.loads(f.attrs["settings"])


def test_the_default_overlap_is_unchanged_for_the_default_max_tokens():
    bilm = random_bilm(seed=1)
    assert DEFAULT_MAX_TOKENS == 256 and DEFAULT_OVERLAP == 64
    assert Embedder(bilm).overlap == 64
    assert EmbedConfig().overlap is None   # resolved by Embedder, from max_tokens


def test_a_lower_max_tokens_works_without_an_overlap_and_keeps_the_context_rule():
    bilm = random_bilm(seed=2)
    embedder = Embedder(bilm, max_tokens=50, batch_size=4)
    assert embedder.overlap == 25          # min(64, 50 // 2)
    sentence = long_sentence(130)
    pieces = [p for batch in embedder.plan([sentence]) for p in batch]
    assert len(pieces) > 1                 # the sentence really is windowed
    for p in pieces:
        w = p.window
        assert w.stop - w.start <= 50
        for i in range(w.keep_start, w.keep_stop):   # the README's rule: overlap // 2 each side
            assert context_score(i, w.start, w.stop, len(sentence)) >= embedder.overlap // 2
    got = embedder.embed_sentences([sentence])[0]
    for i in (0, 40, 64, 129):             # each token from its best window, run alone
        s, e = brute_force_owner(i, len(sentence), 50, 25)
        np.testing.assert_allclose(got[:, i], alone(bilm, sentence[s:e])[:, i - s], rtol=1e-5, atol=1e-6)
    # the plan with no overlap named is the plan with the resolved one
    assert plan_windows(130, 50) == plan_windows(130, 50, 25)
    assert plan_windows(5, 1) == plan_windows(5, 1, 0)   # max_tokens 1: overlap 0
    compat = ElmoEmbedder(model=bilm, max_tokens=50)
    np.testing.assert_allclose(compat.embed_sentence(sentence), got, rtol=1e-5, atol=1e-6)


def test_an_overlap_that_is_given_is_still_checked(tmp_path, capsys):
    bilm = random_bilm(seed=3)
    for overlap in (50, 64, -1):
        with pytest.raises(ValueError, match="overlap must"):
            Embedder(bilm, max_tokens=50, overlap=overlap)
    with pytest.raises(ValueError, match="overlap must"):
        ElmoEmbedder(model=bilm, max_tokens=50, overlap=64)
    assert Embedder(bilm, max_tokens=50, overlap=49).overlap == 49
    inp = write_lines(tmp_path / "in.txt", ["a b c"])
    out = tmp_path / "o.hdf5"
    assert cli_main(["embed", str(inp), str(out), "--model", "fixture", "--max-tokens", "50",
                     "--overlap", "50", "--quiet"]) == 1
    err = capsys.readouterr().err
    # (the command names its options as typed; the Python API above keeps its parameter names)
    assert "--overlap must be in [0, --max-tokens)" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_cli_max_tokens_50_without_overlap_runs_and_records_the_overlap_used(tmp_path, capsys):
    sentence = long_sentence(120, seed=5)
    inp = write_lines(tmp_path / "in.txt", [" ".join(sentence), "the bank closed ."])
    out = tmp_path / "o.hdf5"
    command = ["embed", str(inp), str(out), "--model", "fixture", "--max-tokens", "50", "--quiet"]
    assert cli_main(command) == 0
    recorded = settings_of(out)
    assert (recorded["max_tokens"], recorded["overlap"]) == (50, 25)
    with h5py.File(out, "r") as f:         # the stored command spells out the overlap used
        assert "--max-tokens 50 --overlap 25 " in f.attrs["command_line"]
    want = Embedder(from_pretrained("fixture"), max_tokens=50, overlap=25).embed_sentences([sentence])[0]
    with h5py.File(out, "r") as f:
        np.testing.assert_allclose(f["0"][()], want, rtol=1e-5, atol=1e-6)
    assert cli_main(command) == 0          # the same command again: found complete, no mismatch
    assert "error" not in capsys.readouterr().err


def test_a_run_without_overlap_resumes_and_an_older_default_record_still_resumes(tmp_path, monkeypatch):
    bilm = random_bilm(seed=4)
    lines = [" ".join(s) for s in random_sentences(16, seed=8, max_len=30)] + [" ".join(long_sentence(70))]
    inp = write_lines(tmp_path / "in.txt", lines)
    made = []
    real_commit = SegmentWriter.commit
    monkeypatch.setattr(SegmentWriter, "commit", lambda self: made.append(1) or real_commit(self))

    # max_tokens 50 and no overlap: half the segments (rank 1 of 2), then the same command on rank 0
    kw = dict(batch_size=4, segment_lines=4, token_cache=False)
    reference = embed_file(inp, tmp_path / "reference.hdf5", bilm, max_tokens=50, overlap=25, **kw)
    out = tmp_path / "out.hdf5"
    assert embed_file(inp, out, bilm, max_tokens=50, rank=1, world_size=2, **kw) is None
    done = len(list(parts_dir(out).glob("segment-*.hdf5")))
    assert done > 0
    made.clear()
    assert embed_file(inp, out, bilm, max_tokens=50, rank=0, world_size=2, **kw) == out
    assert len(made) == 5 - done           # the finished segments were kept, not redone
    assert_same_datasets(out, reference)

    # a run started before this change recorded overlap 64 for the default max_tokens; the
    # default command line (no overlap) resumes it
    old = tmp_path / "old.hdf5"
    assert embed_file(inp, old, bilm, overlap=64, rank=1, world_size=2, **kw) is None
    assert settings_of(next(parts_dir(old).glob("segment-*.hdf5")))["overlap"] == 64
    made.clear()
    assert embed_file(inp, old, bilm, rank=0, world_size=2, **kw) == old
    assert len(made) == 5 - done
    assert settings_of(old)["overlap"] == 64 and settings_of(old)["max_tokens"] == DEFAULT_MAX_TOKENS
