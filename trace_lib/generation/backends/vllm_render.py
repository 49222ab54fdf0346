"""vLLM's request rendering in worker processes, off the thread that steps an offline engine (vLLM >= 0.24).

vLLM's offline ``LLM`` renders every request (chat template, tokenizer, image processor) on the thread that also
steps the engine, so with image-heavy prompts one engine's throughput is bounded by one core.
:class:`RenderWorkers` renders in ``count`` spawned processes instead. Each worker holds a vLLM renderer of its
own, built from the engine's ``VllmConfig`` with a processor-only multimodal cache (the cache vLLM gives each of
several API-server processes), and renders with ``LLM``'s own ``_preprocess_chat``; identical conversations (a
row's seeds) go to the same worker, so its cache serves the repeats. The engine's thread then adds each
rendered request as ``LLM.enqueue_chat`` would, after entering its processed images into the engine's own
multimodal cache, so an image still crosses to the engine core once. Where that cache is vLLM's sender cache (the
offline default: the engine core keeps what it was sent) a worker also ships each image to the engine's thread
once: a repeat comes as ``None``, which the engine's thread accepts while the engine's cache still holds that
image (:func:`inject_into_sender_cache`); otherwise a worker renders the request again and ships it whole. (Never
the engine's thread: the items entered into its cache carry no prompt updates, which its own rendering would
reuse.)

Experimental: reached only from the benchmarks (``VLLMBackend(input_workers=N)``). Measured on one H200 (vLLM
0.24.0, runs 13-15 of docs/performance.md): with 8 workers one engine generated 1.28x faster than rendering on its
thread in ``engine_input_ceiling.py``, but in the campaign benchmark, at both shapes and with one or two engines,
within 4-8% of the thread's rates: the engine's thread then waits on the engine core nearly all the time.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import pickle
import zlib
from collections import OrderedDict
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping, Sequence

from trace_lib.errors import BackendError

#: The worker-side renderer factory: ``"module:function"``, called with the pickled ``VllmConfig``; returns
#: ``render(conversation, mm_processor_kwargs) -> engine input``. Tests name their own.
VLLM_RENDERER = "trace_lib.generation.backends.vllm_render:vllm_renderer"
#: Requests per task sent to a worker: small, so the engine gets the first ones while the rest render.
CHUNK = 8
#: Image hashes a worker remembers having shipped (a row's seeds arrive within a few chunks of each other).
SHIPPED_MEMORY = 4096


@dataclass(frozen=True)
class Rendered:
    """One request rendered by a worker: its engine input, or the text of the ``ValueError`` vLLM refused it with."""

    key: Hashable
    engine_input: Any = None
    refusal: str | None = None


def vllm_renderer(config_blob: bytes) -> Callable[[list, Mapping[str, Any] | None], Any]:
    """A vLLM renderer for the pickled ``VllmConfig`` ``config_blob``, with a processor-only multimodal cache."""
    import torch
    from vllm.entrypoints.offline_utils import OfflineInferenceMixin
    from vllm.renderers import renderer_from_config

    torch.set_num_threads(1)  # a worker renders one request at a time; the workers share the host's cores
    config = pickle.loads(config_blob)
    # the cache type vLLM picks for several frontends (processor only: every item is shipped whole)
    object.__setattr__(config.parallel_config, "_api_process_count", 2)
    host = _Host(renderer_from_config(config), config.model_config)

    def render(conversation: list, mm_processor_kwargs: Mapping[str, Any] | None) -> Any:
        kwargs = dict(mm_processor_kwargs) if mm_processor_kwargs else None
        (engine_input,) = OfflineInferenceMixin._preprocess_chat(host, [conversation], mm_processor_kwargs=kwargs)
        return engine_input

    return render


@dataclass
class _Host:
    """What ``LLM._preprocess_chat`` reads from its ``LLM``."""

    renderer: Any
    model_config: Any


def missing_vllm_support(llm: Any) -> str | None:
    """The piece of vLLM's API that rendering in workers needs and ``llm``'s vLLM lacks, or None."""
    try:
        from vllm.entrypoints.offline_utils import OfflineInferenceMixin
        from vllm.renderers import renderer_from_config  # noqa: F401
    except ImportError as exc:
        return f"vllm.renderers / vllm.entrypoints.offline_utils ({exc})"
    if not hasattr(OfflineInferenceMixin, "_preprocess_chat"):
        return "OfflineInferenceMixin._preprocess_chat"
    if not hasattr(llm, "_render_and_add_requests"):
        return "LLM._render_and_add_requests"
    if not hasattr(getattr(llm.llm_engine, "input_processor", None), "inject_into_mm_cache"):
        return "InputProcessor.inject_into_mm_cache"
    return None


def sender_cache(llm: Any) -> Any:
    """The engine's multimodal cache when it is vLLM's sender cache (``MultiModalProcessorSenderCache``, by class
    name: the engine core holds every item it was sent, so an item it has is sent as ``None``), else None."""
    renderer = getattr(getattr(llm.llm_engine, "input_processor", None), "renderer", None)
    cache = getattr(renderer, "mm_processor_cache", None)
    if any(kind.__name__ == "MultiModalProcessorSenderCache" for kind in type(cache).__mro__):
        return cache
    return None


def inject_into_sender_cache(cache: Any, engine_input: Mapping[str, Any]) -> bool:
    """Enter ``engine_input``'s items into the engine's sender ``cache`` as vLLM's own rendering does
    (``_merge_mm_kwargs``): every hash touched first, then each item updated, by modality, then index. A new item
    is stored; a held one (sent whole or omitted as ``None``) goes to the engine core as ``None``. The engine
    core's cache touches and updates the same way, so the two evict in step. Returns False, changing nothing,
    when an omitted item is no longer held."""
    hashes, kwargs = engine_input["mm_hashes"], engine_input["mm_kwargs"]
    order = [(kwargs[modality], index, digest) for modality, digests in hashes.items()
             for index, digest in enumerate(digests) if index < len(kwargs.get(modality, ()))]
    if any(items[index] is None and not cache.is_cached_item(digest) for items, index, digest in order):
        return False
    for _, _, digest in order:  # first, so that storing one item cannot evict another of the same request
        cache.touch_sender_cache_item(digest)
    for items, index, digest in order:
        items[index], _ = cache.get_and_update_item((items[index], []), digest)
    return True


_RENDER: Callable[[list, Any], Any] | None = None
_SHIPPED: OrderedDict[str, None] | None = None  # None: ship every item whole


def _start_worker(config_blob: bytes, factory: str, omit_shipped: bool) -> None:
    global _RENDER, _SHIPPED
    _SHIPPED = OrderedDict() if omit_shipped else None
    module, _, name = factory.partition(":")
    _RENDER = getattr(importlib.import_module(module), name)(config_blob)


def _render_chunk(items: list[tuple[Hashable, list, Any]], whole: bool = False) -> bytes:
    """Each item rendered, pickled by value (so processed images cross as bytes, never as shared-memory file
    descriptors): ``(key, "ok", engine input)``, ``(key, "refused", reason)`` for vLLM's ``ValueError`` (as
    ``LLM.enqueue_chat`` raises for an unusable request), ``(key, "error", text)`` for anything else."""
    out: list[tuple[Hashable, str, Any]] = []
    for key, conversation, mm_kwargs in items:
        try:
            out.append((key, "ok", _omit_shipped(_RENDER(conversation, mm_kwargs), omit=not whole)))
        except ValueError as exc:
            out.append((key, "refused", str(exc) or type(exc).__name__))
        except Exception as exc:  # noqa: BLE001 - the engine's thread raises it as a BackendError
            out.append((key, "error", f"{type(exc).__name__}: {exc}"))
    return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)


def _omit_shipped(engine_input: Any, *, omit: bool) -> Any:
    """``engine_input`` with each item this worker shipped before replaced by ``None`` (when this worker omits
    them and ``omit``); either way its items count as shipped now."""
    if _SHIPPED is None or not isinstance(engine_input, Mapping) or engine_input.get("type") != "multimodal":
        return engine_input
    for modality, digests in engine_input["mm_hashes"].items():
        items = engine_input["mm_kwargs"].get(modality, [])
        for index, digest in enumerate(digests[:len(items)]):
            if digest in _SHIPPED:
                _SHIPPED.move_to_end(digest)
                if omit:
                    items[index] = None
            else:
                _SHIPPED[digest] = None
                if len(_SHIPPED) > SHIPPED_MEMORY:
                    _SHIPPED.popitem(last=False)
    return engine_input


def route(conversation: list, workers: int) -> int:
    """The worker of ``conversation``: a stable hash of its messages, so a row's seeds meet the same cache."""
    return zlib.crc32(json.dumps(conversation, sort_keys=True, default=str).encode()) % workers


class RenderWorkers:
    """``count`` spawned processes rendering chat requests for one engine (see the module docstring).

    :meth:`submit` queues requests (chunks of :data:`CHUNK` per worker); :meth:`ready` returns what has been
    rendered since, in the order it was submitted among what is ready. With ``omit_shipped``, a worker sends an
    item it has sent before as ``None`` (see the module docstring). Processes start at construction, while the
    caller does other work. ``received_bytes`` counts what the workers' results weighed.
    """

    def __init__(self, config_blob: bytes, count: int, *, factory: str = VLLM_RENDERER,
                 omit_shipped: bool = False) -> None:
        import multiprocessing

        if count < 1:
            raise ValueError("count must be >= 1")
        context = multiprocessing.get_context("spawn")
        self._pools = [ProcessPoolExecutor(1, mp_context=context, initializer=_start_worker,
                                           initargs=(config_blob, factory, omit_shipped))
                       for _ in range(count)]
        self._order = itertools.count()
        # future -> its submission number: a worker's results are taken in order (a repeat's item came earlier)
        self._futures: dict[Future, int] = {pool.submit(os.getpid): next(self._order) for pool in self._pools}
        self._starting = set(self._futures)
        self.received_bytes = 0

    def wait_started(self) -> None:
        """Block until every worker has built its renderer (raises as :meth:`ready` does)."""
        while self._starting:
            done, _ = wait(self._starting, return_when=FIRST_COMPLETED)
            for future in done:
                self._futures.pop(future, None)
                self._collect(future)

    def submit(self, items: Sequence[tuple[Hashable, list, Mapping[str, Any] | None]], *,
               whole: bool = False) -> None:
        """Queue ``(key, conversation, mm_processor_kwargs)`` items for rendering (``whole``: every item shipped
        whole, even one shipped before)."""
        per_worker: list[list] = [[] for _ in self._pools]
        for key, conversation, mm_kwargs in items:
            per_worker[route(conversation, len(self._pools))].append((key, conversation, mm_kwargs))
        for pool, queued in zip(self._pools, per_worker):
            for start in range(0, len(queued), CHUNK):
                self._futures[pool.submit(_render_chunk, queued[start:start + CHUNK], whole)] = next(self._order)

    def ready(self, *, wait_for_one: bool) -> list[Rendered]:
        """What has been rendered; with ``wait_for_one``, block until at least one request is (or none is queued).

        Raises:
            BackendError: a worker died, or rendering raised something other than vLLM's ``ValueError``.
        """
        out: list[Rendered] = []
        while self._futures and not out:
            done, _ = wait(self._futures, timeout=None if wait_for_one else 0, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=self._futures.__getitem__):
                del self._futures[future]
                out += self._collect(future)
            if not wait_for_one:
                break
        return out

    def _collect(self, future: Future) -> list[Rendered]:
        try:
            result = future.result()
        except Exception as exc:  # noqa: BLE001 - BrokenProcessPool, an initializer that failed
            raise BackendError(f"a render worker failed ({type(exc).__name__}: {exc})", field="input_workers",
                               hint="input_workers=0 renders on the engine's thread") from None
        if future in self._starting:
            self._starting.discard(future)
            return []
        self.received_bytes += len(result)
        rendered = []
        for key, kind, payload in pickle.loads(result):
            if kind == "error":
                raise BackendError(f"rendering a request failed: {payload}", field="vllm", found=str(key))
            rendered.append(Rendered(key, payload, None) if kind == "ok" else Rendered(key, None, payload))
        return rendered

    def close(self) -> None:
        """Stop the workers (queued renders are dropped)."""
        for pool in self._pools:
            pool.shutdown(wait=False, cancel_futures=True)
        self._futures = {}
