"""A URL's password (or token) that a record holds, or a user argument gives, is shown as
``***`` wherever it is printed, logged or written into a new file.

Records written before biLM URLs with a login were refused (results.json, saved task models,
a model's metadata.json, analysis results) still hold such URLs; every display of them showed
the secret."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from elmo.cli import main
from tests.test_tasks_files import write_config, write_task

#: The secret each URL holds: as a password, and as a token alone.
SECRET = "secret"
URLS = [f"https://user:{SECRET}@host.invalid/m.hdf5", f"https://{SECRET}@host.invalid/m.hdf5"]


def test_error_and_warning_lines_of_the_command_hide_a_password(tmp_path, capsys):
    """Any error line of the command (here a results file named by a URL) and any warning it
    shows give a URL's password as ***."""
    import warnings
    from elmo.cli import _model_name_warnings_as_lines
    for url in URLS:
        assert main(["experiment-table", url]) == 1
        err = capsys.readouterr().err
        assert SECRET not in err and "host.invalid" in err and err.startswith("elmo experiment-table: error: ")
    from elmo import ModelNameWarning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with _model_name_warnings_as_lines("x"):
            warnings.warn(f"fetched {URLS[0]}", UserWarning)       # (shown by Python's own hook)
            warnings.warn(f"{URLS[1]} names both", ModelNameWarning)   # (one line of ours)
    err = capsys.readouterr().err
    assert SECRET not in err and err.startswith("elmo x: warning: https://***@host.invalid")
    assert [str(w.message) for w in caught] == [f"fetched {URLS[0].replace(SECRET, '***')}"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """An experiment's results folder with a saved tagger trained with the fixture biLM."""
    from elmo.tasks.experiment_config import load_config
    from elmo.tasks.runner import run_experiment
    root = tmp_path_factory.mktemp("trained")
    config = write_config(root, [write_task(root, "tagging")], train={"epochs": 1, "batch_size": 8})
    run_experiment(load_config(config), out=root / "res", log=lambda s: None, save_models=True)
    return root / "res"


def _as_recorded_before(trained: Path, url: str, into: Path) -> Path:
    """A copy of ``trained`` as an experiment with ``url`` for its biLM wrote it before such
    URLs were refused: results.json and the saved model name the URL whole."""
    shutil.copytree(trained, into)
    path = into / "results.json"
    results = json.loads(path.read_text())
    results["config"]["bilm"] = url
    for run in results["runs"]:
        if run.get("elmo"):
            run["elmo"]["bilm"] = url
    for row in results["summary"]:
        if row.get("elmo"):
            row["elmo"]["bilm"] = url
    (entry,) = results["bilms"].values()
    results["bilms"] = {url: {**entry, "spec": url}}
    results["command"] = f"elmo experiment config.json --bilm {url} --save-models"
    path.write_text(json.dumps(results, indent=1))
    model = into / "models/my-tagging/elmo/seed-1/config.json"
    cfg = json.loads(model.read_text())
    cfg["elmo"]["bilm"].update(spec=url, bundled=False)
    model.write_text(json.dumps(cfg, indent=1))
    assert SECRET in path.read_text() and SECRET in model.read_text()
    return into


@pytest.mark.parametrize("url", URLS)
def test_tables_reports_and_comparisons_of_recorded_results_hide_the_password(trained, tmp_path, url, capsys):
    from elmo.tasks.compare import comparison_markdown, read_results
    out = _as_recorded_before(trained, url, tmp_path / "old")
    shown = url.replace(SECRET, "***")

    assert main(["experiment-table", str(out)]) == 0
    table = capsys.readouterr().out
    assert SECRET not in table and shown in table
    assert main(["experiment-table", str(out), "-o", str(tmp_path / "table.md")]) == 0
    written = (tmp_path / "table.md").read_text()
    assert SECRET not in written and shown in written

    results = read_results(out)
    compared = comparison_markdown(results, results)
    assert SECRET not in compared and shown in compared

    # experiment-report writes results.json again: the new copy is redacted, and says so once
    assert main(["experiment-report", str(out)]) == 0
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    warnings = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "***" in warnings[0] and ".netrc" in warnings[0], captured.err
    for name in ("results.md", "results.json"):
        text = (out / name).read_text()
        assert SECRET not in text and shown in text, name
    assert main(["experiment-report", str(out)]) == 0     # (nothing left to redact: no warning)
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize("url", URLS)
def test_loading_and_predicting_with_a_recorded_or_given_url_hide_the_password(trained, tmp_path, url, capsys):
    from elmo.hub.download import DownloadError
    from elmo.tasks.models import TaskModel
    from elmo.tasks.saved import TaskModelError
    out = _as_recorded_before(trained, url, tmp_path / "old")
    model = out / "models/my-tagging/elmo/seed-1"
    text = tmp_path / "new.txt"
    text.write_text("the cat sat\n", encoding="utf-8")
    for bilm in (None, "random:fixture"):   # (the URL names no model file; a control is not it)
        with pytest.raises((TaskModelError, DownloadError)) as error:
            TaskModel.load(model, bilm=bilm)
        assert SECRET not in str(error.value) and "host.invalid" in str(error.value)
    given = trained / "models/my-tagging/elmo/seed-1"  # (records the bundled fixture)
    for folder, extra in ((model, []), (model, ["--bilm", "random:fixture"]), (given, ["--bilm", url])):
        target = tmp_path / "pred.txt"
        assert main(["predict", str(folder), str(text), "-o", str(target), "--quiet", *extra]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "error: " in err and "host.invalid" in err, err
        assert SECRET not in err
        assert not target.exists()


def _fixture_behind_a_login(tmp_path, monkeypatch):
    """A local server of the fixture biLM's files at /m/ that wants the login ann:SECRET, and a
    fresh model cache (returned with the server)."""
    import elmo
    from tests.hub_server import FileServer
    home = tmp_path / "elmo-home"
    monkeypatch.setenv("ELMO_HOME", str(home))
    monkeypatch.delenv("ELMO_OFFLINE", raising=False)
    monkeypatch.setenv("ELMO_DOWNLOAD_RETRIES", "0")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    fixture = elmo.model_path("fixture")
    files = {"/m/options.json": fixture / "options.json", "/m/weights.hdf5": fixture / "weights.hdf5"}
    return FileServer(files, login=("ann", SECRET)), home


def _nothing_in(home: Path) -> None:
    """No name in the model cache, and no file there but the weights, holds SECRET."""
    for path in home.rglob("*"):
        assert SECRET not in path.name
        if path.is_file() and not path.is_symlink() and path.suffix != ".hdf5":
            assert SECRET not in path.read_text(errors="replace"), path


def test_predict_with_a_password_in_the_bilm_url_writes_it_nowhere(trained, tmp_path, monkeypatch, capsys):
    """``elmo predict --bilm URL`` with a login in the URL is allowed (nothing records it): the
    download uses it, and neither the predictions, the messages nor the model cache hold it."""
    server, home = _fixture_behind_a_login(tmp_path, monkeypatch)
    text = tmp_path / "new.txt"
    text.write_text("the cat sat\na dog ran\n", encoding="utf-8")
    model = trained / "models/my-tagging/elmo/seed-1"
    expected = tmp_path / "expected.txt"
    assert main(["predict", str(model), str(text), "-o", str(expected), "--quiet"]) == 0
    with server:
        url = server.url("/m/weights.hdf5").replace("://", f"://ann:{SECRET}@")
        target = tmp_path / "pred.txt"
        capsys.readouterr()
        assert main(["predict", str(model), str(text), "-o", str(target), "--bilm", url]) == 0
        captured = capsys.readouterr()
        assert SECRET not in captured.out + captured.err
        assert target.read_text() == expected.read_text()
        # the wrong login: one error line, without the password given
        wrong = url.replace(f"ann:{SECRET}@", f"ann:{SECRET}2@").replace("/m/", "/other/")
        assert main(["predict", str(model), str(text), "-o", str(tmp_path / "p2.txt"), "--bilm", wrong]) == 1
        err = capsys.readouterr().err
        assert SECRET not in err and "elmo predict: error: http://ann:***@127.0.0.1:" in err, err
    _nothing_in(home)


def test_the_demo_names_a_model_url_given_without_its_password(tmp_path, monkeypatch, capsys):
    server, home = _fixture_behind_a_login(tmp_path, monkeypatch)
    with server:
        url = server.url("/m/weights.hdf5").replace("://", f"://ann:{SECRET}@")
        assert main(["demo", "--model", url]) == 0
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err and "model: http://ann:***@127.0.0.1:" in captured.out
    _nothing_in(home)


def test_info_describe_and_convert_hide_a_password_in_model_metadata(tmp_path, capsys):
    """A model folder's metadata.json holding a URL with a login: `elmo info` shows it with
    ***, an experiment's description of the biLM copies it so, and `elmo convert` writes the
    copy so and says it once; the source's metadata.json is kept as it is."""
    import elmo
    from elmo.tasks.bilms import describe_bilm
    url = URLS[0]
    folder = tmp_path / "bilm"
    shutil.copytree(elmo.model_path("fixture"), folder)
    meta = {"adapted_from": url, "adapted_on": [{"files": [URLS[1]]}], "extra_data": True}
    (folder / "metadata.json").write_text(json.dumps(meta))
    assert main(["info", str(folder)]) == 0
    shown = capsys.readouterr().out
    assert SECRET not in shown and f"adapted from: {url.replace(SECRET, '***')}" in shown
    described = json.dumps(describe_bilm(str(folder)))
    assert SECRET not in described and "host.invalid" in described
    assert main(["convert", str(folder), str(tmp_path / "copy")]) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and SECRET not in captured.out + captured.err
    copied = (tmp_path / "copy/metadata.json").read_text()
    assert SECRET not in copied and "host.invalid" in copied
    assert json.loads((folder / "metadata.json").read_text()) == meta


def test_analysis_hides_a_password_of_a_mix_record_and_of_a_recorded_model(tmp_path, capsys):
    """A mix read from an experiment's results.json that names its biLM by a URL with a login,
    and analysis results that recorded their model so: the run's note, results.json and the
    report (also rewritten with --report-only) show the password as ***."""
    from tests.test_analysis_cli import _PAIRS
    from elmo.tasks.bilm_checksums import counted_files
    url = URLS[0]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(_PAIRS + "\n")
    files = {**counted_files("fixture"), "weights.hdf5": "0" * 64}
    run = {"task": "pos", "variant": "elmo", "seed": 1,
           "elmo": {"bilm": url, "mix_weights": {"input": {"weights": [0.2, 0.3, 0.5], "gamma": 1.0}}}}
    (tmp_path / "results.json").write_text(json.dumps({"runs": [run], "bilms": {url: {"files_sha256": files}}}))
    out = tmp_path / "out"
    assert main(["analyze", "fixture", "--out", str(out), "--only", "contrast", "--contrast-file", str(pairs),
                 "--no-untrained-control", "--mix-weights", str(tmp_path / "results.json")]) == 0
    captured = capsys.readouterr()
    assert "the mix was learned on the biLM 'https://user:***@host.invalid" in captured.out
    assert SECRET not in captured.out + captured.err
    for name in ("results.json", "report.md"):
        text = (out / name).read_text()
        assert SECRET not in text and "host.invalid" in text, name
    # results that recorded the model by its URL whole (before): the rewritten report hides it,
    # and the same URL given again is the recorded model
    results = json.loads((out / "results.json").read_text())
    (out / "results.json").write_text(json.dumps({**results, "model": url}))
    assert main(["analyze", url, "--out", str(out), "--report-only"]) == 0
    captured = capsys.readouterr()
    report = (out / "report.md").read_text()
    assert SECRET not in report + captured.out + captured.err and "host.invalid" in report


@pytest.mark.parametrize("url", URLS)
def test_print_config_and_plan_show_a_model_url_without_its_password(tmp_path, url, capsys):
    config = write_config(tmp_path, [write_task(tmp_path, "tagging")])
    for argv in (["embed", "in.txt", "out.h5", "--model", url, "--print-config"],
                 ["experiment", str(config), "--bilm", url, "--print-config"],
                 ["experiment", str(config), "--bilm", url, "--plan"]):
        assert main(argv) == 0
        captured = capsys.readouterr()
        assert SECRET not in captured.out + captured.err and "host.invalid" in captured.out, argv
