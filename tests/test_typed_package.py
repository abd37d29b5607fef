"""A user's type checker sees elmo's types (PEP 561): the package ships ``elmo/py.typed``, and
the names that ``elmo``, ``elmo.embedding`` and ``elmo.tasks`` load lazily (elmo.lazy_names)
are declared for type checkers under ``TYPE_CHECKING``. Without the marker mypy skipped the
package ("missing library stubs or py.typed marker") and every elmo name was Any in a user's
code; a module ``__getattr__`` seen by the checker made every undeclared name Any too."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The packages whose names load lazily, with their source files.
LAZY_PACKAGES = {"elmo": "elmo/__init__.py", "elmo.embedding": "elmo/embedding/__init__.py",
                 "elmo.tasks": "elmo/tasks/__init__.py"}

# Used as documented; assert_type fails where a name is Any, so this passing proves the types.
# Calling a module, bilm(ids), is typed as its forward: torch types nn.Module.__call__ as
# Callable[..., Any], which made every call's result Any and let any argument through.
USER_CODE = """
    from pathlib import Path
    from typing import List

    import numpy as np
    from typing_extensions import assert_type

    import elmo
    from elmo import BiLM, Elmo, ScalarMix, batch_to_ids, from_pretrained
    from elmo.embedding import Embedder, sentence_vectors
    from elmo.modules.bilm import BiLMOutput
    from elmo.modules.elmo import ElmoOutput
    from elmo.tasks import TaskModel

    bilm = from_pretrained("fixture")
    assert_type(bilm, BiLM)
    ids = batch_to_ids([["The", "bank", "closed", "."]])
    mixer = Elmo(module=bilm, num_output_representations=1)
    assert_type(mixer, Elmo)
    assert_type(ScalarMix(3), ScalarMix)
    assert_type(Embedder(bilm, batch_size=8).embed_sentences([["a", "b"]]), List[np.ndarray])
    assert_type(sentence_vectors(bilm, [["a", "b"]]), np.ndarray)
    assert_type(elmo.save_pretrained(bilm, Path("out")), Path)
    assert_type(elmo.model_path("fixture"), Path)
    tagger = TaskModel.load("models/my-ner/elmo/seed-1")
    assert_type(tagger, TaskModel)
    assert_type(tagger.predict([["Ada", "lives", "in", "Paris"]]), list)
    assert_type(bilm(ids), BiLMOutput)
    assert_type(mixer(ids), ElmoOutput)
"""

# What needs torch's own types (mypy reads all of torch for it: about 3 times as long).
USER_TORCH_CODE = """
    assert_type(ids, torch.Tensor)
    assert_type(bilm.forward(ids)["activations"], List[torch.Tensor])
    assert_type(ScalarMix(3).forward([ids, ids]), torch.Tensor)
    assert_type(bilm(ids)["activations"], List[torch.Tensor])
    assert_type(ScalarMix(3)([ids, ids]), torch.Tensor)
    assert_type(mixer(ids)["elmo_representations"][0], torch.Tensor)


    def embed(cnn: elmo.CharCNN, embedder: elmo.ElmoTokenEmbedder) -> None:
        assert_type(cnn(ids), torch.Tensor)
        assert_type(embedder(ids), torch.Tensor)
"""

# Each line marked "# error" must be reported, and no other: an Any would let it through.
MISUSED = """
    import elmo
    from elmo import ScalarMix, batch_to_ids
    from elmo.embedding import Embedder

    bilm = elmo.from_pretrained("fixture")
    ScalarMix("three")  # error
    Embedder(bilm, batch_size="8")  # error
    elmo.load_pretrained("fixture", stateful="yes")  # error
    elmo.Elmoo(module=bilm)  # error
    from elmo.embedding import Embeder  # error
    ids = batch_to_ids([["a"]])
    bilm(ids, keep_boundaries=True)  # error
    elmo.Elmo(module=bilm, num_output_representations=1)(ids, return_layer=True)  # error
    ScalarMix(3)()  # error


    def embed(cnn: elmo.CharCNN, embedder: elmo.ElmoTokenEmbedder) -> None:
        cnn()  # error
        embedder(ids, ids, ids)  # error
"""

MISUSED_TORCH = """
    bilm.forward("not a tensor")  # error
    bilm("not a tensor")  # error
    ScalarMix(3)([ids], mask="no mask")  # error
    batch_to_ids([["a"]]).no_such_method()  # error
"""


def _mypy(tmp_path: Path, follow_torch: bool, **files: str) -> dict:
    """Run mypy as a user would, from ``tmp_path`` with elmo importable as an installed package
    (on PYTHONPATH: mypy applies PEP 561 there, as in site-packages) and a config of its own,
    not the repository's (which skips torch unless ``follow_torch``): {file name: (sorted
    lines of its errors, mypy's output)}."""
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text, encoding="utf-8")
    skip = "" if follow_torch else "[mypy-torch.*]\nfollow_imports = skip\n"
    (tmp_path / "mypy.ini").write_text("[mypy]\n" + skip, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"),
                           "--no-error-summary", "--show-error-codes", *(f"{n}.py" for n in files)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    errors: dict = {name: [] for name in files}
    for line in done.stdout.splitlines():
        found = re.match(r"(\w+)\.py:(\d+): error: ", line)
        if found:
            errors[found.group(1)].append(int(found.group(2)))
        else:
            assert ": note: " in line, done.stdout
    return {name: (sorted(set(lines)), done.stdout) for name, lines in errors.items()}


def _check_user_code(tmp_path: Path, follow_torch: bool, user: str, misused: str) -> None:
    """``user`` passes mypy, and mypy reports exactly the lines of ``misused`` marked ``# error``."""
    errors = _mypy(tmp_path, follow_torch, user=user, misused=misused)
    lines, out = errors["user"]
    assert lines == [], out
    marked = [n for n, line in enumerate(misused.splitlines(), 1) if line.endswith("# error")]
    lines, out = errors["misused"]
    assert lines == marked, out


def test_a_users_mypy_sees_the_types_of_the_public_names(tmp_path):
    _check_user_code(tmp_path, False, textwrap.dedent(USER_CODE), textwrap.dedent(MISUSED))


@pytest.mark.slow
def test_a_users_mypy_sees_the_tensor_types_too(tmp_path):
    user = "import torch\n" + textwrap.dedent(USER_CODE) + textwrap.dedent(USER_TORCH_CODE)
    _check_user_code(tmp_path, True, user, textwrap.dedent(MISUSED) + textwrap.dedent(MISUSED_TORCH))


def _type_checking_imports(path: Path) -> dict:
    """{name: its module, relative} of the ``from .module import name`` lines under
    ``if TYPE_CHECKING:`` at the top level of ``path``."""
    declared = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for sub in node.body:
                if isinstance(sub, ast.ImportFrom) and sub.level == 1:
                    declared.update(dict.fromkeys((a.asname or a.name for a in sub.names), sub.module))
    return declared


# In a fresh interpreter, before any lazy name is loaded: the names each package lists but has
# not loaded yet are the lazy ones.
_LAZY_NOW = """
import importlib, json, sys
out = {}
for package in json.loads(sys.argv[1]):
    module = importlib.import_module(package)
    out[package] = sorted(set(dir(module)) - set(vars(module)))
print(json.dumps(out))
"""


@pytest.mark.parametrize("package", sorted(LAZY_PACKAGES))
def test_the_lazy_names_are_the_names_declared_for_type_checkers(package):
    """The TYPE_CHECKING imports and the lazy table list the same names from the same modules
    (a name added to one only was Any, or an error, for type checkers, or missing at run
    time); so does ``__all__`` name only what a type checker sees."""
    import importlib
    declared = _type_checking_imports(ROOT / LAZY_PACKAGES[package])
    done = subprocess.run([sys.executable, "-c", _LAZY_NOW, json.dumps(sorted(LAZY_PACKAGES))],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lazy = set(json.loads(done.stdout)[package])
    assert lazy == set(declared), (f"loaded lazily, not declared: {sorted(lazy - set(declared))}; "
                                   f"declared, not loaded lazily: {sorted(set(declared) - lazy)}")
    module = importlib.import_module(package)
    for name, source in declared.items():
        origin = importlib.import_module(f"{package}.{source}")
        assert getattr(module, name) is getattr(origin, name, None), f"{name} is not {origin.__name__}'s"
    tree = ast.parse((ROOT / LAZY_PACKAGES[package]).read_text(encoding="utf-8"))
    static = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
              for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
              if isinstance(t, ast.Name)}
    static |= {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert set(module.__all__) - static - set(declared) == set()


def _declares_call_as_forward(cls: ast.ClassDef) -> bool:
    """Whether the class body has ``__call__ = forward`` under ``if TYPE_CHECKING:``."""
    return any(isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
               and any(isinstance(sub, ast.Assign) and [ast.unparse(t) for t in sub.targets] == ["__call__"]
                       and ast.unparse(sub.value) == "forward" for sub in node.body)
               for node in cls.body)


def _modules_with_a_forward() -> dict:
    """{"path:Class": its ast.ClassDef} of every torch module class under elmo/ whose body
    defines ``forward``, read from the source (no import: elmo.spacy_component would load
    spaCy). A torch module is a class with a base from ``nn.`` / ``torch.nn.`` or one of the
    package's own module classes (found by name until no more are added); an autograd
    Function's forward (a staticmethod of a ``torch.autograd.Function``) is not a module's."""
    classes = [(f"{path.relative_to(ROOT)}:{node.name}", node)
               for path in sorted((ROOT / "elmo").rglob("*.py"))
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.ClassDef)]
    names: set = set()
    while True:
        found = {node.name for _, node in classes
                 if any(re.match(r"(torch\.)?nn\.", ast.unparse(base)) or ast.unparse(base).split(".")[-1] in names
                        for base in node.bases)}
        if found <= names:
            break
        names |= found
    return {key: node for key, node in classes if node.name in names
            and any(isinstance(sub, ast.FunctionDef) and sub.name == "forward" for sub in node.body)}


def test_calling_any_module_of_the_package_is_typed_as_its_forward():
    """Every torch module class of the package with a forward of its own, public or internal,
    declares its call as that forward for type checkers only: a new one without it was Any
    when called (whatever it was passed), and a subclass's own forward would be typed as its
    parent's. (Declared, the calls showed results typed wrong: Elmo's and LanguageModel's
    ``Dict[str, object]``, whose keys their callers could not use as the tensors they are.)"""
    found = _modules_with_a_forward()
    missing = [key for key, node in found.items() if not _declares_call_as_forward(node)]
    assert not missing, f"no `if TYPE_CHECKING: __call__ = forward`: {missing}"
    changed = [key for key, node in found.items()
               if any(isinstance(sub, ast.FunctionDef) and sub.name == "__call__"
                      or isinstance(sub, ast.Assign) and "__call__" in map(ast.unparse, sub.targets)
                      for sub in node.body)]
    assert not changed, f"these change their call at run time: {changed}"
    assert {"elmo/training/model.py:LanguageModel", "elmo/tasks/features.py:ElmoFeatures"} <= set(found)


@pytest.mark.parametrize("package", ["elmo", "elmo.embedding", "elmo.modules", "elmo.tasks"])
def test_the_scan_finds_every_public_module_with_a_forward(package):
    """The source scan above finds each torch module a package exports that has a forward of
    its own (a module that inherits its forward is found as the class that defines it). (A
    module without forward, TaskModel say, is not called.)"""
    import importlib
    import inspect

    from torch import nn
    module = importlib.import_module(package)
    found = set(_modules_with_a_forward())
    checked = []
    for name in module.__all__:
        cls = getattr(module, name)
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            continue
        owner = next(c for c in cls.__mro__ if "forward" in vars(c))
        if owner is nn.Module:
            continue
        path = Path(inspect.getsourcefile(owner)).relative_to(ROOT)
        assert f"{path}:{owner.__name__}" in found, f"{owner.__name__} not found by the scan"
        checked.append(name)
    assert checked or package in ("elmo.embedding", "elmo.tasks")
