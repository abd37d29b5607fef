"""Extractive question answering: the ``span_qa`` kind (a question and a context, the gold
answers as token spans), SQuAD v1.1's exact match and F1, span decoding against a brute-force
search, a BiDAF-lite model that learns a toy task from files end to end, a saved model's
predictions, answers read with file:line errors, and the ``squad`` preset."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from elmo.cli import main
from elmo.tasks.datasets import Answer, load_task
from elmo.tasks.files import TaskDataError
from elmo.tasks.metrics import METRICS, answer_f1, normalize_answer
from elmo.tasks.models import best_spans
from elmo.tasks.experiment_config import load_config
from elmo.tasks.runner import run_experiment


# ----------------------------------------------------------------------------- metrics
@pytest.mark.parametrize("text, normal", [
    ("The Cat", "cat"),
    ("  an  apple,  a pear!  ", "apple pear"),
    ("Theatre and THE end.", "theatre and end"),      # "the" inside a word stays
    ("U.S.", "us"),
    ("a", ""),
])
def test_answers_are_normalised_as_squad_does(text, normal):
    assert normalize_answer(text) == normal


def test_exact_match_and_f1_on_hand_made_cases():
    em, f1 = METRICS["exact_match"], METRICS["f1"]
    # the article and punctuation go: an exact match
    assert em([["the Eiffel Tower"]], ["Eiffel Tower ."]) == 1.0
    # gold "big red dog" (3 words), predicted "red dog barked" (3): 2 in common,
    # P = R = 2/3, F1 = 2/3
    assert f1([["big red dog"]], ["red dog barked"]) == pytest.approx(2 / 3)
    assert em([["big red dog"]], ["red dog barked"]) == 0.0
    # gold "cat" against predicted "cat cat dog": 1 common (counted as often as both have it),
    # P = 1/3, R = 1, F1 = 2 * (1/3) / (4/3) = 1/2
    assert answer_f1("cat", "cat cat dog") == pytest.approx(0.5)
    # the best over several gold answers: "Paris" matches the second exactly
    assert em([["the capital", "Paris"]], ["paris"]) == 1.0
    # question 1: best of F1("new york city", "york") = 2*(1)(1/3)/(4/3) = 1/2 and
    # F1("york", "york") = 1 -> 1; question 2: 0. Mean 1/2; EM likewise 1/2.
    gold = [["New York City", "York"], ["blue"]]
    assert f1(gold, ["york", "red"]) == pytest.approx(0.5)
    assert em(gold, ["york", "red"]) == pytest.approx(0.5)
    # an empty prediction scores 0 against a real answer; against one that normalises to
    # nothing too, SQuAD v1.1's F1 is 0 (no word in common) while its exact match is 1
    assert f1([["blue sky"]], [""]) == 0.0 and em([["blue sky"]], [""]) == 0.0
    assert f1([["the"]], [""]) == 0.0 and em([["a"]], ["."]) == 1.0
    assert str(f1([], [])) == "nan"
    with pytest.raises(ValueError, match="2 questions but 1"):
        f1(gold, ["york"])
    with pytest.raises(ValueError, match="without a gold answer"):
        em([[]], ["x"])


def test_results_md_names_the_other_metric_of_a_task_scored_in_exact_match():
    """A span_qa task scored in exact match records its F1 beside it; results.md's table of
    it was titled as holding "a question answering task's exact match", over a row of F1."""
    from elmo.tasks.report import markdown
    from elmo.tasks.experiment_config import normalise_config
    from elmo.tasks.summary import summarise
    cfg = normalise_config({"tasks": [{"task": "pos"}], "variants": [{"name": "b"}]})
    runs = [{"task": "qa", "metric": "exact_match", "variant": "b", "seed": seed, "test": em,
             "other_metrics": {"f1": f1}, "dev": em, "seconds": 1.0, "elmo": None}
            for seed, em, f1 in ((1, 50.0, 60.0), (2, 52.0, 64.0))]
    text = markdown({"config": {"name": "x", "seeds": [1, 2]}, "runs": runs,
                     "summary": summarise(runs, cfg)})
    lines = text.splitlines()
    row = lines.index("| qa | b | F1 % | 62.00 |")
    title = lines[row - 4]
    assert title.startswith("Other metrics on test") and "its F1 where it is scored in exact match" in title


# ----------------------------------------------------------------------------- decoding
def _brute_force(start, end, n, max_len):
    best, where = float("-inf"), (0, 0)
    for i in range(n):
        for j in range(i, min(n, i + max_len)):
            if start[i] + end[j] > best:
                best, where = start[i] + end[j], (i, j + 1)
    return where, best


def test_best_spans_match_a_brute_force_search_with_the_length_limit():
    gen = torch.Generator().manual_seed(0)
    for max_len in (1, 2, 3, 30):
        b, t = 7, 12
        start = torch.randn(b, t, generator=gen, dtype=torch.float64)
        end = torch.randn(b, t, generator=gen, dtype=torch.float64)
        lengths = [12, 11, 5, 1, 3, 0, 8]
        mask = torch.arange(t).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
        spans, scores = best_spans(start, end, mask, max_len)
        for row, n in enumerate(lengths):
            if n == 0:
                assert spans[row].tolist() == [0, 0] and scores[row] == float("-inf")
                continue
            where, best = _brute_force(start[row].tolist(), end[row].tolist(), n, max_len)
            # (random float64 scores: no two spans tie, so the best span is unique)
            assert tuple(spans[row].tolist()) == where and float(scores[row]) == best
            assert spans[row, 1] - spans[row, 0] <= max_len
    with pytest.raises(ValueError, match="at least 1 token"):
        best_spans(start, end, mask, 0)


# ----------------------------------------------------------------------------- end to end
FILLER = "red blue green cat dog sun moon tree rock fish".split()


def _toy(n: int, seed: int) -> list:
    """A context of filler words with the marker "xx" somewhere before its end; the question
    asks what follows it, and the answer is that word (its gold text upper-cased with a full
    stop, which normalisation forgives)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(FILLER) for _ in range(rng.randint(8, 14))]
        at = rng.randrange(len(words) - 1) + 1
        words[at - 1] = "xx"
        out.append({"question": "what follows xx ?", "context": " ".join(words),
                    "answers": [{"text": words[at].upper() + ".", "start": at, "end": at + 1}]})
    return out


def _write_toy(root: Path) -> dict:
    data = root / "data"
    data.mkdir()
    for split, n, seed in (("train", 160, 1), ("dev", 40, 2), ("test", 60, 3)):
        (data / f"qa-{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _toy(n, seed)),
                                                encoding="utf-8")
    return {"task": "span_qa", "name": "qa",
            "format": {"type": "jsonl", "text": "question", "text_b": "context", "label": "answers"},
            "files": {k: f"data/qa-{k}.jsonl" for k in ("train", "dev", "test")}}


def _config(root: Path, task: dict) -> Path:
    cfg = {"name": "qa", "seeds": 1, "threads": 1, "bilm": "fixture",
           "embeddings": {"random_dim": 8},
           "train": {"epochs": 12, "patience": 4, "batch_size": 8, "lr": 0.02},
           "model": {"hidden": 8, "classifier_hidden": 8, "dropout": 0.0},
           "tasks": [task], "variants": [{"name": "baseline"}]}
    path = root / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def test_qa_training_batches_group_contexts_of_similar_length(tmp_path, monkeypatch):
    """A QA batch is padded to its longest context: batches grouped by the question's length
    mixed contexts of every length. The experiment hands fit the kind's grouping."""
    from elmo.tasks import train_loop
    from elmo.tasks.datasets import Example
    from elmo.tasks.kinds import task_kind

    rng = random.Random(0)
    examples = [Example(["q"] * rng.randint(3, 12), (), ["c"] * rng.randint(10, 300)) for _ in range(64)]
    grouped = train_loop.batches(examples, 8, list, length=task_kind("span_qa").batch_length)
    spread = max(max(len(e.tokens_b) for e in b) - min(len(e.tokens_b) for e in b) for b in grouped)
    ordered = sorted(len(e.tokens_b) for e in examples)
    assert spread <= max(ordered[i + 7] - ordered[i] for i in range(0, 64, 8))   # sorted runs of 8
    seen = []
    real = train_loop.batches
    monkeypatch.setattr(train_loop, "batches", lambda *a, **k: seen.append(a[4:] or k) or real(*a, **k))
    run_experiment(load_config(_config(tmp_path, _write_toy(tmp_path))), out=tmp_path / "res", log=lambda s: None)
    assert seen and all(getattr(a[-1], "__func__", None) is type(task_kind("span_qa")).batch_length for a in seen)


def test_a_toy_qa_task_from_files_trains_and_its_saved_model_predicts(tmp_path, capsys):
    """The answer is the word after the marker: F1 far above a random span of a context of
    ~11 words; exact match is recorded beside F1; the saved model loads and
    gives, in Python and on the command line, the spans evaluation scored."""
    from elmo.tasks.kinds import answer_texts
    from elmo.tasks.models import TaskModel
    config = _config(tmp_path, _write_toy(tmp_path))
    out = tmp_path / "res"
    logs: list = []
    results = run_experiment(load_config(config), out=out, log=logs.append, save_models=True)
    run = results["runs"][0]
    assert run["metric"] == "f1" and set(run["other_metrics"]) == {"exact_match"}
    # (a random span of at most 30 tokens in ~11 finds a one-word answer a few % of the time)
    assert run["test"] > 80.0 and run["other_metrics"]["exact_match"] > 80.0, logs
    assert results["data"]["qa"]["labels"] == 0
    assert results["data"]["qa"]["source"]["answers_past_cut"]["dropped_from_train"] == 0
    md = (out / "results.md").read_text()
    assert "| qa | F1 % | baseline |" in md and "| qa | baseline | exact match % |" in md

    model = TaskModel.load(run["saved_model"])
    data = load_task(load_config(config)["tasks"][0])
    assert model.saved.kind == "span_qa" and model.saved.labels == []
    examples = data.splits["test"]
    guess = model.predict([(ex.tokens, ex.tokens_b) for ex in examples])
    assert all(0 <= g["start"] < g["end"] <= len(ex.tokens_b) and
               g["text"] == " ".join(ex.tokens_b[g["start"]:g["end"]]) for g, ex in zip(guess, examples))
    gold, texts = answer_texts(examples, guess)
    assert 100.0 * METRICS["f1"](gold, texts) == pytest.approx(run["test"], abs=1e-9)

    text = tmp_path / "new.txt"
    rows = [("what follows xx ?", "sun xx fish red dog tree moon"),
            ("what follows xx ?", "sun moon fish red dog xx tree"),
            ("what follows xx ?", "  sun  xx   fish  red ")]
    text.write_text("".join(f"{q}\t{c}\n" for q, c in rows), encoding="utf-8")
    expect = model.predict(rows)
    assert main(["predict", run["saved_model"], str(text), "--quiet"]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(x[2], int(x[3]), int(x[4])) for x in lines] == [(e["text"], e["start"], e["end"]) for e in expect]
    assert main(["predict", run["saved_model"], str(text), "--quiet", "--format", "jsonl"]) == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["answer"], r["start"], r["end"]) for r in recs] == [(e["text"], e["start"], e["end"]) for e in expect]
    assert recs[0]["question"] == rows[0][0] and recs[0]["tokens_read_context"] == 7
    # the answer as the context wrote it, with its characters' place there
    assert all(r["answer"] == c[r["char_start"]:r["char_end"]] and r["answer"].split() ==
               c.split()[r["start"]:r["end"]] for r, (_, c) in zip(recs, rows))
    text.write_text("what follows xx ?\n", encoding="utf-8")
    assert main(["predict", run["saved_model"], str(text), "--quiet"]) == 1
    assert f"{text}:1: a question answering model needs question<TAB>context" in capsys.readouterr().err
    # an empty question or context: a defined answer, and a note that says what it is (it
    # spoke of the label of a pooled vector)
    text.write_text("\tsun xx fish\nwhat follows xx ?\t\n", encoding="utf-8")
    assert main(["predict", run["saved_model"], str(text), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[1].split("\t")[2:] == ["", "0", "0"]
    assert f"{text}: lines 1, 2 without tokens: an empty context gets the empty answer at 0 0; an empty " \
           "question, the span the model points at without one" in captured.err and "label" not in captured.err


# ----------------------------------------------------------------------------- bad answers
@pytest.mark.parametrize("answers, problem", [
    ([{"text": "x", "start": 2, "end": 9}], r"answer 1: the span \[2, 9\) is not inside the context's 4 tokens"),
    ([{"text": "x", "start": 0, "end": 1}, {"text": "y", "start": 2, "end": 2}], r"answer 2: the span \[2, 2\)"),
    ([{"text": "x", "start": -1, "end": 1}], r"answer 1: the span \[-1, 1\)"),
    ([{"text": "x", "start": 0}], "answer 1: needs the fields text, start and end"),
    ([{"text": "x", "start": "0", "end": 1}], "answer 1: start and end must be token positions"),
    ([{"text": "", "start": 0, "end": 1}], "answer 1: text must be a non-empty string"),
    ([], "the answers must be a non-empty list"),
    ("blue", "the answers must be a non-empty list"),
])
def test_a_bad_answer_is_one_line_naming_file_and_line(tmp_path, answers, problem):
    good = {"q": "what ?", "c": "a b c d", "a": [{"text": "b", "start": 1, "end": 2}]}
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "a": answers}) + "\n", encoding="utf-8")
    task = {"task": "span_qa", "format": {"type": "jsonl", "text": "q", "text_b": "c", "label": "a"},
            "files": {"train": str(path), "test": str(path)}, "dev_fraction": 0}
    with pytest.raises(TaskDataError, match=rf"^{path}:2: {problem}") as info:
        load_task(task)
    assert "\n" not in str(info.value)
    path.write_text(json.dumps({"q": "what ?", "c": "a b"}) + "\n", encoding="utf-8")
    with pytest.raises(TaskDataError, match=rf"^{path}:1: no field 'a'"):
        load_task(task)
    with pytest.raises(TaskDataError, match="read from JSON lines"):
        load_task({**task, "format": {"type": "tsv", "text": 0, "text_b": 1, "label": 2}})


# ----------------------------------------------------------------------------- the preset
def test_the_squad_preset_cuts_contexts_and_drops_training_answers_past_the_cut(tmp_path):
    """SQuAD's standard form (`elmo data get squad-dev`): a question whose answers all lie past
    max_tokens is dropped from training and counted; dev and test keep theirs."""
    def rec(qid, context_len, spans):
        context = [f"w{i}" for i in range(context_len)]
        return {"id": qid, "title": "T", "context": context, "question": ["where", "?"],
                "answers": [{"text": " ".join(context[s:e]), "start": s, "end": e} for s, e in spans]}
    rows = {"train": [rec("a", 10, [(1, 2)]), rec("b", 10, [(6, 8)]), rec("c", 10, [(7, 9), (2, 3)]),
                      rec("d", 10, [(4, 5)])],
            "dev": [rec("e", 10, [(8, 9)]), rec("f", 4, [(0, 1)])],
            "test": [rec("g", 10, [(1, 3)])]}
    for split, recs in rows.items():
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    data = load_task({"task": "squad", "data_dir": str(tmp_path), "max_tokens": 5})
    assert data.kind == "span_qa" and data.metric == "f1" and data.labels == []
    train = data.splits["train"]
    # "b" (answer [6, 8) past 5 tokens) is dropped; "c" keeps its second answer, inside
    assert [ex.label[0].text for ex in train] == ["w1", "w7 w8", "w4"]
    assert all(len(ex.tokens_b) == 5 for ex in train) and train[0].tokens == ["where", "?"]
    assert train[1].label == (Answer("w7 w8", 7, 9), Answer("w2", 2, 3))
    assert len(data.splits["dev"]) == 2
    assert data.source["answers_past_cut"] == {"train": 1, "dev": 1, "test": 0, "dropped_from_train": 1}
    assert data.unseen_labels() == {} and "token spans" in data.describe_labels()
    with pytest.raises(TaskDataError, match=r"train.jsonl: every training question's answers lie past"):
        load_task({"task": "squad", "data_dir": str(tmp_path), "max_tokens": 1})


def test_questions_scored_past_the_cut_are_counted_in_the_log_and_results_md(tmp_path):
    """A dev or test question whose answers all lie past max_tokens_b is scored (a miss, for a
    model that points inside what it read): the log, results.json and results.md say how many
    of the questions scored (after max_test), not of the whole file."""
    from elmo.tasks.kinds import first_answer_inside
    task = {**_write_toy(tmp_path), "max_tokens_b": 6, "max_test": 30}
    config = json.loads(_config(tmp_path, task).read_text())
    config["train"]["epochs"] = 1
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    data = load_task(load_config(tmp_path / "config.json")["tasks"][0])
    expect = {split: sum(first_answer_inside(ex) is None for ex in data.splits[split]) for split in ("dev", "test")}
    assert all(expect.values()) and len(data.splits["test"]) == 30   # (the toy's answers: anywhere in 8-14 words)
    assert expect["test"] != data.source["answers_past_cut"]["test"]   # the whole file's count differs
    logs: list = []
    results = run_experiment(load_config(tmp_path / "config.json"), out=tmp_path / "res", log=logs.append)
    assert results["data"]["qa"]["answers_past_cut"] == expect
    line = f"dev {expect['dev']} of 40; test {expect['test']} of 30"
    assert any("past the context's cut" in s and s.endswith(line) for s in logs), logs
    md = (tmp_path / "res" / "results.md").read_text()
    assert f"* qa: {line}" in md


def test_answers_whose_text_is_not_their_span_are_counted_and_all_of_them_refused(tmp_path):
    """Training points at the span and the scores compare the text: spans counted in other
    tokens than the ones read (a file's own words under "tokenize": true) trained the model on
    other words without a word. The tokenizer's respellings (split punctuation, `` for a curly
    quote, case) are not counted; every training answer off its span is refused."""
    def row(context, text, start, end):
        return {"q": "what ?", "c": context, "a": [{"text": text, "start": start, "end": end}]}
    train = [row("the score was 3 - 1 today", "3-1", 3, 6),
             row("he said “ stop ” loudly", "“Stop”", 2, 5),
             row("she did n't stop", "STOP.", 3, 4),
             row("a b c d", "c d", 1, 3)]                            # reads "b c": off by one
    test = [row("x y z", "x", 1, 2), row("x y z", "y", 1, 2)]
    paths = {}
    for split, rows in (("train", train), ("test", test)):
        paths[split] = tmp_path / f"{split}.jsonl"
        paths[split].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    task = {"task": "span_qa", "name": "qa", "format": {"type": "jsonl", "text": "q", "text_b": "c", "label": "a"},
            "files": {k: str(p) for k, p in paths.items()}, "dev_fraction": 0}
    data = load_task(task)
    assert data.source["answers_off_span"] == {"train": [1, 4], "test": [1, 2],
                                               "example": "train: 'c d' at [1, 3) reads 'b c'"}
    assert data.describe_answers_off_span() == (
        "qa: gold answers whose text is not that of the context tokens at their span (training points at "
        "the span, the scores compare the text): train 1 of 4; test 1 of 2; e.g. train: 'c d' at [1, 3) reads 'b c'")
    paths["train"].write_text(json.dumps(row("a b c d", "c d", 1, 3)) + "\n", encoding="utf-8")
    with pytest.raises(TaskDataError, match=rf"^{paths['train'].resolve()}: no training answer's text is that of"):
        load_task(task)
    paths["train"].write_text(json.dumps(row("a b c d", "b c", 1, 3)) + "\n", encoding="utf-8")
    paths["test"].write_text(json.dumps(row("x y z", "y", 1, 2)) + "\n", encoding="utf-8")
    assert "answers_off_span" not in load_task(task).source and load_task(task).describe_answers_off_span() is None


@pytest.mark.parametrize("error", [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
                                   RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: "
                                                "can't allocate memory: you tried to allocate 21474836480 bytes")])
def test_a_run_out_of_memory_is_one_line_naming_the_longest_context(tmp_path, monkeypatch, capsys, error):
    """Contexts of thousands of tokens fill memory (the model's tensors grow with the context
    times the question): that was torch's traceback from deep in a batch. It is one line naming
    the run, the longest texts and what bounds them; a RuntimeError of another cause is not."""
    from elmo.tasks.models import SpanExtractor
    config = _config(tmp_path, _write_toy(tmp_path))

    def fail(self, batch):
        raise error
    monkeypatch.setattr(SpanExtractor, "loss", fail)
    assert main(["experiment", str(config), "--out", str(tmp_path / "res"), "--quiet"]) == 1
    err = capsys.readouterr().err
    longest = max(len(r["context"].split()) for split in ("train", "dev", "test")
                  for r in map(json.loads, (tmp_path / "data" / f"qa-{split}.jsonl").read_text().splitlines()))
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (f"qa / baseline / seed 1: out of memory (its longest text has 4 tokens, its longest second text "
            f"(context) {longest}, and a batch of 8 is padded to its longest); lower train.batch_size, or cut "
            f"the texts (max_tokens, max_tokens_b)") in err
    monkeypatch.setattr(SpanExtractor, "loss", lambda self, batch: (_ for _ in ()).throw(RuntimeError("other")))
    with pytest.raises(RuntimeError, match="^other$"):
        main(["experiment", str(config), "--out", str(tmp_path / "res2"), "--quiet"])
