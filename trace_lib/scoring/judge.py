"""The Qwen3-32B judge behind an OpenAI-compatible endpoint, with upstream's two client stacks.

- :meth:`Judge.chat` is the official-route (VLMEvalKit ``OpenAIWrapper``) transport: ``/v1/chat/completions``,
  one user message with one text part, ``temperature``, ``max_tokens``, ``chat_template_kwargs={"enable_thinking":
  False}`` (no ``n``, ``top_p`` or seed); up to 5 attempts with a random 0-2 s pause, timeout 330 s. When the judge
  *answers* but never usefully (HTTP 5xx, empty content) the reply carries VLMEvalKit's failure text and
  ``ok=False``, and the benchmark decides what that means, as upstream's does.
- :meth:`Judge.complete` is the direct/MME-route persistent client: ``/v1/completions`` with the prompt rendered
  client-side with the Qwen3 chat template (no thinking), ``max_tokens = max(128, requested)``, batches of at most
  64 prompts / 200,000 rendered characters, exactly one choice per prompt with a unique integer ``index``; up to
  ``max(#endpoints, 5)`` attempts with backoff ``min(8, 0.5 * 2**attempt)`` s, timeout 120 s.
- :func:`complete_with_ladder` adds upstream's token ladder (``128 -> 256 -> 512 -> 1024``) for empty, truncated
  or validator-rejected outputs; a row still unresolved after the ladder raises (the slice fails).

Never a silent fallback: an unreachable judge (connection refused, timeouts on every attempt) and a rejected
request (HTTP 4xx other than 408/429, which is a configuration error and not retried) raise
:class:`~trace_lib.errors.JudgeError` on both transports. Upstream's VLMEvalKit route would fall back to exact
matching when its ``working()`` probe fails; trace-repro refuses instead (use :meth:`OpenAIJudge.check` first).
"""

from __future__ import annotations

import abc
import json
import random
import socket
import threading
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
#: Smallest token budget of the persistent client (``max(128, requested)``) and the ladder's ceiling.
MIN_COMPLETION_TOKENS = 128
LADDER_CEILING_TOKENS = 1024
#: ``finish_reason`` values that mean "cut off by the token budget".
LENGTH_FINISH_REASONS = frozenset({"length", "max_tokens"})

Transport = Literal["chat", "completions"]


@dataclass(frozen=True)
class JudgeReply:
    """One judge answer: the stripped text, the finish reason, and whether the request succeeded."""

    text: str
    finish_reason: str | None = None
    ok: bool = True
    max_tokens: int | None = None  # the token budget the answer was produced under (completions transport)


def render_qwen3_no_think(prompt: str, *, system: str | None = None) -> str:
    """The Qwen3 chat-template rendering of ``[system?, user]`` with ``add_generation_prompt`` and no thinking."""
    head = f"<|im_start|>system\n{system}<|im_end|>\n" if system is not None else ""
    return f"{head}<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def retry_token_limits(max_tokens: int) -> list[int]:
    """Upstream's ladder ``_judge_retry_token_limits``: ``[N, 2N, ...]`` from ``N = max(128, max_tokens)``,
    capped at ``max(1024, N)`` (a budget of 1024 or more gets no ladder)."""
    limit = max(MIN_COMPLETION_TOKENS, int(max_tokens))
    ceiling = max(LADDER_CEILING_TOKENS, limit)
    limits = [limit]
    while limits[-1] < ceiling:
        limits.append(min(ceiling, limits[-1] * 2))
    return limits


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


def complete_with_ladder(
    judge: Judge,
    prompts: Sequence[str],
    *,
    max_tokens: int = 256,
    temperature: float = 0.0,
    top_p: float = 1.0,
    system: str | None = None,
    retry_on_length: bool = True,
    validator: Callable[[str], bool] | None = None,
    allow_unresolved: bool = False,
) -> list[JudgeReply]:
    """:meth:`Judge.complete` with upstream's token ladder: a reply that is empty, cut by the budget (when
    ``retry_on_length``) or rejected by ``validator`` is re-asked at the next budget of
    :func:`retry_token_limits`.

    Raises:
        JudgeError: some prompt is still unresolved after the ladder (unless ``allow_unresolved``, which returns
            the last reply of such prompts), or the judge is unreachable.
    """
    replies: list[JudgeReply | None] = [None] * len(prompts)
    pending = list(range(len(prompts)))
    for budget in retry_token_limits(max_tokens):
        if not pending:
            break
        answers = judge.complete(
            [prompts[i] for i in pending], max_tokens=budget, temperature=temperature, top_p=top_p, system=system
        )
        unresolved = []
        for i, reply in zip(pending, answers):
            if reply.max_tokens is None:
                reply = JudgeReply(reply.text, reply.finish_reason, reply.ok, budget)
            replies[i] = reply
            if not _resolved(reply, retry_on_length, validator):
                unresolved.append(i)
        pending = unresolved
    if pending and not allow_unresolved:
        raise JudgeError(
            f"judge output still empty, truncated or invalid after the token ladder for {len(pending)} prompt(s)",
            field=f"prompt #{pending[0]}",
            expected=f"a valid answer within {retry_token_limits(max_tokens)[-1]} tokens",
            found=(replies[pending[0]].text[:80] if replies[pending[0]] else ""),  # type: ignore[union-attr]
        )
    return [r for r in replies if r is not None]


def _resolved(reply: JudgeReply, retry_on_length: bool, validator: Callable[[str], bool] | None) -> bool:
    if not reply.text.strip():
        return False
    if retry_on_length and reply.finish_reason in LENGTH_FINISH_REASONS:
        return False
    if validator is not None:
        try:
            return bool(validator(reply.text))
        except Exception:  # noqa: BLE001 - upstream treats a raising validator as "invalid output"
            return False
    return True


class CallableJudge(Judge):
    """A judge answered by a Python function ``fn(prompt, transport, settings) -> str`` (unit tests, stubs)."""

    def __init__(self, fn: Callable[[str, Transport, dict[str, Any]], str]) -> None:
        self._fn = fn
        self.calls: list[tuple[str, Transport, dict[str, Any]]] = []

    def _ask(self, prompts: Sequence[str], transport: Transport, settings: dict[str, Any]) -> list[JudgeReply]:
        out = []
        for prompt in prompts:
            self.calls.append((prompt, transport, settings))
            budget = settings["max_tokens"] if transport == "completions" else None
            out.append(JudgeReply(self._fn(prompt, transport, settings).strip(), "stop", max_tokens=budget))
        return out

    def chat(self, prompts: Sequence[str], *, max_tokens: int = 256, temperature: float = 0.0) -> list[JudgeReply]:
        return self._ask(prompts, "chat", {"max_tokens": max_tokens, "temperature": temperature})

    def complete(self, prompts, *, max_tokens=256, temperature=0.0, top_p=1.0, system=None):  # type: ignore[override]
        settings = {
            "max_tokens": max(MIN_COMPLETION_TOKENS, max_tokens),
            "temperature": temperature,
            "top_p": top_p,
            "system": system,
        }
        return self._ask(prompts, "completions", settings)


class _Transient(Exception):
    """A failure worth another attempt: connection-level (``unreachable``) or an answer that is not usable."""

    def __init__(self, reason: str, *, unreachable: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.unreachable = unreachable


class OpenAIJudge(Judge):
    """The real judge: a ``vllm serve`` of the pinned Qwen3-32B at ``base_url`` (``http://HOST:PORT/v1``).

    ``base_url`` may list several endpoints separated by commas (a judge pool); batches are spread over them
    and a failed attempt moves on to the next one, as upstream's persistent client does.
    """

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
        chat_timeout_s: float = 330.0,
        chat_attempts: int = 5,
        chat_pause_s: float = 2.0,
        batch_size: int = 64,
        max_batch_chars: int = 200_000,
    ) -> None:
        urls = [u.strip().rstrip("/") for u in base_url.split(",") if u.strip()]
        if not urls:
            raise JudgeError("no judge URL given", field="--judge-url", hint="pass --judge-url or set TRACE_JUDGE_URL")
        self.base_urls = [u if u.endswith("/v1") else u + "/v1" for u in urls]
        self.base_url = self.base_urls[0]
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.attempts = max(attempts, len(self.base_urls))
        self.concurrency = concurrency
        self.backoff_s = backoff_s
        self.chat_timeout_s = chat_timeout_s
        self.chat_attempts = chat_attempts
        self.chat_pause_s = chat_pause_s
        self.batch_size = batch_size
        self.max_batch_chars = max_batch_chars
        self._rng = random.Random()
        self._lock = threading.Lock()

    @property
    def _label(self) -> str:
        return f"--judge-url {','.join(self.base_urls)}"

    # -- transport -------------------------------------------------------------------------------------------
    def _request(self, url: str, body: dict[str, Any] | None, timeout: float) -> Any:
        """One HTTP exchange; raises JudgeError (permanent) or _Transient."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(
            url,
            data=data,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"},
            method="GET" if body is None else "POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - user-given URL
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = _http_detail(exc)
            if 400 <= exc.code < 500 and exc.code not in (408, 429):
                raise JudgeError(
                    f"judge rejected the request (HTTP {exc.code}{detail})",
                    field=self._label,
                    hint="check the served model name and the request settings",
                ) from None
            raise _Transient(f"HTTP {exc.code}{detail}", unreachable=False) from None
        except urllib.error.URLError as exc:
            raise _Transient(_reason(exc.reason), unreachable=True) from None
        except (TimeoutError, socket.timeout) as exc:
            raise _Transient(f"timed out after {timeout:g} s ({exc})", unreachable=True) from None
        except OSError as exc:
            raise _Transient(_reason(exc), unreachable=True) from None
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise _Transient("answer is not JSON", unreachable=False) from None

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def check(self) -> None:
        """Preflight: every endpoint's ``GET /models`` lists the served judge name.

        Raises:
            JudgeError: an endpoint is unreachable, rejects the request, or does not serve ``self.model``.
        """
        for url in self.base_urls:
            try:
                data = self._request(f"{url}/models", None, self.timeout_s)
            except _Transient as exc:
                raise JudgeError(
                    f"judge unreachable ({exc.reason})", field=f"--judge-url {url}", hint=_START_HINT
                ) from None
            served = [m.get("id") for m in (data.get("data") or []) if isinstance(m, dict)] if isinstance(data, dict) else []
            if self.model not in served:
                raise JudgeError(
                    "endpoint does not serve the judge",
                    field=f"--judge-url {url}",
                    expected=self.model,
                    found=", ".join(map(str, served)) or "no models",
                    hint=f"serve Qwen3-32B with --served-model-name {self.model}",
                )

    # -- the two client stacks -------------------------------------------------------------------------------
    def chat(self, prompts: Sequence[str], *, max_tokens: int = 256, temperature: float = 0.0) -> list[JudgeReply]:
        def one(item: tuple[int, str]) -> JudgeReply:
            position, prompt = item
            body = {
                "model": self.model,
                "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
                "temperature": temperature,
                "max_tokens": max_tokens,
                "chat_template_kwargs": {"enable_thinking": False},
            }
            last: _Transient | None = None
            finish: str | None = None
            for attempt in range(self.chat_attempts):
                url = self.base_urls[(position + attempt) % len(self.base_urls)]
                try:
                    data = self._request(f"{url}/chat/completions", body, self.chat_timeout_s)
                    choice = data["choices"][0]
                    finish = choice.get("finish_reason")
                    text = (choice["message"].get("content") or "").strip()
                    if text and VLMEVAL_FAIL_MSG.strip() not in text:
                        return JudgeReply(text, finish)
                    last = _Transient("empty answer", unreachable=False)
                except _Transient as exc:
                    last = exc
                except (KeyError, IndexError, TypeError, AttributeError):
                    last = _Transient("answer outside the chat.completions schema", unreachable=False)
                if attempt + 1 < self.chat_attempts:
                    with self._lock:
                        pause = self._rng.random() * self.chat_pause_s
                    self._sleep(pause)
            if last is not None and last.unreachable:
                raise JudgeError(f"judge unreachable ({last.reason})", field=self._label, hint=_START_HINT)
            return JudgeReply(VLMEVAL_FAIL_MSG, finish, ok=False)

        return self._map(one, list(enumerate(prompts)))

    def complete(self, prompts, *, max_tokens=256, temperature=0.0, top_p=1.0, system=None):  # type: ignore[override]
        budget = max(MIN_COMPLETION_TOKENS, int(max_tokens))
        rendered = [render_qwen3_no_think(p, system=system) for p in prompts]
        batches = _batches(rendered, batch_size=self.batch_size, max_chars=self.max_batch_chars)

        def one(item: tuple[int, list[int]]) -> list[JudgeReply]:
            position, members = item
            body = {
                "model": self.model,
                "prompt": rendered[members[0]] if len(members) == 1 else [rendered[i] for i in members],
                "temperature": temperature,
                "top_p": top_p,
                "max_tokens": budget,
            }
            return self._completion_batch(position, body, len(members), budget)

        out: list[JudgeReply] = []
        for replies in self._map(one, list(enumerate(batches))):
            out.extend(replies)
        return out

    def _completion_batch(self, position: int, body: dict[str, Any], count: int, budget: int) -> list[JudgeReply]:
        last: _Transient | None = None
        for attempt in range(self.attempts):
            url = self.base_urls[(position + attempt) % len(self.base_urls)]
            try:
                return _completion_choices(self._request(f"{url}/completions", body, self.timeout_s), count, budget)
            except _Transient as exc:
                last = exc
            if attempt + 1 < self.attempts:
                self._sleep(min(8.0, self.backoff_s * 2**attempt))
        assert last is not None
        if last.unreachable:
            raise JudgeError(f"judge unreachable ({last.reason})", field=self._label, hint=_START_HINT)
        raise JudgeError(
            f"judge failed after {self.attempts} attempts ({last.reason})", field=self._label, hint=_START_HINT
        )

    def _map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        if len(items) <= 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items))) as pool:
            return list(pool.map(fn, items))


_START_HINT = "start the judge or choose non-judge slices"


def _reason(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return "timed out"
    if isinstance(reason, socket.gaierror):
        return "unknown host"
    text = getattr(reason, "strerror", None) or str(reason)
    return text.lower() if text else type(reason).__name__


def _http_detail(exc: urllib.error.HTTPError) -> str:
    try:
        payload = json.loads(exc.read().decode("utf-8"))
        message = payload.get("error", {}).get("message") if isinstance(payload.get("error"), dict) else payload.get("error")
    except Exception:  # noqa: BLE001 - the body is only decoration for the message
        return ""
    return f": {str(message)[:200]}" if message else ""


def _batches(rendered: Sequence[str], *, batch_size: int, max_chars: int) -> list[list[int]]:
    """Upstream's packing: at most ``batch_size`` prompts and ``max_chars`` characters per batch; a prompt alone
    at or above the character cap closes its own batch."""
    batches: list[list[int]] = []
    current: list[int] = []
    chars = 0
    for i, text in enumerate(rendered):
        if current and (len(current) >= batch_size or chars + len(text) > max_chars):
            batches.append(current)
            current, chars = [], 0
        current.append(i)
        chars += len(text)
        if len(text) >= max_chars:
            batches.append(current)
            current, chars = [], 0
    if current:
        batches.append(current)
    return batches


def _completion_choices(data: Any, count: int, budget: int) -> list[JudgeReply]:
    """Map a completions answer onto its prompts: exactly one choice per prompt, unique integer indices."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or len(choices) != count:
        found = len(choices) if isinstance(choices, list) else "no choices list"
        raise _Transient(f"answered {found} choices for {count} prompts", unreachable=False)
    mapped: list[JudgeReply | None] = [None] * count
    for choice in choices:
        index = choice.get("index") if isinstance(choice, dict) else None
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count or mapped[index] is not None:
            raise _Transient(f"choice index {index!r} is missing, duplicated or out of range", unreachable=False)
        mapped[index] = JudgeReply(str(choice.get("text") or "").strip(), choice.get("finish_reason"), max_tokens=budget)
    return [m for m in mapped if m is not None]
