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


def _elmo_imports(tree: ast.AST, path: Path):
    """(line, module, names) of each import of an elmo module in ``tree``; a relative import is
    resolved against ``path``'s package. ``names`` are the names imported from it (module = the
    imported module itself for a plain ``import elmo.x``)."""
    package = list(path.relative_to(ROOT).parent.parts)   # (an __init__.py's too: its folder)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            if module == "elmo" or module.startswith("elmo."):
                yield node.lineno, module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("elmo."):
                    yield node.lineno, alias.name, []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_a_private_name_of_another():
    """A module of elmo imports only the public names of another (``_one_line`` from elmo.cli
    was a private helper that three packages relied on): what another module needs is made
    public and documented, or moved where it belongs. A module's own names are its business."""
    private = []
    for path in sorted((ROOT / "elmo").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, module, names in _elmo_imports(tree, path):
            wanted = [n for n in names if _private(n)] + [p for p in module.split(".") if _private(p)]
            if wanted:
                private.append(f"{path.relative_to(ROOT)}:{line} {module}: {', '.join(wanted)}")
    assert not private, private


def test_docstrings_hold_no_control_characters():
    """A docstring that names ``\\r`` or ``\\n`` with one backslash holds the character itself
    (corpus.file_lines' said "a lone" followed by a carriage return): write the backslash twice,
    or make the docstring raw."""
    control = {"\r", "\t", "\x00", "\x0b", "\x0c", "\x85", "\u2028"}
    found = []
    for path in sorted((ROOT / "elmo").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False) or ""
                bad = sorted(repr(c) for c in control if c in doc)
                if bad:
                    found.append(f"{path.relative_to(ROOT)}: {getattr(node, 'name', 'module')}: {bad}")
    assert found == []
