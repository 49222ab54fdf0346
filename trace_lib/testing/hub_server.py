"""A loopback stand-in for the Hugging Face Hub's file and repository endpoints, for testing ``huggingface_hub``.

Serves ``HEAD``/``GET /[datasets/]<owner>/<name>/resolve/<revision>/<path>`` from local directories (one per
``(repo_id, revision)``, served as a model and as a dataset repository alike) with the headers ``hf_hub_download``
reads (``X-Repo-Commit``, ``ETag``, ``Content-Length``) and ``Range`` requests (resumed downloads), and
``GET /api/{models,datasets}/<owner>/<name>/revision/<revision>`` (``model_info``/``dataset_info``: the commit and
its files) and ``.../tree/<revision>`` (``list_repo_tree``, what ``snapshot_download`` lists). ``tamper`` names paths
whose bytes are altered on the way; ``unavailable`` file requests to come are answered 503 (a transient failure);
``slow`` file ``GET`` requests to come wait ``slow_seconds`` before answering; ``requests`` records every request
line. Point ``huggingface_hub`` at it with ``endpoint=`` or ``HF_ENDPOINT``; :func:`refused_url` is one where nothing
listens (:data:`REFUSED_REASON` is how the refusal reads).
"""

from __future__ import annotations

import errno
import hashlib
import http.server
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Mapping
from urllib.parse import unquote

_TYPES = ("datasets", "spaces")


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64


#: How ``httpx`` (through ``huggingface_hub``) reports a connection to :func:`refused_url`.
REFUSED_REASON = f"[Errno {errno.ECONNREFUSED}] {os.strerror(errno.ECONNREFUSED)}"


def refused_url() -> str:
    """A loopback URL whose port refuses connections (bound, then closed: nothing listens there)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class LoopbackHub:
    """``with LoopbackHub({("owner/name", "<40-hex>"): dir}) as hub: hf_hub_download(..., endpoint=hub.url)``."""

    def __init__(self, repos: Mapping[tuple[str, str], Path]) -> None:
        self.repos = {k: Path(v) for k, v in repos.items()}
        self.tamper: set[str] = set()
        self.unavailable = 0
        self.slow = 0
        self.slow_seconds = 2.0
        self.requests: list[str] = []
        lock = threading.Lock()
        hub = self

        def files(root: Path) -> list[str]:
            return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _parts(self) -> list[str]:
                return unquote(self.path.split("?", 1)[0]).lstrip("/").split("/")

            def _resolve(self) -> tuple[Path, str, str] | None:
                parts = self._parts()
                if parts and parts[0] in _TYPES:
                    parts = parts[1:]
                if len(parts) < 5 or parts[2] != "resolve":
                    return None
                repo, revision, rel = f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:])
                root = hub.repos.get((repo, revision))
                if root is None or ".." in rel.split("/") or not (root / rel).is_file():
                    return None
                return root / rel, revision, rel

            def _empty(self, status: int, error_code: str | None = None) -> None:
                self.send_response(status)
                if error_code:
                    self.send_header("X-Error-Code", error_code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _api(self) -> bool:
                """Answer ``/api/<type>s/<owner>/<name>/{revision,tree}/<revision>``; False: not such a path."""
                parts = self._parts()
                if len(parts) < 6 or parts[0] != "api" or parts[1] not in ("models", *_TYPES):
                    return False
                repo, verb, revision = f"{parts[2]}/{parts[3]}", parts[4], parts[5]
                root = hub.repos.get((repo, revision))
                if root is None or verb not in ("revision", "tree"):
                    self._empty(404, "RepoNotFound")
                    return True
                if verb == "revision":
                    doc: object = {"id": repo, "sha": revision, "siblings": [{"rfilename": f} for f in files(root)]}
                else:
                    doc = [{"type": "file", "path": f, "size": (root / f).stat().st_size,
                            "oid": hashlib.sha1((root / f).read_bytes()).hexdigest()} for f in files(root)]
                body = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return True

            def _answer(self, body: bool) -> None:
                hub.requests.append(f"{self.command} {self.path}")
                if body and self._api():
                    return
                found = self._resolve()
                if found is None:
                    self._empty(404, "EntryNotFound")
                    return
                with lock:
                    busy, hub.unavailable = hub.unavailable > 0, max(0, hub.unavailable - 1)
                    slow = body and not busy and hub.slow > 0
                    hub.slow -= int(slow)
                if busy:
                    self._empty(503)
                    return
                if slow:
                    time.sleep(hub.slow_seconds)
                path, revision, rel = found
                data = path.read_bytes()
                if rel in hub.tamper:
                    data = data[:-1] + bytes([data[-1] ^ 1]) if data else b"x"
                start = 0
                rng = self.headers.get("Range")
                if body and rng and rng.startswith("bytes="):
                    start = int(rng[6:].split("-", 1)[0] or 0)
                try:
                    self.send_response(206 if start else 200)
                    self.send_header("X-Repo-Commit", revision)
                    self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
                    self.send_header("Content-Length", str(len(data) - start))
                    if start:
                        self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                    self.end_headers()
                    if body:
                        self.wfile.write(data[start:])
                except (BrokenPipeError, ConnectionResetError):  # the client gave up on a slow answer
                    pass

            def do_HEAD(self) -> None:  # noqa: N802
                self._answer(False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(True)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> LoopbackHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
