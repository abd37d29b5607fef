"""Embedding text at scale: the library behind ``elmo embed``.

Modules, one concern each:
  * :mod:`.windows`  - splitting long sentences into overlapping windows, and which window
    supplies each token;
  * :mod:`.layers`   - which output is kept (all layers, top, average, a fixed mix);
  * :mod:`.embedder` - :class:`Embedder` (sorted, bucketed batches), :func:`sentence_vectors`;
  * :mod:`.reader`   - reading and decoding the input file in segments of lines;
  * :mod:`.output`   - segment files and the merged HDF5 file in the original layout;
  * :mod:`.config`   - :class:`EmbedConfig`: every setting of an embedding job;
  * :mod:`.run`      - :func:`embed_file`: resuming, sharding across torchrun ranks, merging.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_names import lazy_names

if TYPE_CHECKING:
    from .config import EmbedConfig
    from .embedder import Embedder, PieceOutput, frequent_words, masked_pool, sentence_vectors
    from .layers import LayerSelection
    from .output import NonFiniteOutput, SettingsMismatch
    from .reader import InputError
    from .run import embed_file
    from .windows import DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP, Window, plan_windows

#: The package's names by the module they load from when first used: importing
#: :mod:`.config` (``elmo embed --help`` does, for the options) imports no torch or h5py.
_LAZY = {
    "EmbedConfig": "config",
    **dict.fromkeys(["Embedder", "PieceOutput", "frequent_words", "masked_pool", "sentence_vectors"], "embedder"),
    "LayerSelection": "layers",
    "InputError": "reader",
    **dict.fromkeys(["NonFiniteOutput", "SettingsMismatch"], "output"),
    "embed_file": "run",
    **dict.fromkeys(["DEFAULT_MAX_TOKENS", "DEFAULT_OVERLAP", "Window", "plan_windows"], "windows"),
}


# (type checkers see the TYPE_CHECKING imports above, and no __getattr__ that makes any other
# name Any)
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)

__all__ = ["DEFAULT_MAX_TOKENS", "DEFAULT_OVERLAP", "EmbedConfig", "Embedder", "InputError", "LayerSelection",
           "NonFiniteOutput", "PieceOutput", "SettingsMismatch", "Window", "embed_file", "frequent_words",
           "masked_pool", "plan_windows", "sentence_vectors"]
