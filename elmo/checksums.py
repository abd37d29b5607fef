"""CRC-32 checksums of the weights the package writes, kept inside the files that hold them.

Neither format checks its data: safetensors checks its header only, and HDF5 checks nothing
unless a dataset is written with its own checksum filter. A flipped bit in a weight (a failing
disk, a bad copy) loads without a word and changes every vector after it. So:

* every safetensors file the package writes (a native model folder's ``model.safetensors``, a
  saved task model) records one CRC-32 per tensor in its metadata, under :data:`METADATA_KEY`,
  checked by every read (:func:`elmo.native_layout.read_safetensors`);
* every weight dataset it writes in the original HDF5 layout (``weights.hdf5``, a trained
  model's ``softmax.hdf5``) carries the CRC-32 of its path and values as the attribute
  :data:`HDF5_ATTRIBUTE`, checked by every read (:func:`elmo.original_layout.read_dataset`).
  The path is in it because an attribute goes with its dataset: with the values alone, two
  datasets of one shape whose names were swapped (``CNN_high_0/W_carry`` and ``W_transform``)
  each matched their record and loaded as the other. Other readers of the layout (AllenNLP,
  bilm-tf) ignore the attribute; the data stays contiguous and unfiltered, as they expect.

A file written before the record was kept (the released models, the bundled default model)
has none and is read as before.

CRC-32 is meant for damage, not for tampering: a fetched file's SHA-256 is checked where it is
downloaded (:mod:`elmo.hub`). It is the cheapest full pass over the data (zlib's; SHA-256 took
about twice as long in one comparison, *scratch*); ``benchmarks/load_checksums.py`` measures
what the checks add to a load. A checksum per tensor or dataset names the one that was damaged.
"""
from __future__ import annotations

import json
import zlib
from typing import List, Mapping, Optional

import numpy as np
import torch

#: The safetensors metadata key of the checksums: a JSON object, tensor name -> 8 hex digits.
METADATA_KEY = "tensor_crc32"
#: The attribute of an HDF5 weight dataset that holds the CRC-32 of its path and values (8 hex
#: digits: :func:`array_crc32`).
HDF5_ATTRIBUTE = "elmo_crc32"


def tensor_bytes(tensor: torch.Tensor, stride: int = 1) -> memoryview:
    """Every ``stride``-th value of ``tensor`` (any shape), flattened, as its exact bytes: a view
    of a contiguous CPU tensor's memory, not a copy (a bfloat16 one's bits as int16: numpy has
    no bfloat16)."""
    flat = tensor.detach().reshape(-1)
    if flat.dtype == torch.bfloat16:
        flat = flat.view(torch.int16)
    return np.ascontiguousarray(flat[::stride].cpu().numpy()).data


def _crc32(tensor: torch.Tensor) -> str:
    return f"{zlib.crc32(tensor_bytes(tensor)):08x}"


def array_crc32(array: np.ndarray, path: str = "") -> str:
    """The CRC-32 of ``path`` (UTF-8, then a NUL byte; nothing where it is empty) followed by
    ``array``'s values as stored (its dtype and byte order), 8 hex digits."""
    seed = zlib.crc32(path.encode("utf-8") + b"\0") if path else 0
    return f"{zlib.crc32(np.ascontiguousarray(array).data, seed):08x}"


def dataset_checksum_problem(array: np.ndarray, path: str, recorded: object) -> Optional[str]:
    """Why ``array``, read from the HDF5 dataset at ``path`` (``h5py.Dataset.name``) whose
    :data:`HDF5_ATTRIBUTE` is ``recorded`` (None: it has none), is not what was written there
    (one phrase), or None."""
    if recorded is None:
        return None
    if isinstance(recorded, bytes):   # (h5py gives a fixed-length string attribute as bytes)
        recorded = recorded.decode("ascii", "replace")
    if not isinstance(recorded, str) or len(recorded) != 8:
        return f"its '{HDF5_ATTRIBUTE}' attribute is damaged (not a checksum: {recorded!r:.40})"
    crc = array_crc32(array, path)
    if crc != recorded:
        return f"does not hold the values it was saved with (CRC-32 {crc}, recorded {recorded})"
    return None


def checksum_record(state: Mapping[str, torch.Tensor]) -> str:
    """The metadata value that records ``state``'s checksums: JSON, names in sorted order (so
    one model's saves give the same bytes)."""
    return json.dumps({name: _crc32(tensor) for name, tensor in sorted(state.items())},
                      separators=(",", ":"), ensure_ascii=False)


def checksum_problem(state: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> Optional[str]:
    """Why ``state``, the tensors read from a file, are not the ones its ``metadata`` recorded
    (one phrase), or None where they are, or where the file records no checksums.

    A record that is not a JSON object of names to checksums, a tensor it does not name and a
    name it holds with no tensor are damage too: a header whose name was changed by a flipped
    byte reads as another tensor."""
    text = metadata.get(METADATA_KEY)
    if text is None:
        return None
    try:
        recorded = json.loads(text)
    except ValueError:
        recorded = None
    if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
        return f"its metadata's '{METADATA_KEY}' record is damaged (not a JSON object of checksums)"
    unrecorded: List[str] = sorted(set(state) - set(recorded))
    if unrecorded:
        return f"tensor '{unrecorded[0]}' is not in the checksum record it was saved with"
    gone = sorted(set(recorded) - set(state))
    if gone:
        return f"tensor '{gone[0]}', which its checksum record names, is missing"
    for name in sorted(state):
        crc = _crc32(state[name])
        if crc != recorded[name]:
            return (f"tensor '{name}' does not hold the values it was saved with (CRC-32 {crc}, "
                    f"recorded {recorded[name]})")
    return None
