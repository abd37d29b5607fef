"""The CRF against brute-force enumeration, and the task metrics on hand-computed cases."""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from elmo.tasks.crf import CRF
from elmo.tasks.metrics import accuracy, bio_spans, span_prf, token_accuracy

from host_reads import HostReads


def _random_crf(num_tags: int, seed: int) -> CRF:
    torch.manual_seed(seed)
    crf = CRF(num_tags)
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_(0, 1)
    return crf


@torch.no_grad()
def _brute_force(crf: CRF, emissions: torch.Tensor, length: int):
    """log Z and the best path of one sentence by scoring all K^n paths."""
    scores = {}
    for path in itertools.product(range(crf.num_tags), repeat=length):
        s = crf.start[path[0]] + crf.end[path[-1]]
        s = s + sum(emissions[t, path[t]] for t in range(length))
        s = s + sum(crf.transitions[path[t - 1], path[t]] for t in range(1, length))
        scores[path] = float(s)
    log_z = math.log(sum(math.exp(v) for v in scores.values()))
    return log_z, list(max(scores, key=scores.get)), scores


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forward_algorithm_and_viterbi_equal_enumeration(seed):
    crf = _random_crf(3, seed)
    lengths = [4, 2, 1, 0]
    emissions = torch.randn(len(lengths), 4, 3)
    mask = torch.tensor([[t < n for t in range(4)] for n in lengths])
    with torch.no_grad():
        log_z = crf.log_partition(emissions, mask)
    paths = crf.decode(emissions, mask)
    for b, n in enumerate(lengths):
        if n == 0:
            assert float(log_z[b]) == 0.0 and paths[b] == []
            continue
        want_z, want_path, scores = _brute_force(crf, emissions[b], n)
        assert float(log_z[b]) == pytest.approx(want_z, abs=1e-4)
        assert paths[b] == want_path
        # the gold score of an arbitrary path, padded with junk tags beyond the length
        path = [(b + t) % 3 for t in range(n)]
        tags = torch.tensor([path + [2] * (4 - n)])
        got = crf.path_score(emissions[b:b + 1], tags, mask[b:b + 1]).detach()
        assert float(got) == pytest.approx(scores[tuple(path)], abs=1e-4)


def test_probabilities_sum_to_one_and_loss_trains():
    crf = _random_crf(2, 5)
    emissions = torch.randn(1, 3, 2)
    mask = torch.ones(1, 3, dtype=torch.bool)
    with torch.no_grad():
        total = sum(math.exp(-float(crf.neg_log_likelihood(emissions, torch.tensor([list(p)]), mask)))
                    for p in itertools.product(range(2), repeat=3))
    assert total == pytest.approx(1.0, abs=1e-5)
    # a few steps of gradient descent make a chosen path the Viterbi path
    target = torch.tensor([[1, 0, 1]])
    opt = torch.optim.SGD(crf.parameters(), lr=0.5)
    for _ in range(50):
        opt.zero_grad()
        crf.neg_log_likelihood(emissions, target, mask).backward()
        opt.step()
    assert crf.decode(emissions, mask) == [[1, 0, 1]]


def test_bio_spans_follow_conlleval_rules():
    tags = ["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "B-LOC", "I-ORG", "B-PER"]
    assert bio_spans(tags) == {("PER", 0, 2), ("LOC", 3, 5), ("LOC", 5, 6), ("ORG", 6, 7),
                               ("PER", 7, 8)}
    assert bio_spans(["O", "O"]) == set()
    with pytest.raises(ValueError):
        bio_spans(["X-PER"])


def test_span_f1_hand_computed():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"],   # PER right, LOC typed wrong
            ["B-ORG", "I-ORG", "O"]]            # ORG boundary wrong
    # gold spans 3, predicted 3, correct 1 -> P = R = F1 = 1/3
    r = span_prf(gold, pred)
    assert (r["gold"], r["predicted"], r["correct"]) == (3, 3, 1)
    assert r["f1"] == pytest.approx(1 / 3)
    # one missing entity: P = 1, R = 1/2, F1 = 2/3
    r = span_prf([["B-A", "O", "B-B"]], [["B-A", "O", "O"]])
    assert (r["precision"], r["recall"]) == (1.0, 0.5) and r["f1"] == pytest.approx(2 / 3)
    assert span_prf([["O"]], [["O"]])["f1"] == 0.0


def test_accuracies():
    assert accuracy(["a", "b", "c", "d"], ["a", "b", "x", "d"]) == 0.75
    assert token_accuracy([["a", "b"], ["c"]], [["a", "x"], ["c"]]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        accuracy(["a"], [])


def test_accuracy_of_nothing_is_undefined_not_zero():
    """No label or no token to score gave 0.0, a model always wrong; it is NaN, as the score
    of an empty split is (train_loop.score)."""
    assert math.isnan(accuracy([], []))
    assert math.isnan(token_accuracy([], []))
    assert math.isnan(token_accuracy([[], []], [[], []]))


def test_span_f1_equals_seqeval_when_installed():
    """Cross-check on random BIO sequences (seqeval is optional: `pip install 'elmo-pytorch[tasks]'`)."""
    seqeval = pytest.importorskip("seqeval.metrics")
    import random
    rng = random.Random(0)
    tags = ["O", "O", "B-A", "I-A", "B-B", "I-B", "I-A"]
    for _ in range(20):
        gold = [[rng.choice(tags) for _ in range(rng.randint(1, 8))] for _ in range(5)]
        pred = [[rng.choice(tags) for _ in g] for g in gold]
        assert span_prf(gold, pred)["f1"] == pytest.approx(seqeval.f1_score(gold, pred))


def test_viterbi_reads_the_paths_from_the_device_once():
    """The back-trace runs on the tensors' device; the paths cross to the host in one copy
    (it was one int() per tag of every row). The paths are those of enumeration above."""
    crf = _random_crf(4, 3)
    lengths = [6, 1, 0, 3, 6]
    emissions = torch.randn(len(lengths), 6, 4)
    mask = torch.tensor([[t < n for t in range(6)] for n in lengths])
    with HostReads() as reads:
        paths = crf.decode(emissions, mask)
    assert reads.total == 1, reads.counts
    for b, n in enumerate(lengths):
        assert paths[b] == (_brute_force(crf, emissions[b], n)[1] if n else [])


def _conlleval_chunks(tags):
    """Spans by conlleval's streaming tests, written apart from bio_spans: a chunk ends when
    the previous tag was B or I and this one is B or O, or its type changes; one starts at B,
    at I after O, or at a change of type. Tags past the end count as O."""
    chunks, start = set(), None
    prev, prev_type = "O", ""
    for i, tag in enumerate(list(tags) + ["O"]):
        now, now_type = (tag[0], tag[2:]) if tag != "O" else ("O", "")
        ends = prev != "O" and (now in "BO" or prev_type != now_type)
        starts = now == "B" or (now != "O" and (prev == "O" or prev_type != now_type))
        if ends and start is not None:
            chunks.add((prev_type, start, i))
            start = None
        if starts:
            start = i
        prev, prev_type = now, now_type
    return chunks


def test_span_f1_equals_conlleval_rules_and_a_direct_set_count_on_random_tags():
    """Runs without seqeval (the test above skips where it is missing): random BIO tags with
    stray I- tags, type changes inside runs and types with a hyphen, against the reference
    above and precision / recall / F1 counted from the sets of (sentence, type, start, end)."""
    import random
    rng = random.Random(0)
    tags = ["O", "B-A", "I-A", "B-B", "I-B", "B-A-x", "I-A-x"]
    for _ in range(500):
        gold = [[rng.choice(tags) for _ in range(rng.randint(0, 6))] for _ in range(rng.randint(1, 4))]
        pred = [[rng.choice(tags) for _ in sent] for sent in gold]
        for sent in gold:
            assert bio_spans(sent) == _conlleval_chunks(sent), sent
        g = {(i, *span) for i, sent in enumerate(gold) for span in _conlleval_chunks(sent)}
        p = {(i, *span) for i, sent in enumerate(pred) for span in _conlleval_chunks(sent)}
        precision = len(g & p) / len(p) if p else 0.0
        recall = len(g & p) / len(g) if g else 0.0
        r = span_prf(gold, pred)
        assert (r["gold"], r["predicted"], r["correct"]) == (len(g), len(p), len(g & p))
        assert r["precision"] == pytest.approx(precision) and r["recall"] == pytest.approx(recall)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        assert r["f1"] == pytest.approx(f1)
