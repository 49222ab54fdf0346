"""A loopback stand-in for the Hugging Face Hub's file endpoints, for testing ``huggingface_hub`` downloads.

Serves ``HEAD``/``GET /datasets/<owner>/<name>/resolve/<revision>/<path>`` from local directories (one per
``(repo_id, revision)``) with the headers ``hf_hub_download`` reads (``X-Repo-Commit``, ``ETag``,
``Content-Length``) and ``Range`` requests (resumed downloads). ``tamper`` names paths whose bytes are altered
on the way; ``unavailable`` file requests to come are answered 503 (a transient failure); ``requests`` records every
request line. Point ``huggingface_hub`` at it with ``endpoint=`` or ``HF_ENDPOINT``.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
from pathlib import Path
from typing import Mapping
from urllib.parse import unquote


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64


class LoopbackHub:
    """``with LoopbackHub({("owner/name", "<40-hex>"): dir}) as hub: hf_hub_download(..., endpoint=hub.url)``."""

    def __init__(self, repos: Mapping[tuple[str, str], Path]) -> None:
        self.repos = {k: Path(v) for k, v in repos.items()}
        self.tamper: set[str] = set()
        self.unavailable = 0
        self.requests: list[str] = []
        lock = threading.Lock()
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _resolve(self) -> tuple[Path, str, str] | None:
                parts = unquote(self.path.split("?", 1)[0]).lstrip("/").split("/")
                if len(parts) < 6 or parts[0] != "datasets" or parts[3] != "resolve":
                    return None
                repo, revision, rel = f"{parts[1]}/{parts[2]}", parts[4], "/".join(parts[5:])
                root = hub.repos.get((repo, revision))
                if root is None or ".." in rel.split("/") or not (root / rel).is_file():
                    return None
                return root / rel, revision, rel

            def _answer(self, body: bool) -> None:
                hub.requests.append(f"{self.command} {self.path}")
                found = self._resolve()
                if found is None:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with lock:
                    busy, hub.unavailable = hub.unavailable > 0, max(0, hub.unavailable - 1)
                if busy:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                path, revision, rel = found
                data = path.read_bytes()
                if rel in hub.tamper:
                    data = data[:-1] + bytes([data[-1] ^ 1]) if data else b"x"
                start = 0
                rng = self.headers.get("Range")
                if body and rng and rng.startswith("bytes="):
                    start = int(rng[6:].split("-", 1)[0] or 0)
                self.send_response(206 if start else 200)
                self.send_header("X-Repo-Commit", revision)
                self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
                self.send_header("Content-Length", str(len(data) - start))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if body:
                    self.wfile.write(data[start:])

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
