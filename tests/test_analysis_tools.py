"""Neighbour index, contrast pairs, pictures and the report, on synthetic data and tiny models."""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo.analysis import contrast, markdown, neighbors, report, stats
from elmo.analysis.neighbors import CorpusIndex
from elmo.embedding import Embedder
from elmo.model_digest import model_digest

from conftest import random_bilm


# ----------------------------------------------------------------------------- neighbours
def _random_index(seed=0, n_sent=30, n_layers=3, dim=12):
    rng = np.random.default_rng(seed)
    sentences = [[f"w{rng.integers(40)}" for _ in range(rng.integers(1, 9))] for _ in range(n_sent)]
    positions = np.array([(s, t) for s, toks in enumerate(sentences) for t in range(len(toks))])
    vecs = rng.normal(size=(n_layers, len(positions), dim))
    vecs /= np.linalg.norm(vecs, axis=-1, keepdims=True)
    return CorpusIndex(sentences, positions, vecs.astype(np.float16))


@pytest.mark.parametrize("layer", [0, 2])
def test_neighbour_search_equals_brute_force(layer):
    index = _random_index()
    rng = np.random.default_rng(1)
    for _ in range(5):
        query = rng.normal(size=index.vectors.shape[-1])
        hits = index.search(query, layer, k=7)
        expected = neighbors.brute_force(index.vectors[layer], query, 7)
        assert [(h.sentence, h.token) for h in hits] == [tuple(index.positions[i]) for _, i in expected]
        assert [h.score for h in hits] == pytest.approx([s for s, _ in expected], abs=1e-5)
        assert [h.word for h in hits] == [index.word(i) for _, i in expected]


def test_same_word_search_equals_brute_force_over_that_words_occurrences():
    index = _random_index(seed=3)
    word = index.word(5)
    ids = [i for i in range(len(index.positions)) if index.word(i).lower() == word.lower()]
    query = np.random.default_rng(2).normal(size=index.vectors.shape[-1])
    hits = index.search(query, 1, k=3, word=word.upper())
    expected = neighbors.brute_force(index.vectors[1][ids], query, 3)
    assert [(h.sentence, h.token) for h in hits] == [tuple(index.positions[ids[i]]) for _, i in expected]
    assert {h.word for h in hits} == {word}
    assert index.search(query, 1, k=3, word="never-seen") == []


def test_search_leaves_out_the_excluded_tokens_and_copies_finds_the_query_sentence():
    index = _random_index(seed=4)
    index.sentences[7] = list(index.sentences[2])     # a copy of sentence 2 (vectors aside)
    token = len(index.sentences[2]) - 1
    own = index.copies(index.sentences[2], token)
    assert [tuple(index.positions[i]) for i in own] == [(2, token), (7, token)]
    assert index.copies(["not", "there"], 0) == []
    query = index.vectors[1][own[0]].astype(np.float32)
    assert (index.search(query, 1, k=1)[0].sentence, index.search(query, 1, k=1)[0].token) == (2, token)
    hits = index.search(query, 1, k=len(index.positions), exclude=own)
    assert len(hits) == len(index.positions) - 2
    assert not {(h.sentence, h.token) for h in hits} & {(2, token), (7, token)}
    expected = [i for _, i in neighbors.brute_force(index.vectors[1], query, len(index.positions))
                if i not in own]
    assert [(h.sentence, h.token) for h in hits] == [tuple(index.positions[i]) for i in expected]
    word = index.word(own[0])
    same = index.search(query, 1, k=50, word=word, exclude=own)
    assert len(same) == len(index.occurrences(word)) - 2 and all(h.word == word for h in same)


def test_search_takes_each_excluded_token_once_and_refuses_ids_it_does_not_hold():
    """An id listed twice cut one hit too many from the k asked for; -1 left out the last
    token, 1.5 token 1 (both in silence); an id past the end was torch's IndexError."""
    index = _random_index(seed=5)
    n = len(index.positions)
    query = np.random.default_rng(6).normal(size=index.vectors.shape[-1])
    once = index.search(query, 1, k=n, exclude=[3])
    assert len(once) == n - 1
    assert [(h.sentence, h.token) for h in index.search(query, 1, k=n, exclude=[3, 3])] == \
        [(h.sentence, h.token) for h in once]
    assert len(index.search(query, 1, k=n, exclude=np.array([], dtype=np.int64))) == n
    for bad in ([-1], [n], [1.5], [True]):
        with pytest.raises(ValueError, match="exclude"):
            index.search(query, 1, k=n, exclude=bad)


def test_read_corpus_cap(tmp_path):
    (tmp_path / "c.txt").write_text("a b\n\nc\nd e f\n")
    assert neighbors.read_corpus(tmp_path / "c.txt", 2) == [["a", "b"], ["c"]]
    assert neighbors.read_corpus(tmp_path / "c.txt", 0) == neighbors.read_corpus(tmp_path / "c.txt")
    assert len(neighbors.read_corpus(tmp_path / "c.txt")) == 3


def test_index_round_trip_and_k_larger_than_corpus(tmp_path):
    index = _random_index(n_sent=3)
    index.save(tmp_path / "ix")
    back = CorpusIndex.load(tmp_path / "ix")
    assert back.sentences == index.sentences
    np.testing.assert_array_equal(back.vectors, index.vectors)
    q = np.ones(index.vectors.shape[-1])
    assert len(back.search(q, 1, k=1000)) == len(index.positions)


def test_cached_index_built_meanwhile_by_another_process_is_loaded(tmp_path, monkeypatch):
    """Two processes building one index: the second's rename met the first's folder
    (OSError 'Directory not empty'); it now takes the entry's lock and loads the first's."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c\nd e\n")
    model = Embedder(random_bilm(), batch_size=8)
    quiet = lambda *_: None                                            # noqa: E731
    neighbors.cached_index(model, corpus, tmp_path / "first", log=quiet)
    [key] = [p.name for p in (tmp_path / "first").iterdir()]          # the key: not the folder's
    theirs = _random_index(n_sent=2)
    read = neighbors.read_corpus

    def read_while_another_finishes(path, cap=None):
        sentences = read(path, cap)
        theirs.save(tmp_path / "ix" / key)        # after our first look, before our build
        return sentences

    built = []
    build = CorpusIndex.build.__func__
    monkeypatch.setattr(neighbors, "read_corpus", read_while_another_finishes)
    monkeypatch.setattr(CorpusIndex, "build",
                        classmethod(lambda cls, *a, **k: built.append(1) or build(cls, *a, **k)))
    index = neighbors.cached_index(model, corpus, tmp_path / "ix", log=quiet)
    assert built == [] and index.sentences == theirs.sentences
    assert [p.name for p in (tmp_path / "ix").iterdir()] == [key]


@pytest.mark.parametrize("token", ["a\u2028b", "a\x85", "New York", ""])
def test_an_index_token_that_its_sentences_file_cannot_hold_is_refused_when_saved(tmp_path, token):
    """sentences.txt holds a sentence a line, tokens separated by spaces, read back with
    splitlines and split: an index built from Python token lists with a token holding U+2028
    or a space was saved, and loading it read other sentences (or called it damaged)."""
    index = _random_index()
    index.sentences[3] = [*index.sentences[3], token]
    index.positions = neighbors.token_positions([len(s) for s in index.sentences])
    index.vectors = np.ones((3, len(index.positions), 12), np.float16)
    with pytest.raises(ValueError, match=re.escape(f"sentence 4: the token {token!r} is empty or holds whitespace")):
        index.save(tmp_path / "ix")


def test_a_full_disk_while_an_index_is_saved_names_the_folder_and_frees_the_space(tmp_path, monkeypatch):
    """numpy's short write drops the errno: the error was "2764800 requested and 100288
    written", and the half-written .partial folder stayed, holding the disk's last bytes."""
    from elmo.io import OutputError
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c\nd e\n")

    def short_write(file, array):
        Path(file).write_bytes(b"x" * 5)
        raise OSError("100 requested and 5 written")

    monkeypatch.setattr(np, "save", short_write)
    with pytest.raises(OutputError, match=r"cannot write the neighbour index: only 5 of 100 bytes were written "
                                          r"\(is the disk full\?\); give a writable folder"):
        neighbors.cached_index(Embedder(random_bilm(), batch_size=8), corpus, tmp_path / "ix", log=lambda *_: None)
    assert not (tmp_path / "ix").exists()   # no .partial folder, no lock, nor the folder it made


def test_a_corpus_that_is_a_folder_or_nothing_is_named_as_such(tmp_path, monkeypatch):
    """--corpus DIR said "unknown corpus 'DIR'", as did a misspelt file name."""
    monkeypatch.setenv("ELMO_DATA", str(tmp_path / "data"))
    (tmp_path / "texts").mkdir()
    with pytest.raises(IsADirectoryError, match="texts: is a directory; the corpus is a text file"):
        report.resolve_corpus(str(tmp_path / "texts"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="corpus: no such file, nor a corpus of that name"):
        report.resolve_corpus("corpus")
    with pytest.raises(Exception, match="unknown corpus 'nope'"):   # CORPUS:SPLIT is a corpus name
        report.resolve_corpus("nope:dev")


def test_static_neighbors_exclude_the_word_and_handle_unknown_words():
    words = ["cat", "dog", "car", "kitten"]
    vecs = np.array([[1, 0.1], [0.5, 0.5], [0, 1], [1, 0]], dtype=np.float32)
    hits = neighbors.static_neighbors(words, vecs, "cat", k=2)
    assert [h.word for h in hits] == ["kitten", "dog"]
    assert neighbors.static_neighbors(words, vecs, "zebra") == []


def test_static_neighbors_refuse_vectors_that_do_not_fit_the_words():
    # fewer words than rows (or more) was an IndexError from inside; NaN rows ranked NaN scores
    words = ["cat", "dog", "car"]
    vecs = np.array([[1, 0.1], [0.5, 0.5], [0, 1], [1, 0]], dtype=np.float32)
    with pytest.raises(ValueError, match=r"one vector row per word: 3 words, vectors of shape \(4, 2\)"):
        neighbors.static_neighbors(words, vecs, "cat")
    with pytest.raises(ValueError, match="NaN or infinite"):
        neighbors.static_neighbors(words, np.full((3, 2), np.nan), "cat")


@pytest.mark.parametrize("k", [0, -2])  # -2 would slice off the last two hits, not give two
def test_a_k_below_one_is_refused(k):
    with pytest.raises(ValueError, match="must be at least 1"):
        _random_index().search(np.ones(12), 1, k=k)
    with pytest.raises(ValueError, match="must be at least 1"):
        neighbors.static_neighbors(["a", "b"], np.eye(2, dtype=np.float32), "a", k=k)


def test_index_of_a_model_is_cached_and_layer0_is_context_free(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank closed .\n\nthe river bank was muddy .\na bank loan\n")
    emb = Embedder(random_bilm(), batch_size=2)
    index = neighbors.cached_index(emb, corpus, tmp_path / "cache", log=lambda *_: None)
    assert len(index.sentences) == 3 and len(index.positions) == 4 + 6 + 3
    bank = [i for i in range(len(index.positions)) if index.word(i) == "bank"]
    np.testing.assert_allclose(index.vectors[0, bank[0]], index.vectors[0, bank[1]], atol=1e-3)
    assert not np.allclose(index.vectors[1, bank[0]], index.vectors[1, bank[1]], atol=1e-3)
    messages = []
    again = neighbors.cached_index(emb, corpus, tmp_path / "cache", log=messages.append)
    assert messages == [] and again.sentences == index.sentences        # loaded, not rebuilt
    pos, q = neighbors.query_vectors(emb, ["the", "bank", "closed", "."], "bank")
    # the corpus holds the very same sentence: its "bank" is the nearest at every layer
    for j in range(index.num_layers):
        top = index.search(q[j], j, 1)[0]
        assert (top.sentence, top.token) == (0, 1)
    with pytest.raises(ValueError):
        neighbors.query_vectors(emb, ["no", "such"], "bank")



def test_a_bfloat16_model_has_a_fingerprint_and_an_index(tmp_path):
    """A model saved in bfloat16 loads as bfloat16, and elmo neighbors / analyze on it stopped
    with numpy's "Got unsupported ScalarType BFloat16" while hashing its weights."""
    import elmo
    bilm = random_bilm()
    half = elmo.from_pretrained(elmo.save_pretrained(bilm.to(torch.bfloat16), tmp_path / "bf16"))
    assert model_digest(half) != model_digest(random_bilm())
    corpus = tmp_path / "c.txt"
    corpus.write_text("the test sentence .\n")
    index = neighbors.cached_index(half, corpus, tmp_path / "cache", log=lambda *_: None)
    assert index.sentences == [["the", "test", "sentence", "."]] and np.isfinite(index.vectors).all()

def test_manylangs_models_with_other_dictionaries_get_other_fingerprints_and_indexes(tmp_path):
    """Two ELMoForManyLangs models with equal weights and other dictionaries embed a word
    differently, but shared a fingerprint, so the second loaded the first's neighbour index."""
    import shutil

    import elmo

    folder = Path(__file__).parent / "fixtures" / "elmoformanylangs" / "model"
    other = tmp_path / "other"
    shutil.copytree(folder, other)
    rows = [line.split("\t") for line in (other / "char.dic").read_text(encoding="utf-8").splitlines()]
    ids = {row[0]: row[1] for row in rows}
    for row in rows:            # e and t swap their ids
        row[1] = {"e": ids["t"], "t": ids["e"]}.get(row[0], row[1])
    (other / "char.dic").write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    a, b = elmo.from_pretrained(folder), elmo.from_pretrained(other)
    assert model_digest(a) != model_digest(b)
    assert model_digest(a) == model_digest(elmo.from_pretrained(folder))
    corpus = tmp_path / "c.txt"
    corpus.write_text("the test sentence .\n")
    first = neighbors.cached_index(a, corpus, tmp_path / "cache", log=lambda *_: None)
    second = neighbors.cached_index(b, corpus, tmp_path / "cache", log=lambda *_: None)
    assert not np.allclose(np.asarray(first.vectors, np.float32), np.asarray(second.vectors, np.float32),
                           atol=1e-2)   # (float16 rows: 1e-2 is far above their rounding)
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_an_index_is_not_reused_for_other_windows_or_a_replaced_corpus_text(tmp_path):
    """The index was keyed by the corpus's path, size and mtime and the weights alone: an index
    built by an Embedder with other windows (max_tokens), or of a text since replaced by one of
    the same size and mtime (`cp -p`, `tar x`), was loaded and gave its stale neighbours."""
    import os

    corpus = tmp_path / "c.txt"
    long = " ".join(f"w{i}" for i in range(30))
    corpus.write_text(long + "\nthe bank raised its rates .\n")
    bilm, cache, quiet = random_bilm(), tmp_path / "cache", (lambda *_: None)
    expected = CorpusIndex.build(bilm, neighbors.read_corpus(corpus)).vectors.astype(np.float32)
    neighbors.cached_index(Embedder(bilm, max_tokens=8, overlap=2), corpus, cache, log=quiet)
    index = neighbors.cached_index(Embedder(bilm), corpus, cache, log=quiet)
    np.testing.assert_allclose(np.asarray(index.vectors, np.float32), expected, atol=2e-3)
    stat = corpus.stat()
    corpus.write_text(corpus.read_text().replace("bank raised", "rank raised"))   # same size
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    index = neighbors.cached_index(Embedder(bilm), corpus, cache, log=quiet)
    assert index.sentences[1][1] == "rank"


def test_a_stateful_model_is_refused_by_the_analysis_tools(tmp_path):
    """A stateful model's vectors depend on the batches before (the carried LSTM state): the
    tools gave numbers other than its folder's, and its neighbour index (same fingerprint)
    was then loaded for the stateless model."""
    bilm = random_bilm()
    bilm.stateful = True
    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank raised its rates .\n")
    for call in (lambda: neighbors.cached_index(bilm, corpus, tmp_path / "cache", log=lambda *_: None),
                 lambda: contrast.contrast_eval(Embedder(bilm), contrast.load_pairs()),
                 lambda: neighbors.query_vectors(bilm, ["the", "bank"], "bank")):
        with pytest.raises(ValueError, match="needs a stateless model"):
            call()
    assert not (tmp_path / "cache").exists()


# ----------------------------------------------------------------------------- contrast
def test_builtin_contrast_set_keeps_the_words_and_flips_the_labels():
    items = contrast.load_pairs()
    assert contrast.different_words(items) == []
    cats = {it.category for it in items}
    assert cats == {"role", "negation", "quantity"}
    for cat in cats:
        assert len({(it.a, it.b) for it in items if it.category == cat}) >= 15
    assert all(it.label_a != it.label_b and it.a != it.b for it in items)


def _agent(sentence) -> str:
    """The agent of a built-in role sentence, from its shape: ``DET X was VERB by DET Y ...``
    (passive: Y), else ``DET X VERB ...`` or ``DET X that VERB ...`` (active: X)."""
    if sentence[2] == "was":
        return sentence[sentence.index("by") + 2]
    return sentence[1]


def test_builtin_role_labels_follow_from_the_sentences():
    """Erratum 2026-12-08: "the letter that the editor rejected was written by the poet"
    labelled the editor a patient, but it rejected the letter (both people are agents). Each
    role sentence's agent, read off its shape, is the target labelled agent, the other target
    the patient; 8 of the 18 role pairs are passive, as before."""
    role = [it for it in contrast.load_pairs() if it.category == "role"]
    for it in role:
        for sentence, label in ((it.a, it.label_a), (it.b, it.label_b)):
            assert label == ("agent" if _agent(sentence) == it.target else "patient"), (sentence, it.target)
        assert {_agent(it.a), _agent(it.b)} <= {t.target for t in role if t.a == it.a}, it.a
    pairs = {(it.a, it.b) for it in role}
    assert len(pairs) == 18 and sum(a[2] == "was" for a, _ in pairs) == 8


def test_parse_pairs_rejects_bad_lines():
    with pytest.raises(ValueError, match="6 tab-separated"):
        contrast.parse_pairs("role\tthe dog ran .\tthe dog ran .")
    with pytest.raises(ValueError, match="target"):
        contrast.parse_pairs("role\ta b\tb a\tc\tx\ty")
    items = contrast.parse_pairs("# comment\n\nr\ta b\tb a\ta\tx\ty\n")
    assert items[0].a == ("a", "b") and items[0].label_b == "y"


def test_parse_pairs_ends_lines_at_newlines_only():
    """A form feed, U+2028 or U+0085 in a sentence ended the line there (str.splitlines): a good
    pair was refused as 'expected 6 tab-separated fields', and later lines were misnumbered."""
    for odd in ("\x0c", "\u2028", "\x85", "\x1e"):
        with pytest.raises(ValueError, match=r"^<text>:2: expected 6 tab-separated fields, got 7"):
            contrast.parse_pairs(f"r\ta{odd}b\tb a\ta\tx\ty\r\nr\tc d\td c\tc\tx\ty\tz\n")
        items = contrast.parse_pairs(f"r\ta{odd}b\tb a\ta\tx\ty\n")
        assert items[0].a == ("a", "b") and items[0].b == ("b", "a"), repr(odd)


def test_align_matches_occurrences():
    assert contrast.align("the dog saw the cat".split(), "the cat saw the dog".split()) == \
        [(0, 0), (1, 4), (2, 2), (3, 3), (4, 1)]


def _synthetic_vecs(items, encode_label: bool, seed=0):
    """Sentence -> (2, n, D) vectors: random per word; layer 1 adds the target's label."""
    rng = np.random.default_rng(seed)
    word_vec = {}
    vecs = {}
    labels = {}
    for it in items:
        labels[(it.a, it.target)] = it.label_a
        labels[(it.b, it.target)] = it.label_b
    for sent in {it.a for it in items} | {it.b for it in items}:
        rows = []
        for w in sent:
            v = word_vec.setdefault(w, rng.normal(size=8))
            lab = labels.get((sent, w))
            extra = np.zeros(8)
            if encode_label and lab is not None:
                extra[0] = 4.0 if lab == "x" else -4.0
            rows.append(np.stack([v, v + extra]))
        vecs[sent] = np.stack(rows, axis=1)
    return vecs


def _pairs(n=12):
    lines = []
    for i in range(n):
        a, b = f"p{i}", f"q{i}"
        lines += [f"c\t{a} v {b}\t{b} v {a}\t{a}\tx\ty", f"c\t{a} v {b}\t{b} v {a}\t{b}\ty\tx"]
    return contrast.parse_pairs("\n".join(lines))


def test_contrast_probe_reads_an_encoded_relation_and_layer0_is_chance():
    items = _pairs()
    vecs = _synthetic_vecs(items, encode_label=True)
    assert contrast.probe_halves(vecs, items, layer=1)["accuracy"] == 1.0
    assert contrast.probe_halves(vecs, items, layer=1)["pair_accuracy"] == 1.0
    layer0 = contrast.probe_halves(vecs, items, layer=0)
    assert layer0["accuracy"] == 0.5 and layer0["pair_accuracy"] == 0.5
    blind = contrast.probe_halves(_synthetic_vecs(items, encode_label=False), items, layer=1)
    assert blind["accuracy"] == 0.5


def test_contrast_probe_never_tests_on_a_sentence_it_was_trained_on():
    # each pair written in both orders: split pair by pair, a held-out target vector was a
    # training vector with the same label, and a probe that memorises scored (62.5 to 75%)
    lines = []
    for i in range(8):
        a, b = f"p{i} v q{i}", f"q{i} v p{i}"
        lines += [f"c\t{a}\t{b}\tp{i}\tx\ty", f"c\t{b}\t{a}\tp{i}\ty\tx"]
    items = contrast.parse_pairs("\n".join(lines))
    sents = sorted({it.a for it in items} | {it.b for it in items})
    # a one-hot per sentence: nothing to read but which sentence it is
    vecs = {s: np.tile(np.eye(len(sents))[k], (2, len(s), 1)) for k, s in enumerate(sents)}
    for seed in range(3):
        res = contrast.probe_halves(vecs, items, layer=1, seed=seed)
        assert res["accuracy"] == 0.5 and res["pair_accuracy"] == 0.5 and res["n_rankings"] == 16
        first, second = contrast.split_halves(sorted({(it.a, it.b) for it in items}), seed)
        assert not {s for p in first for s in p} & {s for p in second for s in p}
    # pairs that share no sentence are split one by one, as before
    plain = sorted({(it.a, it.b) for it in _pairs()})
    assert sum(map(len, contrast.split_halves(plain))) == len(plain)
    with pytest.raises(ValueError, match="category 'c': .* two pairs that share no sentence; got 2 "
                                         "pair.* in 1 group"):
        contrast.probe_halves(vecs, items[:2], layer=1)


def test_contrast_pair_of_one_sentence_twice_is_refused():
    # nothing swapped: one vector with two labels (and a lone such pair crashed in random.sample)
    with pytest.raises(ValueError, match=r"<text>:1: the two sentences are the same"):
        contrast.parse_pairs("c\tthe dog ran .\tthe dog ran .\tdog\ta\tb\n")


def test_contrast_label_kept_is_refused_and_three_labels_state_their_chance():
    # the same label in both sentences: word identity predicts it, so layer 0 beat "chance"
    with pytest.raises(ValueError, match=r"<text>:2: the target's label is 'agent' in both"):
        contrast.parse_pairs("c\ta b\tb a\ta\tx\ty\nc\ta c\tc a\ta\tagent\tagent")
    lines = [f"c\tp{i} v q{i}\tq{i} v p{i}\tp{i}\t{la}\t{lb}"
             for i, (la, lb) in enumerate([("x", "y"), ("y", "z"), ("z", "x"), ("x", "z")])]
    res = contrast.contrast_eval(Embedder(random_bilm(), batch_size=8), contrast.parse_pairs("\n".join(lines)),
                                 l2=1e-2)
    text = "\n".join(markdown._render_contrast(res, "cmd"))
    assert "| c (4 pairs; 3 labels: chance 33.3 on targets; chance" in text   # was "chance is 50"
    # layer 0 labels both targets of a pair alike: 0 or 50% of each pair's, not chance (1/3) as the
    # report said it "must score exactly"
    assert res["categories"]["c"]["probe"][0]["accuracy"] <= 0.5
    assert "must score exactly chance" not in text and "at most one of them right" in text


def test_contrast_eval_on_a_model_layer0_does_not_move():
    items = contrast.load_pairs()[:8]
    res = contrast.contrast_eval(Embedder(random_bilm(), batch_size=8), items)
    m = res["movement"]
    assert abs(m["words"][0]) < 1e-5 and abs(m["targets"][0]) < 1e-5
    assert m["targets"][1] > 1e-4                         # context moves the LSTM layers
    for cat in res["categories"].values():
        assert cat["probe"][0]["accuracy"] == 0.5
        # every item is held out once: one ranking each, two target decisions each
        assert cat["probe"][1]["n_rankings"] == cat["n_items"] == cat["probe"][1]["n_targets"] // 2
        low, high = cat["chance_range"]
        assert low < 0.5 < high


def test_analysis_tools_given_nothing_or_a_string_are_clear_errors():
    from elmo.analysis import probes
    model = Embedder(random_bilm(), batch_size=8)
    with pytest.raises(ValueError, match="needs contrast pairs"):
        contrast.contrast_eval(model, [])
    train = [[("the", "DET"), ("dog", "NOUN")]]
    for tr, te in (([], train), (train, []), (train, [[]])):
        with pytest.raises(ValueError, match="pos_probe needs tagged tokens"):
            probes.pos_probe(model, tr, te)
    with pytest.raises(TypeError, match="not a string"):  # "bank" is in "the bank": a substring
        neighbors.query_vectors(model, "the bank", "bank")


# ----------------------------------------------------------------------------- pictures
def test_run_analysis_of_a_model_object_is_one_line_before_any_folder_is_made(tmp_path):
    """(a BiLM was refused deep in from_pretrained, with the repr of the whole module)"""
    for model in (random_bilm(), Embedder(random_bilm())):
        with pytest.raises(TypeError) as caught:
            report.run_analysis(model, tmp_path / "out", only=["contrast"], log=lambda *_: None)
        assert "run_analysis takes a model name or folder" in str(caught.value)
        assert "\n" not in str(caught.value) and not (tmp_path / "out").exists()


def test_plots_write_png(tmp_path):
    pytest.importorskip("matplotlib")
    from elmo.analysis import plots

    rng = np.random.default_rng(0)
    paths = [plots.sense_pca(rng.normal(size=(3, 10, 6)), ["a"] * 5 + ["b"] * 5, "w", tmp_path / "p.png"),
             plots.layer_bars({"layer 0": 0.5, "mix": 0.9}, {"mfs": 0.4}, "t", "acc", tmp_path / "b.png"),
             plots.layer_bars({"layer 0": 0.5, "mix": 0.9}, {}, "t", "acc", tmp_path / "e.png",
                              {"layer 0": [0.45, 0.52]}),
             plots.mix_weights([0.2, 0.3, 0.5], tmp_path / "m.png")]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    xy = plots.pca_2d(np.array([[1.0, 0, 0], [3.0, 0, 0], [2.0, 0, 0]]))
    np.testing.assert_allclose(np.abs(xy[:, 0]), [1, 1, 0], atol=1e-9)
    np.testing.assert_allclose(xy[:, 1], 0, atol=1e-9)


def test_a_picture_that_fails_midway_leaves_the_earlier_one_whole(tmp_path, monkeypatch):
    """(it was drawn straight onto its path: a full disk left a truncated PNG there)"""
    pytest.importorskip("matplotlib")
    import errno

    from matplotlib.figure import Figure

    from elmo.analysis import plots
    from elmo.io import OutputError

    path = plots.mix_weights([0.2, 0.3, 0.5], tmp_path / "m.png")
    before = path.read_bytes()

    def full_disk(self, target, **kwargs):
        Path(target).write_bytes(before[:20])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full_disk)
    with pytest.raises(OutputError, match="m.png"):
        plots.mix_weights([0.6, 0.4], path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.png"]     # no temporary left


@pytest.mark.parametrize("draw, message", [
    (lambda p: plots_module().layer_bars({}, {}, "t", "acc", p), "nothing to draw"),
    (lambda p: plots_module().layer_bars({"layer 0": None}, {}, "t", "acc", p), "None is not a finite"),
    (lambda p: plots_module().mix_weights([], p), "nothing to draw"),
    (lambda p: plots_module().similarity_layers({"sets": {}}, p), "no word pair set"),
    (lambda p: plots_module().sense_pca(np.zeros((2, 0, 4)), [], "w", p), "none of them 0"),
    (lambda p: plots_module().sense_pca(np.ones((2, 3, 4)), ["a"], "w", p), "1 sense labels for 3"),
    (lambda p: plots_module().sense_pca(np.ones((2, 2, 4)), ["a", "b"], "w", p, ["layer 0"]), "1 layer names"),
    (lambda p: plots_module().sense_pca(np.full((1, 2, 4), np.nan), ["a", "b"], "w", p), "NaN"),
    # a NaN baseline was drawn as no line, labelled "nan"; a list was a TypeError from its label
    (lambda p: plots_module().layer_bars({"layer 0": 0.5}, {"mfs": np.nan}, "t", "acc", p),
     "baseline 'mfs': nan is not a finite"),
    (lambda p: plots_module().layer_bars({"layer 0": 0.5}, {"mfs": [0.4, 0.5]}, "t", "acc", p),
     r"baseline 'mfs': \[0.4, 0.5\] is not a finite"),
    # an interval of one number was "not enough values to unpack", one of NaN drawn in silence,
    # and one of a name with no bar left out in silence
    (lambda p: plots_module().layer_bars({"layer 0": 0.5}, {}, "t", "acc", p, {"layer 0": [0.4]}),
     r"interval of 'layer 0' must be \[low, high\]"),
    (lambda p: plots_module().layer_bars({"layer 0": 0.5}, {}, "t", "acc", p, {"layer 0": [np.nan, 0.6]}),
     "interval of 'layer 0': nan is not a finite"),
    (lambda p: plots_module().layer_bars({"layer 0": 0.5}, {}, "t", "acc", p, {"mix": [0.4, 0.6]}),
     "an interval for 'mix', which has no score"),
])
def test_pictures_of_nothing_or_of_mismatched_data_are_refused_in_one_line(tmp_path, draw, message):
    """(an empty PNG, a StopIteration, matplotlib's "Number of columns must be a positive
    integer", numpy's "SVD did not converge", and a PCA of 3 occurrences with 1 label drew
    one point with no word about the other two)"""
    pytest.importorskip("matplotlib")
    with pytest.raises(ValueError, match=message) as caught:
        draw(tmp_path / "x.png")
    assert "\n" not in str(caught.value) and not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("rows, message", [
    (np.array([[np.nan, 1.0], [1.0, 2.0]]), "NaN or infinite"),   # (numpy's "SVD did not converge")
    (np.array([[np.inf, 1.0], [1.0, 2.0]]), "NaN or infinite"),
    (np.zeros(3), r"needs rows \(N, D\), got shape \(3,\)"),
])
def test_pca_2d_refuses_rows_it_cannot_project_in_one_line(rows, message):
    pytest.importorskip("matplotlib")
    with pytest.raises(ValueError, match=message) as caught:
        plots_module().pca_2d(rows)
    assert "\n" not in str(caught.value)


def _drawn(monkeypatch) -> list:
    """The (figure texts, axes titles, bar heights) of every picture saved from now on."""
    from matplotlib.figure import Figure
    seen: list = []
    save = Figure.savefig

    def recorded(self, *args, **kwargs):
        seen.append(([t.get_text() for t in self.texts], [a.get_title() for a in self.axes],
                     [b.get_height() for a in self.axes for b in a.patches if hasattr(b, "get_height")]))
        return save(self, *args, **kwargs)
    monkeypatch.setattr(Figure, "savefig", recorded)
    return seen


def test_signed_pictures_name_the_model_in_a_footer_and_draw_the_same_data(tmp_path, monkeypatch):
    """A picture copied out of its folder did not say which model (and weights) drew it."""
    pytest.importorskip("matplotlib")
    plots = plots_module()
    rng = np.random.default_rng(0)
    draws = [lambda p: plots.sense_pca(rng.normal(size=(2, 6, 4)), ["a"] * 3 + ["b"] * 3, "w", p),
             lambda p: plots.layer_bars({"layer 0": 0.5, "mix": 0.9}, {"mfs": 0.4}, "t", "acc", p),
             lambda p: plots.mix_weights([0.2, 0.3, 0.5], p)]
    seen = _drawn(monkeypatch)
    for draw in draws:
        draw(tmp_path / "plain.png")
    footer = "model fixture, weights fingerprint 0123456789abcdef"
    with plots.signed(footer):
        for draw in draws:
            draw(tmp_path / "signed.png")
    for draw in draws:   # (the footer is gone once the block ends)
        draw(tmp_path / "plain.png")
    plain, signed, after = seen[:3], seen[3:6], seen[6:]
    for (texts, titles, heights), (texts_s, titles_s, heights_s) in zip(plain, signed):
        assert footer not in texts and texts_s == texts + [footer]
        assert titles_s == titles and heights_s == heights
    assert after == plain


def plots_module():
    from elmo.analysis import plots
    return plots


# ----------------------------------------------------------------------------- report
def _boot(diff, low, high):
    return {"diff": diff, "low": low, "high": high, "p_b_ge_a": 0.0}


def test_paper_findings_are_computed_from_the_numbers():
    from elmo.analysis.stats import verdict

    res = {"num_layers": 3,
           "pos": {"finding": verdict("layer 1", "layer 2", _boot(0.01, 0.005, 0.02))},
           "wsd": {"finding": verdict("layer 2", "layer 1", _boot(-0.03, -0.05, -0.01))}}
    f = markdown.paper_findings(res)
    assert f["pos"].startswith("holds") and f["wsd"].startswith("does not hold")
    res["pos"]["control_untrained"] = {"finding": verdict("layer 1", "layer 2", _boot(0.01, 0.005, 0.02))}
    assert "untrained copy of the model (random weights): holds" in markdown.paper_findings(res)["pos"]
    f = markdown.paper_findings({"num_layers": 2, "pos": {}, })
    assert f["pos"].startswith("not tested: the model has 1 LSTM layer")
    assert f["wsd"].startswith("not tested: the wsd section was not run")


def test_report_command_round_trips_through_the_parser(tmp_path):
    from elmo.cli import build_parser

    config = report.AnalysisConfig(seed=3, pos_train_sentences=50, wsd_max_lemmas=20,
                                   neighbors_corpus="brown:test", untrained_control=False)
    cmd = report.command("fixture", tmp_path / "out", config, "pos")
    argv = cmd.split()[1:]
    args = build_parser().parse_args(argv)
    again = report.AnalysisConfig(**{k: getattr(args, k) for k in report.AnalysisConfig.__dataclass_fields__})
    assert again == config and args.only == ["pos"]
    assert Path(args.out) == tmp_path / "out" / "reproduce" / "pos"


def test_read_mix_weights(tmp_path):
    (tmp_path / "w.json").write_text(json.dumps({"weights": [0.2, 0.8]}))
    assert report.read_mix_weights(tmp_path / "w.json") == [0.2, 0.8]
    (tmp_path / "r.json").write_text(json.dumps({"weights": [0.333, 0.333, 0.333]}))   # rounded
    assert report.read_mix_weights(tmp_path / "r.json") == [0.333, 0.333, 0.333]
    (tmp_path / "s.json").write_text(json.dumps([0.0, 0.0, 0.0]))
    assert report.read_mix_weights(tmp_path / "s.json") == pytest.approx([1 / 3] * 3)
    (tmp_path / "W.JSON").write_text(json.dumps({"weights": [0.2, 0.8]}))  # (read as a PyTorch file)
    assert report.read_mix_weights(tmp_path / "W.JSON") == [0.2, 0.8]
    torch.save({"encoder.mix.scalar_parameters": torch.tensor([0.0, np.log(3.0)]),
                "other.weight": torch.zeros(2)}, tmp_path / "m.pt")
    assert report.read_mix_weights(tmp_path / "m.pt") == pytest.approx([0.25, 0.75])
    torch.save({f"scalar_mix.scalar_parameters.{i}": torch.tensor([0.0]) for i in range(4)},
               tmp_path / "a.pt")
    assert report.read_mix_weights(tmp_path / "a.pt") == pytest.approx([0.25] * 4)
    # an experiment's results: the mean over seeds of the trained biLM's mix
    run = lambda seed, bilm, w: {"task": "pos", "variant": "elmo", "seed": seed, "elmo": {
        "bilm": bilm, "mix_weights": {"input": {"weights": w, "gamma": 1.0}}}}
    runs = [run(1, "m", [0.2, 0.8]), run(2, "m", [0.4, 0.6]), run(1, "random:m", [1.0, 0.0]),
            {"task": "pos", "variant": "baseline", "seed": 1, "elmo": None}]
    (tmp_path / "results.json").write_text(json.dumps({"runs": runs}))
    assert report.read_mix_weights(tmp_path / "results.json") == pytest.approx([0.3, 0.7])
    runs.append(run(1, "other", [0.5, 0.5]) | {"variant": "elmo-other"})
    (tmp_path / "results.json").write_text(json.dumps({"runs": runs}))
    with pytest.raises(ValueError, match="2 learned mixes"):
        report.read_mix_weights(tmp_path / "results.json")


def test_a_mix_learned_on_other_bilm_files_is_noted(tmp_path):
    """Only the mix's layer count was checked: a task's mix learned on another biLM of as many
    layers was drawn as this model's without a word."""
    from elmo.tasks.bilm_checksums import counted_files
    run = {"task": "pos", "variant": "elmo", "seed": 1,
           "elmo": {"bilm": "fixture", "mix_weights": {"input": {"weights": [0.2, 0.3, 0.5], "gamma": 1.0}}}}
    same = {"spec": "fixture", "files_sha256": counted_files("fixture")}
    other = {"spec": "fixture", "files_sha256": {**same["files_sha256"], "weights.hdf5": "0" * 64}}
    for entry, noted in ((same, False), (other, True)):
        path = tmp_path / "results.json"
        path.write_text(json.dumps({"runs": [run], "bilms": {"fixture": entry}}))
        learned_on = report.mix_learned_on(path)
        assert learned_on["spec"] == "fixture"
        note = report.mix_model_note(learned_on, "fixture")
        assert (note is not None) == noted
        if noted:
            assert "weights.hdf5" in note and "converted copy" in note
    assert report.mix_model_note({"spec": "x"}, "fixture") is None        # nothing recorded to compare
    (tmp_path / "w.json").write_text(json.dumps({"weights": [0.2, 0.8]}))
    assert report.mix_learned_on(tmp_path / "w.json") is None              # weights alone: no model
    # runs of one variant on two biLMs (an experiment resumed with another --bilm) were averaged
    two = [run, {**run, "seed": 2, "elmo": {**run["elmo"], "bilm": "default"}}]
    path.write_text(json.dumps({"runs": two}))
    with pytest.raises(ValueError, match="2 learned mixes"):
        report.read_mix_weights(path)


@pytest.mark.parametrize("name, content, named", [
    ("w.pt", b"not a pickle\n", "w.pt: not a PyTorch state dict"),          # an IndexError before
    ("w.json", b'{"weights": [0.5', "w.json: not JSON"),
    ("w.json", b'{"weights": [NaN, 1.0]}', "w.json: the mix needs a non-empty list of finite numbers"),
    ("w.json", b'{"weights": [-0.5, 1.5]}', "w.json: softmax weights cannot be negative"),
    ("w.json", b'{"weights": [0.2, 0.3]}', "w.json: softmax weights sum to 1, these to 0.5"),
    ("w.json", b'{"scalar_parameters": ["a"]}', "w.json: the mix needs a non-empty list of finite numbers"),
    ("w.json", b'{"other": 1}', "w.json: no 'weights', 'scalar_parameters' or 'runs'"),
    ("w.json", b"\xff", "w.json: not UTF-8 text"),
])
def test_a_bad_mix_weights_file_is_named(tmp_path, name, content, named):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError, match=named):
        report.read_mix_weights(tmp_path / name)


def test_contrast_pairs_in_broken_utf8_are_named(tmp_path):
    (tmp_path / "pairs.tsv").write_bytes(b"role\tthe \xff saw\n")
    with pytest.raises(ValueError, match="pairs.tsv: not UTF-8 text"):
        contrast.load_pairs(tmp_path / "pairs.tsv")


@pytest.mark.parametrize("setting, value, named", [
    ("pos_l2", float("nan"), "--pos-l2 must be a finite number"),
    ("wsd_test_fraction", 0.0, "--wsd-test-fraction must be between 0 and 1"),
    ("neighbors_k", 0, "--neighbors-k must be an integer of 1 or more"),
    ("pos_train_sentences", -1, "--pos-train-sentences must be an integer of 0 or more"),
    # numpy's bare "expected non-negative integer" once the POS or WSD vectors were computed,
    # torch's "Overflow when unpacking long long"
    ("seed", -1, r"--seed must be a whole number from 0 to 2\*\*64 - 1, got -1"),
    ("seed", 2**64, r"--seed must be a whole number from 0 to 2\*\*64 - 1, got 18446744073709551616"),
])
def test_analysis_settings_out_of_range_are_refused(setting, value, named):
    from elmo.config import ConfigError
    with pytest.raises(ConfigError, match=named):
        report.AnalysisConfig(**{setting: value})


def test_a_byte_order_mark_opening_a_contrast_file_is_no_part_of_it(tmp_path):
    # kept, it put the first item in a category of its own ("\ufeffrole"), or made a first
    # comment line an item with the wrong number of fields
    line = "role\tThe dog bit the man .\tThe man bit the dog .\tbit\tdog bites\tman bites\n"
    (tmp_path / "pairs.tsv").write_bytes(b"\xef\xbb\xbf" + line.encode())
    (tmp_path / "commented.tsv").write_bytes(b"\xef\xbb\xbf# my pairs\n" + line.encode())
    assert contrast.load_pairs(tmp_path / "pairs.tsv") == contrast.parse_pairs(line)
    assert contrast.load_pairs(tmp_path / "commented.tsv") == contrast.parse_pairs(line)


def _results(num_layers: int = 3, sections=("contrast",), **extra) -> dict:
    """The smallest results.json that :func:`markdown.render` writes a report of."""
    from dataclasses import asdict
    return {"model": "fixture", "num_layers": num_layers, "width": 32, "sections": list(sections),
            "config": asdict(report.AnalysisConfig()), "torch": {"version": "2", "threads": 1},
            "findings": {}, "seconds": {}, **extra}


def _backticked(text: str, prefix: str) -> str:
    """The command in backticks on the line of ``text`` that starts with ``prefix``."""
    line = next(ln for ln in text.splitlines() if ln.startswith(prefix))
    return line.split("`")[1]


def test_neighbors_reproduce_line_pastes_into_a_shell_with_every_setting(tmp_path):
    import shlex

    from elmo.cli import build_parser

    # a tiny corpus gave 2 layer-0 hits for k 5: the line said -k 2; paths with a space were
    # not quoted; --batch-size 8 was left out
    query = {"sentence": "the bank ran .", "word": "bank", "layers": [[]], "same_word": [[]],
             "occurrences": 0, "query_copies": 0, "glove": None,
             "layer0_static": [{"word": "a", "score": 0.5}, {"word": "b", "score": 0.4}]}
    corpus = str(tmp_path / "my corpus.txt")
    res = {"corpus": corpus, "corpus_spec": corpus, "max_sentences": 0, "n_sentences": 2, "n_tokens": 5,
           "queries": [query]}
    config = report.AnalysisConfig(neighbors_corpus=corpus, batch_size=8)
    model = str(tmp_path / "my model")
    text = "\n".join(markdown._render_neighbors(res, "cmd", model, config))
    cmd = _backticked(text, "* reproduce one:")
    assert cmd.endswith(" [--same-word]")
    argv = shlex.split(cmd[:-len(" [--same-word]")])
    assert argv[:2] == ["elmo", "neighbors"]
    args = build_parser().parse_args(argv[1:])
    assert (args.sentence, args.word, args.model, args.corpus) == ("the bank ran .", "bank", model, corpus)
    assert args.k == 5 and args.batch_size == 8 and args.max_sentences is None
    plain = "\n".join(markdown._render_neighbors(res, "cmd", "fixture", report.AnalysisConfig(neighbors_corpus=corpus)))
    assert "--batch-size" not in plain          # the default needs no option


def test_neighbours_report_says_why_glove_is_missing():
    """results.json recorded why GloVe could not be read (glove_missing) but the report left
    its line out without a word, under a header that lists GloVe's neighbours."""
    query = {"sentence": "the bank ran .", "word": "bank", "layers": [[]], "same_word": [[]],
             "occurrences": 0, "query_copies": 0, "glove": None, "glove_missing": "no glove-50d",
             "layer0_static": []}
    res = {"corpus": "c.txt", "corpus_spec": "c.txt", "max_sentences": 0, "n_sentences": 2,
           "n_tokens": 5, "queries": [query]}
    text = "\n".join(markdown._render_neighbors(res, "cmd", "fixture", report.AnalysisConfig()))
    assert "* GloVe (static): not available (no glove-50d)" in text
    # and its command does not ask for GloVe (it failed fetching it, after the layers)
    assert _backticked(text, "* reproduce one:").endswith("-k 5 --no-glove [--same-word]")


def test_everything_below_command_of_a_partial_run_has_its_sections(tmp_path):
    import shlex

    from elmo.cli import build_parser

    config = report.AnalysisConfig(seed=4, contrast_l2=0.5, untrained_control=False)
    for sections, only in ((["contrast"], ["contrast"]), (["wsd", "contrast"], ["wsd", "contrast"]),
                           (list(report.SECTIONS), None)):
        # (--only was left out: the command ran every section)
        res = _results(sections=sections)
        text = markdown.render(res, "fixture", tmp_path / "out", config)
        args = build_parser().parse_args(shlex.split(_backticked(text, "Everything below:"))[1:])
        assert args.only == only and args.model == "fixture" and Path(args.out) == tmp_path / "out"
        again = report.AnalysisConfig(**{k: getattr(args, k) for k in report.AnalysisConfig.__dataclass_fields__})
        assert again == config and args.threads == 1


def test_report_of_a_one_layer_model_speaks_of_one_layer(tmp_path):
    text = markdown.render(_results(num_layers=2), "fixture", tmp_path, report.AnalysisConfig())
    # (it said "1 LSTM layers" and "layers 1..1")
    assert "`fixture`, 1 LSTM layer, vectors" in text and "layer 1 is the biLSTM" in text
    assert "1..1" not in text
    assert "`fixture`, 2 LSTM layers, vectors" in markdown.render(_results(), "fixture", tmp_path,
                                                                report.AnalysisConfig())


def test_contrast_table_prints_no_negative_zero():
    movement = {"words": [-1e-9, 0.25], "targets": [-4e-8, -0.5], "sentence": [0.0, 0.1],
                "spread": [0.3, 0.4]}
    res = {"n_items": 4, "different_words": 0, "movement": movement,
           "categories": {"c": {"n_pairs": 2, "movement": {"targets": [-2e-9, 0.2]}, "chance": 0.5,
                                "chance_range": [0.2, 0.8],
                                "probe": [{"accuracy": 0.5, "pair_accuracy": 0.5}] * 2}}}
    text = "\n".join(markdown._render_contrast(res, "cmd"))
    assert "-0.000" not in text                       # (1 - cos of equal vectors is -1e-9)
    assert "| all words | 0.000 | 0.250 |" in text and "| target words | 0.000 | -0.500 |" in text
    assert "| target words, c | 0.000 | 0.200 |" in text


def test_the_wsd_difference_of_earlier_results_is_not_called_f1():
    """The layer 2 - layer 1 difference is of F1 now; a results.json written before holds one
    of accuracy, which --report-only printed as "F1 points"."""
    from elmo.analysis.markdown import _render_wsd
    r = {"n_lemmas": 2, "n_train": 4, "n_test": 2, "n_backoff": 0, "n_test_sense_unseen": 0,
         "layers": [0.5, 0.5, 0.5], "layers_seen_senses": [0.5, 0.5, 0.5], "mfs": 0.5,
         "mfs_seen_senses": 0.5, "layer2_minus_layer1": {"diff": 0.1, "low": 0.0, "high": 0.2}}
    text = "\n".join(_render_wsd(r, "elmo analyze fixture"))
    assert "+10.00 points of accuracy" in text and "F1 points" not in text
    r["layer2_minus_layer1"]["metric"] = "f1"
    assert "+10.00 F1 points" in "\n".join(_render_wsd(r, "elmo analyze fixture"))


def test_the_wsd_section_names_the_method_its_results_were_computed_with():
    """WSD takes the nearest sense centroid now (the paper's 5.3); a results.json written
    before holds 1-NN figures over single train examples, and --report-only must not call
    them centroid figures (nor new ones 1-NN)."""
    from elmo.analysis.markdown import _render_wsd
    r = {"n_lemmas": 2, "n_train": 4, "n_test": 2, "n_backoff": 0, "n_test_sense_unseen": 1,
         "layers": [0.5, 0.5, 0.5], "layers_seen_senses": [0.5, 0.5, 0.5], "mfs": 0.5,
         "mfs_seen_senses": 0.5}
    old = "\n".join(_render_wsd(r, "elmo analyze fixture"))
    figures, _, reproduce = old.partition("Reproduce:")
    assert "## Word senses: 1-nearest-neighbour per layer" in figures and "centroid" not in figures
    # its command computes centroids now: the line says it would not give these numbers
    assert "(this version computes the sense centroids with it, not the 1-NN of the numbers above)" in reproduce
    new = "\n".join(_render_wsd({**r, "method": "sense_centroid"}, "elmo analyze fixture"))
    assert "## Word senses: the nearest sense centroid per layer" in new
    assert "1-NN" not in new and "1-nearest" not in new


def test_a_state_dict_with_two_scalar_mixes_is_refused_not_read_as_its_first(tmp_path):
    """A task model with ELMo at its input and output holds two mixes; the report drew the
    first (by key order) as *the* given mix without a word."""
    torch.save({"elmo.scalar_mixes.0.scalar_parameters": torch.tensor([0.0, 0.0]),
                "elmo.scalar_mixes.1.scalar_parameters": torch.tensor([0.0, np.log(3.0)])},
               tmp_path / "two.pt")
    with pytest.raises(ValueError, match=r"two.pt: 2 scalar mixes in the state dict "
                                         r"\(elmo.scalar_mixes.0.scalar_parameters, "
                                         r"elmo.scalar_mixes.1.scalar_parameters\)"):
        report.read_mix_weights(tmp_path / "two.pt")
    torch.save({f"m{j}.scalar_parameters.{i}": torch.tensor([0.0]) for j in (1, 2) for i in range(3)},
               tmp_path / "allennlp.pt")                         # (AllenNLP's one tensor a layer)
    with pytest.raises(ValueError, match="2 scalar mixes"):
        report.read_mix_weights(tmp_path / "allennlp.pt")


def test_mix_weights_from_a_damaged_state_dict_are_refused(tmp_path):
    """torch.load does not check a record's CRC-32: a flipped byte inside a --mix-weights state
    dict was drawn as another mix, without a word."""
    torch.save({"scalar_mix.scalar_parameters": torch.tensor([0.0, 1.0, 2.0])}, tmp_path / "m.pt")
    data = bytearray((tmp_path / "m.pt").read_bytes())
    at = data.index(np.float32(2.0).tobytes())   # the third value, in its record
    data[at + 3] ^= 0x01
    (tmp_path / "m.pt").write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"m.pt: record '.*' fails its CRC-32 check; --mix-weights takes"):
        report.read_mix_weights(tmp_path / "m.pt")


def test_contrast_counts_the_pairs_whose_words_differ_not_their_targets():
    """The report says "N pairs whose sentences differ in their words", but N counted items
    (targets): a pair with two targets counted twice."""
    lines = ["c\tthe dog chased a cat .\tthe cat chased the dog .\tdog\tagent\tpatient",
             "c\tthe dog chased a cat .\tthe cat chased the dog .\tcat\tpatient\tagent"]
    for i in range(3):
        lines += [f"c\tp{i} saw q{i} .\tq{i} saw p{i} .\tp{i}\tagent\tpatient",
                  f"c\tp{i} saw q{i} .\tq{i} saw p{i} .\tq{i}\tpatient\tagent"]
    items = contrast.parse_pairs("\n".join(lines))
    res = contrast.contrast_eval(Embedder(random_bilm(), batch_size=8), items)
    assert res["n_items"] == 8 and res["categories"]["c"]["n_pairs"] == 4
    assert res["different_words"] == 1                   # (was 2: the pair's two targets)
    assert "; 1 pair whose sentences differ in their words" in "\n".join(
        markdown._render_contrast(res, "cmd"))


def test_contrast_chance_range_counts_a_pair_written_in_both_orders_once():
    """A pair written again with its sentences swapped asks the same question of the same
    two vectors (its ranking comes out the same): counted twice, the chance range was that of
    twice the rankings, too narrow, and a score by luck looked like a signal."""
    lines = []
    for i in range(10):
        a, b = f"p{i} v q{i} .", f"q{i} v p{i} ."
        lines += [f"c\t{a}\t{b}\tp{i}\tx\ty", f"c\t{b}\t{a}\tp{i}\ty\tx"]
    items = contrast.parse_pairs("\n".join(lines))
    res = contrast.contrast_eval(Embedder(random_bilm(), batch_size=8), items)
    cat = res["categories"]["c"]
    assert cat["n_items"] == 10 and cat["chance_range"] == list(stats.chance_range(10))
    assert cat["chance_range"] != list(stats.chance_range(20))      # (the narrower range it was)
    assert contrast.distinct_rankings(items) == 10 == contrast.distinct_rankings(items[::2])


def test_contrast_pair_written_in_both_orders_is_one_pair_in_counts_and_means():
    """The same pair with its sentences swapped counted as two pairs ("20 targets in 20
    pairs" for 10) and weighed twice in the movement means beside pairs written once."""
    lines = []
    for i in range(6):
        a, b = f"p{i} v q{i} .", f"q{i} v p{i} ."
        lines += [f"c\t{a}\t{b}\tp{i}\tx\ty"] + ([f"c\t{b}\t{a}\tp{i}\ty\tx"] if i < 3 else [])
    items = contrast.parse_pairs("\n".join(lines))
    once = [it for it in items if it.a.index(it.target) == 0]        # each pair as first written
    assert len(items) == 9 and len(once) == 6
    vecs = _synthetic_vecs(items, encode_label=False)
    rng = np.random.default_rng(0)
    vecs = {s: v + rng.normal(size=v.shape) for s, v in vecs.items()}  # pairs that move unequally
    both, single = contrast.movement(vecs, items), contrast.movement(vecs, once)
    for key in ("words", "targets", "sentence"):
        np.testing.assert_allclose(both[key], single[key])
    res = contrast.contrast_eval(Embedder(random_bilm(), batch_size=8), items)
    assert res["categories"]["c"]["n_pairs"] == 6
    assert contrast.probe_halves(vecs, items, layer=1)["n_pairs"] == 6


def test_contrast_eval_asks_a_question_written_twice_once():
    """An item written again with its sentences and labels swapped is the same question of
    the same vectors; kept, its targets were trained on and scored twice (weighing that
    pair double in every accuracy) and "n_items" counted it twice."""
    lines = []
    for i in range(6):
        a, b = f"p{i} v q{i} .", f"q{i} v p{i} ."
        lines += [f"c\t{a}\t{b}\tp{i}\tx\ty"] + ([f"c\t{b}\t{a}\tp{i}\ty\tx"] if i < 3 else [])
    items = contrast.parse_pairs("\n".join(lines + [lines[0]]))       # and one line twice
    once = contrast.parse_pairs("\n".join(line for line in lines if line.split("\t")[3] ==
                                          line.split("\t")[1].split()[0]))
    assert (len(items), len(once)) == (10, 6)
    embedder = Embedder(random_bilm(), batch_size=8)
    assert contrast.contrast_eval(embedder, items) == contrast.contrast_eval(embedder, once)
    assert contrast.distinct_items(items) == once


def test_a_query_of_another_width_layer_or_nan_is_refused_by_the_search():
    index = _random_index(dim=12)                       # layers 0..2, width 12
    cases = ((np.ones(16), 1, r"the index's width \(12,\), got shape \(16,\)"),  # (PyTorch's size mismatch)
             (np.ones((2, 12)), 1, r"got shape \(2, 12\)"),
             (np.ones(12), 3, r"layer 3: the index holds layers 0..2"),            # (an IndexError)
             (np.ones(12), -1, r"layer -1: the index holds layers 0..2"),         # (searched layer 2)
             (np.full(12, np.nan), 1, "NaN or infinite"))                         # (k hits of score NaN)
    for query, layer, message in cases:
        with pytest.raises(ValueError, match=message):
            index.search(query, layer, k=3)
        with pytest.raises(ValueError, match=message):
            index.search(query, layer, k=3, word="w1")
    assert len(index.search(np.ones(12, dtype=np.float16), 2, k=3)) == 3


def test_a_damaged_cached_index_is_built_again_and_a_new_one_reaches_the_disk(tmp_path, monkeypatch):
    import elmo.folder_swap
    import elmo.io

    synced = []
    real_fsync = elmo.io.fsync
    for module in (elmo.io, elmo.folder_swap):   # (a file's writes and the folder's)
        monkeypatch.setattr(module, "fsync", lambda path, folder=False: (synced.append(Path(path).name),
                                                                         real_fsync(path, folder)))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank raised its rates .\nwe sat on the river bank .\nhello there\n")
    logged = []
    index = neighbors.cached_index("fixture", corpus, tmp_path / "ix", log=logged.append)
    # (renamed into place unsynced: after a power cut the folder could name empty files)
    assert {"vectors.npy", "positions.npy", "sentences.txt", "index.json"} <= set(synced)
    folder, = [p for p in (tmp_path / "ix").iterdir() if p.is_dir()]
    vectors = np.array(index.vectors)

    def damaged_then_rebuilt(damage):
        damage()
        logged.clear()
        again = neighbors.cached_index("fixture", corpus, tmp_path / "ix", log=logged.append)
        assert any("a damaged neighbour index" in line and "building it again" in line for line in logged)
        assert again.sentences == index.sentences
        np.testing.assert_array_equal(again.positions, index.positions)
        np.testing.assert_array_equal(np.array(again.vectors), vectors)

    data = (folder / "vectors.npy").read_bytes()
    # a truncated file: "mmap length is greater than file size" on every query
    damaged_then_rebuilt(lambda: (folder / "vectors.npy").write_bytes(data[:len(data) // 2]))
    # a sentence line lost: the hits' words and contexts came from the sentences after it
    damaged_then_rebuilt(lambda: (folder / "sentences.txt").write_text("we sat on the river bank .\nhello there\n"))
    damaged_then_rebuilt(lambda: (folder / "positions.npy").unlink())
    with pytest.raises(neighbors.DamagedIndex, match="a damaged neighbour index"):
        (folder / "sentences.txt").write_text("the bank\n")
        neighbors.CorpusIndex.load(folder)


def test_a_results_json_of_another_shape_given_as_mix_weights_is_one_clear_error(tmp_path):
    def run(mix, **extra):
        return {"task": "pos", "variant": "elmo", "elmo": {"bilm": "b", "mix_weights": {"input": mix}}, **extra}

    path = tmp_path / "results.json"
    # each was a TypeError, AttributeError or KeyError from inside the reader (a traceback)
    for data, message in (({"runs": 5}, "'runs' are a list of runs"),
                          ({"runs": [5]}, "'runs' are a list of runs"),
                          ({"runs": {"a": {"task": "pos"}}}, "'runs' are a list of runs"),
                          ({"runs": [{"task": "pos", "elmo": [1]}]}, "run 1: its 'elmo' entry"),
                          ({"runs": [{"task": "pos", "elmo": {"mix_weights": [1]}}]}, "run 1: its 'elmo' entry"),
                          ({"runs": [run({"w": [1.0]})]}, "run 1: the mix at 'input' has no 'weights'"),
                          ({"runs": [run({"weights": ["x", 0.5]})]}, "finite numbers"),
                          ({"runs": [run({"weights": [0.5, 0.5]}), run({"weights": [0.2, 0.3, 0.5]})]},
                           r"learned mixes of \[2, 3\] layers")):
        path.write_text(json.dumps(data))
        with pytest.raises(ValueError, match=message) as caught:
            report.read_mix_weights(path)
        assert str(caught.value).startswith(f"{path}: ")
    # what the file says of the biLM, in another shape: nothing to compare, no AttributeError
    path.write_text(json.dumps({"runs": [run({"weights": [0.2, 0.3, 0.5]})], "bilms": [1]}))
    assert report.read_mix_weights(path) == pytest.approx([0.2, 0.3, 0.5])
    assert report.mix_learned_on(path) == {"spec": "b"}
    assert report.mix_model_note({"spec": "b", "files_sha256": [1]}, "fixture") is None


def test_a_state_dict_whose_scalar_parameters_are_no_tensor(tmp_path):
    torch.save({"scalar_parameters": [0.0, 0.0, 0.0]}, tmp_path / "list.pt")    # (an AttributeError)
    assert report.read_mix_weights(tmp_path / "list.pt") == pytest.approx([1 / 3] * 3)
    torch.save({"scalar_parameters": "abc"}, tmp_path / "text.pt")
    with pytest.raises(ValueError, match="text.pt: the mix needs a non-empty list of finite numbers"):
        report.read_mix_weights(tmp_path / "text.pt")


def test_an_index_is_built_a_chunk_of_tokens_at_a_time(monkeypatch):
    """CorpusIndex.build embedded the whole corpus in float32, concatenated it and scaled its
    rows before casting to float16: about six times the index's memory at the peak (tens of GB
    for a few million tokens). It now embeds BUILD_CHUNK_TOKENS tokens at a time (a longer
    sentence alone) into the float16 array, with the vectors and positions of one whole pass."""
    bilm = random_bilm()
    sentences = [["w%d" % (7 * i + j) for j in range(n)] for i, n in enumerate([3, 4, 2, 9, 1, 5, 0, 2])]
    whole = CorpusIndex.build(bilm, sentences)        # the default chunk holds all 26 tokens
    calls: list = []
    embed = neighbors.embed_layers

    def counted(model, rows, batch_size=32, bar=None):
        calls.append(sum(len(r) for r in rows))
        return embed(model, rows, batch_size, bar)

    monkeypatch.setattr(neighbors, "embed_layers", counted)
    monkeypatch.setattr(neighbors, "BUILD_CHUNK_TOKENS", 7, raising=False)
    chunked = CorpusIndex.build(bilm, sentences)
    assert calls == [7, 2, 9, 6, 2]                   # [3, 4], [2], [9], [1, 5], [2]
    assert chunked.sentences == whole.sentences and chunked.vectors.dtype == np.float16
    np.testing.assert_array_equal(chunked.positions, whole.positions)
    assert chunked.vectors.shape == whole.vectors.shape == (bilm.num_layers, 26, bilm.output_dim)
    # unit rows (entries within [-1, 1]) rounded to float16: one ulp is at most 2**-11; other
    # batches may move a float32 value across a rounding boundary, by one ulp
    np.testing.assert_allclose(chunked.vectors.astype(np.float32), whole.vectors.astype(np.float32),
                               rtol=0, atol=2.0 ** -11)


def _count_embedding(monkeypatch, chunk: int, *also) -> list:
    """Sets GATHER_CHUNK_SENTENCES to ``chunk`` and counts the sentences of each embed_layers
    call (through vectors, and ``also`` these modules' own imports of it); the counts."""
    from elmo.analysis import vectors
    calls: list = []
    embed = vectors.embed_layers

    def counted(model, rows, batch_size=32, bar=None):
        calls.append(len(rows))
        return embed(model, rows, batch_size, bar)

    for module in (vectors, *also):
        monkeypatch.setattr(module, "embed_layers", counted, raising=False)
    monkeypatch.setattr(vectors, "GATHER_CHUNK_SENTENCES", chunk, raising=False)
    return calls


def test_gathered_layers_embed_a_chunk_of_sentences_at_a_time(monkeypatch):
    """The WSD and PCA sections embedded all their sentences and held every token's float32
    layers at once, to keep one token a sentence (sentence-length times the memory needed).
    gathered_layers embeds GATHER_CHUNK_SENTENCES at a time, with gather's vectors."""
    from elmo.analysis import vectors
    bilm = random_bilm()
    sentences = [["w%d" % (5 * i + j) for j in range(2 + i % 4)] for i in range(7)]
    tokens = [i % len(s) for i, s in enumerate(sentences)]
    expected = vectors.gather(vectors.embed_layers(bilm, sentences), list(enumerate(tokens)))
    calls = _count_embedding(monkeypatch, 3)
    got = vectors.gathered_layers(bilm, sentences, tokens)
    assert calls == [3, 3, 1] and got.shape == expected.shape == (bilm.num_layers, 7, bilm.output_dim)
    # a sentence's vectors do not depend on the others batched with it, to float32 rounding of
    # sums over a few hundred terms (float32 eps 1.2e-7)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="2 token positions for 7 sentences"):
        vectors.gathered_layers(bilm, sentences, tokens[:2])


def test_wsd_embeds_its_sentences_a_chunk_at_a_time(monkeypatch):
    """wsd_eval held the float32 layers of every token of all its sentences at once (one
    token a sentence is used): it now embeds them GATHER_CHUNK_SENTENCES at a time."""
    from elmo.analysis import wsd
    from elmo.analysis.datasets import Sense, SenseExample
    examples = [SenseExample(f"s{s}-n", ("bank",), tuple(f"w{s} the bank {i} x{s}".split()))
                for s in (1, 2) for i in range(5)]
    senses = [Sense("bank", "n", "s1-n", 1, 3), Sense("bank", "n", "s2-n", 2, 9)]
    calls = _count_embedding(monkeypatch, 4, wsd)   # (the old wsd imported embed_layers into its namespace)
    res = wsd.wsd_eval(random_bilm(), examples, senses, test_fraction=0.5, seed=0)
    assert res["n_train"] + res["n_test"] == 10 and calls == [4, 4, 2]


def test_stacked_layers_fill_one_array_a_chunk_of_sentences_at_a_time(monkeypatch):
    """The POS probe concatenated the arrays of all its sentences, holding both at once (twice
    the memory of the result over all of Brown); stacked_layers writes them into one array
    made beforehand, GATHER_CHUNK_SENTENCES sentences at a time, with their vectors in order."""
    from elmo.analysis import vectors
    bilm = random_bilm()
    sentences = [["w%d" % (5 * i + j) for j in range(i % 4)] for i in range(7)]   # (one empty)
    expected = np.concatenate(vectors.embed_layers(bilm, sentences), axis=1)
    calls = _count_embedding(monkeypatch, 3)
    got = vectors.stacked_layers(bilm, sentences)
    assert calls == [3, 3, 1] and got.dtype == np.float32
    assert got.shape == expected.shape == (bilm.num_layers, sum(map(len, sentences)), bilm.output_dim)
    # (as in gathered_layers' test: other batch neighbours, float32 rounding of short sums)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def _tagged(n, seed):
    rng = np.random.default_rng(seed)
    words = [("the", "DET"), ("dog", "NOUN"), ("runs", "VERB"), ("a", "DET"), ("cat", "NOUN"), ("sat", "VERB")]
    return [[words[k] for k in rng.integers(len(words), size=rng.integers(1, 6))] for _ in range(n)]


def _fixed_layers(monkeypatch, bilm) -> list:
    """embed_layers replaced by layers of ``bilm``'s shape that depend on each sentence alone
    (the same whatever is embedded beside it); the sentences of each call."""
    import zlib

    from elmo.analysis import probes, vectors
    calls: list = []

    def fixed(model, rows, batch_size=32, bar=None):
        calls.append(len(rows))
        rngs = [np.random.default_rng(zlib.crc32(" ".join(s).encode())) for s in rows]
        return [r.normal(size=(bilm.num_layers, len(s), bilm.output_dim)).astype(np.float32)
                for r, s in zip(rngs, rows)]

    for module in (vectors, probes):   # (the old probes imported embed_layers into its namespace)
        monkeypatch.setattr(module, "embed_layers", fixed, raising=False)
    return calls


def test_pos_probe_embeds_a_chunk_of_sentences_at_a_time_with_the_same_results(monkeypatch):
    """pos_probe held every sentence's float32 layers and their concatenation at once: it now
    fills its train and test arrays GATHER_CHUNK_SENTENCES sentences at a time. Vectors that
    depend on a sentence alone give the very same results, whatever the chunk."""
    from elmo.analysis import probes, vectors
    bilm = random_bilm()
    calls = _fixed_layers(monkeypatch, bilm)
    train, test = _tagged(9, 0), _tagged(5, 1)
    whole = probes.pos_probe(bilm, train, test, max_iter=5)
    assert calls == [9, 5]
    calls.clear()
    monkeypatch.setattr(vectors, "GATHER_CHUNK_SENTENCES", 4, raising=False)
    chunked = probes.pos_probe(bilm, train, test, max_iter=5)
    assert calls == [4, 4, 1, 4, 1]
    assert chunked == whole


def test_train_probe_in_place_standardises_the_features_in_their_memory_to_the_same_probe():
    """in_place=True (the POS mix probe's: its layers over all of Brown and their standardised
    copy were held at once) uses the features' own memory, with the same numbers, and so the
    same probe; a read-only array is not written."""
    from elmo.analysis import probes
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(3, 40, 5)) * [1.0, 3.0, 0.5, 2.0, 1.5] + 2.0).astype(np.float32)
    y = rng.integers(0, 3, size=40)
    copied = probes.train_probe(x, y, 3, max_iter=5, mix=True)
    given = x.copy()
    in_place = probes.train_probe(given, y, 3, max_iter=5, mix=True, in_place=True)
    for name in ("mean", "std", "weight", "bias"):
        assert torch.equal(getattr(copied, name), getattr(in_place, name)), name
    assert copied.mix_weights() == in_place.mix_weights()
    # the array given now holds the standardised features, computed as the copy computes them
    x_t = torch.from_numpy(x)
    assert torch.equal(torch.from_numpy(given), (x_t - copied.mean.unsqueeze(-2)) / copied.std.unsqueeze(-2))
    frozen = x.copy()
    frozen.flags.writeable = False
    with warnings.catch_warnings():   # (torch's, of sharing a read-only array)
        warnings.simplefilter("ignore", UserWarning)
        probes.train_probe(frozen, y, 3, max_iter=5, mix=True, in_place=True)
    np.testing.assert_array_equal(frozen, x)


def test_pos_probe_standardises_its_train_layers_for_the_mix_probe_in_place(monkeypatch):
    """pos_probe's mix probe copied the train layers of every token to standardise them: it
    now does so in their own memory (their last use), with the very same results."""
    from elmo.analysis import probes
    bilm = random_bilm()
    _fixed_layers(monkeypatch, bilm)
    train, test = _tagged(9, 0), _tagged(5, 1)
    train_probe, mixed = probes.train_probe, []

    def recorded(x, *args, **kwargs):
        before = x.copy()
        probe = train_probe(x, *args, **kwargs)
        if kwargs.get("mix"):
            mixed.append((x, before, probe))
        return probe
    monkeypatch.setattr(probes, "train_probe", recorded)
    result = probes.pos_probe(bilm, train, test, max_iter=5)
    (given, before, probe), = mixed   # (the array given now holds them standardised)
    standardised = (torch.from_numpy(before) - probe.mean.unsqueeze(-2)) / probe.std.unsqueeze(-2)
    assert torch.equal(torch.from_numpy(given), standardised)

    def copying(x, *args, **kwargs):
        kwargs.pop("in_place", None)
        return train_probe(x, *args, **kwargs)
    monkeypatch.setattr(probes, "train_probe", copying)
    assert probes.pos_probe(bilm, train, test, max_iter=5) == result


@pytest.mark.parametrize("setting", [{"neighbors_corpus": "brown:dev"}, {"similarity_sets": "wordsim353"},
                                     {"similarity_sets": "PAIRS", "similarity_corpus": "brown:train"}])
def test_the_check_of_a_kept_sections_files_fetches_no_corpus(tmp_path, monkeypatch, setting):
    """Checking a kept section's files only reads: a corpus of the data cache that is not there
    (another machine's report) is named as unreadable, not downloaded before any section runs."""
    from elmo.analysis.inputs import check_inputs_kept
    from elmo.data import sources

    monkeypatch.setenv("ELMO_DATA", str(tmp_path / "data"))
    if setting.get("similarity_sets") == "PAIRS":   # (a pair file at hand: the corpus alone is missing)
        (tmp_path / "pairs.tsv").write_text("cat\tdog\t5\n")
        setting = {**setting, "similarity_sets": str(tmp_path / "pairs.tsv")}

    def fetched(name, *args, **kwargs):
        raise AssertionError(f"{name} fetched by a check")
    monkeypatch.setattr(sources, "get", fetched)
    section = "neighbors" if "neighbors_corpus" in setting else "similarity"
    earlier = {section: {"inputs": {"--neighbors-corpus brown:dev": "0" * 64}}}
    with pytest.raises(ValueError, match=f"results.json: its {section} section would be kept, but its input files "
                                         f"cannot be read now to check that they are the same"):
        check_inputs_kept(tmp_path / "results.json", earlier, section, report.AnalysisConfig(**setting))
