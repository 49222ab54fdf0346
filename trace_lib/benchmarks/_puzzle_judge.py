"""The persistent-judge request schedule of TRACE's direct (LogicVista) and dedicated (MME-Reasoning) routes.

Mirrors ``maveryn/trace@rlvr:rlvr/evaluation/scripts/run_external_benchmark_score_queue.py``
(``PersistentJudge.run_cached`` with ``return_unresolved=True``, ``_judge_retry_token_limits``,
``_judge_cache_entry_needs_retry``) and the five-temperature retry loops of ``run_logicvista_local_judge`` /
``run_mme_reasoning_eval.py``: within one temperature an empty (or, when enabled, ``length``-truncated) reply is
re-asked with a doubling token budget (:func:`trace_lib.scoring.judge.complete_with_ladder`); a row still unusable
after the ladder keeps its last reply, and the caller's acceptance check decides whether the next temperature is
tried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Mapping, Sequence

from trace_lib.errors import InputError, JudgeError
from trace_lib.scoring.judge import LENGTH_FINISH_REASONS, Judge, JudgeReply, complete_with_ladder, retry_token_limits

#: VLMEvalKit's official retry temperatures (``temperature = i * 0.5`` for five tries).
RETRY_TEMPERATURES = (0.0, 0.5, 1.0, 1.5, 2.0)


def check_judged_slice(rows: Sequence[Any], responses: Sequence[Any], judge: Judge | None, *, benchmark: str,
                       name: str) -> None:
    """Refuse, in this order, a slice without a judge (``name`` extracts every answer with it), without rows, or
    whose responses do not align with its rows.

    Raises:
        JudgeError: ``judge`` is None.
        InputError: no rows (field ``benchmark``), or ``len(responses) != len(rows)``.
    """
    if judge is None:
        raise JudgeError(f"{name} extracts every answer with the Qwen3-32B judge; none is configured",
                         field="--judge-url", hint="start the judge and pass --judge-url")
    if not rows:
        raise InputError("empty slice: no dataset rows to score", field=benchmark)
    if len(rows) != len(responses):
        raise InputError("responses do not align with dataset rows", field="responses", expected=len(rows),
                         found=len(responses))


def is_truncated(reply: JudgeReply) -> bool:
    """Whether the reply stopped on its token budget."""
    return str(reply.finish_reason or "").strip().lower() in LENGTH_FINISH_REASONS


def _requests(reply: JudgeReply, requested: int) -> int:
    """How many ladder steps a row took: the position of the budget its kept reply came from, plus one."""
    ladder = retry_token_limits(requested)
    return ladder.index(reply.max_tokens) + 1 if reply.max_tokens in ladder else 1


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
        budget = max_tokens(attempt)
        replies = complete_with_ladder(judge, [prompts[k] for k in pending], max_tokens=budget,
                                       temperature=temperature, top_p=1.0, retry_on_length=retry_on_length,
                                       allow_unresolved=True)
        if len(replies) != len(pending):
            raise JudgeError("judge answered a different number of prompts", expected=len(pending), found=len(replies))
        still = []
        for key, reply in zip(pending, replies):
            result.requests[key] += _requests(reply, budget)
            if accept(key, reply):
                result.accepted[key] = (reply, attempt)
                result.unresolved.pop(key, None)
            else:
                result.unresolved[key] = reply
                still.append(key)
        pending = still
    return result
