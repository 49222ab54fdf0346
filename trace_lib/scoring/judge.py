"""The Qwen3-32B judge behind an OpenAI-compatible endpoint, with upstream's two client stacks.

- :meth:`Judge.chat` is the official-route (VLMEvalKit ``OpenAIWrapper``) transport: ``/v1/chat/completions``,
  one user message with one text part, ``chat_template_kwargs={"enable_thinking": False}``; after
  ``attempts`` transport failures the reply carries VLMEvalKit's failure text and ``ok=False`` (the benchmark
  decides what that means, as upstream's does).
- :meth:`Judge.complete` is the direct/MME-route persistent client: ``/v1/completions`` with the prompt
  rendered client-side with the Qwen3 chat template (no thinking); an unreachable judge raises
  :class:`~trace_lib.errors.JudgeError`: never a silent fallback.
"""

from __future__ import annotations

import abc
import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from trace_lib.errors import JudgeError

#: The served model name of the judge pool (eval-campaign spec §4.1).
JUDGE_SERVED_NAME = "qwen3-32b-judge"
#: VLMEvalKit ``OpenAIWrapper``'s answer after exhausting its retries (``vlmeval/api/base.py``).
VLMEVAL_FAIL_MSG = "Failed to obtain answer via API. "

Transport = Literal["chat", "completions"]


@dataclass(frozen=True)
class JudgeReply:
    """One judge answer: the stripped text, the finish reason, and whether the request succeeded."""

    text: str
    finish_reason: str | None = None
    ok: bool = True


def render_qwen3_no_think(prompt: str, *, system: str | None = None) -> str:
    """The Qwen3 chat-template rendering of ``[system?, user]`` with ``add_generation_prompt`` and no thinking."""
    head = f"<|im_start|>system\n{system}<|im_end|>\n" if system is not None else ""
    return f"{head}<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


class Judge(abc.ABC):
    """A judge client; both methods answer one reply per prompt, in order."""

    @abc.abstractmethod
    def chat(self, prompts: Sequence[str], *, max_tokens: int = 256, temperature: float = 0.0) -> list[JudgeReply]:
        """Official-route requests (VLMEvalKit client semantics)."""

    @abc.abstractmethod
    def complete(
        self,
        prompts: Sequence[str],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        system: str | None = None,
    ) -> list[JudgeReply]:
        """Direct/MME-route requests (persistent client semantics); raises JudgeError when unreachable."""


class CallableJudge(Judge):
    """A judge answered by a Python function ``fn(prompt, transport, settings) -> str`` (unit tests, stubs)."""

    def __init__(self, fn: Callable[[str, Transport, dict[str, Any]], str]) -> None:
        self._fn = fn
        self.calls: list[tuple[str, Transport, dict[str, Any]]] = []

    def _ask(self, prompts: Sequence[str], transport: Transport, settings: dict[str, Any]) -> list[JudgeReply]:
        out = []
        for prompt in prompts:
            self.calls.append((prompt, transport, settings))
            out.append(JudgeReply(self._fn(prompt, transport, settings).strip(), "stop"))
        return out

    def chat(self, prompts: Sequence[str], *, max_tokens: int = 256, temperature: float = 0.0) -> list[JudgeReply]:
        return self._ask(prompts, "chat", {"max_tokens": max_tokens, "temperature": temperature})

    def complete(self, prompts, *, max_tokens=256, temperature=0.0, top_p=1.0, system=None):  # type: ignore[override]
        settings = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p, "system": system}
        return self._ask(prompts, "completions", settings)


class OpenAIJudge(Judge):
    """The real judge: a ``vllm serve`` of the pinned Qwen3-32B at ``base_url`` (``http://HOST:PORT/v1``)."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str = JUDGE_SERVED_NAME,
        api_key: str = "sk-local",
        timeout_s: float = 120.0,
        attempts: int = 5,
        concurrency: int = 16,
        backoff_s: float = 0.5,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.concurrency = concurrency
        self.backoff_s = backoff_s

    # -- transport -------------------------------------------------------------------------------------------
    def _post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.base_url}/{route}",
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 - user-given URL
            return json.loads(response.read().decode("utf-8"))

    def _post_retrying(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        last: Exception | None = None
        for attempt in range(self.attempts):
            try:
                return self._post(route, body)
            except urllib.error.HTTPError as exc:
                if 400 <= exc.code < 500 and exc.code != 429:
                    raise JudgeError(
                        f"judge rejected the request (HTTP {exc.code})", field=f"--judge-url {self.base_url}"
                    ) from None
                last = exc
            except (urllib.error.URLError, OSError, ValueError) as exc:
                last = exc
            if attempt + 1 < self.attempts:
                time.sleep(min(8.0, self.backoff_s * 2**attempt))
        reason = getattr(last, "reason", last)
        raise JudgeError(
            f"judge unreachable ({reason})",
            field=f"--judge-url {self.base_url}",
            hint="start the judge or choose non-judge slices",
        )

    def _map(self, fn: Callable[[str], JudgeReply], prompts: Sequence[str]) -> list[JudgeReply]:
        if len(prompts) <= 1:
            return [fn(p) for p in prompts]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(prompts))) as pool:
            return list(pool.map(fn, prompts))

    # -- the two client stacks -------------------------------------------------------------------------------
    def chat(self, prompts: Sequence[str], *, max_tokens: int = 256, temperature: float = 0.0) -> list[JudgeReply]:
        def one(prompt: str) -> JudgeReply:
            body = {
                "model": self.model,
                "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
                "temperature": temperature,
                "max_tokens": max_tokens,
                "chat_template_kwargs": {"enable_thinking": False},
            }
            try:
                data = self._post_retrying("chat/completions", body)
                choice = data["choices"][0]
                text = (choice["message"].get("content") or "").strip()
            except (JudgeError, KeyError, IndexError, TypeError):
                return JudgeReply(VLMEVAL_FAIL_MSG, None, ok=False)
            if not text:
                return JudgeReply(VLMEVAL_FAIL_MSG, choice.get("finish_reason"), ok=False)
            return JudgeReply(text, choice.get("finish_reason"))

        return self._map(one, prompts)

    def complete(self, prompts, *, max_tokens=256, temperature=0.0, top_p=1.0, system=None):  # type: ignore[override]
        def one(prompt: str) -> JudgeReply:
            body = {
                "model": self.model,
                "prompt": render_qwen3_no_think(prompt, system=system),
                "temperature": temperature,
                "top_p": top_p,
                "max_tokens": max(128, max_tokens),
            }
            data = self._post_retrying("completions", body)
            try:
                choice = data["choices"][0]
                return JudgeReply((choice.get("text") or "").strip(), choice.get("finish_reason"))
            except (KeyError, IndexError, TypeError):
                raise JudgeError("judge answered outside the OpenAI completions schema", field=self.base_url) from None

        return self._map(one, prompts)
