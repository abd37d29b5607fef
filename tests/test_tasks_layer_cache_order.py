"""The frozen biLM's layer cache forms the same batches in every process.

Its sentences were sorted by length only, ties in the order of a set of tuples of strings,
which follows the process's string hash seed (``PYTHONHASHSEED``, random per process): the
batches changed from run to run, and with them a sentence's layers wherever batching
changes the rounding (a sentence left in a batch of one), so two runs of one experiment
could differ."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Prints the batches (as lists of sentences) that LayerCache.fill runs the biLM on.
_CHILD = """
import json, random
import elmo
from elmo.tasks.layer_cache import LayerCache
bilm = elmo.from_pretrained("fixture")
words = "the a cat dog sat ran on under mat rug".split()
rng = random.Random(0)
sentences = [[rng.choice(words) for _ in range(rng.randint(2, 4))] for _ in range(60)]
batches = []
token_ids = bilm.token_ids
def spy(chunk):
    batches.append(chunk)
    return token_ids(chunk)
bilm.token_ids = spy
LayerCache(bilm, batch_size=8).fill(sentences)
print(json.dumps(batches))
"""


def _batches(hash_seed: str) -> list:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout.splitlines()[-1])


def test_the_layer_cache_batches_do_not_follow_the_hash_seed():
    first = _batches("1")
    assert sum(len(b) for b in first) > 8            # several batches, with ties across them
    assert _batches("2") == first
    assert _batches("3") == first
