"""experiments/compare_results.py: one experiment's results under two biLMs side by side,
each task in its own metric, the gains over each side's baseline paired by seed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from elmo.tasks.compare import CompareError, comparison_markdown
from tests.conftest import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "compare_results.py"


def _results(scores: dict, sha: str) -> dict:
    """A results.json of two tasks x (baseline, elmo) x seeds 1, 2 with the given test
    scores: {(task, variant): [seed 1, seed 2]}."""
    metrics = {"pos": "token_accuracy", "ner": "span_f1"}
    runs = [{"task": task, "metric": metrics[task], "variant": variant, "seed": seed,
             "test": score, "dev": score, "seconds": 1.0,
             "elmo": None if variant == "baseline" else {"bilm": "default", "positions": ["input"],
                                                        "layers": "all", "lambda": 0.001,
                                                        "finetune": False}}
            for (task, variant), values in scores.items() for seed, score in zip((1, 2), values)]
    config = {"name": "two-tasks", "seeds": [1, 2], "tasks": [{"task": "pos"}, {"task": "ner"}],
              "variants": [{"name": "baseline"}, {"name": "elmo", "elmo": {}}]}
    return {"config": config, "command": "elmo experiment two.json", "runs": runs,
            "bilms": {"default": {"path": "elmo/resources/default", "sha256": sha,
                                  "sha256_of": "weights, options and vocabulary"}}}


OLD = _results({("pos", "baseline"): [90.0, 92.0], ("pos", "elmo"): [93.0, 95.0],
                ("ner", "baseline"): [40.0, 44.0], ("ner", "elmo"): [41.0, 45.0]}, "a" * 64)
NEW = _results({("pos", "baseline"): [90.0, 92.0], ("pos", "elmo"): [94.0, 97.0],
                ("ner", "baseline"): [40.0, 44.0], ("ner", "elmo"): [44.0, 46.0]}, "b" * 64)


def test_tables_keep_each_tasks_metric_and_show_the_changes():
    text = comparison_markdown(OLD, NEW, ("v1", "v3"), ("old.json", "new.json"))
    assert "| pos | token accuracy % | elmo | 94.00 ± 1.41 (2) | 95.50 ± 2.12 (2) | +1.50 |" in text
    assert "| ner | span F1 % | baseline | 42.00 ± 2.83 (2) | 42.00 ± 2.83 (2) | +0.00 |" in text
    # gains paired by seed: pos v1 +3, +3; v3 +4, +5
    assert "| pos | token accuracy % | elmo | +3.00 ± 0.00 (2) | +4.50 ± 0.71 (2) | +1.50 |" in text
    assert "| ner | span F1 % | elmo | +1.00 ± 0.00 (2) | +3.00 ± 1.41 (2) | +2.00 |" in text
    assert "SHA-256 aaaaaaaaaaaa" in text and "SHA-256 bbbbbbbbbbbb" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| task")]
    assert len(rows) == 6 and {row.split(" | ")[0][2:] for row in rows} == {"pos", "ner"}  # no average


def test_a_gain_that_rounds_to_zero_is_shown_without_a_minus():
    """(a gain of -0.001 read "-0.00 ± 0.00", a loss that the table does not hold; gains are
    signed, so zero is "+0.00" as an unchanged score's change is)"""
    tiny_loss = _results({("pos", "baseline"): [90.0, 92.0], ("pos", "elmo"): [89.999, 91.999],
                          ("ner", "baseline"): [40.0, 44.0], ("ner", "elmo"): [41.0, 45.0]}, "c" * 64)
    text = comparison_markdown(OLD, tiny_loss)
    assert "| pos | token accuracy % | elmo | +3.00 ± 0.00 (2) | +0.00 ± 0.00 (2) | -3.00 |" in text
    assert "| pos | token accuracy % | elmo | 94.00 ± 1.41 (2) | 91.00 ± 1.41 (2) | -3.00 |" in text
    assert "-0.00" not in text
    assert "-0.00" not in comparison_markdown(tiny_loss, tiny_loss)   # (a change of 0 too)


def test_a_task_in_two_metrics_is_refused():
    other = json.loads(json.dumps(NEW))
    for r in other["runs"]:
        if r["task"] == "ner":
            r["metric"] = "accuracy"
    with pytest.raises(CompareError, match="task 'ner': metric span_f1 .* accuracy"):
        comparison_markdown(OLD, other)


def compare_script():
    """experiments/compare_results.py as a module."""
    return load_script(SCRIPT, "compare_results")


def test_script_prints_or_writes_markdown(tmp_path, capsys):
    """Without -o (or with -o -) the report is printed; -o FILE writes it there and prints
    nothing, as `elmo experiment-table -o` does (it printed the report and wrote it too)."""
    script = compare_script()
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "results.json").write_text(json.dumps(OLD))
    (tmp_path / "new.json").write_text(json.dumps(NEW))
    out = tmp_path / "compare.md"
    sides = [str(tmp_path / "old"), str(tmp_path / "new.json"), "--names", "v1", "v3"]
    assert script.main(sides + ["-o", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert script.main(sides) == 0
    printed = capsys.readouterr().out
    assert out.read_text() == printed and printed.startswith(script.COMPARISON_HEADER)
    assert script.main(sides + ["-o", "-"]) == 0
    assert capsys.readouterr().out == printed and not (tmp_path / "-").exists()
    assert script.main([str(tmp_path / "missing.json"), str(tmp_path / "new.json")]) == 1
    assert "missing.json: cannot read it" in capsys.readouterr().err
    (tmp_path / "runs-only.json").write_text(json.dumps({"runs": OLD["runs"]}))   # (a KeyError traceback)
    assert script.main([str(tmp_path / "runs-only.json"), str(tmp_path / "new.json")]) == 1
    assert "runs-only.json: not the results.json of an experiment (it has no 'config')" in capsys.readouterr().err


def test_a_file_that_is_not_an_experiments_results_is_one_error(tmp_path, capsys):
    from elmo.cli import main
    (tmp_path / "empty.json").write_text("{}", encoding="utf-8")
    (tmp_path / "text.json").write_text("nope", encoding="utf-8")
    for name, named in (("empty.json", "not the results.json of an experiment (it has no 'config' or 'runs')"),
                        ("text.json", "not a results.json")):
        for command in (["experiment-table"], ["experiment-report"]):
            assert main(command + [str(tmp_path / name)]) == 1
            err = capsys.readouterr().err
            assert f"{name}: {named}" in err and "Traceback" not in err


def test_experiment_table_never_writes_over_its_results_or_into_a_folder(tmp_path, capsys):
    from elmo.cli import main
    text = json.dumps(_results({("pos", "baseline"): [0.9, 0.91], ("pos", "elmo"): [0.95, 0.96]}, "a"))
    results = tmp_path / "results.json"
    results.write_text(text, encoding="utf-8")
    assert main(["experiment-table", str(tmp_path), "-o", str(results)]) == 1   # the results would be lost
    assert "is one of the results to table" in capsys.readouterr().err
    assert results.read_text(encoding="utf-8") == text
    assert main(["experiment-table", str(results), "-o", str(tmp_path)]) == 1
    assert f"{tmp_path}: is a directory; the table must be a file path" in capsys.readouterr().err


def test_a_results_config_without_a_name_is_one_error(tmp_path, capsys):
    from elmo.cli import main
    (tmp_path / "results.json").write_text(json.dumps({"config": {}, "runs": []}), encoding="utf-8")
    assert main(["experiment-table", str(tmp_path)]) == 1   # a KeyError traceback before
    assert "results.json: not the results.json of an experiment (its 'config' has no 'name')" in capsys.readouterr().err


@pytest.mark.parametrize("score, message", [
    (float("nan"), "has the test score nan; a score must be a finite number"),  # (an AttributeError)
    ("abc", "has the test score 'abc'"),                                         # (a TypeError)
])
def test_a_run_with_a_score_that_is_not_a_number_is_one_error(tmp_path, capsys, score, message):
    from elmo.cli import main
    results = _results({("pos", "baseline"): [90.0, 92.0], ("pos", "elmo"): [93.0, 95.0]}, "a" * 64)
    results["runs"][1]["test"] = score
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results), encoding="utf-8")
    for command in (["experiment-report"], ["experiment-table"]):
        assert main(command + [str(tmp_path)]) == 1
        err = capsys.readouterr().err
        assert "results.json: run 1 (pos, baseline, seed 2) " + message in err and "Traceback" not in err


def test_a_report_from_no_runs_keeps_the_stored_summary(tmp_path, capsys):
    """(the summary was recomputed from no runs and the stored rows lost)"""
    from elmo.cli import main
    text = json.dumps({**_results({}, "a" * 64), "summary": [{"task": "pos", "variant": "baseline"}]})
    (tmp_path / "results.json").write_text(text, encoding="utf-8")
    assert main(["experiment-report", str(tmp_path)]) == 1
    assert "holds no runs to report on; it is kept as it is" in capsys.readouterr().err
    assert (tmp_path / "results.json").read_text(encoding="utf-8") == text


def test_a_report_is_refused_while_an_experiment_writes_the_folder(tmp_path, capsys):
    """experiment-report beside a running experiment wrote back the runs it had read over the
    experiment's newer results.json (the runs finished meanwhile were lost if it then ended)."""
    from elmo.cli import main
    from elmo.output_lock import output_lock
    text = json.dumps(_results({("pos", "baseline"): [90.0, 92.0], ("pos", "elmo"): [93.0, 95.0]}, "a" * 64))
    (tmp_path / "results.json").write_text(text, encoding="utf-8")
    with output_lock(tmp_path / "results.json", name=tmp_path):   # as a running experiment holds it
        assert main(["experiment-report", str(tmp_path)]) == 1
        assert f"{tmp_path} is already being written by PID" in capsys.readouterr().err
    assert (tmp_path / "results.json").read_text(encoding="utf-8") == text
    assert not (tmp_path / "results.md").exists()
    assert main(["experiment-report", str(tmp_path / "missing" / "results.json")]) == 1
    assert "missing/results.json: cannot read it (No such file or directory)" in capsys.readouterr().err
    assert main(["experiment-report", str(tmp_path)]) == 0 and (tmp_path / "results.md").exists()


def test_experiment_table_rows_come_from_the_runs_not_a_stored_summary(tmp_path, capsys):
    """The table printed the summary stored in results.json: none at all for a file written
    without one (an empty table), and an older version's or a hand-merged file's rows where
    they no longer matched its runs. Its rows are computed from the runs, as experiment-report's."""
    from elmo.cli import main
    results = _results({("pos", "baseline"): [90.0, 92.0], ("pos", "elmo"): [93.0, 96.0]}, "a" * 64)
    stale = {"task": "pos", "metric": "token_accuracy", "variant": "elmo", "seeds": [1],
             "test_mean": 50.0, "test_std": None, "gain_mean": 9.0, "gain_std": None,
             "elmo": results["runs"][-1]["elmo"]}
    for summary in (None, [stale]):
        stored = dict(results) if summary is None else {**results, "summary": summary}
        (tmp_path / "results.json").write_text(json.dumps(stored), encoding="utf-8")
        assert main(["experiment-table", str(tmp_path)]) == 0
        rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| two-tasks |")]
        assert len(rows) == 2
        assert "| 2 | 91.00 ± 1.41 | - |" in rows[0]                  # the baseline, seeds 1 and 2
        assert "| 2 | 94.50 ± 2.12 | +3.50 ± 0.71 |" in rows[1]         # paired: 3 and 4


def test_experiment_table_tells_apart_two_experiments_of_one_name_and_names_their_biLMs(tmp_path, capsys):
    """One config run with two versions of a biLM (v1/pos and pos) gave rows that differed in
    nothing but their numbers: the same experiment name, the same `default`, and no word of
    which files each `default` was."""
    from elmo.cli import main
    for folder, results in (("v1", OLD), ("v3", NEW)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "results.json").write_text(json.dumps(results), encoding="utf-8")
    assert main(["experiment-table", str(tmp_path / "v1"), str(tmp_path / "v3")]) == 0
    out = capsys.readouterr().out
    elmo_rows = [line for line in out.splitlines() if "| pos | token accuracy % | elmo |" in line]
    assert len(elmo_rows) == 2
    assert elmo_rows[0].startswith(f"| two-tasks ({tmp_path / 'v1'}) |") and "+3.00 ± 0.00" in elmo_rows[0]
    assert elmo_rows[1].startswith(f"| two-tasks ({tmp_path / 'v3'}) |") and "+4.50 ± 0.71" in elmo_rows[1]
    assert "SHA-256 aaaaaaaaaaaa" in out and "SHA-256 bbbbbbbbbbbb" in out
    assert out.count("domain-adapted: not recorded") == 2     # (OLD and NEW record no adaptation)


def test_experiment_table_says_which_task_two_experiments_ran_otherwise(tmp_path, capsys):
    """`experiment-table` of two experiments that ran one task name on other training sizes (or
    settings, files, or the same files read otherwise) put their rows side by side with no word
    of it, as if of one setup (compare_results.py flagged such a task)."""
    from elmo.cli import main

    def with_data(results, train):
        # (the vocabulary's counts follow from the text read: not "word vectors differ")
        data = {"sizes": {"train": train, "dev": 10, "test": 20}, "model": {"hidden": 8},
                "train": {"epochs": 2}, "source": {},
                "embeddings": {"vectors": "glove-50d", "dim": 50, "in_vectors": train // 2, "vocab": train}}
        return {**results, "data": {"pos": data, "ner": data}}

    def table(old_train, new_train):
        for folder, results, train in (("a", OLD, old_train), ("b", NEW, new_train)):
            (tmp_path / folder).mkdir(exist_ok=True)
            (tmp_path / folder / "results.json").write_text(json.dumps(with_data(results, train)),
                                                            encoding="utf-8")
        assert main(["experiment-table", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
        return capsys.readouterr().out

    assert "not run alike" not in table(250, 250)
    out = table(250, 2000)
    assert (f"* **task pos is not run alike in `two-tasks ({tmp_path / 'a'})` and "
            f"`two-tasks ({tmp_path / 'b'})`**: its split sizes differ") in out
    assert "* **task ner is not run alike" in out


def test_a_seed_run_twice_is_one_error_not_counted_twice(tmp_path, capsys):
    """Results merged by hand with one run twice: the row said 3 seeds of 2, its test mean
    counted the repeated run twice and its gain paired only the later one."""
    from elmo.cli import main
    results = _results({("pos", "baseline"): [90.0, 92.0], ("pos", "elmo"): [93.0, 95.0]}, "a" * 64)
    results["runs"].append({**results["runs"][2], "test": 99.0})     # (pos, elmo, seed 1) again
    text = json.dumps(results)
    (tmp_path / "results.json").write_text(text, encoding="utf-8")
    for command in (["experiment-report"], ["experiment-table"]):
        assert main(command + [str(tmp_path)]) == 1
        err = capsys.readouterr().err
        assert "results.json: run 4 repeats run 2 (pos, elmo, seed 1)" in err and "Traceback" not in err
    assert (tmp_path / "results.json").read_text(encoding="utf-8") == text
    assert not (tmp_path / "results.md").exists()


def test_a_task_scored_in_two_metrics_is_one_error_not_one_mean(tmp_path, capsys):
    """Results merged by hand from a run of ner in span F1 and one in token accuracy: the
    row averaged 95 (token accuracy) with 40 (span F1) as span F1 67.5, and the gain compared
    the ELMo runs in one metric with the baseline in the other."""
    from elmo.cli import main
    results = _results({("ner", "baseline"): [40.0, 44.0], ("ner", "elmo"): [41.0, 45.0]}, "a" * 64)
    results["runs"][3] = {**results["runs"][3], "metric": "token_accuracy", "test": 95.0}
    text = json.dumps(results)
    (tmp_path / "results.json").write_text(text, encoding="utf-8")
    for command in (["experiment-report"], ["experiment-table"]):
        assert main(command + [str(tmp_path)]) == 1
        err = capsys.readouterr().err
        assert ("results.json: run 3 (ner, elmo, seed 2) is scored in 'token_accuracy' but run 0 "
                "of task 'ner' in 'span_f1'") in err and "Traceback" not in err
    assert (tmp_path / "results.json").read_text(encoding="utf-8") == text
    assert not (tmp_path / "results.md").exists()


def test_a_task_not_run_alike_on_both_sides_is_said():
    """Two results of a task on other training sizes (or settings, or files) were put side by
    side as if only the biLM had changed."""
    def with_data(results, train, sha):
        data = {"sizes": {"train": train, "dev": 10, "test": 20}, "model": {"hidden": 8},
                "train": {"epochs": 2}, "embeddings": {"vectors": "glove-50d"},
                "source": {"files": {"test": {"path": "test.txt", "sha256": sha}}}}
        return {**results, "data": {"pos": data, "ner": {**data, "source": {}}}}

    same = comparison_markdown(with_data(OLD, 250, "c" * 64), with_data(NEW, 250, "c" * 64))
    assert "not run alike" not in same
    text = comparison_markdown(with_data(OLD, 250, "c" * 64), with_data(NEW, 2000, "d" * 64))
    assert ("* **task pos was not run alike**: its split sizes; test file contents differ, so its "
            "change is not the biLM's alone") in text
    assert "* **task ner was not run alike**: its split sizes differ" in text


def test_a_task_whose_same_files_were_read_otherwise_is_said():
    """Two results of one task on the same files, sizes and settings that read them otherwise
    (another label column, tokenized or not, another max_train sample, texts cut elsewhere)
    were put side by side as if only the biLM had changed: only sizes, settings, word vectors
    and file contents were compared."""
    def with_source(results, max_tokens=None, **source):
        base = {"format": {"type": "tsv", "text": "review", "label": "stars"}, "tokenize": False,
                "dev": "file", "full_sizes": {"train": 900, "dev": 10, "test": 20}, "subset_seed": 0,
                "files": {"test": {"path": "test.tsv", "sha256": "c" * 64}}}
        data = {"sizes": {"train": 250, "dev": 10, "test": 20}, "model": {"hidden": 8},
                "train": {"epochs": 2}, "embeddings": {"vectors": "glove-50d"},
                "source": {**base, **source}}
        tasks = [{"task": "classification", "name": "pos", "max_train": 250,
                  **({"max_tokens": max_tokens} if max_tokens else {})}, {"task": "ner"}]
        return {**results, "config": {**results["config"], "tasks": tasks},
                "data": {"pos": data, "ner": {**data, "source": {}}}}

    assert "not run alike" not in comparison_markdown(with_source(OLD), with_source(NEW))
    for changed, said in (({"format": {"type": "tsv", "text": "review", "label": "sentiment"}},
                           "file format (the columns or fields read)"),
                          ({"tokenize": True}, "tokenization"),
                          ({"dev": "50 of 500 training examples held out (dev_fraction 0.1, seed 1)"},
                           "dev split"),
                          ({"subset_seed": 1}, "sample (subset_seed)"),
                          ({"max_tokens": 40}, "text cut (max_tokens)")):
        text = comparison_markdown(with_source(OLD), with_source(NEW, **changed))
        assert f"* **task pos was not run alike**: its {said} differ, so its change" in text, changed
        assert "task ner was not run alike" not in text
    # a subset_seed that drew no sample (every split read whole) changes nothing
    whole = {"full_sizes": {"train": 250, "dev": 10, "test": 20}}
    assert "not run alike" not in comparison_markdown(with_source(OLD, **whole),
                                                      with_source(NEW, subset_seed=1, **whole))


def test_a_recorded_config_that_cannot_be_read_names_its_file(tmp_path, capsys):
    """experiment-report said "unknown config keys: ..." of a results.json's config without
    saying which of the folders given it was."""
    from elmo.cli import main
    results = _results({("pos", "baseline"): [90.0, 92.0]}, "a" * 64)
    results["config"]["retired"] = 1
    (tmp_path / "results.json").write_text(json.dumps(results), encoding="utf-8")
    for command in (["experiment-report"], ["experiment-table"]):
        assert main(command + [str(tmp_path)]) == 1
        err = capsys.readouterr().err
        assert f"{tmp_path}" in err and ": its recorded config cannot be read (unknown config keys: retired" in err


def test_script_never_writes_over_the_results_it_compares(tmp_path, capsys):
    """-o naming one of the two results replaced that results.json with the markdown."""
    script = compare_script()
    (tmp_path / "old").mkdir()
    kept = {"old/results.json": json.dumps(OLD), "new.json": json.dumps(NEW), "notes.txt": "mine"}
    for name, text in kept.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    for output, said in (("old/results.json", "is one of the results compared"),
                         ("new.json", "is one of the results compared"),
                         ("old", "is a directory"),
                         ("notes.txt", "exists and is not a comparison of two results; it is kept")):
        assert script.main([str(tmp_path / "old"), str(tmp_path / "new.json"), "-o", str(tmp_path / output)]) == 1
        assert said in capsys.readouterr().err
    assert all((tmp_path / name).read_text(encoding="utf-8") == text for name, text in kept.items())
    out = tmp_path / "compare.md"
    assert script.main([str(tmp_path / "old"), str(tmp_path / "new.json")]) == 0
    printed = capsys.readouterr().out
    for _ in range(2):             # its own earlier comparison is replaced
        assert script.main([str(tmp_path / "old"), str(tmp_path / "new.json"), "-o", str(out)]) == 0
        assert out.read_text(encoding="utf-8") == printed


def test_the_comparison_says_whether_each_bilm_was_adapted_to_the_domain():
    """The comparison named each biLM's SHA-256 but never whether it had been adapted to the
    domain (extra data, which results must say); the experiment tables said so, but "no" for a
    biLM whose metadata said extra_data without naming the text."""
    from elmo.tasks.report import bilm_lines
    adapted = json.loads(json.dumps(NEW))
    adapted["bilms"]["default"].update(adapted_on=["tweets.txt"], domain_adapted=True)
    text = comparison_markdown(OLD, adapted, ("v1", "v3"))
    old_line, new_line = (line for line in text.splitlines() if "biLM `default`" in line)
    assert "SHA-256 aaaaaaaaaaaa" in old_line and old_line.endswith("domain-adapted: not recorded")
    assert "SHA-256 bbbbbbbbbbbb" in new_line and new_line.endswith("domain-adapted: `tweets.txt`")
    extra = {**OLD["bilms"]["default"], "adapted_on": [], "domain_adapted": True}
    assert "domain-adapted: yes (extra data)" in comparison_markdown(OLD, {**NEW, "bilms": {"default": extra}})
    assert "domain-adapted: yes (extra data)" in bilm_lines({"default": extra})[0]


def test_a_bilm_without_an_adaptation_record_is_not_said_to_be_unadapted():
    """A results.json whose biLM entry has no adaptation record at all (written before it was
    recorded, or by hand) was compared as "domain-adapted: no", a claim the file does not make;
    "no" stays for an entry that records it was not adapted."""
    from elmo.tasks.report import bilm_lines
    bare = {k: v for k, v in OLD["bilms"]["default"].items() if k not in ("adapted_on", "domain_adapted")}
    plain = {**bare, "adapted_on": [], "domain_adapted": False}
    for info, said in ((bare, "not recorded"), (plain, "no")):
        text = comparison_markdown({**OLD, "bilms": {"default": info}}, NEW, ("v1", "v3"))
        line = next(line for line in text.splitlines() if "biLM `default`" in line)
        assert line.endswith(f"domain-adapted: {said}")
        assert bilm_lines({"default": info})[0].endswith(f"domain-adapted: {said}")


RESULTS = SCRIPT.parent / "results"


@pytest.mark.parametrize("name", sorted(p.parent.name for p in RESULTS.glob("*/compare_v1.md")))
def test_each_committed_comparison_is_what_the_script_writes_from_the_two_results(name, tmp_path, monkeypatch,
                                                                                  capsys):
    """experiments/README.md: each experiments/results/<name>/compare_v1.md puts version 1's
    results (experiments/results/v1/<name>/) beside version 3's. ner's still held the
    layer-norm variant's runs from before they were trained again (46.69 F1, gain +1.25, where
    results.json holds 48.26 and +2.82): each is compared with what the script writes now."""
    module = compare_script()
    monkeypatch.chdir(SCRIPT.parent.parent)       # (the report names each side by its path as given)
    out = tmp_path / "compare.md"
    assert module.main([f"experiments/results/v1/{name}/results.json", f"experiments/results/{name}/results.json",
                        "--names", "v1", "v3", "-o", str(out)]) == 0, capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == (RESULTS / name / "compare_v1.md").read_text(encoding="utf-8")
