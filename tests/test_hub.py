"""Published models by name or URL (elmo.hub): every download comes from a local HTTP server
on 127.0.0.1 started by the test (tests/hub_server.py); the real URLs are never contacted."""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path

import h5py
import pytest
import torch

import elmo
from elmo import ConfigError, Elmo, WeightFileError, batch_to_ids
from elmo.cli import main
from elmo.hub import registry
from elmo.hub.archive import ArchiveError, unpack
from elmo.hub.download import DownloadError, cache_path
from tests.conftest import ALLENNLP
from tests.hub_server import FileServer, fresh_model_cache

FIXTURE = Path(elmo.__file__).parent / "resources" / "fixture"
# URL paths shaped like the real ones.
D = "2x64_16_124cnn_2xhighway"
OPTIONS = f"/allennlp/models/elmo/{D}/elmo_{D}_options.json"
WEIGHTS = f"/allennlp/models/elmo/{D}/elmo_{D}_weights.hdf5"
CONF_OPTIONS = "/allennlp/models/elmo/contributed/conformance/elmo_conformance_options.json"
CONF_WEIGHTS = "/allennlp/models/elmo/contributed/conformance/elmo_conformance_weights_only.hdf5"
SENTENCES = [["The", "bank", "closed", "."], ["Hi"]]


cache = pytest.fixture(autouse=True, name="cache")(fresh_model_cache)


def fixture_files():
    return {OPTIONS: FIXTURE / "options.json", WEIGHTS: FIXTURE / "weights.hdf5",
            CONF_OPTIONS: ALLENNLP / "options.json", CONF_WEIGHTS: ALLENNLP / "lm_weights.hdf5"}


def layers(bilm):
    with torch.no_grad():
        return bilm(batch_to_ids(SENTENCES))["activations"]


def files_under(folder: Path):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


# ------------------------------------------------------------------------- the table
def test_model_table_is_well_formed():
    names = registry.names()
    assert len(names) == len(set(names))
    assert {"small", "medium", "original", "original-5.5b", "pubmed", "pt",
            "manylangs-en", "manylangs-zh-hant", "manylangs-zh-hans"} <= set(names)
    assert sum(n.startswith("manylangs-") for n in names) == 45
    pattern = re.compile(r"2x(\d+)_(\d+)_(\d+)cnn_(\d+)xhighway")
    for m in registry.MODELS.values():
        assert re.fullmatch(r"[a-z0-9][a-z0-9.-]*", m.name), m.name
        assert m.format in registry.FORMATS
        assert set(m.urls) == set(registry.URL_KEYS[m.format]), m.name
        for key, url in m.urls.items():
            assert re.match(r"https?://[^/\s]+/\S+$", url), (m.name, url)
            assert m.sha256.get(key) is None or re.fullmatch(r"[0-9a-f]{64}", m.sha256[key])
        if m.format == "original":
            assert m.urls["options"].endswith(".json") and m.urls["weights"].endswith(".hdf5")
        else:
            assert m.urls["archive"].endswith((".zip", ".tar.xz")), m.name
        assert m.language and m.language_code and m.training_data and m.licence
        if m.output_dim is not None:
            assert m.output_dim == 2 * m.projection_dim, m.name
        # Dimensions written in a file name (2x{cells}_{projection}_{filters}cnn_{k}xhighway)
        # must agree with the table's.
        found = pattern.search(m.urls.get("weights", ""))
        if found:
            cells, projection, filters, highway = map(int, found.groups())
            assert (m.lstm_dim, m.projection_dim, m.n_filters, m.n_highway) == \
                (cells, projection, filters, highway), m.name
    manylangs = [m for m in registry.MODELS.values() if m.format == "elmoformanylangs"]
    assert all(m.output_dim == 1024 and m.lstm_dim == 4096 for m in manylangs)
    assert registry.MODELS["manylangs-zh-hant"].urls["archive"].endswith("/179.zip")


def test_estimated_sizes_follow_from_the_dimensions():
    """``~`` sizes are 4 bytes x the parameters the options imply (float32 files)."""
    import math

    from elmo.config import RELEASED_FILTERS
    from elmo.weights import expected_shapes

    filters = [list(f) for f in RELEASED_FILTERS]
    for m in registry.MODELS.values():
        if not m.size_estimated:
            continue
        options = elmo.ElmoOptions.from_dict({
            "lstm": {"dim": m.lstm_dim, "projection_dim": m.projection_dim, "n_layers": m.n_layers,
                     "cell_clip": 3, "proj_clip": 3, "use_skip_connections": True},
            "char_cnn": {"embedding": {"dim": 16}, "filters": filters, "n_highway": m.n_highway,
                         "n_characters": 262, "max_characters_per_token": 50, "activation": "relu"}})
        params = sum(math.prod(s) for s in expected_shapes(options).values())
        assert abs(params / 1e6 - m.parameters_m) < 0.05, m.name
        assert abs(4 * params / 1e6 - m.size_mb) < 0.1, m.name


def test_unknown_name_is_one_clear_error(capsys):
    with pytest.raises(ValueError, match="did you mean small"):
        registry.get("smal")
    assert main(["models", "get", "no-such-model"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no-such-model" in err


@pytest.mark.parametrize("typed, meant", [("manylangs-EN", "manylangs-en"), ("SMALL", "small"),
                                           ("FIXTURE", "fixture"), (" Original ", "original")])
def test_a_name_in_other_capitals_is_offered_first(typed, meant, tmp_path, monkeypatch):
    """difflib tells capitals apart: 'manylangs-EN' was offered manylangs-vi, -ur and -uk, and
    'SMALL' nothing."""
    from elmo import from_pretrained
    from elmo.weights import WeightFileError
    monkeypatch.chdir(tmp_path)                     # (no folder of that name here)
    with pytest.raises(WeightFileError, match=f"did you mean '{meant}'[,?]"):
        from_pretrained(typed)
    if meant != "fixture":
        with pytest.raises(ValueError, match=f"did you mean {meant}[,?]"):
            registry.get(typed)


# ------------------------------------------------------------------------- URLs as paths
def test_urls_load_like_local_files_and_are_cached():
    local = Elmo(str(ALLENNLP / "options.json"), str(ALLENNLP / "lm_weights.hdf5"), 2, dropout=0)
    ids = batch_to_ids(SENTENCES)
    with FileServer(fixture_files()) as server:
        remote = Elmo(server.url(CONF_OPTIONS), server.url(CONF_WEIGHTS), 2, dropout=0)
        by_url = elmo.from_pretrained(server.url(OPTIONS))          # weights found beside it
        by_weights_url = elmo.load_original(server.url(OPTIONS), server.url(WEIGHTS))
        urls = server.url(CONF_OPTIONS), server.url(CONF_WEIGHTS), server.url(OPTIONS)
        assert len(server.gets(CONF_WEIGHTS)) == 1 and len(server.gets(WEIGHTS)) == 1
    for a, b in zip(local(ids)["elmo_representations"], remote(ids)["elmo_representations"]):
        assert torch.equal(a, b)
    from_disk = layers(elmo.from_pretrained("fixture"))
    for a, b in zip(from_disk, layers(by_url)):
        assert torch.equal(a, b)
    for a, b in zip(from_disk, layers(by_weights_url)):
        assert torch.equal(a, b)
    # The server is stopped: the second load is served from the cache.
    again = Elmo(urls[0], urls[1], 2, dropout=0)
    for a, b in zip(local(ids)["elmo_representations"], again(ids)["elmo_representations"]):
        assert torch.equal(a, b)
    for a, b in zip(from_disk, layers(elmo.from_pretrained(urls[2]))):
        assert torch.equal(a, b)
    assert cache_path(urls[1]).read_bytes() == (ALLENNLP / "lm_weights.hdf5").read_bytes()


def test_a_name_from_the_table_downloads_checks_and_gets_a_folder(monkeypatch, cache, capsys):
    with FileServer(fixture_files()) as server:
        entry = registry.PretrainedModel(
            name="test-fixture", format="original", language="English", language_code="en",
            training_data="none (test weights)", licence="Apache-2.0",
            urls={"options": server.url(OPTIONS), "weights": server.url(WEIGHTS)},
            output_dim=32, projection_dim=16, lstm_dim=64, n_layers=2, n_filters=124, n_highway=2)
        monkeypatch.setitem(registry.MODELS, entry.name, entry)
        assert main(["models", "get", "test-fixture"]) == 0
        folder = elmo.model_path("test-fixture")
        # A table entry whose dimensions disagree with the options is refused, nothing cached.
        wrong = replace(entry, name="test-wrong", output_dim=64, projection_dim=32,
                        urls={"options": server.url(CONF_OPTIONS), "weights": server.url(CONF_WEIGHTS)})
        monkeypatch.setitem(registry.MODELS, wrong.name, wrong)
        with pytest.raises(ConfigError, match="output_dim is 32 but the model table says 64"):
            elmo.from_pretrained("test-wrong")
        assert cache_path(server.url(CONF_OPTIONS)).parent.exists()
        assert files_under(cache_path(server.url(CONF_OPTIONS)).parent) == [
            "elmo_conformance_options.json+.lock"]
    assert sorted(p.name for p in folder.iterdir()) == ["options.json", "weights.hdf5"]
    for a, b in zip(layers(elmo.from_pretrained("fixture")), layers(elmo.from_pretrained(folder))):
        assert torch.equal(a, b)
    capsys.readouterr()
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^test-fixture\s+yes\s", out, re.M) and re.search(r"^small\s+no\s", out, re.M)
    assert main(["info", "test-fixture"]) == 0       # served from the cache: the server is gone
    assert "layers: 3 of width 32" in capsys.readouterr().out
    monkeypatch.setenv("ELMO_OFFLINE", "1")           # offline: the cache is enough
    assert main(["models", "get", "test-fixture"]) == 0


def test_models_list_checks_the_pins_of_single_files(monkeypatch, capsys):
    """elmo models list marked an options + weights model cached whenever its files were there,
    one changed on disk since included (an archive's folder is checked against its pin)."""
    import hashlib
    with FileServer(fixture_files()) as server:
        pins = {"options": hashlib.sha256((FIXTURE / "options.json").read_bytes()).hexdigest(),
                "weights": hashlib.sha256((FIXTURE / "weights.hdf5").read_bytes()).hexdigest()}
        entry = registry.PretrainedModel(
            name="test-pinned", format="original", language="English", language_code="en",
            training_data="none (test weights)", licence="Apache-2.0",
            urls={"options": server.url(OPTIONS), "weights": server.url(WEIGHTS)}, sha256=pins)
        monkeypatch.setitem(registry.MODELS, entry.name, entry)
        assert main(["models", "get", "test-pinned"]) == 0
        capsys.readouterr()
        assert main(["models", "list"]) == 0
        assert re.search(r"^test-pinned\s+yes\s", capsys.readouterr().out, re.M)
        weights = cache_path(server.url(WEIGHTS))
        weights.write_bytes(weights.read_bytes()[:-1] + b"\0")      # damaged on disk
        assert main(["models", "list"]) == 0
        assert re.search(r"^test-pinned\s+no\s", capsys.readouterr().out, re.M)


def test_urls_that_differ_in_their_query_are_cached_apart(cache):
    """The query string was dropped from the cache path: two URLs that differ only in it (a
    version, a signed token) shared one cached file, and the second got the first's bytes.
    A URL without a query keeps the path it had."""
    from elmo.hub.download import fetch
    assert cache_path("https://h.org/m/w.hdf5") == cache / "models" / "files" / "h.org" / "m" / "w.hdf5"
    one, two = cache_path("https://h.org/m/w.hdf5?v=1"), cache_path("https://h.org/m/w.hdf5?v=2")
    assert one != two and one.name == two.name == "w.hdf5" and one.parent.parent == cache_path(
        "https://h.org/m/w.hdf5").parent
    assert cache_path("https://h.org/m/w.hdf5?v=1#part") == one
    # made safe, two paths were one name ('a b' -> 'a_b'); one quoted or not is the same path
    spaced, underscored = cache_path("https://h.org/m/a b.hdf5"), cache_path("https://h.org/m/a_b.hdf5")
    assert spaced != underscored and spaced.name == underscored.name == "a_b.hdf5"
    assert cache_path("https://h.org/m/a%20b.hdf5") == spaced
    assert underscored == cache / "models" / "files" / "h.org" / "m" / "a_b.hdf5"
    # dropped parts: '/m/../a.hdf5' is the server's /a.hdf5, and was cached as /m/a.hdf5
    plain = cache_path("https://h.org/m/a.hdf5")
    dotted = {cache_path(f"https://h.org{p}") for p in ("/m/../a.hdf5", "/m/./a.hdf5", "/m//a.hdf5", "/m/a.hdf5/")}
    assert len(dotted) == 4 and plain not in dotted
    assert all(p.is_relative_to(cache / "models" / "files" / "h.org") for p in dotted)
    with FileServer({"/m/w.bin?v=1": b"version one", "/m/w.bin?v=2": b"version two"}) as server:
        assert fetch(server.url("/m/w.bin?v=1"), progress=False).read_bytes() == b"version one"
        assert fetch(server.url("/m/w.bin?v=2"), progress=False).read_bytes() == b"version two"


def test_http_and_https_of_one_url_are_cached_apart(cache):
    """http://H/P and https://H/P shared one cached file, though they can serve different
    bytes: one downloaded by either was the other's. Now each scheme has its own path. The
    path without a scheme mark stays with https (and with the scheme a published model's URL
    has), so the published models' cached files are where they were."""
    from elmo.hub.download import cached, fetch
    plain, secure = cache_path("http://h.org/m/w.hdf5"), cache_path("https://h.org/m/w.hdf5")
    assert plain != secure and plain.name == secure.name == "w.hdf5"
    assert secure == cache / "models" / "files" / "h.org" / "m" / "w.hdf5"
    with FileServer({"/m/w.bin": b"over http"}) as server:
        url = server.url("/m/w.bin")
        assert url.startswith("http://")
        assert fetch(url, progress=False).read_bytes() == b"over http"
        assert cached(url) is not None and cached("https://" + url[len("http://"):]) is None


def test_a_login_comes_from_netrc_so_the_url_need_not_hold_it(tmp_path, monkeypatch):
    """A server that wants a login is reached with the $NETRC file's login for its host (the
    way to keep a password out of URLs that experiments record); without one it is a 401."""
    from elmo.hub.download import fetch
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    with FileServer({"/m/w.bin": b"behind a login"}, login=("ann", "s3cret")) as server:
        with pytest.raises(DownloadError, match="401"):
            fetch(server.url("/m/w.bin"), progress=False)
        netrc = tmp_path / "netrc"
        netrc.write_text("machine 127.0.0.1 login ann password s3cret\n")
        netrc.chmod(0o600)
        monkeypatch.setenv("NETRC", str(netrc))
        assert fetch(server.url("/m/w.bin"), progress=False).read_bytes() == b"behind a login"
        # a login in the URL itself still works where nothing records it
        with_password = server.url("/m/v.bin").replace("://", "://ann:s3cret@")
        server.files["/m/v.bin"] = b"by the URL's login"
        monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
        assert fetch(with_password, progress=False).read_bytes() == b"by the URL's login"


def test_the_published_models_are_cached_where_they_were(cache):
    """Every published URL keeps the cache path it had before schemes were told apart:
    ``models/files/HOST/PATH`` (``models/unpacked/...`` for an archive), whatever its scheme;
    only the other scheme's twin of a published URL gets a path of its own."""
    from urllib.parse import urlsplit

    from elmo.hub.resolve import unpacked_path
    for m in registry.MODELS.values():
        for url in m.urls.values():
            parts = urlsplit(url)
            tail = [p for p in parts.path.split("/") if p]
            assert cache_path(url) == cache.joinpath("models", "files", parts.netloc, *tail), url
            assert unpacked_path(url) == cache.joinpath("models", "unpacked", parts.netloc, *tail), url
            other = ("https" if parts.scheme == "http" else "http") + url[len(parts.scheme):]
            assert cache_path(other) != cache_path(url), url
            # the host spelled in capitals is the same host: the same file
            shouted = url.replace(parts.netloc, parts.netloc.upper(), 1)
            assert cache_path(shouted) == cache_path(url) and unpacked_path(shouted) == unpacked_path(url), url


def test_a_host_in_capitals_is_cached_as_the_host():
    """Example.COM and example.com are one host, but they got two cached copies of one file;
    the user part of a URL keeps its case."""
    assert cache_path("https://Example.COM:8080/m/a.hdf5") == cache_path("https://example.com:8080/m/a.hdf5")
    assert cache_path("https://Ann@Example.com/m/a.hdf5") != cache_path("https://ann@example.com/m/a.hdf5")


def test_a_server_that_is_not_there_is_one_line(monkeypatch):
    with FileServer({}) as server:
        url = server.url(OPTIONS)
    with pytest.raises(DownloadError) as err:             # the port is closed now
        elmo.from_pretrained(url)
    assert str(err.value) == f"{url}: download failed (connection refused)"


def test_cli_embed_and_info_take_a_url(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("The bank closed .\n")
    with FileServer(fixture_files()) as server:
        assert main(["info", server.url(OPTIONS)]) == 0
        assert "parameters:" in capsys.readouterr().out
        assert main(["embed", str(text), str(tmp_path / "out.hdf5"), "--model",
                     server.url(WEIGHTS)]) == 0
    with h5py.File(tmp_path / "out.hdf5") as f:
        assert f["0"].shape == (3, 4, 32)


# ------------------------------------------------------------------------- failures
def test_a_cut_download_is_an_error_and_the_next_call_resumes(cache):
    weights = (ALLENNLP / "lm_weights.hdf5").read_bytes()
    with FileServer(fixture_files(), cut={CONF_WEIGHTS: 1}) as server:
        with pytest.raises(DownloadError) as err:
            elmo.load_original(server.url(CONF_OPTIONS), server.url(CONF_WEIGHTS))
        message = str(err.value)
        assert "\n" not in message and server.url(CONF_WEIGHTS) in message and "resume" in message
        dest = cache_path(server.url(CONF_WEIGHTS))
        part = dest.with_name(dest.name + "+.part")
        kept = part.stat().st_size           # what arrived, less the chunk being read
        assert not dest.exists() and 0 < kept <= len(weights) // 2
        elmo.load_original(server.url(CONF_OPTIONS), server.url(CONF_WEIGHTS))
        assert server.gets(CONF_WEIGHTS) == [None, f"bytes={kept}-"]
    assert dest.read_bytes() == weights
    assert [f for f in files_under(dest.parent) if "weights" in f] == [dest.name, dest.name + "+.lock"]


def test_without_range_support_the_next_call_starts_over(cache):
    with FileServer(fixture_files(), cut={WEIGHTS: 1}, ranges=False) as server:
        with pytest.raises(DownloadError):
            elmo.from_pretrained(server.url(OPTIONS))
        bilm = elmo.from_pretrained(server.url(OPTIONS))
        assert len(server.gets(WEIGHTS)) == 2
    assert cache_path(server.url(WEIGHTS)).read_bytes() == (FIXTURE / "weights.hdf5").read_bytes()
    for a, b in zip(layers(elmo.from_pretrained("fixture")), layers(bilm)):
        assert torch.equal(a, b)


def test_retries_resume_within_one_call(monkeypatch):
    monkeypatch.setenv("ELMO_DOWNLOAD_RETRIES", "1")
    with FileServer(fixture_files(), cut={WEIGHTS: 1}) as server:
        elmo.from_pretrained(server.url(WEIGHTS))
        assert len(server.gets(WEIGHTS)) == 2 and server.gets(WEIGHTS)[1].startswith("bytes=")



@pytest.mark.parametrize("extra", [b"", b"xx"])
def test_a_part_as_long_as_the_file_or_longer_is_downloaded_again(extra):
    """A run killed after the last byte arrived (or a file that shrank) leaves a part the
    server answers with 416: that failed the call (with no retries left) instead of starting
    over."""
    weights = (FIXTURE / "weights.hdf5").read_bytes()
    with FileServer(fixture_files()) as server:
        dest = cache_path(server.url(WEIGHTS))
        dest.parent.mkdir(parents=True)
        dest.with_name(dest.name + "+.part").write_bytes(weights + extra)
        # (and the version the part began with, as a run saves it: a part without one starts over)
        import hashlib
        etag = '"' + hashlib.sha256(weights).hexdigest()[:16] + '"'
        dest.with_name(dest.name + "+.part.json").write_text(json.dumps({"validator": etag}))
        elmo.from_pretrained(server.url(WEIGHTS))
        assert server.gets(WEIGHTS) == [f"bytes={len(weights + extra)}-", None]
    assert dest.read_bytes() == weights


def test_a_resume_answered_with_another_range_starts_over(cache, monkeypatch):
    """A 206 whose Content-Range does not start where the part ends (a broken server or
    proxy) was appended to the part: a wrong file, which here met the NaN check by luck and
    could as well load as other weights."""
    weights = (ALLENNLP / "lm_weights.hdf5").read_bytes()
    with FileServer(fixture_files(), cut={CONF_WEIGHTS: 1}, wrong_ranges=True) as server:
        url = server.url(CONF_WEIGHTS)
        with pytest.raises(DownloadError, match="resumes"):
            elmo.load_original(server.url(CONF_OPTIONS), url)
        with pytest.raises(DownloadError, match=r"asked to resume at byte [\d,]+, the server sent "
                                                r"bytes from 0; the part is dropped"):
            elmo.load_original(server.url(CONF_OPTIONS), url)
        monkeypatch.setenv("ELMO_DOWNLOAD_RETRIES", "1")        # the part was dropped:
        elmo.load_original(server.url(CONF_OPTIONS), url)       # a whole download, no Range
        assert server.gets(CONF_WEIGHTS)[-1] is None
    assert cache_path(url).read_bytes() == weights

def _with_bad_shape(path: Path) -> bytes:
    """The weight file with one dataset of the wrong shape (a readable, wrong HDF5 file)."""
    buffer = io.BytesIO()
    with h5py.File(path) as src, h5py.File(buffer, "w") as dst:
        def copy(name, obj):
            if isinstance(obj, h5py.Dataset):
                data = obj[...]
                dst.create_dataset(name, data=data[:-1] if name == "CNN_proj/b_proj" else data)
        src.visititems(copy)
    return buffer.getvalue()


def test_corrupt_or_truncated_weights_are_rejected_and_not_cached(cache):
    weights = (FIXTURE / "weights.hdf5").read_bytes()
    files = fixture_files()
    files["/m/truncated/elmo_t_weights.hdf5"] = weights[: len(weights) * 2 // 3]
    files["/m/truncated/elmo_t_options.json"] = FIXTURE / "options.json"
    files["/m/shape/elmo_s_weights.hdf5"] = _with_bad_shape(FIXTURE / "weights.hdf5")
    files["/m/shape/elmo_s_options.json"] = FIXTURE / "options.json"
    files["/m/garbage/elmo_g_options.json"] = b"{not json"
    with FileServer(files) as server:
        with pytest.raises(WeightFileError, match="truncated or corrupt") as err:
            elmo.from_pretrained(server.url("/m/truncated/elmo_t_options.json"))
        # named by its URL, not by the temporary file checked (deleted with the error)
        assert str(err.value).startswith(server.url("/m/truncated/elmo_t_weights.hdf5") + ": ")
        assert ".download" not in str(err.value) and "not kept" in str(err.value)
        with pytest.raises(WeightFileError, match=r"CNN_proj/b_proj.*expected \(16,\)"):
            Elmo(server.url("/m/shape/elmo_s_options.json"), server.url("/m/shape/elmo_s_weights.hdf5"))
        with pytest.raises(ConfigError, match="not valid JSON"):
            elmo.from_pretrained(server.url("/m/garbage/elmo_g_options.json"))
        for name in ("truncated", "shape", "garbage"):
            folder = cache_path(server.url(f"/m/{name}/x"))
            assert not [f for f in files_under(folder.parent) if not f.endswith(".lock")
                        and "options.json" not in f], name
        # A checksum pinned in the table is checked: a wrong one keeps nothing.
        assert not cache_path(server.url(WEIGHTS)).exists()
        from elmo.hub.download import fetch
        with pytest.raises(DownloadError, match="hash"):
            fetch(server.url(WEIGHTS), sha256="0" * 64, progress=False)
        assert not cache_path(server.url(WEIGHTS)).exists()
        import hashlib
        good = hashlib.sha256(weights).hexdigest()
        assert fetch(server.url(WEIGHTS), sha256=good, progress=False).read_bytes() == weights


def test_a_404_is_one_line_naming_the_url(capsys):
    with FileServer(fixture_files()) as server:
        missing = server.url("/allennlp/models/elmo/nothing/elmo_nothing_options.json")
        with pytest.raises(DownloadError) as err:
            elmo.from_pretrained(missing)
        assert str(err.value) == f"{missing}: HTTP 404 Not Found"
        capsys.readouterr()
        assert main(["info", missing]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"downloading {missing}", f"elmo info: error: {missing}: HTTP 404 Not Found"]


@pytest.mark.parametrize("value", ["off", "0", "false", "No", " ", ""])
def test_elmo_offline_switched_off_downloads(value, monkeypatch):
    """ELMO_OFFLINE=off (anything but "", 0, false, no) was read as on: the cache only."""
    monkeypatch.setenv("ELMO_OFFLINE", value)
    with FileServer(fixture_files()) as server:
        elmo.from_pretrained(server.url(OPTIONS))      # downloaded, not "ELMO_OFFLINE is set"


@pytest.mark.parametrize("value", ["1", "on", "TRUE", "yes"])
def test_elmo_offline_switched_on_uses_the_cache_only(value, monkeypatch):
    monkeypatch.setenv("ELMO_OFFLINE", value)
    with pytest.raises(DownloadError, match="ELMO_OFFLINE is set"):
        elmo.from_pretrained("http://127.0.0.1:9/allennlp/models/elmo/x/elmo_x_options.json")


@pytest.mark.parametrize("variable, argv", [("ELMO_OFFLINE", ["models", "get", "small"]),
                                            ("ELMO_DEBUG", ["info", "no-such-model"])])
def test_an_unknown_switch_value_is_one_line_naming_the_variable(variable, argv, monkeypatch, capsys):
    """ELMO_OFFLINE=maybe was on, ELMO_DEBUG=false was on (a traceback for each error)."""
    monkeypatch.setenv(variable, "maybe")
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{variable}='maybe' in the environment: expected 1, true, yes, on" in err[0], err
    if variable == "ELMO_DEBUG":
        monkeypatch.setenv(variable, "false")               # off: one line, no traceback
        assert main(argv) == 1
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_offline_with_an_empty_cache_is_one_clear_line(monkeypatch, capsys):
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    url = "http://127.0.0.1:9/allennlp/models/elmo/x/elmo_x_options.json"   # never contacted
    with pytest.raises(DownloadError, match=r"ELMO_OFFLINE is set and .* is not in the cache"):
        elmo.from_pretrained(url)
    assert main(["models", "get", "small"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ELMO_OFFLINE" in err and "elmo_2x1024" in err
    # (a newcomer offline learns that the bundled model needs no download)
    assert "bundled models need no download" in err and "--model default" in err


def test_device_and_stateful_are_checked_before_a_download(monkeypatch):
    """from_pretrained("small", device="gpu") (or stateful="no") and Elmo(options_url,
    weights_url, device="gpu") downloaded the model first and refused the argument after
    it; Elmo(options_file, weight_file, stateful="no") loaded a stateful model (bool("no")).
    Each is now refused before any file is read (offline with an empty cache: no
    DownloadError comes first)."""
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    url = "http://127.0.0.1:9/allennlp/models/elmo/x/elmo_x_options.json"   # never contacted
    weights = url.replace("options.json", "weights.hdf5")
    with pytest.raises(ValueError, match="^device 'gpu': expected cpu, cuda, cuda:N or auto$"):
        elmo.from_pretrained("small", device="gpu")
    with pytest.raises(TypeError, match="stateful must be True or False, got str: 'no'"):
        elmo.from_pretrained("small", stateful="no")
    with pytest.raises(ValueError, match="^device 'gpu': expected cpu, cuda, cuda:N or auto$"):
        Elmo(url, weights, 1, device="gpu")
    with pytest.raises(TypeError, match="stateful must be True or False, got str: 'no'"):
        Elmo(str(ALLENNLP / "options.json"), str(ALLENNLP / "lm_weights.hdf5"), 1, stateful="no")
    assert not Elmo(str(ALLENNLP / "options.json"), str(ALLENNLP / "lm_weights.hdf5"), 1).bilm.stateful


_FETCH_IN_A_PROCESS = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("hub_download", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(module.fetch(sys.argv[2], progress=False))
"""


def test_two_processes_fetching_the_same_file_both_succeed_with_one_copy(cache):
    """The download module needs no torch, so each process starts fast; the server spreads the
    file over ~3 s and the second process starts once the first has asked for it, so without
    the lock it would download a second copy."""
    import elmo.hub.download as download

    weights = (ALLENNLP / "lm_weights.hdf5").read_bytes()
    env = {**__import__("os").environ, "ELMO_HOME": str(cache)}
    with FileServer(fixture_files(), seconds_per_file=3.0) as server:
        url = server.url(CONF_WEIGHTS)
        cmd = [sys.executable, "-c", _FETCH_IN_A_PROCESS, download.__file__, url]
        first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        import time
        deadline = time.time() + 30
        while not server.gets(CONF_WEIGHTS) and time.time() < deadline:
            time.sleep(0.02)
        second = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        outs = [p.communicate(timeout=60) for p in (first, second)]
        assert [p.returncode for p in (first, second)] == [0, 0], outs
        assert len(server.gets(CONF_WEIGHTS)) == 1
    dest = cache_path(url)
    assert outs[0][0].strip() == outs[1][0].strip() == str(dest)
    assert dest.read_bytes() == weights
    assert files_under(dest.parent) == sorted([dest.name, dest.name + "+.lock"])


_FETCH_WITHOUT_THE_PACKAGE = """
import importlib.abc, importlib.util, json, sys

class Refused(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("elmo", "torch"):
            raise ImportError(f"{name} imported by the download module loaded alone")

sys.meta_path.insert(0, Refused())
spec = importlib.util.spec_from_file_location("hub_download", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
fetched = str(module.fetch(sys.argv[2], progress=False))
try:
    module.fetch(sys.argv[3], progress=False)
    error = None
except module.DownloadError as e:   # (the class its siblings raise: one copy of each module)
    error = str(e)
print(json.dumps({"fetched": fetched, "error": error,
                  "loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("elmo", "torch"))}))
"""


def test_the_download_module_loaded_alone_imports_nothing_of_the_package_nor_torch(cache):
    """download.py loaded by its path (a process that only fetches) loads its five sibling
    modules by their paths; none may import the package or torch, which the installed package
    would otherwise quietly supply (an import of ``elmo.<module>`` still worked there, from
    whichever copy is installed, and torch made each such process slow to start)."""
    import elmo.hub.download as download

    env = {**__import__("os").environ, "ELMO_HOME": str(cache)}
    with FileServer(fixture_files()) as server:
        cmd = [sys.executable, "-c", _FETCH_WITHOUT_THE_PACKAGE, download.__file__, server.url(CONF_OPTIONS),
               server.url("/no/such/file.json")]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["loaded"] == []
    assert said["fetched"] == str(cache_path(server.url(CONF_OPTIONS)))
    assert said["error"] is not None and "HTTP 404" in said["error"], said


# ------------------------------------------------------------------------- archives
def _zip(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buffer.getvalue()


def _tar(members: dict, mode: str = "w:xz", links: dict = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            t.addfile(info)
    return buffer.getvalue()


def _manylangs_folder(prefix: str) -> dict:
    """The files of an ELMoForManyLangs model folder (the conformance fixture's tiny model: an
    archive's model is loaded before it is kept)."""
    folder = Path(__file__).parent / "fixtures" / "elmoformanylangs" / "model"
    return {f"{prefix}{p.name}": p.read_bytes() for p in sorted(folder.iterdir())}


def test_archives_are_unpacked_and_the_model_folder_found(monkeypatch, tmp_path):
    nested = {k: v.encode() if isinstance(v, str) else v for k, v in _manylangs_folder("144/").items()}
    flat = {k: v.encode() if isinstance(v, str) else v for k, v in _manylangs_folder("").items()}
    files = {"/repository/11/144.zip": _zip(nested), "/zhs.model.tar.xz": _tar(flat),
             "/repository/11/999.zip": _zip({"readme.txt": b"no model here"})}
    with FileServer(files) as server:
        for name, path in (("manylangs-en", "/repository/11/144.zip"),
                           ("manylangs-zh-hans", "/zhs.model.tar.xz")):
            entry = replace(registry.MODELS[name], urls={"archive": server.url(path)})
            monkeypatch.setitem(registry.MODELS, name, entry)
        from elmo.hub.resolve import resolve
        en = resolve("manylangs-en").folder
        zh = resolve("manylangs-zh-hans").folder
        assert en.name == "144" and (en / "config.json").is_file()
        assert (zh / "config.json").is_file() and (zh / "encoder.pkl").is_file()
        assert elmo.model_path("manylangs-en") == en
        with pytest.raises(ArchiveError, match="no folder with config.json") as err:
            resolve(server.url("/repository/11/999.zip"))
        # named by its URL, not by the unpacking folder (deleted with the error)
        assert str(err.value).startswith(server.url("/repository/11/999.zip") + ": the archive")
        assert len(server.gets("/repository/11/144.zip")) == 1
    assert resolve("manylangs-en").folder == en          # cached: the server is gone
    # The archives themselves are not kept once unpacked.
    assert not [p for p in Path(__import__("os").environ["ELMO_HOME"]).rglob("*.zip") if p.is_file()]


def test_a_model_archive_url_loads_like_the_folder():
    files = {"model/options.json": (FIXTURE / "options.json").read_bytes(),
             "model/weights.hdf5": (FIXTURE / "weights.hdf5").read_bytes()}
    with FileServer({"/models/fixture.tar.gz": _tar(files, "w:gz")}) as server:
        bilm = elmo.from_pretrained(server.url("/models/fixture.tar.gz"))
    for a, b in zip(layers(elmo.from_pretrained("fixture")), layers(bilm)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("members", [
    {"model/config.json": "native"},                    # the native layout's options, no weights
    {"model/config.json": b'{"note": 1}'},              # a config.json of no model
    {"model/options.json": (FIXTURE / "options.json").read_bytes()},   # options, no weight file
])
def test_an_archive_without_a_whole_model_is_not_kept(tmp_path, members):
    """An archive whose folder holds a config.json but no model that loads was kept (only its
    JSON was read): listed as cached, it failed at every load, naming a folder in the cache
    without saying how to clear it, and was never downloaded again. (An options.json without
    its weights was refused in words about a config.json the archive does not hold.) Now the
    model must load before it is kept, as for the other layouts."""
    if members.get("model/config.json") == "native":
        elmo.save_pretrained(elmo.from_pretrained("fixture"), tmp_path / "native")
        members = {"model/config.json": (tmp_path / "native" / "config.json").read_bytes()}
    with FileServer({"/m/model.tar.gz": _tar(members, "w:gz")}) as server:
        url = server.url("/m/model.tar.gz")
        for _ in range(2):   # (nothing kept: the second call downloads it again)
            with pytest.raises(WeightFileError, match=re.escape(f"{url}/model: expected config.json + "
                                                                f"model.safetensors, or options.json")) as e:
                elmo.from_pretrained(url)
            assert str(e.value).endswith("(the download is not kept)")
        assert len(server.gets("/m/model.tar.gz")) == 2


@pytest.mark.parametrize("kind", ["zip-dotdot", "tar-dotdot", "tar-absolute", "tar-link-out"])
def test_an_archive_member_outside_the_folder_is_refused(tmp_path, kind):
    evil = {"model/config.json": b"{}", "../evil.txt": b"x"}
    data = {"zip-dotdot": lambda: _zip(evil),
            "tar-dotdot": lambda: _tar(evil, "w:gz"),
            "tar-absolute": lambda: _tar({"model/config.json": b"{}", "/tmp/evil.txt": b"x"}, "w:bz2"),
            "tar-link-out": lambda: _tar({"model/config.json": b"{}"}, "w",
                                         links={"model/escape": "../../outside"})}[kind]()
    archive = tmp_path / ("a.zip" if kind.startswith("zip") else "a.tar")
    archive.write_bytes(data)
    with pytest.raises(ArchiveError, match="refusing to unpack"):
        unpack(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "evil.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]


def test_an_unsafe_archive_from_a_url_is_refused_and_not_kept(cache):
    evil = _zip({"model/config.json": b"{}", "../../evil.txt": b"x"})
    with FileServer({"/repository/11/666.zip": evil}) as server:
        with pytest.raises(ArchiveError, match=r"'\.\./\.\./evil\.txt'.*refusing"):
            elmo.from_pretrained(server.url("/repository/11/666.zip"))
    assert not [p for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".lock")]


def test_a_file_as_elmo_home_is_one_line_naming_the_variable(tmp_path, monkeypatch, capsys):
    """(It failed with "Not a directory" on a path inside it, naming no setting.)"""
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("ELMO_HOME", str(home))
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    assert main(["models", "path", "small"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "$ELMO_HOME is a file, not a folder" in err


@pytest.mark.parametrize("mode, suffix", [("w:gz", "tar.gz"), ("w:xz", "tar.xz")])
def test_a_damaged_byte_inside_a_compressed_tar_is_refused(tmp_path, mode, suffix):
    """tarfile stops reading at the end-of-archive blocks, before the stream's checksum, so a
    flipped byte in a member's data was unpacked without an error (gzip, xz), or a damaged xz
    stream met a raw LZMAError."""
    import random
    payload = random.Random(0).randbytes(100_000)    # random bytes: stored, not compressed
    data = bytearray(_tar({"model/config.json": b"{}", "model/weights.bin": payload}, mode))
    data[len(data) // 2] ^= 0xFF
    archive = tmp_path / f"a.{suffix}"
    archive.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match=r"not a readable zip or tar archive \(truncated or corrupt\?\)") as e:
        unpack(archive, tmp_path / "out")
    assert "\n" not in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_an_unpacked_archive_has_the_permissions_of_a_new_folder(tmp_path, kind):
    """The folder is unpacked in a temporary one (mkdtemp's, mode 0700) and renamed: it kept
    that mode, so a model cache shared by a group held models the others could not read."""
    import os
    path = tmp_path / f"a.{kind}"
    members = {"model/config.json": b"{}"}
    path.write_bytes(_zip(members) if kind == "zip" else _tar(members, "w:gz"))
    umask = os.umask(0o027)
    try:
        unpack(path, tmp_path / "out")
    finally:
        os.umask(umask)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o750


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_an_archive_that_does_not_fit_on_the_disk_writes_nothing(tmp_path, monkeypatch, kind):
    """(It was unpacked until the disk was full, then reported as a corrupt archive.)"""
    import shutil
    from collections import namedtuple

    from elmo.hub import archive as archive_module
    members = {"model/config.json": b"{}", "model/big.bin": b"\0" * 3_000_000}
    path = tmp_path / f"a.{kind}"
    path.write_bytes(_zip(members) if kind == "zip" else _tar(members, "w:gz"))
    usage = namedtuple("usage", "total used free")
    free = archive_module.FREE_SPACE_RESERVE + 1_000_000
    monkeypatch.setattr(shutil, "disk_usage", lambda folder: usage(10 * free, 9 * free, free))
    with pytest.raises(ArchiveError, match=r"unpacks to 3\.0 MB but .* has .* MB free.*ELMO_HOME"):
        unpack(path, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_a_write_error_while_unpacking_is_named_as_such(tmp_path, kind):
    """A file system error (here a file size limit; a full disk reads the same) is named with
    the folder and its reason, not called a corrupt archive (tar) or raised raw (zip)."""
    import resource
    import signal
    members = {"model/config.json": b"{}", "model/big.bin": bytes(range(256)) * 4096}
    path = tmp_path / f"a.{kind}"
    path.write_bytes(_zip(members) if kind == "zip" else _tar(members, "w:gz"))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))
    try:
        with pytest.raises(ArchiveError, match=r"cannot unpack a\.(zip|tar) there: File too large; nothing was kept"):
            unpack(path, tmp_path / "out")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_what_a_killed_unpack_left_is_removed_by_the_next_one(cache):
    """A run killed while unpacking left its temporary folder (a model's size) for good; it was
    never mistaken for the model, and is now removed when the archive is unpacked again."""
    from elmo.hub.resolve import unpacked_path
    files = {"model/options.json": (FIXTURE / "options.json").read_bytes(),
             "model/weights.hdf5": (FIXTURE / "weights.hdf5").read_bytes()}
    with FileServer({"/models/fixture.tar.gz": _tar(files, "w:gz")}) as server:
        url = server.url("/models/fixture.tar.gz")
        dest = unpacked_path(url)
        # (this version's temporary folder, and one of a version before the "+" names, which
        # also left its lock DEST.lock)
        for stale in (dest.parent / f".{dest.name}+.partial.k1ll3d00.tmp",
                      dest.parent / f".{dest.name}.unpacking.k1ll3d00.tmp"):
            (stale / "model").mkdir(parents=True)
            (stale / "model" / "options.json").write_bytes(files["model/options.json"])
        dest.with_name(dest.name + ".lock").touch()
        with pytest.raises(WeightFileError):     # not a model yet: nothing mistaken for one
            elmo.load_pretrained(dest)
        elmo.from_pretrained(url)
    assert sorted(p.name for p in dest.parent.iterdir()) == [dest.name, dest.name + "+.lock",
                                                              dest.name + "+.sha256"]


def test_a_pinned_archive_is_not_taken_from_a_folder_unpacked_without_that_pin(cache):
    """The archive is deleted once unpacked, and a folder unpacked from it was used under any
    pin, one never checked included; now the archive's digest is kept beside the folder and a
    pin that differs fetches the archive again (and refuses it on a mismatch)."""
    import hashlib

    from elmo.hub.resolve import fetch_archive
    files = {"model/options.json": (FIXTURE / "options.json").read_bytes(),
             "model/weights.hdf5": (FIXTURE / "weights.hdf5").read_bytes()}
    archive = _tar(files, "w:gz")
    with FileServer({"/models/fixture.tar.gz": archive}) as server:
        url = server.url("/models/fixture.tar.gz")
        folder = fetch_archive(url)
        with pytest.raises(DownloadError, match="SHA256"):
            fetch_archive(url, sha256="0" * 64)
        # (the refused download left the folder, and the digest kept beside it is this pin's)
        assert fetch_archive(url, sha256=hashlib.sha256(archive).hexdigest()) == folder
        assert len(server.gets("/models/fixture.tar.gz")) == 2
        assert fetch_archive(url, sha256=hashlib.sha256(archive).hexdigest()) == folder
        assert len(server.gets("/models/fixture.tar.gz")) == 2
    assert elmo.load_pretrained(folder) is not None


def test_an_unpacked_folder_stays_while_its_replacement_is_fetched_and_after_a_failure(cache, monkeypatch):
    """A pin that the unpacked folder does not match deleted the folder before downloading the
    archive again: a reader meanwhile (unpinned) found no model, and a refused or interrupted
    download lost the cache. Now the folder stays until its replacement is unpacked and checked,
    and the two swap in one step."""
    import hashlib

    resolve = sys.modules["elmo.hub.resolve"]   # (the package's name `resolve` is its function)
    files = {"model/options.json": (FIXTURE / "options.json").read_bytes(),
             "model/weights.hdf5": (FIXTURE / "weights.hdf5").read_bytes()}
    archive = _tar(files, "w:gz")
    with FileServer({"/models/fixture.tar.gz": archive}) as server:
        url = server.url("/models/fixture.tar.gz")
        folder = resolve.fetch_archive(url)
        digest = resolve._archive_digest_file(resolve.unpacked_path(url))
        digest.write_text("0" * 64 + "\n")     # as if unpacked from another archive
        with pytest.raises(DownloadError, match="SHA256"):
            resolve.fetch_archive(url, sha256="1" * 64)
        assert elmo.load_pretrained(folder) is not None     # the old folder is still there
        unpack, seen = resolve.unpack, []

        def unpack_seen(path, dest):
            seen.append(files_under(folder))                # what a reader finds meanwhile
            return unpack(path, dest)
        monkeypatch.setattr(resolve, "unpack", unpack_seen)
        assert resolve.fetch_archive(url, sha256=hashlib.sha256(archive).hexdigest()) == folder
    assert seen == [["options.json", "weights.hdf5"]]
    assert digest.read_text().strip() == hashlib.sha256(archive).hexdigest()
    assert sorted(p.name for p in folder.parent.parent.iterdir()) == sorted(
        [folder.parent.name, folder.parent.name + "+.lock", digest.name])


# ------------------------------------------------------------------------- the cache on disk
def test_a_pinned_checksum_is_checked_on_the_cached_file_too(cache, capsys):
    """A file cached before its checksum was pinned, or damaged on disk since, was returned as
    it was whenever it existed; now the pin decides, and a mismatch is downloaded again."""
    import hashlib

    from elmo.hub.download import fetch
    weights = (FIXTURE / "weights.hdf5").read_bytes()
    good = hashlib.sha256(weights).hexdigest()
    with FileServer(fixture_files()) as server:
        url = server.url(WEIGHTS)
        path = fetch(url, progress=False)
        damaged = bytearray(weights)
        damaged[len(damaged) // 2] ^= 0x01                       # one flipped bit
        path.write_bytes(bytes(damaged))
        assert fetch(url, progress=False).read_bytes() == bytes(damaged)   # no pin: as cached
        assert fetch(url, sha256=good, progress=False).read_bytes() == weights
        assert len(server.gets(WEIGHTS)) == 2
        assert "does not match the pinned sha256; downloading it again" in capsys.readouterr().err
        assert fetch(url, sha256=good, progress=False) == path   # matches: not downloaded again
        assert len(server.gets(WEIGHTS)) == 2


def test_a_cached_file_that_fails_its_pin_stays_until_its_download_replaces_it(cache, monkeypatch, capsys):
    """A cached file that did not match the pin was deleted before it was downloaded again: a
    cut download then left no file at all, where a call without the pin (offline too) had
    used it. It now stays until the verified download is renamed over it."""
    import hashlib

    from elmo.hub import download
    weights = (FIXTURE / "weights.hdf5").read_bytes()
    good = hashlib.sha256(weights).hexdigest()
    older = (ALLENNLP / "elmo_token_embeddings.hdf5").read_bytes()   # (whole HDF5: else damaged)
    with FileServer(fixture_files(), cut={WEIGHTS: 1}) as server:
        url = server.url(WEIGHTS)
        path = cache_path(url)
        path.parent.mkdir(parents=True)
        path.write_bytes(older)
        with pytest.raises(DownloadError, match="download failed"):
            download.fetch(url, sha256=good, progress=False)
        assert path.read_bytes() == older
        monkeypatch.setenv("ELMO_OFFLINE", "1")
        assert download.fetch(url, progress=False).read_bytes() == older   # no pin: as cached
        monkeypatch.delenv("ELMO_OFFLINE")
        real, seen = download._download, []

        def download_seen(*args, **kwargs):
            seen.append(path.read_bytes())                      # what a reader finds meanwhile
            return real(*args, **kwargs)
        monkeypatch.setattr(download, "_download", download_seen)
        assert download.fetch(url, sha256=good, progress=False).read_bytes() == weights
    assert seen == [older]


def _refuse_writes_under(monkeypatch, folder: Path):
    """Make creating folders under ``folder`` fail as on a read-only cache (the tests run as
    root here, which permissions do not stop)."""
    import errno
    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if self == folder or folder in self.parents:
            if not self.is_dir():
                raise PermissionError(errno.EACCES, "Permission denied", str(self))
            if not kwargs.get("exist_ok"):
                raise FileExistsError(errno.EEXIST, "File exists", str(self))
            return None
        return real_mkdir(self, *args, **kwargs)
    monkeypatch.setattr(Path, "mkdir", mkdir)


def test_an_unwritable_cache_is_one_line_naming_elmo_home(cache, monkeypatch, capsys):
    """(It was a bare PermissionError on a folder inside the cache, naming no setting.)"""
    _refuse_writes_under(monkeypatch, cache)
    with FileServer(fixture_files()) as server:
        for url in (server.url(OPTIONS), server.url("/models/fixture.tar.gz")):
            with pytest.raises(DownloadError, match=r"the model cache cannot be written "
                                                    r"\(Permission denied\); point ELMO_HOME"):
                elmo.from_pretrained(url)
        assert main(["info", server.url(OPTIONS)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ELMO_HOME" in err[0]


def test_a_read_only_cache_still_serves_its_models_as_folders(cache, monkeypatch):
    """model_path (elmo models path, experiments, reports) of a cached options/weights pair
    made its link folder inside the cache, so a read-only cache (shared, mounted read-only)
    failed with a PermissionError although every file was there."""
    with FileServer(fixture_files()) as server:
        url = server.url(OPTIONS)
        elmo.from_pretrained(url)                                # cached (no link folder yet)
    _refuse_writes_under(monkeypatch, cache)
    folder = elmo.model_path(url)                                # the server is gone
    assert cache not in folder.parents
    assert (folder / "weights.hdf5").resolve() == cache_path(url.replace("options.json", "weights.hdf5"))
    for a, b in zip(layers(elmo.from_pretrained("fixture")), layers(elmo.from_pretrained(folder))):
        assert torch.equal(a, b)


def _private_folder_setup(cache, monkeypatch, tmp_path):
    """A published pair fetched into ``cache``, which is then read-only, the temporary folder
    ``tmp_path / "tmp"`` and no private link folder yet: (its URL, elmo.hub.resolve, the
    temporary folder, the exit hooks registered)."""
    import atexit
    import importlib
    resolve = importlib.import_module("elmo.hub.resolve")        # (elmo.hub.resolve: the function)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temp))
    exit_hooks: list = []
    monkeypatch.setattr(atexit, "register", exit_hooks.append)
    monkeypatch.setattr(resolve, "_PRIVATE_FOLDERS", {}, raising=False)
    monkeypatch.setattr(resolve, "_PRIVATE_OWNER", [], raising=False)
    with FileServer(fixture_files()) as server:
        url = server.url(OPTIONS)
        elmo.from_pretrained(url)
    _refuse_writes_under(monkeypatch, cache)
    return url, resolve, temp, exit_hooks


def test_a_read_only_cache_gives_one_private_folder_per_pair_removed_at_exit(cache, monkeypatch, tmp_path):
    """Each model_path of a pair in a read-only cache left a new temporary folder of links
    behind, for good; it is made once, reused, and removed when the process ends."""
    url, resolve, temp, exit_hooks = _private_folder_setup(cache, monkeypatch, tmp_path)
    folders = {elmo.model_path(url) for _ in range(3)}
    assert len(folders) == 1 and list(temp.iterdir()) == list(folders)
    assert exit_hooks.count(resolve.remove_private_folders) == 1
    resolve.remove_private_folders()                             # the process ends
    assert list(temp.iterdir()) == []
    assert (elmo.model_path(url) / "weights.hdf5").exists()     # (made again when needed)
    resolve.remove_private_folders()


def test_a_private_folder_whose_links_are_gone_is_replaced_and_removed(cache, monkeypatch, tmp_path):
    """A private link folder whose links no longer lead to the pair is made anew; the old one
    was forgotten and stayed in the temporary folder after the process ended."""
    url, resolve, temp, _ = _private_folder_setup(cache, monkeypatch, tmp_path)
    first = elmo.model_path(url)
    (first / "weights.hdf5").unlink()                            # (a cleaner of the temporary folder)
    second = elmo.model_path(url)
    assert second != first and (second / "weights.hdf5").exists()
    assert list(temp.iterdir()) == [second]
    resolve.remove_private_folders()
    assert list(temp.iterdir()) == []


class _FillsUp:
    """A file on a disk that is full after ``room`` more bytes."""

    def __init__(self, f, room: int):
        self.f, self.room = f, room

    def write(self, data):
        import errno
        import os
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def test_a_full_disk_while_downloading_is_one_line_and_the_next_call_resumes(cache, monkeypatch):
    """The cache's disk fills during a download: a DownloadError naming the file, the full disk
    and the kept part (it was a bare "[Errno 28] No space left on device"); once there is room,
    the next call resumes from the part."""
    from elmo.hub import transfer

    weights = (ALLENNLP / "lm_weights.hdf5").read_bytes()
    monkeypatch.setattr(transfer, "open", lambda path, mode: _FillsUp(open(path, mode), 200_000), raising=False)
    with FileServer(fixture_files()) as server:
        dest = cache_path(server.url(CONF_WEIGHTS))
        with pytest.raises(DownloadError) as err:
            elmo.load_original(server.url(CONF_OPTIONS), server.url(CONF_WEIGHTS))
        message = str(err.value)
        assert "\n" not in message and message.startswith(f"{dest}: cannot write the download")
        assert "(No space left on device)" in message and "the next call resumes" in message
        kept = dest.with_name(dest.name + "+.part").stat().st_size
        assert not dest.exists() and 0 < kept <= 200_000
        monkeypatch.delattr(transfer, "open")   # (room again)
        elmo.load_original(server.url(CONF_OPTIONS), server.url(CONF_WEIGHTS))
        assert server.gets(CONF_WEIGHTS)[-1] == f"bytes={kept}-"
    assert dest.read_bytes() == weights


def test_offline_an_http_url_cached_before_the_schemes_were_told_apart_is_named(cache, monkeypatch):
    """A file of an http URL cached before http and https had paths of their own lies at the
    path https now has: offline, the error said only that the URL was not in the cache. It
    now names that file, which may be the one the user means to use."""
    from elmo.hub.download import DownloadError, fetch
    url = "http://h.org/m/w.hdf5"
    old = cache_path("https://h.org/m/w.hdf5")          # the path both schemes shared
    old.parent.mkdir(parents=True)
    old.write_bytes(b"cached before")
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    with pytest.raises(DownloadError) as e:
        fetch(url, progress=False)
    assert f"(expected {cache_path(url)})" in str(e.value) and str(old) in str(e.value)
    assert "\n" not in str(e.value)


def test_an_unpacked_folder_whose_model_files_were_deleted_is_fetched_again(cache, monkeypatch, capsys):
    """A cached folder whose config.json was deleted since (by hand, a cleaner) was taken as the
    model for good: every load failed with "the archive holds no folder with config.json" and
    `elmo models list` said it was cached. Now it counts as not cached and is fetched again."""
    import hashlib

    from elmo.hub.resolve import resolve, unpacked_path
    flat = {k: v.encode() if isinstance(v, str) else v for k, v in _manylangs_folder("144/").items()}
    archive = _zip(flat)
    with FileServer({"/repository/11/144.zip": archive}) as server:
        entry = replace(registry.MODELS["manylangs-en"], urls={"archive": server.url("/repository/11/144.zip")},
                        sha256={"archive": hashlib.sha256(archive).hexdigest()})
        monkeypatch.setitem(registry.MODELS, "manylangs-en", entry)
        folder = resolve("manylangs-en").folder
        (folder / "config.json").unlink()
        capsys.readouterr()
        assert main(["models", "list"]) == 0
        assert re.search(r"^manylangs-en +no ", capsys.readouterr().out, re.M)
        monkeypatch.setenv("ELMO_OFFLINE", "1")
        with pytest.raises(DownloadError, match="damaged folder in the cache"):
            resolve("manylangs-en")
        monkeypatch.delenv("ELMO_OFFLINE")
        assert resolve("manylangs-en").folder == folder
        assert len(server.gets("/repository/11/144.zip")) == 2
    assert (folder / "config.json").read_bytes() == flat["144/config.json"]
    assert unpacked_path(entry.urls["archive"]).is_dir()


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_an_archive_of_too_many_members_is_refused_before_anything_is_written(tmp_path, kind):
    """Empty members pass the size check: 64 kB of tar.xz unpacked into 50,000 files (the
    disk's inodes, and every header held in memory). More than 10,000 is refused."""
    members = {"model/config.json": b"{}", **{f"model/f{i}": b"" for i in range(10_000)}}
    archive = tmp_path / f"many.{kind}"
    archive.write_bytes(_zip(members) if kind == "zip" else _tar(members, "w:gz"))
    with pytest.raises(ArchiveError, match="more than 10,000 members"):
        unpack(archive, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]


def test_a_url_with_a_file_name_too_long_for_the_disk_is_cached_under_a_shorter_one(cache):
    """A URL whose file name is longer than a file system takes (255 bytes with the lock's and
    the part's suffixes) failed as "the model cache cannot be written ... point ELMO_HOME at a
    writable folder"; now such a part is cached under its start and end around its digest."""
    stem = "/m/" + "x" * 250
    long = {stem + "_options.json": FIXTURE / "options.json", stem + "_weights.hdf5": FIXTURE / "weights.hdf5",
            "/m/y" + "x" * 249 + "_options.json": b"{}"}
    with FileServer(long) as server:
        bilm = elmo.from_pretrained(server.url(stem + "_options.json"))
        path = cache_path(server.url(stem + "_options.json"))
        other = cache_path(server.url("/m/y" + "x" * 249 + "_options.json"))
    for a, b in zip(layers(elmo.from_pretrained("fixture")), layers(bilm)):
        assert torch.equal(a, b)
    assert path.is_file() and path.name.endswith("_options.json")
    assert max(len(part) for part in path.parts) <= 200 and other.name != path.name


def test_a_download_killed_midway_leaves_only_its_part_and_the_next_run_resumes(cache):
    """pooch's temporary file went into the cache's folder, and a run killed while downloading
    left it there for good (an empty tmpXXXXXXXX each time; the whole file if killed between
    the part's rename and pooch's move). Now it is in a folder of the file's own, removed by the
    next run, which resumes from the part."""
    import os
    import signal
    import time

    import elmo.hub.download as download

    weights = (ALLENNLP / "lm_weights.hdf5").read_bytes()
    env = {**os.environ, "ELMO_HOME": str(cache)}
    with FileServer(fixture_files(), seconds_per_file=2.0) as server:
        url = server.url(CONF_WEIGHTS)
        dest = cache_path(url)
        part = dest.with_name(dest.name + "+.part")
        cmd = [sys.executable, "-c", _FETCH_IN_A_PROCESS, download.__file__, url]
        killed = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while not (part.is_file() and part.stat().st_size) and time.time() < deadline:
            time.sleep(0.01)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        assert 0 < part.stat().st_size < len(weights)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert server.gets(CONF_WEIGHTS)[-1] is not None        # resumed with a Range
    assert dest.read_bytes() == weights
    assert sorted(p.name for p in dest.parent.iterdir()) == sorted([dest.name, dest.name + "+.lock"])


def test_an_archive_url_that_serves_no_archive_is_one_line_naming_the_url(cache, capsys):
    """A login page or an error message served in place of an archive was refused as
    "m.tar.gz.download: the download is not a zip or tar archive", naming a temporary file
    the user never asked for (and deleted with the error), not the URL."""
    page = b"<html><body>Please log in</body></html>"
    with FileServer({"/b/m.tar.gz": page, "/c/m.zip": page}) as server:
        for path in ("/b/m.tar.gz", "/c/m.zip"):
            assert main(["info", server.url(path)]) == 1
            err = capsys.readouterr().err.strip().splitlines()[-1]
            err = err[err.index("elmo info: error:"):]          # (after the progress bar)
            assert err.startswith(f"elmo info: error: {server.url(path)}: the download is not a zip or tar")
            assert ".download" not in err and "not kept" in err
    assert sorted(p.suffix for p in cache.rglob("*") if p.is_file()) == [".lock"] * 4


def _zip_patched(members: dict, flag_bits: int = 0, method: int = None) -> bytes:
    """A zip whose members' headers (local and central) claim these flag bits and method."""
    import struct
    data = bytearray(_zip(members))
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(signature)
        while at >= 0:
            struct.pack_into("<H", data, at + flags_at, flag_bits)
            if method is not None:
                struct.pack_into("<H", data, at + flags_at + 2, method)
            at = data.find(signature, at + 4)
    return bytes(data)


@pytest.mark.parametrize("kind", ["encrypted", "deflate64"])
def test_a_zip_that_python_cannot_read_is_one_line_not_a_traceback(cache, capsys, kind):
    """An encrypted zip, or one packed with Deflate64 (Windows does for large files), went
    through as zipfile's RuntimeError / NotImplementedError: a traceback from the CLI."""
    members = {"model/config.json": b"{}", "model/char.dic": b"a\t0\n"}
    data = _zip_patched(members, flag_bits=1) if kind == "encrypted" else _zip_patched(members, method=9)
    with FileServer({"/m/model.zip": data}) as server:
        assert main(["info", server.url("/m/model.zip")]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    err = err[err.index("elmo info: error:"):]              # (after the progress bar)
    why = "encryption" if kind == "encrypted" else "a compression method this Python cannot read"
    assert f"member 'model/config.json' has {why}" in err and "refusing to unpack" in err
    assert not [p for p in cache.rglob("*") if p.is_file() and p.suffix != ".lock"]


def test_a_tar_whose_last_member_is_a_zip_is_unpacked_as_the_tar(tmp_path):
    """zipfile finds a zip's end record in the last 64 kB of any file: an uncompressed tar
    ending with a zip member was unpacked as that inner zip, its files in place of the model's."""
    inner = _zip({"other/config.json": b'{"inner": 1}'})
    archive = tmp_path / "model.tar"
    archive.write_bytes(_tar({"model/config.json": b'{"outer": 1}', "model/extras.zip": inner}, "w"))
    out = unpack(archive, tmp_path / "out")
    assert files_under(out) == ["model/config.json", "model/extras.zip"]
    assert (out / "model" / "extras.zip").read_bytes() == inner


def test_a_cut_download_from_a_server_without_validators_starts_over(cache):
    """A server that names no version of a file (no ETag, no Last-Modified) cannot be asked for
    "the rest of the same file": the part was completed with a plain Range, and a file changed
    in between was cached as the old start joined to the new end. Unpinned, it now starts over."""
    import elmo.hub.download as download

    old, new = bytes(range(256)) * 2000, bytes(reversed(range(256))) * 2000    # same length
    with FileServer({"/m/file.bin": old}, cut={"/m/file.bin": 1}, validators=False) as server:
        url = server.url("/m/file.bin")
        with pytest.raises(DownloadError) as err:
            download.fetch(url, progress=False)
        assert "resume" not in str(err.value)
        server.files["/m/file.bin"] = new                 # the file changes on the server
        assert download.fetch(url, progress=False).read_bytes() == new
        assert server.gets("/m/file.bin") == [None, None]


def test_a_manylangs_archive_with_a_damaged_weight_file_is_refused_and_not_kept(cache, monkeypatch, capsys):
    """An ELMoForManyLangs folder was checked for a readable config.json only: one whose .pkl
    is damaged was kept, listed as cached, and failed at every load until deleted by hand. It is
    now loaded (weights-only reader) before it is kept."""
    members = _manylangs_folder("144/")
    members["144/encoder.pkl"] = members["144/encoder.pkl"][: len(members["144/encoder.pkl"]) // 2]
    with FileServer({"/repository/11/144.zip": _zip(members)}) as server:
        url = server.url("/repository/11/144.zip")
        monkeypatch.setitem(registry.MODELS, "manylangs-en",
                            replace(registry.MODELS["manylangs-en"], urls={"archive": url}))
        assert main(["models", "get", "manylangs-en"]) == 1
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert "encoder.pkl" in err and "not kept" in err and url in err
        assert main(["models", "list"]) == 0
        assert re.search(r"^manylangs-en +no ", capsys.readouterr().out, re.M)
    assert not [p for p in cache.rglob("*") if p.is_file() and p.suffix != ".lock"]


def test_a_password_in_a_url_is_not_written_into_the_cache_path():
    """``https://user:password@host/...`` was cached under a folder named
    ``user_password_host``: the password stood in the cache's folder names for anyone who
    lists them. Two users, and two hosts whose names differ only in characters made ``_``,
    still get files of their own."""
    path = cache_path("https://ann:s3cret-pw@example.com/m/a_options.json")
    assert "s3cret" not in str(path) and "ann" not in str(path) and path.parts[-3] == "m"
    assert path != cache_path("https://bob:s3cret-pw@example.com/m/a_options.json")
    assert path != cache_path("https://example.com/m/a_options.json")
    assert cache_path("https://bücher.example/m/a.hdf5") != cache_path("https://böcher.example/m/a.hdf5")


def test_a_password_in_a_url_is_not_written_into_a_model_folder_name(cache):
    """``elmo.model_path(URL)`` names the folder of links after the URL: with
    ``user:password@`` in it, the password stood in that folder's name."""
    with FileServer(fixture_files()) as server:
        url = server.url(OPTIONS).replace("http://", "http://ann:s3cret-pw@")
        folder = elmo.model_path(url)
    assert "s3cret" not in str(folder) and (folder / "weights.hdf5").is_file()
    assert not [p for p in cache.rglob("*") if "s3cret" in p.name or "ann" in p.name]


def test_an_unpack_interrupted_by_ctrl_c_keeps_the_archive_for_the_next_run(cache, monkeypatch):
    """Ctrl-C (or SIGTERM) while unpacking deleted the whole, verified archive, and the next run
    downloaded it again; it now stays (as after a kill) and the next run unpacks it from the
    cache. A refused archive is still deleted."""
    resolve = sys.modules["elmo.hub.resolve"]
    files = {"model/options.json": (FIXTURE / "options.json").read_bytes(),
             "model/weights.hdf5": (FIXTURE / "weights.hdf5").read_bytes()}
    unpack_as_ever = resolve.unpack

    def interrupted(path, dest):
        raise KeyboardInterrupt
    with FileServer({"/models/fixture.tar.gz": _tar(files, "w:gz")}) as server:
        url = server.url("/models/fixture.tar.gz")
        monkeypatch.setattr(resolve, "unpack", interrupted)
        with pytest.raises(KeyboardInterrupt):
            resolve.fetch_archive(url)
        monkeypatch.setattr(resolve, "unpack", unpack_as_ever)
        folder = resolve.fetch_archive(url)
        assert len(server.gets("/models/fixture.tar.gz")) == 1
    assert files_under(folder) == ["options.json", "weights.hdf5"]
    assert not cache_path(url).exists()


def test_a_download_stopped_while_it_is_checked_is_checked_by_the_next_run(cache):
    """Ctrl-C (or SIGTERM) while the finished download was checked (the shape checks read a
    whole weight file) deleted it, and the next run downloaded the whole file again; now the
    next run checks the download that was left."""
    import elmo.hub.download as download

    weights = (FIXTURE / "weights.hdf5").read_bytes()
    checked = []

    def stopped(path):
        checked.append(path.read_bytes())
        if len(checked) == 1:
            raise KeyboardInterrupt
    with FileServer(fixture_files()) as server:
        url = server.url(WEIGHTS)
        with pytest.raises(KeyboardInterrupt):
            download.fetch(url, verify=stopped, progress=False)
        assert not cache_path(url).exists()
        assert download.fetch(url, verify=stopped, progress=False).read_bytes() == weights
        assert len(server.gets(WEIGHTS)) == 1 and checked == [weights, weights]
    dest = cache_path(url)
    assert sorted(p.name for p in dest.parent.iterdir()) == sorted([dest.name, dest.name + "+.lock"])


# ------------------------------------------------------------------------- credentials
def _with_password(url: str) -> str:
    return url.replace("http://", "http://ann:s3cret-pw@")


def test_redact_url_hides_the_password_and_a_bare_token():
    from elmo.hub.download import redact_url
    assert redact_url("https://ann:s3cret@h.example/m/a.json") == "https://ann:***@h.example/m/a.json"
    assert redact_url("x HTTP://tok3n@h.example/m y") == "x HTTP://***@h.example/m y"
    assert redact_url("'https://a:p@ss@h/m' https://h/m?u=a@b") == "'https://a:***@h/m' https://h/m?u=a@b"
    assert redact_url("https://h.example/m/a.json") == "https://h.example/m/a.json"


def test_a_password_in_a_url_is_not_shown_while_downloading_or_in_errors(cache, capsys, monkeypatch):
    """The 'downloading URL' line, an HTTP error, a refused download and an offline error
    showed ``user:password@`` in full (on terminals, in logs); now ``user:***@``."""
    with FileServer({**fixture_files(), "/bad/elmo_options.json": b"{not json"}) as server:
        assert main(["info", _with_password(server.url(OPTIONS))]) == 0
        err = capsys.readouterr().err
        assert f"downloading {server.url(OPTIONS).replace('http://', 'http://ann:***@')}" in err
        for path in ("/none/elmo_options.json", "/bad/elmo_options.json"):
            assert main(["info", _with_password(server.url(path))]) == 1
            err = capsys.readouterr().err
            assert "ann:***@" in err and "elmo info: error: " in err
            with pytest.raises((DownloadError, ConfigError)) as caught:
                elmo.from_pretrained(_with_password(server.url(path)))
            assert "ann:***@" in str(caught.value)
            assert "s3cret" not in err + str(caught.value) + capsys.readouterr().err
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    with pytest.raises(DownloadError) as caught:
        elmo.from_pretrained("https://ann:s3cret-pw@127.0.0.1:9/m/elmo_options.json")
    assert "s3cret" not in str(caught.value) and "https://ann:***@127.0.0.1:9/m/" in str(caught.value)


def test_a_password_in_a_model_url_is_not_stored_in_the_embed_output(tmp_path):
    """``elmo embed --model URL`` stored its command line, ``user:password@`` of the URL in it,
    in the output's ``command_line`` attribute (a file that is shared)."""
    text = tmp_path / "in.txt"
    text.write_text("The bank closed .\n")
    with FileServer(fixture_files()) as server:
        url = _with_password(server.url(WEIGHTS))
        assert main(["embed", str(text), str(tmp_path / "out.hdf5"), "--model", url]) == 0
    with h5py.File(tmp_path / "out.hdf5") as f:
        stored = f.attrs["command_line"]
    stored = stored.decode() if isinstance(stored, bytes) else stored
    assert "s3cret" not in stored and "ann:***@127.0.0.1" in stored


# ------------------------------------------------------------------------- damaged cache
@pytest.mark.parametrize("which,keep", [(WEIGHTS, 1000), (OPTIONS, 20), (WEIGHTS, 0)],
                         ids=["weights-truncated", "options-truncated", "weights-empty"])
def test_a_truncated_unpinned_cached_file_is_downloaded_again(cache, capsys, monkeypatch, which, keep):
    """A truncated (or empty) weights.hdf5 or options.json in the cache of an unpinned URL
    failed at every load with an error naming the cache path. A load now sees it (HDF5 that
    does not open, JSON that does not parse, an empty file), says so and downloads it again;
    offline, the error says it is damaged and how to delete it."""
    with FileServer(fixture_files()) as server:
        url = server.url(OPTIONS)
        expected = layers(elmo.from_pretrained(url))
        damaged = cache_path(server.url(which))
        damaged.write_bytes(damaged.read_bytes()[:keep])
        capsys.readouterr()
        monkeypatch.setenv("ELMO_OFFLINE", "1")
        with pytest.raises(DownloadError) as caught:
            elmo.from_pretrained(url)
        message = str(caught.value)
        assert "is damaged" in message and f"rm {damaged}" in message, message
        monkeypatch.delenv("ELMO_OFFLINE")
        torch.testing.assert_close(layers(elmo.from_pretrained(url)), expected)
        assert f"{damaged}: the cached file is damaged" in capsys.readouterr().err
        assert len(server.gets(which)) == 2
    assert damaged.read_bytes() == fixture_files()[which].read_bytes()


def test_models_list_marks_a_truncated_unpinned_file_damaged(monkeypatch, capsys):
    """`elmo models list` said 'yes' for a model whose unpinned cached weight file was
    truncated (every load failed); it now says 'damaged', and `models get` mends it."""
    with FileServer(fixture_files()) as server:
        entry = registry.PretrainedModel(
            name="test-unpinned", format="original", language="English", language_code="en",
            training_data="none (test weights)", licence="Apache-2.0",
            urls={"options": server.url(OPTIONS), "weights": server.url(WEIGHTS)})
        monkeypatch.setitem(registry.MODELS, entry.name, entry)
        assert main(["models", "get", "test-unpinned"]) == 0
        weights = cache_path(server.url(WEIGHTS))
        weights.write_bytes(weights.read_bytes()[:-100])
        capsys.readouterr()
        assert main(["models", "list"]) == 0
        out = capsys.readouterr().out
        assert re.search(r"^test-unpinned\s+damaged\s", out, re.M) and "downloads it again" in out
        assert main(["models", "get", "test-unpinned"]) == 0
        assert main(["models", "list"]) == 0
        assert re.search(r"^test-unpinned\s+yes\s", capsys.readouterr().out, re.M)


def test_models_list_names_the_bundled_models(capsys):
    """The README sends a newcomer to `elmo models list` for the names a model argument takes;
    the list showed only the published models, none of which a machine without internet
    loads, and not `default` (the model every command uses when none is named) or `fixture`.
    It now names both, as models that need no download."""
    import elmo
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("bundled")]
    assert all(re.search(rf"\b{name} \(", line) for name in elmo.BUNDLED_MODELS)
    assert "no download" in line


# ------------------------------------------------------------------------- tree collisions
@pytest.mark.parametrize("first", ["file", "folder"])
def test_a_url_that_is_a_folder_of_another_urls_path_is_cached_aside(cache, monkeypatch, first):
    """``/m/elmo`` is cached as the file ``m/elmo``, and ``/m/elmo/options.json`` needs
    ``m/elmo`` to be a folder (or the other way round): the second failed as 'the model cache
    cannot be written' or a raw IsADirectoryError. The second now goes to a ``+tree-`` folder;
    the first keeps its path (what was cached before is found without a download)."""
    from elmo.hub import cache_paths
    from elmo.hub.download import fetch
    # the paths https has (and a published http URL): the test server's http gets +scheme-http
    monkeypatch.setattr(cache_paths, "_unmarked_scheme", lambda parts: "http")
    files = {"/m/elmo": b"the file at m/elmo", "/m/elmo/options.json": b'{"inside": true}'}
    order = ["/m/elmo", "/m/elmo/options.json"][:: 1 if first == "file" else -1]
    with FileServer(files) as server:
        plain = cache_path(server.url(order[0]))
        for path in order:
            assert fetch(server.url(path), progress=False).read_bytes() == files[path]
        assert cache_path(server.url(order[0])) == plain and plain.is_file()
        assert "+tree-" in str(cache_path(server.url(order[1])))
        for path in order:
            assert fetch(server.url(path), progress=False).read_bytes() == files[path]
            assert len(server.gets(path)) == 1


def test_a_cached_file_damaged_past_a_cheap_look_says_how_to_clear_it(cache):
    """A cached weight file that opens as HDF5 but is not the model's (damaged, or replaced)
    failed at every load naming the cache's file only; the error now says to delete it."""
    with FileServer(fixture_files()) as server:
        url = server.url(OPTIONS)
        elmo.from_pretrained(url)
        weights = cache_path(server.url(WEIGHTS))
        weights.write_bytes((ALLENNLP / "elmo_token_embeddings.hdf5").read_bytes())
        with pytest.raises(WeightFileError) as caught:
            elmo.from_pretrained(url)
        assert str(caught.value).startswith(f"{weights}: dataset")
        assert f"delete it (rm {weights})" in str(caught.value)
        with pytest.raises(WeightFileError, match="delete it"):
            Elmo(url, server.url(WEIGHTS), 1)
    with pytest.raises(WeightFileError) as caught:      # (a file outside the cache: as it was)
        elmo.load_original(FIXTURE / "options.json", ALLENNLP / "elmo_token_embeddings.hdf5")
    assert "delete" not in str(caught.value)


def test_urls_named_like_the_caches_own_files_get_files_of_their_own(cache):
    """The lock, part, part.json and staging files of a cached /m/elmo were /m/elmo.lock,
    /m/elmo.part, ...: the cached names of the URLs /m/elmo.lock and /m/elmo.part. /m/elmo.lock
    was handed /m/elmo's empty lock file, and fetching /m/elmo took /m/elmo.part's cached file
    for its bytes so far (deleted, or resumed from). The cache's own files are now named so no
    URL's file is, and each URL gets its own bytes."""
    from elmo.hub import download
    names = ["elmo", "elmo.lock", "elmo.part", "elmo.part.json", ".elmo.staging"]
    served = {f"/{folder}/{name}": json.dumps({"file": name}).encode()   # (JSON: .part.json is checked)
              for folder in "ab" for name in names}
    with FileServer(served) as server:
        for folder, order in (("a", names), ("b", names[::-1])):   # the model's file first, or last
            urls = [server.url(f"/{folder}/{name}") for name in order]
            for url in urls:
                assert download.fetch(url, progress=False).read_bytes() == served[url[url.index("/", 8):]], url
            for url in urls:   # (none replaced by another's fetch)
                assert cache_path(url).read_bytes() == served[url[url.index("/", 8):]], url
        assert all(len(server.gets(path)) == 1 for path in served)


@pytest.mark.parametrize("layout", ["original", "native"])
def test_an_unpacked_model_damaged_since_says_how_to_clear_it(cache, tmp_path, layout):
    """A model file of an unpacked archive truncated since (a full disk, a cleaner) failed at
    every load naming the file only, where a damaged cached file says how to clear it."""
    import shutil

    from elmo.weights import save_pretrained
    folder = tmp_path / "model"
    if layout == "native":
        save_pretrained(elmo.from_pretrained("fixture"), folder)
    else:
        shutil.copytree(FIXTURE, folder)
    files = {f"model/{p.name}": p.read_bytes() for p in sorted(folder.iterdir())}
    with FileServer({"/models/m.tar.gz": _tar(files, "w:gz")}) as server:
        url = server.url("/models/m.tar.gz")
        bilm = elmo.from_pretrained(url)
        weights = next(p for p in cache.rglob("*") if p.name in ("weights.hdf5", "model.safetensors"))
        weights.write_bytes(weights.read_bytes()[:1000])
        with pytest.raises(WeightFileError) as caught:
            elmo.from_pretrained(url)
        entry = weights.parent.parent       # (the archive's folder: its model folder in it)
        assert str(caught.value).startswith(str(weights.parent)), str(caught.value)
        assert str(caught.value).endswith(f"it is in a model unpacked from a download: delete its folder "
                                          f"(rm -r {entry.resolve()}) and load the model again to download it again")
        shutil.rmtree(entry.resolve())
        for a, b in zip(layers(bilm), layers(elmo.from_pretrained(url))):    # (as the error says)
            assert torch.equal(a, b)


def test_only_a_download_that_cannot_be_made_names_the_bundled_models(monkeypatch):
    """The hint that the bundled models need no download belongs to a download that cannot be
    made (offline, an HTTP error); a damaged archive, a full disk or a bad setting got it too."""
    import importlib

    from elmo.hub import registry
    from elmo.hub.errors import Unreachable

    resolve = importlib.import_module("elmo.hub.resolve")   # (elmo.hub.resolve is also a function's name)
    entry = registry.get("small")

    def fails_with(error):
        def fetch(*args, **kwargs):
            raise error
        return fetch

    monkeypatch.setattr(resolve, "fetch_options", fails_with(Unreachable("x: download failed (offline)")))
    with pytest.raises(Unreachable, match="need no download"):
        resolve.fetch_model(entry)
    monkeypatch.setattr(resolve, "fetch_options", fails_with(DownloadError("x: no space left on device")))
    with pytest.raises(DownloadError) as caught:
        resolve.fetch_model(entry)
    assert "need no download" not in str(caught.value)
