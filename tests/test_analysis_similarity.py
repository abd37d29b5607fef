"""The word similarity section: Spearman's rho per layer of words embedded alone."""
from __future__ import annotations

import json

import numpy as np
import pytest

from elmo.analysis import similarity, stats
from elmo.cli import main
from elmo.embedding import Embedder

from conftest import random_bilm

#: Human scores without ties, so that the reference ranks below need no tie rule.
_PAIRS = [("cat", "dog", 8.1), ("car", "tree", 1.2), ("king", "queen", 7.4), ("sun", "moon", 6.3),
          ("book", "idea", 2.5), ("river", "bank", 5.2), ("house", "home", 9.0), ("glass", "stone", 3.3)]


def _ranks(x):
    """Ranks 1..N of values without ties (the reference, not the package's average ranks)."""
    return np.argsort(np.argsort(x)).astype(np.float64) + 1


def _reference_rho(cosines, scores):
    """Spearman's rho without ties: Pearson's r of the ranks, by numpy's corrcoef."""
    return float(np.corrcoef(_ranks(cosines), _ranks(scores))[0, 1])


def _cosines_of_words_embedded_one_by_one(embedder, pairs):
    """(L + 1, N) float64 cosines, each word embedded in a call of its own."""
    vec = {w: embedder.embed_sentences([[w]], layers="all")[0][:, 0].astype(np.float64)
           for a, b, _ in pairs for w in (a, b)}
    cos = lambda x, y: float(x @ y / np.sqrt((x @ x) * (y @ y)))
    return np.array([[cos(vec[a][j], vec[b][j]) for a, b, _ in pairs]
                     for j in range(embedder.num_layers)])


def test_rho_per_layer_equals_an_independent_computation_and_each_word_is_embedded_once():
    embedder = Embedder(random_bilm(), batch_size=3)
    calls = []
    embed = embedder.embed_sentences
    embedder.embed_sentences = lambda sentences, **kw: calls.append(sentences) or embed(sentences, **kw)
    pairs = _PAIRS + [("cat", "house", 4.4)]          # a word in two pairs
    res = similarity.similarity_eval(embedder, {"mine": pairs}, seed=3, n_resamples=200)
    assert len(calls) == 1 and sorted(s[0] for s in calls[0]) == sorted({w for a, b, _ in pairs for w in (a, b)})
    del embedder.embed_sentences
    cos = _cosines_of_words_embedded_one_by_one(embedder, pairs)
    scores = np.array([s for _, _, s in pairs])
    got = res["sets"]["mine"]
    assert got["n_pairs"] == 9 and got["n_words"] == 16 and len(got["layers"]) == 3
    for j in range(3):
        # ranks are what rho reads: batched and single calls may differ in the float32 last
        # digits, far below the gaps between these cosines, so the ranks and rho agree exactly
        gaps = np.diff(np.sort(cos[j]))
        assert gaps.min() > 1e-4
        assert got["layers"][j] == pytest.approx(_reference_rho(cos[j], scores), abs=1e-12)
        low, high = got["layers_interval"][j]
        assert -1 <= low <= high <= 1
    # the same seed draws the same pairs: a rerun gives the same intervals
    again = similarity.similarity_eval(embedder, {"mine": pairs}, seed=3, n_resamples=200)
    assert again["sets"]["mine"]["layers_interval"] == got["layers_interval"]


def test_identical_words_have_cosine_one_in_every_layer():
    words = ["cat", "dog", "tree"]
    vectors = similarity.words_alone(Embedder(random_bilm(), batch_size=2), words)
    assert vectors.shape[:2] == (3, 3)
    cos = similarity.pair_cosines(vectors, {w: i for i, w in enumerate(words)},
                                  [("cat", "cat", 1.0), ("tree", "tree", 2.0), ("cat", "dog", 0.5)])
    # unit vectors in float64 from float32 ones: 1 up to a few float64 roundings per element
    assert np.abs(cos[:, :2] - 1).max() < 64 * 32 * np.finfo(np.float64).eps
    assert (np.abs(cos[:, 2]) < 1 - 1e-6).all()


def test_words_glove_lacks_are_counted_and_the_comparison_is_on_the_pairs_it_covers():
    rng = np.random.default_rng(0)
    pairs = _PAIRS + [("zyxwv", "cat", 0.4), ("Dog", "qqq", 4.9)]
    words = sorted({w.lower() for a, b, _ in _PAIRS for w in (a, b)})
    glove = (words, rng.normal(size=(len(words), 7)).astype(np.float32), False)
    res = similarity.similarity_eval(Embedder(random_bilm(), batch_size=4), {"t": pairs}, glove,
                                     n_resamples=50)["sets"]["t"]
    g = res["glove"]
    assert res["n_pairs"] == 10 and g["n_pairs"] == 8
    assert g["n_missing_words"] == 2 and g["missing_words"] == ["qqq", "zyxwv"]
    index = {w: i for i, w in enumerate(words)}
    vec = glove[1].astype(np.float64)
    cos = [vec[index[a]] @ vec[index[b]] / np.linalg.norm(vec[index[a]]) / np.linalg.norm(vec[index[b]])
           for a, b, _ in _PAIRS]
    assert g["rho"] == pytest.approx(_reference_rho(np.array(cos), [s for *_, s in _PAIRS]), abs=1e-12)
    assert len(g["layers"]) == 3 and g["interval"] is not None
    # a cased GloVe finds "Dog" as written when it has it (as the task models look words up)
    cased = (words + ["Dog", "qqq"], rng.normal(size=(len(words) + 2, 7)).astype(np.float32), True)
    covered, _, missing = similarity.glove_coverage(cased, pairs)
    assert covered == list(range(8)) + [9] and missing == ["zyxwv"]


def test_a_constant_side_gives_no_rho_but_a_reason():
    res = similarity.evaluate_set(np.ones((2, 2, 3), np.float32), {"a": 0, "b": 1},
                                  [("a", "b", 1.0), ("b", "a", 2.0)], None, seed=0)
    assert res["layers"] == [None, None] and "constant" in res["layers_undefined"][0]


def test_resampled_interval_draws_as_the_grouped_bootstrap_does_and_skips_undefined_draws():
    correct = np.random.default_rng(1).integers(0, 2, 40).astype(np.float64)
    mine = stats.resampled_interval(lambda i: float(correct[i].mean()), 40, 300, seed=5)
    theirs = stats.bootstrap_interval(correct, n_resamples=300, seed=5)
    assert (mine["low"], mine["high"]) == pytest.approx((theirs["low"], theirs["high"]), abs=1e-12)
    assert mine["n_undefined"] == 0
    none = stats.resampled_interval(lambda i: float("nan"), 5, 10)
    assert none == {"low": None, "high": None, "n_undefined": 10}
    with pytest.raises(ValueError, match="n_items"):
        stats.resampled_interval(lambda i: 0.0, 0)


def test_pair_files_that_hold_no_usable_pairs_are_named(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("word1\tword2\tscore\ncat\tdog\tnan\nsun\tmoon\t2\n")
    with pytest.raises(ValueError, match=r"bad.tsv: pair 1 \(cat, dog\) has the score nan"):
        similarity.read_pairs(bad)
    bad.write_text("word1\tword2\tscore\ncat\tdog\t3\n")
    with pytest.raises(ValueError, match="bad.tsv: 1 word pair"):
        similarity.read_pairs(bad)
    with pytest.raises(IsADirectoryError, match="is a directory"):
        similarity.read_pairs(tmp_path)


def _fake_data(tmp_path, monkeypatch, glove=True):
    """A pair corpus ``wordsim353`` and a small GloVe folder in place of the real downloads."""
    from elmo.analysis import datasets
    from elmo.data.fetch import DataError

    pairs = tmp_path / "wordsim353"
    pairs.mkdir()
    (pairs / "pairs.tsv").write_text("word1\tword2\tscore\n"
                                     + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in _PAIRS + [("zyxwv", "cat", 1)]))
    folder = tmp_path / "glove"
    folder.mkdir()
    words = sorted({w for a, b, _ in _PAIRS for w in (a, b)})
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    np.save(folder / "vectors.npy", np.random.default_rng(0).normal(size=(len(words), 5)).astype(np.float32))

    def corpus_dir(name, fetch=True):
        if name == "glove-50d" and not glove:
            raise DataError("cannot fetch glove-50d: offline")
        return {"glove-50d": folder, "wordsim353": pairs}[name]
    monkeypatch.setattr(datasets, "corpus_dir", corpus_dir)
    return pairs / "pairs.tsv"


def test_the_similarity_section_runs_alone_and_renders(tmp_path, monkeypatch):
    _fake_data(tmp_path, monkeypatch)
    out = tmp_path / "out"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "similarity",
                 "--similarity-sets", "wordsim353"]) == 0
    results = json.loads((out / "results.json").read_text())
    sim = results["similarity"]["sets"]["wordsim353"]
    assert results["sections"] == ["similarity"] and sim["n_pairs"] == 9 and len(sim["layers"]) == 3
    assert sim["glove"]["n_pairs"] == 8 and sim["glove"]["missing_words"] == ["zyxwv"]
    assert len(results["similarity"]["control_untrained"]["wordsim353"]) == 3
    text = (out / "report.md").read_text()
    assert "## Word similarity: Spearman's rho per layer" in text
    assert "| control: layer 2 of an untrained copy |" in text
    assert "GloVe 50d covers 8 of 9 pairs (1 word missing: zyxwv)" in text
    assert "--similarity-sets wordsim353" in text and "--only similarity" in text
    # what the intervals resample: the sections present only (it named POS sentences and WSD lemmas)
    assert "Bootstrap intervals resample word pairs (word similarity), 1000 times." in text
    assert "sentences" not in next(line for line in text.splitlines() if "Numbers are from" in line)
    assert (out / "similarity.png").stat().st_size > 1000
    assert main(["analyze", "fixture", "--out", str(out), "--report-only"]) == 0
    assert (out / "report.md").read_text() == text


def test_the_section_without_glove_says_why_and_bad_sets_are_refused_before_any_section(
        tmp_path, monkeypatch, capsys):
    path = _fake_data(tmp_path, monkeypatch, glove=False)
    out = tmp_path / "out"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "similarity", "--similarity-sets",
                 str(path), "--no-untrained-control"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert "glove" not in results["similarity"]["sets"][str(path)]
    assert "control_untrained" not in results["similarity"]
    assert "GloVe baseline: not available (cannot fetch glove-50d: offline)" in (out / "report.md").read_text()
    capsys.readouterr()
    for spec, message in (("brown", "--similarity-sets brown: no such file, nor a corpus of word pairs"),
                          ("wordsim353,,x", "give distinct pair corpora or files")):
        assert main(["analyze", "fixture", "--out", str(tmp_path / "no"), "--only", "contrast",
                     "--only", "similarity", "--similarity-sets", spec]) == 1
        captured = capsys.readouterr()
        assert message in captured.err and captured.err.count("\n") == 1 and "contrast ..." not in captured.out
        assert not (tmp_path / "no").exists()


def test_type_averages_are_the_mean_of_each_words_vectors_over_its_occurrences():
    embedder = Embedder(random_bilm(), batch_size=2)
    corpus = [["the", "cat", "sat", "."], ["a", "dog", "and", "a", "cat"], ["no", "pair", "word"],
              ["the", "king", "."]]
    words = ["cat", "dog", "king", "queen"]
    means, counts = similarity.type_averages(embedder, corpus, words)
    assert counts.tolist() == [2, 1, 1, 0] and means.shape == (3, 4, embedder.dim)
    # the same sentences in the same batches: only the float64 summation order can differ
    held = [s for s in corpus if s != ["no", "pair", "word"]]
    arrays = embedder.embed_sentences(held, layers="all")
    cat = (arrays[0][:, 1].astype(np.float64) + arrays[1][:, 4]) / 2
    assert np.abs(means[:, 0] - cat).max() <= 8 * np.finfo(np.float64).eps * np.abs(cat).max()
    assert np.array_equal(means[:, 1], arrays[1][:, 1].astype(np.float64)) and not means[:, 3].any()
    pairs = [("cat", "dog", 3.0), ("king", "cat", 1.0), ("dog", "king", 2.0), ("queen", "cat", 4.0)]
    res = similarity.similarity_eval(embedder, {"t": pairs}, corpus=corpus, n_resamples=20)
    typed = res["type_average"]["t"]
    assert typed["n_pairs"] == 3 and typed["missing_words"] == ["queen"] and len(typed["alone_layers"]) == 3
    unit = means[:, :3] / np.linalg.norm(means[:, :3], axis=-1, keepdims=True)   # (queen: no occurrence)
    index = {w: i for i, w in enumerate(words)}
    for j in range(3):
        cos = [unit[j, index[a]] @ unit[j, index[b]] for a, b, _ in pairs[:3]]
        assert typed["layers"][j] == pytest.approx(_reference_rho(np.array(cos), [3.0, 1.0, 2.0]), abs=1e-12)


def test_the_section_with_a_corpus_reports_type_averages_and_refuses_an_empty_corpus(tmp_path, monkeypatch, capsys):
    path = _fake_data(tmp_path, monkeypatch)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat and the dog .\nthe king and the queen .\nthe sun , the moon .\n")
    out = tmp_path / "out"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "similarity", "--similarity-sets", str(path),
                 "--similarity-corpus", str(corpus), "--no-untrained-control"]) == 0
    typed = json.loads((out / "results.json").read_text())["similarity"]["type_average"][str(path)]
    assert typed["n_pairs"] == 3 and "zyxwv" in typed["missing_words"]
    text = (out / "report.md").read_text()
    assert f"Type averages over `{corpus}`" in text and f"--similarity-corpus {corpus}" in text
    corpus.write_text("\n\n")
    capsys.readouterr()
    assert main(["analyze", "fixture", "--out", str(tmp_path / "no"), "--only", "similarity",
                 "--similarity-sets", "wordsim353", "--similarity-corpus", str(corpus)]) == 1
    assert f"--similarity-corpus {corpus}: {corpus} holds no sentences" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_the_undefined_draws_are_counted_and_a_small_set_is_warned_about_in_the_report():
    """3 pairs: a ninth of the draws repeat one pair (rho undefined); their count is in the
    results, as resampled_interval counts them, and the report warns below MIN_PAIRS pairs
    (on GloVe's share of a set too), but not at it."""
    from elmo.analysis.markdown import _render_similarity
    rng = np.random.default_rng(0)
    few = _PAIRS[:3]
    words = sorted({w for a, b, _ in _PAIRS for w in (a, b)})
    glove = (words, rng.normal(size=(len(words), 7)).astype(np.float32), False)
    many = _PAIRS + [("cat", "sun", 0.3), ("tree", "moon", 4.1)]
    assert len(many) == similarity.MIN_PAIRS
    res = similarity.similarity_eval(Embedder(random_bilm(), batch_size=4), {"few": few, "many": many},
                                     glove, seed=2, n_resamples=300)
    cos = similarity.pair_cosines(similarity.words_alone(Embedder(random_bilm(), batch_size=4), words),
                                  {w: i for i, w in enumerate(words)}, few)
    scores = np.array([s for _, _, s in few])
    drawn = res["sets"]["few"]["layers_undefined_draws"]
    for j, n in enumerate(drawn):
        expect = stats.resampled_interval(lambda i: similarity.spearman(cos[j][i], scores[i]), 3, 300, seed=2)
        assert n == expect["n_undefined"] > 0
    assert res["sets"]["few"]["glove"]["undefined_draws"] > 0
    text = "\n".join(_render_similarity(res, "cmd"))
    assert "**Warning: few has only 3 pairs**" in text and "**Warning: few, GloVe's pairs has only 3 pairs**" in text
    assert "Warning: many" not in text
    assert f"few layer 0: {drawn[0]}" in text and f"few, GloVe: {res['sets']['few']['glove']['undefined_draws']}" in text


def test_the_picture_shows_the_type_averages_when_they_were_computed(monkeypatch):
    from elmo.analysis import plots
    corpus = [["the", "cat", "and", "the", "dog"], ["king", "and", "queen"], ["sun", "or", "moon"],
              ["the", "car", "by", "a", "tree"]]
    res = similarity.similarity_eval(Embedder(random_bilm(), batch_size=4), {"t": _PAIRS},
                                     corpus=corpus, n_resamples=20)
    shown = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: shown.append(
        {line.get_label(): list(line.get_ydata()) for line in fig.axes[0].get_lines()}) or path)
    plots.similarity_layers(res, "unused.png")
    typed = res.pop("type_average")["t"]
    plots.similarity_layers(res, "unused.png")
    assert typed["n_pairs"] == 4 and None not in typed["layers"]
    assert shown[0]["t: type averages on 4 pairs"] == typed["layers"]
    assert not any("type averages" in label for label in shown[1])


def test_pair_lines_split_at_tabs_only_and_a_word_with_a_space_is_refused(tmp_path):
    """A tab-separated line's comma is no column break: "3,5" was read as the score 3 (and a
    comma in a word split it); a comma-separated file still reads. A side with a space was
    embedded as one token holding a space."""
    path = tmp_path / "p.tsv"
    path.write_text("w1\tw2\tscore\ncat\tdog\t8\nfoo\tbar\t3,5\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3: not a word pair with a score .*'foo\\tbar\\t3,5'"):
        similarity.read_pairs(path)
    path.write_text("cat\tdog\t8\nrock,n\troll\t2\n", encoding="utf-8")
    assert similarity.read_pairs(path)[1] == ("rock,n", "roll", 2.0)
    path.write_text("w1,w2,score\ncat,dog,8\nsun,moon,6\n", encoding="utf-8")
    assert similarity.read_pairs(path) == [("cat", "dog", 8.0), ("sun", "moon", 6.0)]
    path.write_text("cat\tdog\t8\nice cream\tdessert\t7.5\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"p.tsv: pair 2 has 'ice cream', which holds a space"):
        similarity.read_pairs(path)


def test_repeated_pairs_are_listed_and_named_in_the_report():
    from elmo.analysis.markdown import _render_similarity
    pairs = _PAIRS + [("dog", "cat", 8.1), ("sun", "moon", 1.0), ("cat", "dog", 8.1)]
    res = similarity.similarity_eval(Embedder(random_bilm(), batch_size=4), {"s": pairs}, n_resamples=0)
    assert res["sets"]["s"]["repeated_pairs"] == [["dog", "cat"], ["sun", "moon"], ["cat", "dog"]]
    assert res["sets"]["s"]["n_pairs"] == 11      # (each still counts: the file is what is scored)
    text = "\n".join(_render_similarity(res, "cmd"))
    assert "**s**: 3 pairs repeat an earlier pair (the same two words, in either order)" in text
    assert "dog/cat, sun/moon, cat/dog." in text
    one = similarity.similarity_eval(Embedder(random_bilm(), batch_size=4), {"s": _PAIRS + [_PAIRS[0]]},
                                     n_resamples=0)
    assert "**s**: 1 pair repeats an earlier pair" in "\n".join(_render_similarity(one, "cmd"))


def test_a_pair_file_that_is_not_utf8_is_refused_naming_the_byte(tmp_path):
    """A Latin-1 "café" was read with U+FFFD for its é: another word, scored without a word."""
    path = tmp_path / "p.tsv"
    path.write_bytes("cat\tdog\t8\ncafé\tcoffee\t6\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"p.tsv: not UTF-8 text \(line 2: byte 0xe9 at byte offset 13\)"):
        similarity.read_pairs(path)
    path.write_bytes("cat\tdog\t8\ncafé\tcoffee\t6\n".encode("utf-8"))
    assert similarity.read_pairs(path)[1] == ("café", "coffee", 6.0)


def test_the_type_averages_few_pairs_and_undefined_draws_are_reported_too():
    from elmo.analysis.markdown import _sample_lines
    r = {"sets": {"s": {"n_pairs": 20, "layers_undefined_draws": [0, 0]}},
         "type_average": {"s": {"n_pairs": 4, "layers_undefined_draws": [3, 0]}}}
    text = "\n".join(_sample_lines(r))
    assert "**Warning: s, type averages has only 4 pairs**" in text and "Warning: s has" not in text
    assert "left out as undefined (a constant side): s, type averages layer 0: 3." in text


def test_a_long_missing_word_is_cut_in_the_report():
    from elmo.analysis.markdown import _render_similarity
    long_word = "x" * 300
    words = sorted({w for a, b, _ in _PAIRS for w in (a, b)})
    glove = (words, np.random.default_rng(0).normal(size=(len(words), 5)).astype(np.float32), False)
    res = similarity.similarity_eval(Embedder(random_bilm(), batch_size=4), {"s": _PAIRS + [(long_word, "cat", 2.0)]},
                                     glove, n_resamples=0)
    line = next(x for x in _render_similarity(res, "cmd") if "GloVe 50d covers" in x)
    assert f"{'x' * 40}… (300 characters)" in line and long_word not in line


def test_every_undefined_rho_of_the_report_is_explained_and_none_shows_empty_parentheses():
    """GloVe on 1 pair was printed ``GloVe - ()``, and its dashes, those of the layers on its
    pairs and of type averages on no pair had no reason beside them; a rho without an interval
    (``n_resamples`` 0) was followed by ``()``."""
    from elmo.analysis.markdown import _render_similarity
    glove = (["cat", "dog"], np.eye(2, dtype=np.float32), False)       # covers the first pair only
    corpus = [["nothing", "of", "the", "pairs"]]
    res = similarity.similarity_eval(Embedder(random_bilm(), batch_size=4), {"s": _PAIRS}, glove,
                                     n_resamples=0, corpus=corpus)
    g, averaged = res["sets"]["s"]["glove"], res["type_average"]["s"]
    assert g["rho"] is None and g["layers"] == [None] * len(res["sets"]["s"]["layers"])
    assert set(g["layers_undefined"]) == {g["undefined"]} and g["undefined"].startswith("1 item")
    assert set(averaged["alone_layers_undefined"]) == {"no pairs"}
    text = "\n".join(_render_similarity(res, "cmd", "corpus.txt"))
    assert "On those pairs: GloVe -; layer 0 -" in text and "()" not in text
    assert f"A `-` is undefined: {g['undefined']}; no pairs." in text
