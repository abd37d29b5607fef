"""The experiment runner end to end on tiny data: every task kind, with the bundled fixture
biLM and tiny random word vectors (the CI smoke test of ``elmo experiment``)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from elmo.cli import main
from elmo.tasks.datasets import load_task
from elmo.tasks.experiment_config import load_config, normalise_config
from elmo.tasks.runner import run_experiment

WORDS = "the a cat dog sat ran on under mat rug big small red blue quickly slowly".split()
TAGS = {"the": "at", "a": "at", "cat": "nn", "dog": "nn", "sat": "vbd", "ran": "vbd",
        "on": "in", "under": "in", "mat": "nn", "rug": "nn", "big": "jj", "small": "jj",
        "red": "jj-tl", "blue": "jj", "quickly": "rb", "slowly": "rb"}


def _sentences(n: int, seed: int):
    rng = random.Random(seed)
    return [[rng.choice(WORDS) for _ in range(rng.randint(2, 6))] for _ in range(n)]


def write_tiny_tasks(root: Path) -> dict:
    """Tiny corpora in the standard form of `elmo data`, one folder per task."""
    pos = root / "brown-pos"
    pos.mkdir()
    for split, n in (("train", 24), ("dev", 6), ("test", 6)):
        lines = [" ".join(f"{w}/{TAGS[w]}" for w in s) for s in _sentences(n, len(split))]
        (pos / f"{split}.txt").write_text("\n".join(lines) + "\n")
    ner = root / "twitter-ner"
    ner.mkdir()
    for split, n in (("train", 20), ("dev", 5), ("test", 5)):
        blocks = []
        for s in _sentences(n, 10 + len(split)):
            tags = ["B-animal" if w in ("cat", "dog") else "O" for w in s]
            blocks.append("\n".join(f"{w}\t{t}" for w, t in zip(s, tags)))
        (ner / f"{split}.conll").write_text("\n\n".join(blocks) + "\n")
    sent = root / "movie-sentiment"
    sent.mkdir()
    for split, n in (("train", 30), ("dev", 8), ("test", 8)):
        rows = []
        for i, s in enumerate(_sentences(n, 20 + len(split))):
            rating = 3.0 if "big" in s else -3.0 if "small" in s else 0.0
            rows.append(f"{split}{i}\t{rating:g}\t{' '.join(s)}")
        (sent / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    nli = root / "vitaminc"
    nli.mkdir()
    for split, n in (("train", 20), ("dev", 6), ("test", 6)):
        recs = []
        for i, (a, b) in enumerate(zip(_sentences(n, 30), _sentences(n, 31))):
            label = "True" if set(a) & set(b) else "False"
            recs.append(json.dumps({"id": i, "label": label, "title": "t", "claim": a,
                                    "evidence": b}))
        (nli / f"{split}.jsonl").write_text("\n".join(recs) + "\n")
    return {"pos": pos, "ner": ner, "sentiment5": sent, "vitaminc": nli}


def tiny_config(folders: dict, **extra) -> dict:
    cfg = {
        "name": "smoke", "seeds": 1, "threads": 1, "bilm": "fixture", "embeddings": {"random_dim": 8},
        "train": {"epochs": 2, "patience": 1, "batch_size": 8},
        "model": {"hidden": 8, "classifier_hidden": 8},
        "tasks": [{"task": "pos", "data_dir": str(folders["pos"])},
                  {"task": "ner", "data_dir": str(folders["ner"]), "model": {"crf": True}},
                  {"task": "sentiment5", "data_dir": str(folders["sentiment5"]),
                   "model": {"pooling": "attention", "char_features": 4}},
                  {"task": "vitaminc", "data_dir": str(folders["vitaminc"])}],
        "variants": [{"name": "baseline"},
                     {"name": "elmo-in-out", "elmo": {"positions": ["input", "output"]}}],
    }
    cfg.update(extra)
    return cfg


def test_tiny_loaders_reduce_tags_and_bin_ratings(tmp_path):
    folders = write_tiny_tasks(tmp_path)
    pos = load_task({"task": "pos", "data_dir": str(folders["pos"])})
    assert "jj-tl" not in pos.labels and "jj" in pos.labels
    sent = load_task({"task": "sentiment5", "data_dir": str(folders["sentiment5"])})
    assert set(sent.labels) <= {"0-very-negative", "2-neutral", "4-very-positive"}
    binary = load_task({"task": "sentiment2", "data_dir": str(folders["sentiment5"])})
    assert set(binary.labels) <= {"negative", "positive"}         # neutral sentences dropped
    assert len(binary.splits["train"]) < len(sent.splits["train"])
    small = load_task({"task": "ner", "data_dir": str(folders["ner"]), "max_train": 7})
    again = load_task({"task": "ner", "data_dir": str(folders["ner"]), "max_train": 7})
    assert len(small.splits["train"]) == 7
    assert [e.tokens for e in small.splits["train"]] == [e.tokens for e in again.splits["train"]]


def test_smoke_experiment_every_task_kind(tmp_path):
    folders = write_tiny_tasks(tmp_path)
    out = tmp_path / "results"
    results = run_experiment(normalise_config(tiny_config(folders)), out=out, log=lambda s: None)
    summary = {(r["task"], r["variant"]): r for r in results["summary"]}
    assert set(summary) == {(t, v) for t in ("pos", "ner", "sentiment5", "vitaminc")
                            for v in ("baseline", "elmo-in-out")}
    for (task, variant), row in summary.items():
        assert 0.0 <= row["test_mean"] <= 100.0
        if variant == "elmo-in-out":
            base = summary[(task, "baseline")]["test_mean"]
            assert row["gain_mean"] == pytest.approx(row["test_mean"] - base)
            assert row["elmo"]["positions"] == ["input", "output"]
    run = next(r for r in results["runs"] if r["elmo"])
    weights = run["elmo"]["mix_weights"]
    assert set(weights) == {"input", "output"}
    assert sum(weights["input"]["weights"]) == pytest.approx(1.0, abs=1e-5)
    assert results["bilms"]["fixture"]["domain_adapted"] is False
    assert "untrained" in results["bilms"]["fixture"]["warning"]
    saved = json.loads((out / "results.json").read_text())
    assert len(saved["runs"]) == 8
    assert saved["machine"]["cpu"] and saved["machine"]["threads"] >= 1  # which CPU the times are from
    assert all(r["cpu"] == saved["machine"]["cpu"] for r in saved["runs"])  # and each run's own
    md = (out / "results.md").read_text()
    assert "| pos | token accuracy % | elmo-in-out | input+output |" in md
    assert md.count("| n/a | n/a |") >= 4    # interval and paired t are undefined with one seed
    assert "| gain ± std | 95% interval | paired t |" in md
    assert "## Learned layer weights" in md
    assert (out / "layer_weights.png").stat().st_size > 1000


def test_cli_ablation_variants_toml_and_resume(tmp_path, capsys):
    """Last layer only, fine-tuned and output-only variants through the command line, from a
    TOML config; a second run with --resume trains nothing new."""
    folders = write_tiny_tasks(tmp_path)
    toml = f"""
name = "ablate"
seeds = 1
threads = 1
bilm = "fixture"
embeddings = {{ random_dim = 8 }}
train = {{ epochs = 1, batch_size = 8 }}
model = {{ hidden = 8 }}
tasks = [ {{ task = "pos", data_dir = "{folders['pos']}", max_train = 10 }} ]

[[variants]]
name = "baseline"

[[variants]]
name = "last-only"
elmo = {{ layers = "last" }}

[[variants]]
name = "output-finetuned"
elmo = {{ positions = ["output"], finetune = true, lambda = 1.0 }}
"""
    path = tmp_path / "ablate.toml"
    path.write_text(toml)
    out = tmp_path / "res"
    assert main(["experiment", str(path), "--plan"]) == 0
    assert "3 training runs" in capsys.readouterr().out and not out.exists()
    assert main(["experiment", str(path), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "last-only" in printed and "output-finetuned" in printed
    saved = json.loads((out / "results.json").read_text())
    last = next(r for r in saved["runs"] if r["variant"] == "last-only")
    assert last["elmo"]["mix_weights"]["input"]["weights"][-1] == pytest.approx(1.0)
    tuned = next(r for r in saved["runs"] if r["variant"] == "output-finetuned")
    assert tuned["elmo"]["finetune"] is True
    first = [r["test"] for r in saved["runs"]]
    assert main(["experiment", str(path), "--out", str(out), "--quiet", "--resume"]) == 0
    again = json.loads((out / "results.json").read_text())
    assert [r["test"] for r in again["runs"]] == first
    table = tmp_path / "table.md"
    assert main(["experiment-table", str(out), str(out / "results.json"), "-o", str(table)]) == 0
    rows = [line for line in table.read_text().splitlines() if line.startswith("| ablate (")]
    assert len(rows) == 6                                  # 3 variants, listed twice, each with its source
    assert sum(line.startswith(f"| ablate ({out}) | pos |") for line in rows) == 3
    assert any("| output | all | 1 |" in r and "| yes |" in r for r in rows)
    # results written by an older version (no gain intervals) get them from experiment-report,
    # with nothing trained and the recorded runs, machine and start time kept
    old = json.loads((out / "results.json").read_text())
    for row in old["summary"]:
        row.pop("gain_low", None), row.pop("gain_high", None)
    (out / "results.json").write_text(json.dumps(old))
    (out / "results.md").write_text("stale")
    assert main(["experiment-report", str(out)]) == 0
    rewritten = json.loads((out / "results.json").read_text())
    assert rewritten["runs"] == old["runs"] and rewritten["machine"] == old["machine"]
    assert rewritten["started"] == old["started"]
    assert all("gain_low" in row for row in rewritten["summary"] if row["variant"] != "baseline")
    assert "95% interval" in (out / "results.md").read_text()


def test_config_errors(tmp_path):
    with pytest.raises(ValueError, match="no tasks"):
        normalise_config({"name": "x"})
    with pytest.raises(ValueError, match="baseline"):
        normalise_config({"tasks": [{"task": "pos"}], "variants": [{"name": "e", "elmo": {}}]})
    with pytest.raises(ValueError, match="unknown elmo settings"):
        normalise_config({"tasks": [{"task": "pos"}],
                          "variants": [{"name": "b"}, {"name": "e", "elmo": {"lamda": 1}}]})
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"tasks": [{"task": "pos"}], "train": {"epoch": 3}}))
    with pytest.raises(ValueError, match="unknown train settings"):
        load_config(path)


def test_committed_configs_are_valid():
    folder = Path(__file__).resolve().parent.parent / "experiments" / "configs"
    paths = sorted(folder.glob("*.json")) + sorted(folder.glob("*.toml"))
    assert paths
    from elmo.tasks.datasets import TASKS
    for path in paths:
        cfg = load_config(path)
        assert all(t["task"] in TASKS for t in cfg["tasks"]), path


COMMITTED_RESULTS = Path(__file__).resolve().parent.parent / "experiments" / "results"


@pytest.mark.parametrize("folder", sorted(str(p.parent.relative_to(COMMITTED_RESULTS))
                                          for p in COMMITTED_RESULTS.rglob("results.json")))
def test_committed_results_md_is_what_experiment_report_writes_from_results_json(folder, tmp_path, monkeypatch):
    """experiments/README.md says each committed results.md is written from its results.json by
    `elmo experiment-report`; three of them (ner, v1/ner, sentiment-rating) had been written by
    an earlier version of the report (no amount trained for an adapted biLM, the other-metrics
    heading): the report of a copy of the folder must be the committed one, byte for byte."""
    import shutil
    from elmo.tasks import report
    from elmo.tasks.runner import rewrite_reports
    for plot in ("plot_weights", "plot_training_sizes"):       # (the pictures are not compared)
        monkeypatch.setattr(report, plot, lambda *args: None)
    committed = COMMITTED_RESULTS / folder
    copy = tmp_path / "results"
    copy.mkdir()
    for name in ("results.json", "results.md"):
        shutil.copyfile(committed / name, copy / name)
    rewrite_reports(copy, log=lambda s: None)
    assert (copy / "results.md").read_text(encoding="utf-8") == (committed / "results.md").read_text(encoding="utf-8")
    assert (copy / "results.json").read_bytes() == (committed / "results.json").read_bytes()


def test_missing_bilm_folder_fails_before_training(tmp_path):
    folders = write_tiny_tasks(tmp_path)
    cfg = tiny_config(folders, variants=[{"name": "b"}, {"name": "e", "elmo": {"bilm": str(tmp_path / "nope")}}])
    with pytest.raises(FileNotFoundError, match="nope"):
        run_experiment(normalise_config(cfg), out=tmp_path / "r", log=lambda s: None)
    assert not (tmp_path / "r").exists()   # (it was left empty)
    (tmp_path / "there").mkdir()
    with pytest.raises(FileNotFoundError, match="nope"):
        run_experiment(normalise_config(cfg), out=tmp_path / "there", log=lambda s: None)
    assert (tmp_path / "there").is_dir()   # a folder made before is kept


def test_a_bilm_url_with_a_password_is_refused_before_training(tmp_path, capsys):
    """results.json and the saved models record the biLM spec whole (--resume and predict load
    it again from there): a URL with a login in it is refused at once, in one line that does not
    show the password and says to use ~/.netrc, and nothing is written."""
    folders = write_tiny_tasks(tmp_path)
    url = "http://ann:s3cret@127.0.0.1:9/m/weights.hdf5"
    for extra in ({"bilm": url},
                  {"variants": [{"name": "b"}, {"name": "e", "elmo": {"bilm": "random:" + url}}]},
                  {"bilm": "http://tok3n@127.0.0.1:9/m/weights.hdf5"}):
        path = tmp_path / "c.json"
        path.write_text(json.dumps(tiny_config(folders, **extra)))
        out = tmp_path / "res"
        assert main(["experiment", str(path), "--out", str(out), "--save-models", "--quiet"]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "password" in err and ".netrc" in err, err
        assert "s3cret" not in err and "tok3n" not in err
        assert not out.exists()
    with pytest.raises(ValueError, match="netrc"):
        run_experiment(tiny_config(folders, bilm=url), out=tmp_path / "r", log=lambda s: None)
    # the recorded config of a results.json written before this check still reads
    assert normalise_config(tiny_config(folders, bilm=url)).bilm == url


def test_sentiment_bins_follow_sst_cut_points():
    from elmo.tasks.datasets import sentiment_class
    # rating r in -4..4 -> x = (r + 4) / 8; bins (.., 0.2], (0.2, 0.4], (0.4, 0.6], (0.6, 0.8], (0.8, ..)
    cases = [(-4.0, 0), (-2.4, 0), (-2.3, 1), (-0.8, 1), (-0.7, 2), (0.8, 2), (0.9, 3),
             (2.4, 3), (2.5, 4), (4.0, 4)]
    for rating, bin_ in cases:
        assert sentiment_class(rating, 5).startswith(str(bin_)), rating
    assert sentiment_class(-0.8, 2) == "negative"
    assert sentiment_class(0.0, 2) is None and sentiment_class(0.8, 2) is None
    assert sentiment_class(0.9, 2) == "positive"


def test_adapted_bilm_is_recorded_with_its_extra_text(tmp_path):
    import elmo
    folders = write_tiny_tasks(tmp_path)
    adapted = tmp_path / "adapted"
    elmo.save_pretrained(elmo.from_pretrained("fixture"), adapted)
    (adapted / "metadata.json").write_text(json.dumps(
        {"extra_data": True, "adapted_on": [{"files": ["tweets-train.txt"], "sha256": ["0" * 64]}]}))
    cfg = tiny_config(folders, tasks=[{"task": "ner", "data_dir": str(folders["ner"]), "max_train": 6}],
                      train={"epochs": 1, "batch_size": 8},
                      variants=[{"name": "baseline"}, {"name": "elmo", "elmo": {}},
                                {"name": "adapted", "elmo": {"bilm": str(adapted)}}])
    results = run_experiment(normalise_config(cfg), out=tmp_path / "r", log=lambda s: None)
    info = results["bilms"][str(adapted)]
    assert info["domain_adapted"] is True and "warning" not in info
    assert results["bilms"]["fixture"]["domain_adapted"] is False
    row = next(r for r in results["summary"] if r["variant"] == "adapted")
    assert row["elmo"]["bilm"] == str(adapted)
    md = (tmp_path / "r" / "results.md").read_text()
    assert "domain-adapted: `tweets-train.txt`" in md


def test_random_weight_control_has_the_shape_of_its_model(tmp_path):
    import torch
    from elmo.tasks.bilms import describe_bilm, load_bilm
    trained, control, again = load_bilm("fixture"), load_bilm("random:fixture"), load_bilm("random:fixture")
    assert control.options.to_dict() == trained.options.to_dict()
    assert control.output_dim == trained.output_dim and control.num_layers == trained.num_layers
    a, b, c = trained.state_dict(), control.state_dict(), again.state_dict()
    assert a.keys() == b.keys()
    assert any(not torch.equal(a[k], b[k]) for k in a)          # not the trained weights
    assert all(torch.equal(b[k], c[k]) for k in b)              # the same random weights each time
    info = describe_bilm("random:fixture")
    assert info["random_weights"] and "control" in info["warning"]
    folders = write_tiny_tasks(tmp_path)
    cfg = tiny_config(folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"]), "max_train": 6}],
                      train={"epochs": 1, "batch_size": 8},
                      variants=[{"name": "b"}, {"name": "e", "elmo": {}},
                                {"name": "control", "elmo": {"bilm": "random:fixture"}}])
    results = run_experiment(normalise_config(cfg), out=tmp_path / "r", log=lambda s: None)
    assert set(results["bilm_cache_seconds"]) == {"fixture", "random:fixture"}


def test_baseline_first_then_resume_the_rest(tmp_path):
    """--variants runs a subset (here before the biLM folder exists); --resume with the same
    config later adds the other variants and keeps the baseline runs as they were."""
    folders = write_tiny_tasks(tmp_path)
    model = tmp_path / "later-model"
    cfg = normalise_config(tiny_config(
        folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"]), "max_train": 10}],
        train={"epochs": 1, "batch_size": 8},
        variants=[{"name": "baseline"}, {"name": "elmo", "elmo": {"bilm": str(model)}}]))
    out = tmp_path / "res"
    with pytest.raises(ValueError, match="unknown variant"):
        run_experiment(cfg, out=out, log=lambda s: None, only_variants=["basline"])
    run_experiment(cfg, out=out, log=lambda s: None, only_variants=["baseline"])
    first = json.loads((out / "results.json").read_text())
    assert [r["variant"] for r in first["runs"]] == ["baseline"]
    import shutil
    import elmo
    shutil.copytree(elmo.model_path("fixture"), model)          # the biLM arrives
    run_experiment(cfg, out=out, resume=True, log=lambda s: None)
    final = json.loads((out / "results.json").read_text())
    assert sorted(r["variant"] for r in final["runs"]) == ["baseline", "elmo"]
    assert final["runs"][0] == first["runs"][0]
    assert str(model) in final["bilms"]


def test_resume_reuses_runs_of_unchanged_variants(tmp_path):
    """Adding a variant and editing the description keeps the finished runs; changing a
    variant's settings trains it again."""
    folders = write_tiny_tasks(tmp_path)
    base = dict(tasks=[{"task": "pos", "data_dir": str(folders["pos"]), "max_train": 10}],
                train={"epochs": 1, "batch_size": 8})
    out = tmp_path / "res"
    run_experiment(normalise_config(tiny_config(folders, variants=[{"name": "baseline"}], **base)),
                   out=out, log=lambda s: None)
    first = json.loads((out / "results.json").read_text())["runs"]
    grown = tiny_config(folders, description="now with ELMo", **base,
                        variants=[{"name": "baseline"}, {"name": "elmo", "elmo": {}}])
    logs = []
    run_experiment(normalise_config(grown), out=out, resume=True, log=logs.append)
    assert any("1 of 1 runs" in line for line in logs)
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert runs[0] == first[0] and [r["variant"] for r in runs] == ["baseline", "elmo"]
    changed = tiny_config(folders, **base, variants=[{"name": "baseline"},
                                                     {"name": "elmo", "elmo": {"lambda": 1.0}}])
    logs = []
    run_experiment(normalise_config(changed), out=out, resume=True, log=logs.append)
    assert any("1 of 2 runs" in line for line in logs)
    assert any("elmo / seed 1" in line for line in logs)


def test_one_task_at_two_training_sizes_reports_under_its_names(tmp_path):
    folders = write_tiny_tasks(tmp_path)
    cfg = tiny_config(folders, tasks=[
        {"task": "pos", "name": "pos-8", "data_dir": str(folders["pos"]), "max_train": 8},
        {"task": "pos", "name": "pos-all", "data_dir": str(folders["pos"])}],
        train={"epochs": 1, "batch_size": 8}, variants=[{"name": "baseline"}])
    results = run_experiment(normalise_config(cfg), out=tmp_path / "r", log=lambda s: None)
    assert results["data"]["pos-8"]["sizes"]["train"] == 8
    assert results["data"]["pos-all"]["sizes"]["train"] == 24
    assert sorted(r["task"] for r in results["runs"]) == ["pos-8", "pos-all"]
    from elmo.tasks.report import training_size_curves
    curves = training_size_curves(results)
    assert [size for size, _, _ in curves["pos"]["baseline"]] == [8, 24]
    assert (tmp_path / "r" / "training_sizes.png").stat().st_size > 0
    assert "training_sizes.png" in (tmp_path / "r" / "results.md").read_text()
    with pytest.raises(ValueError, match="distinct names"):
        normalise_config(tiny_config(folders, tasks=[{"task": "pos", "max_train": 8}, {"task": "pos"}]))


def test_layer_norm_runs_recorded_before_per_sentence_statistics_are_not_reused():
    """Runs of a do_layer_norm variant computed with the batch's statistics have another
    fingerprint now (resume trains them again); other variants' fingerprints are unchanged."""
    from elmo.tasks.fingerprints import content_digest, run_content, run_fingerprint
    cfg = normalise_config({"tasks": [{"task": "pos"}], "bilm": "fixture", "variants": [
        {"name": "base"}, {"name": "plain", "elmo": {}}, {"name": "norm", "elmo": {"do_layer_norm": True}}]})
    spec = cfg.tasks[0]
    by_name = {v.name: v for v in cfg.variants}
    for name in ("base", "plain"):
        assert "layer_norm_over" not in run_content(cfg, spec, by_name[name])
    content = run_content(cfg, spec, by_name["norm"])
    before = dict(content)
    del before["layer_norm_over"]                    # what the earlier code hashed
    from elmo.tasks.bilm_checksums import BiLMChecksums
    sha = BiLMChecksums()("fixture")
    assert run_fingerprint(cfg, spec, by_name["norm"]) == content_digest(content, sha) != content_digest(before, sha)


def test_resume_into_another_experiments_folder_keeps_its_results(tmp_path):
    """--resume with a mistyped --out, the folder of another experiment none of whose runs
    this config keeps: its results.json was replaced at the first run, all its runs lost."""
    from elmo.tasks.runner import ResultsExistError
    folders = write_tiny_tasks(tmp_path)
    out = tmp_path / "results"
    first = tiny_config(folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"])}],
                        variants=[{"name": "baseline"}])
    run_experiment(normalise_config(first), out=out, log=lambda s: None)
    text = (out / "results.json").read_text(encoding="utf-8")
    other = {**first, "name": "other", "train": {**first["train"], "epochs": 1}}
    with pytest.raises(ResultsExistError, match="holds the results of the experiment 'smoke', none of whose 1 runs"):
        run_experiment(normalise_config(other), out=out, resume=True, log=lambda s: None)
    assert (out / "results.json").read_text(encoding="utf-8") == text
    # the same experiment with changed settings trains again, as asked
    again = run_experiment(normalise_config({**other, "name": "smoke"}), out=out, resume=True, log=lambda s: None)
    assert len(again["runs"]) == 1 and again["runs"][0]["epochs"] == 1


def test_resume_trains_again_on_a_changed_glove_file(tmp_path, monkeypatch):
    """A GloVe file of one's own replaced under its name: --resume kept every run trained with
    the old vectors (task files are counted, the word vectors were not)."""
    from elmo.tasks import embeddings
    folders = write_tiny_tasks(tmp_path)
    glove = tmp_path / "vectors.txt"
    out = tmp_path / "results"
    cfg = tiny_config(folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"])}],
                      variants=[{"name": "baseline"}], embeddings={"glove": str(glove)})
    logs: list = []
    for scale in (1.0, 1.0, -2.0):
        glove.write_text("".join(f"{w} {scale * i:g} {scale:g} 0.5\n" for i, w in enumerate(WORDS)))
        monkeypatch.setattr(embeddings, "_GLOVE_CACHE", {})     # (a new process reads the file again)
        monkeypatch.setattr(embeddings, "_DIGESTS", {})
        run_experiment(normalise_config(cfg), out=out, resume=True, log=logs.append)
    kept = [line for line in logs if line.startswith("resuming:")]
    assert kept[0].startswith("resuming: 1 of 1 runs")          # the same vectors: kept
    assert kept[1].startswith("resuming: 0 of 1 runs")          # other vectors: trained again


def test_plan_counts_only_the_variants_asked_for(tmp_path, capsys):
    """--plan --variants baseline listed and counted every variant of the config (and took a
    variant the config lacks without a word), where the run itself trains only those named."""
    folders = write_tiny_tasks(tmp_path)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(tiny_config(folders, seeds=[1, 2], tasks=[{"task": "pos", "data_dir": str(folders["pos"])}])))
    assert main(["experiment", str(path), "--plan", "--variants", "baseline"]) == 0
    out = capsys.readouterr().out
    assert "variant baseline: baseline" in out and "variant elmo-in-out" not in out
    assert "2 training runs (seeds 1, 2; 1 other variant(s) of the config not now)" in out
    assert main(["experiment", str(path), "--plan", "--variants", "nosuch"]) == 1
    assert "unknown variant(s) nosuch; the config has baseline, elmo-in-out" in capsys.readouterr().err
    assert main(["experiment", str(path), "--plan"]) == 0
    assert "4 training runs (seeds 1, 2)\n" in capsys.readouterr().out


@pytest.mark.parametrize("text, says", [
    ("not json", "not readable JSON"), ("[1, 2]", "expected a JSON object"),
    ('{"adapted_on": "tweets.txt"}', "'adapted_on' must be a list"),
    ('{"adapted_on": [], "steps": "many"}', "'steps' must be a whole number")])
def test_a_damaged_metadata_file_of_a_bilm_is_one_error_naming_it(tmp_path, text, says):
    """An experiment read its biLM's metadata.json without the checks elmo info makes: JSON's
    message without the file's name, a traceback ('list' object has no attribute 'get'), or
    "tweets.txt" taken for the adapted_on list (its letters listed as the files)."""
    import re
    import shutil

    import elmo
    from elmo.tasks.bilms import describe_bilm
    folder = tmp_path / "bilm"
    shutil.copytree(elmo.model_path("fixture"), folder)
    (folder / "metadata.json").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(str(folder / "metadata.json")) + f": {says}"):
        describe_bilm(str(folder))
    (folder / "metadata.json").write_text('{"adapted_on": ["tweets.txt"]}', encoding="utf-8")
    assert describe_bilm(str(folder))["domain_adapted"] is True


def test_a_diverged_run_is_one_line_naming_its_task_variant_and_seed(tmp_path, monkeypatch, capsys):
    """A model whose loss stays NaN stopped the experiment with 'the task model diverged' alone
    (which of the task's runs was only in the log, not at all with --quiet), and its hint 'or
    set train.grad_clip' named a setting that is on by default. The finished runs are kept."""
    import elmo.tasks.runner as runner
    folders = write_tiny_tasks(tmp_path)
    real_build = runner.build_model

    def nan_with_elmo(task, embeddings, settings, elmo_features, lam):
        model = real_build(task, embeddings, settings, elmo_features, lam)
        if elmo_features is not None:              # the ELMo variant's loss is NaN, from batch 1
            loss = model.loss
            model.loss = lambda batch: loss(batch) * float("nan")
        return model

    monkeypatch.setattr(runner, "build_model", nan_with_elmo)
    cfg = tiny_config(folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"])}],
                      train={"epochs": 3, "patience": 3, "batch_size": 8})
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    out = tmp_path / "out"
    assert main(["experiment", str(path), "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("elmo experiment: error: pos / elmo-in-out / seed 1: the task model diverged: "
                          "5 batches in a row"), err
    assert "(train.grad_clip 5 is on)" in err and "set train.grad_clip" not in err
    assert err.endswith("the 1 run(s) that finished are kept for --resume, where their settings are unchanged "
                        "(train.lr lowered for this task alone, in its entry's \"train\", keeps the other tasks' "
                        "runs; in the train block, none)") and "\n" not in err
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [(r["variant"], r["seed"]) for r in runs] == [("baseline", 1)]


def test_a_diverged_first_run_says_there_is_nothing_to_resume(tmp_path, monkeypatch, capsys):
    """The first run of an experiment diverged, and the line said the runs that finished are
    kept for --resume: none had."""
    import elmo.tasks.runner as runner
    folders = write_tiny_tasks(tmp_path)
    real_build = runner.build_model

    def nan_loss(*args, **kwargs):
        model = real_build(*args, **kwargs)
        loss = model.loss
        model.loss = lambda batch: loss(batch) * float("nan")
        return model

    monkeypatch.setattr(runner, "build_model", nan_loss)
    cfg = tiny_config(folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"])}])
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    assert main(["experiment", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("elmo experiment: error: pos / baseline / seed 1: the task model diverged: ")
    assert err.endswith("; no run has finished, so there is nothing to resume: run the experiment again")
    assert "kept for --resume" not in err and "\n" not in err


def test_a_task_file_edited_during_the_experiment_is_trained_on_again_on_resume(tmp_path, monkeypatch):
    """A run's fingerprint hashed the task's files after the run: one edited while the
    experiment ran gave the runs trained on the old contents the new file's fingerprint, and
    --resume kept them as results of the edited file."""
    import elmo.tasks.runner as runner
    folders = write_tiny_tasks(tmp_path)
    real_run_one = runner.run_one

    def edit_then_run(*args, **kwargs):           # (the data is read: the run trains on it)
        with open(folders["pos"] / "train.txt", "a") as f:
            f.write("the/at dog/nn ran/vbd\n")
        return real_run_one(*args, **kwargs)

    cfg = tiny_config(folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"])}],
                      variants=[{"name": "baseline"}])
    monkeypatch.setattr(runner, "run_one", edit_then_run)
    run_experiment(cfg, out=tmp_path / "out", log=lambda s: None)
    monkeypatch.setattr(runner, "run_one", real_run_one)
    logged = []
    results = run_experiment(cfg, out=tmp_path / "out", resume=True, log=logged.append)
    assert "resuming: 0 of 1 runs in" in logged[0]
    assert "pos / baseline / seed 1" in logged
    assert len(results["runs"]) == 1


def test_resume_with_fewer_seeds_says_which_finished_runs_it_drops(tmp_path):
    """`--resume --seeds 1` on a folder of seeds 1 and 2 dropped seed 2's finished runs from
    results.json with only "1 of 2 runs ... are kept" said; it now names them. A run dropped
    because its settings changed is not counted as one of another seed."""
    folders = write_tiny_tasks(tmp_path)
    base = dict(tasks=[{"task": "pos", "data_dir": str(folders["pos"]), "max_train": 10}],
                train={"epochs": 1, "batch_size": 8}, variants=[{"name": "baseline"}])
    out = tmp_path / "res"
    run_experiment(normalise_config(tiny_config(folders, seeds=[1, 2, 3], **base)), out=out, log=lambda s: None)
    logs = []
    run_experiment(normalise_config(tiny_config(folders, seeds=[1], **base)), out=out, resume=True, log=logs.append)
    assert logs[:2] == [f"resuming: 1 of 3 runs in {out / 'results.json'} match this config and are kept",
                        "resuming: 2 finished run(s) of seed(s) 2, 3, which this config does not run (seeds 1), "
                        "are dropped from results.json; give those seeds too to keep them"]
    assert [r["seed"] for r in json.loads((out / "results.json").read_text())["runs"]] == [1]
    changed = dict(base, train={"epochs": 1, "batch_size": 4})       # seed 1's run: other settings now
    run_experiment(normalise_config(tiny_config(folders, seeds=[2], **changed)), out=out, resume=True,
                   log=logs.append)
    assert not any("finished run(s) of seed(s) 1" in line for line in logs)


def test_the_data_block_records_the_task_files_hash_the_runs_fingerprints_count(tmp_path, monkeypatch):
    """results.json's data block hashed a task's files after they were read, each run's
    fingerprint before: a file edited between the two was recorded with a SHA-256 its runs'
    fingerprints disagreed with. Both now come from one hash, taken before the read; and the
    file's size in bytes, taken after the read, from that same reading."""
    import hashlib
    import elmo.tasks.runner as runner
    folders = write_tiny_tasks(tmp_path)
    train = folders["pos"] / "train.txt"
    before = train.read_bytes()
    real_load_task = runner.load_task

    def edit_then_read(*args, **kwargs):          # (after the hash, before the read)
        with open(train, "a") as f:
            f.write("the/at dog/nn ran/vbd\n")
        return real_load_task(*args, **kwargs)

    cfg = normalise_config(tiny_config(folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"])}],
                                       variants=[{"name": "baseline"}]))
    monkeypatch.setattr(runner, "load_task", edit_then_read)
    results = run_experiment(cfg, out=tmp_path / "out", log=lambda s: None)
    recorded = results["data"]["pos"]["source"]["files"]["train"]["sha256"]
    assert recorded == hashlib.sha256(before).hexdigest()         # the contents it hashed first
    size = results["data"]["pos"]["source"]["files"]["train"]["bytes"]
    assert size == len(before) != train.stat().st_size              # (of those contents too)
    train.write_bytes(before)                     # the fingerprint of the contents recorded
    from elmo.tasks.fingerprints import run_fingerprint
    assert results["runs"][0]["fingerprint"] == run_fingerprint(cfg, cfg.tasks[0], cfg.variants[0])


def test_describe_files_takes_size_and_hash_of_one_reading(tmp_path):
    """Without digests, each file is hashed and counted in the same pass."""
    import hashlib
    from elmo.tasks.files import FileDigest, describe_files, file_digest
    path = tmp_path / "t.txt"
    path.write_bytes(b"a b\n" * 300_000)              # (more than one block of the read)
    assert file_digest(path) == FileDigest(hashlib.sha256(path.read_bytes()).hexdigest(), 1_200_000)
    described = describe_files({"train": path})["train"]
    assert (described["bytes"], described["sha256"]) == tuple(file_digest(path)[::-1])
    given = describe_files({"train": path}, {"train": FileDigest("0" * 64, 7)})["train"]
    assert (given["bytes"], given["sha256"]) == (7, "0" * 64)      # the reading taken before


def test_a_saved_model_of_a_built_in_task_splits_raw_text_as_its_corpus_was(tmp_path):
    """sentiment, topic, vitaminc and squad are read from text `elmo data` tokenized
    (punctuation and clitics split off: `great film !`, `do n't`); their saved models took a
    raw line for words split on spaces (`film!`, `don't`), words training never saw."""
    from elmo.tasks import TaskModel
    folders = write_tiny_tasks(tmp_path)
    cfg = tiny_config(folders, variants=[{"name": "baseline"}])
    cfg["tasks"] = [t for t in cfg["tasks"] if t["task"] in ("sentiment5", "vitaminc", "pos")]
    out = tmp_path / "results"
    run_experiment(normalise_config(cfg), out=out, log=lambda s: None, save_models=True)
    for task in ("sentiment5", "vitaminc"):
        model = TaskModel.load(out / "models" / task / "baseline" / "seed-1")
        text = "the cat didn't sit, did it?"
        raw = [text, (text, text)][task == "vitaminc"]
        split = "the cat did n't sit , did it ?".split()
        assert model.predict([raw]) == model.predict([[split, (split, split)][task == "vitaminc"]]), task
        assert json.loads((out / "models" / task / "baseline" / "seed-1" / "config.json").read_text())["tokenize"]
    # Brown's and the tweets' tokens are the corpus's own: a tagger's text is never split otherwise
    tagger = json.loads((out / "models" / "pos" / "baseline" / "seed-1" / "config.json").read_text())
    assert tagger["tokenize"] is False
