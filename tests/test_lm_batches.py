"""Corpus streaming and language-model batches: layout, the backward direction, resume."""
from __future__ import annotations

import gzip
import os
from collections import Counter
from pathlib import Path

import pytest
import torch

from elmo.chars import word_to_char_ids
from elmo.data.corpus import (CorpusStream, balanced_cuts, count_tokens, count_words, expand_paths,
                              expand_paths_in_order, line_shares, would_find)
from elmo.data.lm_batches import BucketedLMBatches, PackedLMBatches, sentence_batches
from elmo.vocab import Vocabulary


def _write_corpus(folder, n_files=3, per_file=7):
    """Shards of distinct numbered sentences of varied length: s<file>_<i> w0 w1 ..."""
    folder.mkdir(parents=True, exist_ok=True)
    sentences = []
    for f in range(n_files):
        lines = []
        for i in range(per_file):
            s = [f"s{f}_{i}"] + [f"w{(f * 7 + i + k) % 11}" for k in range((i * 3 + f) % 6)]
            lines.append(" ".join(s))
            sentences.append(s)
        text = "\n".join(lines) + "\n\n"
        if f == 0:
            with gzip.open(folder / f"shard{f}.txt.gz", "wt", encoding="utf-8") as g:
                g.write(text)
        else:
            (folder / f"shard{f}.txt").write_text(text)
    return sentences


def _vocab(sentences):
    counts = Counter(w for s in sentences for w in s)
    return Vocabulary.from_counts(counts)


def test_expand_paths_files_globs_folders(tmp_path):
    _write_corpus(tmp_path / "c")
    folder = expand_paths([tmp_path / "c"])
    assert [p.name for p in folder] == ["shard0.txt.gz", "shard1.txt", "shard2.txt"]
    assert expand_paths([str(tmp_path / "c" / "shard[12].txt")]) == folder[1:]
    with pytest.raises(FileNotFoundError, match="nothing|no such"):
        expand_paths([tmp_path / "missing*.txt"])
    # hidden files and everything in hidden folders (a checkout's .git/) are not text to read
    (tmp_path / "c" / ".git").mkdir()
    (tmp_path / "c" / ".git" / "index").write_bytes(b"\x87binary")
    (tmp_path / "c" / ".shard1.txt.swp").write_text("x")
    assert expand_paths([tmp_path / "c"]) == folder
    (tmp_path / "empty" / ".hidden").mkdir(parents=True)       # exists, but nothing to read
    with pytest.raises(FileNotFoundError, match="empty: a folder without files"):
        expand_paths([tmp_path / "empty"])


def test_a_file_named_twice_is_read_once(tmp_path, monkeypatch):
    """By a relative and an absolute path, or beside a link to it in its folder: it was listed
    (and counted, trained on) twice."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt").write_text("the cat\n", encoding="utf-8")
    (tmp_path / "c" / "b.txt").symlink_to("a.txt")
    os.link(tmp_path / "c" / "a.txt", tmp_path / "c" / "hard.txt")
    (tmp_path / "c" / "d.txt").write_text("the dog\n", encoding="utf-8")
    assert expand_paths(["c/a.txt", tmp_path / "c" / "a.txt"]) == [tmp_path / "c" / "a.txt"]
    assert [p.name for p in expand_paths(["c"])] == ["a.txt", "d.txt"]
    assert count_words(["c", "c/d.txt", tmp_path / "c" / "a.txt"])["the"] == 2
    assert expand_paths_in_order(["c/d.txt", "c"]) == [Path("c/d.txt"), Path("c/a.txt")]


def test_would_find_agrees_with_expand_paths(tmp_path, monkeypatch):
    """(what a training run checks to keep its own files out of its text: a folder, a glob or
    a file that would list them)"""
    _write_corpus(tmp_path / "c")
    for name in ("run/log.jsonl", "run/checkpoints/checkpoint-00000001.pt", "run/model/vocab.txt",
                 ".hidden/run/log.jsonl", "sub/.x.txt"):
        (tmp_path / "c" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "c" / name).write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "c")
    monkeypatch.chdir(tmp_path)
    files = [p for p in (tmp_path / "c").rglob("*") if p.is_file()]
    for pattern in ("c", "link", "c/run", "c/*", "c/*/*", "c/**", "c/**/*.txt", "c/run/*/*.pt", "c/*.txt",
                    "c/shard1.txt", "c/run/log.jsonl", "link/**/*.jsonl", "*/run/*", "c/.hidden/**", "c/../c/run"):
        listed = set(expand_paths([pattern]))
        for path in files:
            found = {q for q in listed if q.resolve() == path.resolve()}
            assert would_find(pattern, path) == bool(found), (pattern, path)
    assert not would_find("c", tmp_path / "c")   # a folder is not a file it lists
    assert would_find("c", tmp_path / "c" / "new" / "later.txt")   # not there yet


def test_stream_epoch_reads_every_sentence_once_reproducibly(tmp_path):
    sentences = _write_corpus(tmp_path / "c")
    def epoch(seed, e):
        s = CorpusStream([tmp_path / "c"], seed=seed)
        s.load_state_dict({"epoch": e, "shard": 0, "sentence": 0})
        return [tuple(s.next_sentence()) for _ in range(len(sentences))]
    a = epoch(0, 0)
    assert sorted(a) == sorted(tuple(s) for s in sentences)  # gzip shard included, blank lines skipped
    assert a == epoch(0, 0)                                   # reproducible from the seed
    assert a != epoch(0, 1) and a != epoch(1, 0)              # reshuffled per epoch and seed
    plain = CorpusStream([tmp_path / "c"], shuffle=False)
    assert [plain.next_sentence() for _ in range(len(sentences))] == sentences


@pytest.mark.parametrize("n_files", [1, 3])
def test_ranks_split_the_corpus(tmp_path, n_files):
    sentences = _write_corpus(tmp_path / "c", n_files=n_files, per_file=9)
    seen = []
    for rank in range(2):
        s = CorpusStream([tmp_path / "c"], seed=3, rank=rank, world_size=2)
        part = []
        while s.epoch == 0:
            part.append(tuple(s.next_sentence()))
        part.pop()  # the first sentence of epoch 1
        seen.append(part)
    assert not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == sorted(tuple(x) for x in sentences)


def _epoch_part(stream: CorpusStream, epoch: int):
    """The sentences ``stream`` reads in ``epoch``, in order."""
    stream.load_state_dict({"epoch": epoch, "shard": 0, "sentence": 0})
    part = []
    while True:
        sentence = stream.next_sentence()
        if stream.epoch != epoch:
            return part
        part.append(tuple(sentence))


def test_balanced_cuts_make_consecutive_blocks_of_about_equal_weight():
    """Each block is within the heaviest item of an equal share: a cut is the boundary nearest
    its quantile, at most half an item away, and a block lies between two cuts."""
    import random

    assert balanced_cuts([3, 18] * 4, 2) == [0, 4, 8]
    assert balanced_cuts([5], 2) == [0, 1, 1]            # (a tie goes to the later boundary)
    assert balanced_cuts([], 3) == [0, 0, 0, 0]
    assert balanced_cuts([1, 1, 1, 100], 2) == [0, 3, 4]
    rng = random.Random(0)
    for _ in range(300):
        weights = [rng.randint(1, 40) for _ in range(rng.randint(1, 60))]
        parts = rng.randint(1, 9)
        cuts = balanced_cuts(weights, parts)
        assert len(cuts) == parts + 1 and cuts[0] == 0 and cuts[-1] == len(weights)
        assert all(a <= b for a, b in zip(cuts, cuts[1:]))
        for a, b in zip(cuts, cuts[1:]):
            assert abs(sum(weights[a:b]) * parts - sum(weights)) <= max(weights) * parts


@pytest.mark.parametrize("world_size", [2, 3])
def test_unshuffled_processes_read_blocks_of_about_equal_tokens(tmp_path, world_size):
    """(every world_size-th line: on a file alternating 3- and 18-word sentences, 2 processes'
    parts held 250 and 1,000 tokens, so an epoch read one part 2.4 times and the other's 63%)
    Now each reads one block of consecutive lines, the blocks within a sentence's tokens of an
    equal share, the same every epoch; the bucketed layout's blocks hold equal lines instead."""
    lines = [[f"l{i}"] + ["w"] * (2 if i % 2 == 0 else 17) for i in range(100)]
    (tmp_path / "t.txt").write_text("".join(" ".join(s) + "\n" for s in lines), encoding="utf-8")
    for balance, weigh in (("tokens", lambda s: len(s) + 2), ("lines", lambda s: 1)):
        streams = [CorpusStream([tmp_path / "t.txt"], shuffle=False, rank=r, world_size=world_size,
                                balance=balance) for r in range(world_size)]
        parts = [_epoch_part(stream, 0) for stream in streams]
        assert [s for part in parts for s in part] == [tuple(s) for s in lines]   # blocks, in the file's order
        amounts = [sum(weigh(s) for s in part) for part in parts]
        total, heaviest = sum(weigh(s) for s in lines), max(weigh(s) for s in lines)
        assert all(abs(a * world_size - total) <= heaviest * world_size for a in amounts), amounts
        assert [_epoch_part(stream, 2) for stream in streams] == parts
        assert line_shares([tmp_path / "t.txt"], world_size, shuffle=False, balance=balance) == amounts
    # a file sorted by length: equal tokens are unequal lines, which the bucketed layout's rows are
    ordered = sorted(lines, key=len)
    (tmp_path / "t.txt").write_text("".join(" ".join(s) + "\n" for s in ordered), encoding="utf-8")
    by_lines = [CorpusStream([tmp_path / "t.txt"], shuffle=False, rank=r, world_size=world_size,
                             balance="lines") for r in range(world_size)]
    assert max(len(_epoch_part(s, 0)) for s in by_lines) - min(len(_epoch_part(s, 0)) for s in by_lines) <= 1
    # a process whose block is empty is told so, as it reads its part
    (tmp_path / "t.txt").write_text("a b c\nd e f g h i j k l m n o p\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"holds no sentence for rank 2 of 3 \(each process reads a block of each "
                                         r"file's lines, cut where the blocks hold about the same tokens"):
        CorpusStream([tmp_path / "t.txt"], shuffle=False, rank=2, world_size=3).next_sentence()


def test_shuffled_processes_read_every_line_once_an_epoch_in_new_parts(tmp_path):
    """Shuffled, each file's lines are dealt in turn from a new order each epoch: every line
    once an epoch over the processes, and parts that differ from epoch to epoch."""
    lines = [(f"l{i}",) + ("w",) * (2 if i % 2 == 0 else 17) for i in range(60)]
    (tmp_path / "t.txt").write_text("".join(" ".join(s) + "\n" for s in lines), encoding="utf-8")
    streams = [CorpusStream([tmp_path / "t.txt"], seed=4, rank=r, world_size=3) for r in range(3)]
    epochs = [[_epoch_part(stream, e) for stream in streams] for e in range(3)]
    for parts in epochs:
        assert sorted(s for part in parts for s in part) == sorted(lines)
        assert [len(part) for part in parts] == [20, 20, 20]
    assert epochs[0][0] != epochs[1][0] and set(epochs[0][0]) != set(epochs[1][0])
    assert streams[0].line_split == "turns"
    assert line_shares([tmp_path / "t.txt"], 3) is None       # (no fixed parts to measure)


def test_an_unshuffled_block_split_resumes_exactly(tmp_path):
    lines = [[f"l{i}"] + ["w"] * (i % 7) for i in range(40)]
    (tmp_path / "t.txt").write_text("".join(" ".join(s) + "\n" for s in lines), encoding="utf-8")
    vocab = _vocab(lines)
    make = lambda: PackedLMBatches(CorpusStream([tmp_path / "t.txt"], shuffle=False, rank=1,  # noqa: E731
                                                world_size=2), vocab, 2, 5)
    a = make()
    straight = [a.next_batch().fwd_chars for _ in range(20)]   # (over 3 epochs of rank 1's block)
    b = make()
    for _ in range(7):
        b.next_batch()
    c = make()
    c.load_state_dict(b.state_dict())
    assert all(torch.equal(x, c.next_batch().fwd_chars) for x in straight[7:])


def test_empty_files_in_a_corpus_are_read_past_for_every_epoch(tmp_path):
    """(two empty files beside a full one stopped a single process after its first epoch with
    "holds no sentence for rank 0": the stream gave up after len(files) + 2 moves, fewer than
    an epoch's end and the next epoch's empty files take; a rank whose shards of an epoch were
    all empty stopped likewise)"""
    (tmp_path / "full.txt").write_text("a b\nc d e\nf\n", encoding="utf-8")
    for name in ("empty-1.txt", "empty-2.txt", "empty-3.txt"):
        (tmp_path / name).write_text("" if name != "empty-3.txt" else "\n\n", encoding="utf-8")
    for seed in range(8):
        stream = CorpusStream([tmp_path], seed=seed)
        read = [tuple(stream.next_sentence()) for _ in range(30)]
        assert Counter(read) == {("a", "b"): 10, ("c", "d", "e"): 10, ("f",): 10} and stream.epoch == 9
        ranks = [CorpusStream([tmp_path], seed=seed, rank=r, world_size=2) for r in (0, 1)]
        assert all(len([r.next_sentence() for _ in range(30)]) == 30 for r in ranks)
    # a part that can never hold a sentence is still an error, at once
    with pytest.raises(ValueError, match="holds no sentence for rank 1"):
        CorpusStream([tmp_path], shuffle=False, rank=1, world_size=4).next_sentence()  # empty-2.txt only
    (tmp_path / "full.txt").write_text("", encoding="utf-8")
    # (one process has no rank to speak of)
    with pytest.raises(ValueError, match="holds no sentence$"):
        CorpusStream([tmp_path]).next_sentence()
    with pytest.raises(ValueError, match="holds no sentence for rank 1 of 2"):
        CorpusStream([tmp_path], rank=1, world_size=2).next_sentence()


def test_counts(tmp_path):
    sentences = _write_corpus(tmp_path / "c")
    stats = count_tokens([tmp_path / "c"])
    assert stats == {"sentences": len(sentences), "tokens": sum(len(s) + 2 for s in sentences)}
    counts = count_words([tmp_path / "c"])
    assert counts["<S>"] == counts["</S>"] == len(sentences)
    vocab = Vocabulary.from_counts(counts, min_count=2, max_size=8)
    assert vocab.words[:3] == ["<S>", "</S>", "<UNK>"] and len(vocab) == 8
    rest = vocab.counts[3:]
    assert rest == sorted(rest, reverse=True) and min(rest) >= 2


def test_packed_rows_are_sentences_end_to_end_forward_and_reversed(tmp_path):
    sentences = _write_corpus(tmp_path / "c")
    vocab = _vocab(sentences)
    batches = PackedLMBatches(CorpusStream([tmp_path / "c"], shuffle=False), vocab, batch_size=2, unroll_steps=5)
    rows = [[], []]
    for _ in range(6):
        b = batches.next_batch()
        assert b.fwd_chars.shape == (2, 5, 50) and b.lengths.tolist() == [5, 5]
        for r in range(2):
            rows[r].append(b)
    # Reconstruct row 0's forward token stream from the character ids and check it is the
    # wrapped sentences, in the order the rows took them from the stream.
    char_rows = {tuple(word_to_char_ids(w)): w for s in sentences for w in ["<S>", "</S>", *s]}
    for r in range(2):
        fwd = [char_rows[tuple(c)] for b in rows[r] for c in b.fwd_chars[r].tolist()]
        bwd = [char_rows[tuple(c)] for b in rows[r] for c in b.bwd_chars[r].tolist()]
        targets_f = [vocab.words[i] for b in rows[r] for i in b.fwd_targets[r].tolist()]
        targets_b = [vocab.words[i] for b in rows[r] for i in b.bwd_targets[r].tolist()]
        assert targets_f[:-1] == fwd[1:] and targets_b[:-1] == bwd[1:]  # predicts the next input
        assert fwd[0] == "<S>" and bwd[0] == "</S>"
        # The backward row holds the same sentences, each reversed: cut both at the sentence
        # boundaries and compare.
        def split(tokens, start):
            out, cur = [], []
            for w in tokens:
                if w == start and cur:
                    out.append(cur)
                    cur = []
                cur.append(w)
            return out  # complete sentences only
        f_sents, b_sents = split(fwd, "<S>"), split(bwd, "</S>")
        n = min(len(f_sents), len(b_sents))
        assert n >= 2
        assert [s[::-1] for s in f_sents[:n]] == b_sents[:n]
    # Rows fill in order from the one stream, as the original does: row 0 takes sentences
    # until it holds T + 1 = 6 tokens, then row 1 takes the next sentence.
    taken, n = 0, 0
    while n < 6:
        n += len(sentences[taken]) + 2
        taken += 1
    row1_first = char_rows[tuple(rows[1][0].fwd_chars[1, 1].tolist())]
    assert row1_first == sentences[taken][0]


def test_character_ids_are_each_words_own_through_the_tables_growth_and_restarts():
    """The batches gather each word's character ids from a table of the distinct words seen
    (elmo.data.lm_batches._Encoder): they must be word_to_char_ids of the very token, padding
    zero, whatever the table did in between: grew, started again when full, or met more new
    words in one batch than it may hold."""
    from elmo.data.lm_batches import _Encoder
    odd = ["<S>", "</S>", "x" * 300, "naïve", "日本語", "\udcff", "a", "A", "<UNK>"]
    words = odd + [f"w{i}" for i in range(40)]
    encoder = _Encoder(Vocabulary.from_counts(Counter(words[:5])), 50, cache_size=7)
    rng = __import__("random").Random(0)
    for step in range(30):
        rows = [[rng.choice(words) for _ in range(rng.randint(0, 6))] for _ in range(rng.randint(1, 4))]
        if step == 10:
            rows = [words]                                   # more new words in one batch than 7
        steps = max(len(r) for r in rows) + 1
        got = encoder.char_rows(rows, steps)
        assert got.dtype == torch.long and got.shape == (len(rows), steps, 50)
        for r, row in enumerate(rows):
            for t in range(steps):
                expected = word_to_char_ids(row[t], 50) if t < len(row) else (0,) * 50
                assert tuple(got[r, t].tolist()) == expected, (step, row[t] if t < len(row) else None)
    assert encoder._used <= len(words) + 1


def test_backward_target_is_the_previous_token_in_the_text(tmp_path):
    (tmp_path / "t.txt").write_text("a b c d\n")
    vocab = Vocabulary.from_counts(Counter("abcd"))
    b = PackedLMBatches(CorpusStream([tmp_path / "t.txt"], shuffle=False), vocab, 1, 5).next_batch()
    words = lambda ids: [vocab.words[i] for i in ids]  # noqa: E731
    assert words(b.fwd_targets[0].tolist()) == ["a", "b", "c", "d", "</S>"]
    # backward reads </S> d c b a: at "d" it predicts "c", the token before "d" in the text
    assert words(b.bwd_targets[0].tolist()) == ["d", "c", "b", "a", "<S>"]
    assert b.bwd_chars[0, 1].tolist() == list(word_to_char_ids("d"))


def test_packed_state_dict_resumes_exactly(tmp_path):
    sentences = _write_corpus(tmp_path / "c")
    vocab = _vocab(sentences)
    make = lambda: PackedLMBatches(CorpusStream([tmp_path / "c"], seed=5), vocab, 3, 4)  # noqa: E731
    a = make()
    straight = [a.next_batch() for _ in range(25)]  # crosses epochs
    b = make()
    for _ in range(11):
        b.next_batch()
    saved = b.state_dict()
    c = make()
    c.load_state_dict(saved)
    for x, y in zip(straight[11:], [c.next_batch() for _ in range(14)]):
        assert torch.equal(x.fwd_chars, y.fwd_chars) and torch.equal(x.bwd_targets, y.bwd_targets)


def test_bucketed_batches_and_resume(tmp_path):
    sentences = _write_corpus(tmp_path / "c", per_file=20)
    vocab = _vocab(sentences)
    make = lambda: BucketedLMBatches(CorpusStream([tmp_path / "c"], seed=1), vocab, 4, pool_batches=3, seed=1)  # noqa: E731
    a = make()
    straight = [a.next_batch() for _ in range(10)]
    for batch in straight:
        lengths = batch.lengths.tolist()
        assert max(lengths) - min(lengths) <= 3  # similar lengths together
        assert batch.fwd_mask.sum(1).tolist() == lengths
    b = make()
    for _ in range(4):
        b.next_batch()
    c = make()
    c.load_state_dict(b.state_dict())
    for x, y in zip(straight[4:], [c.next_batch() for _ in range(6)]):
        assert torch.equal(x.fwd_targets, y.fwd_targets) and torch.equal(x.lengths, y.lengths)


def test_state_resets_are_staggered_over_rows():
    from elmo.training.evaluate import reset_rows

    state = [(torch.ones(2, 6, 3), torch.ones(2, 6, 2)), (torch.ones(2, 6, 3), torch.ones(2, 6, 2))]
    for step in range(8):
        out = reset_rows(state, step, every=3, first_row=10)
        zeroed = [b for b in range(6) if float(out[0][0][:, b].abs().sum()) == 0]
        assert zeroed == [b for b in range(6) if (step + 10 + b) % 3 == 0]
        for c, h in out:  # every layer, both directions, c and h
            assert torch.equal(c[:, zeroed], torch.zeros_like(c[:, zeroed]))
            assert torch.equal(h[:, zeroed], torch.zeros_like(h[:, zeroed]))
            kept = [b for b in range(6) if b not in zeroed]
            assert torch.equal(c[:, kept], torch.ones_like(c[:, kept]))


def test_sentence_batches_count_the_same_targets_one_sentence_a_row():
    sentences = [["a", "b"], ["c"], ["d", "e", "f"], ["g"], ["a"]]
    vocab = Vocabulary.from_counts(Counter("abcdefg"))
    batches = list(sentence_batches(sentences, vocab, batch_size=2))
    assert [b.lengths.tolist() for b in batches] == [[3, 2], [4, 2], [2]]
    fwd, bwd = Counter(), Counter()
    for b in batches:
        fwd.update(vocab.words[i] for i in b.fwd_targets[b.fwd_mask].tolist())
        bwd.update(vocab.words[i] for i in b.bwd_targets[b.bwd_mask].tolist())
    words = Counter(w for s in sentences for w in s)
    assert fwd == words + Counter({"</S>": 5}) and bwd == words + Counter({"<S>": 5})


@pytest.mark.parametrize("suffix", [".txt", ".gz"])
def test_a_byte_order_mark_opening_a_corpus_file_is_no_part_of_its_first_word(tmp_path, suffix):
    # as some Windows editors save UTF-8: kept, it made "\ufeffThe" a word of its own in the
    # vocabulary counts and in the text the model trains on
    data = "\ufeffThe cat sat .\nThe dog .\n".encode("utf-8")
    path = tmp_path / f"c{suffix}"
    path.write_bytes(gzip.compress(data) if suffix == ".gz" else data)
    counts = count_words([path])
    assert counts["The"] == 2 and not any("\ufeff" in w for w in counts)
    from elmo.data.corpus import read_sentences
    assert read_sentences(path)[0] == ["The", "cat", "sat", "."]


def _copies(monkeypatch):
    """Record pin_memory and .to calls (neither does anything), so a copy "to a GPU" can be
    looked at without one: (pinned count list, .to calls list)."""
    pinned, moves = [], []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: pinned.append(1) or self)
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: moves.append((a, k)) or self)
    return pinned, moves


def test_a_batch_goes_to_a_gpu_from_pinned_memory_without_a_wait_and_to_the_cpu_as_it_is(tmp_path, monkeypatch):
    """A plain copy from pageable memory made the host wait for the GPU's queue every step."""
    from elmo.data.lm_batches import LMBatch
    from elmo.modules.softmax import Candidates, LogUniformSampler
    text = tmp_path / "t.txt"
    text.write_text("a b c\nd e\n")
    batch = PackedLMBatches(CorpusStream([text], shuffle=False), _vocab([["a", "b", "c", "d", "e"]]), 2, 3).next_batch()
    fields = len(LMBatch.__dataclass_fields__)
    pinned, moves = _copies(monkeypatch)
    moved = batch.to("cpu")
    assert not pinned and all(getattr(moved, f) is getattr(batch, f) for f in LMBatch.__dataclass_fields__)
    batch.to(torch.device("cuda"))
    Candidates.draw(LogUniformSampler(50, seed=0), 10, "cuda")   # (a step's sampled negatives, likewise)
    assert len(pinned) == fields + 2
    to_gpu = [(str(a[0]), k) for a, k in moves if a and str(a[0]) == "cuda"]
    assert to_gpu == [("cuda", {"non_blocking": True})] * (fields + 2)
