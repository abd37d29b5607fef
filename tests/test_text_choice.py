"""The text commands are given: a whole corpus folder (``train.txt``, ``heldout/``,
``stats.json``, as ``elmo data build-corpus`` writes it) and held-out text that is training
text are refused by every command that reads text (:mod:`elmo.data.text_choice`)."""
from __future__ import annotations

import dataclasses
import os
import re

import pytest

import elmo

from elmo.cli import main
from elmo.training.finetune import finetune
from elmo.training.trainer import train
from training_helpers import tiny_config, write_toy_corpus


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_corpus(tmp_path_factory.mktemp("toy"), n_train=120, n_heldout=30)


def _built_corpus(folder, toy, stats=True):
    """A corpus folder in build-corpus's layout, from the toy text."""
    train_txt, held_txt, _ = toy
    (folder / "heldout").mkdir(parents=True)
    (folder / "train.txt").write_text(train_txt.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "heldout" / "toy.txt").write_text(held_txt.read_text(encoding="utf-8"), encoding="utf-8")
    if stats:
        (folder / "stats.json").write_text('{\n  "seed": 0,\n  "totals": {}\n}\n', encoding="utf-8")
    return folder


def test_training_on_a_whole_built_corpus_folder_is_refused(tmp_path, toy):
    """(``elmo train corpus/``, as the README showed it, trained on the held-out sentences, so a
    perplexity measured on them afterwards was on training text, and on stats.json's lines)"""
    corpus = _built_corpus(tmp_path / "data" / "corpus", toy)
    vocab_txt = toy[2]
    for text in (corpus, f"{corpus}/*", f"{corpus}/**", tmp_path / "data"):   # (the data home: all of it)
        with pytest.raises(ValueError, match=rf"^training text {re.escape(str(text))}: takes in the whole corpus "
                                             rf"folder {corpus} \(.*\); give {corpus}/train.txt as the training"):
            train(tiny_config(tmp_path / "run", text, vocab_txt, max_steps=1))
        assert not (tmp_path / "run").exists()
    unfinished = _built_corpus(tmp_path / "unfinished", toy, stats=False)   # (a build not done: no stats.json)
    with pytest.raises(ValueError, match="takes in the whole corpus folder"):
        train(tiny_config(tmp_path / "run", unfinished, vocab_txt, max_steps=1))
    # its parts named: taken
    cfg = tiny_config(tmp_path / "run", corpus / "train.txt", vocab_txt, max_steps=1,
                      valid=[str(corpus / "heldout")])
    assert train(cfg)["finished"]
    assert train(tiny_config(tmp_path / "run2", f"{corpus}/*.txt", vocab_txt, max_steps=1))["finished"]


def test_held_out_text_that_takes_in_a_corpus_folder_is_refused(tmp_path, toy):
    corpus = _built_corpus(tmp_path / "corpus", toy)
    train_txt, _, vocab_txt = toy
    with pytest.raises(ValueError, match=rf"^--valid {corpus}: takes in the whole corpus folder {corpus} .*; give "
                                         rf"{corpus}/heldout/ or its files as held-out text"):
        train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=1, valid=[str(corpus)]))
    with pytest.raises(ValueError, match=rf"^--heldout {corpus}: takes in the whole corpus folder"):
        finetune(tiny_config(tmp_path / "ft", train_txt, "", init_from=str(elmo.model_path("default")),
                             max_steps=1), heldout=[str(corpus)])
    assert not (tmp_path / "run").exists() and not (tmp_path / "ft").exists()


def test_vocab_build_and_perplexity_refuse_a_whole_corpus_folder(tmp_path, toy, capsys):
    """(vocab build counted the held-out words and stats.json's keys; perplexity measured the
    training text with the held-out text, as one figure)"""
    corpus = _built_corpus(tmp_path / "corpus", toy)
    assert main(["vocab", "build", str(corpus), "-o", str(tmp_path / "v.txt")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"corpus {corpus}: takes in the whole corpus folder {corpus}" in err
    assert not (tmp_path / "v.txt").exists()
    assert main(["perplexity", "default", str(corpus), "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"text {corpus}: takes in the whole corpus folder" in err
    assert main(["vocab", "build", str(corpus / "train.txt"), "-o", str(tmp_path / "v.txt")]) == 0


def test_valid_text_that_is_training_text_is_refused(tmp_path, toy):
    """(train --valid naming a training file, by another path, a link, or as a file of a training
    folder, reported the perplexity of trained text as validation perplexity)"""
    train_txt, held_txt, vocab_txt = toy
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "a.txt").write_text(train_txt.read_text(encoding="utf-8"), encoding="utf-8")
    (shards / "b.txt").write_text(held_txt.read_text(encoding="utf-8"), encoding="utf-8")
    os.link(shards / "a.txt", tmp_path / "hard.txt")
    (tmp_path / "soft.txt").symlink_to(shards / "b.txt")
    for valid, trained in (([str(shards / "b.txt")], shards / "b.txt"),
                           ([str(held_txt), str(tmp_path / "hard.txt")], shards / "a.txt"),
                           ([str(tmp_path / "soft.txt")], shards / "b.txt"),
                           ([f"{shards}/../shards/a.txt"], shards / "a.txt")):
        with pytest.raises(ValueError, match=rf"^--valid .*: is also training text \(the training file "
                                             rf"{re.escape(str(trained))}\); a held-out perplexity needs text the model does not train on"):
            train(tiny_config(tmp_path / "run", shards, vocab_txt, max_steps=1, valid=valid))
        assert not (tmp_path / "run").exists()
    assert train(tiny_config(tmp_path / "run", shards / "a.txt", vocab_txt, max_steps=1,
                             valid=[str(shards / "b.txt")]))["finished"]


def test_perplexity_on_the_models_own_training_text_says_so(tmp_path, toy, capsys):
    """(the figure on a model's training text was shown as any other, read as held-out)"""
    import json

    train_txt, held_txt, vocab_txt = toy
    train(tiny_config(tmp_path / "run", train_txt, vocab_txt, max_steps=1))
    model = tmp_path / "run" / "model"
    assert main(["perplexity", str(model), str(held_txt), str(train_txt), "--json", "--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["training_text"] == [str(train_txt)]
    assert err == f"note: {train_txt}: text this model was trained on (its metadata.json says so); this is not a " \
                  f"held-out perplexity\n"
    assert main(["perplexity", str(model), str(held_txt), "--json", "--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["training_text"] == [] and err == ""


def test_training_text_without_a_sentence_is_refused_before_the_run_is_written(tmp_path, toy):
    """(refused at the first batch, it left a config, the corpus counts and a log with a start
    event in the run folder, as if the run had begun)"""
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "blank.txt").write_text("\n  \n\t\n", encoding="utf-8")
    texts = [str(tmp_path / "empty.txt"), str(tmp_path / "blank.txt")]
    cfg = dataclasses.replace(tiny_config(tmp_path / "run", "", toy[2], max_steps=1), train=texts)
    with pytest.raises(ValueError, match=rf"^training text {re.escape(' '.join(texts))}: holds no sentence to "
                                         rf"train on \(only empty or blank lines\)$"):
        train(cfg)
    assert not (tmp_path / "run").exists()


def test_perplexity_on_the_start_models_training_text_says_so(tmp_path, toy, capsys):
    """An adapted or warm-started model's weights come from its start model's training too: its
    perplexity on that text was shown as held-out (only the last phase's text was looked up),
    also two phases on (a finetune of a warm start)."""
    import json

    train_txt, held_txt, vocab_txt = toy
    task = tmp_path / "task.txt"
    task.write_text(held_txt.read_text(encoding="utf-8"), encoding="utf-8")
    train(tiny_config(tmp_path / "base", train_txt, vocab_txt, max_steps=1))
    base = str(tmp_path / "base" / "model")
    finetune(tiny_config(tmp_path / "adapted", task, "", init_from=base, max_steps=1))
    train(tiny_config(tmp_path / "warm", task, vocab_txt, options=None, init_from=base, max_steps=1))
    finetune(tiny_config(tmp_path / "both", task, "", init_from=str(tmp_path / "warm" / "model"), max_steps=1))
    for run in ("adapted", "warm", "both"):
        model = tmp_path / run / "model"
        assert main(["perplexity", str(model), str(train_txt), "--json", "--device", "cpu"]) == 0
        out, err = capsys.readouterr()
        assert json.loads(out)["training_text"] == [str(train_txt)], run
        assert err.startswith(f"note: {train_txt}: text this model was trained on"), run


def test_a_shipped_models_training_text_under_the_home_folder_is_found(tmp_path, monkeypatch):
    # shipping writes the files it trained on under the home folder as "~/..." (the bundled
    # model's ~/.cache/elmo/corpus/train.txt), which no resolved path equalled
    from elmo.data.text_choice import trained_files
    monkeypatch.setenv("HOME", str(tmp_path))
    corpus = tmp_path / ".cache" / "elmo" / "corpus" / "train.txt"
    other = tmp_path / "other.txt"
    meta = {"trained_on": ["~/.cache/elmo/corpus/train.txt"]}
    assert trained_files([corpus, other], meta) == [corpus]
