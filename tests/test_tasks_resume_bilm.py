"""``elmo experiment --resume`` and the biLM's weights: runs with ELMo are kept only when the
biLM's files are the ones they were computed with; baselines keep their fingerprints (the
committed results' baselines are still reused)."""
from __future__ import annotations

import copy
import hashlib
import json
import shutil
from pathlib import Path

import h5py
import pytest

import elmo
from elmo.folder_checksums import update_record
from elmo.tasks.bilm_checksums import BiLMChecksums, combined_sha256
from elmo.tasks.experiment_config import load_config, normalise_config
from elmo.tasks.fingerprints import run_fingerprint
from elmo.tasks.resume_runs import reusable_runs
from elmo.tasks.runner import run_experiment
from test_tasks_runner import tiny_config, write_tiny_tasks

REPO = Path(__file__).resolve().parent.parent


def _model_copy(folder: Path) -> Path:
    """A copy of the bundled fixture biLM (450 KB) that a test may change."""
    shutil.copytree(elmo.model_path("fixture"), folder)
    return folder


def _change_one_weight(folder: Path) -> None:
    """Retrain, in miniature: one weight of the copy's HDF5 file changes, its shape does not."""
    with h5py.File(folder / "weights.hdf5", "r+") as f:
        f["CNN/b_cnn_0"][0] = f["CNN/b_cnn_0"][0] + 0.5
    update_record([folder / "weights.hdf5"])   # (as a writer records the files it writes)


def test_checksum_counts_weights_options_and_vocabulary_and_a_control_only_options(tmp_path):
    model = _model_copy(tmp_path / "m")
    (model / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nthe\n")
    (model / "metadata.json").write_text("{}")
    before = BiLMChecksums()
    assert set(before.files(str(model))) == {"options.json", "weights.hdf5", "vocab.txt"}
    assert set(before.files("random:" + str(model))) == {"options.json"}
    files = before.files(str(model))              # as `sha256sum options.json ... | sha256sum`
    listing = "".join(f"{files[n]}  {n}\n" for n in ("options.json", "vocab.txt", "weights.hdf5"))
    assert before(str(model)) == combined_sha256(files) == hashlib.sha256(listing.encode()).hexdigest()

    (model / "metadata.json").write_text('{"notes": "edited"}')          # not counted
    assert BiLMChecksums()(str(model)) == before(str(model))
    (model / "vocab.txt").write_text("<S>\n</S>\n<UNK>\na\n")
    assert BiLMChecksums()(str(model)) != before(str(model))
    _change_one_weight(model)
    after = BiLMChecksums()
    assert after("random:" + str(model)) == before("random:" + str(model))   # same shape
    options = json.loads((model / "options.json").read_text())
    options["lstm"]["dim"] = 32
    (model / "options.json").write_text(json.dumps(options))
    assert BiLMChecksums()("random:" + str(model)) != before("random:" + str(model))
    assert BiLMChecksums()(str(tmp_path / "not-there")) is None


@pytest.mark.parametrize("name, config", [("pos", "pos"), ("ner", "ner"), ("topic", "topic")])
def test_committed_baselines_are_kept_and_their_elmo_runs_need_their_biLM(name, config, tmp_path,
                                                                          monkeypatch):
    """The committed version-1 results.json (written before biLMs were counted; kept under
    experiments/results/v1/ when the experiments were re-run on version 3): the baseline
    records' fingerprints still match, so --resume keeps them; the ELMo records recorded no
    biLM SHA-256, so they are trained again. Records that had recorded it are kept with the
    same weights and dropped when one weight differs."""
    monkeypatch.chdir(REPO)                   # the committed configs are read as the CLI does
    model = _model_copy(tmp_path / "default-copy")
    monkeypatch.setattr(elmo, "DEFAULT_MODEL", str(model))          # "default" is this copy
    cfg = load_config(f"experiments/configs/{config}.json")
    old = json.loads((REPO / "experiments" / "results" / "v1" / name / "results.json").read_text())
    assert not [r for r in old["runs"] if "bilm_sha256" in r]      # written before the SHA-256
    baselines = [r for r in old["runs"] if not r["elmo"]]
    on_default = [r for r in old["runs"] if r["elmo"] and r["elmo"]["bilm"] in ("default", "random:default")]
    assert baselines and on_default

    kept, notes = reusable_runs(cfg, old, BiLMChecksums())
    assert [r for r in kept if not r["elmo"]] == baselines
    assert not [r for r in kept if r in on_default]
    # (a do_layer_norm variant's runs are dropped for their batch-wide statistics first)
    batch_norm = [r for r in on_default if r["elmo"].get("do_layer_norm")]
    assert bool(batch_norm) == (name == "ner")
    assert (f"resuming: {len(batch_norm)} run(s) with do_layer_norm dropped" in " ".join(notes)) \
        == bool(batch_norm)
    assert any(f"{sum(r['elmo']['bilm'] == 'default' for r in on_default) - len(batch_norm)} runs dropped" in n
               and "these runs did not record which files of the biLM 'default' they used" in n
               and "not recorded then" in n
               for n in notes)

    # the same records as this version writes them: with the biLM's SHA-256 they ran with
    bilms = BiLMChecksums()
    specs = {(s.get("name", s["task"]), v.name): (s, v) for s in cfg.tasks for v in cfg.variants}
    upgraded = copy.deepcopy(old)
    on_default = [r for r in upgraded["runs"] if r["elmo"] and r["elmo"]["bilm"] in ("default", "random:default")]
    for r in on_default:
        spec, variant = specs[(r["task"], r["variant"])]
        r["fingerprint"] = run_fingerprint(cfg, spec, variant, bilms)
        r["bilm_sha256"] = bilms(cfg.bilm_of(variant))
    kept, notes = reusable_runs(cfg, upgraded, BiLMChecksums())
    assert all(r in kept for r in on_default) and not [n for n in notes if "'default'" in n]

    _change_one_weight(model)
    kept, notes = reusable_runs(cfg, upgraded, BiLMChecksums())
    assert [r for r in kept if not r["elmo"]] == baselines
    assert "default" not in [r["elmo"]["bilm"] for r in kept if r["elmo"]]
    controls = [r for r in on_default if r["elmo"]["bilm"] == "random:default"]
    assert all(r in kept for r in controls)                       # same shape: still matching
    then = next(r["bilm_sha256"] for r in on_default if r["elmo"]["bilm"] == "default")
    assert any("the biLM 'default' changed" in n and f"now, {then[:12]}… then" in n for n in notes)


def test_resume_trains_again_what_a_changed_biLM_computed(tmp_path):
    """End to end on tiny data: after one weight of the biLM changes, --resume keeps the
    baseline and the random control and trains the ELMo variant again; the records, the
    bilms block and results.md carry the biLM's SHA-256."""
    folders = write_tiny_tasks(tmp_path)
    model = _model_copy(tmp_path / "model")
    cfg = normalise_config(tiny_config(
        folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"]), "max_train": 10}],
        train={"epochs": 1, "batch_size": 8}, bilm=str(model),
        variants=[{"name": "baseline"}, {"name": "elmo", "elmo": {}},
                  {"name": "control", "elmo": {"bilm": "random:" + str(model)}}]))
    out = tmp_path / "res"
    first = run_experiment(cfg, out=out, log=lambda s: None)
    sha = BiLMChecksums()(str(model))
    by_variant = {r["variant"]: r for r in first["runs"]}
    assert by_variant["elmo"]["bilm_sha256"] == sha and "bilm_sha256" not in by_variant["baseline"]
    assert first["bilms"][str(model)]["sha256"] == sha
    assert f"SHA-256 {sha[:12]} (weights, options and vocabulary)" in (out / "results.md").read_text()

    logs = []
    run_experiment(cfg, out=out, resume=True, log=logs.append)             # nothing changed
    assert any("3 of 3 runs" in line for line in logs)
    assert not any("/ seed 1" in line for line in logs)

    _change_one_weight(model)
    logs = []
    again = run_experiment(cfg, out=out, resume=True, log=logs.append)
    new_sha = BiLMChecksums()(str(model))
    assert any("2 of 3 runs" in line for line in logs)
    assert any(f"1 run dropped and trained again: the biLM '{model}' changed since these runs "
               f"(SHA-256 of its weights, options and vocabulary files {new_sha[:12]}… now, "
               f"{sha[:12]}… then)" in line for line in logs)
    runs = {r["variant"]: r for r in again["runs"]}
    assert runs["baseline"] == by_variant["baseline"] and runs["control"] == by_variant["control"]
    assert runs["elmo"]["bilm_sha256"] == new_sha
    assert again["bilms"][str(model)]["sha256"] == new_sha


def test_an_elmoformanylangs_folder_counts_its_weights_and_dictionaries(tmp_path):
    """Its .pkl weights and .dic dictionaries were not counted: another language's model of
    the same configuration (or retrained weights) passed a saved task model's check and kept
    --resume's runs."""
    import torch
    from tests.conftest import FIXTURES
    from elmo.tasks.bilm_checksums import bilm_files
    from elmo.tasks.saved import TaskModelError, _load_bilm
    original = FIXTURES / "elmoformanylangs" / "model"
    copy = tmp_path / "other"
    shutil.copytree(original, copy)
    recorded = bilm_files(original)
    assert {"encoder.pkl", "token_embedder.pkl", "char.dic", "word.dic"} <= set(recorded)
    ref = {"spec": str(original), "path": str(original), "bundled": False, "sha256": recorded}
    assert _load_bilm(ref, str(copy)) is not None                    # the same files: loads
    state = torch.load(copy / "encoder.pkl", weights_only=True)      # retrained, in miniature
    name = next(k for k, v in state.items() if v.is_floating_point())
    state[name] = state[name] + 0.5
    torch.save(state, copy / "encoder.pkl")
    with pytest.raises(TaskModelError, match="encoder.pkl differ from the recorded SHA-256"):
        _load_bilm(ref, str(copy))
    before = BiLMChecksums()(str(original))
    assert BiLMChecksums()(str(copy)) != before
    shutil.copy(original / "encoder.pkl", copy / "encoder.pkl")
    (copy / "char.dic").write_text((original / "char.dic").read_text(encoding="utf-8")[::-1], encoding="utf-8")
    assert BiLMChecksums()(str(copy)) != before


def test_runs_of_a_biLM_not_there_now_are_kept_unchecked(tmp_path):
    """A biLM folder that is gone (its variant not run this time): the runs that recorded its
    SHA-256 and whose settings match are kept, unchecked, and the log says so; the baseline's
    run is kept as ever."""
    folders = write_tiny_tasks(tmp_path)
    model = _model_copy(tmp_path / "model")
    cfg = normalise_config(tiny_config(
        folders, tasks=[{"task": "pos", "data_dir": str(folders["pos"]), "max_train": 10}],
        bilm=str(model), variants=[{"name": "baseline"}, {"name": "elmo", "elmo": {}}]))
    spec, bilms = cfg.tasks[0], BiLMChecksums()
    runs = [{"task": "pos", "variant": v.name, "seed": seed, "elmo": v.elmo and {"bilm": str(model)},
             "fingerprint": run_fingerprint(cfg, spec, v, bilms),
             **({"bilm_sha256": bilms(str(model))} if v.elmo else {})}
            for v in cfg.variants for seed in cfg.seeds]
    old = {"config": cfg.recorded(), "runs": runs}
    assert reusable_runs(cfg, old, BiLMChecksums()) == (runs, [])   # (the folder there: all kept)

    model.rename(tmp_path / "moved")
    kept, notes = reusable_runs(cfg, old, BiLMChecksums())
    assert kept == runs
    elmo_runs = sum(1 for r in runs if r["elmo"])
    assert notes == [f"resuming: {elmo_runs} run(s) with the biLM {str(model)!r} kept unchecked: it is not "
                     f"there now to compare its SHA-256 (checked when their variant runs)"]
