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
from typing import Any, Sequence

from trace_lib.errors import InputError, JudgeError
from trace_lib.extraction.choices import API_FAIL_MARKER, build_judge_prompt, build_option_str, can_infer
from trace_lib.scoring.fallback import deterministic_choice
from trace_lib.scoring.judge import Judge, first_round_failed

#: Judge rounds per row before the random fallback (``extract_answer_from_item``: ``retry = 3``).
JUDGE_ROUNDS = 3
#: The judge request settings of the official route (campaign ``_judge_kwargs``).
JUDGE_MAX_TOKENS = 256
JUDGE_TEMPERATURE = 0  # the int VLMEvalKit's wrapper sends (judge_kwargs "temperature": 0)


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
    calls = {pos: 0 for pos in pending}
    replies: dict[int, list[str]] = {pos: [] for pos in pending}
    for round_no in range(JUDGE_ROUNDS):
        if not pending:
            break
        answers = judge.chat([prompts[p] for p in pending], max_tokens=JUDGE_MAX_TOKENS,  # type: ignore[union-attr]
                             temperature=JUDGE_TEMPERATURE)
        if round_no == 0 and first_round_failed(answers):
            raise JudgeError(f"{benchmark}: every judge request failed", field="--judge-url",
                             hint="every request answered 5xx or timed out; check the judge's log")
        still = []
        for pos, answer in zip(pending, answers):
            calls[pos] += 1
            replies[pos].append(answer.text)
            if API_FAIL_MARKER not in answer.text:
                option = can_infer(answer.text, items[pos].choices)
                if option:
                    results[pos] = McqOption(str(option), "judge", calls[pos], judge_replies=tuple(replies[pos]))
                    continue
            still.append(pos)
        pending = still
    for pos in pending:
        item = items[pos]
        if "Z" in item.choices:
            raise InputError("option Z exists, so upstream's random fallback has nothing to draw from",
                             field=f"rows[{item.index}]")
        letters = [*item.choices, "Z"]
        # quirk: upstream draws random.choice unseeded here; the stand-in is seeded by (benchmark, index, seed)
        drawn = deterministic_choice(letters, benchmark=benchmark, index=item.index, seed=seed)
        results[pos] = McqOption(drawn, "fallback", calls[pos], fallback=True, judge_replies=tuple(replies[pos]))
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
