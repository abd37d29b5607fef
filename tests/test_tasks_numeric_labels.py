"""Class labels that are whole numbers written as floats ("1.0", as pandas writes a column of
whole numbers with a value missing) are the whole number, as JSON's 1.0 already was: "1.0"
was a class of its own beside "1", or a test label no training example had."""
from __future__ import annotations

import pytest

from elmo.tasks.datasets import load_task
from elmo.tasks.bilm_checksums import BiLMChecksums
from elmo.tasks.files import check_format, read_examples
from elmo.tasks.experiment_config import normalise_config
from elmo.tasks.fingerprints import run_fingerprint
from elmo.tasks.resume_runs import reusable_runs

TSV = {"type": "tsv", "text": "text", "label": "label"}


def _labels(tmp_path, text: str, fmt: dict = TSV, kind: str = "classification"):
    path = tmp_path / "f.txt"
    path.write_text(text, encoding="utf-8")
    return [ex.label for ex in read_examples(path, kind, check_format(fmt, kind, "t"))]


@pytest.mark.parametrize("written, label", [
    ("1.0", "1"), ("1", "1"), (" 2.00 ", "2"), ("-3.0", "-3"), ("4.", "4"), ("10", "10"),
    ("1.5", "1.5"), ("1.05", "1.05"), ("0.0", "0"), ("v1.0", "v1.0"), ("1.0a", "1.0a"),
    ("pos", "pos")])
def test_a_whole_number_with_a_decimal_point_is_the_whole_number(tmp_path, written, label):
    assert _labels(tmp_path, f"text\tlabel\na b\t{written}\n") == [label]


def test_json_strings_and_numbers_give_one_class(tmp_path):
    fmt = {"type": "jsonl", "text": "t", "label": "l"}
    got = _labels(tmp_path, '{"t": "a", "l": 1}\n{"t": "b", "l": 1.0}\n{"t": "c", "l": "1.0"}\n', fmt)
    assert got == ["1", "1", "1"]


def test_tags_are_kept_as_written(tmp_path):
    fmt = {"type": "tsv", "text": "text", "label": "tags"}
    assert _labels(tmp_path, "text\ttags\na b\t1.0 O\n", fmt, "tagging") == [["1.0", "O"]]


def test_a_test_file_of_floats_scores_the_classes_trained_on(tmp_path):
    train = "text\tlabel\n" + "".join(f"w{i} x\t{i % 2}\n" for i in range(10))
    test = "text\tlabel\nw1 x\t1.0\nw2 x\t0.0\n"
    for name, text in (("train", train), ("test", test), ("mixed", train + "w9 y\t1.0\n")):
        (tmp_path / f"{name}.tsv").write_text(text, encoding="utf-8")
    spec = {"task": "classification", "name": "c", "format": TSV, "dev_fraction": 0,
            "files": {"train": str(tmp_path / "train.tsv"), "test": str(tmp_path / "test.tsv")}}
    data = load_task(spec)
    assert data.labels == ["0", "1"] and data.unseen_labels() == {}
    spec["files"]["train"] = str(tmp_path / "mixed.tsv")     # "1" and "1.0" in one file
    assert load_task(spec).labels == ["0", "1"]


def _resume_config(tmp_path):
    """Three tasks of one experiment: class labels written "1.0", labels written "1", and tags
    written "1.0" (kept as written); the spec's paths are relative (the fingerprint holds them)."""
    files = {"floats.tsv": "text\tlabel\n" + "".join(f"w{i} x\t{lab}\n" for i, lab in enumerate(["0.0", "1.0", "1", "0"])),
             "ints.tsv": "text\tlabel\n" + "".join(f"w{i} x\t{lab}\n" for i, lab in enumerate(["0", "1", "1", "0"])),
             "tags.tsv": "text\ttags\n" + "".join(f"w{i} x\t{i % 2}.0 O\n" for i in range(4))}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")

    def task(name, file, kind="classification", label="label"):
        return {"task": kind, "name": name, "dev_fraction": 0, "files": {"train": file, "test": file},
                "format": {"type": "tsv", "text": "text", "label": label}}
    return normalise_config({"name": "x", "embeddings": {"random_dim": 4}, "seeds": 1,
                             "variants": [{"name": "baseline"}],
                             "tasks": [task("floats", "floats.tsv"), task("ints", "ints.tsv"),
                                       task("tags", "tags.tsv", "tagging", "tags")]})


#: The fingerprints the code before this rule (1e7a8f0, labels already canonical, fingerprints
#: blind to it) gave the runs of :func:`_resume_config`, printed by ``run_fingerprint`` there.
RECORDED_BEFORE = {"floats": "ccba1fcdb5199511", "ints": "cc13b736f188399a", "tags": "6a1fad620d26da42"}


def test_resume_trains_again_only_the_runs_whose_labels_canonicalisation_changed(tmp_path, monkeypatch):
    """Runs recorded before "1.0" became the class "1" were kept by --resume, their fingerprints
    blind to labels. Now a task whose files hold such a label is trained again; one whose
    labels are unchanged, or whose "1.0" is a tag (kept as written), keeps its runs."""
    monkeypatch.chdir(tmp_path)
    cfg = _resume_config(tmp_path)
    old = {"config": cfg.recorded(),
           "runs": [{"task": name, "variant": "baseline", "seed": 1, "elmo": None, "fingerprint": fp}
                    for name, fp in RECORDED_BEFORE.items()]}
    kept, _ = reusable_runs(cfg, old, BiLMChecksums())
    assert sorted(r["task"] for r in kept) == ["ints", "tags"]
    fresh = {"task": "floats", "variant": "baseline", "seed": 1, "elmo": None,
             "fingerprint": run_fingerprint(cfg, cfg["tasks"][0], cfg.variants[0])}
    assert reusable_runs(cfg, {**old, "runs": [fresh]}, BiLMChecksums())[0] == [fresh]   # recorded now: kept


def test_a_built_in_tasks_own_data_dir_with_whole_number_labels_counts_too(tmp_path):
    """A built-in task read from your folder (data_dir) canonicalises its labels as your files
    do: there too a "1.0" in the data gets the fingerprint key; names keep it out, and a task
    whose rule maps its labels (sentiment's ratings) never has it."""
    from elmo.tasks.fingerprints import run_content
    folders = {}
    for name, labels in (("floats", ["1.0", "2.0"]), ("names", ["tech", "sport"])):
        folder = folders[name] = tmp_path / name
        folder.mkdir()
        for split in ("train", "dev", "test"):
            (folder / f"{split}.jsonl").write_text("".join(
                f'{{"label": "{lab}", "title": ["a"], "sentences": [["b", "c"]]}}\n' for lab in labels))
    ratings = tmp_path / "ratings"
    ratings.mkdir()
    for split in ("train", "dev", "test"):
        (ratings / f"{split}.tsv").write_text("a\t1.0\tgood film\nb\t-2.0\tbad film\n")
    cfg = normalise_config({"name": "x", "embeddings": {"random_dim": 4}, "variants": [{"name": "b"}],
                            "tasks": [{"task": "topic", "name": "floats", "data_dir": str(folders["floats"])},
                                      {"task": "topic", "name": "names", "data_dir": str(folders["names"])},
                                      {"task": "sentiment5", "data_dir": str(ratings)}]})
    has_key = ["whole_number_labels" in run_content(cfg, spec, cfg.variants[0]) for spec in cfg["tasks"]]
    assert has_key == [True, False, False]
