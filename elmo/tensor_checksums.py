"""CRC-32 checksums of the tensors a safetensors file holds, kept in the file's own metadata.

The safetensors format checks its header but not the tensor data: a flipped bit in a weight
(a failing disk, a bad copy) loads without a word and changes every vector after it, as in the
original HDF5 layout. Every safetensors file the package writes (a native model folder's
``model.safetensors``, a saved task model) therefore records one CRC-32 per tensor under
:data:`METADATA_KEY`, and every read of such a file checks them before a weight is used
(:func:`elmo.weights.read_safetensors`). A file written before the record was kept has none
and is read as before.

CRC-32 is meant for damage, not for tampering: a fetched file's SHA-256 is checked where it is
downloaded (:mod:`elmo.hub`). It is the cheapest full pass there is over the data (zlib's, about
0.1 s for the 374 MB of the original-size model on a 2-core Zen 4 VM, *scratch*, where SHA-256
took 0.2 s; a load of that model takes about 0.2 s without it), and a checksum per tensor names
the tensor that was damaged.
"""
from __future__ import annotations

import json
import zlib
from typing import List, Mapping, Optional

import numpy as np
import torch

#: The safetensors metadata key of the checksums: a JSON object, tensor name -> 8 hex digits.
METADATA_KEY = "tensor_crc32"


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
