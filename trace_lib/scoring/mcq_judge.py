"""VLMEvalKit's MCQ judge loop (``vlmeval/dataset/utils/multiple_choice.py:extract_answer_from_item``).

Per row: the option inferred from the prediction (:func:`~trace_lib.extraction.choices.can_infer`), else up to three
official-route judge rounds on :func:`~trace_lib.extraction.choices.build_judge_prompt`, else the fallback. The
prompt and the inference are pure extraction; this module makes the judge calls.

Quirk reproduced on purpose: after three unusable judge replies upstream draws ``random.choice(letters + ['Z'])``
unseeded; here :func:`trace_lib.scoring.fallback.deterministic_choice` seeded by (benchmark, row index, decoding
seed) draws, and the row is marked ``fallback``.

Deviation: upstream silently switches to exact matching when its judge health probe fails; here a judge whose
whole first round fails at the transport level raises :class:`~trace_lib.errors.JudgeError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from trace_lib.errors import InputError, JudgeError
from trace_lib.extraction.choices import API_FAIL_MARKER, build_judge_prompt, build_option_str, can_infer
from trace_lib.scoring.fallback import deterministic_choice
from trace_lib.scoring.judge import Judge, first_round_failed

#: Judge rounds per row before the random fallback (``extract_answer_from_item``: ``retry = 3``).
JUDGE_ROUNDS = 3
#: The judge request settings of the official route (campaign ``_judge_kwargs``).
JUDGE_MAX_TOKENS = 256
JUDGE_TEMPERATURE = 0  # the int VLMEvalKit's wrapper sends (judge_kwargs "temperature": 0)


def chat_rounds(
    judge: Judge,
    prompts: Sequence[str],
    pending: Sequence[int],
    accept: Callable[[int, str], Any],
    *,
    benchmark: str,
    rounds: int = JUDGE_ROUNDS,
) -> tuple[dict[int, Any], dict[int, list[str]]]:
    """Upstream's official-route judge retry (``extract_answer_from_item``, EASI's ``call_llm_extract``): ask the
    ``pending`` prompts, re-ask those whose reply ``accept(position, text)`` maps to None, ``rounds`` times at most.
    Returns the accepted values and every prompt's replies, by position.

    Raises:
        JudgeError: the whole first round failed for the judge's own reasons (:func:`first_round_failed`).
    """
    done: dict[int, Any] = {}
    replies: dict[int, list[str]] = {pos: [] for pos in pending}
    waiting = list(pending)
    for round_no in range(rounds):
        if not waiting:
            break
        answers = judge.chat([prompts[p] for p in waiting], max_tokens=JUDGE_MAX_TOKENS, temperature=JUDGE_TEMPERATURE)
        if round_no == 0 and first_round_failed(answers):
            raise JudgeError(f"{benchmark}: every judge request failed", field="--judge-url",
                             hint="every request answered 5xx or timed out; check the judge's log")
        still = []
        for pos, answer in zip(waiting, answers):
            replies[pos].append(answer.text)
            value = accept(pos, answer.text)
            if value is None:
                still.append(pos)
            else:
                done[pos] = value
        waiting = still
    return done, replies


@dataclass
class McqItem:
    """One evaluation-table row for the MCQ matcher: identity, judge-prompt question, prediction, choices."""

    index: Any
    question: Any
    prediction: str  # already ``str()`` of the workbook cell
    choices: dict[str, Any]  # ``build_choices`` of the workbook row (mutated by ``can_infer_text``)


@dataclass(frozen=True)
class McqOption:
    """The option a row resolved to and how (``prefetch``, ``judge``, ``exact_matching``, ``fallback``)."""

    option: str
    method: str
    judge_calls: int = 0
    fallback: bool = False
    judge_replies: tuple[str, ...] = ()


def extract_options(
    items: Sequence[McqItem],
    *,
    judge: Judge | None,
    use_judge: bool,
    benchmark: str,
    seed: int,
    dataset: str | None = None,
) -> list[McqOption]:
    """``extract_answer_from_item`` for every item: prefetch, then up to three judge rounds, then fallback.

    ``use_judge=False`` is upstream's ``exact_matching`` policy (no inference -> ``Z``).

    Raises:
        JudgeError: a row needs the judge and ``judge`` is None, or the judge's first round failed entirely.
        InputError: a question is not text, or ``Z`` is itself an option when the fallback is needed.
    """
    prompts = [
        build_judge_prompt(item.question, build_option_str(item.choices), item.prediction, dataset=dataset)
        for item in items
    ]
    results: list[McqOption | None] = [None] * len(items)
    pending: list[int] = []
    for pos, item in enumerate(items):
        option = can_infer(item.prediction, item.choices)
        if option:
            results[pos] = McqOption(str(option), "prefetch")
        elif not use_judge:
            results[pos] = McqOption("Z", "exact_matching")
        else:
            pending.append(pos)
    if pending and judge is None:
        raise JudgeError(f"{benchmark}: {len(pending)} rows need the Qwen3-32B judge and none is configured",
                         field="--judge-url", hint="start the judge and pass --judge-url")

    def accept(pos: int, text: str) -> str | None:
        option = None if API_FAIL_MARKER in text else can_infer(text, items[pos].choices)
        return str(option) if option else None

    options, replies = chat_rounds(judge, prompts, pending, accept, benchmark=benchmark)  # type: ignore[arg-type]
    for pos, option in options.items():
        results[pos] = McqOption(option, "judge", len(replies[pos]), judge_replies=tuple(replies[pos]))
    pending = [pos for pos in pending if pos not in options]
    for pos in pending:
        item = items[pos]
        if "Z" in item.choices:
            raise InputError("option Z exists, so upstream's random fallback has nothing to draw from",
                             field=f"rows[{item.index}]")
        letters = [*item.choices, "Z"]
        # quirk: upstream draws random.choice unseeded here; the stand-in is seeded by (benchmark, index, seed)
        drawn = deterministic_choice(letters, benchmark=benchmark, index=item.index, seed=seed)
        results[pos] = McqOption(drawn, "fallback", len(replies[pos]), fallback=True,
                                 judge_replies=tuple(replies[pos]))
    return [r for r in results if r is not None]


def extract_answer_from_item(
    item: McqItem,
    judge: Judge | None,
    *,
    benchmark: str,
    seed: int,
    dataset: str | None = None,
    use_judge: bool = True,
) -> McqOption:
    """One row through :func:`extract_options` (upstream's ``extract_answer_from_item``)."""
    return extract_options([item], judge=judge, use_judge=use_judge, benchmark=benchmark, seed=seed,
                           dataset=dataset)[0]
