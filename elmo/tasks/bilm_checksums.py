"""Which biLM produced a task result: the SHA-256 of the files that decide its outputs.

A biLM folder is identified by one SHA-256 over its option, weight and vocabulary files: the
SHA-256 of the lines ``<file's SHA-256>  <file name>``, sorted by name, which is what::

    cd elmo/resources/default && sha256sum options.json vocab.txt weights.hdf5 | sha256sum

prints. An ELMoForManyLangs folder counts its ``.pkl`` weights and its ``.dic`` dictionaries
(which decide the row each character and word reads). ``metadata.json``, the model card and
the softmax (which ELMo features never use) do not count. A ``random:SPEC`` control (random
weights of a fixed seed in SPEC's architecture) counts SPEC's option files only, so it keeps
its identity when SPEC is retrained in the same shape.

``elmo experiment`` records this SHA-256 with every ELMo run (``bilm_sha256``) and in
``results.json``'s ``bilms`` block, and hashes it into the run's fingerprint, so ``--resume``
never keeps runs computed with other weights.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Dict, Optional

#: File suffixes of the option and weight files (options.json + HDF5, config.json +
#: safetensors, and ELMoForManyLangs' torch state dicts).
OPTION_SUFFIXES = (".json",)
WEIGHT_SUFFIXES = (".hdf5", ".safetensors", ".pkl")
#: ELMoForManyLangs' dictionaries: which embedding row each character (and word) reads.
DICTIONARY_SUFFIXES = (".dic",)


def _is_vocabulary(path: Path) -> bool:
    """The word vocabulary (``vocab.txt``), which ELMo's character input never reads."""
    return path.name == "vocab.txt"


def bilm_files(folder: Path, vocabulary: bool = False) -> Dict[str, str]:
    """file name -> SHA-256 of the files in ``folder`` that decide a biLM's outputs: its
    options, weights and dictionaries (never ``metadata.json`` or the softmax), and with
    ``vocabulary`` also its word vocabulary."""
    from .files import file_sha256
    out = {}
    for path in sorted(Path(folder).iterdir()):
        if not path.is_file() or path.name == "metadata.json" or path.name.startswith("softmax"):
            continue
        if path.suffix in OPTION_SUFFIXES + WEIGHT_SUFFIXES + DICTIONARY_SUFFIXES or (
                vocabulary and _is_vocabulary(path)):
            out[path.name] = file_sha256(path)
    return out


def combined_sha256(files: Dict[str, str]) -> str:
    """One SHA-256 for several files: that of their ``sha256sum`` lines sorted by name."""
    lines = "".join(f"{sha}  {name}\n" for name, sha in sorted(files.items()))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def counted_files(spec: str) -> Optional[Dict[str, str]]:
    """file name -> SHA-256 of the files that identify a biLM spec: options, weights and
    vocabulary; for ``random:SPEC`` SPEC's options only. None when there is no such folder now
    (a path not there yet, or a published model that cannot be fetched)."""
    from .bilms import RANDOM_PREFIX, resolve_bilm
    try:
        folder = resolve_bilm(spec)
    except (OSError, ValueError, RuntimeError):        # RuntimeError: the hub's DownloadError
        return None
    if not folder.is_dir():
        return None
    if spec.startswith(RANDOM_PREFIX):
        return {name: sha for name, sha in bilm_files(folder).items()
                if Path(name).suffix in OPTION_SUFFIXES}
    return bilm_files(folder, vocabulary=True)


def what_counts(spec: str) -> str:
    """The files a spec's SHA-256 covers, in words (for log lines and reports)."""
    from .bilms import RANDOM_PREFIX
    return "options" if spec.startswith(RANDOM_PREFIX) else "weights, options and vocabulary"


class BiLMChecksums:
    """The SHA-256 of each biLM spec an experiment uses (see the module docstring), computed
    once per spec: one instance lives as long as one experiment, so a model folder replaced
    between experiments is hashed again."""

    def __init__(self) -> None:
        self._files: Dict[str, Optional[Dict[str, str]]] = {}

    def files(self, spec: str) -> Optional[Dict[str, str]]:
        """file name -> SHA-256 of the files counted for ``spec`` (None: no folder)."""
        if spec not in self._files:
            self._files[spec] = counted_files(spec)
        return self._files[spec]

    def __call__(self, spec: str) -> Optional[str]:
        """The biLM's one SHA-256 (None when its folder does not exist)."""
        files = self.files(spec)
        return None if files is None else combined_sha256(files)
