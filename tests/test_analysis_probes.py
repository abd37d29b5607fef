"""Probes, WSD 1-NN and the bootstrap on synthetic data where the answer is known."""
from __future__ import annotations

import numpy as np
import pytest

from elmo.analysis import contrast, probes, stats, vectors, wsd
from elmo.analysis.datasets import Sense, SenseExample


def _tagged_vectors(rng, tags, dim=16, noise=0.3, contains_tag=True):
    """(N, D) vectors: the first len(tags) dims one-hot the tag (if contains_tag), plus noise."""
    n_classes = tags.max() + 1
    x = rng.normal(0, noise, size=(len(tags), dim))
    if contains_tag:
        x[np.arange(len(tags)), tags] += 3.0
    assert n_classes <= dim
    return x.astype(np.float32)


def test_probe_on_vectors_that_contain_the_tag_gets_it_right():
    rng = np.random.default_rng(0)
    y_train, y_test = rng.integers(0, 5, 400), rng.integers(0, 5, 200)
    probe = probes.train_probe(_tagged_vectors(rng, y_train), y_train, 5, l2=1e-4)
    assert (probe.predict(_tagged_vectors(rng, y_test)) == y_test).mean() == 1.0


def test_probe_on_vectors_without_the_tag_is_near_chance():
    rng = np.random.default_rng(1)
    y_train, y_test = rng.integers(0, 5, 400), rng.integers(0, 5, 400)
    probe = probes.train_probe(_tagged_vectors(rng, y_train, contains_tag=False), y_train, 5)
    acc = (probe.predict(_tagged_vectors(rng, y_test, contains_tag=False)) == y_test).mean()
    assert acc < 0.35                                     # chance is 0.2


def test_mix_probe_leans_on_the_layer_that_holds_the_tag():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 4, 600)
    layers = np.stack([_tagged_vectors(rng, y, contains_tag=(j == 2)) for j in range(3)])
    probe = probes.train_probe(layers, y, 4, l2=1e-4, mix=True)
    weights = probe.mix_weights()
    assert np.argmax(weights) == 2 and abs(sum(weights) - 1) < 1e-5
    y_test = rng.integers(0, 4, 200)
    test = np.stack([_tagged_vectors(rng, y_test, contains_tag=(j == 2)) for j in range(3)])
    assert (probe.predict(test) == y_test).mean() > 0.95


def test_probe_rejects_mismatched_shapes():
    with pytest.raises(ValueError):
        probes.train_probe(np.zeros((3, 4)), [0, 1], 2)
    with pytest.raises(ValueError):
        probes.train_probe(np.zeros((3, 4)), [0, 1, 0], 2, mix=True)


def test_probe_refuses_labels_out_of_range_and_features_that_are_not_finite():
    """(a label >= n_classes or < 0 was torch's IndexError from inside L-BFGS; NaN features a
    RuntimeError "cannot be converted to type float")"""
    x = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    with pytest.raises(ValueError, match="class ids from 0 to 1; got 0 to 4"):
        probes.train_probe(x, [0, 1, 2, 3, 4], 2)
    with pytest.raises(ValueError, match="got -1 to 1"):
        probes.train_probe(x, [0, 1, -1, 0, 1], 2)
    x[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        probes.train_probe(x, [0, 1, 0, 1, 0], 2)


@pytest.mark.parametrize("labels, message", [
    ([0.5, 1.0, 0.0, 1.0, 0.0], "got 0.5"),                  # (trained as class 0, in silence)
    ([0.0, 1.0, 0.0, 1.0, np.nan], "got nan"),               # (read as -9223372036854775808)
    (["0", "1", "0", "1", "0"], "such as '0'"),              # (torch's list of the dtypes it takes)
    ([[0, 1]] * 5, r"one class id per feature row \(N,\), got shape \(5, 2\)"),
])
def test_probe_labels_must_be_whole_class_ids(labels, message):
    x = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    with pytest.raises(ValueError, match=message):
        probes.train_probe(x, labels, 2)
    whole = probes.train_probe(x, [0.0, 1.0, 0.0, 1.0, 0.0], 2)    # whole numbers as floats are ids
    assert np.array_equal(whole.weight, probes.train_probe(x, [0, 1, 0, 1, 0], 2).weight)


def test_majority_baselines():
    train = [[("the", "at"), ("dog", "nn"), ("runs", "vbz")], [("the", "at"), ("run", "nn")]]
    test = [[("the", "at"), ("run", "nn"), ("cat", "nn")]]
    b = probes.majority_baselines(train, test)
    # majority tag is "at" (2 of 5): right once of 3; word majority: the->at, run->nn, cat->at
    assert b["majority_tag"] == pytest.approx(1 / 3)
    assert b["word_majority_tag"] == pytest.approx(2 / 3)


# ----------------------------------------------------------------------------- bootstrap
def test_bootstrap_and_verdict():
    a, b = np.ones(50), np.zeros(50)
    boot = stats.paired_bootstrap(a, b, groups=np.arange(50) // 5)
    assert boot["diff"] == boot["low"] == boot["high"] == 1.0
    assert stats.verdict("x", "y", boot).startswith("holds")
    assert stats.verdict("y", "x", stats.paired_bootstrap(b, a)).startswith("does not hold")
    rng = np.random.default_rng(0)
    noisy = rng.integers(0, 2, 200)
    same = stats.paired_bootstrap(noisy, noisy[::-1].copy())
    assert stats.verdict("x", "y", same).startswith("not shown")


def test_a_verdicts_difference_that_rounds_to_zero_has_no_minus():
    # (-0.0004 read "-0.0 points"); the interval's bounds keep their signs
    boot = {"diff": -0.000_04, "low": -0.02, "high": 0.02, "n_groups": 50}
    assert "(+0.0 points, 95% interval -2.0 to +2.0)" in stats.verdict("x", "y", boot)


def test_verdict_on_too_few_test_groups_is_not_shown():
    # one test sentence resamples to itself: an interval of width 0 around any difference,
    # and one token of difference "held"
    one = stats.paired_bootstrap([1, 1, 0, 1], [1, 0, 0, 1], groups=[0, 0, 0, 0])
    assert one["low"] == one["high"] == 0.25 and one["n_groups"] == 1
    text = stats.verdict("layer 1", "layer 2", one)
    assert text.startswith("not shown: 1 test group(s)") and "at least 10" in text
    few = stats.paired_bootstrap(np.ones(9), np.zeros(9), groups=np.arange(9))
    assert stats.verdict("x", "y", few).startswith("not shown: 9 test group(s)")
    enough = stats.paired_bootstrap(np.ones(10), np.zeros(10), groups=np.arange(10))
    assert stats.verdict("x", "y", enough).startswith("holds")


def test_bootstrap_interval_of_accuracy_and_f1():
    exact = stats.bootstrap_interval(np.ones(30), groups=np.arange(30) // 3)
    assert exact == {"value": 1.0, "low": 1.0, "high": 1.0, "n": 30}
    rng = np.random.default_rng(0)
    correct = (rng.random(2000) < 0.7).astype(float)
    b = stats.bootstrap_interval(correct)
    # binomial standard error sqrt(.7 * .3 / 2000) = 0.0102: the interval spans about +-2 of it
    assert b["low"] < 0.7 < b["high"] and 0.03 < b["high"] - b["low"] < 0.05
    # with items left unpredicted the score is F1 = 2PR / (P + R), as wsd.f1_score computes
    preds = ["a", None, "b", "a", None, "c"]
    gold = ["a", "a", "b", "b", "c", "c"]
    f1 = stats.bootstrap_interval([p == g for p, g in zip(preds, gold)],
                                  predicted=[p is not None for p in preds])["value"]
    assert f1 == pytest.approx(wsd.f1_score(preds, gold)["f1"])


def test_chance_range_is_the_central_binomial_range():
    assert stats.chance_range(32) == (10 / 32, 22 / 32)      # P(X <= 9) = 0.010, P(X <= 10) = 0.025
    low, high = stats.chance_range(1000)
    assert low == pytest.approx(0.469, abs=0.002) and high == pytest.approx(0.531, abs=0.002)
    rng = np.random.default_rng(0)                           # a coin lands inside ~95% of the time
    inside = np.mean([low <= rng.integers(0, 2, 1000).mean() <= high for _ in range(400)])
    assert 0.92 < inside <= 1.0



def test_chance_range_of_a_large_category_and_bad_bootstrap_inputs_are_clear():
    """comb(n, k) * p ** k overflowed a float from n = 1030 on (a contrast category of that many
    targets failed with OverflowError after its probes had run); groups of another length, no
    resamples or a NaN score failed deep in numpy or gave NaN intervals."""
    low, high = stats.chance_range(2000)          # mean 1000, sd 22.4: 1000 +- 1.96 sd
    assert (low, high) == (0.478, 0.522)
    assert stats.chance_range(10) == (0.2, 0.8)   # P(X <= 1) = 0.011, P(X <= 2) = 0.055
    for call, named in ((lambda: stats.paired_bootstrap([1, 0, 1], [0, 0, 1], groups=[0, 1]), "one group id per item"),
                        (lambda: stats.bootstrap_interval([1, 0, 1], groups=[0, 1]), "one group id per item"),
                        (lambda: stats.paired_bootstrap([1, 0], [0, 1], n_resamples=0), "n_resamples"),
                        (lambda: stats.paired_bootstrap([float("nan"), 1], [0, 1]), "finite"),
                        (lambda: stats.bootstrap_interval([1, float("nan")]), "finite")):
        with pytest.raises(ValueError, match=named):
            call()

# ----------------------------------------------------------------------------- WSD
def test_one_nn_on_separable_clusters_gets_it_right():
    rng = np.random.default_rng(0)
    centres = {("bank", "n"): rng.normal(size=(3, 8)), ("play", "v"): rng.normal(size=(2, 8))}

    def draw(n):
        vecs, labels, keys = [], [], []
        for key, c in centres.items():
            for _ in range(n):
                s = int(rng.integers(len(c)))
                vecs.append(c[s] * 5 + rng.normal(0, 0.1, 8))
                labels.append(f"{key[0]}-{s}")
                keys.append(key)
        return np.array(vecs), labels, keys

    xtr, ytr, ktr = draw(20)
    xte, yte, kte = draw(20)
    preds = wsd.nearest_neighbour(xtr, ytr, ktr, xte, kte)
    assert preds == yte
    assert wsd.f1_score(preds, yte)["f1"] == 1.0


def test_one_nn_only_looks_at_the_same_lemma_and_backs_off():
    xtr = np.array([[1.0, 0.0], [0.0, 1.0]])
    # the query is identical to the "other" lemma's vector, but must not take its label
    preds = wsd.nearest_neighbour(xtr, ["a1", "b1"], [("a", "n"), ("b", "n")],
                                  np.array([[0.0, 1.0], [1.0, 1.0]]), [("a", "n"), ("c", "n")],
                                  backoff={("c", "n"): "c-mfs"})
    assert preds == ["a1", "c-mfs"]
    no_backoff = wsd.nearest_neighbour(xtr, ["a1", "b1"], [("a", "n"), ("b", "n")],
                                       np.array([[1.0, 1.0]]), [("c", "n")])
    assert no_backoff == [None]
    f = wsd.f1_score([None, "x", "y"], ["z", "x", "q"])        # P 1/2, R 1/3
    assert f["precision"] == 0.5 and f["recall"] == pytest.approx(1 / 3)
    assert f["f1"] == pytest.approx(0.4)


def test_one_nn_ties_do_not_depend_on_the_order_of_the_train_examples():
    # layer 0 gives every occurrence of a word form one vector: all its train items tie, and
    # the first of them decided (a layer-0 score set by the order of the examples file)
    key = ("bank", "n")
    same = np.tile([[1.0, 2.0]], (4, 1))
    for labels in (["s1", "s2", "s2", "s3"], ["s2", "s3", "s1", "s2"], ["s3", "s2", "s1", "s2"]):
        assert wsd.nearest_neighbour(same, labels, [key] * 4, same[:1], [key]) == ["s2"]
    # equal counts: the most frequent sense when it is among them, else the first seen
    two = same[:2]
    assert wsd.nearest_neighbour(two, ["s1", "s2"], [key] * 2, two[:1], [key], {key: "s2"}) == ["s2"]
    assert wsd.nearest_neighbour(two, ["s1", "s2"], [key] * 2, two[:1], [key], {key: "s9"}) == ["s1"]
    # a strictly nearer item still wins over a majority further away
    far = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    assert wsd.nearest_neighbour(far, ["a", "b", "b"], [key] * 3, np.array([[1.0, 0.1]]), [key]) == ["a"]


def test_most_frequent_sense_uses_semcor_counts_then_sense_number():
    senses = [Sense("bank", "n", "s2", 2, 20), Sense("bank", "n", "s1", 1, 5),
              Sense("bank", "v", "v1", 1, 0), Sense("bank", "v", "v2", 2, 0)]
    mfs = wsd.most_frequent_senses(senses)
    assert mfs == {("bank", "n"): "s2", ("bank", "v"): "v1"}


def test_find_target_inflections():
    assert wsd.find_target("the banks were closed".split(), "bank", "n") == 1
    assert wsd.find_target("she stopped singing".split(), "stop", "v") == 1
    assert wsd.find_target("we are making tea".split(), "make", "v") == 2
    assert wsd.find_target("a happier child".split(), "happy", "a") == 1
    assert wsd.find_target("nothing here".split(), "bank", "n") is None
    assert wsd.clean_lemma("Galore(ip)") == "galore"


def _inst(lemma, synset, i):
    return wsd.Instance(lemma, "n", synset, ("a", lemma, str(i)), 1)


def test_ambiguous_and_split_by_lemma():
    items = ([_inst("bank", "s1", i) for i in range(10)] + [_inst("bank", "s2", i) for i in range(10)]
             + [_inst("cat", "c1", i) for i in range(5)])
    groups = wsd.ambiguous(items)
    assert list(groups) == [("bank", "n")]                  # cat has one sense only
    train, test = wsd.split_by_lemma(groups, 0.5, seed=3)
    assert sorted(train + test, key=id) == sorted(groups[("bank", "n")], key=id)
    assert (train, test) == wsd.split_by_lemma(groups, 0.5, seed=3)   # fixed seed
    # a lemma's split does not depend on the other lemmas included
    more = {**groups, ("pen", "n"): [_inst("pen", "p1", 0), _inst("pen", "p2", 1)]}
    train2, test2 = wsd.split_by_lemma(more, 0.5, seed=3)
    assert [t for t in test2 if t.lemma == "bank"] == test
    assert wsd.split_by_lemma(groups, 1.0)[0] == []


def test_split_by_lemma_keeps_copies_of_a_sentence_on_one_side():
    # WordNet repeats some examples: split apart, a test occurrence met its own vector in
    # train (cosine 1) and copied that example's synset
    items = [wsd.Instance("bank", "n", f"s{i % 2}", ("the", "bank", str(i % 8)), 1)
             for i in range(40)]
    for seed in range(5):
        train, test = wsd.split_by_lemma({("bank", "n"): items}, 0.5, seed)
        assert train and test and not {t.tokens for t in train} & {t.tokens for t in test}
        assert len(train) + len(test) == 40


def test_wsd_eval_on_a_model_finds_the_sense_of_similar_train_sentences():
    from conftest import random_bilm
    from elmo.analysis.datasets import SenseExample

    river = ["we sat on the bank of the river", "they fished from the bank of the river",
             "the boat drifted to the bank of the river", "ducks rested on the bank of the river"]
    money = ["she put money in the bank", "he borrowed money from the bank",
             "they robbed the bank", "we opened an account at the bank"]
    examples = ([SenseExample("s1-n", ("bank",), tuple(r.split())) for r in river]
                + [SenseExample("s2-n", ("bank", "depository"), tuple(m.split())) for m in money]
                + [SenseExample("s3-n", ("cat",), ("a", "cat"))])
    senses = [Sense("bank", "n", "s1-n", 1, 3), Sense("bank", "n", "s2-n", 2, 9)]
    res = wsd.wsd_eval(random_bilm(), examples, senses, test_fraction=0.5, seed=0)
    assert res["n_lemmas"] == 1 and res["n_train"] + res["n_test"] == 8
    assert len(res["layers"]) == 3 and "finding" in res
    # every test sentence is nearest to a train sentence of its sense when that sense has one
    assert res["layers_seen_senses"][1] == res["layers_seen_senses"][2] == 1.0
    _, test = wsd.split_by_lemma(wsd.ambiguous(wsd.instances(examples)), 0.5, seed=0)
    assert res["n_test"] == len(test)
    assert res["mfs"] == pytest.approx(sum(it.synset == "s2-n" for it in test) / len(test))
    assert res["layer2_minus_layer1_seen_senses"]["diff"] == 0.0       # both layers get all
    for value, (low, high) in zip(res["layers"] + [res["mfs"]],
                                  res["layers_interval"] + [res["mfs_interval"]]):
        assert low <= value <= high


def test_wsd_layer_difference_is_of_the_f1_figures_where_items_go_unpredicted(monkeypatch):
    """The layer 2 - layer 1 difference was of accuracy while the table shows F1: where test
    items get no prediction (a lemma with no sense to back off to), the report printed
    "+0.00 points" beside F1 figures of 50.0 and 66.7."""
    examples = [SenseExample(f"0000000{s}-n", ("bank",), tuple(f"w{s} bank {i} x{s}".split()))
                for s in (1, 2) for i in range(8)]
    calls = []

    def one_nn(train_vecs, train_labels, train_keys, test_vecs, test_keys, backoff=None):
        # layer 1: the first half right, the rest unpredicted; layer 2: the rest wrong
        calls.append(1)
        gold = list(gold_of)
        half = len(gold) // 2
        rest = [None] * (len(gold) - half) if len(calls) == 2 else ["wrong"] * (len(gold) - half)
        return gold[:half] + rest

    original_split = wsd.split_by_lemma

    def split(groups, test_fraction, seed):
        train, test = original_split(groups, test_fraction, seed)
        gold_of[:] = [it.synset for it in test]
        return train, test
    gold_of: list = []
    monkeypatch.setattr(wsd, "nearest_neighbour", one_nn)
    monkeypatch.setattr(wsd, "split_by_lemma", split)
    r = wsd.wsd_eval("fixture", examples, [])
    assert r["layers"][1] != r["layers"][2]
    assert r["layer2_minus_layer1"]["diff"] == pytest.approx(r["layers"][2] - r["layers"][1])
    # by hand: correct c of n items, p predicted: F1 = 2c / (p + n)
    b = stats.paired_bootstrap([1, 1, 0, 0], [1, 0, 0, 0], predicted_a=[1, 1, 0, 0], predicted_b=[1] * 4)
    assert b["diff"] == pytest.approx(2 * 2 / 6 - 2 * 1 / 8)



def _fixed_vectors_wsd(monkeypatch, vector_of):
    """Make :func:`wsd.wsd_eval` see, at every target token, the vector ``vector_of(tokens)``
    (the other tokens zero), and put the examples whose sentence starts with ``train`` on the
    train side, the others on the test side."""
    def embed(model, sentences, batch_size=32, bar=None):
        out = []
        for s in sentences:
            a = np.zeros((3, len(s), 2), dtype=np.float32)
            a[:, 1] = vector_of(tuple(s))
            out.append(a)
        return out

    def split(groups, test_fraction=0.5, seed=0):
        items = [it for v in groups.values() for it in v]
        return ([it for it in items if it.tokens[0] == "train"],
                [it for it in items if it.tokens[0] != "train"])
    monkeypatch.setattr(vectors, "embed_layers", embed)   # (wsd embeds through gathered_layers)
    monkeypatch.setattr(wsd, "split_by_lemma", split)


def test_wsd_takes_the_nearest_sense_centroid_of_the_train_examples(monkeypatch):
    """The paper (5.3) averages each sense's train vectors and takes the nearest of those
    averages; the 1-NN over single examples let one stray example of a sense (here s1's
    [1, 0.25], next to the test vector) outvote the two of the sense whose mean is nearer."""
    vectors = {("train", "bank", "a"): [1.0, 0.25], ("train", "bank", "b"): [0.0, 1.0],
               ("train", "bank", "c"): [0.0, 1.0], ("train", "bank", "d"): [1.0, -0.5],
               ("train", "bank", "e"): [1.0, -0.5], ("test", "bank", "f"): [1.0, 0.2]}
    synset = {"a": "s1-n", "b": "s1-n", "c": "s1-n", "d": "s2-n", "e": "s2-n", "f": "s2-n"}
    _fixed_vectors_wsd(monkeypatch, lambda tokens: vectors[tokens])
    examples = [SenseExample(synset[t[2]], ("bank",), t) for t in vectors]
    senses = [Sense("bank", "n", "s1-n", 1, 5), Sense("bank", "n", "s2-n", 2, 1)]
    res = wsd.wsd_eval("fixture", examples, senses)
    # s1's centroid [1/3, 0.75] has cosine 0.57 with [1, 0.2], s2's [1, -0.5] 0.79
    assert res["n_test"] == 1 and res["layers"] == [1.0, 1.0, 1.0]
    assert res["method"] == "sense_centroid"
    cents, labels, keys = wsd.sense_centroids(np.array([vectors[t] for t in vectors][:5]),
                                              [synset[t[2]] for t in vectors][:5],
                                              [("bank", "n")] * 5)
    assert labels == ["s1-n", "s2-n"] and keys == [("bank", "n")] * 2
    np.testing.assert_allclose(cents, [[1 / 3, 0.75], [1.0, -0.5]])


def test_chance_range_stays_within_zero_and_one():
    assert stats.chance_range(10, level=1.0) == (0.0, 1.0)     # was (0.0, 1.1): 11 of 10 right
    for n in (1, 7, 64, 500):
        low, high = stats.chance_range(n, level=1.0)
        assert low == 0.0 and high == 1.0
    for level in (1.5, 0.0, -0.1):                             # 1.5 gave a range up to 133%
        with pytest.raises(ValueError, match="level must be above 0 and at most 1"):
            stats.chance_range(10, level=level)


def test_an_item_correct_without_a_prediction_is_refused_not_scored_above_one():
    # the F1 was 2 * 2 / (1 + 2) = 1.33, with an interval up to 2
    with pytest.raises(ValueError, match=r"correct counts 1 item\(s\) correct that predicted says got no "
                                         r"prediction \(the first: item 0\)"):
        stats.bootstrap_interval([1, 1], predicted=[0, 1])
    with pytest.raises(ValueError, match=r"correct_b counts 2 item\(s\) correct .* predicted_b"):
        stats.paired_bootstrap([1, 0], [1, 1], predicted_a=[1, 1], predicted_b=[0, 0])
    # a prediction that is wrong, and an item with none, are both fine
    b = stats.bootstrap_interval([1, 0, 0], predicted=[1, 1, 0])
    assert b["value"] == pytest.approx(2 * 1 / (2 + 3)) and 0 <= b["low"] <= b["high"] <= 1


@pytest.mark.parametrize("kwargs, error, message", [
    ({"l2": -1.0}, ValueError, "l2 must be a finite number of 0 or more, got -1.0"),
    ({"l2": float("nan")}, ValueError, "l2 must be a finite number of 0 or more"),
    ({"l2": "0.1"}, TypeError, "l2 must be a number"),
    ({"seed": -1}, ValueError, "seed must be a whole number from 0 to 2"),
    ({"seed": "1"}, TypeError, "seed must be an integer")])
def test_probe_settings_are_checked_before_any_vector(kwargs, error, message):
    # a negative or NaN l2 failed inside L-BFGS (IndexError; "cannot be converted to type float"),
    # after every vector had been computed; the model named here does not exist, so the check
    # must come first
    with pytest.raises(error, match=message):
        contrast.contrast_eval("no-such-model", contrast.load_pairs(), **kwargs)
    with pytest.raises(error, match=message):
        probes.pos_probe("no-such-model", [[("a", "X")]], [[("a", "X")]], **kwargs)
    with pytest.raises(error, match=message):
        probes.train_probe(np.ones((2, 3)), [0, 1], 2, **kwargs)


def test_contrast_eval_refuses_what_is_not_contrast_pairs():
    with pytest.raises(TypeError, match="contrast_eval takes ContrastItem pairs"):
        contrast.contrast_eval("fixture", "a b\tc d")   # (AttributeError: 'str' object has no attribute 'a')


@pytest.mark.parametrize("kwargs, error, message", [
    ({"test_fraction": 1.0}, ValueError, "test_fraction must be a number between 0 and 1"),
    ({"test_fraction": float("nan")}, ValueError, "test_fraction must be a number between 0 and 1"),
    ({"seed": -1}, ValueError, "seed must be a whole number from 0 to 2"),
    ({"max_lemmas": -1}, ValueError, "max_lemmas must be at least 0")])
def test_wsd_settings_are_checked_before_any_vector(kwargs, error, message):
    # a test_fraction of 1 put every example in the test set, where each layer scored what the
    # most frequent sense does, without a word; a negative seed failed in the bootstrap after
    # every vector was computed, a negative max_lemmas inside random.sample
    with pytest.raises(error, match=message):
        wsd.wsd_eval("no-such-model", [], [], **kwargs)


_SENSES_HEADER = "sense_key\tsynset_offset\tsense_number\ttag_count\tsemcor_count\n"


@pytest.mark.parametrize("name, text, message", [
    ("examples.tsv", "", "examples.tsv: empty, not even its header line"),          # (a bare StopIteration)
    ("senses.tsv", "", "senses.tsv: empty, not even its header line"),
    ("senses.tsv", _SENSES_HEADER + "bank%1:14:00::\t09213565\t1\n", r"senses.tsv:2: 3 tab-separated fields"),
    ("senses.tsv", _SENSES_HEADER + "bank%9:14:00::\t09213565\t1\t0\t5\n", "senses.tsv:2: 'bank%9:14:00::' is not"),
    ("senses.tsv", _SENSES_HEADER + "bank%1:14:00::\t09213565\tx\t0\t5\n", "senses.tsv:2: the sense number 'x'"),
    ("senses.tsv", _SENSES_HEADER.encode() + b"b\xffnk%1:14:00::\t09213565\t1\t0\t5\n",
     r"senses.tsv: not UTF-8 text \(line 2: byte 0xff"),
    ("examples.tsv", "synset\tlemmas\texample\n09213565-n\tbank\n", "examples.tsv:2: not a row of synset-pos"),
])
def test_a_damaged_wordnet_file_is_named_with_its_line_and_the_fix(tmp_path, name, text, message):
    """(a short row was "not enough values to unpack", an unknown synset type KeyError '9', a
    bad byte the codec's message: none named the file, nor how to rewrite it)"""
    from elmo.analysis import datasets
    from elmo.data.fetch import DataError

    (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    read = datasets.wordnet_senses if name == "senses.tsv" else datasets.wordnet_examples
    with pytest.raises(DataError, match=message) as caught:
        read(tmp_path)
    assert str(caught.value).endswith("rewrite it with `elmo data get wordnet --force`")
    assert "\n" not in str(caught.value)


def test_wordnet_files_as_elmo_data_get_writes_them_are_read(tmp_path):
    from elmo.analysis import datasets

    (tmp_path / "senses.tsv").write_text(_SENSES_HEADER + "bank%1:17:01::\t09213565\t1\t25\t25\r\n")
    (tmp_path / "examples.tsv").write_text("synset\tlemmas\texample\n09213565-n\tbank,riverbank\tthe bank\n"
                                           "09213566-n\tbank\t \n")
    (tmp_path / "synsets.tsv").write_text("synset\tlemmas\tdefinition\n09213565-n\tbank\tsloping land\n")
    assert datasets.wordnet_senses(tmp_path) == [datasets.Sense("bank", "n", "09213565-n", 1, 25)]
    assert datasets.wordnet_examples(tmp_path) == [datasets.SenseExample("09213565-n", ("bank", "riverbank"),
                                                                         ("the", "bank"))]
    assert datasets.wordnet_definitions(tmp_path, {"09213565-n", "x"}) == {"09213565-n": "sloping land"}


def test_wsd_without_test_examples_says_why_not_a_setting_it_refuses():
    """(it blamed "test_fraction 0", which wsd_eval refuses before this point)"""
    from elmo.analysis.datasets import SenseExample

    examples = [SenseExample("00000001-n", ("bank",), ("the", "bank", "of", "the", "river")),
                SenseExample("00000002-n", ("bank",), ("money", "in", "the", "bank"))]
    with pytest.raises(ValueError, match="no test examples") as caught:
        wsd.wsd_eval("no-such-model", examples, [], max_lemmas=0)
    assert "test_fraction 0" not in str(caught.value)
    assert "all 0 examples of the 0 lemma(s)" in str(caught.value)
