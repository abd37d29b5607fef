"""ELMo: deep contextualised word representations (Peters et al., 2018) in PyTorch.

    import elmo
    bilm = elmo.from_pretrained("default")             # a bundled or published name, a folder or a URL
    ids = elmo.batch_to_ids([["The", "bank", "closed", "."]])
    layers = bilm(ids)["activations"]                    # L + 1 tensors (B, T, 2P)

    mixer = elmo.Elmo(module=bilm, num_output_representations=1)
    vectors = mixer(ids)["elmo_representations"][0]     # (B, T, 2P)
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from .fork_guard import guard_forked_children
from .lazy_names import lazy_names

if TYPE_CHECKING:
    from types import FrameType

    from .allennlp_compat import ElmoEmbedder, ElmoTokenEmbedder
    from .chars import batch_to_ids
    from .config import CharCNNConfig, ConfigError, ElmoOptions, LSTMConfig
    from .embedding import Embedder, embed_file, sentence_vectors
    from .modules import BiLM, CharCNN, Elmo, ScalarMix
    from .vocab import Vocabulary
    from .weights import WeightFileError, load_original, load_pretrained, save_original, save_pretrained

guard_forked_children()

#: The package's names that live in its modules, by the module they load from when first
#: used. ``import elmo`` imports no torch: `python -m elmo` imports the package before its
#: ``__main__``, and a Ctrl-C while torch loaded was Python's traceback of an import there.
_LAZY = {
    **dict.fromkeys(["ElmoEmbedder", "ElmoTokenEmbedder"], "allennlp_compat"),
    "batch_to_ids": "chars",
    **dict.fromkeys(["CharCNNConfig", "ConfigError", "ElmoOptions", "LSTMConfig"], "config"),
    **dict.fromkeys(["Embedder", "embed_file", "sentence_vectors"], "embedding"),
    **dict.fromkeys(["BiLM", "CharCNN", "Elmo", "ScalarMix"], "modules"),
    "Vocabulary": "vocab",
    **dict.fromkeys(["WeightFileError", "load_original", "load_pretrained", "save_original", "save_pretrained"],
                    "weights"),
}


# (elmo.NAME of _LAZY loaded the first time; a submodule, elmo.weights say, imported as
# ``import elmo`` did before it loaded lazily). Type checkers see the names declared under
# TYPE_CHECKING above and no __getattr__: one would make every other name, a misspelt one
# too, Any in a user's code instead of an error.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)


__version__ = "0.1.0"

#: Models that ship inside the package, by name: ``default``, a small biLM trained here on
#: 10.7M words of English (its model card: ``elmo/resources/default/MODEL_CARD.md``), and
#: ``fixture``, the tiny conformance model with untrained test weights.
BUNDLED_MODELS = ("default", "fixture")
#: The model used when none is named.
DEFAULT_MODEL = "default"


@dataclass(frozen=True)
class ModelName:
    """What a model name names (:func:`which_model`), decided without loading or fetching.

    ``kind`` is ``"empty"`` (a blank string), ``"bundled"`` (a model inside the package),
    ``"url"``, ``"published"`` (a published model's name, no local path of that name),
    ``"local"`` (a path, or a bare name that is one) or ``"unknown"`` (a bare word that names
    nothing). ``path``: the bundled model's folder or the local path, else None. ``passed_over``:
    the local path of a bare name that is also a bundled model's name (which wins), or the
    local path taken over a published model of that name; None where a name is not both."""
    name: str | Path
    kind: str
    path: Optional[Path] = None
    passed_over: Optional[Path] = None

    @property
    def folder(self) -> Optional[Path]:
        """The local folder this names (a bundled model's or an existing local one), else None."""
        if self.kind == "bundled" or (self.kind == "local" and self.path is not None and self.path.is_dir()):
            return self.path
        return None

    def warn(self) -> None:
        """The :class:`ModelNameWarning` where a bare name is both a model's and a local path's."""
        if self.passed_over is not None:
            _warn_name_and_folder(str(self.name), bundled=self.kind == "bundled", folder=self.passed_over)


def which_model(name_or_path: str | Path, *, local: Optional[Path] = None, warn: bool = True) -> ModelName:
    """What ``name_or_path`` names, in the documented order, without loading or fetching: a
    bundled model's name first, then a URL, then a local path (a :class:`~pathlib.Path` or a
    string with a separator always is one; a bare name is one where it exists), then a
    published model's name. ``local`` is where a bare name's local path is (default: the name
    in the working folder; an experiment config's: beside the config). Where a bare name is
    both a model's and a local path's, a :class:`ModelNameWarning` says which one wins (once;
    ``warn=False``: not yet, :meth:`ModelName.warn` does).

    Every place that reads a model name decides through this, so the order and the warning
    cannot differ between loading, ``elmo info``/``convert``, analysis and experiments."""
    from .hub import registry
    from .hub.urls import is_url

    if not isinstance(name_or_path, (str, os.PathLike)):
        from .checks import shown
        raise TypeError(f"a model is named by a string or a path, got {type(name_or_path).__name__}: "
                        f"{shown(name_or_path)}")
    bare = isinstance(name_or_path, str)
    if bare and not str(name_or_path).strip():
        # (Path("") is the working folder, which would be loaded if it held a model)
        return ModelName(name_or_path, "empty")
    path = Path(name_or_path)
    here = path if local is None else Path(local)
    if bare and name_or_path in BUNDLED_MODELS:
        found = ModelName(name_or_path, "bundled", Path(str(resources.files("elmo") / "resources" / name_or_path)),
                          passed_over=here if here.exists() else None)
    elif is_url(name_or_path):
        found = ModelName(name_or_path, "url")
    elif bare and name_or_path in registry.MODELS:
        # a local path of that name wins over the published model
        found = (ModelName(name_or_path, "local", here, passed_over=here) if here.exists()
                 else ModelName(name_or_path, "published"))
    elif bare and not here.exists() and len(path.parts) == 1:
        found = ModelName(name_or_path, "unknown", here)
    else:
        found = ModelName(name_or_path, "local", here)
    if warn:
        found.warn()
    return found


def _resolve(name_or_path: str | Path):
    """A bundled name or local path as a folder; a published model's name or a URL as the
    verified local files of :func:`elmo.hub.resolve` (downloaded into ``$ELMO_HOME`` once)."""
    from .hub import registry
    from .hub.resolve import Local, resolve
    from .weights import WeightFileError

    found = which_model(name_or_path)
    if found.kind == "empty":
        raise WeightFileError(f"the model name is empty ({name_or_path!r}); bundled: "
                              f"{', '.join(BUNDLED_MODELS)}; or give a folder, e.g. '.'")
    if found.kind in ("url", "published"):
        return resolve(name_or_path)
    if found.kind == "unknown":
        # a bare word that names nothing: most likely a mistyped model name, so say which exist
        close = registry.close_names(str(name_or_path), list(BUNDLED_MODELS) + list(registry.MODELS))
        hint = f"did you mean {', '.join(map(repr, close))}? " if close else ""
        raise WeightFileError(f"{name_or_path!r} is neither a model folder nor a model's name; {hint}"
                              f"bundled: {', '.join(BUNDLED_MODELS)}; published: `elmo models list`")
    return Local(folder=found.path)


class ModelNameWarning(UserWarning):
    """A bare model name that is also a file or folder in the working folder (see
    :func:`from_pretrained`): which one was loaded, and how to name the other."""


#: (name, folder) pairs already warned about: once per process, not at every load.
_NAME_WARNED: set = set()


def _warn_name_and_folder(name: str, *, bundled: bool, folder: Path | None = None) -> None:
    """Warn (once per name and folder) that bare ``name`` is both a bundled (``bundled``) or
    published model's name and a local path: ``folder``, by default ``name`` in the working
    folder (an experiment config's: beside the config).

    Which one loads follows the documented order (a bundled name first, then a local path,
    then a published name); until this warning the other one was passed over in silence."""
    import warnings
    here = Path(folder if folder is not None else name).resolve()
    if (name, here) in _NAME_WARNED:
        return
    _NAME_WARNED.add((name, here))
    if bundled:
        text = (f"{name!r} names both the bundled model {name!r} and the local {here}: loading the "
                f"bundled model; to load the local one, name it with a path: './{name}'")
    else:
        from .hub import registry
        urls = registry.get(name).urls
        text = (f"{name!r} names both the published model {name!r} and the local {here}: loading the "
                f"local one; to load the published model, give its URL "
                f"({urls.get('options') or urls.get('archive')}) or run elsewhere")
    # shown at the first caller outside the package (from_pretrained's, a config loader's ...)
    level = 2
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == __name__:
        level, frame = level + 1, frame.f_back
    warnings.warn(text, ModelNameWarning, stacklevel=level)


def model_path(name_or_path: str | Path) -> Path:
    """The folder of a model: a bundled name, a local path as given, or a published model's
    name or a URL (downloaded and verified; an options/weights pair gets a folder that links
    to the cached files)."""
    from .hub.resolve import as_folder

    return as_folder(_resolve(name_or_path), str(name_or_path))


def from_pretrained(name_or_path: str | Path, *, stateful: bool = False, device=None, dtype=None) -> BiLM:
    """Load a model: a bundled name (``"default"``, ``"fixture"``), a model folder (native or
    original layout), a published model's name (``elmo models list``: ``"small"``,
    ``"original"``, ``"manylangs-de"``, ...) or an http(s) URL (an ``...options.json`` with its
    ``...weights.hdf5`` beside it, a ``...weights.hdf5``, or a model archive). A bare name
    is a bundled model first, then a file or folder of the working folder, then a published
    model; where a bare name is both a model's and a local path's, a :class:`ModelNameWarning`
    says which loaded (once). A path with a separator (``"./default"``) or a :class:`~pathlib.Path`
    is always the local one. The model gets
    the dtype it was saved in (:func:`save_pretrained` keeps a bfloat16 model's; a float16 one
    loads as float32); ``dtype=`` (``torch.float32``, ``"bfloat16"`` ...) sets another.

    ``stateful``, ``device`` and ``dtype`` are checked first: a device this machine does not
    have was refused only after a published model had been downloaded."""
    from .checks import require_switch
    from .runtime import resolve_device
    from .weights import load_original, load_pretrained, requested_dtype

    stateful = require_switch("stateful", stateful)
    if device is not None:
        device = resolve_device(device, None, "device")
    requested_dtype(dtype)
    local = _resolve(name_or_path)
    if local.folder is None:
        return load_original(local.options, local.weights, stateful=stateful, device=device, dtype=dtype)
    return load_pretrained(local.folder, stateful=stateful, device=device, dtype=dtype)


__all__ = ["BiLM", "CharCNN", "CharCNNConfig", "ConfigError", "Elmo", "ElmoEmbedder", "ElmoOptions",
           "ElmoTokenEmbedder", "LSTMConfig", "ModelName", "ModelNameWarning",
           "Embedder", "ScalarMix", "Vocabulary", "WeightFileError", "batch_to_ids", "embed_file", "from_pretrained",
           "load_original", "load_pretrained", "model_path", "save_original", "save_pretrained", "sentence_vectors",
           "which_model"]
