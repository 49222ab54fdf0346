"""A loopback OpenAI-compatible HTTP server for tests: ``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``.

The answer text comes from ``responder(route, body) -> str`` (for completions, a list: one text per prompt);
a responder may raise :class:`StubHTTPError`
to answer with an HTTP error (vLLM's error shape, any message: e.g. :data:`CONTEXT_LENGTH_MESSAGE`), raise
:class:`StubDrop` to close the connection without answering, or return a :class:`StubRaw` to answer bytes that
are not an OpenAI answer (garbled replies). ``service(route, body)``, when given, runs before the responder (a
simulated engine's slots: :mod:`trace_lib.testing.sim_engine`), ``metrics()`` answers ``GET /metrics`` (text),
``idle_timeout_s`` closes kept-alive connections idle that long (uvicorn closes them after 5 s). Every request's
exact body bytes are kept in ``raw_requests``. Binds 127.0.0.1 on a free port; use as a context manager.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Responder = Callable[[str, dict[str, Any]], str]


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # many concurrent judge clients, as a vLLM server accepts them
    daemon_threads = True


#: vLLM's HTTP 400 message when prompt + max_tokens exceed ``--max-model-len`` (8192 for the judge pool).
CONTEXT_LENGTH_MESSAGE = (
    "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (4904 in the "
    "messages, 4096 in the completion). Please reduce the length of the messages or completion."
)


class StubHTTPError(Exception):
    """Raise from a responder to answer ``status`` with vLLM's ``{"error": {"message", "code"}}`` body."""

    def __init__(self, status: int, message: str = "stub error") -> None:
        super().__init__(status)
        self.status = status
        self.message = message


class StubDrop(Exception):
    """Raise from a responder (or ``service``) to close the connection without answering."""


class StubRaw:
    """Return from a responder to answer HTTP 200 with these bytes as they are (a garbled reply)."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


class OpenAIStubServer:
    """Serve ``responder`` at ``self.url`` (``http://127.0.0.1:PORT/v1``); records every request body."""

    def __init__(self, responder: Responder, *, model: str = "stub",
                 service: Callable[[str, dict[str, Any]], None] | None = None,
                 metrics: Callable[[], str] | None = None, idle_timeout_s: float | None = None) -> None:
        self.responder = responder
        self.model = model
        self.service, self.metrics, self.idle_timeout_s = service, metrics, idle_timeout_s
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.raw_requests: list[tuple[str, bytes]] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)  # shutdown() returns within one poll

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> OpenAIStubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as vLLM's server (clients pool connections)
            disable_nagle_algorithm = True  # TCP_NODELAY and one buffered write per answer, as uvicorn answers
            wbufsize = 1 << 16
            timeout = stub.idle_timeout_s  # None: kept alive as long as the client keeps it

            def handle_one_request(self) -> None:
                try:
                    super().handle_one_request()
                except (TimeoutError, ConnectionError):  # an idle connection closed by idle_timeout_s, or reset
                    self.close_connection = True

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/") == "/metrics" and stub.metrics is not None:
                    data = stub.metrics().encode("utf-8")
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                elif self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": stub.model, "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                body = json.loads(raw or b"{}")
                route = self.path.rstrip("/").removeprefix("/v1/")
                with stub._lock:
                    stub.requests.append((route, body))
                    stub.raw_requests.append((route, raw))
                try:
                    if stub.service is not None:
                        stub.service(route, body)
                    text = stub.responder(route, body)
                except StubDrop:
                    self.close_connection = True
                    self.connection.shutdown(2)  # SHUT_RDWR: the client sees the connection end, no answer
                    return
                except StubHTTPError as exc:
                    self._send(exc.status, {"error": {"message": exc.message, "code": exc.status}})
                    return
                if isinstance(text, StubRaw):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(text.payload)))
                    self.end_headers()
                    self.wfile.write(text.payload)
                    return
                completion = max(1, len(" ".join(text if isinstance(text, list) else [text]).split()))
                usage = {"prompt_tokens": 1, "completion_tokens": completion, "total_tokens": 1 + completion}
                if route == "chat/completions":
                    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    self._send(200, {"id": "stub", "object": "chat.completion", "choices": [choice], "usage": usage})
                elif route == "completions":
                    prompts = body.get("prompt")
                    prompts = prompts if isinstance(prompts, list) else [prompts]
                    texts = text if isinstance(text, list) else [text] * len(prompts)  # a list: one per prompt
                    choices = [{"index": i, "text": t, "finish_reason": "stop"} for i, t in enumerate(texts)]
                    self._send(200, {"id": "stub", "object": "text_completion", "choices": choices, "usage": usage})
                else:
                    self._send(404, {"error": "not found"})

        return Handler
