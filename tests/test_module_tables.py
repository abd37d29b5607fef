"""The module tables list the modules there are: docs/ARCHITECTURE.md every top-level module
of the package and of ``elmo/modules/``, ``elmo/tasks/__init__.py`` every module of the tasks
package; neither names a module that no longer exists."""
from __future__ import annotations

import re
from pathlib import Path

import elmo.tasks

ROOT = Path(__file__).parent.parent
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def _modules(folder: Path) -> set:
    return {p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__")}


def test_architecture_lists_every_top_level_and_modules_module_and_no_other():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    named = set(re.findall(r"`(elmo/[\w/]+\.py)`", text))
    for folder in (ROOT / "elmo", ROOT / "elmo" / "modules"):
        rel = folder.relative_to(ROOT).as_posix()
        missing = {f"{rel}/{m}.py" for m in _modules(folder)} - named
        assert not missing, f"docs/ARCHITECTURE.md lists no row for {sorted(missing)}"
    gone = sorted(p for p in named if not (ROOT / p).is_file())
    assert not gone, f"docs/ARCHITECTURE.md names modules that do not exist: {gone}"


def test_the_tasks_table_lists_every_tasks_module_and_no_other():
    named = set(re.findall(r"^\| ``(\w+)`` \|", elmo.tasks.__doc__ or "", re.M))
    there = _modules(Path(elmo.tasks.__file__).parent)
    assert not there - named, f"elmo/tasks/__init__.py's table lacks {sorted(there - named)}"
    assert not named - there, f"elmo/tasks/__init__.py's table names {sorted(named - there)}, not modules"
