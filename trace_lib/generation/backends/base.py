"""The generation backend contract and the name -> implementation table (imported lazily).

A backend turns :class:`~trace_lib.generation.request.ChatRequest` objects into
:class:`~trace_lib.generation.request.GenerationResult` objects. It may yield results in any order (the caller
matches them by ``request_id``) and should yield each as soon as it is final, so that the caller can make it
durable. A request the backend cannot answer raises :class:`~trace_lib.errors.BackendError` -- after every
result it *could* produce has been yielded -- never a made-up response.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any, Iterator, Protocol, Sequence, runtime_checkable

from trace_lib.errors import UsageError
from trace_lib.generation.request import ChatRequest, GenerationResult


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
        BackendError: the backend's engine or client could not be created.
    """
    if name not in BACKENDS:
        close = difflib.get_close_matches(name, BACKENDS, n=1)
        hint = f"did you mean {close[0]}?" if close else f"choose one of: {', '.join(BACKENDS)}"
        raise UsageError(f"unknown backend {name!r}", field="--backend", hint=hint)
    module_name, _, attr = BACKENDS[name].partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    return factory(model_path=model_path, served_name=served_name, **options)
