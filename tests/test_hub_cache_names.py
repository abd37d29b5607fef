"""The model cache's own files beside a cached file or an unpacked folder: the names of versions
before the ``+`` (``NAME.part``, ``NAME.lock``, ``DEST.sha256``, ...), which are also URLs'
cached names, and two processes whose URLs' paths collide (one is a folder of the other's)."""
from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

import elmo
from elmo.hub import cache_paths, download
from elmo.hub.download import cache_path, fetch
from tests.hub_server import FileServer, fresh_model_cache

FIXTURE = Path(elmo.__file__).parent / "resources" / "fixture"
WEIGHTS = "/m/elmo_weights.hdf5"


cache = pytest.fixture(autouse=True, name="cache")(fresh_model_cache)


def beside(dest: Path):
    """The names in ``dest``'s folder."""
    return sorted(p.name for p in dest.parent.iterdir())


def etag(data: bytes) -> str:
    """The version the test server names a file by (its ETag)."""
    return '"' + hashlib.sha256(data).hexdigest()[:16] + '"'


def old_download(dest: Path, part: bytes, validator=None) -> None:
    """What a version before the '+' names left of a cut download of ``dest``: its lock
    NAME.lock (empty), NAME.part and NAME.part.json."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.with_name(dest.name + ".lock").touch()
    dest.with_name(dest.name + ".part").write_bytes(part)
    if validator is not None:
        dest.with_name(dest.name + ".part.json").write_text(json.dumps({"validator": validator}))


# ------------------------------------------------------------------ the old names of a file's helpers
def test_a_part_an_earlier_version_left_is_resumed_and_its_old_files_go():
    """A download cut under the old names restarted from zero, and NAME.part, NAME.part.json
    and NAME.lock stayed in the cache for good. The part is now resumed (the server's If-Range
    answer confirms it is still that file) and the old files are gone."""
    weights = (FIXTURE / "weights.hdf5").read_bytes()
    half = len(weights) // 2
    with FileServer({WEIGHTS: weights}) as server:
        url = server.url(WEIGHTS)
        dest = cache_path(url)
        old_download(dest, weights[:half], etag(weights))
        assert fetch(url, progress=False).read_bytes() == weights
        assert server.gets(WEIGHTS) == [f"bytes={half}-"]
    assert beside(dest) == [dest.name, dest.name + "+.lock"]


def test_a_pinned_old_part_is_resumed_and_one_of_another_version_starts_over():
    """Without a recorded version a pin checks the result; a part whose recorded version is no
    longer the server's is answered with the whole file (If-Range) and the part starts over."""
    weights = (FIXTURE / "weights.hdf5").read_bytes()
    half = len(weights) // 2
    pin = hashlib.sha256(weights).hexdigest()
    with FileServer({WEIGHTS: weights, "/n/w.hdf5": weights}) as server:
        pinned, changed = cache_path(server.url(WEIGHTS)), cache_path(server.url("/n/w.hdf5"))
        old_download(pinned, weights[:half])
        old_download(changed, b"x" * half, '"another version"')
        assert fetch(server.url(WEIGHTS), sha256=pin, progress=False).read_bytes() == weights
        assert fetch(server.url("/n/w.hdf5"), progress=False).read_bytes() == weights
        assert server.gets(WEIGHTS) == [f"bytes={half}-"]
        assert server.gets("/n/w.hdf5") == [f"bytes={half}-"]   # (answered with all of it: 200)
    for dest in (pinned, changed):
        assert beside(dest) == [dest.name, dest.name + "+.lock"]


def test_an_old_part_that_cannot_be_resumed_is_removed_and_a_cached_files_leftovers_too():
    """An old part without a recorded version (and no pin) cannot be resumed, and the old files
    beside an already cached file (its lock, a part, the staging folder a killed run left)
    stayed for good: they are removed, by the download or by the next load."""
    weights = (FIXTURE / "weights.hdf5").read_bytes()
    with FileServer({WEIGHTS: weights, "/n/w.hdf5": weights}) as server:
        unresumable = cache_path(server.url(WEIGHTS))
        old_download(unresumable, b"x" * 100)
        assert fetch(server.url(WEIGHTS), progress=False).read_bytes() == weights
        assert server.gets(WEIGHTS) == [None]
        done = fetch(server.url("/n/w.hdf5"), progress=False)
        old_download(done, weights[:100], etag(weights))
        staging = done.with_name(f".{done.name}.staging")
        staging.mkdir()
        (staging / (done.name + ".download")).write_bytes(weights)
        (staging / "tmpab12cd_3").write_bytes(weights[:10])
        assert fetch(server.url("/n/w.hdf5"), progress=False).read_bytes() == weights
        assert len(server.gets("/n/w.hdf5")) == 1
    for dest in (unresumable, done):
        assert beside(dest) == [dest.name, dest.name + "+.lock"]


def test_old_names_that_are_other_urls_files_or_held_by_a_running_old_version_stay():
    """NAME.part is also the cached name of the URL NAME.part: a file the cache fetched as a
    URL's own (a lock of its own beside it) is never taken for an old part, nor is a part
    without the old lock that every old download took; and while an older version holds
    NAME.lock (it is downloading NAME) its files are left to it."""
    from filelock import FileLock

    weights = (FIXTURE / "weights.hdf5").read_bytes()
    served = {"/a/w": weights, "/a/w.part": b'{"a": "url"}', "/a/w.part.json": b'{"validator": "\\"x\\""}',
              "/b/w": weights, "/c/w": weights}
    with FileServer(served) as server:
        a = cache_path(server.url("/a/w"))
        fetch(server.url("/a/w.part"), progress=False)
        fetch(server.url("/a/w.part.json"), progress=False)
        a.with_name("w.lock").touch()
        assert fetch(server.url("/a/w"), progress=False).read_bytes() == weights
        assert server.gets("/a/w") == [None]      # (not resumed from another URL's file)
        for path in ("/a/w.part", "/a/w.part.json"):
            assert cache_path(server.url(path)).read_bytes() == served[path]
        b = cache_path(server.url("/b/w"))
        old_download(b, weights[:100], etag(weights))
        b.with_name("w.lock").unlink()      # (no old lock: not provably an old download's part)
        fetch(server.url("/b/w"), progress=False)
        assert b.with_name("w.part").read_bytes() == weights[:100]
        c = cache_path(server.url("/c/w"))
        old_download(c, weights[:100], etag(weights))
        with FileLock(str(c.with_name("w.lock"))).acquire(timeout=1):
            fetch(server.url("/c/w"), progress=False)
            assert server.gets("/c/w") == [None]
            assert c.with_name("w.part").read_bytes() == weights[:100]
        fetch(server.url("/c/w"), progress=False)     # (released: the next load tidies)
        assert beside(c) == [c.name, c.name + "+.lock"]


def test_old_files_that_cannot_be_moved_or_removed_do_not_fail_the_download(monkeypatch):
    """Tidying is best effort: an old file the process may not move or delete (another user's,
    in a shared cache) stays, and the download goes on, where it failed with a raw OSError."""
    import errno
    weights = (FIXTURE / "weights.hdf5").read_bytes()
    with FileServer({WEIGHTS: weights}) as server:
        url = server.url(WEIGHTS)
        dest = cache_path(url)
        old_download(dest, weights[:100], etag(weights))
        real = Path.replace

        def refused(self, target):
            if self.name.endswith((".part", ".part.json")):
                raise PermissionError(errno.EACCES, "Permission denied", str(self))
            return real(self, target)
        monkeypatch.setattr(Path, "replace", refused)
        assert fetch(url, progress=False).read_bytes() == weights
        assert server.gets(WEIGHTS) == [None]


# ------------------------------------------------------------------ the unpacked-archive cache
def model_zip(which: str, top: str = "model/") -> bytes:
    """A zip of the fixture model in the folder ``top`` (or at its top level: ``""``), with a
    file that tells it apart."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name in ("options.json", "weights.hdf5"):
            z.writestr(f"{top}{name}", (FIXTURE / name).read_bytes())
        z.writestr(f"{top}which.txt", which)
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


def test_old_locks_beside_cached_models_go_at_the_next_load_and_a_read_only_cache_still_serves(monkeypatch):
    """Every download of an older version left NAME.lock (and DEST.lock beside an unpacked
    folder) for good. The next load removes it; where the cache cannot be written (shared,
    mounted read-only) the model is still served from it, offline too, and the old lock stays."""
    import errno

    import filelock

    from elmo.hub.resolve import fetch_archive, unpacked_path
    weights = (FIXTURE / "weights.hdf5").read_bytes()
    with FileServer({WEIGHTS: weights, "/m/model.zip": model_zip("one")}) as server:
        url, archive = server.url(WEIGHTS), server.url("/m/model.zip")
        cached, folder = fetch(url, progress=False), fetch_archive(archive)
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    olds = [cached.with_name(cached.name + ".lock"), unpacked_path(archive).with_name("model.zip.lock")]
    for old in olds:
        old.touch()
    real = filelock.FileLock.acquire

    def read_only(self, *args, **kwargs):
        raise PermissionError(errno.EROFS, "Read-only file system", self.lock_file)
    monkeypatch.setattr(filelock.FileLock, "acquire", read_only)
    assert fetch(url, progress=False) == cached and fetch_archive(archive) == folder
    assert all(old.exists() for old in olds)
    monkeypatch.setattr(filelock.FileLock, "acquire", real)
    assert fetch(url, progress=False) == cached and fetch_archive(archive) == folder
    assert [n for n in beside(cached) if n.startswith("elmo")] == [cached.name, cached.name + "+.lock"]
    dest = unpacked_path(archive)
    assert beside(dest) == [dest.name, dest.name + "+.lock", dest.name + "+.sha256"]


# ------------------------------------------------------------------ colliding URLs at the same instant
@pytest.fixture
def unmarked_http(monkeypatch):
    """The paths https has (the test server's http otherwise gets a +scheme-http folder)."""
    monkeypatch.setattr(cache_paths, "_unmarked_scheme", lambda parts: "http")


def test_a_folder_made_at_the_path_while_it_downloads_puts_the_file_aside(unmarked_http, monkeypatch):
    """Another process caches /m/elmo/options.json (the folder m/elmo) after this one chose
    m/elmo for /m/elmo's file: the rename onto the folder was a raw IsADirectoryError. The
    finished download now goes to the +tree- folder, as without the race, not downloaded again."""
    files = {"/m/elmo": b"the file at m/elmo", "/m/elmo/options.json": b'{"inside": true}'}
    with FileServer(files) as server:
        url, inner = server.url("/m/elmo"), server.url("/m/elmo/options.json")
        plain = cache_path(url)
        real = download._download

        def meanwhile(url_, dest, *args):
            staged = real(url_, dest, *args)
            if url_ == url:     # the other process, between the look and the rename
                assert fetch(inner, progress=False) == plain / "options.json"
            return staged
        monkeypatch.setattr(download, "_download", meanwhile)
        got = fetch(url, progress=False)
        assert "+tree-" in str(got) and got.read_bytes() == files["/m/elmo"]
        assert (plain / "options.json").read_bytes() == files["/m/elmo/options.json"]
        assert fetch(url, progress=False) == got and fetch(inner, progress=False) == plain / "options.json"
        assert len(server.gets("/m/elmo")) == 1
    assert not [p for p in plain.parent.rglob("*staging*")]


def test_a_file_made_where_the_folder_must_be_puts_the_file_aside(unmarked_http, monkeypatch):
    """Another process caches /m/elmo (the file m/elmo) after this one chose
    m/elmo/options.json: making the folder failed as 'the model cache cannot be written (File
    exists)', which it can. The file now goes to the +tree- folder, as without the race."""
    files = {"/m/elmo": b"the file at m/elmo", "/m/elmo/options.json": b'{"inside": true}'}
    with FileServer(files) as server:
        url, inner = server.url("/m/elmo"), server.url("/m/elmo/options.json")
        plain = cache_path(url)
        real, calls = download.make_cache_folder, []

        def meanwhile(*args):
            if not calls:
                calls.append(1)    # the other process, between the look and the write
                assert fetch(url, progress=False) == plain
            return real(*args)
        monkeypatch.setattr(download, "make_cache_folder", meanwhile)
        got = fetch(inner, progress=False)
        assert "+tree-" in str(got) and got.read_bytes() == files["/m/elmo/options.json"]
        assert plain.read_bytes() == files["/m/elmo"]
        assert fetch(inner, progress=False) == got and len(server.gets("/m/elmo/options.json")) == 1


def test_a_folder_at_a_path_given_to_fetch_is_one_line(tmp_path):
    """fetch(url, dest=FOLDER) ended in a raw IsADirectoryError after the whole download."""
    with FileServer({"/m/elmo": b"data"}) as server:
        folder = tmp_path / "here"
        (folder / "inside").mkdir(parents=True)
        with pytest.raises(download.DownloadError, match=r"^[^\n]*here: a folder, or a file where a "
                                                         r"folder must be, is in the way[^\n]*$"):
            fetch(server.url("/m/elmo"), dest=folder, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here", "here+.lock"]


@pytest.mark.parametrize("first", ["inner", "outer"])
def test_an_archive_url_inside_another_archive_urls_path_is_unpacked_aside(unmarked_http, first):
    """/m/a.zip is unpacked into the folder m/a.zip, and /m/a.zip/b.zip went into m/a.zip/b.zip,
    inside it: unpacked first, its model (files at the archive's top) was taken for /m/a.zip's,
    the one model folder one level down, without a download or a word. The second now goes
    to a +tree- folder, and each URL gets its own model."""
    from elmo.hub.resolve import fetch_archive
    served = {"/m/a.zip": model_zip("outer", top=""), "/m/a.zip/b.zip": model_zip("inner", top="")}
    order = ["/m/a.zip/b.zip", "/m/a.zip"] if first == "inner" else ["/m/a.zip", "/m/a.zip/b.zip"]
    with FileServer(served) as server:
        for _ in range(2):
            for path in order:
                folder = fetch_archive(server.url(path))
                assert (folder / "which.txt").read_text() == ("inner" if "b.zip" in path else "outer")
                assert not (folder / "b.zip").exists()
        assert all(len(server.gets(path)) == 1 for path in served)
        assert "+tree-" in str(fetch_archive(server.url(order[1])))


def test_an_archive_url_unpacked_inside_the_folder_meanwhile_puts_this_one_aside(unmarked_http, monkeypatch):
    """Another process unpacks /m/a.zip/b.zip (making the folder m/a.zip) after this one chose
    m/a.zip for /m/a.zip: this one took b.zip's model for its own. Asked again under the lock,
    the place is now aside."""
    resolve = __import__("sys").modules["elmo.hub.resolve"]
    served = {"/m/a.zip": model_zip("outer", top=""), "/m/a.zip/b.zip": model_zip("inner", top="")}
    with FileServer(served) as server:
        real, calls = resolve.make_cache_folder, []

        def meanwhile(*args):
            if not calls:
                calls.append(1)     # the other process, between the look and the lock
                assert (resolve.fetch_archive(server.url("/m/a.zip/b.zip")) / "which.txt").read_text() == "inner"
            return real(*args)
        monkeypatch.setattr(resolve, "make_cache_folder", meanwhile)
        folder = resolve.fetch_archive(server.url("/m/a.zip"))
        assert (folder / "which.txt").read_text() == "outer" and "+tree-" in str(folder)
        inner = resolve.fetch_archive(server.url("/m/a.zip/b.zip"))
        assert (inner / "which.txt").read_text() == "inner"
        assert all(len(server.gets(path)) == 1 for path in served)


# ------------------------------------------------------------------ resumes
def test_a_pinned_resume_from_a_part_of_an_earlier_version_starts_over_in_the_same_call(capsys):
    """From a server that names no version of its files, a pinned download resumes its part
    (the pin checks the result). A part of an earlier version of the file (the file changed,
    and so did its pin) made a mix that failed the pin: the call failed, though the server's
    file matched it, and the next call downloaded it whole. The call now starts over itself."""
    old, new = bytes(range(256)) * 2000, bytes(reversed(range(256))) * 2000    # same length
    with FileServer({"/m/file.bin": old}, cut={"/m/file.bin": 1}, validators=False) as server:
        url = server.url("/m/file.bin")
        with pytest.raises(download.DownloadError, match="resumes"):
            fetch(url, sha256=hashlib.sha256(old).hexdigest(), progress=False)
        server.files["/m/file.bin"] = new
        capsys.readouterr()
        assert fetch(url, sha256=hashlib.sha256(new).hexdigest(), progress=False).read_bytes() == new
        assert [r is None for r in server.gets("/m/file.bin")] == [True, False, True]
    assert "does not match the pinned sha256; downloading the whole file again" in capsys.readouterr().err
    dest = cache_path(url)
    assert beside(dest) == [dest.name, dest.name + "+.lock"]
