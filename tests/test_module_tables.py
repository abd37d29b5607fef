"""The module tables list the modules there are: docs/ARCHITECTURE.md every module of the
package, in every folder (``elmo/**/*.py`` but ``__init__.py`` and ``__main__.py``), each by
its path from the repository's root, and names no ``.py`` file that does not exist;
``elmo/tasks/__init__.py`` every module of the tasks package and no other."""
from __future__ import annotations

import re
from pathlib import Path

import elmo.tasks

ROOT = Path(__file__).parent.parent
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def _modules(folder: Path) -> set:
    return {p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__")}


def _package_modules() -> set:
    """Every module of the package, as ``elmo/.../name.py`` from the repository's root."""
    return {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "elmo").rglob("*.py")
        if p.stem not in ("__init__", "__main__")
    }


def test_architecture_lists_every_module_of_the_package():
    named = set(re.findall(r"`(elmo/[\w/]+\.py)`", ARCHITECTURE.read_text(encoding="utf-8")))
    missing = sorted(_package_modules() - named)
    assert not missing, f"docs/ARCHITECTURE.md names nowhere (a row of its own or its folder's): {missing}"


def test_architecture_names_no_py_file_that_does_not_exist():
    # Every `...py` is a path from the repository's root: a bare `name.py` in a folder's row
    # would be a second way to name a module, and one this test could not check.
    named = set(re.findall(r"`([\w./-]+\.py)`", ARCHITECTURE.read_text(encoding="utf-8")))
    gone = sorted(p for p in named if not (ROOT / p).is_file())
    assert not gone, f"docs/ARCHITECTURE.md names files that do not exist: {gone}"


def test_the_tasks_table_lists_every_tasks_module_and_no_other():
    named = set(re.findall(r"^\| ``(\w+)`` \|", elmo.tasks.__doc__ or "", re.M))
    there = _modules(Path(elmo.tasks.__file__).parent)
    assert not there - named, f"elmo/tasks/__init__.py's table lacks {sorted(there - named)}"
    assert not named - there, f"elmo/tasks/__init__.py's table names {sorted(named - there)}, not modules"
