"""Names of a package loaded from their modules when first used (PEP 562), so that importing
the package (``import elmo``; ``elmo embed --help``, which reads :mod:`elmo.embedding.config`)
imports no torch. Only importlib is imported here."""
from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Callable, Dict, List, Mapping, Tuple


def lazy_names(package: str, namespace: Dict[str, Any],
               names: Mapping[str, str]) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of package ``package`` (whose globals
    are ``namespace``): ``package.NAME`` of ``names`` ({name: its module, relative}) is loaded
    from that module the first time (then kept in ``namespace``); another name that is a
    submodule (``elmo.weights``) is imported, as an eager ``__init__`` had it imported."""
    def __getattr__(name: str) -> Any:
        if name in names:
            value = getattr(importlib.import_module(f"{package}.{names[name]}"), name)
            namespace[name] = value
            return value
        # (a dotted name is no attribute: find_spec imported "elmo.a" for "a.b" and raised
        # ModuleNotFoundError, out of hasattr too, and "modules.bilm" gave that module)
        if name.isidentifier() and not name.startswith("__") and \
                importlib.util.find_spec(f"{package}.{name}") is not None:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> List[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
