"""The LM corpus builder on a small cache the test writes: cleaning, task-text exclusion
(exact and n-gram), held-out blocks, deduplication, seeded shuffling, statistics."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from elmo.data import corpus_build as C
from elmo.data.sources import format_version


def ready(home, name, files):
    folder = home / name
    folder.mkdir(parents=True, exist_ok=True)
    for fname, text in files.items():
        (folder / fname).write_text(text, encoding="utf-8")
    (folder / ".complete").write_text(format_version(name) + "\n")


TASK_SENT = "the fox jumped over the lazy dog near the old mill at dawn today ."
BBC_SENT = "shares in the company rose sharply after it reported record profits for the third quarter running ."


def make_home(tmp_path):
    home = tmp_path / "cache"
    sotu = []
    for d in range(6):
        doc = [f"speech {d} sentence {i} says something about the union ." for i in range(40)]
        sotu.append(doc)
    sotu[0][1] = "The Fox jumped over the lazy dog near the old mill at dawn today ."  # task, any case
    sotu[0][2] = ("analysts said shares in the company rose sharply after it reported record "
                  "profits for the third quarter .")                                # 13-gram overlap
    sotu[0][3] = "Hi ."                                                             # too short
    sotu[0][4] = "CHAPTER ONE THE BEGINNING OF IT ALL"                              # all capitals
    sotu[0][5] = "\u042d\u0442\u043e \u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442 ."  # not Latin
    sotu[1][0] = sotu[2][0] = "a sentence repeated in two speeches ."                # duplicate
    sotu[3][0] = "a brown dev sentence that must stay out of the corpus ."
    ready(home, "sotu", {"sentences.txt": "".join("\n".join(doc) + "\n\n" for doc in sotu)})
    ready(home, "brown", {
        "train.txt": "".join(f"brown train sentence number {i} is here .\n" for i in range(30)),
        "dev.txt": "a brown dev sentence that must stay out of the corpus .\n",
        "test.txt": "a brown test sentence .\n"})
    ready(home, "twitter-ner", {f"{s}.conll": "@user\tO\nhello\tO\n\n" for s in
                                ("train", "dev", "test")})
    ready(home, "movie-sentiment", {f"{s}.tsv": f"1\t2.5\t{TASK_SENT}\n" for s in
                                    ("train", "dev", "test")})
    bbc = {"id": "business/001", "label": "business", "title": ["Profits", "up"],
           "sentences": [BBC_SENT.split()]}
    ready(home, "bbc-topic", {f"{s}.jsonl": json.dumps(bbc) + "\n" for s in ("train", "dev", "test")})
    vc = {"id": 0, "label": "True", "title": "X", "claim": ["x", "is", "y"], "evidence": ["y"]}
    ready(home, "vitaminc", {f"{s}.jsonl": json.dumps(vc) + "\n" for s in ("train", "dev", "test")})
    sq = {"id": "q", "title": "T", "context": ["A", "b", ".", "C", "d", "."], "question": ["Q", "?"],
          "answers": []}
    ready(home, "squad-dev", {f"{s}.jsonl": json.dumps(sq) + "\n" for s in ("train", "dev", "test")})
    ready(home, "wordnet", {"examples.tsv": "synset\tlemmas\texample\n1-n\tbank\tsat on the bank\n",
                            "glosses.txt": "sloping land beside a body of water\n"})
    return home, sotu


def read_lines(path):
    return [ln for ln in path.read_text(encoding="utf-8").split("\n") if ln]



class FullFile:
    """An open file (``f``) whose every write fails as on a full disk; closed on exit."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def write(self, text):
        import errno
        import os
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

def test_build_corpus_rules(tmp_path):
    home, sotu = make_home(tmp_path)
    stats = C.build_corpus(home, sources=["sotu", "brown"], log=lambda *a: None)
    out = home / "corpus"
    train = read_lines(out / "train.txt")
    held = read_lines(out / "heldout" / "sotu.txt") + read_lines(out / "heldout" / "brown.txt")
    everything = train + held
    low = [s.lower() for s in everything]

    assert TASK_SENT not in low
    assert not any("record profits" in s for s in everything)
    assert "Hi ." not in everything and not any("CHAPTER" in s for s in everything)
    assert not any("\u0442" in s for s in everything)
    assert not any("brown dev sentence" in s for s in everything)
    assert low.count("a sentence repeated in two speeches .") == 1
    assert len(set(low)) == len(low)                             # no duplicates at all
    assert not set(train) & set(held)

    # Held-out parts are whole blocks of consecutive sentences, from every source.
    sotu_held = read_lines(out / "heldout" / "sotu.txt")
    assert sotu_held and read_lines(out / "heldout" / "brown.txt")
    flat = [s for doc in sotu for s in doc]
    anchor = next(x for x in sotu_held if x.startswith("speech"))   # a unique sentence
    first, mine = flat.index(anchor), sotu_held.index(anchor)
    assert sotu_held[mine:mine + 5] == flat[first:first + 5]

    s = stats["sources"]["sotu"]
    assert s["dropped_task_overlap"] == 3          # exact task text, 13-gram, brown dev
    assert s["dropped_cleaning"] == 3              # too short, all capitals, not Latin
    assert s["dropped_duplicates_train"] + s["dropped_duplicates_heldout"] == 1
    assert stats["totals"]["train_sentences"] == len(train)
    assert stats["totals"]["train_tokens"] == sum(len(x.split()) for x in train)
    assert json.loads((out / "stats.json").read_text()) == stats


def test_build_corpus_is_deterministic_and_seeded(tmp_path):
    home, _ = make_home(tmp_path)
    C.build_corpus(home, out=tmp_path / "a", seed=1, sources=["sotu"], log=lambda *a: None)
    C.build_corpus(home, out=tmp_path / "b", seed=1, sources=["sotu"], log=lambda *a: None)
    C.build_corpus(home, out=tmp_path / "c", seed=2, sources=["sotu"], log=lambda *a: None)
    a, b, c = (read_lines(tmp_path / x / "train.txt") for x in "abc")
    assert a == b and a != c and Counter(a) == Counter(c)


def test_keep_sentence():
    assert C.keep_sentence("It was a dark and stormy night .".split())
    assert not C.keep_sentence(["Hi", "."])
    assert not C.keep_sentence(". , ; : ! word".split())
    assert not C.keep_sentence(["a"] * 300)


def test_task_filter_ngrams():
    f = C.TaskFilter([TASK_SENT.split()])
    assert f.overlaps(TASK_SENT.upper().split())
    assert f.overlaps(("so " + TASK_SENT.replace(" today .", "")).split())   # 13 shared tokens
    assert not f.overlaps("the fox jumped over the lazy dog .".split())


def test_an_output_folder_that_cannot_be_written_fails_before_any_fetch(tmp_path, monkeypatch):
    import pytest
    from elmo.io import OutputError
    fetched = []
    monkeypatch.setattr(C, "get", lambda name, home, log=None: fetched.append(name))
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(OutputError, match="a-file"):
        C.build_corpus(tmp_path / "cache", out=tmp_path / "a-file" / "corpus", log=lambda *a: None)
    with pytest.raises(OutputError, match="must be a folder"):
        C.build_corpus(tmp_path / "cache", out=tmp_path / "a-file", log=lambda *a: None)
    assert not fetched


def test_a_second_build_of_the_same_folder_is_refused_before_any_fetch(tmp_path, monkeypatch):
    import pytest
    from elmo.io import OutputBusy
    from elmo.output_lock import output_lock
    fetched = []
    monkeypatch.setattr(C, "get", lambda name, home, log=None: fetched.append(name))
    out = tmp_path / "corpus"
    out.mkdir()
    with output_lock(out / "train.txt"):   # as a build in another process would hold it
        with pytest.raises(OutputBusy, match="already being written"):
            C.build_corpus(tmp_path / "cache", out=out, log=lambda *a: None)
    assert not fetched


def test_a_build_whose_fetch_fails_leaves_no_empty_folder(tmp_path, monkeypatch):
    """(the folder and its heldout/ were made before the fetches: offline, they were left empty)"""
    import pytest
    from elmo.data.fetch import DataError

    def offline(name, home, log=None):
        raise DataError(f"{name}: could not fetch (offline?)")
    monkeypatch.setattr(C, "get", offline)
    with pytest.raises(DataError, match="offline"):
        C.build_corpus(tmp_path / "cache", out=tmp_path / "new" / "corpus", log=lambda *a: None)
    assert not (tmp_path / "new").exists()
    (tmp_path / "there").mkdir()
    with pytest.raises(DataError, match="offline"):
        C.build_corpus(tmp_path / "cache", out=tmp_path / "there", log=lambda *a: None)
    assert list((tmp_path / "there").iterdir()) == []   # kept, and its empty heldout/ removed


def test_a_failed_rebuild_keeps_the_old_files_and_marks_itself_unfinished(tmp_path, monkeypatch):
    import pytest
    home, _ = make_home(tmp_path)
    C.build_corpus(home, seed=1, sources=["sotu"], log=lambda *a: None)
    out = home / "corpus"
    before = (out / "train.txt").read_text(encoding="utf-8")
    assert (out / "stats.json").exists()
    stage = C._stage

    def unreadable(path, lines):   # (a full disk at the write: the test below)
        if path.name == "train.txt":
            def broken():
                yield from list(lines)[:3]
                raise OSError(5, "Input/output error", str(home / "sotu" / "sentences.txt"))
            return stage(path, broken())
        return stage(path, lines)
    monkeypatch.setattr(C, "_stage", unreadable)
    with pytest.raises(C.DataError, match="sentences.txt: cannot read the input: Input/output error"):
        C.build_corpus(home, seed=2, sources=["sotu"], log=lambda *a: None)
    assert (out / "train.txt").read_text(encoding="utf-8") == before   # not a part of the new one
    assert (out / "stats.json").exists()         # the earlier build, whole, is still the folder's
    assert not [p.name for p in out.rglob("*") if p.name.endswith(".tmp")]


def test_a_rebuild_that_fills_the_disk_leaves_the_earlier_build_whole(tmp_path, monkeypatch):
    """The held-out files moved in before train.txt was written: a full disk there left this
    build's held-out text beside the earlier build's train.txt (which may hold its sentences)."""
    import pytest
    home, _ = make_home(tmp_path)
    C.build_corpus(home, seed=1, sources=["sotu"], log=lambda *a: None)
    out = home / "corpus"
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def full_for_train(path, mode="r", **kwargs):
        f = open(path, mode, **kwargs)
        return FullFile(f) if Path(path).name.startswith(".train.txt.") and "w" in mode else f
    monkeypatch.setattr(C, "open", full_for_train, raising=False)
    with pytest.raises(OSError, match=r"train\.txt: cannot write the corpus file: No space left on device"):
        C.build_corpus(home, seed=2, sources=["sotu", "brown"], log=lambda *a: None)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    monkeypatch.undo()
    stats = C.build_corpus(home, seed=2, sources=["sotu", "brown"], log=lambda *a: None)   # space again
    assert sorted(stats["sources"]) == ["brown", "sotu"] and (out / "heldout" / "brown.txt").is_file()


def test_staging_a_corpus_file_names_the_input_it_cannot_read_and_the_output_it_cannot_write(
        tmp_path, monkeypatch):
    """An error reading an input file while its lines were written (lazily) said "OUT: cannot
    write the corpus file": a read error now names the input (the error's file, else the source
    the caller names), and only a write error names the corpus file."""
    import errno
    import os

    import pytest

    from elmo.io import OutputError
    out = tmp_path / "train.txt"
    missing = tmp_path / "gone.txt"

    def from_file(path):
        with open(path, encoding="utf-8") as f:
            yield from (line.rstrip("\n") for line in f)

    def failing_read():
        yield "a first line"
        raise OSError(errno.EIO, os.strerror(errno.EIO))     # (read() names no file)
    with pytest.raises(C.DataError) as caught:
        C._stage(out, from_file(missing))
    assert str(caught.value) == f"{missing}: cannot read the input: No such file or directory"
    with pytest.raises(C.DataError) as caught:
        C._stage(out, failing_read(), source=tmp_path / "input.txt")
    assert str(caught.value) == f"{tmp_path / 'input.txt'}: cannot read the input: Input/output error"
    with pytest.raises(C.DataError, match=f"cannot read the input of {out}: Input/output error"):
        C._stage(out, failing_read())
    assert list(tmp_path.iterdir()) == []    # (no temporary left)

    monkeypatch.setattr(C, "open", lambda path, mode="r", **kw: FullFile(open(path, mode, **kw)), raising=False)
    with pytest.raises(OutputError) as written:
        C._stage(out, ["a line"])
    assert str(written.value) == f"{out}: cannot write the corpus file: No space left on device"
    assert list(tmp_path.iterdir()) == []


def test_a_source_named_twice_is_built_once(tmp_path):
    """sources=["sotu", "sotu"] gave an empty sotu corpus (its second pass through the
    deduplication found every sentence seen before) and double counts."""
    home, _ = make_home(tmp_path)
    once = C.build_corpus(home, out=tmp_path / "once", seed=1, sources=["sotu"], log=lambda *a: None)
    twice = C.build_corpus(home, out=tmp_path / "twice", seed=1, sources=["sotu", "sotu"], log=lambda *a: None)
    assert twice["totals"] == once["totals"] and twice["totals"]["train_sentences"] > 0
    assert (tmp_path / "twice" / "train.txt").read_bytes() == (tmp_path / "once" / "train.txt").read_bytes()


def test_an_empty_or_unknown_source_list_is_refused_before_anything_is_made(tmp_path, monkeypatch):
    """sources=[] built every source (fetching them all); a corpus that is not an LM source
    ("ptb") was a KeyError after every download."""
    import pytest
    monkeypatch.setenv("ELMO_OFFLINE", "1")   # (should it fetch after all: no client is run)
    home, _ = make_home(tmp_path)
    for sources, message in (([], "sources is empty"), (["ptb"], "'ptb' is not a source of the LM corpus"),
                             ("sotu", "a list of source names")):
        with pytest.raises((ValueError, TypeError), match=message):
            C.build_corpus(home, out=tmp_path / "out", sources=sources, log=lambda *a: None)
        assert not (tmp_path / "out").exists()


def test_a_rebuild_with_fewer_sources_leaves_only_the_files_of_the_new_build(tmp_path):
    """Rebuilding into the same folder with fewer sources left heldout/brown.txt of the
    earlier build, which heldout/*.txt (the perplexity scripts) read as part of the corpus."""
    home, _ = make_home(tmp_path)
    C.build_corpus(home, seed=1, sources=["sotu", "brown"], log=lambda *a: None)
    out = home / "corpus"
    assert (out / "heldout" / "brown.txt").exists()
    (out / "heldout" / "mine.txt").write_text("my own text .\n", encoding="utf-8")   # not the builder's
    logs: list = []
    stats = C.build_corpus(home, seed=1, sources=["sotu"], log=logs.append)
    assert sorted(p.name for p in (out / "heldout").iterdir()) == ["mine.txt", "sotu.txt"]
    assert any("mine.txt" in line and "kept" in line for line in logs)
    assert list(stats["sources"]) == ["sotu"]
    on_disk = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert list(on_disk["sources"]) == ["sotu"]
    train = read_lines(out / "train.txt")
    assert not any("brown train sentence" in s for s in train)
    assert on_disk["totals"]["train_sentences"] == len(train)


WITHDRAWN = ("the registry has no bigbench==1.0.0, only version(s) 0.0.1 of bigbench: the pinned "
             "release is no longer offered there")


def fetch_failing(failing, error):
    """``get`` as in the cache, except that each of ``failing`` raises ``error(message)``."""
    from elmo.data.sources import get

    def fake(name, home, log=None):
        if name in failing:
            raise error(WITHDRAWN if error.__name__ == "PackageWithdrawn" else f"pip could not fetch {name} (offline?)")
        return get(name, home, log=log)
    return fake


def test_skip_unavailable_leaves_out_withdrawn_corpora_and_records_them(tmp_path, monkeypatch):
    """bigbench==1.0.0 is no longer offered: a build needing wikipedia (raw text) or vitaminc
    (task text) failed outright, so no corpus could be built any more."""
    from elmo.data.fetch import PackageWithdrawn
    home, sotu = make_home(tmp_path)
    claim = sotu[4][0]    # a task sentence also in sotu: excluded only while vitaminc is there
    vc = {"id": 0, "label": "True", "title": "X", "claim": claim.split(), "evidence": ["y"]}
    ready(home, "vitaminc", {f"{s}.jsonl": json.dumps(vc) + "\n" for s in ("train", "dev", "test")})
    full = C.build_corpus(home, out=tmp_path / "full", sources=["sotu"], log=lambda *a: None)
    assert claim not in read_lines(tmp_path / "full" / "train.txt") + read_lines(tmp_path / "full" / "heldout" / "sotu.txt")
    assert full["left_out"] == {} and full["task_text_not_excluded"] == {}

    monkeypatch.setattr(C, "get", fetch_failing({"wikipedia", "vitaminc"}, PackageWithdrawn))
    logs: list = []
    stats = C.build_corpus(home, sources=["sotu", "wikipedia"], log=logs.append, skip_unavailable=True)
    out = home / "corpus"
    assert claim in read_lines(out / "train.txt") + read_lines(out / "heldout" / "sotu.txt")
    assert list(stats["sources"]) == ["sotu"] and sorted(p.name for p in (out / "heldout").iterdir()) == ["sotu.txt"]
    assert list(stats["left_out"]) == ["wikipedia"] and WITHDRAWN in stats["left_out"]["wikipedia"]
    assert list(stats["task_text_not_excluded"]) == ["vitaminc"]
    assert "vitaminc" not in stats["excluded_task_text"] and "squad-dev" in stats["excluded_task_text"]
    assert json.loads((out / "stats.json").read_text()) == stats
    warnings = [line for line in logs if line.startswith("warning:")]
    assert len(warnings) == 2 and all("\n" not in w for w in warnings)
    left, task = sorted(warnings, key=lambda w: "task vitaminc" in w)
    assert "wikipedia is left out" in left and "vitaminc" not in left
    assert "task vitaminc" in task and "contaminated" in task
    summary = logs[-1]
    assert summary.startswith("wrote ") and "left out" in summary and "wikipedia" in summary
    assert "vitaminc" in summary and "NOT excluded" in summary


def test_without_skip_unavailable_a_withdrawn_corpus_fails_naming_the_option(tmp_path, monkeypatch):
    import pytest
    from elmo.data.fetch import DataError, PackageWithdrawn
    home, _ = make_home(tmp_path)
    monkeypatch.setattr(C, "get", fetch_failing({"squad-dev"}, PackageWithdrawn))
    with pytest.raises(PackageWithdrawn, match=r"^squad-dev: .*no longer offered.*--skip-unavailable"):
        C.build_corpus(home, sources=["sotu"], log=lambda *a: None)
    assert not (home / "corpus" / "stats.json").exists()
    # with it, a build none of whose sources can be fetched is an error, not an empty corpus
    monkeypatch.setattr(C, "get", fetch_failing({"wikipedia", "xsum"}, PackageWithdrawn))
    with pytest.raises(DataError, match="none of the sources wikipedia, xsum can be fetched"):
        C.build_corpus(home, sources=["wikipedia", "xsum"], log=lambda *a: None, skip_unavailable=True)
    assert not (home / "corpus" / "stats.json").exists()


def test_skip_unavailable_does_not_skip_an_offline_failure(tmp_path, monkeypatch):
    """An offline or unreachable registry may answer on a rerun: skipping would build a corpus
    without that source (or with its task text) for no lasting reason."""
    import pytest
    from elmo.data.fetch import DataError
    home, _ = make_home(tmp_path)
    C.build_corpus(home, sources=["sotu"], log=lambda *a: None, skip_unavailable=True)   # all there: builds
    (home / "corpus" / "stats.json").unlink()
    for failing in ("vitaminc", "sotu"):
        monkeypatch.setattr(C, "get", fetch_failing({failing}, DataError))
        with pytest.raises(DataError, match=f"could not fetch {failing} .offline"):
            C.build_corpus(home, sources=["sotu"], log=lambda *a: None, skip_unavailable=True)
        assert not (home / "corpus" / "stats.json").exists()


def test_cli_sources_and_skip_unavailable(tmp_path, monkeypatch, capsys):
    from elmo.cli import main
    from elmo.data.fetch import PackageWithdrawn
    home, _ = make_home(tmp_path)
    monkeypatch.setenv("ELMO_DATA", str(home))
    monkeypatch.setattr(C, "get", fetch_failing({"vitaminc"}, PackageWithdrawn))
    assert main(["data", "build-corpus", "--sources", "sotu,brown"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "vitaminc" in err and "--skip-unavailable" in err
    assert main(["data", "build-corpus", "--sources", "sotu,brown", "--skip-unavailable", "--seed", "7"]) == 0
    assert "warning: the text of task vitaminc" in capsys.readouterr().out
    stats = json.loads((home / "corpus" / "stats.json").read_text())
    assert list(stats["sources"]) == ["sotu", "brown"] and stats["seed"] == 7
    assert list(stats["task_text_not_excluded"]) == ["vitaminc"]
    import pytest
    with pytest.raises(SystemExit) as exit_:
        main(["data", "build-corpus", "--sources", "sotu,ptb"])
    assert exit_.value.code == 2 and "'ptb' is not a source of the LM corpus" in capsys.readouterr().err
