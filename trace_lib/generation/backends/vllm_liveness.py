"""Waking a vLLM ``step()`` that waits on an engine core which died without a word.

vLLM's synchronous multiprocess client (``SyncMPClient``; 0.24, and 0.10.2's has the same parts) watches its
engine core process. When that process ends without saying so (SIGKILL, the kernel's OOM killer, a segfault), the
client's monitor thread marks the engine dead and stops its output thread. ``get_output()`` is left waiting on a
queue that nothing fills any more, and ``LLMEngine.step()`` waits in it for ever. An engine core that fails in
Python does say so: vLLM queues ``EngineDeadError`` itself, which is run 36's case (docs/performance.md).

:func:`waking_a_dead_engine` closes that gap while a stream runs. It polls the client's dead flag and, once the
flag is set, queues vLLM's own ``EngineDeadError`` behind the outputs already queued, so the waiting step gets
every answer the engine gave and then the error. A client without those parts (an in-process engine core, another
vLLM layout) is left alone.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

#: How often the dead flag is read while a stream runs (seconds): the most a dead engine core can stall a stream.
POLL_S = 0.5


def _engine_dead_error() -> Exception:
    """vLLM's ``EngineDeadError`` (its message names the cause as the parent sees it), else a plain stand-in."""
    try:
        from vllm.v1.engine.exceptions import EngineDeadError
    except ImportError:
        return RuntimeError("the engine core process ended")
    return EngineDeadError()


@contextlib.contextmanager
def waking_a_dead_engine(engine: Any, *, poll_s: float = POLL_S) -> Iterator[None]:
    """While the block runs, queue ``EngineDeadError`` for ``engine``'s (an ``LLMEngine``) output reader once its
    client marks the engine core dead; once at most, and never after the block has left."""
    client = getattr(engine, "engine_core", None)
    resources = getattr(client, "resources", None)
    outputs = getattr(client, "outputs_queue", None)
    if not hasattr(resources, "engine_dead") or not callable(getattr(outputs, "put_nowait", None)):
        yield
        return
    error = _engine_dead_error()  # made here: the watcher imports nothing
    left = threading.Event()

    def watch() -> None:
        while not left.wait(poll_s):
            if resources.engine_dead:
                outputs.put_nowait(error)
                return

    watcher = threading.Thread(target=watch, name="trace-repro-engine-liveness", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        left.set()
        watcher.join(timeout=poll_s + 1)
