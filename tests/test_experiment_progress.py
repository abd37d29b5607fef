"""``elmo experiment`` shows its long steps on a terminal: the biLM layer cache fill, each
epoch's batches, dev and test scoring. A first run on a few thousand sentences spent minutes
with no line on stderr between "seed 1" and "epoch 1"."""
from __future__ import annotations

import io
import json
import re
import sys

from elmo.cli import main

WORDS = "the a cat dog sat ran on mat big small".split()


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _tagger_config(tmp_path) -> str:
    """A README-style tagger config on tiny CoNLL files, with the fixture biLM: its default
    variants are the baseline and ELMo at the input (a frozen biLM: the layer cache fills)."""
    for split, n in (("train", 12), ("dev", 4), ("test", 4)):
        blocks = []
        for i in range(n):
            words = [WORDS[(i * 3 + k) % len(WORDS)] for k in range(2 + i % 4)]
            blocks.append("\n".join(f"{w}\t{'B-animal' if w in ('cat', 'dog') else 'O'}" for w in words))
        (tmp_path / f"{split}.conll").write_text("\n\n".join(blocks) + "\n")
    config = {"name": "bars", "seeds": 1, "threads": 1, "bilm": "fixture",
              "embeddings": {"random_dim": 8}, "train": {"epochs": 1, "batch_size": 4},
              "model": {"hidden": 8},
              "tasks": [{"task": "tagging", "name": "tags", "metric": "span_f1",
                         "format": {"type": "conll", "word": 0, "label": -1},
                         "files": {s: f"{s}.conll" for s in ("train", "dev", "test")}}]}
    path = tmp_path / "tagger.json"
    path.write_text(json.dumps(config))
    return str(path)


#: tqdm's opening draw of each bar ("desc:   0%|"), named as the step it counts.
BARS = ("biLM layers", "epoch 1", "dev", "test")


def _bars_drawn(text: str) -> list:
    return [name for name in BARS if re.search(rf"(^|\r){re.escape(name)}: +\d+%\|", text)]


def test_experiment_draws_its_bars_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    config = _tagger_config(tmp_path)
    assert main(["experiment", config, "--out", str(tmp_path / "pipe")]) == 0
    err = capsys.readouterr().err
    assert "tags / elmo / seed 1" in err and "biLM layers cached" in err   # (the log lines stay)
    assert "\r" not in err and not _bars_drawn(err)                         # (capsys: no terminal)

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["experiment", config, "--out", str(tmp_path / "terminal")]) == 0
    assert _bars_drawn(terminal.getvalue()) == list(BARS)

    quiet = Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert main(["experiment", config, "--out", str(tmp_path / "quiet"), "--quiet"]) == 0
    assert "\r" not in quiet.getvalue() and not _bars_drawn(quiet.getvalue())
