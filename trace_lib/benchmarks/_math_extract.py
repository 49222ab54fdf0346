"""The direct route's "official prefetch, else Qwen3-32B answer extraction" pipeline (MathVision, MathVista).

Mirrors ``maveryn/trace@rlvr:rlvr/evaluation/vlmevalkit_extensions/batched_vlmevalkit_qwen3vl.py``
(``run_mathv_local_judge`` / ``run_mathvista_local_judge``) with the judge of
``rlvr/evaluation/scripts/run_external_benchmark_score_queue.py`` (``_run_local_math_like``: persistent client,
``max_tokens`` 128, temperature 0, top_p 1, no retry on length, non-empty validator) and its
``_validate_math_like_judged_table``; the benchmark supplies ``post_check`` and the judge prompt.

Steps: prefetch on the prediction workbook row (any exception = no prefetch; a falsy prefetch such as ``0`` also
sends the row to the judge); judge the rest; write ``res``/``log`` into the judged workbook and read it back;
refuse an empty ``res``; score every judged row with ``post_check(prefetch=False)``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from trace_lib.benchmarks._math_workbook import Table, records, reread
from trace_lib.errors import InputError, JudgeError, TraceReproError
from trace_lib.extraction.workbook import roundtrip_column
from trace_lib.scoring.judge import Judge, complete_with_ladder, retry_token_limits
from trace_lib.scoring.percent import scale_value

#: Persistent-client settings of the math extraction routes (``run_*_local_judge``: ``max_tokens=128``).
EXTRACT_MAX_TOKENS = 128
EXTRACT_TEMPERATURE = 0.0
EXTRACT_TOP_P = 1.0
PREFETCH_LOG = "Prefetch succeed"
JUDGED_LOG = "Succeed"


#: The judge prompt's task description (``build_math*_gpt4_prompt``), shared by MathVision and MathVista.
EXTRACT_TASK = (
    "\nPlease read the following example.\n"
    "Then extract the answer from the model response and type it at the end of the prompt.\n\n"
)
Example = tuple[str, str, "str | None", str, str]


def render_examples(examples: tuple[Example, ...]) -> str:
    """The task description and in-context examples (hint, question, choices line or None, model response,
    extracted answer), each example followed by a blank line."""
    parts = [EXTRACT_TASK]
    for hint, question, choices, response, extracted in examples:
        choice_block = f"{choices}\n\n" if choices else ""
        parts.append(
            f"\n{hint}\n\nQuestion: {question}\n\n{choice_block}Model response: {response}\n\n"
            f"Extracted answer: {extracted}\n\n"
        )
    return "".join(parts)


def parse_choices(cell: Any) -> list[Any]:
    """``eval(choices)`` of a Python list literal; anything else raises TypeError (never ValueError, which
    ``post_check`` would swallow; upstream's ``eval`` raises SyntaxError/NameError/TypeError there)."""
    if not isinstance(cell, str):
        raise TypeError(f"choices cell is {type(cell).__name__}, not a list literal")
    try:
        return ast.literal_eval(cell)
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise TypeError(f"choices cell is not a Python literal: {exc}") from None


def nonempty(text: str) -> bool:
    """``_nonempty_judge_output``: the extraction validator."""
    return bool(str(text or "").strip())


@dataclass(frozen=True)
class Extracted:
    """Per-row extraction: the ``res`` cell as written, its log, and the judge requests it took."""

    res: list[Any]
    log: list[str]
    judge_calls: list[int]
    prompts: list[str | None]  # the judge prompt of judged rows (None for prefetched rows)


def extract(
    rows: Sequence[dict[str, Any]],
    *,
    prefetch: Callable[[dict[str, Any]], Any],
    judge_prompt: Callable[[dict[str, Any]], str],
    judge: Judge | None,
    benchmark: str,
) -> Extracted:
    """Prefetch every row, then ask the judge for the others (one temperature-0 call, ladder on empty output).

    Raises:
        JudgeError: a row needs the judge and none is configured, or its output stays empty up to 1024 tokens.
        InputError: a judge prompt cannot be built for a row (upstream's runner raises there).
    """
    res: list[Any] = []
    log: list[str] = []
    prompts: list[str | None] = []
    pending: list[int] = []
    for pos, row in enumerate(rows):
        try:
            fetched = prefetch(row)
        except TraceReproError:
            raise  # a setup error (e.g. a missing optional dependency), not "no prefetch"
        except Exception:  # noqa: BLE001 - the runner wraps post_check(prefetch=True) in `except Exception`
            fetched = False
        if fetched:  # quirk: a falsy prefetch (0, 0.0) counts as "not prefetched" and goes to the judge
            res.append(fetched)
            log.append(PREFETCH_LOG)
            prompts.append(None)
        else:
            try:
                prompts.append(judge_prompt(row))
            except (TypeError, KeyError) as exc:
                raise InputError(
                    f"the judge prompt cannot be built ({exc.__class__.__name__}: {exc}); upstream's runner aborts",
                    field=f"rows[{row.get('index')}]",
                ) from None
            res.append("")
            log.append("Pending local judge")
            pending.append(pos)
    calls = [0] * len(rows)
    if pending:
        if judge is None:
            raise JudgeError(
                f"{benchmark}: {len(pending)} rows need the Qwen3-32B extraction judge and none is configured",
                field="--judge-url",
                hint="serve Qwen3-32B and pass --judge-url (TRACE_JUDGE_URL)",
            )
        ladder = retry_token_limits(EXTRACT_MAX_TOKENS)
        replies = complete_with_ladder(
            judge,
            [prompts[p] for p in pending],  # type: ignore[misc]
            max_tokens=EXTRACT_MAX_TOKENS,
            temperature=EXTRACT_TEMPERATURE,
            top_p=EXTRACT_TOP_P,
            retry_on_length=False,  # an output cut at 128 tokens is accepted as is
            validator=nonempty,
        )
        for pos, reply in zip(pending, replies):
            res[pos] = str(reply.text).strip()
            log[pos] = JUDGED_LOG if res[pos] else "Local judge empty"
            calls[pos] = ladder.index(reply.max_tokens) + 1 if reply.max_tokens in ladder else 1
    return Extracted(res, log, calls, prompts)


def judged_table(table: Table, extracted: Extracted, *, benchmark: str) -> list[dict[str, Any]]:
    """The judged workbook (prediction workbook + ``res`` + ``log``) as ``*_acc`` reads it back.

    Raises:
        JudgeError: a ``res`` cell is empty when read with ``keep_default_na=False``
            (``_validate_math_like_judged_table``).
    """
    literal = roundtrip_column(list(extracted.res), keep_default_na=False)
    empty = [i for i, cell in enumerate(literal) if not str(cell).strip()]
    if empty:
        index = table["index"][empty[0]] if "index" in table else empty[0]
        raise JudgeError(
            f"{benchmark} judge produced {len(empty)} empty extractions (first index {index!r})",
            hint="upstream fails the slice here",
        )
    judged = dict(table)
    judged["res"] = list(extracted.res)
    judged["log"] = list(extracted.log)
    return records(reread(judged))


def direct_percent(acc: float) -> float:
    """``_build_summary`` then ``_primary_score``: the ``auto`` percent rule is applied twice to the table's
    ``acc`` (so an accuracy of at most 1 % is multiplied by 100; one at most 0.01 % by 10,000)."""
    return scale_value(scale_value(acc, "auto"), "auto")
