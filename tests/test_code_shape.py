"""Shape rules that keep the code readable as a model to copy (issue #17)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_functions_are_short():
    """No function in elmo/ is longer than 100 lines: a long loop is split into the named steps
    of a recipe object (see elmo.training.trainer.TrainingRun)."""
    too_long = []
    for path in sorted((ROOT / "elmo").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 100:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    assert not too_long, too_long


def test_torch_threads_are_set_in_one_place():
    """elmo.runtime is the only library module that calls torch.set_num_threads."""
    callers = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "elmo").rglob("*.py"))
               if "set_num_threads" in p.read_text(encoding="utf-8")]
    assert callers == ["elmo/runtime.py"], callers
