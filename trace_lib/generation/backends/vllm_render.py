"""Chat rendering for the offline vllm engine on vLLM's renderer thread pool: the asynchronous path
``vllm serve`` takes (``Renderer.render_chat_async``: media loaded on vLLM's media threads, chat template and
multimodal processing on its ``renderer_num_workers`` threads), driven from an event loop on a background thread
so that requests are rendered concurrently while the engine runs. vLLM's offline ``LLM`` renders serially on the
thread that adds requests, which bounds image-heavy campaigns by one CPU core.

Identical conversations (the seeds of one row: same messages, same ``mm_processor_kwargs``) are rendered once and
the rendered input is added once per request: ``InputProcessor.process_inputs`` only reads it. vLLM requires the
multimodal processor cache to be off with several renderer workers (``mm_processor_cache_gb=0``); sharing renders
replaces what that cache saved across seeds. Needs vLLM with ``Renderer.render_chat_async`` (0.24).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict, deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from trace_lib.errors import BackendError
from trace_lib.generation.request import ChatRequest


@dataclass
class RenderStats:
    """How many requests were rendered, and how many reused an identical conversation's render."""

    rendered: int = 0
    shared: int = 0


def supports_concurrent_rendering(llm: Any) -> bool:
    """True when ``llm`` (a ``vllm.LLM``) has the asynchronous chat renderer this module drives."""
    return callable(getattr(getattr(llm, "renderer", None), "render_chat_async", None))


def engine_render_workers(llm: Any) -> int:
    """The engine's ``renderer_num_workers`` (1 where vLLM has no such setting)."""
    config = getattr(llm, "model_config", None)
    return int(getattr(config, "renderer_num_workers", 1) or 1)


class ConcurrentRenderer:
    """Renders requests' conversations concurrently; :meth:`ready` hands them back in submission order.

    ``keep`` bounds how many recent distinct renders stay shareable (each holds its processed images): the seeds
    of a row are queued within two scheduler chunks of each other.
    """

    def __init__(self, llm: Any, *, keep: int = 128) -> None:
        if not supports_concurrent_rendering(llm):
            raise BackendError("this vLLM has no asynchronous chat renderer (Renderer.render_chat_async)",
                               field="render_workers", hint="use render_workers=1, or vLLM >= 0.24")
        from vllm.renderers import ChatParams, merge_kwargs
        from vllm.utils.mistral import is_mistral_tokenizer

        self._renderer = llm.renderer
        # exactly the parameters LLM.enqueue_chat renders with (LLM._preprocess_chat with its defaults)
        chat_kwargs = merge_kwargs(None, dict(
            add_generation_prompt=True, continue_final_message=False, tools=None,
            tokenize=is_mistral_tokenizer(self._renderer.tokenizer) or llm.model_config.enable_prompt_embeds))
        self._chat_params = lambda mm_kwargs: ChatParams(  # noqa: E731
            chat_template=None, chat_template_content_format="auto", chat_template_kwargs=dict(chat_kwargs),
            mm_processor_kwargs=mm_kwargs)
        self._tok_params = self._renderer.default_chat_tok_params.with_kwargs()
        self._keep = max(1, keep)
        self._queue: deque[tuple[ChatRequest, Future]] = deque()
        self._recent: OrderedDict[tuple[str, tuple], Future] = OrderedDict()
        self.stats = RenderStats()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="trace-repro-vllm-render", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Requests submitted and not yet handed back by :meth:`ready`."""
        return len(self._queue)

    def submit(self, requests: Sequence[ChatRequest]) -> None:
        """Start rendering ``requests`` (a request whose conversation was rendered recently shares that render)."""
        for request in requests:
            mm_kwargs = tuple(sorted(request.mm_processor_kwargs.items()))
            key = (json.dumps(request.messages_json(), sort_keys=True), mm_kwargs)
            future = self._recent.get(key)
            if future is None:
                future = asyncio.run_coroutine_threadsafe(
                    self._render(request.messages_json(), dict(mm_kwargs) or None), self._loop)
                self._recent[key] = future
                if len(self._recent) > self._keep:
                    self._recent.popitem(last=False)
                self.stats.rendered += 1
            else:
                self._recent.move_to_end(key)
                self.stats.shared += 1
            self._queue.append((request, future))

    def ready(self, *, wait: bool) -> list[tuple[ChatRequest, Any]]:
        """The rendered requests at the head of the queue, as ``(request, engine input)``; with ``wait`` block
        until at least one is ready (when any is pending).

        Raises:
            Exception: whatever rendering the head request raised (as ``LLM.enqueue_chat`` would have).
        """
        out: list[tuple[ChatRequest, Any]] = []
        while self._queue and (self._queue[0][1].done() or (wait and not out)):
            request, future = self._queue.popleft()
            out.append((request, future.result()))
        return out

    async def _render(self, conversation: list[dict[str, Any]], mm_kwargs: Mapping[str, Any] | None) -> Any:
        extras = None if mm_kwargs is None else {"mm_processor_kwargs": mm_kwargs}
        _, (engine_input,) = await self._renderer.render_chat_async(
            [conversation], self._chat_params(mm_kwargs), self._tok_params, prompt_extras=extras)
        return engine_input

    def discard(self) -> None:
        """Drop every pending and shareable render (after an error: the renderer stays usable)."""
        for _, future in self._queue:
            future.cancel()
        self._queue.clear()
        self._recent.clear()

    def close(self) -> None:
        """Drop pending renders and stop the event loop (idempotent)."""
        self.discard()
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self._loop.close()
