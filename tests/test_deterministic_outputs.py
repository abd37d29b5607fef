"""Equal inputs give byte-equal model files, so that their SHA-256 can be compared (the hub
pins files by it). safetensors keeps a file's metadata in a hash map, whose order changed from
one save to the next."""
import hashlib
import json
import struct
from pathlib import Path

from elmo.cli import main
from elmo.weights import NATIVE_WEIGHTS, save_pretrained

from conftest import random_bilm

#: Saves compared: with two metadata keys in a random order, all of them alike by chance is 1 in 2**(N-1).
SAVES = 6


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def metadata_keys(path: Path) -> list:
    """The ``__metadata__`` keys of a safetensors file, in the order its header holds them."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return list(json.loads(f.read(length))["__metadata__"])


def test_save_pretrained_native_is_byte_identical(tmp_path):
    bilm = random_bilm(0)
    files = [save_pretrained(bilm, tmp_path / f"m{i}") / NATIVE_WEIGHTS for i in range(SAVES)]
    assert len({sha256(f) for f in files}) == 1
    keys = metadata_keys(files[0])
    assert keys == sorted(keys) and len(keys) >= 2


def test_convert_to_native_is_byte_identical(tmp_path):
    source = save_pretrained(random_bilm(1), tmp_path / "source", fmt="original")
    outs = [tmp_path / f"out{i}" for i in range(SAVES)]
    for out in outs:
        assert main(["convert", str(source), str(out), "--to", "safetensors"]) == 0
    for name in ("config.json", NATIVE_WEIGHTS):
        assert len({sha256(out / name) for out in outs}) == 1, name
    keys = metadata_keys(outs[0] / NATIVE_WEIGHTS)
    assert keys == sorted(keys)
