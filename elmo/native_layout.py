"""The native layout: a model folder of ``config.json`` (the options) and ``model.safetensors``
(the state dict, never unpickled). This module writes and reads the safetensors file (its
metadata sorted, a CRC-32 per tensor checked), records and checks the digest of the options
the weights were saved with, and checks that ``config.json`` and the file's tensors fit each
other; :func:`elmo.weights.save_pretrained` and :func:`elmo.weights.load_pretrained` build on it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional, Tuple

import torch

from .checksums import METADATA_KEY as CHECKSUMS_KEY, checksum_problem, checksum_record
from .config import ElmoOptions
from .folder_checksums import file_identity, replaced_while_read
from .io import os_error_reason
from .weight_values import WeightFileError, check_finite

if TYPE_CHECKING:
    from .manylangs import CharVocabulary


#: A model folder's files in the native layout.
NATIVE_CONFIG = "config.json"
NATIVE_WEIGHTS = "model.safetensors"


def write_safetensors(state: Dict[str, torch.Tensor], path: Path, metadata: Dict[str, str] | None = None) -> None:
    """``safetensors.torch.save_file``, whose write errors (a full disk) are an OSError with
    their errno: safetensors raises its own error, with the OS error only in its text. The
    file's metadata records each tensor's CRC-32 (:mod:`elmo.checksums`), which
    :func:`read_safetensors` checks."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file
    metadata = {**(metadata or {}), CHECKSUMS_KEY: checksum_record(state)}
    try:
        save_file(state, str(path), metadata=metadata)
    except SafetensorError as e:
        code = re.search(r"\(os error (\d+)\)", str(e))
        if code is None:
            raise
        raise OSError(int(code[1]), os.strerror(int(code[1])), str(path)) from e
    _sort_metadata_in_place(path)


def _sort_metadata_in_place(path: Path) -> None:
    """Rewrite the JSON header of the safetensors file ``path`` with its ``__metadata__`` keys
    sorted. safetensors keeps the metadata in a hash map whose order changes from one save to
    the next, so two saves of one model differed in bytes (and SHA-256) with equal content.

    The header is ``<u64 little-endian length><JSON, padded with spaces>``; the sorted JSON
    holds the same keys and values, so it fits the same length and the tensor data, whose
    offsets count from the header's end, is not moved."""
    with open(path, "r+b") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        if not isinstance(header.get("__metadata__"), dict):
            return
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        if len(text) > length:   # (not expected: same content, same compact form; the file as
            return               # safetensors wrote it is valid, only its bytes not repeatable)
        f.seek(8)
        f.write(text.ljust(length))   # (spaces: the padding safetensors itself uses)


#: The safetensors metadata key of :func:`model_options_digest` (``save_pretrained``).
MODEL_OPTIONS_KEY = "model_options_sha256"


def model_options_digest(options: ElmoOptions) -> str:
    """SHA-256 of the options that define the computation (the LSTM, the character CNN, a
    dictionary model's vocabulary sizes), not the training keys kept beside them."""
    model = {k: v for k, v in options.to_dict().items() if k in ("lstm", "char_cnn", "char_vocabulary")}
    return hashlib.sha256(json.dumps(model, sort_keys=True).encode("utf-8")).hexdigest()


def read_safetensors(path: Path, what: str = "model") -> Tuple[Dict[str, torch.Tensor], Dict[str, str]]:
    """The tensors of the safetensors file ``path`` (never unpickled) and its metadata, read in
    one ``safe_open`` (which opens the path twice: for the header, then the data). A folder
    there, a file that cannot be read (truncated, not safetensors), one replaced while it was
    read (its header and its data could be two files'), or one whose tensors are not those its
    checksums record (a damaged byte:
    :mod:`elmo.checksums`; a file without the record is not checked) is one
    WeightFileError naming it, which advises to save the ``what`` again; the values are not
    checked (:func:`check_finite`)."""
    from safetensors import SafetensorError, safe_open

    if path.is_dir():
        raise WeightFileError(f"{path}: is a directory, expected a safetensors file")
    try:
        before = file_identity(path)
        with safe_open(str(path), framework="pt") as f:
            # safe_open opens the path twice, for the header (metadata, the tensors' places)
            # and for the data: a save that replaced the file between the two gave one file's
            # header with the other's values, called damaged by the checksums, or loaded under
            # the old file's options digest where it had none. (Looked at once both are open:
            # a replacement while the tensors are read changes neither.)
            opened = file_identity(path)
            metadata = f.metadata() or {}
            state = {name: f.get_tensor(name) for name in f.keys()}
    except (SafetensorError, OSError) as e:
        reason = os_error_reason(e) if isinstance(e, OSError) else str(e)
        raise WeightFileError(f"{path}: unreadable safetensors file: {reason}; restore it from a copy, "
                              f"or save the {what} again") from None
    if opened != before:
        raise replaced_while_read(path)
    problem = checksum_problem(state, metadata)
    if problem is not None:
        raise WeightFileError(f"{path}: damaged: {problem}; restore it from a copy, or save the "
                              f"{what} again")
    return state, metadata


def check_config_belongs(folder: Path, options: ElmoOptions, metadata: Dict[str, str]) -> None:
    """The weights were saved with the options ``config.json`` holds (where the weights record
    them in their file's ``metadata``: files written before the record was kept are not
    checked). ``save_pretrained`` commits ``model.safetensors``, then ``config.json``: a save
    killed between the two, over another model of the same shapes but other clips or
    activation, gave the new weights the old options, silently; so does a hand edit of a clip."""
    recorded = metadata.get(MODEL_OPTIONS_KEY)
    if recorded is not None and recorded != model_options_digest(options):
        raise WeightFileError(f"{folder / NATIVE_CONFIG}: not the model options {NATIVE_WEIGHTS} was saved with "
                              f"(a save interrupted between the two files, or an edited LSTM or CNN "
                              f"setting): save the model again, or restore the config.json saved with it")


def layer_weight_count(options: ElmoOptions) -> int:
    """The weights of the character CNN's filters, highway and projection and of the LSTM that
    these options call for (every layout and model kind holds them; the character and word
    embeddings, whose rows depend on the kind, are left out):
    :func:`elmo.original_layout.expected_shapes` summed without ``char_embed``, counted
    without building a tensor."""
    cnn, lstm = options.char_cnn, options.lstm
    f, p, h, d = cnn.n_filters, lstm.projection_dim, lstm.dim, cnn.embedding_dim
    filters = sum(width * d * n + n for width, n in cnn.filters)
    highway = cnn.n_highway * 2 * (f * f + f)
    per_direction_layer = 2 * p * 4 * h + 4 * h + h * p
    return filters + highway + f * p + p + 2 * lstm.n_layers * per_direction_layer


def check_weights_fit_the_file(folder: Path, options: ElmoOptions) -> None:
    """Options that call for more weights than ``model.safetensors`` can hold (2 bytes each at
    the least) are refused before the model is built: an edited config.json (an lstm.dim of
    2**30) had torch allocate hundreds of GB first, and the load ended in a traceback from
    torch's allocator instead of naming the file."""
    weights = folder / NATIVE_WEIGHTS
    if not weights.is_file():
        return   # (named by the load that follows)
    needed, size = layer_weight_count(options), weights.stat().st_size
    if 2 * needed > size:
        raise WeightFileError(f"{folder / NATIVE_CONFIG}: describes a model of at least {needed:,} weights, more "
                              f"than {NATIVE_WEIGHTS} ({size:,} bytes) holds; is {NATIVE_CONFIG} the one saved "
                              f"with these weights?")


def dictionary_id_scheme(folder: Path, options: ElmoOptions) -> Optional[CharVocabulary]:
    """The id scheme of a dictionary model (ELMoForManyLangs) saved in ``folder``: its
    ``char.dic`` (and ``word.dic``), whose sizes must be those ``config.json`` gives; None for
    a model that reads characters by their bytes."""
    if options.char_vocabulary is None:
        return None
    from .manylangs import CharVocabulary
    id_scheme = CharVocabulary.from_folder(folder, options.char_cnn.max_characters_per_token,
                                           with_words=options.char_vocabulary.word_dim > 0)
    if (id_scheme.n_char_rows - 1, id_scheme.n_word_rows - 1 if id_scheme.words else 0) != \
            (options.char_vocabulary.n_characters, options.char_vocabulary.n_words):
        raise WeightFileError(f"{folder}: char.dic / word.dic have {id_scheme.n_char_rows - 1} / "
                              f"{max(id_scheme.n_word_rows - 1, 0)} entries; {NATIVE_CONFIG} says "
                              f"{options.char_vocabulary.n_characters} / {options.char_vocabulary.n_words}")
    return id_scheme


def check_tensors_fit(folder: Path, state: Dict[str, torch.Tensor],
                      expected: Dict[str, torch.Tensor]) -> None:
    """The tensors of ``folder``'s ``model.safetensors`` (``state``) are those of the model
    ``config.json`` describes (``expected``: its state dict), each of its shape, of a floating
    type where the model's is, and finite; one that is missing, another or extra is a
    WeightFileError naming the tensor."""
    for name, tensor in expected.items():
        if name not in state:
            raise WeightFileError(f"{folder / NATIVE_WEIGHTS}: tensor '{name}' is missing "
                                  f"(expected shape {tuple(tensor.shape)})")
        if state[name].shape != tensor.shape:
            raise WeightFileError(f"{folder / NATIVE_WEIGHTS}: tensor '{name}' has shape "
                                  f"{tuple(state[name].shape)}, expected {tuple(tensor.shape)}")
        if state[name].is_floating_point() != tensor.is_floating_point():
            # (a header's "F32" edited to "I32": the same bytes read as whole numbers, copied
            # into the model without a word)
            raise WeightFileError(f"{folder / NATIVE_WEIGHTS}: tensor '{name}' holds {state[name].dtype} "
                                  f"values, expected {tensor.dtype}")
        check_finite(state[name], f"{folder / NATIVE_WEIGHTS}: tensor '{name}'")
    extra = sorted(k for k in state if k not in expected)
    if extra:   # a config.json with fewer layers than the weights: they would be dropped silently
        raise WeightFileError(f"{folder / NATIVE_WEIGHTS}: tensor '{extra[0]}' is not part of the "
                              f"model {NATIVE_CONFIG} describes"
                              + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "")
                              + f"; is {NATIVE_CONFIG} the one saved with these weights?")
