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
from importlib import resources
from pathlib import Path

from .chars import batch_to_ids
from .config import CharCNNConfig, ConfigError, ElmoOptions, LSTMConfig
from .modules import BiLM, CharCNN, Elmo, ScalarMix
from .vocab import Vocabulary
from .embedding import Embedder, embed_file, sentence_vectors
from .weights import (WeightFileError, load_original, load_pretrained, save_original,
                      save_pretrained)
from .allennlp_compat import ElmoEmbedder, ElmoTokenEmbedder
from .runtime import guard_forked_children

guard_forked_children()

__version__ = "0.1.0"

#: Models that ship inside the package, by name: ``default``, a small biLM trained here on
#: 10.7M words of English (its model card: ``elmo/resources/default/MODEL_CARD.md``), and
#: ``fixture``, the tiny conformance model with untrained test weights.
BUNDLED_MODELS = ("default", "fixture")
#: The model used when none is named.
DEFAULT_MODEL = "default"


def _resolve(name_or_path: str | Path):
    """A bundled name or local path as a folder; a published model's name or a URL as the
    verified local files of :func:`elmo.hub.resolve` (downloaded into ``$ELMO_HOME`` once)."""
    from .hub import registry
    from .hub.download import is_url
    from .hub.resolve import Local, resolve

    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"a model is named by a string or a path, got {type(name_or_path).__name__}: "
                        f"{name_or_path!r}")
    if isinstance(name_or_path, str) and not name_or_path.strip():
        # Path("") is the current folder, which would be loaded if it held a model
        raise WeightFileError(f"the model name is empty ({name_or_path!r}); bundled: "
                              f"{', '.join(BUNDLED_MODELS)}; or give a folder, e.g. '.'")
    if isinstance(name_or_path, str) and name_or_path in BUNDLED_MODELS:
        if Path(name_or_path).exists():   # the bundled model wins, as documented: say so
            _warn_name_and_folder(name_or_path, bundled=True)
        return Local(folder=Path(str(resources.files("elmo") / "resources" / name_or_path)))
    if is_url(name_or_path):
        return resolve(name_or_path)
    if isinstance(name_or_path, str) and name_or_path in registry.MODELS:
        if not Path(name_or_path).exists():
            return resolve(name_or_path)
        # a local folder of that name wins over a published model, as documented: say so
        _warn_name_and_folder(name_or_path, bundled=False)
    folder = Path(name_or_path)
    if isinstance(name_or_path, str) and not folder.exists() and len(folder.parts) == 1:
        # a bare word that names nothing: most likely a mistyped model name, so say which exist
        import difflib
        close = difflib.get_close_matches(name_or_path, list(BUNDLED_MODELS) + list(registry.MODELS), n=3)
        hint = f"did you mean {', '.join(map(repr, close))}? " if close else ""
        raise WeightFileError(f"{name_or_path!r} is neither a model folder nor a model's name; {hint}"
                              f"bundled: {', '.join(BUNDLED_MODELS)}; published: `elmo models list`")
    return Local(folder=folder)


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
    warnings.warn(text, ModelNameWarning, stacklevel=4)   # (the caller of from_pretrained)


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
    from .weights import requested_dtype

    stateful = require_switch("stateful", stateful)
    if device is not None:
        device = resolve_device(device, None, "device")
    requested_dtype(dtype)
    local = _resolve(name_or_path)
    if local.folder is None:
        return load_original(local.options, local.weights, stateful=stateful, device=device, dtype=dtype)
    return load_pretrained(local.folder, stateful=stateful, device=device, dtype=dtype)


__all__ = ["BiLM", "CharCNN", "CharCNNConfig", "ConfigError", "Elmo", "ElmoEmbedder", "ElmoOptions",
           "ElmoTokenEmbedder", "LSTMConfig", "ModelNameWarning",
           "Embedder", "ScalarMix", "Vocabulary", "WeightFileError", "batch_to_ids", "embed_file", "from_pretrained",
           "load_original", "load_pretrained", "model_path", "save_original", "save_pretrained", "sentence_vectors"]
