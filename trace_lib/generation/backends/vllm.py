"""The ``vllm`` backend: offline ``vllm.LLM`` in this process, sampling exactly as ``vllm serve`` would.

Each request becomes a ``SamplingParams`` built the way vLLM's OpenAI server builds it from the same JSON
body (``ChatCompletionRequest.to_sampling_params``): fields the request sends are used as given (including
its ``seed``); fields it does not send take the model's ``generation_config`` defaults
(``ModelConfig.get_diff_sampling_param``), else the server's neutral defaults. Conversations go through
``LLM.enqueue_chat`` (the same chat-template rendering and multimodal processing as ``LLM.chat``, grouped by
``mm_processor_kwargs``), then the engine is stepped exactly like ``LLM.chat``'s own loop, and every finished
request is yielded at once, so the caller can persist it while the batch keeps running.

GPU placement: the process sees the GPUs of its group (set ``CUDA_VISIBLE_DEVICES`` before the engine is
created; :func:`trace_lib.generation.run.run_gpu_groups` starts one worker process per group);
``tensor_parallel_size`` defaults to the number of visible GPUs. Engines start one at a time per GPU
(:func:`engine_start_lock`), so engines sharing a GPU each size their KV cache from their own memory use.

Engine versions: vLLM 0.10.2 (the paper's) and 0.24 both work. Where their APIs differ the difference is
confined to :func:`enqueue_chat` (0.10.2 has no ``LLM.enqueue_chat``: the conversation goes through
``LLM.preprocess_chat`` and ``llm_engine.add_request``, exactly what its ``LLM.chat`` does) and
:func:`abort_requests`; ``SamplingParams`` is built the same way on both (``top_k=0`` disables on both).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from dataclasses import astuple, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from trace_lib.errors import BackendError, EngineStartError, TraceReproError
from trace_lib.generation.backends.base import RequestFeed, RequestsFailed, engine_stopped_error, exception_line
from trace_lib.generation.backends.vllm_liveness import waking_a_dead_engine
from trace_lib.generation.backends.vllm_render import (VLLM_RENDERER, RenderWorkers, inject_into_sender_cache,
                                                       missing_vllm_support, sender_cache)
from trace_lib.generation.request import ChatRequest, GenerationResult, RequestFailure
from trace_lib.interrupts import raise_if_stopped

#: The share of GPU memory one engine takes (upstream's generation-server flag); engines sharing a GPU split it.
GPU_MEMORY_UTILIZATION = 0.90
#: vLLM's OpenAI server defaults for fields a chat request leaves unset (chat_completion/protocol.py).
_SERVER_NEUTRAL = {"repetition_penalty": 1.0, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0}
#: Request fields the server takes from the body as-is, with its own default when absent.
_SERVER_PASSTHROUGH = {"presence_penalty": 0.0, "frequency_penalty": 0.0, "seed": None}


def sampling_kwargs(sampling: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``SamplingParams`` keyword arguments for a request's sampling fields, as vLLM's server derives them.

    ``defaults`` is ``ModelConfig.get_diff_sampling_param()`` (the checkpoint's generation-config values).

    Raises:
        BackendError: the request carries a field this mapping does not know (it would be silently dropped).
    """
    known = set(_SERVER_NEUTRAL) | set(_SERVER_PASSTHROUGH) | {"max_tokens"}
    unknown = sorted(set(sampling) - known)
    if unknown:
        raise BackendError("sampling fields not supported by the vllm backend", field="sampling", found=unknown)
    kwargs: dict[str, Any] = {}
    for name, neutral in _SERVER_NEUTRAL.items():
        value = sampling.get(name)
        kwargs[name] = value if value is not None else defaults.get(name, neutral)
    for name, neutral in _SERVER_PASSTHROUGH.items():
        value = sampling.get(name)
        kwargs[name] = value if value is not None else neutral
    max_tokens = sampling.get("max_tokens")
    kwargs["max_tokens"] = max_tokens if max_tokens is not None else defaults.get("max_tokens")
    kwargs.update(skip_special_tokens=True, spaces_between_special_tokens=True, include_stop_str_in_output=False)
    return kwargs


@dataclass
class EngineLoopStats:
    """Where the thread driving the engine spent its time. vLLM's offline ``LLM`` renders chat templates and
    loads and processes images serially on this thread while adding requests, so ``adding_s`` close to the
    wall time means generation is bound by that preprocessing, not by the GPU."""

    adding_s: float = 0.0  # enqueue_chat: chat template, image loading and processing, hand-off to the engine
    stepping_s: float = 0.0  # engine.step(): waiting for the engine's next outputs
    steps: int = 0
    held: int = 0  # requests in the engine before each step, summed over steps: held / steps below max_num_seqs
    #                means the feed, not the engine, left the batch short
    requests: int = 0
    rerendered: int = 0  # rendered again, whole: a render worker's omitted image was no longer held
    render_wait_s: float = 0.0  # the engine empty, waiting for the render workers (part of adding_s)

    def snapshot(self) -> EngineLoopStats:
        return replace(self)

    def since(self, earlier: EngineLoopStats) -> EngineLoopStats:
        """The counts accumulated after ``earlier`` (a :meth:`snapshot`)."""
        return EngineLoopStats(*(now - then for now, then in zip(astuple(self), astuple(earlier))))

    def summary(self, wall_s: float) -> str:
        share = f"{self.adding_s / wall_s:.0%} of {wall_s:.1f} s" if wall_s > 0 else f"{self.adding_s:.1f} s"
        rerendered = f" ({self.rerendered} rendered again, whole)" if self.rerendered else ""
        starved = f", {self.render_wait_s:.1f} s of it waiting for render workers" if self.render_wait_s else ""
        held = f", holding {self.held / self.steps:.0f} requests on average" if self.steps else ""
        return (f"adding {self.requests} requests{rerendered} took {share} "
                f"({1000 * self.adding_s / max(self.requests, 1):.1f} ms each{starved}); {self.steps} engine steps "
                f"waited {self.stepping_s:.1f} s{held}")


def _external_id(request_id: str) -> str:
    # vLLM returns "<external>-<8 random chars>" from add_request; outputs carry the external id.
    return request_id.split("-", 1)[0]


class VLLMBackend:
    """Offline ``vllm.LLM`` engine.

    Options: ``tensor_parallel_size`` (default: number of visible GPUs), ``allowed_local_media_path`` (the data
    root; required for ``file://`` images, default ``/``), ``max_model_len`` (32768), ``max_num_seqs`` (256),
    ``max_num_batched_tokens`` (32768), ``gpu_memory_utilization`` (0.90), ``limit_mm_per_prompt``
    (``{"image": 24, "video": 3}``), ``dtype`` ("auto"), ``enforce_eager`` (False), ``llm_kwargs`` (any further
    ``vllm.LLM`` arguments), ``llm`` (an existing ``vllm.LLM`` to drive instead of creating one; the other
    engine options are then ignored). ``TRACE_VLLM_LOAD_FORMAT`` (benchmarks only) sets vLLM's ``load_format``:
    ``dummy`` loads random weights from a config-only directory. ``input_workers`` (experimental, benchmarks only,
    vLLM >= 0.24; default 0): render requests in that many processes (:mod:`vllm_render`) instead of on the
    engine's thread; on one H200 they took the rendering off that thread but left the campaign benchmark's rates
    within 4-8% (docs/performance.md, runs 13-15).
    ``renderer_factory`` (tests): the workers' renderer. Defaults mirror upstream's generation server flags
    (eval-campaign spec §3.1).
    """

    name = "vllm"

    def __init__(
        self,
        *,
        model_path: str,
        served_name: str,
        tensor_parallel_size: int | None = None,
        allowed_local_media_path: str | None = None,
        max_model_len: int = 32768,
        max_num_seqs: int = 256,
        max_num_batched_tokens: int = 32768,
        gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
        limit_mm_per_prompt: Mapping[str, int] | None = None,
        dtype: str = "auto",
        enforce_eager: bool = False,
        llm_kwargs: Mapping[str, Any] | None = None,
        llm: Any = None,
        input_workers: int = 0,
        renderer_factory: str | None = None,
    ) -> None:
        self.served_name = served_name
        self.model_path = model_path
        self._owns_engine = llm is None
        self._max_num_seqs = max_num_seqs
        self._params: dict[tuple, Any] = {}
        self.loop_stats = EngineLoopStats()
        self._renders: RenderWorkers | None = None
        self._sender_cache: Any = None  # the engine's, when render workers omit the images it holds
        self._ordinals = itertools.count()  # keys of the requests sent to render workers, across streams
        if llm is not None:
            scheduler = getattr(getattr(llm.llm_engine, "vllm_config", None), "scheduler_config", None)
            self._max_num_seqs = int(getattr(scheduler, "max_num_seqs", None) or max_num_seqs)
            self.llm = llm
            self._defaults = dict(_model_config(llm).get_diff_sampling_param())
            self._start_render_workers(input_workers, renderer_factory)
            return
        try:
            from vllm import LLM
        except ImportError as exc:
            raise BackendError(f"vllm is not importable ({exc})", field="--backend vllm",
                               hint="install the 'eval' extra on a CUDA host") from None
        if tensor_parallel_size is None:
            tensor_parallel_size = _visible_gpu_count()
        kwargs: dict[str, Any] = dict(
            model=str(model_path),
            served_model_name=served_name,
            trust_remote_code=True,
            tensor_parallel_size=tensor_parallel_size,
            allowed_local_media_path=str(Path(allowed_local_media_path or "/").resolve()),
            max_model_len=max_model_len,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            gpu_memory_utilization=gpu_memory_utilization,
            limit_mm_per_prompt=dict(limit_mm_per_prompt or {"image": 24, "video": 3}),
            dtype=dtype,
            enforce_eager=enforce_eager,
        )
        from trace_lib.options import VLLM_LOAD_FORMAT_ENV

        load_format = VLLM_LOAD_FORMAT_ENV.read()  # benchmarks only: "dummy" = random weights, config-only dir
        if load_format != "auto":  # vLLM's default; the store header records it (environment.engine)
            kwargs["load_format"] = load_format
        kwargs.update(llm_kwargs or {})
        with engine_start_lock(os.environ.get("CUDA_VISIBLE_DEVICES")):
            try:
                self.llm = LLM(**kwargs)
            except (TraceReproError, OSError):
                raise
            except Exception as exc:
                raise engine_start_error(exc, served_name=served_name,
                                         gpu_memory_utilization=gpu_memory_utilization) from exc
        self._defaults = dict(_model_config(self.llm).get_diff_sampling_param())
        self._start_render_workers(input_workers, renderer_factory)

    def _start_render_workers(self, count: int, factory: str | None) -> None:
        """Start ``count`` render workers for this engine (0: render on the engine's thread)."""
        if count <= 0:
            return
        import pickle

        if factory is None:
            missing = missing_vllm_support(self.llm)
            if missing is not None:
                raise BackendError(f"rendering in worker processes needs {missing}, which this vLLM lacks",
                                   field="input_workers", hint="input_workers=0 renders on the engine's thread "
                                   "(the only way on vLLM 0.10.2)")
        self._sender_cache = sender_cache(self.llm)
        self._renders = RenderWorkers(pickle.dumps(self.llm.llm_engine.vllm_config), count,
                                      factory=factory or VLLM_RENDERER, omit_shipped=self._sender_cache is not None)

    def _sampling_params(self, request: ChatRequest) -> Any:
        """The request's ``SamplingParams``; one object per distinct sampling (as ``LLM.chat`` shares one)."""
        key = tuple(request.sampling.items())
        params = self._params.get(key)
        if params is None:
            from vllm import SamplingParams

            params = SamplingParams.from_optional(**sampling_kwargs(request.sampling, self._defaults))
            self._params[key] = params
        return params

    def generate(self, requests: Sequence[ChatRequest]) -> Iterator[GenerationResult]:
        if not requests:
            return
        failures: dict[str, str] = {}
        for item in self.generate_stream(RequestFeed.of(requests), in_flight=len(requests)):
            if isinstance(item, RequestFailure):
                failures[item.request_id] = item.error
            else:
                yield item
        if failures:
            raise RequestsFailed(failures, field="vllm")

    def generate_stream(self, feed: RequestFeed, *,
                        in_flight: int | None = None) -> Iterator[GenerationResult | RequestFailure]:
        """Answer every request of ``feed``, keeping up to ``in_flight`` (default ``4 x max_num_seqs``) requests
        in the engine: new requests are added while the engine runs, so rows of many slices (each with its own
        seed) share the continuous batch, and while the engine holds fewer than ``max_num_seqs`` every request the
        feed holds ready is added before the next step; each finished request is yielded at once. A request the
        engine refuses when it is added (vLLM raises ``ValueError``: a prompt longer than ``max_model_len``, an
        unusable image) is yielded as a :class:`RequestFailure`; the others go on."""
        engine = self.llm.llm_engine
        if engine.has_unfinished_requests():
            raise BackendError("engine already has unfinished requests", field="vllm")
        target = max(1, in_flight or 4 * self._max_num_seqs)
        by_id = _InFlight()
        rendering: dict[int, ChatRequest] = {}  # in a render worker, by key (request ids need not be unique)
        answered = 0
        try:
            with waking_a_dead_engine(engine):  # an engine core killed outright: step() would wait for ever
                while True:
                    unfinished = len(by_id) + len(rendering)
                    batch: Sequence[ChatRequest] = ()
                    if not feed.finished and (unfinished <= target // 2 or target - unfinished >= self._max_num_seqs):
                        # at most max_num_seqs per call: the engine starts on the first ones while the rest are
                        # rendered and processed (images) between steps, or in the render workers
                        limit = min(target - unfinished, self._max_num_seqs)
                        batch = feed.take(limit, wait=unfinished == 0)
                        if self._renders is not None:
                            self._submit_renders(batch, rendering)
                        else:
                            adding = time.perf_counter()
                            refused = self._enqueue(batch, by_id)
                            self.loop_stats.adding_s += time.perf_counter() - adding
                            self.loop_stats.requests += len(batch) - len(refused)
                            yield from refused
                    if rendering:
                        yield from self._add_rendered(rendering, by_id, wait=not by_id)
                    if not by_id:  # nothing in the engine: step() would wait for an output that never comes
                        if rendering or not feed.finished:
                            continue
                        break
                    if batch and not feed.finished and len(by_id) + len(rendering) < self._max_num_seqs:
                        # free batch slots: add what the producer readied meanwhile first (a step only collects
                        # outputs; the engine core runs on without it)
                        continue
                    stepping = time.perf_counter()
                    outputs = engine.step()
                    self.loop_stats.stepping_s += time.perf_counter() - stepping
                    self.loop_stats.steps += 1
                    self.loop_stats.held += len(by_id)
                    for output in outputs:
                        if not output.finished:
                            continue
                        request = by_id.pop(output.request_id)
                        if request is None:
                            raise BackendError("engine returned an unknown request id", field="vllm",
                                               found=output.request_id)
                        answered += 1
                        yield _result(request.request_id, output)
                    raise_if_stopped()  # a stop signal Python discarded (trace_lib.interrupts), after the answers
                    if by_id and not engine.has_unfinished_requests():
                        raise BackendError("engine finished without answering every request", field="vllm",
                                           expected=answered + len(by_id), found=answered)
        except BaseException as exc:
            if isinstance(exc, Exception) and not isinstance(exc, (TraceReproError, OSError)):
                # the engine's own exception: its engine core died (EngineDeadError), a CUDA error
                with contextlib.suppress(Exception):  # a live engine gives back what it holds; a dead one cannot
                    abort_requests(engine, by_id.engine_ids())
                raise engine_stopped_error(exc, backend=self.name, served_name=self.served_name,
                                           answered=answered, unanswered=len(by_id) + len(rendering)) from exc
            unfinished_ids = by_id.engine_ids()
            if unfinished_ids and engine.has_unfinished_requests():
                abort_requests(engine, unfinished_ids)
            raise

    def _submit_renders(self, batch: Sequence[ChatRequest], rendering: dict[int, ChatRequest], *,
                        whole: bool = False) -> None:
        """Hand ``batch`` to the render workers, each request under a key of its own (``whole``: see
        :meth:`RenderWorkers.submit`)."""
        items = []
        for request in batch:
            key = next(self._ordinals)
            rendering[key] = request
            items.append((key, request.messages_json(), dict(request.mm_processor_kwargs) or None))
        self._renders.submit(items, whole=whole)

    def _add_rendered(self, rendering: dict[int, ChatRequest], by_id: _InFlight, *,
                      wait: bool) -> list[RequestFailure]:
        """Add what the render workers have finished (waiting for one when ``wait``); returns the requests vLLM
        refused, at rendering or when added. Each is added on its own, its images injected first: the order
        of ``LLM.enqueue_chat``'s render-then-add, one request at a time. A request whose omitted image the
        engine's cache no longer holds (evicted, or its first request was dropped) goes back to a worker, to be
        shipped whole."""
        adding = time.perf_counter()
        refused: list[RequestFailure] = []
        injector = self.llm.llm_engine.input_processor
        ready = self._renders.ready(wait_for_one=wait)
        if wait:
            self.loop_stats.render_wait_s += time.perf_counter() - adding
        for item in ready:
            request = rendering.pop(item.key, None)
            if request is None:  # a render for a stream that ended before it came back
                continue
            if item.refusal is not None:
                refused.append(RequestFailure(request.request_id, _refusal_line(item.refusal)))
                continue
            engine_input = item.engine_input
            if isinstance(engine_input, Mapping) and engine_input.get("type") == "multimodal":
                if self._sender_cache is None:
                    injector.inject_into_mm_cache(engine_input["mm_hashes"], engine_input["mm_kwargs"])
                elif not inject_into_sender_cache(self._sender_cache, engine_input):
                    self._submit_renders([request], rendering, whole=True)
                    self.loop_stats.rerendered += 1
                    continue
            try:
                (engine_id,) = self.llm._render_and_add_requests(prompts=[engine_input],
                                                                 params=[self._sampling_params(request)])
            except ValueError as exc:
                refused.append(RequestFailure(request.request_id, _refusal(exc)))
                continue
            by_id.add(engine_id, request)
            self.loop_stats.requests += 1
        self.loop_stats.adding_s += time.perf_counter() - adding
        return refused

    def _enqueue(self, batch: Sequence[ChatRequest], by_id: _InFlight) -> list[RequestFailure]:
        """Add ``batch`` to the engine (grouped by ``mm_processor_kwargs``); returns the requests it refused.

        A group the engine refuses (vLLM adds nothing of a call that raises: it aborts what it had added) is
        added again one request at a time, so only the refused requests fail."""
        groups: dict[tuple, list[ChatRequest]] = {}
        for request in batch:
            groups.setdefault(tuple(sorted(request.mm_processor_kwargs.items())), []).append(request)
        refused: list[RequestFailure] = []
        for mm_key, group in groups.items():
            try:
                self._add(group, dict(mm_key) or None, by_id)
            except ValueError as exc:
                if len(group) == 1:
                    refused.append(RequestFailure(group[0].request_id, _refusal(exc)))
                    continue
                for request in group:
                    try:
                        self._add([request], dict(mm_key) or None, by_id)
                    except ValueError as one:
                        refused.append(RequestFailure(request.request_id, _refusal(one)))
        return refused

    def _add(self, group: Sequence[ChatRequest], mm_kwargs: Mapping[str, Any] | None, by_id: _InFlight) -> None:
        ids = enqueue_chat(self.llm, [r.messages_json() for r in group], [self._sampling_params(r) for r in group],
                           mm_kwargs)
        if len(ids) != len(group):
            raise BackendError("engine accepted fewer requests than sent", field="vllm",
                               expected=len(group), found=len(ids))
        for engine_id, request in zip(ids, group):
            by_id.add(engine_id, request)

    def close(self) -> None:
        if getattr(self, "_renders", None) is not None:
            self._renders.close()
            self._renders = None
        llm = getattr(self, "llm", None)
        self.llm = None
        if llm is None or not self._owns_engine:
            return
        shutdown = getattr(llm.llm_engine, "shutdown", None) or getattr(
            getattr(llm.llm_engine, "engine_core", None), "shutdown", None
        )
        if shutdown is not None:
            shutdown()
        del llm
        import gc

        gc.collect()


@contextlib.contextmanager
def engine_start_lock(visible_devices: str | None, lock_dir: Path | None = None) -> Iterator[None]:
    """Hold an exclusive lock on each GPU in ``visible_devices`` (``CUDA_VISIBLE_DEVICES``; unset: every GPU this
    process sees) while an engine starts. vLLM sizes its KV cache from the device's memory use between engine
    creation and its profiling run, so another engine starting on the same GPU at that moment would be counted as
    this one's (engines sharing a GPU: ``--engines-per-group``). Locks are files under ``lock_dir`` (default: the
    temporary directory), taken in GPU order; engines on other GPUs never wait."""
    import fcntl
    import tempfile

    ids = sorted({d.strip() for d in (visible_devices or "").split(",") if d.strip()})
    if not ids:
        ids = [str(i) for i in range(_visible_gpu_count())]
    root = lock_dir or Path(tempfile.gettempdir()) / "trace-repro-engine-start"
    root.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        for gpu in ids:
            handle = held.enter_context(open(root / f"gpu-{gpu}.lock", "a+b"))  # noqa: SIM115
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            held.callback(fcntl.flock, handle.fileno(), fcntl.LOCK_UN)
        yield


def engine_start_error(exc: BaseException, *, served_name: str, gpu_memory_utilization: float,
                       memory: Callable[[], tuple[int, int]] | None = None) -> EngineStartError:
    """The one-line error of a vLLM engine that did not start. vLLM's own reason is in its engine core's log
    (the parent sees only "initialization failed"), so the GPU's memory is read after the failure (``memory()``:
    free and total bytes of the first visible GPU; default ``torch.cuda.mem_get_info``): less free than
    ``gpu_memory_utilization`` of the total is the likeliest cause, and is named (``out_of_memory``)."""
    reason = exception_line(exc)
    try:
        free, total = (memory or _cuda_memory)()
    except Exception:  # no CUDA to ask: the engine's own line is all there is
        free = total = 0
    asked = gpu_memory_utilization * total
    if total and free < asked:
        return EngineStartError(
            f"{served_name}: the vllm engine did not start: its GPU has {free / 2**30:.1f} GiB free of "
            f"{total / 2**30:.1f} GiB and the engine asks for {gpu_memory_utilization:g} of it "
            f"({asked / 2**30:.1f} GiB) ({reason})", field="--gpu-memory-utilization", out_of_memory=True,
            hint="another process holds that memory (a judge, another engine on the GPU); lower "
                 "--gpu-memory-utilization or --engines-per-group, or free the GPU")
    return EngineStartError(f"{served_name}: the vllm engine did not start: {reason}",
                            hint="vLLM's log above has the cause; TRACE_REPRO_DEBUG=1 shows the traceback")


def _cuda_memory() -> tuple[int, int]:
    """Free and total bytes of the first visible GPU."""
    import torch

    free, total = torch.cuda.mem_get_info()
    return int(free), int(total)


def _model_config(llm: Any) -> Any:
    """``LLM.model_config`` (0.24) or ``LLM.llm_engine.model_config`` (0.10.2)."""
    return getattr(llm, "model_config", None) or llm.llm_engine.model_config


def enqueue_chat(llm: Any, conversations: list[list[dict[str, Any]]], sampling_params: list[Any],
                 mm_processor_kwargs: Mapping[str, Any] | None) -> list[str]:
    """Add one chat request per conversation to ``llm``'s engine without running it; returns the engine ids.

    vLLM >= 0.11 has ``LLM.enqueue_chat``; on 0.10.2 the conversations are rendered by ``LLM.preprocess_chat``
    (chat template, multimodal parsing, ``mm_processor_kwargs``) and added with ``llm_engine.add_request`` with
    final-only outputs, the steps its ``LLM.chat`` takes before running the engine.
    """
    kwargs = dict(mm_processor_kwargs) if mm_processor_kwargs else None
    if hasattr(llm, "enqueue_chat"):
        return list(llm.enqueue_chat(conversations, sampling_params=sampling_params, use_tqdm=False,
                                     mm_processor_kwargs=kwargs))
    from vllm.sampling_params import RequestOutputKind

    prompts = llm.preprocess_chat(conversations, mm_processor_kwargs=kwargs)
    ids: list[str] = []
    try:
        for prompt, params in zip(prompts, sampling_params):
            params.output_kind = RequestOutputKind.FINAL_ONLY
            request_id = str(next(llm.request_counter))
            llm.llm_engine.add_request(request_id, prompt, params)
            ids.append(request_id)
    except ValueError:
        if ids:  # all or nothing, as LLM.enqueue_chat (>= 0.11) does
            abort_requests(llm.llm_engine, ids)
        raise
    return ids


def abort_requests(engine: Any, request_ids: list[str]) -> None:
    """Abort requests by the ids :func:`enqueue_chat` returned (0.24 needs ``internal=True`` for those)."""
    import inspect

    try:
        internal = "internal" in inspect.signature(engine.abort_request).parameters
    except (TypeError, ValueError):
        internal = False
    if internal:
        engine.abort_request(request_ids, internal=True)
    else:
        engine.abort_request(request_ids)


class _InFlight:
    """Requests in the engine by engine id; outputs may carry the engine id or its external part."""

    def __init__(self) -> None:
        self._by_engine: dict[str, ChatRequest] = {}
        self._engine_of: dict[str, str] = {}  # external id -> engine id

    def add(self, engine_id: str, request: ChatRequest) -> None:
        self._by_engine[engine_id] = request
        self._engine_of[_external_id(engine_id)] = engine_id

    def pop(self, output_id: str) -> ChatRequest | None:
        engine_id = output_id if output_id in self._by_engine else self._engine_of.get(_external_id(output_id))
        if engine_id is None or engine_id not in self._by_engine:
            return None
        self._engine_of.pop(_external_id(engine_id), None)
        return self._by_engine.pop(engine_id)

    def engine_ids(self) -> list[str]:
        return list(self._by_engine)

    def __len__(self) -> int:
        return len(self._by_engine)


def _refusal(exc: ValueError) -> str:
    """The engine's reason for refusing a request, on one line."""
    return _refusal_line(str(exc) or type(exc).__name__)


def _refusal_line(reason: str) -> str:
    text = " ".join(reason.split())[:300]
    return f"refused by the engine: {text}"


def _result(request_id: str, output: Any) -> GenerationResult:
    completion = output.outputs[0]
    return GenerationResult(
        request_id=request_id,
        text=completion.text or "",
        finish_reason=str(completion.finish_reason),
        prompt_tokens=len(output.prompt_token_ids) if output.prompt_token_ids is not None else None,
        completion_tokens=len(completion.token_ids),
    )


def _visible_gpu_count() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() != "":
        return len([d for d in visible.split(",") if d.strip()])
    try:
        import torch

        return max(1, torch.cuda.device_count())
    except ImportError:
        return 1
