"""A resumed download's part and the version of the file it was begun with."""
from __future__ import annotations

import pytest

from elmo.hub import download
from elmo.hub.download import fetch
from tests.hub_server import FileServer, fresh_model_cache

cache = pytest.fixture(autouse=True, name="cache")(fresh_model_cache)


def test_a_part_restarted_by_a_server_that_names_no_version_is_not_resumed_as_the_old_version():
    """A part begun with version A records A's ETag. Asked to resume, a server now without
    validators sends version B whole (200, no ETag): the part restarted as B's start, and A's
    ETag stayed recorded for it. Once the server had A back, the next call resumed B's start
    with A's rest: a file of neither version, cached as good. The record now goes with the
    version it named, and that part (of an unnamed version) starts over."""
    a, b = bytes(range(256)) * 2000, bytes(reversed(range(256))) * 2000    # same length
    with FileServer({"/m/file.bin": a}, cut={"/m/file.bin": 1}) as server:
        url = server.url("/m/file.bin")
        with pytest.raises(download.DownloadError):
            fetch(url, progress=False)                  # part: A's first half, A's ETag
        server.files["/m/file.bin"], server.validators = b, False
        server.cut["/m/file.bin"] = 1
        with pytest.raises(download.DownloadError):
            fetch(url, progress=False)                  # part: B's first half, no version
        server.files["/m/file.bin"], server.validators = a, True
        assert fetch(url, progress=False).read_bytes() == a
