"""``elmo --help``, ``elmo --version`` and ``elmo COMMAND --help`` import no torch, numpy,
h5py or other heavy library: the help of every command is made from the settings' dataclasses
(:mod:`elmo.jobconfig`), whose modules keep those imports inside the functions that run a job.
Through ``elmo.training.config`` (its checkpoints) and ``elmo.embedding`` (its embedder) a
command's help loaded torch, 1 to 2.5 s before a line was printed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Libraries that no help or version line needs (each one, or what it pulls in, is slow to load).
HEAVY = ("torch", "numpy", "h5py", "spacy", "matplotlib", "safetensors", "scipy", "sklearn", "tqdm")

# In a fresh interpreter: each command line in turn, then which of HEAVY are loaded by then.
_CHILD = """
import argparse, contextlib, io, json, sys
from elmo.cli import build_parser, main

heavy = json.loads(sys.argv[1])


def run(argv):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
        except SystemExit:
            pass
    return sorted(m for m in heavy if m in sys.modules)


def commands(parser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield path + (name,)
                yield from commands(sub, path + (name,))


loaded = {"--help": run(["--help"]), "--version": run(["--version"])}
for path in commands(build_parser()):
    loaded[" ".join(path) + " --help"] = run([*path, "--help"])
print(json.dumps(loaded))
"""


def test_help_and_version_import_no_heavy_library():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(HEAVY)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    # every command is there (its subcommands too), so none is left unchecked
    assert {"train --help", "embed --help", "analyze --help", "models list --help"} <= set(loaded)
    assert {argv: modules for argv, modules in loaded.items() if modules} == {}
