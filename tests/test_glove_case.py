"""GloVe lookup and case: a cased file (840B, 42B: "Apple" and "apple" are two words) is
looked up as written first and lower-cased only as a fallback; a lower-cased file (6B) as
before. The lookup is recorded in saved models and in run fingerprints."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from elmo.tasks import embeddings
from elmo.tasks.embeddings import ExtendedVocab, WordVocab, build_embeddings

CASED = {"Apple": [1.0, 0.0], "apple": [0.0, 1.0], "paris": [2.0, 2.0], "the": [3.0, 0.0],
         "The": [0.0, 3.0], "Berlin": [4.0, 4.0], "berlin": [-4.0, 4.0]}


@pytest.fixture(autouse=True)
def _fresh_caches(monkeypatch):
    """Each test reads its files again (the caches are per process, by path)."""
    monkeypatch.setattr(embeddings, "_GLOVE_CACHE", {})
    monkeypatch.setattr(embeddings, "_DIGESTS", {})
    monkeypatch.setattr(embeddings, "_CASED", {}, raising=False)


def _write(path: Path, vectors: dict) -> str:
    path.write_text("".join(f"{w} {' '.join(f'{x:g}' for x in v)}\n" for w, v in vectors.items()),
                    encoding="utf-8")
    return str(path)


def _row(vocab, matrix, word):
    return matrix[vocab.ids([word])[0]].tolist()


def test_a_cased_glove_file_gives_each_form_its_own_vector_and_falls_back_to_lower_case(tmp_path):
    glove = _write(tmp_path / "cased.txt", CASED)
    vocab, matrix, info = build_embeddings([["Apple", "apple", "APPLE", "Paris", "Zorp"]],
                                           [["The", "the"]], {"glove": glove})
    assert _row(vocab, matrix, "Apple") == CASED["Apple"]      # was apple's vector
    assert _row(vocab, matrix, "apple") == CASED["apple"]
    assert _row(vocab, matrix, "APPLE") == CASED["apple"]      # no such form: lower-cased
    assert _row(vocab, matrix, "Paris") == CASED["paris"]
    assert _row(vocab, matrix, "The") == CASED["The"] and _row(vocab, matrix, "the") == CASED["the"]
    assert vocab.cased and vocab.ids(["Zorp"])[0] > 1            # a training word GloVe lacks
    assert info.get("lookup") == getattr(embeddings, "CASED_LOOKUP", "?")
    assert (info["found_exact"], info["found_lowercased"], info["not_found"]) == (4, 2, 1)


def test_a_lower_cased_glove_file_is_looked_up_lower_cased_as_before(tmp_path):
    glove = _write(tmp_path / "lower.txt", {"apple": [0.0, 1.0], "paris": [2.0, 2.0]})
    vocab, matrix, info = build_embeddings([["Apple", "apple", "Paris"]], [], {"glove": glove})
    assert not vocab.cased and vocab.itos == ["<pad>", "<unk>", "apple", "paris"]
    assert _row(vocab, matrix, "Apple") == _row(vocab, matrix, "apple") == [0.0, 1.0]
    assert info.get("lookup") == "lower-cased" and "lookup" not in embeddings.glove_record({"glove": glove})
    assert (info["found_exact"], info["found_lowercased"], info["not_found"]) == (1, 2, 0)


def test_words_new_at_prediction_follow_the_same_lookup():
    base = WordVocab(["Apple", "apple", "zorp"], cased=True)
    extra = ExtendedVocab(base, ["Berlin", "berlin"], np.zeros((2, 2), dtype=np.float32))
    n = len(base)
    assert extra.ids(["Apple", "APPLE", "Berlin", "BERLIN", "Zorp", "Nope", "<pad>"]) == \
        [2, 3, n, n + 1, 4, 1, 1]


def test_a_saved_model_keeps_its_cased_lookup_and_finds_new_words_as_written(tmp_path):
    from test_tasks_files import WORDS, write_config, write_task

    from elmo.tasks import saved
    from elmo.tasks.experiment_config import load_config
    from elmo.tasks.runner import run_experiment
    vectors = {w: [float(i), 1.0] for i, w in enumerate(WORDS + [".", "berlin"])}
    vectors.update({"The": [9.0, 9.0], "Berlin": [7.0, -7.0]})
    glove = _write(tmp_path / "cased.txt", vectors)
    task = dict(write_task(tmp_path, "classification", dev=False), dev_fraction=0)
    config = write_config(tmp_path, [task], variants=[{"name": "baseline"}], embeddings={"glove": glove},
                          train={"epochs": 1, "batch_size": 8})
    run_experiment(load_config(config), out=tmp_path / "r", log=lambda s: None, save_models=True)
    model = saved.load(tmp_path / "r/models/my-classification/baseline/seed-1")
    info = model.saved
    assert info.vocab.cased and {"The", "the"} <= set(info.vocab.stoi)
    from elmo.tasks.datasets import Example
    vocab = info.vocab_for([Example(tokens=["Berlin", "BERLIN", "The"], label="other")])
    ids = vocab.ids(["Berlin", "BERLIN", "The"])
    assert vocab.vectors[ids[0] - len(info.vocab)].tolist() == vectors["Berlin"]
    assert vocab.vectors[ids[1] - len(info.vocab)].tolist() == vectors["berlin"]
    assert ids[2] == info.vocab.stoi["The"]


def test_a_cased_glove_file_changes_the_run_fingerprint_of_the_old_lower_cased_lookup(tmp_path):
    """Runs made when every word was lower-cased are not kept by --resume with a cased file;
    with a lower-cased file nothing changed, and its runs' fingerprints stay as they were."""
    from elmo.tasks.experiment_config import normalise_config
    from elmo.tasks.fingerprints import content_digest, run_content
    for vectors, cased in ((CASED, True), ({"apple": [0.0, 1.0]}, False)):
        glove = _write(tmp_path / f"{cased}.txt", vectors)
        cfg = normalise_config({"tasks": [{"task": "pos"}], "variants": [{"name": "base"}],
                                "embeddings": {"glove": glove}})
        content = run_content(cfg, cfg.tasks[0], cfg.variants[0])
        before = {k: v for k, v in content.items() if k != "glove_lookup"}   # the old content
        assert (content_digest(content) != content_digest(before)) is cased


def test_glove_files_read_one_after_another_are_not_all_kept(tmp_path):
    """Every GloVe file read stayed in a per-process dict by path: a process loading task
    models built with other files one after another kept them all (gigabytes each), after
    the models were gone. The most recently used are kept, up to GLOVE_CACHE_SIZE."""
    import gc
    import weakref
    paths = [_write(tmp_path / f"g{k}.txt", {"the": [float(k), 1.0], "Berlin": [2.0, 2.0]}) for k in range(4)]
    first = embeddings.load_glove(paths[0])[1]
    assert embeddings.glove_cased(paths[0])
    gone = weakref.ref(first)
    del first
    for path in paths[1:]:
        assert embeddings.load_glove(path)[1][0, 0] == float(paths.index(path))
        embeddings.glove_cased(path)
    gc.collect()
    assert gone() is None
    assert len(embeddings._GLOVE_CACHE) <= embeddings.GLOVE_CACHE_SIZE
    assert set(embeddings._CASED) <= set(embeddings._GLOVE_CACHE)
    # the one in use is still read once: the same arrays again
    assert embeddings.load_glove(paths[-1])[1] is embeddings.load_glove(paths[-1])[1]


def test_the_glove_file_pushed_out_of_the_cache_is_dropped_before_the_next_is_read(tmp_path, monkeypatch):
    """The cached file was dropped only after the new one was read: two files in memory at
    the peak (gigabytes each for GloVe 840B). The one the cache pushes out must be
    unreferenced by the cache while the next file is read."""
    import gc
    import weakref

    from elmo.data import readers
    monkeypatch.setattr(embeddings, "GLOVE_CACHE_SIZE", 1)
    first_path, second_path = (_write(tmp_path / f"g{k}.txt", {"The": [float(k), 1.0]}) for k in range(2))
    words, vectors = embeddings.load_glove(first_path)
    assert embeddings.glove_cased(first_path)
    gone = weakref.ref(vectors)
    del words, vectors
    during_read = []
    real_read = readers.read_glove

    def read_glove(where):
        gc.collect()
        during_read.append((gone() is not None, first_path in embeddings._CASED))
        return real_read(where)

    monkeypatch.setattr(readers, "read_glove", read_glove)
    assert embeddings.load_glove(second_path)[1][0, 0] == 1.0
    assert during_read == [(False, False)]      # (its words list too: glove_cased kept it)


def test_a_glove_file_read_again_after_it_was_dropped_is_recorded_by_its_new_digest(tmp_path):
    """A file dropped from the cache and read again (changed on disk meanwhile) must not be
    recorded by the digest of its earlier read: a saved model's recorded GloVe would not be
    the vectors it was built with, and its load refused it."""
    glove = _write(tmp_path / "a.txt", {"the": [1.0, 1.0]})
    before = embeddings.glove_record({"glove": glove})["digest"]
    _write(tmp_path / "a.txt", {"the": [2.0, 2.0]})
    for k in range(embeddings.GLOVE_CACHE_SIZE):    # other files push it out
        embeddings.load_glove(_write(tmp_path / f"other{k}.txt", {"the": [0.0, 0.0]}))
    words, vectors = embeddings.load_glove(glove)
    assert vectors[0].tolist() == [2.0, 2.0]
    assert embeddings.glove_record({"glove": glove})["digest"] == embeddings.glove_digest(words, vectors) != before
