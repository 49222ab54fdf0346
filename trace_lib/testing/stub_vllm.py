"""A stand-in for the slice of ``vllm.LLM`` the vllm backend drives (no model, no GPU): for CPU tests of the
backend's request flow and for profiling the harness path (``benchmarks/harness_profile.py``).

:class:`StubLLM` accepts ``enqueue_chat`` and finishes at most ``per_step`` requests per ``llm_engine.step()``
in arrival order; it records every enqueued batch (size, sampling seeds) and the most requests it ever held.
With ``refuse`` set, a call whose conversations contain that text raises ``ValueError`` and adds nothing, as
vLLM's ``LLM.enqueue_chat`` does for a prompt longer than ``max_model_len``. It also takes requests rendered
elsewhere (``_render_and_add_requests``, recording the injected image hashes): :func:`stub_renderer` is the
render workers' factory for it.
:func:`stub_vllm_module` is a module object providing ``SamplingParams.from_optional`` for ``sys.modules``.
"""

from __future__ import annotations

import types
from typing import Any


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


class StubLLM:
    """See the module docstring; engine ids are ``"<counter>-abcdefgh"`` and outputs carry the external part."""

    def __init__(self, *, per_step: int = 256, refuse: str | None = None) -> None:
        self.per_step = per_step
        self.refuse = refuse
        self._counter = 0
        self._pending: list[tuple[str, Any]] = []
        self.batches: list[list[Any]] = []  # the seeds of each enqueue_chat call
        self.most_held = 0
        self.most_seeds_held = 0  # distinct seeds held at once (slices sharing the batch)
        self.model_config = types.SimpleNamespace(get_diff_sampling_param=lambda: {})
        self.injected: list[Any] = []  # the mm hashes injected before each rendered request was added
        self.llm_engine = types.SimpleNamespace(
            has_unfinished_requests=lambda: bool(self._pending), step=self._step,
            abort_request=lambda ids, internal=False: None, vllm_config=dict(STUB_RENDER_CONFIG),
            input_processor=types.SimpleNamespace(inject_into_mm_cache=lambda h, k: self.injected.append(h)))

    def enqueue_chat(self, conversations: list, sampling_params: list, use_tqdm: bool = False,
                     mm_processor_kwargs: Any = None) -> list[str]:
        if self.refuse is not None and any(self.refuse in _texts(c) for c in conversations):
            raise ValueError("The decoder prompt (length 40001) is longer than the maximum model length of 32768.")
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
        """vLLM's second half of ``enqueue_chat``: add what :func:`stub_renderer` rendered."""
        return self.enqueue_chat([p["conversation"] for p in prompts], params)

    def _step(self) -> list[_Output]:
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
        return {"type": "multimodal", "conversation": conversation, "mm_hashes": {"image": [text]},
                "mm_kwargs": {"image": [None]}, "mm_processor_kwargs": mm_processor_kwargs}

    return render


_PACKAGE = '''"""A stand-in ``vllm`` package (trace_lib.testing.stub_vllm): ``LLM(**kwargs)`` is a StubLLM; the keyword
arguments of each engine are appended to ``$STUB_VLLM_RECORD`` (one JSON line) when it is set."""
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
    return StubLLM()
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
