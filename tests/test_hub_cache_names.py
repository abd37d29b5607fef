"""The model cache's own files beside a cached file or an unpacked folder: the names of versions
before the ``+`` (``NAME.part``, ``NAME.lock``, ``DEST.sha256``, ...), which are also URLs'
cached names, and two processes whose URLs' paths collide (one is a folder of the other's)."""
from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

import elmo
from elmo.hub import download
from tests.hub_server import FileServer

FIXTURE = Path(elmo.__file__).parent / "resources" / "fixture"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """A fresh, empty $ELMO_HOME; online; no retries."""
    home = tmp_path / "elmo-home"
    monkeypatch.setenv("ELMO_HOME", str(home))
    monkeypatch.delenv("ELMO_OFFLINE", raising=False)
    monkeypatch.setenv("ELMO_DOWNLOAD_RETRIES", "0")
    return home


def beside(dest: Path):
    """The names in ``dest``'s folder."""
    return sorted(p.name for p in dest.parent.iterdir())


# ------------------------------------------------------------------ the unpacked-archive cache
def model_zip(which: str) -> bytes:
    """A zip of the fixture model, with a file that tells it apart."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name in ("options.json", "weights.hdf5"):
            z.writestr(f"model/{name}", (FIXTURE / name).read_bytes())
        z.writestr("model/which.txt", which)
    return buffer.getvalue()


def test_archive_urls_named_like_the_unpacked_caches_own_files_get_folders_of_their_own():
    """An unpacked folder DEST had DEST.lock, DEST.sha256 and DEST.partial beside it: the
    folders of archive URLs ending so. Fetched after DEST, /m/a.zip.sha256 met DEST's digest
    file where its folder goes (and /m/a.zip.lock its lock); fetched before, DEST's lock was
    a folder. Each now gets its own folder."""
    from elmo.hub.resolve import fetch_archive
    names = ["a.zip", "a.zip.lock", "a.zip.sha256", "a.zip.partial"]
    served = {f"/{folder}/{name}": model_zip(f"{folder}/{name}") for folder in "xy" for name in names}
    with FileServer(served) as server:
        for folder, order in (("x", names), ("y", names[::-1])):
            for name in order:
                got = fetch_archive(server.url(f"/{folder}/{name}"))
                assert (got / "which.txt").read_text() == f"{folder}/{name}"
            for name in order:     # (none replaced by another's)
                assert (fetch_archive(server.url(f"/{folder}/{name}")) / "which.txt").read_text() \
                    == f"{folder}/{name}"
        assert all(len(server.gets(path)) == 1 for path in served)


def test_a_folder_unpacked_by_an_earlier_version_keeps_its_pin_and_its_old_files_go():
    """A folder unpacked under the old names has its archive's digest in DEST.sha256: it still
    counts for its pin (no download), and once the lock is taken (another pin) the old digest,
    lock and what a killed unpack left go."""
    from elmo.hub.resolve import fetch_archive, unpacked_path
    archive = model_zip("one")
    pin = hashlib.sha256(archive).hexdigest()
    with FileServer({"/m/model.zip": archive}) as server:
        url = server.url("/m/model.zip")
        folder = fetch_archive(url, sha256=pin)
        dest = unpacked_path(url)
        dest.with_name(dest.name + "+.sha256").rename(dest.with_name(dest.name + ".sha256"))
        dest.with_name(dest.name + "+.lock").unlink()
        dest.with_name(dest.name + ".lock").touch()
        (dest.parent / f".{dest.name}.partial.k1ll3d00.tmp").mkdir()
        dest.with_name(dest.name + ".partial").mkdir()
        assert fetch_archive(url, sha256=pin) == folder
        assert len(server.gets("/m/model.zip")) == 1
        with pytest.raises(download.DownloadError, match="SHA256"):
            fetch_archive(url, sha256="0" * 64)
        assert fetch_archive(url, sha256=pin) == folder     # (the digest adopted, not lost)
        assert len(server.gets("/m/model.zip")) == 2
    assert beside(dest) == [dest.name, dest.name + "+.lock", dest.name + "+.sha256"]
