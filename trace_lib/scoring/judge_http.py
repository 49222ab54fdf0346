"""The one HTTP transport of both judge clients (evaluation and TRACE validation), on ``httpx``.

Contract:

- :func:`encode_body` is the request body both upstream stacks send: ``json.dumps(body)`` with Python's default
  separators and ``ensure_ascii`` (VLMEvalKit posts ``data=json.dumps(payload)``, the persistent and validation
  clients post ``requests``' ``json=``, which serialises identically), so bodies are byte-identical to upstream's.
- :class:`JudgeTransport` is the process's one transport: one :class:`JudgeWindow` per judge endpoint (at most
  ``concurrency`` *sequences*, i.e. prompts, in flight there, whichever client, slice or thread sends them: a
  completions batch of 64 prompts weighs 64, a chat request 1), and one keep-alive ``httpx.Client`` per calling
  thread, so that no thread can close a connection another thread is using (httpcore's shared pool can:
  ``ReadError: Bad file descriptor`` or a request that never returns, seen at 256 connections; a stress test
  reproduces it). Every request has a bounded time (``timeout_s`` for the connection, each read and write, and the
  whole exchange: a watchdog shuts the socket of an exchange past its deadline), then fails as ``timeout``.
  A request the server closed the connection on before answering a byte (a keep-alive race) is re-sent once at
  once on a new connection; every other failure goes back to the calling stack, which retries it.
- Every exchange ends in a parsed JSON answer, a :class:`CallFailed` (a *per-request* failure that the calling
  stack retries and then treats as an unusable reply: vLLM's context-length HTTP 400, other 4xx answers to one
  request, 5xx, 408/429, timeouts, a refused or reset connection, an answer that is not JSON) or a
  :class:`~trace_lib.errors.JudgeError` (a *configuration* failure no retry can fix: the endpoint does not serve
  the requested model name (HTTP 404), rejects the credentials (401/403) or the URL is not an endpoint).
- Ctrl-C / SIGTERM (:mod:`trace_lib.interrupts`): while a request is in flight the transport holds a cancel hook
  that shuts down every pooled socket, so blocked requests end at once; from the signal on every request, in
  any thread, raises :class:`~trace_lib.interrupts.Interrupted` instead of a :class:`CallFailed` (no retry).
"""

from __future__ import annotations

import json
import socket
import threading
import time
import weakref
from dataclasses import dataclass
from contextlib import contextmanager
from typing import Any, Iterator

from trace_lib.errors import JudgeError
from trace_lib.interrupts import cancel_on_stop, raise_if_stopped

#: Substrings of vLLM's HTTP 400 answer when prompt + max_tokens exceed ``--max-model-len``.
CONTEXT_LENGTH_MARKERS = (
    "maximum context length", "context length", "maximum model length", "max_model_len", "too long",
)
#: Failure kinds a stack may see; only ``connection`` and ``server`` say the endpoint itself is unwell.
FAILURE_KINDS = ("context_length", "rejected", "server", "timeout", "connection", "garbled", "empty")
#: Kinds caused by one request's content (never evidence that the judge is misconfigured or down).
PER_REQUEST_KINDS = frozenset({"context_length", "rejected", "garbled", "empty"})


class CallFailed(Exception):
    """One request failed in a way upstream's clients retry and then treat as an unusable reply.

    ``kind`` is one of :data:`FAILURE_KINDS`; ``reason`` is a short human text (``HTTP 400: This model's ...``).
    """

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


@dataclass(frozen=True)
class Answer:
    """A parsed JSON answer and the seconds the exchange took."""

    data: Any
    elapsed_s: float


def encode_body(body: dict[str, Any]) -> bytes:
    """The request bytes upstream's clients send for ``body`` (key order as given)."""
    return json.dumps(body).encode("utf-8")


def _error_text(payload: bytes) -> str:
    try:
        data = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return payload[:200].decode("utf-8", "replace").strip()
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or "")[:300]
    if error is not None:
        return str(error)[:300]
    if isinstance(data, dict) and "message" in data:
        return str(data["message"])[:300]
    return ""


def classify_status(status: int, payload: bytes, *, url: str, model: str | None) -> CallFailed | JudgeError:
    """What a non-2xx answer means: a per-request :class:`CallFailed` or a configuration :class:`JudgeError`."""
    detail = _error_text(payload)
    shown = f"HTTP {status}" + (f": {detail}" if detail else "")
    lowered = detail.lower()
    if status == 404:
        if "model" in lowered:
            return JudgeError("the endpoint does not serve the requested judge model", field=f"--judge-url {url}",
                              expected=model, found=shown,
                              hint="serve the judge with that --served-model-name, or pass the URL that serves it")
        return JudgeError(f"judge URL is not an OpenAI endpoint ({shown})", field=f"--judge-url {url}",
                          hint="pass the base URL, e.g. http://127.0.0.1:18100/v1")
    if status in (401, 403):
        return JudgeError(f"judge refused the credentials ({shown})", field=f"--judge-url {url}",
                          hint="serve the judge without --api-key, or with the key 'sk-local'")
    if status == 400 and any(m in lowered for m in CONTEXT_LENGTH_MARKERS):
        return CallFailed("context_length", shown)
    if 400 <= status < 500 and status not in (408, 429):
        return CallFailed("rejected", shown)
    return CallFailed("server", shown)


class _Sockets:
    """The connections' network backend, keeping a weak reference to every socket it opens (and the thread that
    opened it) so that a stop signal can shut them all down and the watchdog one thread's (a blocked read then
    ends at once; closing alone does not wake another thread's ``recv``)."""

    def __init__(self) -> None:
        import httpcore  # noqa: PLC0415

        self._backend = httpcore.SyncBackend()
        self._streams: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        stream = self._backend.connect_tcp(*args, **kwargs)
        with self._lock:
            self._streams[stream] = threading.get_ident()
        try:  # registered first: a signal either finds this socket or came before this check
            raise_if_stopped()
        except BaseException:
            stream.close()
            raise
        return stream

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        return self._backend.connect_unix_socket(*args, **kwargs)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)

    def shutdown_all(self, thread: int | None = None) -> None:
        """Shut down every socket (``thread``: only those that thread opened)."""
        with self._lock:
            streams = [s for s, owner in self._streams.items() if thread is None or owner == thread]
        for stream in streams:
            sock = stream.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class JudgeWindow:
    """One endpoint's in-flight window: at most ``capacity`` sequences in flight, granted first come, first served
    (a request of ``n`` waits until ``n`` are free and every earlier request is served; ``n`` above the capacity
    takes the whole window). ``in_flight``, ``waiting`` (sequences asked for, not yet granted) and ``peak`` are
    read by the campaign scorer (is the judge starved?) and the tests."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, int(capacity))
        self.in_flight = self.waiting = self.peak = 0
        self._queue: list[int] = []  # tickets, in arrival order
        self._next = 0
        self._cond = threading.Condition()

    @contextmanager
    def hold(self, weight: int) -> Iterator[None]:
        need = max(1, min(int(weight), self.capacity))
        with self._cond:
            ticket = self._next
            self._next += 1
            self._queue.append(ticket)
            self.waiting += need
            try:
                while self._queue[0] != ticket or self.in_flight + need > self.capacity:
                    self._cond.wait()
            finally:
                self.waiting -= need
                self._queue.remove(ticket)
                self._cond.notify_all()
            self.in_flight += need
            self.peak = max(self.peak, self.in_flight)
        try:
            yield
        finally:
            with self._cond:
                self.in_flight -= need
                self._cond.notify_all()

    @property
    def load(self) -> int:
        """Sequences in flight or asked for."""
        return self.in_flight + self.waiting


class _Watchdog:
    """Ends exchanges past their deadline: shuts down the sockets of the thread running one (checked every
    ``tick_s``), so no request outlives its ``timeout_s`` by more than a tick, whatever the server sends."""

    def __init__(self, sockets: _Sockets, tick_s: float = 0.5) -> None:
        self._sockets, self._tick_s = sockets, tick_s
        self._deadlines: dict[int, float] = {}
        self._expired: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def guard(self, timeout_s: float) -> Iterator[None]:
        me = threading.get_ident()
        with self._lock:
            self._deadlines[me] = time.monotonic() + timeout_s
            self._expired.discard(me)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="judge-watchdog", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._deadlines.pop(me, None)

    def expired(self) -> bool:
        """Whether the current thread's last exchange was ended by the watchdog."""
        with self._lock:
            return threading.get_ident() in self._expired

    def _run(self) -> None:
        while True:
            time.sleep(self._tick_s)
            now = time.monotonic()
            with self._lock:
                late = [t for t, deadline in self._deadlines.items() if deadline < now]
                for thread in late:
                    del self._deadlines[thread]
                    self._expired.add(thread)
            for thread in late:
                self._sockets.shutdown_all(thread)


#: Idle keep-alive connections are dropped after this long, before vLLM's server drops them (uvicorn's 5 s).
KEEPALIVE_S = 2.0
#: Times a request is re-sent at once when the server closed the connection without answering a byte.
RESENDS = 2
#: Connections one thread keeps open (one per endpoint it talks to, at most this many).
THREAD_CONNECTIONS = 4


def raise_fd_limit(needed: int) -> int:
    """Raise this process's soft open-files limit to at least ``needed`` (up to the hard limit); returns the
    limit now in force (a judge window of N sequences may hold N sockets per endpoint)."""
    try:
        import resource  # noqa: PLC0415 - POSIX only
    except ImportError:  # pragma: no cover
        return needed
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


class _ThreadClient:
    """One thread's client, held in the transport's thread-local storage (gone, and closed, with the thread)."""

    __slots__ = ("client", "__weakref__")

    def __init__(self, client: Any) -> None:
        self.client = client


class JudgeTransport:
    """Windowed HTTP for judge requests (see module docstring); ``concurrency`` is each endpoint's window in
    sequences."""

    def __init__(self, *, concurrency: int = 192, api_key: str | None = "sk-local",
                 keepalive_s: float = KEEPALIVE_S) -> None:
        import httpx  # noqa: PLC0415 - imported with the first judge, not with trace_lib

        self.concurrency = max(1, int(concurrency))
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._keepalive_s = keepalive_s
        self._sockets = _Sockets()
        self._watchdog = _Watchdog(self._sockets)
        self._windows: dict[str, JudgeWindow] = {}
        self._local = threading.local()
        self._clients: weakref.WeakSet[Any] = weakref.WeakSet()
        self._tls: Any = None
        self._lock = threading.Lock()
        self._httpx = httpx

    def window(self, url: str) -> JudgeWindow:
        """The window of the endpoint serving ``url`` (one per scheme, host and port)."""
        key = _origin(url)
        with self._lock:
            if key not in self._windows:
                self._windows[key] = JudgeWindow(self.concurrency)
                # a socket per sequence in flight at every endpoint at most (chat), and some for retries elsewhere
                raise_fd_limit(2 * self.concurrency * len(self._windows) + 256)
            return self._windows[key]

    def windows(self) -> dict[str, JudgeWindow]:
        """Every endpoint's window so far, by origin."""
        with self._lock:
            return dict(self._windows)

    def _client(self) -> Any:
        holder = getattr(self._local, "holder", None)
        client = holder.client if holder is not None else None
        if client is None:
            httpx = self._httpx
            limits = httpx.Limits(max_connections=THREAD_CONNECTIONS, max_keepalive_connections=THREAD_CONNECTIONS,
                                  keepalive_expiry=self._keepalive_s)
            with self._lock:  # one TLS context for every thread's client (building one costs ~70 ms)
                if self._tls is None:
                    self._tls = httpx.create_ssl_context()
            pooled = httpx.HTTPTransport(limits=limits, retries=1,  # one more connect attempt (a restarting backlog)
                                         verify=self._tls)
            pooled._pool._network_backend = self._sockets  # httpx has no argument for httpcore's network_backend
            client = httpx.Client(limits=limits, transport=pooled,
                                  trust_env=False)  # a judge is a local endpoint; proxies would misroute it
            holder = _ThreadClient(client)
            weakref.finalize(holder, client.close)  # the thread ended (its locals dropped): close its sockets
            self._local.holder = holder
            with self._lock:
                self._clients.add(client)
        return client

    def close(self) -> None:
        with self._lock:
            clients = list(self._clients)
            self._clients = weakref.WeakSet()
        for client in clients:
            client.close()
        self._local = threading.local()

    def post(self, url: str, body: dict[str, Any], *, timeout_s: float, model: str | None = None,
             weight: int = 1) -> Answer:
        """POST ``body`` (bytes of :func:`encode_body`) within the endpoint's window (``weight``: the prompts it
        carries) and parse the JSON answer.

        Raises:
            CallFailed: a per-request failure (see module docstring).
            JudgeError: a configuration failure.
        """
        with self.window(url).hold(weight):
            return self._exchange("POST", url, encode_body(body), timeout_s=timeout_s, model=model)

    def cancel_all(self) -> None:
        """End every exchange in flight now (its socket shut down: the request fails, and a stopped caller does
        not send it again)."""
        self._sockets.shutdown_all()

    def get(self, url: str, *, timeout_s: float) -> Answer:
        """GET ``url`` and parse the JSON answer (``/v1/models`` probes)."""
        return self._exchange("GET", url, None, timeout_s=timeout_s, model=None)

    def _exchange(self, method: str, url: str, content: bytes | None, *, timeout_s: float,
                  model: str | None) -> Answer:
        with cancel_on_stop(self._sockets.shutdown_all):
            raise_if_stopped()  # no new request (nor retry) once a stop signal arrived
            try:
                answer = self._send(method, url, content, timeout_s=timeout_s, model=model)
            except CallFailed:
                raise_if_stopped()  # ended by the stop signal's socket shutdown: not a failure of the request
                raise
            return answer

    def _send(self, method: str, url: str, content: bytes | None, *, timeout_s: float,
              model: str | None) -> Answer:
        httpx = self._httpx
        started = time.monotonic()
        client = self._client()
        try:
            with self._watchdog.guard(timeout_s):
                for resend in range(RESENDS + 1):
                    try:
                        response = client.request(method, url, content=content, headers=self._headers,
                                                  timeout=max(0.001, timeout_s - (time.monotonic() - started)))
                        break
                    except httpx.RemoteProtocolError as exc:
                        if "without sending a response" not in str(exc) or self._watchdog.expired() \
                                or resend == RESENDS:
                            raise
                        raise_if_stopped()
                        # the server closed the connection as the request went out (a kept-alive connection it
                        # dropped as idle): nothing was answered, so send it again, now, on a new connection
                payload = response.content
        except httpx.TimeoutException:
            raise CallFailed("timeout", f"timed out after {timeout_s:g} s") from None
        except httpx.ConnectError as exc:  # nothing listens (or unknown host): a configuration failure when it lasts
            raise CallFailed("connection", _connect_reason(exc)) from None
        except (httpx.TransportError, OSError) as exc:  # reset or cut mid-exchange: the server is unwell, retried
            if self._watchdog.expired():
                raise CallFailed("timeout", f"no complete answer within {timeout_s:g} s") from None
            raise CallFailed("server", f"{type(exc).__name__}: {exc}"[:200]) from None
        if not 200 <= response.status_code < 300:
            raise classify_status(response.status_code, payload, url=url, model=model)
        try:
            data = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise CallFailed("garbled", "answer is not JSON") from None
        return Answer(data, time.monotonic() - started)


def _origin(url: str) -> str:
    """``scheme://host:port`` of ``url`` (the endpoint a window belongs to)."""
    from urllib.parse import urlsplit  # noqa: PLC0415

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _connect_reason(exc: Exception) -> str:
    text = str(exc).lower()
    if "refused" in text or "errno 111" in text:
        return "connection refused"
    if "name or service" in text or "nodename" in text or "getaddrinfo" in text:
        return "unknown host"
    return str(exc)[:200] or type(exc).__name__


_shared: JudgeTransport | None = None
_shared_lock = threading.Lock()


def shared_transport() -> JudgeTransport:
    """The process's transport (created on first use; each endpoint's window from ``TRACE_JUDGE_CONCURRENCY``,
    default 192 sequences: upstream's ``--max-num-seqs 128`` and half again as headroom, trace_lib.options)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            import os  # noqa: PLC0415

            from trace_lib.options import JUDGE_CONCURRENCY_ENV as var  # noqa: PLC0415

            raw = os.environ.get(var.name, var.default)
            try:
                concurrency = int(raw)
            except ValueError:
                raise JudgeError("not an integer", field=var.name, found=raw) from None
            if concurrency < 1:
                raise JudgeError("must be at least 1", field=var.name, found=raw)
            _shared = JudgeTransport(concurrency=concurrency)
        return _shared


def models_url(base: str) -> str:
    """``<base>/v1/models`` from an endpoint given as ``http://H:P``, ``.../v1`` or ``.../v1/completions``."""
    base = base.strip().rstrip("/")
    for suffix in ("/v1/completions", "/v1/chat/completions"):
        if base.endswith(suffix):
            base = base[: -len(suffix)] + "/v1"
    if not base.endswith("/v1"):
        base += "/v1"
    return base + "/models"


def probe(base: str, model: str, *, timeout_s: float = 10.0, transport: JudgeTransport | None = None,
          hint: str = "start the judge ('trace-repro judge serve') or pass the URL that serves it") -> None:
    """The endpoint answers ``GET /v1/models`` and lists ``model``.

    Raises:
        JudgeError: unreachable (connection refused, timeout), not an endpoint, or serving another model.
    """
    transport = transport or shared_transport()
    url = models_url(base)
    try:
        data = transport.get(url, timeout_s=timeout_s).data
    except CallFailed as exc:
        raise JudgeError(f"judge unreachable ({exc.reason})", field=f"--judge-url {base}", hint=hint) from None
    served = [m.get("id") for m in (data.get("data") or []) if isinstance(m, dict)] if isinstance(data, dict) else []
    if model not in served:
        raise JudgeError("endpoint does not serve the judge", field=f"--judge-url {base}", expected=model,
                         found=", ".join(map(str, served)) or "no models",
                         hint=f"serve it with --served-model-name {model} ('trace-repro judge serve' does)")
