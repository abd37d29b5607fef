"""ELMo: deep contextualised word representations (Peters et al., 2018) in PyTorch.

    import elmo
    bilm = elmo.from_pretrained("default")             # a bundled model name, or a model folder
    ids = elmo.batch_to_ids([["The", "bank", "closed", "."]])
    layers = bilm(ids)["activations"]                    # L + 1 tensors (B, T, 2P)

    mixer = elmo.Elmo(module=bilm, num_output_representations=1)
    vectors = mixer(ids)["elmo_representations"][0]     # (B, T, 2P)
"""
from __future__ import annotations

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

__version__ = "0.1.0"

#: Models that ship inside the package, by name: ``default``, a small biLM trained here on
#: 10.7M words of English (its model card: ``elmo/resources/default/MODEL_CARD.md``), and
#: ``fixture``, the tiny conformance model with untrained test weights.
BUNDLED_MODELS = ("default", "fixture")
#: The model used when none is named.
DEFAULT_MODEL = "default"


def model_path(name_or_path: str | Path) -> Path:
    """The folder of a bundled model name, or the given path itself."""
    if isinstance(name_or_path, str) and name_or_path in BUNDLED_MODELS:
        return Path(str(resources.files("elmo") / "resources" / name_or_path))
    return Path(name_or_path)


def from_pretrained(name_or_path: str | Path, *, stateful: bool = False, device=None) -> BiLM:
    """Load a bundled model by name (``"default"``, ``"fixture"``) or a model folder (native or
    original layout)."""
    return load_pretrained(model_path(name_or_path), stateful=stateful, device=device)


__all__ = ["BiLM", "CharCNN", "CharCNNConfig", "ConfigError", "Elmo", "ElmoEmbedder", "ElmoOptions",
           "ElmoTokenEmbedder", "LSTMConfig",
           "Embedder", "ScalarMix", "Vocabulary", "WeightFileError", "batch_to_ids", "embed_file", "from_pretrained",
           "load_original", "load_pretrained", "model_path", "save_original", "save_pretrained", "sentence_vectors"]
