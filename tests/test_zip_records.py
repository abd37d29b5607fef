"""elmo.zip_records: which torch.save files are damaged, and which are whole."""
from __future__ import annotations

import zipfile

import pytest
import torch

from elmo.zip_records import zip_damage


@pytest.fixture
def unchecked_save():
    """torch.save without CRC-32s (``torch.serialization.set_crc32_options(False)``, public
    since PyTorch 2.6: every record's CRC-32 written as 0), the option restored after."""
    if not hasattr(torch.serialization, "set_crc32_options"):
        pytest.skip("this torch has no set_crc32_options")
    before = torch.serialization.get_crc32_options()
    torch.serialization.set_crc32_options(False)
    yield
    torch.serialization.set_crc32_options(before)


def test_a_file_saved_without_crc32s_is_not_refused(tmp_path, unchecked_save):
    """torch.load reads it; refusing it as damaged would refuse a real file."""
    path = tmp_path / "m.pt"
    torch.save({"w": torch.arange(12.0).reshape(3, 4), "e": torch.zeros(0)}, path)
    with zipfile.ZipFile(path) as archive:
        assert all(i.CRC == 0 for i in archive.infolist())   # (what the option writes)
    assert torch.load(path, weights_only=True)["w"].sum() == 66
    assert zip_damage(path) is None


def test_a_file_saved_without_crc32s_still_has_its_headers_checked(tmp_path, unchecked_save):
    """An unchecked file whose records moved (a byte doubled inside one's data) is still damaged:
    the later local headers are not where the directory says."""
    path = tmp_path / "m.pt"
    torch.save({"w": torch.arange(4096.0)}, path)
    with zipfile.ZipFile(path) as archive:
        big = max(archive.infolist(), key=lambda i: i.file_size)
    data = path.read_bytes()
    at = big.header_offset + 30 + len(big.filename) + 100
    path.write_bytes(data[:at] + data[at + 1:at + 2] + data[at:])   # (a byte shifted in)
    assert str(zip_damage(path)).endswith("fails its local header")


def test_a_checked_file_with_a_flipped_byte_is_damaged(tmp_path):
    path = tmp_path / "m.pt"
    torch.save({"w": torch.arange(4096.0)}, path)
    with zipfile.ZipFile(path) as archive:
        big = max(archive.infolist(), key=lambda i: i.file_size)
    data = bytearray(path.read_bytes())
    data[big.header_offset + 30 + len(big.filename) + 200] ^= 0x01
    path.write_bytes(bytes(data))
    assert zip_damage(path) == f"record '{big.filename}' fails its CRC-32 check"


def test_a_zip64_copy_of_a_torch_file_is_whole(tmp_path):
    """Files over 4 GB are ZIP64; torch.load reads a ZIP64 copy of the records, so must we."""
    src, path = tmp_path / "m.pt", tmp_path / "z64.pt"
    torch.save({"w": torch.arange(12.0)}, src)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            with zout.open(info.filename, "w", force_zip64=True) as w:
                w.write(zin.read(info))
    assert torch.load(path, weights_only=True)["w"].sum() == 66
    assert zip_damage(path) is None


def test_a_checkpoint_saved_without_crc32s_loads(tmp_path, unchecked_save):
    """A run in a process that turned CRC-32s off (a wrapper script, for speed) writes its
    checkpoints so; its resume must read them."""
    from elmo.training.checkpoint import load_checkpoint, save_checkpoint

    payload = {"step": 1, "tokens": 8, "elapsed": 0.5, "model": {"w": torch.ones(2, 3)},
               "optimizer": {}, "ranks": []}
    path = save_checkpoint(tmp_path, 1, payload)
    assert load_checkpoint(path)["model"]["w"].sum() == 6
