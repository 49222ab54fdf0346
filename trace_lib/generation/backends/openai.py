"""The ``openai`` backend: any OpenAI-compatible ``/v1/chat/completions`` endpoint (e.g. ``vllm serve``).

Sends :meth:`ChatRequest.payload` verbatim (so the request hash is the hash of the bytes' content sent), from a
thread pool with keep-alive connections, optionally over several endpoints. Failure policy (eval-campaign spec
§3.6): transport errors, HTTP 429, HTTP >= 500 and bodies that are not a well-formed chat completion (content
not a string, no finish reason, usage that is not non-negative integers or does not add up) are retried, up to
``max_attempts`` attempts per request in total, sleeping ``min(5, 0.25 * attempt)`` s and preferring an endpoint
the request has not tried yet; any other HTTP 4xx is permanent. A malformed answer is never returned as a
result. Results are yielded as they complete; requests that failed are reported together in one
:class:`~trace_lib.generation.backends.base.RequestsFailed` at the end. When the caller stops consuming
(Ctrl-C, SIGTERM, an error), the requests in flight are cancelled: their sockets are shut down and no retry
starts, so the call returns within moments, not after the retry loops.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit

from trace_lib.errors import UsageError
from trace_lib.generation.backends.base import RequestsFailed
from trace_lib.generation.request import ChatRequest, GenerationResult
from trace_lib.interrupts import cancel_on_stop, raise_if_stopped


class _Retryable(Exception):
    pass


class _Permanent(Exception):
    pass


class _Cancelled(Exception):
    pass


@dataclass(frozen=True)
class _Endpoint:
    scheme: str
    host: str
    port: int
    path: str  # ".../v1/chat/completions"

    @classmethod
    def parse(cls, base_url: str) -> _Endpoint:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError("not an http(s) base URL", field="--base-url", found=base_url,
                             hint="pass e.g. http://127.0.0.1:8000/v1")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path + "/chat/completions")

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.path}"


class OpenAIBackend:
    """Chat completions over HTTP.

    Options: ``base_url`` (``http://HOST:PORT/v1``; several separated by commas form a pool), ``api_key``
    (default ``$OPENAI_API_KEY`` or ``EMPTY``), ``concurrency`` (in-flight requests, default 32 per endpoint),
    ``max_attempts`` (default 5), ``timeout_s`` (per HTTP request, default 300), ``retry_sleep_cap_s`` (5).
    ``model_path`` is not used (the server already holds the model); ``served_name`` is the payload's ``model``.
    """

    name = "openai"

    def __init__(
        self,
        *,
        model_path: str,
        served_name: str,
        base_url: str,
        api_key: str | None = None,
        concurrency: int | None = None,
        max_attempts: int = 5,
        timeout_s: float = 300.0,
        retry_sleep_cap_s: float = 5.0,
    ) -> None:
        self.model_path = model_path
        self.served_name = served_name
        self.endpoints = [_Endpoint.parse(u) for u in str(base_url).split(",") if u.strip()]
        if not self.endpoints:
            raise UsageError("no endpoint given", field="--base-url")
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.concurrency = concurrency or 32 * len(self.endpoints)
        if max_attempts < 1:
            raise UsageError("must be at least 1", field="max_attempts", found=max_attempts)
        self.max_attempts = max_attempts
        if not timeout_s > 0:
            raise UsageError("must be a positive number of seconds", field="--request-timeout", found=timeout_s)
        self.timeout_s = timeout_s
        self.retry_sleep_cap_s = retry_sleep_cap_s
        self._cancelled = threading.Event()
        self._local = threading.local()
        self._all_conns: list[http.client.HTTPConnection] = []
        self._next = 0
        self._lock = threading.Lock()

    # -- transport ---------------------------------------------------------------------------------------------
    def _connection(self, endpoint: _Endpoint) -> http.client.HTTPConnection:
        conns = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        conn = conns.get(endpoint)
        if conn is None:
            cls = http.client.HTTPSConnection if endpoint.scheme == "https" else http.client.HTTPConnection
            conn = conns[endpoint] = cls(endpoint.host, endpoint.port, timeout=self.timeout_s)
            with self._lock:
                self._all_conns.append(conn)
        return conn

    def _drop_connection(self, endpoint: _Endpoint) -> None:
        conn = getattr(self._local, "conns", {}).pop(endpoint, None)
        if conn is not None:
            conn.close()

    def _post(self, endpoint: _Endpoint, body: bytes) -> dict[str, Any]:
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {self.api_key}",
        }
        try:
            conn = self._connection(endpoint)
            conn.request("POST", endpoint.path, body=body, headers=headers)
            if self._cancelled.is_set():  # cancelled while connecting: its socket may have missed the shutdown
                raise _Cancelled()
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self._drop_connection(endpoint)
            raise _Retryable(f"{endpoint}: {type(exc).__name__}: {exc}") from None
        status = response.status
        if status == 429 or status >= 500:
            raise _Retryable(f"{endpoint}: HTTP {status}: {data[:200]!r}")
        if status >= 400:
            raise _Permanent(f"{endpoint}: HTTP {status}: {data[:300]!r}")
        try:
            return json.loads(data)
        except ValueError:
            raise _Retryable(f"{endpoint}: response is not JSON: {data[:200]!r}") from None

    # -- one request -------------------------------------------------------------------------------------------
    def _first_endpoint(self) -> int:
        with self._lock:
            index = self._next
            self._next = (self._next + 1) % len(self.endpoints)
        return index

    def _one(self, request: ChatRequest) -> GenerationResult:
        payload = request.payload(self.served_name)
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        start = self._first_endpoint()
        last_error = "no attempt made"
        for attempt in range(self.max_attempts):
            if self._cancelled.is_set():
                raise _Cancelled()
            endpoint = self.endpoints[(start + attempt) % len(self.endpoints)]
            try:
                doc = self._post(endpoint, body)
                return _parse_completion(request.request_id, doc, max_tokens=payload.get("max_tokens"))
            except _Retryable as exc:
                last_error = str(exc)
            if attempt + 1 < self.max_attempts and self._cancelled.wait(min(self.retry_sleep_cap_s,
                                                                            0.25 * (attempt + 1))):
                raise _Cancelled()
        raise _Retryable(f"gave up after {self.max_attempts} attempts: {last_error}")

    def _cancel_in_flight(self) -> None:
        """Stop every request of the current call: no new attempt, and blocked reads end now (socket shutdown)."""
        self._cancelled.set()
        with self._lock:
            conns = list(self._all_conns)
        for conn in conns:
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    # -- Backend -----------------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[ChatRequest]) -> Iterator[GenerationResult]:
        failures: dict[str, str] = {}
        self._cancelled.clear()
        finished = False
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(requests) or 1))) as pool, \
                cancel_on_stop(self._cancel_in_flight):  # Ctrl-C / SIGTERM: cancel, hand over what arrived, stop
            futures = {pool.submit(self._one, r): r.request_id for r in requests}
            try:
                for future in as_completed(futures):
                    try:
                        yield future.result()
                    except (_Retryable, _Permanent) as exc:
                        failures[futures[future]] = str(exc)
                    except _Cancelled:
                        pass
                finished = True
            finally:
                if not finished:  # the caller stopped early: end the requests in flight instead of waiting
                    for future in futures:
                        future.cancel()
                    self._cancel_in_flight()
        self.close()  # the pool's threads are gone; their keep-alive connections with them
        raise_if_stopped()
        if failures:
            raise RequestsFailed(failures, field="openai")

    def close(self) -> None:
        with self._lock:
            conns, self._all_conns = self._all_conns, []
        for conn in conns:
            conn.close()
        self._local = threading.local()


def _parse_completion(request_id: str, doc: Any, *, max_tokens: Any = None) -> GenerationResult:
    """A chat-completion body -> result, or :class:`_Retryable` (an endpoint fault, never stored) when the body is
    not one well-formed completion: ``choices[0].message.content`` a string, ``finish_reason`` a non-empty
    string, ``usage`` (when present) non-negative integer token counts that agree with ``total_tokens``, with
    ``max_tokens`` and with the content (text needs at least one completion token)."""
    try:
        choice = doc["choices"][0]
        message = choice["message"]
        content, finish = message["content"], choice["finish_reason"]
    except (KeyError, IndexError, TypeError):
        raise _Retryable(f"not a chat completion: {str(doc)[:200]}") from None
    if not isinstance(content, str):
        raise _Retryable(f"malformed chat completion: message.content is {type(content).__name__}, not a string")
    if not isinstance(finish, str) or not finish:
        raise _Retryable(f"malformed chat completion: finish_reason is {finish!r}")
    usage = doc.get("usage")
    if usage is None:
        usage = {}
    if not isinstance(usage, dict):
        raise _Retryable(f"malformed chat completion: usage is {type(usage).__name__}, not an object")
    counts = {}
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = usage.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise _Retryable(f"malformed chat completion: usage.{name} is {value!r}, not a non-negative integer")
        counts[name] = value
    prompt, completion, total = counts["prompt_tokens"], counts["completion_tokens"], counts["total_tokens"]
    if completion is not None:
        if isinstance(max_tokens, int) and completion > max_tokens:
            raise _Retryable(f"malformed chat completion: {completion} completion tokens exceed max_tokens "
                             f"{max_tokens}")
        if content and completion == 0:
            raise _Retryable("malformed chat completion: text with 0 completion tokens")
        if prompt is not None and total is not None and total != prompt + completion:
            raise _Retryable(f"malformed chat completion: usage.total_tokens {total} is not prompt_tokens "
                             f"{prompt} + completion_tokens {completion}")
    return GenerationResult(request_id=request_id, text=content, finish_reason=finish, prompt_tokens=prompt,
                            completion_tokens=completion)
