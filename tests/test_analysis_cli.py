"""The analysis commands end to end on the bundled fixture model."""
from __future__ import annotations

import errno
import io
import json
import os
import sys
from pathlib import Path

import pytest

from elmo.cli import main
from tests.conftest import immutable, killed_between_the_fallback_renames

_PAIRS = "\n".join(
    f"role\tthe {a} saw the {b} .\tthe {b} saw the {a} .\t{a}\tagent\tpatient"
    for a, b in [("dog", "cat"), ("boy", "girl"), ("king", "queen"), ("fox", "owl")])


def test_neighbors_command(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank raised its rates .\nwe sat on the river bank .\nhello there\n")
    argv = ["neighbors", "the bank closed early .", "--word", "bank", "--model", "fixture",
            "--corpus", str(corpus), "--index-dir", str(tmp_path / "ix"), "-k", "3", "--no-glove"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "layer 1, nearest in context (15 corpus tokens)" in out and "layer 2" in out
    assert "[bank]" in out and "layer 0 (static)" in out
    assert main(argv + ["--same-word"]) == 0
    out = capsys.readouterr().out
    assert "(2 occurrences of 'bank')" in out and "[hello]" not in out
    assert main(argv[:-1] + ["--layer", "2", "--no-glove"]) == 0      # second run: cached index
    out = capsys.readouterr().out
    assert "building" not in out and "layer 1," not in out and "layer 2," in out


def test_neighbors_command_errors(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\n")
    base = ["neighbors", "x y", "--model", "fixture", "--corpus", str(corpus),
            "--index-dir", str(tmp_path / "ix"), "--no-glove"]
    assert main(base + ["--word", "bank"]) == 1
    assert "not a token" in capsys.readouterr().err
    assert main(base + ["--word", "x", "--layer", "1", "--layer", "7"]) == 1
    captured = capsys.readouterr()       # refused before the index was built and layer 1 printed
    assert "--layer 7: the model has layers 0..2" in captured.err and captured.out == ""
    assert not (tmp_path / "ix").exists()
    assert main(["neighbors", "x", "--word", "x", "--corpus", str(tmp_path / "none.txt")]) == 1


def test_neighbors_whose_index_cannot_be_saved_leaves_no_index_folder(tmp_path, capsys, monkeypatch):
    """(the index folder was made for the index's lock: a build that failed, on a full disk,
    left it empty)"""
    import errno
    import os

    from elmo.analysis.neighbors import CorpusIndex

    def full(self, folder):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(CorpusIndex, "save", full)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\n")
    assert main(["neighbors", "x a", "--word", "a", "--model", "fixture", "--corpus", str(corpus),
                 "--index-dir", str(tmp_path / "new" / "ix"), "--no-glove"]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


@pytest.mark.parametrize("code, hint", [(errno.ENOSPC, "free space or give --index-dir on another disk"),
                                        (errno.EDQUOT, "free space or give --index-dir on another disk"),
                                        (errno.EFBIG, "free space or give --index-dir on another disk"),
                                        (errno.EACCES, "give a writable --index-dir")],
                         ids=["ENOSPC", "EDQUOT", "EFBIG", "EACCES"])
def test_neighbors_index_that_finds_no_room_says_free_space(tmp_path, capsys, monkeypatch, code, hint):
    """(a full disk ended with "give a writable --index-dir", which the folder already was)"""
    from elmo.analysis.neighbors import CorpusIndex

    def fail(self, folder):
        raise OSError(code, os.strerror(code))
    monkeypatch.setattr(CorpusIndex, "save", fail)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\n")
    assert main(["neighbors", "x a", "--word", "a", "--model", "fixture", "--corpus", str(corpus),
                 "--index-dir", str(tmp_path / "ix"), "--no-glove"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.rstrip().endswith(hint) and os.strerror(code) in err


def test_an_index_dir_that_cannot_be_made_names_index_dir_not_elmo_data(tmp_path, capsys):
    """(an --index-dir in the way of a file said "the data cache cannot be written ...; point
    ELMO_DATA at a writable folder", which ELMO_DATA does not change)"""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\n")
    assert main(["neighbors", "x a", "--word", "a", "--model", "fixture", "--corpus", str(corpus),
                 "--index-dir", str(corpus / "ix"), "--no-glove"]) == 1
    err = capsys.readouterr().err
    assert "give a writable --index-dir" in err and "ELMO_DATA" not in err and err.count("\n") == 1


def test_neighbors_without_glove_at_hand_fails_before_the_index_is_built(tmp_path, monkeypatch, capsys):
    """(offline without GloVe, the index was built and every layer printed before the fetch
    of GloVe failed)"""
    from elmo.analysis import datasets
    from elmo.data.fetch import DataError

    def offline(name, fetch=True):
        raise DataError(f"cannot fetch {name}: offline")
    monkeypatch.setattr(datasets, "corpus_dir", offline)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\n")
    assert main(["neighbors", "x a", "--word", "a", "--model", "fixture", "--corpus", str(corpus),
                 "--index-dir", str(tmp_path / "ix")]) == 1
    captured = capsys.readouterr()
    assert "cannot fetch glove-50d: offline" in captured.err and captured.out == ""
    assert not (tmp_path / "ix").exists()


def test_neighbors_bad_numbers_broken_utf8_and_unknown_corpora_are_one_line(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\nd e\n")
    base = ["neighbors", "x a", "--word", "a", "--model", "fixture", "--index-dir", str(tmp_path / "ix"),
            "--no-glove"]
    assert main(base + ["--corpus", str(corpus), "-k", "0"]) == 1   # refused before any work
    captured = capsys.readouterr()
    assert captured.err == "elmo neighbors: error: -k must be at least 1, got 0\n" and captured.out == ""
    assert main(base + ["--corpus", str(corpus), "--max-sentences", "-1"]) == 1   # indexed one sentence
    assert "--max-sentences must be 0 (all) or more, got -1" in capsys.readouterr().err
    corpus.write_bytes(b"a \xff b\n")                                  # indexed U+FFFD as a word
    assert main(base + ["--corpus", str(corpus)]) == 1
    assert "corpus.txt: line 1: byte 0xff" in capsys.readouterr().err
    assert main(base + ["--corpus", "no-such-corpus:dev"]) == 1          # a DataError traceback
    assert capsys.readouterr().err.startswith("elmo neighbors: error: unknown corpus 'no-such-corpus'")


@pytest.mark.parametrize("given, said", [
    (["--pos-l2", "-1"], "--pos-l2 must be a finite number of 0 or more, got -1.0"),
    (["--batch-size", "0"], "--batch-size must be an integer of 1 or more, got 0"),
    (["--set", "batch_size=0"], "--set batch_size must be an integer of 1 or more, got 0"),
    (["--seed", "-1"], "--seed must be a whole number from 0 to 2**64 - 1, got -1"),
    (["--wsd-test-fraction", "1"], "--wsd-test-fraction must be between 0 and 1 (both excluded), got 1.0"),
])
def test_analyze_settings_out_of_range_are_one_line_with_one_prefix(tmp_path, capsys, given, said):
    # (it read "elmo analyze: error: analyze: --pos-l2 ...")
    assert main(["analyze", "fixture", "--out", str(tmp_path / "out"), *given]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"elmo analyze: error: {said}\n" and captured.out == ""
    assert not (tmp_path / "out").exists()


def test_analyze_names_a_bad_value_of_its_config_file_as_the_file_spells_it(tmp_path, capsys):
    """(AnalysisConfig's own check raised a ConfigError, which was passed on unnamed: the file's
    batch_size 0 was "--batch-size", an option the user never typed)"""
    config = tmp_path / "analysis.json"
    config.write_text(json.dumps({"batch_size": 0}), encoding="utf-8")
    assert main(["analyze", "fixture", "--out", str(tmp_path / "out"), "--config", str(config)]) == 1
    assert capsys.readouterr().err == (f"elmo analyze: error: --config {config}: batch_size must be an integer "
                                       f"of 1 or more, got 0\n")


def test_analyze_contrast_section_writes_a_report(tmp_path, capsys):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    out = tmp_path / "report"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast",
                 "--contrast-file", str(pairs)]) == 0
    printed = capsys.readouterr().out
    assert "not tested: the pos section was not run" in printed
    results = json.loads((out / "results.json").read_text())
    assert results["contrast"]["categories"]["role"]["n_pairs"] == 4
    text = (out / "report.md").read_text()
    assert "## Contrast pairs" in text and "untrained copy" in text
    assert f"--contrast-file {pairs}" in text and "--only contrast" in text
    assert f"The pairs of `{pairs}`." in text and "The built-in set" not in text
    assert main(["analyze", "fixture", "--out", str(tmp_path / "plain"), "--only", "contrast",
                 "--contrast-file", str(pairs), "--no-untrained-control"]) == 0
    plain = (tmp_path / "plain" / "report.md").read_text()
    assert "untrained copy" not in plain and "--no-untrained-control" in plain
    # a hand-written interpretation in the folder is shown by the rewritten report
    (out / "interpretation.md").write_text("Role swaps move the targets.\n")
    assert main(["analyze", "fixture", "--out", str(out), "--report-only"]) == 0
    again = (out / "report.md").read_text()
    assert "## Interpretation" in again and "Role swaps move the targets." in again
    assert again.replace(again[again.index("## Interpretation"):again.index("## Contrast")], "") == text
    # a hand-edited results.json (a section made a number, the findings removed) was a traceback
    for edit in (lambda r: {**r, "contrast": 5}, lambda r: {k: v for k, v in r.items() if k != "findings"}):
        (out / "results.json").write_text(json.dumps(edit(results)))
        assert main(["analyze", "fixture", "--out", str(out), "--report-only"]) == 1
        err = capsys.readouterr().err
        assert "results.json: not as elmo analyze wrote it" in err and err.count("\n") == 1
        assert (out / "report.md").read_text() == again                # the report is kept


def test_report_only_rewrites_a_report_whose_folder_above_cannot_be_written(tmp_path, capsys):
    """--report-only rewrites report.md inside the folder and swaps nothing: it was refused
    where the folder above cannot be written ("the report is written whole beside it and then
    swapped in"), as a run is, for the lock file it put beside the folder."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    above = tmp_path / "above"
    out = above / "report"
    run = ["analyze", "fixture", "--out", str(out), "--only", "contrast", "--contrast-file", str(pairs),
           "--no-untrained-control"]
    assert main(run) == 0
    (out / "interpretation.md").write_text("Role swaps move the targets.\n")
    capsys.readouterr()
    with immutable(above):
        assert main(["analyze", "fixture", "--out", str(out), "--report-only"]) == 0, capsys.readouterr().err
        assert "Role swaps move the targets." in (out / "report.md").read_text()
        assert main(run) == 1   # (a run is still refused: it swaps its folder there)
        assert "then swapped in, but" in capsys.readouterr().err
    assert sorted(p.name for p in above.iterdir()) == ["report"]


@pytest.mark.slow
def test_analyze_everything_on_the_fixture(tmp_path):
    from elmo.data import sources

    for name in ("brown-pos", "wordnet", "brown", "glove-50d", "wordsim353", "simlex999"):
        if not sources.is_ready(name):
            pytest.skip(f"corpus {name} not fetched (elmo data get {name})")
    out = tmp_path / "fixture"
    assert main(["analyze", "fixture", "--out", str(out), "--pos-train-sentences", "100",
                 "--pos-test-sentences", "50", "--wsd-max-lemmas", "50",
                 "--neighbors-sentences", "200"]) == 0
    text = (out / "report.md").read_text()
    assert "control: layer 2 of an untrained copy" in text
    for section in ("## POS", "## Word senses", "## Contextual neighbours", "## Contrast pairs",
                    "## Word similarity"):
        assert section in text
    for png in ("pos.png", "wsd.png", "sense_pca.png", "mix_weights_pos.png"):
        assert (out / png).stat().st_size > 1000
    results = json.loads((out / "results.json").read_text())
    assert len(results["pos"]["layers"]) == len(results["wsd"]["layers"]) == 3
    assert len(results["wsd"]["control_untrained"]["layers_seen_senses"]) == 3
    assert "; untrained copy: layer 0" in text


def test_analyze_checks_its_input_files_before_any_section_runs(tmp_path, capsys):
    """A bad --mix-weights was read after every section had run (and failed, writing nothing)."""
    (tmp_path / "w.json").write_text('{"weights": [0.5', encoding="utf-8")
    out = tmp_path / "out"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast",
                 "--mix-weights", str(tmp_path / "w.json")]) == 1
    captured = capsys.readouterr()
    assert "w.json: not JSON" in captured.err and "contrast ..." not in captured.out + captured.err
    # a mix of another model's depth would be drawn as this model's layers
    (tmp_path / "w.json").write_text('{"weights": [0.25, 0.25, 0.25, 0.25]}', encoding="utf-8")
    assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast",
                 "--mix-weights", str(tmp_path / "w.json")]) == 1
    captured = capsys.readouterr()
    assert "w.json: a mix of 4 layers, but fixture has 3" in captured.err
    assert "contrast ..." not in captured.out + captured.err
    assert not out.exists()   # (made for its lock before the model loaded, and left empty)
    assert main(["analyze", str(tmp_path / "no-model"), "--out", str(tmp_path / "a" / "out")]) == 1
    assert "no-model" in capsys.readouterr().err and not (tmp_path / "a").exists()
    (tmp_path / "file").write_text("x", encoding="utf-8")
    assert main(["analyze", "fixture", "--out", str(tmp_path / "file"), "--only", "contrast"]) == 1
    assert "file: is a file, but the output folder must be a folder" in capsys.readouterr().err


def test_analyze_only_one_section_keeps_a_fuller_report_and_other_results(tmp_path, capsys):
    """--only contrast into a full report's folder replaced its results.json and report.md with
    the contrast section alone; into an experiment's folder, the experiment's results.json."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    run = ["analyze", "fixture", "--only", "contrast", "--contrast-file", str(pairs),
           "--no-untrained-control", "--out"]
    out = tmp_path / "report"
    out.mkdir()
    full = json.dumps({"sections": ["pos", "wsd", "neighbors", "contrast"], "config": {}}) + "\n"
    (out / "results.json").write_text(full)
    assert main(run + [str(out)]) == 1
    err = capsys.readouterr().err
    assert "results.json: holds the sections pos, wsd, neighbors, which this run (--only contrast) " \
           "would keep, but it records no weights fingerprint" in err and err.count("\n") == 1
    assert (out / "results.json").read_text() == full and not (out / "report.md").exists()
    experiment = tmp_path / "experiment"
    experiment.mkdir()
    (experiment / "results.json").write_text('{"runs": []}\n')
    assert main(run + [str(experiment)]) == 1
    assert "holds no results of elmo analyze" in capsys.readouterr().err
    assert (experiment / "results.json").read_text() == '{"runs": []}\n'
    # the same section again replaces its own results
    (out / "results.json").write_text(json.dumps({"sections": ["contrast"], "config": {}}))
    assert main(run + [str(out)]) == 0
    assert json.loads((out / "results.json").read_text())["sections"] == ["contrast"]
    assert not list(out.glob("*.lock"))


def _merge_inputs(tmp_path, monkeypatch) -> list:
    """The options of a seconds-long report on the fixture model: contrast pairs, a tiny
    WordNet and a pair file of 12 scored word pairs (nothing fetched)."""
    _tiny_wordnet(tmp_path, monkeypatch)
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    words = "cat dog car bus tree leaf king queen river bank sun moon".split()
    (tmp_path / "sim.tsv").write_text("".join(f"{a}\t{b}\t{(7 * i) % 10}\n" for i, (a, b)
                                              in enumerate(zip(words, words[1:] + words[:1]))))
    return ["--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control",
            "--similarity-sets", str(tmp_path / "sim.tsv")]


def _old_fingerprint(bilm) -> str:
    """The weights fingerprint analyze recorded before the package had one model digest (SHA-1
    of the options and each tensor's name and bytes; a model without dictionaries of its own)."""
    import hashlib
    h = hashlib.sha1(bilm.options.to_json().encode())
    for name, tensor in sorted(bilm.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def test_only_joins_a_report_that_records_the_earlier_fingerprint_of_its_model(tmp_path, monkeypatch, capsys):
    """A report written before the fingerprint was the package's model digest records the
    fingerprint of its time: --only into its folder is the same model's still (it was refused as
    another model's), and another model is still refused."""
    import elmo
    options = _merge_inputs(tmp_path, monkeypatch)
    out = tmp_path / "out"
    run = ["analyze", "fixture", "--out", str(out), *options]
    assert main(run + ["--only", "wsd"]) == 0
    results = json.loads((out / "results.json").read_text())
    old = _old_fingerprint(elmo.from_pretrained("fixture"))
    (out / "results.json").write_text(json.dumps(dict(results, model_fingerprint=old), indent=2) + "\n")
    other = os.path.join(os.path.dirname(__file__), "fixtures", "elmoformanylangs", "model")
    assert main(["analyze", other, "--out", str(out), *options, "--only", "similarity"]) == 1
    assert f"(weights fingerprint {old}), not of {other} (" in capsys.readouterr().err
    assert main(run + ["--only", "similarity"]) == 0
    merged = json.loads((out / "results.json").read_text())
    assert merged["sections"] == ["wsd", "similarity"] and merged["wsd"] == results["wsd"]
    assert merged["model_fingerprint"] == results["model_fingerprint"]      # (now the new form)


def test_only_adds_a_section_to_a_report_of_the_same_model_and_keeps_the_others(tmp_path, monkeypatch, capsys):
    """--only similarity into a report's folder was refused (it would drop the other sections), so
    a new section meant recomputing them all. Now it joins them: their results, pictures and report
    text stay as they were, and the report's first command reruns them all."""
    options = _merge_inputs(tmp_path, monkeypatch)
    out = tmp_path / "out"
    run = ["analyze", "fixture", "--out", str(out), *options]
    assert main(run + ["--only", "wsd", "--only", "contrast"]) == 0
    before = json.loads((out / "results.json").read_text())
    text = (out / "report.md").read_text()
    pictures = {name: (out / name).read_bytes() for name in ("wsd.png", "sense_pca.png")}
    assert main(run + ["--only", "similarity"]) == 0
    capsys.readouterr()
    results = json.loads((out / "results.json").read_text())
    assert results["sections"] == ["wsd", "contrast", "similarity"] and results["similarity"]["sets"]
    for key in ("wsd", "contrast", "findings", "model_fingerprint"):
        assert results[key] == before[key]
    assert list(results["seconds"])[:2] == ["wsd", "contrast"] and results["seconds"]["wsd"] == before["seconds"]["wsd"]
    assert {name: (out / name).read_bytes() for name in pictures} == pictures and (out / "similarity.png").is_file()
    merged = (out / "report.md").read_text()
    kept = text[text.index("## Word senses"):text.index("## Time")]
    assert merged[merged.index("## Word senses"):merged.index("## Word similarity")] == kept
    everything = next(line for line in merged.splitlines() if line.startswith("Everything below"))
    assert "--only wsd --only contrast --only similarity" in everything and str(tmp_path / "sim.tsv") in everything
    # another model's weights, or another setting of a kept section, are refused before any work
    other = os.path.join(os.path.dirname(__file__), "fixtures", "elmoformanylangs", "model")
    for argv, named in ((["analyze", other, "--out", str(out), *options, "--only", "similarity"],
                         f"holds the results of model fixture (weights fingerprint {before['model_fingerprint']}), "
                         f"not of {other} ("),
                        (run + ["--only", "similarity", "--seed", "1"],
                         "computed with other settings: --seed (wsd, contrast: 0 there, 1 here)")):
        assert main(argv) == 1
        captured = capsys.readouterr()
        assert named in captured.err and captured.err.count("\n") == 1 and "similarity ..." not in captured.out
        assert json.loads((out / "results.json").read_text()) == results
    # a setting that only the recomputed section reads may change
    # a hand-edited kept section would fail the merged report after the new section had run
    (out / "results.json").write_text(json.dumps({**results, "wsd": 5}))
    assert main(run + ["--only", "similarity"]) == 1
    captured = capsys.readouterr()
    assert "results.json: not as elmo analyze wrote it (AttributeError" in captured.err and "its sections cannot be kept" \
        in captured.err and "similarity ..." not in captured.out
    (out / "results.json").write_text(json.dumps(results))
    (tmp_path / "sim2.tsv").write_text((tmp_path / "sim.tsv").read_text())
    assert main(run + ["--only", "similarity", "--similarity-sets", str(tmp_path / "sim2.tsv")]) == 0
    again = json.loads((out / "results.json").read_text())
    assert list(again["similarity"]["sets"]) == [str(tmp_path / "sim2.tsv")] and again["wsd"] == before["wsd"]


def test_kept_contrast_results_of_other_pairs_are_refused(tmp_path, monkeypatch, capsys):
    """A kept contrast section was checked by the --contrast-file name alone: the file edited
    under the same name, or a new version of the built-in set, left the numbers of the old
    pairs in the report in silence. Now they are refused before any work, as another setting
    is, and --only contrast computes them again on the pairs of now."""
    from elmo.analysis import contrast_pairs

    options = _merge_inputs(tmp_path, monkeypatch)
    out = tmp_path / "out"
    run = ["analyze", "fixture", "--out", str(out), *options]
    assert main(run + ["--only", "contrast"]) == 0
    results = json.loads((out / "results.json").read_text())
    # comment lines and line ends are not pairs: the same pairs, kept
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("# the same pairs\r\n" + _PAIRS.replace("\n", "\r\n") + "\r\n")
    assert main(run + ["--only", "similarity"]) == 0
    assert json.loads((out / "results.json").read_text())["contrast"] == results["contrast"]
    kept = json.loads((out / "results.json").read_text())
    capsys.readouterr()
    pairs.write_text(_PAIRS.replace("agent\tpatient", "patient\tagent", 1) + "\n")    # one pair relabelled
    assert main(run + ["--only", "similarity"]) == 1
    captured = capsys.readouterr()
    assert f"{out / 'results.json'}: its contrast section would be kept, but it was computed on other contrast " \
           f"pairs ({pairs}: other pairs than when they were computed); rerun it too (--only contrast)" \
           in captured.err and "similarity ..." not in captured.out
    assert json.loads((out / "results.json").read_text()) == kept
    assert main(run + ["--only", "contrast"]) == 0                    # computed again on the new pairs
    assert main(run + ["--only", "similarity"]) == 0
    capsys.readouterr()
    # results that record no pairs (written before they were recorded) cannot be told apart
    results = json.loads((out / "results.json").read_text())
    del results["contrast"]["pairs"]
    (out / "results.json").write_text(json.dumps(results))
    assert main(run + ["--only", "similarity"]) == 1
    assert "its contrast section records no digest of its pairs" in capsys.readouterr().err
    # the built-in set: a new version of it is other pairs under the same (absent) option
    builtin = [o for o in options if o not in ("--contrast-file", str(pairs))]
    plain = ["analyze", "fixture", "--out", str(tmp_path / "builtin"), *builtin]
    assert main(plain + ["--only", "contrast"]) == 0
    recorded = json.loads((tmp_path / "builtin" / "results.json").read_text())["contrast"]["pairs"]
    assert recorded["source"] == "built-in" and recorded["version"] == contrast_pairs.VERSION
    report = (tmp_path / "builtin" / "report.md").read_text()
    assert f"The built-in set (version {contrast_pairs.VERSION}) was written before any model" in report
    monkeypatch.setattr(contrast_pairs, "VERSION", contrast_pairs.VERSION + 1)
    monkeypatch.setattr(contrast_pairs, "BUILTIN", contrast_pairs.BUILTIN.replace("dog\tagent\tpatient",
                                                                                  "dog\tpatient\tagent", 1))
    capsys.readouterr()
    assert main(plain + ["--only", "similarity"]) == 1
    assert (f"computed on other contrast pairs (the built-in set, version {contrast_pairs.VERSION - 1} there, "
            f"{contrast_pairs.VERSION} here)") in capsys.readouterr().err


def _every_input_file(tmp_path, monkeypatch) -> list:
    """The options of a seconds-long report of every section on the fixture model, each read
    from a small file of its own (:func:`_merge_inputs`, a word/TAG Brown POS beside the tiny
    WordNet, a neighbours corpus and a similarity corpus)."""
    from elmo.analysis import datasets

    options = _merge_inputs(tmp_path, monkeypatch)
    monkeypatch.setenv("ELMO_DATA", str(tmp_path / "data"))             # (the neighbour index)
    tagged = ["the/at dog/nn saw/vbd a/at cat/nn ./.", "a/at king/nn ran/vbd ./.", "she/pps sat/vbd ./."]
    folder = datasets.corpus_dir("brown-pos")                          # (the tiny WordNet's folder)
    for split in ("train", "test"):
        (folder / f"{split}.txt").write_text("\n".join(tagged) + "\n")
    (tmp_path / "corpus.txt").write_text("the bank raised its rates .\nwe sat on the river bank .\n")
    return [*options, "--neighbors-corpus", str(tmp_path / "corpus.txt"), "--similarity-corpus",
            str(tmp_path / "corpus.txt"), "--pos-iterations", "3"]


def test_kept_sections_of_files_edited_under_the_same_name_are_refused(tmp_path, monkeypatch, capsys):
    """A kept section's input files were checked by their names alone (--neighbors-corpus,
    --similarity-sets, --similarity-corpus) or not at all (Brown POS and WordNet in the data
    cache): a file edited under the same name left the numbers of its old text in the report in
    silence. Now each section records a SHA-256 of every file it read, and a kept section whose
    files differ, cannot be read, or that records none is refused before any work, as a kept
    contrast section of other pairs is."""
    from elmo.analysis import datasets

    options = _every_input_file(tmp_path, monkeypatch)
    out = tmp_path / "out"
    run = ["analyze", "fixture", "--out", str(out), *options]
    assert main(run + [a for s in ("pos", "wsd", "neighbors", "similarity") for a in ("--only", s)]) == 0
    results = json.loads((out / "results.json").read_text())
    data = datasets.corpus_dir("wordnet")
    assert set(results["neighbors"]["inputs"]) == {f"--neighbors-corpus {tmp_path / 'corpus.txt'}"}
    assert set(results["similarity"]["inputs"]) == {f"--similarity-sets {tmp_path / 'sim.tsv'}",
                                                    f"--similarity-corpus {tmp_path / 'corpus.txt'}"}
    assert set(results["pos"]["inputs"]) == {"brown-pos/train.txt", "brown-pos/test.txt"}
    assert set(results["wsd"]["inputs"]) == {"wordnet/examples.tsv", "wordnet/senses.tsv", "wordnet/synsets.tsv"}
    assert main(run + ["--only", "contrast"]) == 0                      # the same files: all kept
    kept = json.loads((out / "results.json").read_text())
    assert all(kept[s] == results[s] for s in ("pos", "wsd", "neighbors", "similarity"))
    capsys.readouterr()
    for file, label, section in ((tmp_path / "sim.tsv", f"--similarity-sets {tmp_path / 'sim.tsv'}", "similarity"),
                                 (tmp_path / "corpus.txt", f"--neighbors-corpus {tmp_path / 'corpus.txt'}",
                                  "neighbors"),
                                 (data / "test.txt", "brown-pos/test.txt", "pos"),
                                 (data / "senses.tsv", "wordnet/senses.tsv", "wsd")):
        text = file.read_text()
        file.write_text(text.replace("\n", " \n", 1))                   # edited under the same name
        assert main(run + ["--only", "contrast"]) == 1, section
        captured = capsys.readouterr()
        assert f"{out / 'results.json'}: its {section} section would be kept, but it was computed on other input " \
               f"files ({label}: other content than when it was computed" in captured.err, captured.err
        assert f"rerun it too (--only {section})" in captured.err and "contrast ..." not in captured.out
        assert json.loads((out / "results.json").read_text()) == kept
        file.write_text(text)
    # a file that is gone cannot be compared; results that record no files cannot be told apart
    (tmp_path / "sim.tsv").rename(tmp_path / "gone.tsv")
    assert main(run + ["--only", "contrast"]) == 1
    assert "its similarity section would be kept, but its input files cannot be read now" in capsys.readouterr().err
    (tmp_path / "gone.tsv").rename(tmp_path / "sim.tsv")
    del kept["neighbors"]["inputs"]
    (out / "results.json").write_text(json.dumps(kept))
    assert main(run + ["--only", "contrast"]) == 1
    assert "its neighbors section records no digest of its input files (written before they were recorded), so " \
           f"it cannot be told to be of --neighbors-corpus {tmp_path / 'corpus.txt'} now" in capsys.readouterr().err
    assert main(run + ["--only", "neighbors"]) == 0                     # computed again: kept from now on
    assert main(run + ["--only", "contrast"]) == 0


def test_every_setting_names_the_sections_it_changes():
    """A setting missing from the table would be checked for no kept section: a merge would then
    keep sections computed with another value of it, under a report that states this run's."""
    from dataclasses import fields

    from elmo.analysis.report import SECTIONS, SETTING_SECTIONS, AnalysisConfig

    assert set(SETTING_SECTIONS) == {f.name for f in fields(AnalysisConfig)}
    assert all(names and set(names) <= set(SECTIONS) for names in SETTING_SECTIONS.values())


@pytest.mark.slow
def test_only_similarity_joins_a_full_report_on_the_fixture(tmp_path):
    """The default model's report got its similarity section in a folder of its own: --only
    similarity into the full report was refused. Merged, the report's command runs everything."""
    from elmo.data import sources

    for name in ("brown-pos", "wordnet", "brown", "glove-50d", "wordsim353", "simlex999"):
        if not sources.is_ready(name):
            pytest.skip(f"corpus {name} not fetched (elmo data get {name})")
    out = tmp_path / "fixture"
    run = ["analyze", "fixture", "--out", str(out), "--pos-train-sentences", "20", "--pos-test-sentences", "10",
           "--pos-iterations", "5", "--wsd-max-lemmas", "10", "--neighbors-sentences", "20"]
    assert main(run + [arg for s in ("pos", "wsd", "neighbors", "contrast") for arg in ("--only", s)]) == 0
    before, text = json.loads((out / "results.json").read_text()), (out / "report.md").read_text()
    assert main(run + ["--only", "similarity"]) == 0
    results, merged = json.loads((out / "results.json").read_text()), (out / "report.md").read_text()
    assert all(results[s] == before[s] for s in ("pos", "wsd", "neighbors", "contrast", "findings"))
    assert merged[merged.index("## POS"):merged.index("## Word similarity")] == text[text.index("## POS"):
                                                                                    text.index("## Time")]
    everything = next(line for line in merged.splitlines() if line.startswith("Everything below"))
    assert "--only" not in everything and "--similarity-sets wordsim353,simlex999" in everything
    assert results["sections"] == ["pos", "wsd", "neighbors", "contrast", "similarity"]


def test_analyze_refuses_a_folder_another_analysis_is_writing(tmp_path, capsys):
    from elmo.output_lock import output_lock

    out = tmp_path / "report"
    out.mkdir()
    with output_lock(out / "results.json", name=out):   # (the lock is per process: a thread
        import threading                                 # of this one cannot take it either)
        codes = []
        worker = threading.Thread(target=lambda: codes.append(main(
            ["analyze", "fixture", "--only", "contrast", "--out", str(out)])))
        worker.start()
        worker.join()
    assert codes == [1] and "is already being written" in capsys.readouterr().err
    assert not (out / "results.json").exists()


def test_neighbors_of_a_corpus_sentence_leave_out_the_query_itself(tmp_path, capsys):
    """A query sentence taken from the corpus listed itself first (cosine 1.00), and once more
    per copy of it, in the k slots."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank raised its rates .\nwe sat on the river bank .\n"
                      "the bank raised its rates .\nthe bank raised its rates .\n")
    argv = ["neighbors", "the bank raised its rates .", "--word", "bank", "--model", "fixture",
            "--corpus", str(corpus), "--index-dir", str(tmp_path / "ix"), "-k", "1", "--no-glove",
            "--layer", "2", "--same-word"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "(1 occurrence of 'bank'; the query itself, in the 3 corpus copies of its " \
           "sentence, left out)" in out
    assert "we sat on the river [bank] ." in out and "the [bank] raised" not in out.split("layer 0")[0]
    assert main(argv[:-1]) == 0                       # any word: the copies' other tokens stay
    out = capsys.readouterr().out
    assert "(22 corpus tokens; the query itself, in the 3 corpus copies of its sentence, left out)" in out
    assert "[bank] raised" not in out.split("layer 0")[0]
    # the query's word occurs nowhere else: the message said its whole sentence was left out
    river = ["neighbors", "we sat on the river bank .", "--word", "river", *argv[4:]]
    assert main(river) == 0
    assert "'river' occurs in the corpus only as the query itself (its sentence is a corpus sentence), " \
           "which is left out" in capsys.readouterr().out


def test_neighbors_in_a_corpus_of_the_query_alone_say_there_is_none(tmp_path, capsys):
    """A corpus whose only token is the query printed each layer's header with nothing under
    it, and a blank line for the static neighbours."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("bank\n\nbank\n")
    assert main(["neighbors", "bank", "--word", "bank", "--model", "fixture", "--corpus", str(corpus),
                 "--index-dir", str(tmp_path / "ix"), "--no-glove"]) == 0
    out = capsys.readouterr().out
    assert "the corpus holds no token but the query itself, which is left out" in out
    assert "layer 1" not in out and "layer 0 (static), nearest corpus words:\n  the corpus has no word but 'bank'\n" in out
    corpus.write_text("the bank\n")
    assert main(["neighbors", "the bank", "--word", "bank", "--model", "fixture", "--corpus", str(corpus),
                 "--index-dir", str(tmp_path / "ix"), "--no-glove", "--layer", "1"]) == 0
    assert "(1 corpus token; the query itself, in the corpus copy of its sentence, left out)" in capsys.readouterr().out


def test_report_only_on_a_folder_without_analysis_results_is_one_line(tmp_path, capsys):
    (tmp_path / "results.json").write_text('{"runs": []}\n')        # an experiment's: KeyError
    assert main(["analyze", "fixture", "--out", str(tmp_path), "--report-only"]) == 1
    assert "results.json: holds no results of elmo analyze" in capsys.readouterr().err
    assert main(["analyze", "fixture", "--out", str(tmp_path / "none"), "--report-only"]) == 1
    assert "results.json: no such file; --report-only rewrites" in capsys.readouterr().err
    assert not (tmp_path / "report.md").exists()


def _tiny_wordnet(tmp_path, monkeypatch):
    """A WordNet of one lemma in two senses, in place of the real one (a second's WSD run)."""
    from elmo.analysis import datasets

    wordnet = tmp_path / "wordnet"
    wordnet.mkdir()
    rows = [("00000001-n", "bank", f"we sat on the bank of the river {i}") for i in range(4)]
    rows += [("00000002-n", "bank,depository", f"she put money in the bank {i}") for i in range(4)]
    (wordnet / "examples.tsv").write_text("synset\tlemmas\texample\n"
                                          + "".join("\t".join(r) + "\n" for r in rows))
    (wordnet / "senses.tsv").write_text("key\toffset\tnumber\ttags\tcount\n"
                                        "bank%1:17:01::\t00000001\t1\t0\t3\n"
                                        "bank%1:14:00::\t00000002\t2\t0\t9\n")
    (wordnet / "synsets.tsv").write_text("00000001-n\tn\tsloping land\n00000002-n\tn\ta firm\n")
    monkeypatch.setattr(datasets, "corpus_dir", lambda name, fetch=True: wordnet)


def test_wsd_section_on_a_tiny_wordnet_and_a_capitalised_pca_word(tmp_path, monkeypatch):
    """--pca-word Bank: the lemmas are lower case, and it said bank had no examples."""
    _tiny_wordnet(tmp_path, monkeypatch)
    out = tmp_path / "out"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "wsd", "--pca-word", "Bank",
                 "--no-untrained-control"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["wsd"]["pca_word"] == {"lemma": "bank", "pos": "n", "n": 8, "senses": 2}
    assert (out / "sense_pca.png").stat().st_size > 1000 and (out / "wsd.png").is_file()


def test_every_picture_of_a_run_names_the_model_and_its_weights_fingerprint(tmp_path, monkeypatch):
    """The report named the model and its weights fingerprint, but a picture copied out of its
    folder said neither: each now says both in a footer (checked in the figure, as drawn)."""
    from matplotlib.figure import Figure
    _tiny_wordnet(tmp_path, monkeypatch)
    footers: dict = {}
    save = Figure.savefig

    def recorded(self, target, *args, **kwargs):
        footers[Path(target).name] = [t.get_text() for t in self.texts if "fingerprint" in t.get_text()]
        return save(self, target, *args, **kwargs)
    monkeypatch.setattr(Figure, "savefig", recorded)
    (tmp_path / "w.json").write_text('{"weights": [0.2, 0.3, 0.5]}')
    out = tmp_path / "out"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "wsd", "--no-untrained-control",
                 "--mix-weights", str(tmp_path / "w.json")]) == 0
    fingerprint = json.loads((out / "results.json").read_text())["model_fingerprint"]
    assert f"`{fingerprint}`" in (out / "report.md").read_text()
    assert len(footers) == 3 == len(list(out.glob("*.png")))   # (saved under temporary names)
    for texts in footers.values():
        assert texts == [f"model fixture, weights fingerprint {fingerprint}"]


def test_pca_word_takes_a_part_of_speech_as_the_wsd_results_name_lemmas():
    """--pca-word bank/n was looked up as the lemma 'bank/n' and said it had no examples; with
    no ambiguous lemma at all the default word was 'min() arg is an empty sequence'."""
    from elmo.analysis.sections import pca_key

    groups = {("bank", "n"): [1, 2, 3], ("bank", "v"): [1, 2], ("play", "v"): [1, 2, 3, 4]}
    assert pca_key(groups, "bank") == ("bank", "n")
    assert pca_key(groups, "Bank/V") == ("bank", "v")
    assert pca_key(groups, None) == ("play", "v")
    with pytest.raises(ValueError, match="no WordNet examples in 2\\+ senses as part of speech 'a'"):
        pca_key(groups, "bank/a")
    with pytest.raises(ValueError, match="no WordNet lemma has examples in 2 or more senses"):
        pca_key({}, None)


def test_a_rerun_leaves_no_picture_of_an_earlier_run_beside_its_results(tmp_path, monkeypatch, capsys):
    """A run without --mix-weights kept the earlier run's mix_weights_given.png beside results that
    hold no given mix; a run that failed midway left the pictures of the sections it had run
    beside the earlier run's results.json and report."""
    from elmo.analysis import sections

    _tiny_wordnet(tmp_path, monkeypatch)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    (tmp_path / "w.json").write_text('{"weights": [0.2, 0.3, 0.5]}')
    out = tmp_path / "out"
    run = ["analyze", "fixture", "--out", str(out), "--only", "wsd", "--only", "contrast",
           "--contrast-file", str(pairs), "--no-untrained-control"]
    assert main(run + ["--mix-weights", str(tmp_path / "w.json")]) == 0
    assert (out / "mix_weights_given.png").is_file()
    assert main(run) == 0
    assert "given_mix_weights" not in json.loads((out / "results.json").read_text())
    assert sorted(p.name for p in out.glob("*.png")) == ["sense_pca.png", "wsd.png"]
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def fail(*args, **kwargs):
        raise ValueError("the contrast section failed")
    monkeypatch.setitem(sections.SECTION_RUNNERS, "contrast", fail)
    assert main(run + ["--wsd-test-fraction", "0.3", "--mix-weights", str(tmp_path / "w.json")]) == 1
    assert "the contrast section failed" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before      # hidden staging folder gone too


def test_a_killed_runs_picture_folder_is_removed_by_the_next_run(tmp_path, capsys):
    """A run killed by SIGKILL (no clean-up) left its hidden .pictures-* staging folder in --out,
    and every later run kept it. The next run, holding the folder's lock (so no live run owns
    one), removes them."""
    import os
    import signal
    import subprocess
    import sys
    import time
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    out.mkdir()
    # a real kill: a process that made its staging folder the way a run does, then SIGKILLed
    code = ("import os, sys, tempfile; tempfile.mkdtemp(prefix='.pictures-', dir=sys.argv[1]); "
            "open(os.path.join(sys.argv[1], 'ready'), 'w').close(); import time; time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, str(out)])
    try:
        for _ in range(600):
            if (out / "ready").exists():
                break
            time.sleep(0.05)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    (out / "ready").unlink()
    stale = [p for p in out.iterdir() if p.name.startswith(".pictures-")]
    assert len(stale) == 1
    (stale[0] / "contrast.png").write_bytes(b"half a picture")
    (out / ".pictures-other").mkdir()
    assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast",
                 "--contrast-file", str(pairs), "--no-untrained-control"]) == 0
    assert not [p.name for p in out.iterdir() if p.name.startswith(".pictures-")]


def test_inputs_that_fail_a_section_are_refused_before_any_section_runs(tmp_path, monkeypatch, capsys):
    """A contrast category of one pair, or a --pca-word without examples, failed after the
    sections before it had run (an hour, on a real model)."""
    _tiny_wordnet(tmp_path, monkeypatch)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\nrank\tthe big dog .\tthe dog big .\tbig\tadj\tnoun\n")
    out = tmp_path / "out"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "wsd", "--only", "contrast",
                 "--contrast-file", str(pairs)]) == 1
    captured = capsys.readouterr()
    assert "contrast category 'rank': the probe needs at least two pairs" in captured.err
    assert "wsd ..." not in captured.out and not out.exists()
    assert main(["analyze", "fixture", "--out", str(out), "--only", "wsd", "--pca-word", "river"]) == 1
    captured = capsys.readouterr()
    assert "--pca-word 'river': no WordNet examples in 2+ senses" in captured.err
    assert "wsd ..." not in captured.out and not out.exists()


def test_a_neighbours_corpus_that_is_missing_or_empty_is_refused_before_any_section_runs(
        tmp_path, monkeypatch, capsys):
    """A --neighbors-corpus typo (or an empty file) failed in the neighbours section, after
    the POS and WSD sections had run (the hours of a real model's report)."""
    _tiny_wordnet(tmp_path, monkeypatch)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    out = tmp_path / "out"
    for spec, named in ((str(tmp_path / "typo.txt"), "no corpus file"), (str(empty), "holds no sentences")):
        assert main(["analyze", "fixture", "--out", str(out), "--only", "wsd", "--only", "neighbors",
                     "--neighbors-corpus", spec, "--no-untrained-control"]) == 1
        captured = capsys.readouterr()
        assert named in captured.err and captured.err.count("\n") == 1
        assert "wsd ..." not in captured.out and not out.exists()


def test_labelled_data_that_cannot_be_fetched_is_refused_before_any_section_runs(tmp_path, monkeypatch, capsys):
    """Offline without WordNet, `--only contrast --only wsd` (or a full run) failed in the WSD
    section, after the sections before it had run."""
    from elmo.analysis import datasets
    from elmo.data.fetch import DataError

    def offline(name, fetch=True):
        raise DataError(f"cannot fetch {name}: offline")
    monkeypatch.setattr(datasets, "corpus_dir", offline)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast", "--only", "wsd",
                 "--contrast-file", str(pairs), "--no-untrained-control"]) == 1
    captured = capsys.readouterr()
    assert "cannot fetch wordnet: offline" in captured.err and "contrast ..." not in captured.out
    assert not out.exists()


def test_a_model_named_dot_gets_a_report_folder_of_its_folders_name(tmp_path, monkeypatch):
    """`elmo analyze .` inside a model folder wrote its report into experiments/analysis/
    itself, beside every other model's folder (and `elmo analyze ..` into experiments/)."""
    import shutil

    import elmo
    model = tmp_path / "mymodel"
    shutil.copytree(elmo.model_path("fixture"), model)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    monkeypatch.chdir(model)
    assert main(["analyze", ".", "--only", "contrast", "--contrast-file", str(pairs),
                 "--no-untrained-control"]) == 0
    assert (model / "experiments" / "analysis" / "mymodel" / "results.json").is_file()
    assert not (model / "experiments" / "analysis" / "results.json").exists()


def test_a_runs_trained_model_gets_a_report_folder_of_its_runs_name(tmp_path, monkeypatch, capsys):
    """elmo train writes its model to RUN/model: every run's report went to
    experiments/analysis/model/, where the second run's replaced or was refused beside the first's."""
    import shutil

    import elmo
    from elmo.commands.analysis import RUN_FOLDER_FILES, default_out
    from elmo.training.run_folder import run_files

    # (the files that mark a run folder are ones elmo train writes there)
    assert set(RUN_FOLDER_FILES) <= {p.name for p in run_files(Path("run"))}
    for run, mark in (("lm", "train_config.json"), ("lm2", "log.jsonl")):
        shutil.copytree(elmo.model_path("fixture"), tmp_path / "runs" / run / "model")
        (tmp_path / "runs" / run / mark).write_text("{}\n")
    shutil.copytree(elmo.model_path("fixture"), tmp_path / "plain" / "model")   # (no run folder around it)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    monkeypatch.chdir(tmp_path)
    for run in ("lm", "lm2"):
        assert main(["analyze", f"runs/{run}/model", "--only", "contrast", "--contrast-file", str(pairs),
                     "--no-untrained-control"]) == 0
        results = json.loads((tmp_path / "experiments" / "analysis" / run / "results.json").read_text())
        assert results["model"] == f"runs/{run}/model"
    assert not (tmp_path / "experiments" / "analysis" / "model").exists()
    capsys.readouterr()
    # the run folder itself is no model; its report would have had the same name
    assert main(["analyze", "runs/lm", "--only", "contrast", "--contrast-file", str(pairs)]) == 1
    assert "runs/lm is a run folder: its trained model is runs/lm/model" in capsys.readouterr().err
    assert (tmp_path / "experiments" / "analysis" / "lm" / "report.md").is_file()   # (left as it was)
    expected = {"runs/lm": "lm", "runs/lm/model/": "lm", "plain/model": "model", "fixture": "fixture",
                "runs/lm/model/../model": "lm"}
    for model, name in expected.items():
        assert default_out(model) == Path("experiments", "analysis", name), model
    monkeypatch.chdir(tmp_path / "runs" / "lm2")       # (a bare `model`, and `.` inside it)
    assert default_out("model") == default_out("./model") == Path("experiments", "analysis", "lm2")
    monkeypatch.chdir("model")
    assert default_out(".") == Path("experiments", "analysis", "lm2")
    monkeypatch.chdir(tmp_path / "plain" / "model")
    assert default_out(".") == Path("experiments", "analysis", "model")


def test_report_only_refuses_the_settings_it_would_ignore_and_waits_for_no_writer(tmp_path, capsys):
    """--report-only --seed 5 (or --only, --mix-weights...) rewrote the report of the earlier
    settings without a word; while a run wrote into the folder it rewrote the report from the
    results that run was replacing."""
    from elmo.output_lock import output_lock

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast", "--contrast-file", str(pairs),
                 "--no-untrained-control", "--only", "contrast"]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("contrast ...") == 1                     # (it ran twice)
    assert json.loads((out / "results.json").read_text())["sections"] == ["contrast"]
    text = (out / "report.md").read_text()
    (out / "interpretation.md").write_text("Notes.\n")
    for extra, named in ((["--seed", "5"], "so --seed would have no effect; drop it"),
                         (["--only", "pos", "--mix-weights", "w.json", "--set", "seed=2"],
                          "so --mix-weights, --only, --set would have no effect; drop them")):
        assert main(["analyze", "fixture", "--out", str(out), "--report-only", *extra]) == 1
        err = capsys.readouterr().err
        assert named in err and err.count("\n") == 1
        assert (out / "report.md").read_text() == text
    with output_lock(out / "results.json", name=out):
        import threading
        codes = []
        worker = threading.Thread(target=lambda: codes.append(main(
            ["analyze", "fixture", "--out", str(out), "--report-only", "--threads", "1"])))
        worker.start()
        worker.join()
    assert codes == [1] and "is already being written" in capsys.readouterr().err
    assert (out / "report.md").read_text() == text
    assert main(["analyze", "fixture", "--out", str(out), "--report-only", "--threads", "1"]) == 0
    assert "Notes." in (out / "report.md").read_text()


def test_neighbors_of_a_word_the_corpus_lacks_and_a_layer_given_twice(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank raised its rates .\nhello there\n")
    base = ["neighbors", "the river flowed .", "--model", "fixture", "--corpus", str(corpus),
            "--index-dir", str(tmp_path / "ix"), "-k", "2", "--no-glove"]
    # (the layer headers were printed with nothing under them)
    assert main(base + ["--word", "river", "--same-word"]) == 0
    out = capsys.readouterr().out
    assert "'river' does not occur in the corpus\n" in out and "nearest in context" not in out
    assert "layer 0 (static)" in out                  # the static neighbours still answer
    # (--layer 2 --layer 2 printed layer 2 twice)
    assert main(base + ["--word", "river", "--layer", "2", "--layer", "1", "--layer", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("layer 2, nearest") == 1 and out.index("layer 2,") < out.index("layer 1,")


def test_report_only_refuses_another_model_but_not_another_spelling(tmp_path, capsys, monkeypatch):
    from dataclasses import asdict

    import elmo
    from elmo.analysis.report import AnalysisConfig

    out = tmp_path / "out"
    out.mkdir()
    results = {"model": "fixture", "num_layers": 3, "width": 32, "sections": [],
               "config": asdict(AnalysisConfig()), "torch": {"version": "2", "threads": 1},
               "findings": {}, "seconds": {}}
    (out / "results.json").write_text(json.dumps(results))
    other = tmp_path / "other-model"
    other.mkdir()
    # (the report was rewritten, under the recorded model's name, without a word)
    for model in ("default", str(other)):
        assert main(["analyze", model, "--out", str(out), "--report-only"]) == 1
        err = capsys.readouterr().err
        assert f"holds the results of model fixture, not of {model}" in err and err.count("\n") == 1
        assert not (out / "report.md").exists()
    folder = elmo.model_path("fixture").resolve()
    monkeypatch.chdir(folder.parent)
    for model in ("fixture", str(folder), folder.name, f"./{folder.name}/"):
        assert main(["analyze", model, "--out", str(out), "--report-only"]) == 0
        assert "`fixture`" in (out / "report.md").read_text()
    # a model recorded as a relative path is the same model under its absolute path
    (out / "results.json").write_text(json.dumps({**results, "model": folder.name}))
    assert main(["analyze", str(folder), "--out", str(out), "--report-only"]) == 0
    assert main(["analyze", "fixture", "--out", str(out), "--report-only"]) == 0


def test_the_report_notes_a_mix_learned_on_another_biLM(tmp_path, capsys):
    from elmo.tasks.bilm_checksums import counted_files
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    files = {**counted_files("fixture"), "weights.hdf5": "0" * 64}
    run = {"task": "pos", "variant": "elmo", "seed": 1,
           "elmo": {"bilm": "mine", "mix_weights": {"input": {"weights": [0.2, 0.3, 0.5], "gamma": 1.0}}}}
    (tmp_path / "results.json").write_text(json.dumps({"runs": [run], "bilms": {"mine": {"files_sha256": files}}}))
    out = tmp_path / "out"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast", "--contrast-file", str(pairs),
                 "--no-untrained-control", "--mix-weights", str(tmp_path / "results.json")]) == 0
    assert "the mix was learned on the biLM 'mine'" in capsys.readouterr().out          # (the run's log)
    results = json.loads((out / "results.json").read_text())
    assert results["given_mix_learned_on"]["spec"] == "mine" and "weights.hdf5" in results["given_mix_note"]
    assert "**Note:** the mix was learned on the biLM 'mine'" in (out / "report.md").read_text()


def test_an_interpretation_that_is_not_utf8_is_named_before_any_section_runs(tmp_path, capsys):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    argv = ["analyze", "fixture", "--out", str(out), "--only", "contrast", "--contrast-file", str(pairs),
            "--no-untrained-control"]
    assert main(argv) == 0
    capsys.readouterr()
    results, report = (out / "results.json").read_text(), (out / "report.md").read_text()
    (out / "interpretation.md").write_bytes(b"caf\xe9 notes\n")          # saved as Latin-1
    # --report-only blamed results.json ("not as elmo analyze wrote it")
    assert main(["analyze", "fixture", "--out", str(out), "--report-only"]) == 1
    err = capsys.readouterr().err
    assert "interpretation.md: not UTF-8 text (line 1: byte 0xe9 at byte offset 3)" in err
    assert "results.json" not in err and err.count("\n") == 1
    # a run failed after every section with the codec's message alone, and wrote no report
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "interpretation.md: not UTF-8 text" in captured.err and "contrast ..." not in captured.out
    assert (out / "results.json").read_text() == results and (out / "report.md").read_text() == report


def test_neighbors_of_a_word_the_query_sentence_holds_twice(tmp_path, capsys):
    import numpy as np

    from elmo.analysis import neighbors
    from elmo.analysis.vectors import embed_layers

    tokens = "the bank by the river bank".split()
    # the API: occurrence 2 is the second use (only the first could be asked for)
    position, vecs = neighbors.query_vectors("fixture", tokens, "bank", occurrence=2)
    assert position == 5
    np.testing.assert_array_equal(vecs, embed_layers("fixture", [tokens])[0][:, 5])
    assert neighbors.query_vectors("fixture", tokens, "bank")[0] == 1
    with pytest.raises(ValueError, match="occurrence 3 of 'bank': the sentence .* has 2"):
        neighbors.query_vectors("fixture", tokens, "bank", occurrence=3)

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank raised its rates .\nwe sat on the river bank .\n")
    base = ["neighbors", " ".join(tokens), "--word", "bank", "--model", "fixture", "--corpus", str(corpus),
            "--index-dir", str(tmp_path / "ix"), "-k", "1", "--no-glove", "--layer", "1"]
    assert main(base) == 0                      # the first use, taken without a word before
    first = capsys.readouterr().out
    assert first.startswith("'bank' occurs 2 times in the sentence; the query is token 2 (the first;")
    assert main(base + ["--occurrence", "2"]) == 0
    second = capsys.readouterr().out
    assert second.startswith("'bank' occurs 2 times in the sentence; the query is token 6 (occurrence 2)")
    index = neighbors.cached_index("fixture", corpus, tmp_path / "ix", log=lambda *_: None)
    best = index.search(vecs[1], 1, 1)[0]
    assert f"  {best.score:.3f}  {best.word:<15} " in second and second != first
    assert main(base + ["--occurrence", "3"]) == 1
    assert capsys.readouterr().err == ("elmo neighbors: error: occurrence 3 of 'bank': the sentence "
                                       "'the bank by the river bank' has 2\n")


def test_analyze_a_model_with_a_damaged_metadata_file_is_one_error_naming_it(tmp_path, capsys):
    """The report's model metadata was left out in silence when metadata.json was damaged (as
    if the model had none, so it did not say the model was adapted); now it is one error,
    before any section runs."""
    import shutil

    import elmo
    folder = tmp_path / "bilm"
    shutil.copytree(elmo.model_path("fixture"), folder)
    (folder / "metadata.json").write_text('["tweets.txt"]', encoding="utf-8")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    argv = ["analyze", str(folder), "--out", str(tmp_path / "report"), "--only", "contrast",
            "--contrast-file", str(pairs), "--no-untrained-control"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"error: {folder / 'metadata.json'}: expected a JSON object" in err and "Traceback" not in err
    assert not (tmp_path / "report" / "results.json").exists()
    (folder / "metadata.json").write_text('{"adapted_on": ["tweets.txt"]}', encoding="utf-8")
    assert main(argv) == 0
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert results["model_metadata"]["adapted_on"] == ["tweets.txt"]


def test_a_damaged_wordnet_file_is_refused_before_any_section_runs(tmp_path, monkeypatch, capsys):
    """(a damaged senses.tsv failed the WSD section after the POS section had run, minutes)"""
    from elmo.analysis import sections

    _tiny_wordnet(tmp_path, monkeypatch)
    senses = tmp_path / "wordnet" / "senses.tsv"
    senses.write_text(senses.read_text() + "bank%1:14:00::\t00000003\n")
    ran = []
    monkeypatch.setitem(sections.SECTION_RUNNERS, "contrast", lambda *args, **kwargs: ran.append("contrast") or {})
    out = tmp_path / "out"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast", "--only", "wsd",
                 "--no-untrained-control"]) == 1
    err = capsys.readouterr().err
    assert f"{senses}:4: 2 tab-separated fields, a sense row has 5" in err and "Traceback" not in err
    assert ran == [] and not out.exists()


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _stderr_with_and_without_bars(tmp_path, monkeypatch, capsys, command):
    """Run ``command(extra)`` (status 0 asserted) into a fresh folder of ``tmp_path`` each time
    (``extra`` starts with it): off a terminal, where nothing may be drawn, then on a terminal
    plain, with --quiet and with --no-progress. Yields (the options given, what it showed)."""
    folders = iter(str(tmp_path / name) for name in "abcd")
    assert command([next(folders)]) == 0
    assert capsys.readouterr().err == ""                                   # (capsys: no terminal)
    for quiet in ([], ["--quiet"], ["--no-progress"]):
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        assert command([next(folders), *quiet]) == 0
        yield quiet, terminal.getvalue()


def test_neighbors_draws_a_bar_while_it_builds_its_index_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    """(the index of a large corpus was minutes without a word); not into a log file or pipe,
    nor with --quiet, as embed's and predict's bars"""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank raised its rates .\nwe sat on the river bank .\n")
    argv = ["neighbors", "the bank .", "--word", "bank", "--model", "fixture", "--corpus", str(corpus),
            "--no-glove", "-k", "2"]
    for quiet, drawn in _stderr_with_and_without_bars(tmp_path, monkeypatch, capsys,
                                                      lambda extra: main(argv + ["--index-dir", *extra])):
        assert ("index: 100%" in drawn and "13/13" in drawn) == (not quiet)


def test_analyze_asks_for_the_index_bar_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    from elmo.analysis import sections

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank raised its rates .\n")
    seen = []

    def section(embedder, config, out, progress, digest=None):
        seen.append(progress)
        raise ValueError("stopped here")    # (the rest of the run is not this test's)
    monkeypatch.setitem(sections.SECTION_RUNNERS, "neighbors", section)
    argv = ["analyze", "fixture", "--only", "neighbors", "--neighbors-corpus", str(corpus), "--no-untrained-control"]
    assert main(argv + ["--out", str(tmp_path / "a")]) == 1
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert main(argv + ["--out", str(tmp_path / "b")]) == 1
    assert main(argv + ["--out", str(tmp_path / "c"), "--quiet"]) == 1
    assert seen == [False, True, False]


def test_analyze_draws_a_bar_while_each_section_embeds_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    """Only the neighbours' index had a bar: the POS probe, WSD, contrast and similarity
    sections embedded (and trained) for minutes without a word. Each now draws its bars on a
    terminal, as the index does, and none into a log file or pipe, nor with --quiet."""
    from elmo.analysis import datasets

    options = _merge_inputs(tmp_path, monkeypatch)
    wordnet = datasets.corpus_dir("wordnet")
    brown = tmp_path / "brown-pos"
    brown.mkdir()
    for split in ("train", "test"):   # (read by brown_pos below no more, but hashed for the results' record)
        (brown / f"{split}.txt").write_text("the/at bank/nn rose/vbd\n")
    monkeypatch.setattr(datasets, "corpus_dir", lambda name, fetch=True: brown if name == "brown-pos" else wordnet)
    tagged = [[("the", "DET"), ("bank", "NOUN"), ("rose", "VERB")], [("we", "PRON"), ("sat", "VERB")]]
    monkeypatch.setattr(datasets, "brown_pos", lambda folder, split, limit, seed: tagged)
    (tmp_path / "corpus.txt").write_text("the cat saw a dog .\nthe king met the queen .\n")
    run = ["analyze", "fixture", *options, "--only", "pos", "--only", "wsd", "--only", "contrast",
           "--only", "similarity", "--pos-iterations", "2", "--similarity-corpus", str(tmp_path / "corpus.txt")]
    bars = ("pos: train tokens: 100%", "pos: probes: 100%", "wsd: example tokens: 100%",
            "contrast: tokens: 100%", "similarity: words: 100%", "similarity: corpus tokens: 100%")
    for quiet, drawn in _stderr_with_and_without_bars(tmp_path, monkeypatch, capsys,
                                                      lambda extra: main(run + ["--out", *extra])):
        assert [bar for bar in bars if bar in drawn] == ([] if quiet else list(bars))


def test_the_readme_says_which_sections_draw_which_pictures():
    """The README said `elmo analyze` writes PNG pictures, but `--only contrast` (and `--only
    neighbors`) writes none: it says now which picture each section draws (report.PICTURES,
    the list the run draws and replaces from) and which sections draw none."""
    import re

    from elmo.analysis.report import PICTURES, SECTIONS
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    analysis = " ".join(readme.split("\n## Analysis\n", 1)[1].split("\n## ", 1)[0].split())
    said = re.search(r"Pictures: (.*?); (.*?) draw no picture", analysis)
    assert said, "the Analysis section does not say which sections draw which pictures"
    drawn, none = said.group(1), said.group(2)
    for section in SECTIONS:
        pictures = [p for p, s in PICTURES.items() if s == section]
        if pictures:
            assert re.search(rf"`{section}` (draws )?" + " and ".join(f"`{p}`" for p in pictures), drawn), section
        else:
            assert f"`{section}`" in none, section
    given = [p for p, s in PICTURES.items() if s is None]
    assert all(f"`{p}`" in drawn for p in given)


@pytest.mark.parametrize("where", ["sentence", "--word"])
def test_neighbors_refuses_command_line_text_that_is_not_utf8(where, tmp_path, capsys):
    """A byte that is not UTF-8 on the command line (a Latin-1 terminal's 'caf\\xe9') reaches
    Python as a lone surrogate (os.fsdecode's escape), which the character ids drop, as the
    original drops it: the query silently became the word 'caf'. Such text is refused, naming
    the argument and the byte, before the model loads or the index is built."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cafe opened .\n")
    bad = os.fsdecode(b"caf\xe9")
    sentence, word = (f"the {bad} opened .", bad) if where == "sentence" else ("the cafe opened .", bad)
    argv = ["neighbors", sentence, "--word", word, "--model", "fixture", "--corpus", str(corpus),
            "--index-dir", str(tmp_path / "ix"), "--no-glove"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    name = "SENTENCE" if where == "sentence" else "--word"
    assert captured.err.startswith(f"elmo neighbors: error: {name} holds byte 0xe9, which is not UTF-8")
    assert captured.out == "" and not (tmp_path / "ix").exists()


def test_analyze_hashes_the_model_once_for_its_results_and_its_neighbour_index(tmp_path, monkeypatch, capsys,
                                                                              model_digest_calls):
    """The report's fingerprint and the neighbour index's key are one digest of one model: it
    was hashed twice a run (~0.5 s each for the original-size model). The index is still the
    one `elmo neighbors` finds for the model."""
    from elmo.analysis import datasets, neighbors

    monkeypatch.setenv("ELMO_DATA", str(tmp_path / "data"))

    def offline(name, fetch=True):
        raise OSError(f"{name}: not fetched (offline)")
    monkeypatch.setattr(datasets, "corpus_dir", offline)       # (GloVe is optional here)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank raised its rates .\nwe sat on the river bank .\n")
    assert main(["analyze", "fixture", "--out", str(tmp_path / "out"), "--only", "neighbors",
                 "--neighbors-corpus", str(corpus), "--no-untrained-control"]) == 0
    assert len(model_digest_calls) == 1
    folders = list((tmp_path / "data" / "indexes").iterdir())
    logged: list = []
    neighbors.cached_index("fixture", corpus, tmp_path / "data" / "indexes", log=logged.append)
    assert logged == [] and list((tmp_path / "data" / "indexes").iterdir()) == folders   # (found, not built)


def test_a_report_of_another_model_is_replaced_only_with_overwrite(tmp_path, capsys):
    """A run that keeps none of a folder's sections replaced another model's report without a
    word (two run folders named alike, ``a/lm/model`` and ``b/lm/model``, share the default
    ``experiments/analysis/lm``). It is refused now, before any section runs, and replaced
    with --overwrite; the same model's report is replaced as before."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    out = tmp_path / "report"
    run = ["--out", str(out), "--only", "contrast", "--contrast-file", str(pairs), "--no-untrained-control"]
    assert main(["analyze", "fixture", *run]) == 0
    first = (out / "results.json").read_text()
    other = os.path.join(os.path.dirname(__file__), "fixtures", "elmoformanylangs", "model")
    capsys.readouterr()
    assert main(["analyze", other, *run]) == 1
    captured = capsys.readouterr()
    assert "holds the results of model fixture (weights fingerprint" in captured.err
    assert "give another --out, or --overwrite to replace it" in captured.err and captured.err.count("\n") == 1
    assert "contrast ..." not in captured.out and (out / "results.json").read_text() == first
    # a report that records no fingerprint (an older one) is told by the model it names
    (out / "results.json").write_text(json.dumps({k: v for k, v in json.loads(first).items()
                                                  if k != "model_fingerprint"}))
    assert main(["analyze", other, *run]) == 1
    assert "holds the results of model fixture, not of" in capsys.readouterr().err
    assert main(["analyze", "fixture", *run]) == 0                    # the same model: a rerun
    assert main(["analyze", other, *run, "--overwrite"]) == 0
    assert json.loads((out / "results.json").read_text())["model"] == other
    assert main(["analyze", other, "--out", str(out), "--report-only", "--overwrite"]) == 1
    assert "--overwrite" in capsys.readouterr().err


def test_a_run_killed_while_its_files_move_in_leaves_the_old_report_or_the_new_one(tmp_path, monkeypatch, capsys):
    """The pictures, results.json and report.md moved into --out one by one: a kill between two
    moves left a folder of two runs (the new wsd.png beside the old results and report). Now the
    whole new folder is made beside it and the two swap in one step. A kill is simulated at each
    rename of a file out of the run's staging folder after the first, in the swap itself, and just
    after it; each time the folder is the earlier run's as it was, or the new run's whole."""
    import shutil

    from elmo import folder_swap
    _tiny_wordnet(tmp_path, monkeypatch)
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    (tmp_path / "w.json").write_text('{"weights": [0.2, 0.3, 0.5]}')
    out = tmp_path / "out"
    run = ["analyze", "fixture", "--out", str(out), "--only", "wsd", "--only", "contrast",
           "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]
    new_run = run + ["--wsd-test-fraction", "0.3", "--mix-weights", str(tmp_path / "w.json")]
    assert main(run) == 0
    (out / "interpretation.md").write_text("my reading of it\n")    # a user's file, kept by both
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    changed = ("results.json", "report.md", "wsd.png", "mix_weights_given.png")

    def whole(now):
        if now == old:
            return "old"
        new = (set(now) == set(old) | {"mix_weights_given.png"}
               and all(now[n] != old.get(n) for n in changed)
               and all(now[n] == old[n] for n in old if n not in changed)
               and json.loads(now["results.json"])["config"]["wsd_test_fraction"] == 0.3)
        return "new" if new else f"a mix: {sorted(n for n in now if now[n] == old.get(n))} of the earlier run"

    def restore():
        shutil.rmtree(out)
        out.mkdir()
        for name, data in old.items():
            (out / name).write_bytes(data)

    fired: list = []

    def killed_at_move(m, k):
        def patch(real):
            def rename(src, dst, *args, **kwargs):
                if "/.pictures-" in str(src) and "/.pictures-" not in str(dst):   # (out of the stage)
                    moves.append(src)
                    if len(moves) == k:
                        fired.append(f"move {k}")
                        raise KeyboardInterrupt   # the process is stopped here
                return real(src, dst, *args, **kwargs)
            return rename
        moves: list = []
        m.setattr(os, "replace", patch(os.replace))
        m.setattr(os, "rename", patch(os.rename))

    exchange = folder_swap._exchange

    def killed_in_swap(m, after):
        def swap(a, b):
            if after:
                exchange(a, b)
            fired.append(f"swap, {'after' if after else 'before'}")
            raise KeyboardInterrupt
        m.setattr(folder_swap, "_exchange", swap)

    kills = [lambda m, k=k: killed_at_move(m, k) for k in (2, 3, 4)]
    kills += [lambda m: killed_in_swap(m, False), lambda m: killed_in_swap(m, True)]
    seen = []
    for kill in kills:
        with monkeypatch.context() as m:   # (the kill's patches end with its round)
            kill(m)
            try:
                main(new_run)
            except KeyboardInterrupt:
                pass
        capsys.readouterr()
        now = {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".pictures-")}
        seen.append(whole(now))
        restore()
    assert all(s in ("old", "new") for s in seen), list(zip(fired, seen))
    assert len(fired) == len(kills), fired     # (each kill came)
    assert seen[-2:] == ["old", "new"]         # (swapped or not, never half)
    assert main(new_run) == 0
    assert whole({p.name: p.read_bytes() for p in out.iterdir()}) == "new"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out")) == ["out"]


def test_an_output_folder_whose_parent_cannot_be_written_is_refused_before_any_section_runs(
        tmp_path, monkeypatch, capsys):
    """The new report is made beside the folder and swapped in: where the folder above cannot
    take it, the run would fail after every section had run (root may write anywhere, so the
    answer of os.access stands for a read-only folder)."""
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    out = tmp_path / "locked" / "out"
    out.mkdir(parents=True)
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != out.parent and access(path, mode, **kw))
    assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast",
                 "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]) == 1
    captured = capsys.readouterr()
    assert f"{out}: the report is written whole beside it and then swapped in, but {out.parent} cannot be " \
           f"written" in captured.err and captured.err.count("\n") == 1 and "contrast ..." not in captured.out
    assert sorted(p.name for p in out.iterdir()) == []


def _mount(args: list) -> None:
    """Run mount with ``args``; skip the test where this process may not mount."""
    import subprocess
    try:
        done = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot run mount: {e}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount here (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}")


@pytest.mark.parametrize("kind", ["tmpfs", "bind"])
def test_an_output_folder_that_is_a_mount_point_is_refused_before_any_section_runs(tmp_path, capsys, kind):
    """The new report is made beside --out and the two folders swap: where --out is a mount
    point (a file system of its own, or a bind mount of a folder of the same one), nothing
    crosses into it by a rename, and the run failed after every section had run ("Device or
    resource busy"), its report lost and its new folder left beside --out."""
    import subprocess
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    out.mkdir()
    if kind == "tmpfs":
        _mount(["-t", "tmpfs", "-o", "size=8m", "tmpfs", str(out)])
    else:
        (tmp_path / "elsewhere").mkdir()
        _mount(["--bind", str(tmp_path / "elsewhere"), str(out)])
    try:
        (out / "mine.txt").write_text("mine\n")
        assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast",
                     "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]) == 1
        captured = capsys.readouterr()
        assert f"{out}: is a mount point" in captured.err and captured.err.count("\n") == 1
        assert "contrast ..." not in captured.out
        assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
        assert not (tmp_path / "out.partial").exists()
        # a folder inside the mount is written as any other
        assert main(["analyze", "fixture", "--out", str(out / "report"), "--only", "contrast",
                     "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]) == 0
        assert (out / "report" / "report.md").is_file()
    finally:
        subprocess.run(["umount", "-l", str(out)], capture_output=True, timeout=30)


@pytest.mark.parametrize("kind", ["file", "link"])
def test_an_output_folder_whose_partial_name_is_taken_by_a_file_is_refused_before_any_section_runs(
        tmp_path, capsys, kind):
    """OUT.partial, where the new report is made, taken by a file or a link (no run makes one):
    the run failed after every section had run with a bare "File exists"."""
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    partial = tmp_path / "out.partial"
    if kind == "file":
        partial.write_text("a file of the user's\n")
    else:
        (tmp_path / "elsewhere").mkdir()
        partial.symlink_to(tmp_path / "elsewhere")
    run = ["analyze", "fixture", "--out", str(out), "--only", "contrast",
           "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]
    assert main(run) == 1
    captured = capsys.readouterr()
    assert f"{partial}: is not a folder" in captured.err and captured.err.count("\n") == 1
    assert "contrast ..." not in captured.out
    assert os.path.lexists(partial) and not out.exists()
    partial.unlink()
    assert main(run) == 0


def test_a_killed_runs_partial_folder_that_cannot_be_deleted_is_named_before_any_section_runs(tmp_path, capsys):
    """OUT.partial, a killed run's, holding a file that cannot be deleted (made immutable here;
    another user's): the bare OSError of its deletion was all the run said. It is now one line
    naming the folder and what to do, before any section runs."""
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    partial = tmp_path / "out.partial"
    partial.mkdir()
    stuck = partial / "report.md"
    stuck.write_text("a killed run's\n")
    with immutable(stuck):
        assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast",
                     "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]) == 1
        captured = capsys.readouterr()
        assert captured.err.count("\n") == 1
        assert (f"{partial}: a report folder that a killed run left beside it cannot be deleted "
                f"(Operation not permitted); remove it and run again") in captured.err
        assert "contrast ..." not in captured.out


def test_a_run_killed_between_the_renames_of_its_fallback_swap_loses_no_file_of_the_folder(
        tmp_path, monkeypatch, capsys):
    """Where the two folders cannot swap in one step (no renameat2: NFS, another system), the old
    folder was deleted and the new one (with the user's files linked in) then renamed: a kill
    between left no folder and the new one as OUT.partial, which the next run deleted as
    unfinished, the user's interpretation and files with it. The old folder is now renamed aside
    first and put back by the next run."""
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    run = ["analyze", "fixture", "--out", str(out), "--only", "contrast",
           "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]
    assert main(run) == 0
    (out / "interpretation.md").write_text("my reading of it\n")
    (out / "mine.txt").write_text("mine\n")
    killed_between_the_fallback_renames(monkeypatch, capsys, out, run)
    assert main(run) == 0
    assert (out / "interpretation.md").read_text() == "my reading of it\n"
    assert (out / "mine.txt").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "pairs.tsv"]
    assert {"results.json", "report.md"} <= {p.name for p in out.iterdir()}


@pytest.mark.parametrize("moment", ["between the renames of the fallback swap", "deleting the old folder, no hard links"])
def test_a_second_analyze_while_the_first_swaps_its_folder_in_is_refused(tmp_path, monkeypatch, capsys, moment):
    """The lock was OUT/results.json.lock, inside the folder being replaced. Without renameat2
    OUT is renamed aside before the new folder takes its name: a second run meanwhile found
    no OUT and no lock, put the old folder back (finish_replace) and the first run's rename
    then failed ("Directory not empty"), its finished report left as OUT.partial for the next
    run to delete. Without hard links the lock file was copied into the new folder, unlocked:
    a second run while the first deleted the old folder took it and ran. The lock is now
    OUT.lock beside OUT, held through the swap and its clean-up: the second run is refused
    (a second process, forked: in this one the lock's path alone bars it)."""
    import shutil

    from elmo import folder_swap
    from elmo.analysis import report
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("mine\n")
    run = ["analyze", "fixture", "--out", str(out), "--only", "contrast",
           "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]
    second: list = []
    said = tmp_path / "second.err"

    def second_run() -> None:   # another process: this one's own lock bars it by the path alone
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                second.append("this is the second run")   # (its own pauses pass)
                sys.stderr = open(said, "w")
                # (past the locks it would load the model and run: it stops there instead)
                monkeypatch.setattr(report, "_run_sections", lambda *args, **kwargs: os._exit(0))
                code = main(run)
                sys.stderr.flush()
            finally:
                os._exit(code)
        second.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        second.append(said.read_text())
    if moment.startswith("between"):
        monkeypatch.setattr(folder_swap, "_exchange", lambda a, b: False)
        rename = Path.rename

        def paused(self, target):
            if self.name == "out.partial" and not second:
                assert not out.exists() and (tmp_path / "out.replaced").is_dir()
                second_run()
            return rename(self, target)
        monkeypatch.setattr(Path, "rename", paused)
    else:
        def no_link(source, target, *args, **kwargs):
            raise OSError(errno.EXDEV, "no hard links here")
        monkeypatch.setattr(folder_swap.os, "link", no_link)
        rmtree = shutil.rmtree

        def paused(path, *args, **kwargs):
            if Path(path).name == "out.partial" and not second:   # (the old folder, swapped out)
                second_run()
            return rmtree(path, *args, **kwargs)
        monkeypatch.setattr(folder_swap.shutil, "rmtree", paused)
    assert main(run) == 0
    assert second[0] == 1, second
    assert f"{out} is already being written by PID {os.getpid()} on " in second[1] and second[1].count("\n") == 1
    assert f"(lock file {tmp_path / 'out.lock'})" in second[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "pairs.tsv", "second.err"]
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt", "report.md", "results.json"]
    assert json.loads((out / "results.json").read_text())["sections"] == ["contrast"]


def test_the_lock_file_a_killed_earlier_version_left_in_the_folder_is_taken_over(tmp_path, capsys):
    """Earlier versions locked OUT/results.json.lock, inside the folder; the lock is OUT.lock
    beside it now. The file a killed run of theirs left (its process gone, no lock held) is no
    writer: the run and --report-only take it over, and leave neither lock file behind."""
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    run = ["analyze", "fixture", "--out", str(out), "--only", "contrast",
           "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]
    assert main(run) == 0
    for again in (run, ["analyze", "fixture", "--out", str(out), "--report-only"]):
        (out / "results.json.lock").write_text("999999999 elsewhere\n")
        assert main(again) == 0, capsys.readouterr().err
        assert sorted(p.name for p in out.iterdir()) == ["report.md", "results.json"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "pairs.tsv"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a folder another owner needs root")
def test_the_new_report_folder_keeps_the_owner_group_and_mode_of_the_old(tmp_path, capsys):
    """The report folder made beside --out and swapped in was the runner's: a user's folder that
    root (sudo) analyzed into became root's, its own subfolders too (copied file by file), and one
    of mode 700 was then shut to its user; a shared folder lost its group. Owner, group and mode
    of the folder and of the copied subfolders are now the old ones."""
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    (out / "notes").mkdir(parents=True)
    (out / "notes" / "a.txt").write_text("mine\n")
    owner, group = 4242, 4243   # (ids of nobody here: only the numbers count)
    for path in (out, out / "notes", out / "notes" / "a.txt"):
        os.chown(path, owner, group)
    out.chmod(0o2770)
    (out / "notes").chmod(0o700)
    assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast",
                 "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]) == 0
    for path, mode in ((out, 0o2770), (out / "notes", 0o700)):
        st = path.stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (owner, group, mode), path
    assert (out / "notes" / "a.txt").read_text() == "mine\n" and (out / "report.md").is_file()


def test_a_run_from_inside_its_output_folder_says_the_shell_must_cd_into_it_again(tmp_path, monkeypatch, capsys):
    """The report folder is swapped for a new one: a shell that ran `elmo analyze --out .` from
    inside it is left in the old folder, deleted, where `ls` showed nothing and `cat report.md`
    found no report, with no word why. One line now says so; this process itself moves into
    the new folder."""
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    assert main(["analyze", "fixture", "--out", ".", "--only", "contrast",
                 "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]) == 0
    said = capsys.readouterr()
    assert "analyze: . is a new folder now: a shell working in it still sees the old one" in said.out + said.err
    assert Path("report.md").is_file() and os.path.samefile(os.getcwd(), out)


def test_the_new_folder_a_killed_run_left_is_removed_before_the_sections_run_and_said(tmp_path, capsys):
    """OUT.partial, the report folder a run killed before its swap left, was deleted in silence
    by the next run's swap, after every section had run (a folder of the user's of that name
    with it, without a word). It is now removed before the sections run, in a line."""
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    out = tmp_path / "out"
    partial = tmp_path / "out.partial"
    partial.mkdir()
    (partial / "results.json").write_text("{}\n")
    assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast",
                 "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]) == 0
    said = capsys.readouterr().out.splitlines()
    line = f"analyze: {partial}: removed, a report folder that a killed run left beside it"
    assert line in said and said.index(line) < said.index("analyze: contrast ...")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "pairs.tsv"]


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="the sticky bit's owners are POSIX's")
def test_an_output_folder_of_another_user_in_a_sticky_folder_is_refused_before_any_section_runs(
        tmp_path, monkeypatch, capsys):
    """In a sticky folder (as /tmp) only the owner of a folder, or of the sticky folder, may move
    it: the swap of another user's report folder ended in "Operation not permitted" after every
    section had run (seen as user nobody; here the test's user is made to look like another)."""
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    shared = tmp_path / "shared"
    out = shared / "out"
    out.mkdir(parents=True)
    shared.chmod(0o1777)
    run = ["analyze", "fixture", "--out", str(out), "--only", "contrast",
           "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]
    owner = out.stat().st_uid
    with monkeypatch.context() as m:
        m.setattr(os, "geteuid", lambda: owner + 4243)   # neither out's owner nor shared's, nor root
        assert main(run) == 1
    captured = capsys.readouterr()
    assert f"{out}: the report is written whole beside it and then swapped in, but in {shared} (sticky, " \
           f"as /tmp) only {out}'s owner may move it" in captured.err and captured.err.count("\n") == 1
    assert "contrast ..." not in captured.out
    assert main(run) == 0   # its owner may


def test_an_output_folder_with_a_mount_point_inside_is_refused_before_any_section_runs(tmp_path, capsys):
    """A folder mounted inside --out (here a bind mount) was copied whole into the new report
    folder (no hard link crosses a mount), and the deletion of the old folder after the swap
    then deleted every file of the mounted one, and failed on the mount point itself ("Device
    or resource busy"). Refused now before any section runs; the mounted files stay."""
    import subprocess
    (tmp_path / "pairs.tsv").write_text(_PAIRS + "\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "measurements.txt").write_text("precious\n")
    out = tmp_path / "out"
    (out / "my data").mkdir(parents=True)
    _mount(["--bind", str(data), str(out / "my data")])
    try:
        assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast",
                     "--contrast-file", str(tmp_path / "pairs.tsv"), "--no-untrained-control"]) == 1
        captured = capsys.readouterr()
        assert f"{out / 'my data'}: is a mount point inside {out}" in captured.err
        assert captured.err.count("\n") == 1 and "contrast ..." not in captured.out
    finally:   # (where the old code had swapped it away too)
        for mount in (out / "my data", tmp_path / "out.partial" / "my data"):
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30)
    assert (data / "measurements.txt").read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out", "pairs.tsv"]
