"""A ``http.server`` handler served on 127.0.0.1 for the length of a block (the tests' one way to stand one up)."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port in a daemon thread; yields ``http://127.0.0.1:<port>``, and shuts
    the server down and closes its socket when the block ends, however it ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


#: What :func:`answering` records of each request: its method, path and headers (names lower-cased).
Seen = tuple[str, str, dict[str, str]]


@contextmanager
def answering(answer: Callable[[str, str], tuple[int, bytes]]) -> Iterator[tuple[str, list[Seen]]]:
    """Serve ``answer(method, path) -> (status, body)`` for GET and POST over HTTP/1.1 keep-alive (the request body
    is read and dropped); yields the base URL and the list of requests seen so far."""
    seen: list[Seen] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
            status, data = answer(self.command, self.path)
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer  # noqa: N815

    with serving(Handler) as url:
        yield url, seen


@contextmanager
def trickling(*, every_s: float = 0.1, for_s: float = 5.0) -> Iterator[str]:
    """A server that answers one connection's request with a 200 header promising 1,000 bytes, then sends one byte
    every ``every_s`` for ``for_s`` (no read waits longer than ``every_s``); yields its base URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def trickle() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            ends = time.monotonic() + for_s
            while time.monotonic() < ends and not stop.wait(every_s):
                try:
                    conn.sendall(b" ")
                except OSError:
                    break

    threading.Thread(target=trickle, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()
