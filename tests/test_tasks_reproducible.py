"""A task run's numbers depend on its seed, files and settings only (README "Task
experiments", Resume): not on the runs beside it, nor on the process's string hash seed.

The frozen biLM's layer cache sorted its sentences by length only, ties in the order of a set
of tuples of strings, which follows ``PYTHONHASHSEED`` (random per process): the batches
changed from run to run, and with them a sentence's layers wherever batching changes the
rounding (a sentence left in a batch of one), so two runs of one experiment could differ."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from elmo.tasks.runner import normalise_config, run_experiment
from tests.conftest import side_by_side
from tests.test_tasks_runner import tiny_config, write_tiny_tasks

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


def _batches(*hash_seeds: str) -> list:
    """The batches of the child under each of ``hash_seeds``, its processes run side by side."""
    base = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = side_by_side([[sys.executable, "-c", _CHILD]] * len(hash_seeds), cwd=ROOT,
                        envs=[{**base, "PYTHONHASHSEED": seed} for seed in hash_seeds], check=True)
    return [json.loads(d.stdout.splitlines()[-1]) for d in done]


def test_the_layer_cache_batches_do_not_follow_the_hash_seed():
    first, second, third = _batches("1", "2", "3")
    assert sum(len(b) for b in first) > 8            # several batches, with ties across them
    assert second == first
    assert third == first


def _runs(cfg: dict, out: Path) -> dict:
    """(task, variant, seed) -> what a run computed (its scores, losses and learned mixes)."""
    results = run_experiment(normalise_config(cfg), out=out, log=lambda s: None)
    keep = ("test", "dev", "best_epoch", "history", "elmo")
    return {(r["task"], r["variant"], r["seed"]): {k: r.get(k) for k in keep} for r in results["runs"]}


def test_a_run_does_not_depend_on_the_variants_and_seeds_beside_it(tmp_path):
    """What --resume and --variants rely on: a run kept from an earlier process is the one
    this process would compute, whichever runs came before it."""
    folders = write_tiny_tasks(tmp_path)
    tasks = [{"task": "pos", "data_dir": str(folders["pos"])},
             {"task": "ner", "data_dir": str(folders["ner"]), "model": {"crf": True}}]
    variants = [{"name": "baseline"}, {"name": "elmo", "elmo": {}},
                {"name": "tuned", "elmo": {"finetune": True}}]
    whole = _runs(tiny_config(folders, tasks=tasks, variants=variants, seeds=[1, 2]), tmp_path / "a")
    alone = _runs(tiny_config(folders, tasks=tasks[::-1], variants=variants[::-1], seeds=[2]),
                  tmp_path / "b")
    assert len(alone) == 6 and all(alone[key] == whole[key] for key in alone)
