"""Inputs that reached code with a value of the wrong type (found by type checking)."""
from __future__ import annotations

import json

from elmo.training.curves import read_log


def test_a_log_record_whose_event_is_a_list_is_kept_not_a_crash(tmp_path):
    """A record with a training figure and an ``event`` that is no string (a list) made
    read_log fail with "unhashable type: 'list'"; it is no train or eval record, so it is
    kept like one of an unknown event and never drawn."""
    log = tmp_path / "log.jsonl"
    records = [{"event": ["train"], "step": 1, "train_ppl": 3.0},
               {"event": "train", "step": 2, "tokens": 80, "train_ppl": 2.5}]
    log.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert read_log(log) == records
