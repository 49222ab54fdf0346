"""The generation backend contract and the name -> implementation table (imported lazily).

A backend turns :class:`~trace_lib.generation.request.ChatRequest` objects into
:class:`~trace_lib.generation.request.GenerationResult` objects. It may yield results in any order (the caller
matches them by ``request_id``) and should yield each as soon as it is final, so that the caller can make it
durable. A request the backend cannot answer raises :class:`~trace_lib.errors.BackendError` -- after every
result it *could* produce has been yielded -- never a made-up response; when only some requests failed and the
engine itself is fine, that error is a :class:`RequestsFailed` naming each of them.

Streaming (the campaign scheduler): a backend may also offer ``generate_stream(feed)``, pulling requests from a
:class:`RequestFeed` whenever it has room (vLLM: while the engine keeps running), so that many slices' requests
share one continuous batch; :func:`stream_generate` falls back to ``generate`` on chunks for the others. A stream
yields a :class:`~trace_lib.generation.request.RequestFailure` for each request that failed on its own, so the
caller fails that request's slice only and goes on. Request ids need not be unique in a stream (a benchmark's
seeds fed raw share their row keys): the native streams (vllm, Ray) hold requests under keys of their own and
answer each one; failures are reported by request id.
"""

from __future__ import annotations

import importlib
import queue
from typing import Any, Iterable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

from trace_lib.errors import (BackendError, EngineStartError, EngineStoppedError, TraceReproError, UsageError,
                              did_you_mean)
from trace_lib.generation.request import ChatRequest, GenerationResult, RequestFailure


@runtime_checkable
class Backend(Protocol):
    """What :func:`trace_lib.generation.run.run_generation` needs from an engine."""

    name: str

    def generate(self, requests: Sequence[ChatRequest]) -> Iterator[GenerationResult]:
        """Yield one result per request (any order); raise ``BackendError`` for requests left unanswered."""
        ...

    def close(self) -> None:
        """Release the engine (GPU memory, worker processes, HTTP sessions)."""
        ...


#: Backend name -> "module:factory"; the module is imported only when that backend is created.
BACKENDS: dict[str, str] = {
    "vllm": "trace_lib.generation.backends.vllm:VLLMBackend",
    "openai": "trace_lib.generation.backends.openai:OpenAIBackend",
    "hf": "trace_lib.generation.backends.hf:HFBackend",
}


def create_backend(name: str, *, model_path: str, served_name: str, **options: Any) -> Backend:
    """Create backend ``name`` for the model at ``model_path`` served as ``served_name``.

    ``options`` are the backend's own keyword arguments (see each backend's class docstring).

    Raises:
        UsageError: unknown backend name (lists the known ones).
        BackendError: the backend's engine or client could not be created (:class:`EngineStartError` for an
            engine that raised something of its own: its last line, never a bare traceback).
    """
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}", field="--backend", hint=did_you_mean(name, list(BACKENDS)))
    module_name, _, attr = BACKENDS[name].partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    try:
        return factory(model_path=model_path, served_name=served_name, **options)
    except TraceReproError:  # already one line
        raise
    except Exception as exc:
        # an OSError with an errno is the machine's, naming its path (the CLI renders it); one without is a
        # library's own complaint (transformers: "not a valid JSON file"): the model's fault, like any other
        if isinstance(exc, OSError) and exc.errno is not None:
            raise
        raise EngineStartError(f"{served_name}: the {name} engine did not start: {exception_line(exc)}",
                               hint="its log above has the cause; TRACE_REPRO_DEBUG=1 shows the traceback") from exc


def exception_line(exc: BaseException) -> str:
    """``Type: text`` of an engine's exception, on one line (its last non-empty line, where the cause sits)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__


def engine_stopped_error(exc: BaseException, *, backend: str, served_name: str, answered: int,
                         unanswered: int) -> EngineStoppedError:
    """The one-line error of an engine that raised something of its own while it generated (vLLM's
    ``EngineDeadError`` after its engine core died, torch's out of memory): the answers it gave before, what it
    still held, and its last line. Its log has the cause; the GPU's memory is not read (a dead engine has given
    its own back)."""
    return EngineStoppedError(
        f"{served_name}: the {backend} engine stopped while it generated, after {answered} answer(s) with "
        f"{unanswered} request(s) in flight ({exception_line(exc)})", field=backend,
        hint="its log above has the cause (CUDA out of memory, most often: another process on the GPU grew, a "
             "judge beside it); re-run to resume, with less --gpu-memory-utilization if so")


class RequestsFailed(BackendError):
    """Some requests failed on their own (``failures``: request id -> one-line reason, in order); every other
    request was answered and yielded before this is raised."""

    def __init__(self, failures: Mapping[str, str], *, field: str) -> None:
        self.failures = dict(failures)
        first_id, first_error = next(iter(self.failures.items()))
        super().__init__(f"{len(self.failures)} request(s) failed; first {first_id!r}: {first_error}", field=field,
                         hint="rows already answered were kept; re-run to resume")


_END = object()


class RequestFeed:
    """A bounded, thread-safe stream of requests from one producer to one consuming backend.

    The producer calls :meth:`put` (blocks while ``capacity`` requests wait) and finally :meth:`finish`; the
    backend calls :meth:`take`.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, capacity))
        self.finished = False  # set once the consumer has seen the end

    @classmethod
    def of(cls, requests: Iterable[ChatRequest]) -> RequestFeed:
        """A finished feed holding ``requests`` (the per-slice path)."""
        items = list(requests)
        feed = cls(capacity=len(items) + 1)
        for request in items:
            feed.put(request)
        feed.finish()
        return feed

    def put(self, request: ChatRequest, *, timeout: float | None = None) -> bool:
        """Queue ``request`` (blocking while the feed is full); False when ``timeout`` passed first."""
        try:
            self._queue.put(request, timeout=timeout)
        except queue.Full:
            return False
        return True

    def finish(self, *, timeout: float | None = None) -> bool:
        """Mark the end of the feed (after every request); False when ``timeout`` passed first."""
        try:
            self._queue.put(_END, timeout=timeout)
        except queue.Full:
            return False
        return True

    def take(self, limit: int, *, wait: bool) -> list[ChatRequest]:
        """Up to ``limit`` requests. With ``wait`` block until at least one arrives or the feed ends; without,
        return what is ready now (possibly nothing). ``[]`` with ``finished`` set means the feed ended."""
        taken: list[ChatRequest] = []
        if self.finished:
            return taken
        while len(taken) < limit:
            try:
                item = self._queue.get(block=wait and not taken)
            except queue.Empty:
                break
            if item is _END:
                self.finished = True
                break
            taken.append(item)
        return taken


def stream_generate(backend: Backend, feed: RequestFeed, *,
                    chunk: int = 256) -> Iterator[GenerationResult | RequestFailure]:
    """Every result for the requests of ``feed``: through ``backend.generate_stream`` when the backend has it,
    else ``backend.generate`` on successive chunks of up to ``chunk`` requests, a chunk's
    :class:`RequestsFailed` becoming one :class:`RequestFailure` per failed request (the next chunks go on)."""
    native = getattr(backend, "generate_stream", None)
    if callable(native):
        yield from native(feed)
        return
    while True:
        batch = feed.take(chunk, wait=True)
        if not batch:
            return
        try:
            yield from backend.generate(batch)
        except RequestsFailed as exc:
            yield from (RequestFailure(request_id, error) for request_id, error in exc.failures.items())
