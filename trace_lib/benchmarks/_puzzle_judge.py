"""The persistent-judge request schedule of TRACE's direct (LogicVista) and dedicated (MME-Reasoning) routes.

Mirrors ``maveryn/trace@rlvr:rlvr/evaluation/scripts/run_external_benchmark_score_queue.py``
(``PersistentJudge.run_cached`` with ``return_unresolved=True``, ``_judge_retry_token_limits``,
``_judge_cache_entry_needs_retry``) and the five-temperature retry loops of ``run_logicvista_local_judge`` /
``run_mme_reasoning_eval.py``: within one temperature an empty (or, when enabled, ``length``-truncated) reply is
re-asked with a doubling token budget; a row still unusable after the ladder keeps its last reply, and the caller's
acceptance check decides whether the next temperature is tried. Requests go through :meth:`Judge.complete`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable, Mapping, Sequence

from trace_lib.errors import JudgeError
from trace_lib.scoring.judge import Judge, JudgeReply

#: VLMEvalKit's official retry temperatures (``temperature = i * 0.5`` for five tries).
RETRY_TEMPERATURES = (0.0, 0.5, 1.0, 1.5, 2.0)
#: The persistent client never asks for fewer tokens than this (``max(128, requested)``).
MIN_TOKENS = 128
_LENGTH_REASONS = frozenset({"length", "max_tokens"})


def token_ladder(requested: int) -> list[int]:
    """``_judge_retry_token_limits``: ``max(128, requested)`` doubled up to ``max(1024, that)``."""
    limit = max(MIN_TOKENS, int(requested))
    ceiling = max(1024, limit)
    limits = [limit]
    while limits[-1] < ceiling:
        limits.append(min(ceiling, limits[-1] * 2))
    return limits


def is_truncated(reply: JudgeReply) -> bool:
    """Whether the reply stopped on its token budget."""
    return str(reply.finish_reason or "").strip().lower() in _LENGTH_REASONS


@dataclass(frozen=True)
class LadderReply:
    """The reply a row kept after one temperature's token ladder, and how many requests it took."""

    reply: JudgeReply
    requests: int


def ask_with_ladder(
    judge: Judge, prompts: Sequence[str], *, max_tokens: int, temperature: float, retry_on_length: bool = True
) -> list[LadderReply]:
    """One temperature attempt for every prompt; an empty (or truncated) reply is re-asked with more tokens."""
    last: list[JudgeReply | None] = [None] * len(prompts)
    requests = [0] * len(prompts)
    active = list(range(len(prompts)))
    for limit in token_ladder(max_tokens):
        if not active:
            break
        replies = judge.complete([prompts[i] for i in active], max_tokens=limit, temperature=temperature, top_p=1.0)
        if len(replies) != len(active):
            raise JudgeError("judge answered a different number of prompts", expected=len(active), found=len(replies))
        still = []
        for position, reply in zip(active, replies):
            last[position] = reply
            requests[position] += 1
            if not reply.text.strip() or (retry_on_length and is_truncated(reply)):
                still.append(position)
        active = still
    return [LadderReply(reply, count) for reply, count in zip(last, requests)]  # type: ignore[arg-type]


@dataclass
class ScheduleResult:
    """Accepted replies by key (with the 0-based temperature attempt), the keys never accepted, request counts."""

    accepted: dict[Hashable, tuple[JudgeReply, int]] = field(default_factory=dict)
    unresolved: dict[Hashable, JudgeReply] = field(default_factory=dict)
    requests: dict[Hashable, int] = field(default_factory=dict)


def run_temperature_schedule(
    judge: Judge,
    prompts: Mapping[Hashable, str],
    *,
    max_tokens: Callable[[int], int],
    accept: Callable[[Hashable, JudgeReply], bool],
    retry_on_length: bool = True,
    temperatures: Sequence[float] = RETRY_TEMPERATURES,
) -> ScheduleResult:
    """Ask every prompt at each temperature in turn until ``accept(key, reply)`` takes it; keep the first accepted."""
    result = ScheduleResult(requests={key: 0 for key in prompts})
    pending = list(prompts)
    for attempt, temperature in enumerate(temperatures):
        if not pending:
            break
        answers = ask_with_ladder(judge, [prompts[k] for k in pending], max_tokens=max_tokens(attempt),
                                  temperature=temperature, retry_on_length=retry_on_length)
        still = []
        for key, answer in zip(pending, answers):
            result.requests[key] += answer.requests
            if accept(key, answer.reply):
                result.accepted[key] = (answer.reply, attempt)
                result.unresolved.pop(key, None)
            else:
                result.unresolved[key] = answer.reply
                still.append(key)
        pending = still
    return result
