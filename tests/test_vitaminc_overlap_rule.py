"""experiments/vitaminc_overlap_rule.py: the word-overlap rule's accuracy, and one line, not a
traceback, where its data cannot be had (the `bigbench` release VitaminC ships in is no longer
offered by the registry)."""
from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "vitaminc_overlap_rule.py"


def _script():
    return load_script(SCRIPT, "vitaminc_overlap_rule")


def _pairs(path: Path, rows) -> None:
    path.write_text("".join(json.dumps({"claim": c.split(), "evidence": e.split(), "label": label}) + "\n"
                            for c, e, label in rows), encoding="utf-8")


def test_the_rule_votes_by_overlap_bucket(tmp_path, monkeypatch, capsys):
    script = _script()
    _pairs(tmp_path / "train.jsonl", [("a b", "a b", "True"), ("a b", "a b", "True"),
                                      ("a b", "x y", "False"), ("c d", "z w", "False"),
                                      ("e f", "q r", "False")])
    _pairs(tmp_path / "test.jsonl", [("g h", "g h", "True"), ("g h", "k l", "False"), ("m n", "m", "True")])
    monkeypatch.setattr(script, "get", lambda name: tmp_path)
    assert script.main() == 0
    # full overlap -> True, none -> False, a half-covered claim (no training bucket) -> the majority
    out = capsys.readouterr().out
    assert "overlap rule: 66.67% test accuracy; majority class (False): 33.33%" in out, out


def test_a_corpus_that_cannot_be_fetched_is_one_line(monkeypatch, capsys):
    from elmo.data.fetch import PackageWithdrawn
    script = _script()

    def withdrawn(name):
        raise PackageWithdrawn("the registry has no bigbench==1.0.0")
    monkeypatch.setattr(script, "get", withdrawn)
    assert script.main() == 1
    err = capsys.readouterr().err
    assert err.strip() == "vitaminc_overlap_rule: the registry has no bigbench==1.0.0", err
