"""Export a trained language model, and load it back for perplexity or further training.

A model folder holds:

* ``options.json`` + ``weights.hdf5``: the biLM in the original layout (what
  :func:`elmo.from_pretrained` and every ELMo user reads);
* ``softmax.hdf5``: the shared softmax, datasets ``softmax/W`` (V, P) and ``softmax/b`` (V,);
* ``vocab.txt`` (the original vocabulary format) and ``vocab_counts.tsv`` (word, tab, count)
  when the counts are known;
* ``metadata.json``: how the model was trained, ``adapted_on``: the texts it was
  fine-tuned on (with sha256), so an experiment can tell that it saw extra data, and
  ``files_sha256``: the SHA-256 of each file above, which every load checks
  (:mod:`elmo.folder_checksums`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import torch

from ..config import ElmoOptions
from ..vocab import Vocabulary
from ..io import atomic_write_text
from ..folder_swap import atomic_folder
from ..hdf5_writer import new_hdf5
from ..folder_checksums import RECORD_KEY, checked_reads, record_files
from ..output_lock import output_lock
from ..text_files import read_json
from .. import strict_json
from ..original_layout import open_hdf5, read_dataset, write_weight_dataset
from ..weights import load_original, save_original
from ..modules.softmax import SharedSoftmax
from .model import LanguageModel

SOFTMAX_FILE = "softmax.hdf5"
VOCAB_FILE = "vocab.txt"
COUNTS_FILE = "vocab_counts.tsv"
METADATA_FILE = "metadata.json"
#: What a trained language model's folder holds beside the biLM's weights.
LM_FILES = (SOFTMAX_FILE, VOCAB_FILE, COUNTS_FILE, METADATA_FILE)
#: The files of an exported (or shipped) model folder that its metadata.json's record names.
MODEL_FOLDER_FILES = ("options.json", "weights.hdf5", SOFTMAX_FILE, VOCAB_FILE, COUNTS_FILE)


#: Seconds an export waits for another writer of the model folder (a convert) to finish.
EXPORT_LOCK_WAIT = 300.0


def export_model(model: LanguageModel, vocab: Vocabulary, folder: str | Path,
                 metadata: Optional[Dict[str, Any]] = None) -> Path:
    """Write ``model`` (and ``vocab``) as a model folder, complete or not at all.

    A run killed while exporting left ``folder`` holding some new files and some of an earlier
    export (the weights of the last step beside the softmax and metadata of the step before),
    which loaded as a model; see :func:`elmo.folder_swap.atomic_folder`.

    It holds ``FOLDER.lock`` (:func:`elmo.output_lock.output_lock`), as ``elmo convert`` and ``ship``
    into the folder do: a convert of RUN/model into itself while the run exported it staged its
    files in the export's own FOLDER.partial, deleting the export's, and the folder was left
    holding a part of either. A writer there is waited for (a convert takes seconds)."""
    folder = Path(folder)
    with output_lock(folder, wait=EXPORT_LOCK_WAIT), atomic_folder(folder) as tmp:
        _write_model_files(model, vocab, tmp, metadata)
    return folder


def _write_model_files(model: LanguageModel, vocab: Vocabulary, folder: Path,
                       metadata: Optional[Dict[str, Any]]) -> None:
    save_original(model.bilm, folder / "options.json", folder / "weights.hdf5")
    with new_hdf5(folder / SOFTMAX_FILE, "softmax") as h5:   # (a full disk: one line naming the file)
        write_weight_dataset(h5, "softmax/W", model.softmax.weight.detach().float().cpu().numpy())
        write_weight_dataset(h5, "softmax/b", model.softmax.bias.detach().float().cpu().numpy())
    vocab.save(folder / VOCAB_FILE)
    if vocab.counts is not None:
        vocab.save(folder / COUNTS_FILE, with_counts=True)
    meta = dict(metadata or {})
    meta.setdefault("adapted_on", [])
    # (a start model's record, which a caller's metadata may carry, is of other files)
    meta[RECORD_KEY] = record_files(folder, MODEL_FOLDER_FILES)
    write_metadata(folder, meta)


def write_metadata(folder: Path, meta: Dict[str, Any]) -> None:
    """``folder/metadata.json``, written atomically."""
    atomic_write_text(folder / METADATA_FILE, strict_json.dumps(meta, indent=2, sort_keys=True) + "\n")


#: The types of the metadata.json keys that commands read (how the weights were made).
_METADATA_TYPES: Dict[str, Tuple[type, str]] = {
    "trained_on": (list, "a list of files"), "adapted_on": (list, "a list"),
    "steps": (int, "a whole number"), "tokens": (int, "a whole number"),
    "tokens_total": (int, "a whole number"), "warm_start": (dict, "an object"),
    "adapted_from": (str, "a path"), "converted_from": (str, "a path"), "shipped": (dict, "an object")}


def read_metadata(folder: str | Path) -> Dict[str, Any]:
    """A model folder's ``metadata.json`` (``{"adapted_on": []}`` where it has none).

    A file that is not a JSON object, or a key of :data:`_METADATA_TYPES` of another type, is
    a ValueError naming the file (and the key): a damaged or hand-edited file was a traceback
    (``'list' object has no attribute 'get'``), JSON's error without the file's name, or read
    wrongly (``trained_on: "corpus.txt"`` listed as the files c, o, r, p, ...)."""
    path = Path(folder) / METADATA_FILE
    if not path.exists():
        return {"adapted_on": []}
    meta = read_json(path, expected="a model's metadata")
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: expected a JSON object, got {json.dumps(meta)[:60]}")
    for key, (kind, what) in _METADATA_TYPES.items():
        value = meta.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise ValueError(f"{path}: '{key}' must be {what}, got {value!r}")
    return meta


def load_vocabulary(folder: str | Path) -> Vocabulary:
    """The folder's vocabulary (``vocab.txt``), with counts when ``vocab_counts.tsv`` is there
    (``vocab.txt``'s own, where it has them).

    The two files must list the same words in the same order: the softmax has a row per word
    of the vocabulary it was exported with, and which of two different lists that was cannot be
    told. (The counts file alone was read: perplexity went on with its words and printed a
    figure for a ``vocab.txt`` edited or replaced by another model's, and a warm start, which
    reads ``vocab.txt``, was told that the model's own ``vocab.txt`` was not its vocabulary.)"""
    folder = Path(folder)
    with checked_reads((folder / VOCAB_FILE, folder / COUNTS_FILE)):   # (where metadata.json records them)
        vocab = Vocabulary.load(folder / VOCAB_FILE)
        if not (folder / COUNTS_FILE).exists():
            return vocab
        counted = Vocabulary.load(folder / COUNTS_FILE)
    if counted.words != vocab.words:
        at = next((i for i, (a, b) in enumerate(zip(vocab.words, counted.words)) if a != b),
                  min(len(vocab), len(counted)))
        word = {name: repr(v.words[at]) if at < len(v) else "its end"
                for name, v in ((VOCAB_FILE, vocab), (COUNTS_FILE, counted))}
        raise ValueError(f"{folder}: {VOCAB_FILE} ({len(vocab):,} words) and {COUNTS_FILE} ({len(counted):,}) "
                         f"list other words (word {at + 1} is {word[VOCAB_FILE]} in {VOCAB_FILE}, "
                         f"{word[COUNTS_FILE]} in {COUNTS_FILE}); the softmax has a row per word of one of "
                         f"them: put back the files the model was exported with")
    # (a vocab.txt with counts of its own keeps them, as a run reading it does: see
    # elmo.training.training_vocab, which hands a warm start this vocabulary)
    return vocab if vocab.counts is not None else counted


def check_language_model_files(folder: Path) -> None:
    """Refuse a folder that lacks a file of a trained language model, naming it (before a
    command writes anything: finetune --from a converted biLM left its text files behind)."""
    bilm_only = (folder / "config.json").is_file() or (folder / "weights.hdf5").is_file()
    for name in ("options.json", "weights.hdf5", SOFTMAX_FILE, VOCAB_FILE):
        if not (folder / name).exists():
            # a folder of `elmo convert` (or a published model) holds a biLM that loads
            # everywhere else: say that it lacks the language model, not that it is damaged
            why = (f"; {folder} holds a biLM without a language model's softmax and vocabulary, as "
                   f"elmo convert writes one: give the model folder elmo train or finetune exported"
                   if bilm_only and not (folder / SOFTMAX_FILE).exists() else "")
            if not why and (folder / "model" / name).exists():   # (a run folder of elmo train)
                why = f"; {folder} is a run folder: its trained model is {folder / 'model'}"
            raise FileNotFoundError(f"{folder / name}: missing (a trained model folder has options.json, "
                                    f"weights.hdf5, {SOFTMAX_FILE} and {VOCAB_FILE}){why}")


def load_language_model(folder: str | Path, dropout: float = 0.0, device=None):
    """A model folder written by :func:`export_model` -> (LanguageModel, Vocabulary)."""
    folder = Path(folder)
    check_language_model_files(folder)
    # (one load: the folder's metadata.json is read once for the checks of all its files)
    with checked_reads(()):
        vocab = load_vocabulary(folder)
        bilm = load_original(folder / "options.json", folder / "weights.hdf5")
        arrays = _read_softmax(folder / SOFTMAX_FILE, (len(vocab), bilm.options.lstm.projection_dim))
    weight, bias = torch.from_numpy(arrays["softmax/W"]), torch.from_numpy(arrays["softmax/b"])
    # the loaded parts themselves, as a new model has them (in the default dtype, a bfloat16
    # model's too, and in training mode): a random model with them copied in held two or three
    # copies of the weights, and the random draws took longer than the load
    bilm = bilm.to(torch.get_default_dtype()).train()
    model = LanguageModel(bilm.options, len(vocab), vocab.bos, vocab.eos, dropout,
                          bilm=bilm, softmax=SharedSoftmax.from_tensors(weight, bias))
    return (model.to(device) if device is not None else model), vocab


def _read_softmax(path: Path, shape: Tuple[int, int]) -> Dict[str, Any]:
    """The arrays ``softmax/W`` (``shape``: V, P) and ``softmax/b`` (V,) of ``path``, checked
    against the SHA-256 its folder's metadata.json records (the biLM's files and the
    vocabulary are checked as they are read)."""
    shapes = {"softmax/W": shape, "softmax/b": shape[:1]}
    # (a truncated file gave h5py's message, naming no file)
    with checked_reads((path,)), open_hdf5(path) as h5:
        # (each checked as the weights' datasets are: a group, strings, another shape or a NaN
        # is one line naming it; a bias of one value was spread over every word)
        return {name: read_dataset(h5, path, name, shape, source="the vocabulary and options")
                for name, shape in shapes.items()}


def options_with_training_keys(options: ElmoOptions, **keys) -> ElmoOptions:
    """The options with training keys (n_tokens_vocab, unroll_steps ...) set in ``extra``."""
    extra = dict(options.extra)
    extra.update({k: v for k, v in keys.items() if v is not None})
    return ElmoOptions(options.lstm, options.char_cnn, extra)
