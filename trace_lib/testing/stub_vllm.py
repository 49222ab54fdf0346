"""A stand-in for the slice of ``vllm.LLM`` the vllm backend drives (no model, no GPU): for CPU tests of the
backend's request flow and for profiling the harness path (``benchmarks/harness_profile.py``).

:class:`StubLLM` accepts ``enqueue_chat`` and finishes at most ``per_step`` requests per ``llm_engine.step()``
in arrival order; it records every enqueued batch (size, sampling seeds) and the most requests it ever held. With
``render_workers`` > 1 it also has vLLM 0.24's asynchronous renderer (``renderer.render_chat_async``, counting
the conversations it renders; a conversation containing ``FAIL`` raises) and ``llm_engine.add_request`` for
rendered inputs, whose answers name the rendered prompt. :func:`stub_vllm_modules` are the module objects
(``vllm``, ``vllm.renderers``, ...) the backend imports, for ``sys.modules``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import types
from dataclasses import dataclass, field
from typing import Any


class StubSamplingParams:
    @classmethod
    def from_optional(cls, **kwargs: Any) -> StubSamplingParams:
        params = cls()
        params.__dict__.update(kwargs)
        return params


@dataclass
class StubChatParams:
    chat_template: Any = None
    chat_template_content_format: str = "auto"
    chat_template_kwargs: dict = field(default_factory=dict)
    media_io_kwargs: Any = None
    mm_processor_kwargs: Any = None


def stub_vllm_modules() -> dict[str, types.ModuleType]:
    """Module name -> module object, for ``monkeypatch.setitem(sys.modules, ...)`` / ``sys.modules.update``."""
    vllm = types.ModuleType("vllm")
    vllm.SamplingParams = StubSamplingParams  # type: ignore[attr-defined]
    renderers = types.ModuleType("vllm.renderers")
    renderers.ChatParams = StubChatParams  # type: ignore[attr-defined]
    renderers.merge_kwargs = lambda base, extra: {**(base or {}), **extra}  # type: ignore[attr-defined]
    mistral = types.ModuleType("vllm.utils.mistral")
    mistral.is_mistral_tokenizer = lambda tokenizer: False  # type: ignore[attr-defined]
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.RequestOutputKind = types.SimpleNamespace(FINAL_ONLY="final-only")  # type: ignore[attr-defined]
    return {"vllm": vllm, "vllm.renderers": renderers, "vllm.utils": types.ModuleType("vllm.utils"),
            "vllm.utils.mistral": mistral, "vllm.sampling_params": sampling}


class _Output:
    def __init__(self, request_id: str, seed: Any, prompt: str | None = None) -> None:
        self.request_id = request_id
        self.finished = True
        self.prompt_token_ids = [0] * 64
        text = f"answer with seed {seed}" + (f" to {prompt}" if prompt is not None else "")
        self.outputs = [types.SimpleNamespace(text=text, finish_reason="stop", token_ids=[1] * 8)]


class _StubRenderer:
    """``render_chat_async`` rendering a conversation to ``{"prompt": <its JSON>}`` after ``delay_s``."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.tokenizer = object()
        self.default_chat_tok_params = types.SimpleNamespace(with_kwargs=lambda **kwargs: "tok-params")
        self.rendered: list[str] = []

    async def render_chat_async(self, conversations: list, params: Any, tok_params: Any,
                                prompt_extras: Any = None) -> tuple[list, list]:
        await asyncio.sleep(self.delay_s)
        prompts = [json.dumps(conversation, sort_keys=True) for conversation in conversations]
        if any("FAIL" in prompt for prompt in prompts):
            raise ValueError("the stub renderer cannot render this conversation")
        self.rendered += prompts
        return conversations, [{"type": "multimodal", "prompt": prompt, "mm_processor_kwargs":
                                params.mm_processor_kwargs} for prompt in prompts]


class StubLLM:
    """See the module docstring; engine ids are ``"<counter>-abcdefgh"`` and outputs carry the external part."""

    def __init__(self, *, per_step: int = 256, render_workers: int = 1, render_delay_s: float = 0.0) -> None:
        self.per_step = per_step
        self._counter = 0
        self._pending: list[tuple[str, Any, str | None]] = []
        self.batches: list[list[Any]] = []  # the seeds of each enqueue_chat call
        self.most_held = 0
        self.most_seeds_held = 0  # distinct seeds held at once (slices sharing the batch)
        self.aborted: list[str] = []
        self.model_config = types.SimpleNamespace(get_diff_sampling_param=lambda: {}, enable_prompt_embeds=False,
                                                  renderer_num_workers=render_workers)
        self.llm_engine = types.SimpleNamespace(has_unfinished_requests=lambda: bool(self._pending),
                                                step=self._step, abort_request=self._abort)
        if render_workers > 1:
            self.renderer = _StubRenderer(render_delay_s)
            self.request_counter = itertools.count()
            self.llm_engine.add_request = self._add_request

    def _abort(self, ids: list[str], internal: bool = False) -> None:
        self.aborted += ids
        self._pending = [p for p in self._pending if p[0] not in set(ids)]

    def _add_request(self, request_id: str, engine_input: dict, params: Any, arrival_time: float = 0) -> str:
        engine_id = f"{request_id}-abcdefgh"
        self._pending.append((engine_id, getattr(params, "seed", None), engine_input["prompt"]))
        self._held()
        return engine_id

    def _held(self) -> None:
        self.most_held = max(self.most_held, len(self._pending))
        self.most_seeds_held = max(self.most_seeds_held, len({seed for _, seed, _ in self._pending}))

    def enqueue_chat(self, conversations: list, sampling_params: list, use_tqdm: bool = False,
                     mm_processor_kwargs: Any = None) -> list[str]:
        ids = []
        for params in sampling_params:
            ids.append(f"{self._counter}-abcdefgh")
            self._pending.append((ids[-1], getattr(params, "seed", None), None))
            self._counter += 1
        self.batches.append([getattr(p, "seed", None) for p in sampling_params])
        self._held()
        return ids

    def _step(self) -> list[_Output]:
        done, self._pending = self._pending[:self.per_step], self._pending[self.per_step:]
        return [_Output(engine_id.split("-", 1)[0], seed, prompt) for engine_id, seed, prompt in done]
