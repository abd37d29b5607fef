"""The demo's bundled data (``elmo/resources/demo``): read it and check it.

* ``play_sentences.txt``: tokenized sentences that contain the word "play" (any case), sampled
  from the LM corpus of ``elmo data build-corpus`` (see the folder's README for how);
* ``glove/vocab.txt`` + ``glove/vectors.npy``: the candidate words of the static neighbour
  searches, one a line, and their GloVe 6B 50d vectors (the standard vectors form, so
  :func:`elmo.data.readers.read_glove` reads it too);
* ``manifest.json``: the SHA-256 and counts of every file, and how they were built.

:func:`elmo.demo.build_data.build` writes the folder.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import List, Optional

import numpy as np

from ..data.fetch import sha256_file
from ..text_files import read_json

WORD = "play"
SENTENCES_FILE = "play_sentences.txt"
GLOVE_VOCAB_FILE = "glove/vocab.txt"
GLOVE_VECTORS_FILE = "glove/vectors.npy"
MANIFEST_FILE = "manifest.json"
DATA_FILES = (SENTENCES_FILE, GLOVE_VOCAB_FILE, GLOVE_VECTORS_FILE)


def data_folder() -> Path:
    return Path(str(resources.files("elmo") / "resources" / "demo"))


def read_lines(path: Path) -> List[str]:
    return [ln for ln in path.read_text(encoding="utf-8").split("\n") if ln]


@dataclass
class DemoData:
    sentences: List[List[str]]
    static_words: List[str]
    glove_vectors: np.ndarray          # (len(static_words), 50) float32
    manifest: dict

    @property
    def description(self) -> str:
        m = self.manifest
        return (f'the {m["occurrences"]:,} occurrences of "{WORD}" in {m["sentences"]:,} sentences\n'
                f'   sampled from the LM training corpus (how: elmo/resources/demo/README.md)')


def read_manifest(folder: Path) -> dict:
    """The demo data's manifest; a file that cannot be read or holds no JSON object is a
    ValueError naming it."""
    path = folder / MANIFEST_FILE
    manifest = read_json(path, expected="the demo data's manifest")
    if not isinstance(manifest, dict):
        raise ValueError(f"{path}: not the demo data's manifest (a JSON object is needed, got "
                         f"{type(manifest).__name__})")
    return manifest


def load(folder: Optional[Path] = None) -> DemoData:
    folder = Path(folder) if folder is not None else data_folder()
    manifest = read_manifest(folder)
    sentences = [ln.split() for ln in read_lines(folder / SENTENCES_FILE)]
    words = read_lines(folder / GLOVE_VOCAB_FILE)
    vectors = np.load(folder / GLOVE_VECTORS_FILE)
    return DemoData(sentences, words, vectors, manifest)


def check(folder: Optional[Path] = None) -> List[str]:
    """Every inconsistency of the bundled data, as messages (empty when all is well)."""
    folder = Path(folder) if folder is not None else data_folder()
    problems = []
    manifest = read_manifest(folder)
    for name in DATA_FILES:
        want = manifest["sha256"].get(name)
        if want != sha256_file(folder / name):
            problems.append(f"{name}: SHA-256 differs from the manifest")
    data = load(folder)
    if len(data.sentences) != manifest["sentences"]:
        problems.append(f"{SENTENCES_FILE}: {len(data.sentences)} sentences, manifest says {manifest['sentences']}")
    occurrences = sum(t.lower() == WORD for s in data.sentences for t in s)
    if occurrences != manifest["occurrences"]:
        problems.append(f"{SENTENCES_FILE}: {occurrences} occurrences of {WORD!r}, manifest says "
                        f"{manifest['occurrences']}")
    missing = [i for i, s in enumerate(data.sentences) if WORD not in (t.lower() for t in s)]
    if missing:
        problems.append(f"{SENTENCES_FILE}: {len(missing)} sentences without {WORD!r} (first: line {missing[0] + 1})")
    if len(set(map(tuple, data.sentences))) != len(data.sentences):
        problems.append(f"{SENTENCES_FILE}: repeated sentences")
    if len(set(data.static_words)) != len(data.static_words):
        problems.append(f"{GLOVE_VOCAB_FILE}: repeated words")
    if WORD not in data.static_words:
        problems.append(f"{GLOVE_VOCAB_FILE}: {WORD!r} is missing")
    if data.glove_vectors.shape != (len(data.static_words), manifest["glove_dim"]):
        problems.append(f"{GLOVE_VECTORS_FILE}: shape {data.glove_vectors.shape}, expected "
                        f"({len(data.static_words)}, {manifest['glove_dim']})")
    if data.glove_vectors.dtype != np.float32 or not np.isfinite(data.glove_vectors).all():
        problems.append(f"{GLOVE_VECTORS_FILE}: not finite float32")
    return problems
