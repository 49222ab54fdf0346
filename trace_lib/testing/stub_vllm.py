"""A stand-in for the slice of ``vllm.LLM`` the vllm backend drives (no model, no GPU): for CPU tests of the
backend's request flow and for profiling the harness path (``benchmarks/harness_profile.py``).

:class:`StubLLM` accepts ``enqueue_chat`` and finishes at most ``per_step`` requests per ``llm_engine.step()``
in arrival order (a ``step()`` with nothing unfinished raises: vLLM's would wait forever); it records every
enqueued batch (size, sampling seeds) and the most requests it ever held. With ``refuse`` set, a call whose
conversations contain that text raises ``ValueError`` and adds nothing, as vLLM's ``LLM.enqueue_chat`` does for a
prompt longer than ``max_model_len``. With ``die_after_steps`` set, the step after that many raises
:class:`EngineDeadError`, as vLLM's does when its engine core process died (CUDA out of memory). With
``vanish_after_steps`` set, the engine core is killed outright after that many steps: the client's dead flag is set
(vLLM's monitor thread) and the next step waits on the client's output queue as vLLM's does, for ever there and
:data:`VANISHED_STEP_WAIT_S` here (then ``AssertionError``). It also takes requests rendered elsewhere
(``_render_and_add_requests``): :func:`stub_renderer` is the render workers' factory for it. Images reach its
engine core through a model of vLLM's sender / receiver cache pair, which fails as vLLM's does when the two fall
out of step.
:func:`stub_vllm_module` is a module object providing ``SamplingParams.from_optional`` for ``sys.modules``.
"""

from __future__ import annotations

import queue
import types
from collections import OrderedDict
from typing import Any

#: How long a step waits on an engine core that vanished before the stub gives up (vLLM's waits for ever).
VANISHED_STEP_WAIT_S = 20.0


class EngineDeadError(Exception):
    """vLLM's ``vllm.v1.engine.exceptions.EngineDeadError``: what the parent sees of a dead engine core."""

    def __init__(self) -> None:
        super().__init__("EngineCore encountered an issue. See stack trace (above) for the root cause.")


class _SyncClient:
    """The parts of vLLM's ``SyncMPClient`` (``llm_engine.engine_core``) a dead engine core shows the parent: the
    dead flag its monitor thread sets and the output queue ``get_output()`` waits on."""

    def __init__(self) -> None:
        self.resources = types.SimpleNamespace(engine_dead=False)
        self.outputs_queue: queue.Queue = queue.Queue()

    def get_output_of_a_vanished_core(self) -> None:
        """``get_output()`` once nothing fills the queue: whatever is queued, as ``EngineDeadError`` (vLLM's
        ``_format_exception`` for a dead engine)."""
        try:
            self.outputs_queue.get(timeout=VANISHED_STEP_WAIT_S)
        except queue.Empty:
            raise AssertionError(f"step() waited {VANISHED_STEP_WAIT_S:.0f} s on a dead engine core: "
                                 "vLLM's waits for ever") from None
        raise EngineDeadError()


class StubSamplingParams:
    @classmethod
    def from_optional(cls, **kwargs: Any) -> StubSamplingParams:
        params = cls()
        params.__dict__.update(kwargs)
        return params


def stub_vllm_module() -> types.ModuleType:
    module = types.ModuleType("vllm")
    module.SamplingParams = StubSamplingParams  # type: ignore[attr-defined]
    return module


def _texts(conversation: list) -> str:
    return "\n".join(item.get("text", "") for message in conversation for item in message.get("content") or []
                     if isinstance(item, dict))


class _Output:
    def __init__(self, request_id: str, seed: Any) -> None:
        self.request_id = request_id
        self.finished = True
        self.prompt_token_ids = [0] * 64
        self.outputs = [types.SimpleNamespace(text=f"answer with seed {seed}", finish_reason="stop",
                                              token_ids=[1] * 8)]


class MultiModalProcessorSenderCache:
    """vLLM's sender cache (named as vLLM names it), by count: an LRU of the item hashes the engine core was sent."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._held: OrderedDict[str, None] = OrderedDict()

    def is_cached_item(self, digest: str) -> bool:
        return digest in self._held

    def touch_sender_cache_item(self, digest: str) -> None:
        if digest in self._held:
            self._held.move_to_end(digest)

    def get_and_update_item(self, item: tuple[Any, list], digest: str) -> tuple[Any, list]:
        if digest in self._held:
            self._held.move_to_end(digest)
            return None, item[1]
        assert item[0] is not None, f"Expected a cached item for {digest=}"
        self._held[digest] = None
        if len(self._held) > self.capacity:
            self._held.popitem(last=False)
        return item


class _EngineCoreCache:
    """The engine core's receiver cache: a request's hashes touched first, then each item updated (vLLM's
    ``get_and_update_features``), evicting as the sender does; an item sent as ``None`` that it does not hold is
    the failure vLLM's engine core asserts on (the two caches out of step)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: OrderedDict[str, Any] = OrderedDict()
        self.received_whole = 0

    def receive(self, digests: list[str], items: list[Any]) -> None:
        if self.capacity == 0:  # no cache: every item comes whole
            assert all(item is not None for item in items), f"engine core without a cache got None for {digests}"
            self.received_whole += len(items)
            return
        for digest in digests:
            if digest in self.items:
                self.items.move_to_end(digest)
        for digest, item in zip(digests, items):
            if item is None:
                if digest not in self.items:
                    raise AssertionError(f"engine core: {digest!r} sent as None but not held (caches out of step)")
                self.items.move_to_end(digest)
                continue
            self.received_whole += 1
            self.items[digest] = item
            if len(self.items) > self.capacity:
                self.items.popitem(last=False)


class StubLLM:
    """See the module docstring; engine ids are ``"<counter>-abcdefgh"`` and outputs carry the external part.
    Each text part of a conversation stands for one image: its hash, and (as ``item_bytes`` bytes) its processed
    item, which goes to the engine core through vLLM's sender / receiver cache pair of ``mm_cache_items`` items (0:
    no cache, as vLLM with ``mm_processor_cache_gb=0``: every item goes whole)."""

    def __init__(self, *, per_step: int = 256, refuse: str | None = None, mm_cache_items: int = 1 << 20,
                 item_bytes: int = 64, die_after_steps: int | None = None,
                 vanish_after_steps: int | None = None) -> None:
        self.per_step = per_step
        self.die_after_steps = die_after_steps
        self.vanish_after_steps = vanish_after_steps
        self.steps = 0
        self.refuse = refuse
        self._counter = 0
        self._pending: list[tuple[str, Any]] = []
        self.batches: list[list[Any]] = []  # the seeds of each enqueue_chat call
        self.most_held = 0
        self.most_seeds_held = 0  # distinct seeds held at once (slices sharing the batch)
        self.model_config = types.SimpleNamespace(get_diff_sampling_param=lambda: {})
        self.sender = MultiModalProcessorSenderCache(mm_cache_items) if mm_cache_items else None
        self.engine_core_cache = _EngineCoreCache(mm_cache_items)
        self.item_bytes = item_bytes
        self.rendered_here = 0  # conversations rendered by enqueue_chat (on the engine's thread)
        self.llm_engine = types.SimpleNamespace(
            has_unfinished_requests=lambda: bool(self._pending), step=self._step, engine_core=_SyncClient(),
            abort_request=lambda ids, internal=False: None,
            vllm_config={**STUB_RENDER_CONFIG, "item_bytes": item_bytes},
            # inject_into_mm_cache is reached only without a sender cache, where vLLM's enters nothing either
            input_processor=types.SimpleNamespace(renderer=types.SimpleNamespace(mm_processor_cache=self.sender),
                                                  inject_into_mm_cache=lambda mm_hashes, mm_kwargs: None))

    def enqueue_chat(self, conversations: list, sampling_params: list, use_tqdm: bool = False,
                     mm_processor_kwargs: Any = None) -> list[str]:
        self._refuse_long(conversations)
        for conversation in conversations:  # rendered here: the images through the sender cache, as vLLM's
            digests = _images(conversation)
            items = [stub_item(digest, self.item_bytes) for digest in digests]
            if self.sender is not None:
                for digest in digests:
                    self.sender.touch_sender_cache_item(digest)
                items = [self.sender.get_and_update_item((item, []), d)[0] for item, d in zip(items, digests)]
            self.engine_core_cache.receive(digests, items)
            self.rendered_here += 1
        return self._add(sampling_params)

    def _refuse_long(self, conversations: list) -> None:
        """vLLM's refusal of a prompt longer than ``max_model_len``, for a conversation holding ``refuse``."""
        if self.refuse is not None and any(self.refuse in _texts(c) for c in conversations):
            raise ValueError("The decoder prompt (length 40001) is longer than the maximum model length of 32768.")

    def _add(self, sampling_params: list) -> list[str]:
        ids = []
        for params in sampling_params:
            ids.append(f"{self._counter}-abcdefgh")
            self._pending.append((ids[-1], getattr(params, "seed", None)))
            self._counter += 1
        self.batches.append([getattr(p, "seed", None) for p in sampling_params])
        self.most_held = max(self.most_held, len(self._pending))
        self.most_seeds_held = max(self.most_seeds_held, len({seed for _, seed in self._pending}))
        return ids

    def _render_and_add_requests(self, prompts: list, params: list) -> list[str]:
        """vLLM's second half of ``enqueue_chat``: add what :func:`stub_renderer` rendered (its items as they
        stand after the caller entered them into the sender cache: ``None`` for one the engine core holds)."""
        self._refuse_long([p["conversation"] for p in prompts])
        for prompt in prompts:
            self.engine_core_cache.receive(prompt["mm_hashes"]["image"], prompt["mm_kwargs"]["image"])
        return self._add(params)

    def _step(self) -> list[_Output]:
        if self.die_after_steps is not None and self.steps >= self.die_after_steps:
            raise EngineDeadError()
        if self.vanish_after_steps is not None and self.steps >= self.vanish_after_steps:
            self.llm_engine.engine_core.resources.engine_dead = True
            self.llm_engine.engine_core.get_output_of_a_vanished_core()
        self.steps += 1
        if not self._pending:  # vLLM's engine.step() then waits for an output forever
            raise AssertionError("llm_engine.step() with no unfinished request: vLLM would block forever")
        done, self._pending = self._pending[:self.per_step], self._pending[self.per_step:]
        return [_Output(engine_id.split("-", 1)[0], seed) for engine_id, seed in done]


#: :class:`StubLLM`'s ``vllm_config``: what :func:`stub_renderer` refuses, and what kills its worker process.
STUB_RENDER_CONFIG = {"refuse_render": "UNUSABLE IMAGE", "crash": "KILL THE WORKER"}


def stub_renderer(config_blob: bytes) -> Any:
    """A render-worker factory (``trace_lib.generation.backends.vllm_render``) for :class:`StubLLM`'s config: a
    rendered request is a multimodal engine input holding its conversation; a conversation containing the config's
    ``refuse_render`` text raises ``ValueError``, as vLLM does for an image it cannot process, and one containing
    its ``crash`` text ends the worker process at once (as the kernel's OOM killer would)."""
    import os
    import pickle

    config = pickle.loads(config_blob)

    def render(conversation: list, mm_processor_kwargs: Any) -> dict[str, Any]:
        text = _texts(conversation)
        if config["crash"] in text:
            os._exit(137)
        if config["refuse_render"] in text:
            raise ValueError("Failed to load image: cannot identify image file")
        digests = _images(conversation)
        return {"type": "multimodal", "conversation": conversation, "mm_hashes": {"image": digests},
                "mm_kwargs": {"image": [stub_item(d, config.get("item_bytes", 64)) for d in digests]},
                "mm_processor_kwargs": mm_processor_kwargs}

    return render


def _images(conversation: list) -> list[str]:
    """The images of a stub conversation: each text part stands for one."""
    return [item.get("text", "") for message in conversation for item in message.get("content") or []
            if isinstance(item, dict) and item.get("type") == "text"]


def stub_item(text: str, size: int) -> bytes:
    """The processed image a text part of a stub conversation stands for: ``size`` bytes."""
    seed = f"pixels of {text};".encode()
    return (seed * (size // len(seed) + 1))[:size]


_PACKAGE = '''"""A stand-in ``vllm`` package (trace_lib.testing.stub_vllm): ``LLM(**kwargs)`` is a StubLLM; the keyword
arguments of each engine are appended to ``$STUB_VLLM_RECORD`` (one JSON line) when it is set;
``$STUB_VLLM_PER_STEP``, ``$STUB_VLLM_DIE_AFTER_STEPS`` and ``$STUB_VLLM_VANISH_AFTER_STEPS`` set its ``per_step``,
``die_after_steps`` and ``vanish_after_steps``."""
import json
import os

from trace_lib.testing.stub_vllm import StubLLM, StubSamplingParams as SamplingParams  # noqa: F401

__version__ = "0.0.0+stub"


def LLM(**kwargs):  # noqa: N802 - vllm.LLM
    record = os.environ.get("STUB_VLLM_RECORD")
    if record:
        with open(record, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({k: v for k, v in kwargs.items() if isinstance(v, (str, int, float, bool))},
                                    sort_keys=True) + "\\n")
    die = os.environ.get("STUB_VLLM_DIE_AFTER_STEPS")
    vanish = os.environ.get("STUB_VLLM_VANISH_AFTER_STEPS")
    return StubLLM(per_step=int(os.environ.get("STUB_VLLM_PER_STEP", "256")),
                   die_after_steps=int(die) if die else None, vanish_after_steps=int(vanish) if vanish else None)
'''


def write_stub_vllm_package(directory: Any) -> Any:
    """Write a ``vllm`` package of :class:`StubLLM` engines under ``directory`` (put ``directory`` on a child's
    ``PYTHONPATH``: ``trace-repro generate --backend vllm`` then runs end to end without a GPU, worker processes
    and all); returns the package directory."""
    from pathlib import Path

    package = Path(directory) / "vllm"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(_PACKAGE, encoding="utf-8")
    return package
