"""A local HTTP server for the download tests: serves given bytes under given URL paths on
127.0.0.1, with HTTP Range (optional), a connection cut midway (optional), a slow mode, and a
log of the requests, and an HTTP Basic login to require (optional). It runs in a daemon thread and stops itself after ``max_seconds``."""
from __future__ import annotations

import base64
import hashlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union


def fresh_model_cache(tmp_path: Path, monkeypatch) -> Path:
    """A fresh, empty $ELMO_HOME; online; no retries (a test that wants them sets them). The
    hub test modules make it their autouse fixture ``cache``."""
    home = tmp_path / "elmo-home"
    monkeypatch.setenv("ELMO_HOME", str(home))
    monkeypatch.delenv("ELMO_OFFLINE", raising=False)
    monkeypatch.setenv("ELMO_DOWNLOAD_RETRIES", "0")
    return home


class FileServer:
    """Serve ``files`` ({url path: bytes or local file}) at ``http://127.0.0.1:PORT/path``.

    Args:
        ranges: answer ``Range: bytes=N-`` with 206 (else the whole file, 200).
        cut: {url path: number of GETs to cut}: those send the headers with the full length,
            half of the body, then close the connection.
        seconds_per_file: spread each body over about this long (for the concurrency test).
        wrong_ranges: answer ``Range`` with 206 but send the file from its start (a broken
            server or proxy), with a Content-Range that says so.
        validators: send an ETag (else none, and no Last-Modified: a server that cannot say
            which version of a file it sends).
        max_seconds: the server shuts itself down after this long whatever happens.
        login: (user, password): every request must carry that HTTP Basic login, else 401.
    """

    def __init__(self, files: Dict[str, Union[bytes, Path]], *, ranges: bool = True,
                 cut: Optional[Dict[str, int]] = None, seconds_per_file: float = 0.0,
                 max_seconds: float = 120.0, wrong_ranges: bool = False, validators: bool = True,
                 login: Optional[Tuple[str, str]] = None):
        self.files = {p: (v if isinstance(v, bytes) else Path(v).read_bytes()) for p, v in files.items()}
        self.ranges = ranges
        self.cut = dict(cut or {})
        self.seconds_per_file = seconds_per_file
        self.wrong_ranges = wrong_ranges
        self.validators = validators
        self.max_seconds = max_seconds
        self.login = login
        self.log: List[Tuple[str, str, Optional[str]]] = []     # (method, path, Range header)
        self._lock = threading.Lock()
        self._server: Optional[ThreadingHTTPServer] = None
        self._timer: Optional[threading.Timer] = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def gets(self, path: str) -> List[Optional[str]]:
        """The Range headers of the GETs of ``path``, in order (None: no Range)."""
        return [r for m, p, r in self.log if m == "GET" and p == path]

    def __enter__(self) -> "FileServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):   # quiet
                pass

            def do_GET(self):
                self._answer(body=True)

            def do_HEAD(self):
                self._answer(body=False)

            def _refuse(self, status: int, payload: bytes, body: bool, headers: Dict[str, str]):
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if body:
                    self.wfile.write(payload)

            def _answer(self, body: bool):
                path = self.path.split("?")[0]
                range_header = self.headers.get("Range")
                with server._lock:
                    server.log.append((self.command, path, range_header))
                    cut = body and server.cut.get(path, 0) > 0
                    if cut:
                        server.cut[path] -= 1
                data = server.files.get(self.path, server.files.get(path))   # (a file of a path and query)
                if server.login is not None and self.headers.get("Authorization") != _basic(server.login):
                    self._refuse(401, b"login needed", body, {"WWW-Authenticate": 'Basic realm="test"'})
                    return
                if data is None:
                    payload = b"not found"
                    self.send_response(404)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if body:
                        self.wfile.write(payload)
                    return
                start = 0
                etag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
                if_range = self.headers.get("If-Range")
                if (server.ranges and range_header and range_header.startswith("bytes=")
                        and (if_range is None or if_range == etag)):
                    start = int(range_header[len("bytes="):].split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    if server.wrong_ranges:
                        start = 0
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                if server.ranges:
                    self.send_header("Accept-Ranges", "bytes")
                if server.validators:
                    self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                if not body:
                    return
                payload = data[start:]
                if cut:
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if server.seconds_per_file > 0:
                    pieces = 20
                    step = max(1, -(-len(payload) // pieces))
                    for i in range(0, len(payload), step):
                        self.wfile.write(payload[i:i + step])
                        self.wfile.flush()
                        time.sleep(server.seconds_per_file / pieces)
                else:
                    self.wfile.write(payload)

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_port     # URLs stay nameable after the server stops
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        self._timer = threading.Timer(self.max_seconds, self._server.shutdown)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._timer.cancel()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __exit__(self, *exc) -> None:
        self.stop()


def _basic(login: Tuple[str, str]) -> str:
    """The ``Authorization`` header value of an HTTP Basic login."""
    return "Basic " + base64.b64encode(f"{login[0]}:{login[1]}".encode()).decode()


class _QuietServer(ThreadingHTTPServer):
    """A client that drops its connection (a cut download, a retry, a 404 it stops reading)
    makes the handler fail with a reset; the stock server prints that traceback to stderr,
    which the tests read for the CLI's one-line errors."""

    def handle_error(self, request, client_address) -> None:
        pass
