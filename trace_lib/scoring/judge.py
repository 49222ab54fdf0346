"""The Qwen3-32B judge behind an OpenAI-compatible endpoint, with upstream's two client stacks.

- :meth:`Judge.chat` is the official-route (VLMEvalKit ``OpenAIWrapper``) transport: ``/v1/chat/completions``,
  one user message with one text part, ``temperature``, ``chat_template_kwargs={"enable_thinking": False}``,
  ``max_tokens`` (no ``n``, ``top_p`` or seed); up to 5 attempts with a random 0-2 s pause, timeout 330 s. A
  per-request failure (vLLM's context-length HTTP 400, any other non-2xx answer, a timeout, an empty or garbled
  answer) is retried and then answers VLMEvalKit's failure text with ``ok=False`` and the failure kind; the
  benchmark then does what upstream does (more rounds, then its fallback).
- :meth:`Judge.complete` is the direct/MME-route persistent client: ``/v1/completions`` with the prompt rendered
  client-side with the Qwen3 chat template (no thinking), ``max_tokens = max(128, requested)``, batches of at most
  64 prompts / 200,000 rendered characters, exactly one choice per prompt with a unique integer ``index``; every
  failed attempt (any HTTP error, timeout, bad answer) is retried up to ``max(#endpoints, 5)`` times with backoff
  ``min(8, 0.5 * 2**attempt)`` s, timeout 120 s; after that the benchmark fails, as upstream's client raises.
- :func:`complete_with_ladder` adds upstream's token ladder (``128 -> 256 -> 512 -> 1024``) for empty, truncated
  or validator-rejected outputs; a row still unresolved after the ladder raises (the slice fails).

Configuration failures are fatal in one line on both stacks (:class:`~trace_lib.errors.JudgeError`): every
attempt refused (nothing listens), the endpoint does not serve the model name (HTTP 404), credentials refused.
Upstream's VLMEvalKit route would fall back to exact matching when its ``working()`` probe fails; trace-repro
refuses instead (:meth:`OpenAIJudge.check` first; :func:`first_round_failed` for a judge that answers every
request with 5xx).
"""

from __future__ import annotations

import abc
import random
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from trace_lib.errors import JudgeError
from trace_lib.interrupts import pause
from trace_lib.scoring.judge_http import PER_REQUEST_KINDS, CallFailed, JudgeTransport, probe, shared_transport
from trace_lib.scoring.request_order import dispatch_order

#: The served model name of the judge pool (eval-campaign spec §4.1).
JUDGE_SERVED_NAME = "qwen3-32b-judge"
#: The judge's weights directory under the model root (the campaign's judge model and the pool's default).
JUDGE_SLUG = "qwen3-32b-judge"
#: VLMEvalKit ``OpenAIWrapper``'s answer after exhausting its retries: ``BaseAPI.__init__``'s ``fail_msg`` default,
#: which overrides the wrapper's own ``"... API. "`` (set before ``super().__init__``), so no trailing space.
VLMEVAL_FAIL_MSG = "Failed to obtain answer via API."
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
    failure: str | None = None  # when not ok: the last failure kind (judge_http.FAILURE_KINDS)


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
    def chat(self, prompts: Sequence[str], *, max_tokens: int = 256, temperature: float = 0) -> list[JudgeReply]:
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
    """:meth:`Judge.complete` on the ``persistent`` stack's ladder (:func:`climb_ladder`): a reply that is empty,
    cut by the budget (when ``retry_on_length``) or rejected by ``validator`` is re-asked at the next budget of
    :func:`retry_token_limits`.

    Raises:
        JudgeError: some prompt is still unresolved after the ladder (unless ``allow_unresolved``, which returns
            the last reply of such prompts), or the judge is unreachable.
    """
    limits = retry_token_limits(max_tokens)

    def ask(rung: int, budget: int, indices: Sequence[int]) -> list[JudgeReply]:
        extra = {"rung": rung} if isinstance(judge, OpenAIJudge) else {}
        answers = judge.complete([prompts[i] for i in indices], max_tokens=budget, temperature=temperature,
                                 top_p=top_p, system=system, **extra)
        return [r if r.max_tokens is not None else JudgeReply(r.text, r.finish_reason, r.ok, budget) for r in answers]

    def check(rung: int, index: int, reply: JudgeReply) -> str | None:
        return None if _resolved(reply, retry_on_length, validator) else "unresolved"

    ladders = climb_ladder(ask, len(prompts), limits, check=check)
    pending = [i for i, rungs in enumerate(ladders) if rungs and rungs[-1].problem is not None]
    if pending and not allow_unresolved:
        raise JudgeError(
            f"judge output still empty, truncated or invalid after the token ladder for {len(pending)} prompt(s)",
            field=f"prompt #{pending[0]}",
            expected=f"a valid answer within {limits[-1]} tokens",
            found=ladders[pending[0]][-1].reply.text[:80],
        )
    return [rungs[-1].reply for rungs in ladders if rungs]


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


class OpenAIJudge(Judge):
    """The real judge: a ``vllm serve`` of the pinned Qwen3-32B at ``base_url`` (``http://HOST:PORT/v1``).

    ``base_url`` may list several endpoints separated by commas (a judge pool, as upstream's endpoint pool):
    official-route requests are spread over them by position and retried on the same endpoint (VLMEvalKit's
    wrapper holds one ``api_base``); completions batches start at endpoint ``(batch + rung) % n`` and a failed
    attempt moves on to the next one, as upstream's persistent client does. Requests go through the shared
    transport (:mod:`trace_lib.scoring.judge_http`), in the order of
    :func:`~trace_lib.scoring.request_order.dispatch_order` (replies come back in prompt order), through one lane
    per endpoint: persistent worker threads (as many as the endpoint's window holds sequences, or ``concurrency``
    when given) taking the requests of every call, from every thread, first come first served, so that the
    slices scored side by side share one in-flight window per endpoint (the transport's :class:`JudgeWindow`)
    instead of each keeping its own few requests in flight. :meth:`starved` says whether the windows have room
    that no queued request will fill (the campaign scorer then starts another slice).
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str = JUDGE_SERVED_NAME,
        timeout_s: float = 120.0,
        attempts: int = 5,
        concurrency: int | None = None,
        backoff_s: float = 0.5,
        chat_timeout_s: float = 330.0,
        chat_attempts: int = 5,
        chat_pause_s: float = 2.0,
        batch_size: int = 64,
        max_batch_chars: int = 200_000,
        transport: JudgeTransport | None = None,
    ) -> None:
        urls = [u.strip().rstrip("/") for u in base_url.split(",") if u.strip()]
        if not urls:
            raise JudgeError("no judge URL given", field="--judge-url", hint="pass --judge-url or set TRACE_JUDGE_URL")
        self.base_urls = [u if u.endswith("/v1") else u + "/v1" for u in urls]
        self.base_url = self.base_urls[0]
        self.model = model
        self.timeout_s = timeout_s
        self.attempts = max(attempts, len(self.base_urls))
        self._concurrency = concurrency
        self.backoff_s = backoff_s
        self.chat_timeout_s = chat_timeout_s
        self.chat_attempts = chat_attempts
        self.chat_pause_s = chat_pause_s
        self.batch_size = batch_size
        self.max_batch_chars = max_batch_chars
        self._transport = transport
        self._rng = random.Random()
        self._lock = threading.Lock()
        self._lanes: dict[int, ThreadPoolExecutor] = {}
        self._queued = [0] * len(self.base_urls)  # sequences submitted to each lane, not yet started
        self.callers = 0  # calls waiting for their replies (the campaign scorer's "every slice is waiting")

    @property
    def concurrency(self) -> int:
        """Requests this client keeps in flight per endpoint, across all its calls: as given, else the
        transport's window (``TRACE_JUDGE_CONCURRENCY`` sequences, which bounds every client together)."""
        return self._concurrency if self._concurrency is not None else self.transport.concurrency

    def room(self) -> tuple[int, int]:
        """``(load, capacity)`` over the endpoints: sequences in flight, waiting for a window or queued on this
        client's lanes, and how many the windows hold (per endpoint at most this client's concurrency)."""
        with self._lock:
            queued = list(self._queued)
        load = capacity = 0
        for number, url in enumerate(self.base_urls):
            window = self.transport.window(url)
            size = min(window.capacity, self.concurrency)
            load, capacity = load + min(size, window.load + queued[number]), capacity + size
        return load, capacity

    def starved(self) -> bool:
        """Whether the windows have room that no request in flight, waiting or queued here fills."""
        load, capacity = self.room()
        return load < capacity

    @property
    def transport(self) -> JudgeTransport:
        if self._transport is None:
            self._transport = shared_transport()
        return self._transport

    @property
    def _label(self) -> str:
        return f"--judge-url {','.join(self.base_urls)}"

    def _sleep(self, seconds: float) -> None:
        pause(seconds)  # a retry's back-off; a stop signal ends it (trace_lib.interrupts)

    def check(self) -> None:
        """Preflight: every endpoint's ``GET /models`` lists the served judge name.

        Raises:
            JudgeError: an endpoint is unreachable, rejects the request, or does not serve ``self.model``.
        """
        for url in self.base_urls:
            probe(url, self.model, timeout_s=min(self.timeout_s, 30.0), transport=self.transport, hint=_START_HINT)

    # -- the two client stacks -------------------------------------------------------------------------------
    def chat(self, prompts: Sequence[str], *, max_tokens: int = 256, temperature: float = 0) -> list[JudgeReply]:
        def one(item: tuple[int, str]) -> JudgeReply:
            position, prompt = item
            body = chat_body(self.model, prompt, max_tokens=max_tokens, temperature=temperature)
            url = f"{self.base_urls[position % len(self.base_urls)]}/chat/completions"
            last: CallFailed | None = None
            finish: str | None = None
            for attempt in range(self.chat_attempts):
                try:
                    data = self.transport.post(url, body, timeout_s=self.chat_timeout_s, model=self.model).data
                    choice = data["choices"][0]
                    finish = choice.get("finish_reason")
                    text = (choice["message"].get("content") or "").strip()
                    if text and VLMEVAL_FAIL_MSG.strip() not in text:
                        return JudgeReply(text, finish)
                    last = CallFailed("empty", "empty answer")
                except CallFailed as exc:
                    last = exc
                except (KeyError, IndexError, TypeError, AttributeError):
                    last = CallFailed("garbled", "answer outside the chat.completions schema")
                if attempt + 1 < self.chat_attempts:
                    with self._lock:
                        pause = self._rng.random() * self.chat_pause_s
                    self._sleep(pause)
            assert last is not None
            if last.kind == "connection":
                raise JudgeError(f"judge unreachable ({last.reason})", field=self._label, hint=_START_HINT)
            return JudgeReply(VLMEVAL_FAIL_MSG, finish, ok=False, failure=last.kind)

        order = dispatch_order(prompts)
        items = [(i, prompts[i]) for i in order]
        return _restore(order, self._map(one, items, [(i % len(self.base_urls), 1) for i, _ in items]))

    def complete(  # type: ignore[override]
        self, prompts, *, max_tokens=256, temperature=0.0, top_p=1.0, system=None, rung=0
    ):
        """Persistent-client requests; ``rung`` (the ladder's step) shifts the first endpoint, as upstream's
        ``pos + retry_round``."""
        budget = max(MIN_COMPLETION_TOKENS, int(max_tokens))
        as_given = [render_qwen3_no_think(p, system=system) for p in prompts]
        order = dispatch_order(as_given)  # grouped for the prefix cache (trace_lib.scoring.request_order)
        rendered = [as_given[i] for i in order]
        batches = _batches(rendered, batch_size=self.batch_size, max_chars=self.max_batch_chars)

        def one(item: tuple[int, list[int]]) -> list[JudgeReply]:
            position, members = item
            body = completions_body(self.model, [rendered[i] for i in members], max_tokens=budget,
                                    temperature=temperature, top_p=top_p)
            return self._completion_batch(position + rung, body, len(members), budget)

        out: list[JudgeReply] = []
        lanes = [((position + rung) % len(self.base_urls), len(members)) for position, members in enumerate(batches)]
        for replies in self._map(one, list(enumerate(batches)), lanes):
            out.extend(replies)
        return _restore(order, out)

    def _completion_batch(self, start: int, body: dict[str, Any], count: int, budget: int) -> list[JudgeReply]:
        last: CallFailed | None = None
        for attempt in range(self.attempts):
            url = self.base_urls[(start + attempt) % len(self.base_urls)]
            try:
                data = self.transport.post(f"{url}/completions", body, timeout_s=self.timeout_s, model=self.model,
                                           weight=count).data
                return _completion_choices(data, count, budget)
            except CallFailed as exc:
                last = exc
            if attempt + 1 < self.attempts:
                self._sleep(min(8.0, self.backoff_s * 2**attempt))
        assert last is not None
        if last.kind == "connection":
            raise JudgeError(f"judge unreachable ({last.reason})", field=self._label, hint=_START_HINT)
        hint = ("a prompt plus its token budget exceeds the judge's --max-model-len; upstream's persistent client "
                "fails the benchmark here too" if last.kind == "context_length" else _START_HINT)
        raise JudgeError(f"judge failed after {self.attempts} attempts ({last.reason})", field=self._label, hint=hint)

    def _map(self, fn: Callable[[Any], Any], items: Sequence[Any], lanes: Sequence[tuple[int, int]]) -> list[Any]:
        """``fn`` of every item on its lane (``lanes[i]``: the endpoint's number and the sequences it carries),
        results in item order; the first failure (in item order) is raised, the items not started are cancelled."""
        futures = []
        with self._lock:
            self.callers += 1
        try:
            for item, (lane, weight) in zip(items, lanes):
                with self._lock:
                    self._queued[lane] += weight
                try:
                    futures.append(self._lane(lane).submit(self._run_queued, fn, item, lane, weight))
                except BaseException:
                    with self._lock:
                        self._queued[lane] -= weight
                    raise
            return [future.result() for future in futures]
        except BaseException as exc:
            for future in futures:
                future.cancel()
            if isinstance(exc, KeyboardInterrupt):
                # A stop: end the exchanges still running and let their threads see the stop before this call
                # returns (while the stop is still in force); a lane thread left behind could otherwise start
                # another request once the stop is over, and the process would wait for it at exit.
                self.transport.cancel_all()
                wait([f for f in futures if not f.cancelled()], timeout=STOP_WAIT_S)
            raise
        finally:
            with self._lock:
                self.callers -= 1
                for future, (lane, weight) in zip(futures, lanes):
                    if future.cancelled():
                        self._queued[lane] -= weight

    def _run_queued(self, fn: Callable[[Any], Any], item: Any, lane: int, weight: int) -> Any:
        with self._lock:
            self._queued[lane] -= weight
        return fn(item)

    def _lane(self, number: int) -> ThreadPoolExecutor:
        with self._lock:
            if number not in self._lanes:
                self._lanes[number] = ThreadPoolExecutor(max_workers=self.concurrency,
                                                         thread_name_prefix=f"judge-lane-{number}")
            return self._lanes[number]

    def close(self) -> None:
        """Stop the lanes' threads (they also end with the process, or when the client is collected)."""
        with self._lock:
            lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            lane.shutdown(wait=False, cancel_futures=True)


#: How long a stopped call waits for its lanes' running exchanges to end (their sockets are shut down).
STOP_WAIT_S = 10.0


def chat_body(model: str, prompt: str, *, max_tokens: int, temperature: float = 0) -> dict[str, Any]:
    """The official-route body as VLMEvalKit's ``OpenAIWrapper.generate_inner`` builds it for a local judge:
    ``model, messages, temperature``, the wrapper's default kwargs (``chat_template_kwargs``), then
    ``max_tokens`` (``n`` is dropped for a non-openai.com base). Upstream's ``temperature`` is the int ``0``."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        "temperature": temperature,
        "chat_template_kwargs": {"enable_thinking": False},
        "max_tokens": max_tokens,
    }


def completions_body(model: str, rendered: Sequence[str], *, max_tokens: int, temperature: float,
                     top_p: float, stack: str = "persistent") -> dict[str, Any]:
    """A ``/v1/completions`` body: ``model, prompt, temperature, top_p, max_tokens`` and the stack's ``seed``;
    ``prompt`` is a scalar for a batch of one unless the stack sends lists (:class:`StackPolicy`)."""
    policy = stack_policy(stack)
    body = {
        "model": model,
        "prompt": rendered[0] if len(rendered) == 1 and not policy.prompt_as_list else list(rendered),
        "temperature": temperature,
        "top_p": top_p,
        "max_tokens": max_tokens,
    }
    if policy.seed is not None:
        body["seed"] = policy.seed
    return body


def completions_url(base_url: str) -> str:
    """``<base>/v1/completions`` from a base URL (``.../v1`` or already ``.../v1/completions`` accepted)."""
    base = base_url.rstrip("/")
    if base.endswith("/v1/completions"):
        return base
    if base.endswith("/v1"):
        return f"{base}/completions"
    return f"{base}/v1/completions"


def post_completions(base_url: str, body: dict[str, Any], *, count: int, timeout_s: float,
                     transport: JudgeTransport | None = None) -> tuple[list[JudgeReply], float]:
    """One ``/v1/completions`` exchange of ``count`` prompts -> (their replies in prompt order, seconds taken).

    Raises:
        CallFailed: a per-request failure (HTTP error, timeout, an answer outside the completions schema).
        JudgeError: a configuration failure (model not served, credentials refused).
    """
    answer = (transport or shared_transport()).post(completions_url(base_url), body, timeout_s=timeout_s,
                                                    model=body["model"], weight=count)
    return _completion_choices(answer.data, count, int(body["max_tokens"])), answer.elapsed_s


def first_round_failed(replies: Sequence[JudgeReply]) -> bool:
    """True when no reply of a first round is usable and none failed for a reason of its own request (context
    length, rejected, empty, garbled): the judge itself is broken (every request 5xx or timed out), a
    configuration failure rather than rows to fall back on."""
    return bool(replies) and not any(r.ok for r in replies) and not any(r.failure in PER_REQUEST_KINDS
                                                                         for r in replies)


_START_HINT = "start the judge ('trace-repro judge serve') or choose non-judge slices"


def _restore(order: Sequence[int], replies: Sequence[JudgeReply]) -> list[JudgeReply]:
    """Replies given in dispatch ``order`` (positions of the prompts), back in prompt order."""
    out: list[JudgeReply | None] = [None] * len(order)
    for position, reply in zip(order, replies):
        out[position] = reply
    return [r for r in out if r is not None]


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
        raise CallFailed("garbled", f"answered {found} choices for {count} prompts")
    mapped: list[JudgeReply | None] = [None] * count
    for choice in choices:
        index = choice.get("index") if isinstance(choice, dict) else None
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count or mapped[index] is not None:
            raise CallFailed("garbled", f"choice index {index!r} is missing, duplicated or out of range")
        mapped[index] = JudgeReply(str(choice.get("text") or "").strip(), choice.get("finish_reason"),
                                   max_tokens=budget)
    return [m for m in mapped if m is not None]


# -- the one token ladder ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StackPolicy:
    """What differs between upstream's judge client stacks on ``/v1/completions`` (registered by name)."""

    name: str
    prompt_as_list: bool = False  # the body's ``prompt`` is a list even for one prompt
    seed: int | None = None  # the body's ``seed`` (omitted when None)


_STACKS: dict[str, StackPolicy] = {}


def register_stack(policy: StackPolicy) -> StackPolicy:
    """Register ``policy`` under its name (re-registering the same policy is a no-op)."""
    known = _STACKS.setdefault(policy.name, policy)
    if known != policy:
        raise ValueError(f"judge stack {policy.name!r} is already registered with another policy")
    return policy


def stack_policy(name: str) -> StackPolicy:
    """The registered stack ``name``.

    Raises:
        KeyError: no stack of that name is registered.
    """
    return _STACKS[name]


#: Upstream's persistent client (direct and MME routes): scalar prompt for a batch of one, no seed.
PERSISTENT = register_stack(StackPolicy("persistent"))


@dataclass(frozen=True)
class Rung:
    """One prompt's attempt on one rung: the budget, the reply, and why it did not resolve (None: it did)."""

    number: int
    budget: int
    reply: JudgeReply
    problem: str | None


def climb_ladder(
    ask: Callable[[int, int, Sequence[int]], Sequence[JudgeReply]],
    count: int,
    limits: Sequence[int],
    *,
    check: Callable[[int, int, JudgeReply], str | None],
) -> list[list[Rung]]:
    """Upstream's token ladder, for every stack: ask the unresolved prompts at each budget of ``limits`` in turn
    (``ask(rung, budget, indices)`` answers one reply per index, in order) until ``check(rung, index, reply)``
    accepts (returns None). Returns each prompt's rungs; a prompt whose last rung has a problem is unresolved.
    """
    ladders: list[list[Rung]] = [[] for _ in range(count)]
    pending = list(range(count))
    for number, budget in enumerate(limits):
        if not pending:
            break
        unresolved = []
        for index, reply in zip(pending, ask(number, budget, pending)):
            problem = check(number, index, reply)
            ladders[index].append(Rung(number, budget, reply, problem))
            if problem is not None:
                unresolved.append(index)
        pending = unresolved
    return ladders
