"""A bare model name that is also a folder in the working folder: the documented order holds
(bundled name, then local path, then published name) and a warning says which one loaded,
once; a path with a separator is always the folder."""
from __future__ import annotations

import warnings

import pytest
import torch

import elmo
from tests.conftest import random_bilm


@pytest.fixture
def here(tmp_path, monkeypatch):
    """An empty working folder, with no name warned about yet in this process."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(elmo, "_NAME_WARNED", set(), raising=False)
    return tmp_path


def _weights(bilm):
    return torch.cat([p.detach().flatten() for p in bilm.parameters()])


def test_a_folder_named_like_a_bundled_model_is_named_in_a_warning_once(here):
    bundled = elmo.from_pretrained(elmo.model_path("fixture").resolve())   # (no folder yet)
    mine = random_bilm(seed=3)
    elmo.save_pretrained(mine, here / "fixture")
    with pytest.warns(UserWarning, match=r"'fixture' names both the bundled model 'fixture' and the local .*"
                                         r"loading the bundled model.*'\./fixture'") as caught:
        loaded = elmo.from_pretrained("fixture")
    assert len(caught) == 1 and str(here / "fixture") in str(caught[0].message)
    assert torch.equal(_weights(loaded), _weights(bundled))          # the documented order holds
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        elmo.from_pretrained("fixture")                               # once, not at every load
        local = elmo.from_pretrained("./fixture")                     # a path: the folder, no warning
    assert torch.equal(_weights(local), _weights(mine))


def test_a_folder_named_like_a_published_model_loads_and_says_how_to_get_the_published_one(here, monkeypatch):
    import importlib

    from elmo.hub import registry
    resolve = importlib.import_module("elmo.hub.resolve")     # (the module; elmo.hub.resolve is its function)
    monkeypatch.setattr(resolve, "fetch_model", lambda entry: pytest.fail("downloaded the published model"))
    (here / "small").mkdir()
    url = registry.get("small").urls["options"]
    with pytest.warns(UserWarning, match="'small' names both the published model 'small'") as caught:
        assert elmo.model_path("small") == elmo.model_path("./small")
    assert url in str(caught[0].message) and "loading the local one" in str(caught[0].message)


def test_a_model_name_without_a_folder_of_that_name_loads_without_a_warning(here):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        elmo.from_pretrained("fixture")


def test_an_experiment_config_beside_a_folder_named_like_a_model_says_which_it_uses(here):
    """A config's relative biLM is found beside the config: a folder there named like the
    bundled model was passed over, and one named like a published model taken, in silence."""
    import json
    import re

    from elmo.tasks.experiment_config import load_config
    where = here / "exp"
    (where / "fixture").mkdir(parents=True)
    (where / "small").mkdir()
    for name, says in (("fixture", "loading the bundled model"), ("small", "loading the local one")):
        path = where / f"{name}.json"
        path.write_text(json.dumps({"tasks": [{"task": "pos"}], "bilm": name,
                                    "variants": [{"name": "base"}, {"name": "elmo", "elmo": {}}]}))
        with pytest.warns(UserWarning, match=f"'{name}' names both .* {re.escape(str(where / name))}: {says}"):
            cfg = load_config(path)
        assert cfg.bilm == (name if name == "fixture" else str(where / name))


def test_the_command_line_says_it_in_one_line(here, capsys):
    from elmo.cli import main
    (here / "fixture").mkdir()
    assert main(["info", "fixture"]) == 0
    err = capsys.readouterr().err
    assert "elmo info: warning: 'fixture' names both the bundled model 'fixture'" in err
    assert "ModelNameWarning" not in err and len(err.strip().splitlines()) == 1


def test_one_function_decides_what_a_name_names_in_the_documented_order(here):
    """Loading, `elmo info`/`convert`, analysis and experiment configs each decided on their
    own whether a name was a bundled model, a local folder or a published model; they now all
    ask elmo.which_model, whose order is the documented one."""
    (here / "fixture").mkdir()
    (here / "small").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kinds = {name: elmo.which_model(name) for name in
                 ("fixture", "default", "small", "original", "./small", "nothing-here", " ",
                  "https://example.org/options.json")}
    assert {n: k.kind for n, k in kinds.items()} == {
        "fixture": "bundled", "default": "bundled", "small": "local", "original": "published",
        "./small": "local", "nothing-here": "unknown", " ": "empty",
        "https://example.org/options.json": "url"}
    def where(path):
        return None if path is None else path.resolve()
    assert where(kinds["fixture"].passed_over) == where(here / "fixture") and kinds["default"].passed_over is None
    assert where(kinds["small"].passed_over) == where(here / "small") and kinds["./small"].passed_over is None
    assert kinds["fixture"].folder == elmo.model_path("fixture") and where(kinds["small"].folder) == where(here / "small")
    assert kinds["original"].folder is None
    # an experiment config's names are looked up beside it
    assert elmo.which_model("small", local=here / "exp" / "small", warn=False).kind == "published"


def test_a_printed_experiment_config_says_a_folder_took_a_published_models_name(here):
    """`elmo experiment --print-config` made a biLM folder named like a published model
    absolute without a word; once absolute, loading it could not say it either."""
    from elmo.commands.tasks import _absolute_bilm
    (here / "small").mkdir()
    with pytest.warns(elmo.ModelNameWarning, match="'small' names both the published model 'small'"):
        assert _absolute_bilm("small") == str((here / "small").resolve())
    with pytest.warns(elmo.ModelNameWarning, match="'fixture' names both the bundled model"):
        (here / "fixture").mkdir()
        assert _absolute_bilm("random:fixture") == "random:fixture"      # the bundled one, kept


def test_the_warning_points_at_the_callers_line(here):
    """The warning named a line inside the package for a config's biLM (its stack level was
    counted for from_pretrained only); it is now the first line outside the package."""
    import json

    from elmo.tasks.experiment_config import load_config
    (here / "exp" / "fixture").mkdir(parents=True)
    (here / "exp" / "c.json").write_text(json.dumps({"tasks": [{"task": "pos"}], "bilm": "fixture",
                                                     "variants": [{"name": "b"}, {"name": "e", "elmo": {}}]}))
    (here / "fixture").mkdir()
    with pytest.warns(elmo.ModelNameWarning) as caught:
        load_config(here / "exp" / "c.json")
        elmo.model_path("fixture")
    assert len(caught) == 2 and all(w.filename == __file__ for w in caught)
