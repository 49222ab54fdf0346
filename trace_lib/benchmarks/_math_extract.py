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
from typing import Any, Callable, Mapping, Sequence

from trace_lib.benchmarks._math_workbook import Table, prediction_workbook, records, reread
from trace_lib.benchmarks.protocol import Row, RowScore, ScoringContext, SliceScore
from trace_lib.errors import InputError, JudgeError, TraceReproError
from trace_lib.extraction.workbook import isna, roundtrip_column
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
#: The five in-context cases (question, choices line or None, model response, extracted answer) of both judge
#: prompts; only the hints above them differ (``MC_HINT`` above the last one in both).
EXAMPLE_CASES: tuple[tuple[str, "str | None", str, str], ...] = (
    ("Which number is missing?", None, "The number missing in the sequence is 14.", "14"),
    (
        "What is the fraction of females facing the camera?",
        None,
        "The fraction of females facing the camera is 0.6,\n"
        "which means that six out of ten females in the group are facing the camera.",
        "0.6",
    ),
    (
        "How much money does Luca need to buy a sour apple candy and a butter-scotch candy? (Unit: $)",
        None,
        "Luca needs $1.45 to buy a sour apple candy and a butterscotch candy.",
        "1.45",
    ),
    (
        "Between which two years does the line graph saw its maximum peak?",
        None,
        "The line graph saw its maximum peak between 2007 and 2008.",
        "[2007, 2008]",
    ),
    ("What fraction of the shape is blue?", "Choices: (A) 3/11 (B) 8/11 (C) 6/11 (D) 3/5",
     "The correct answer is (B) 8/11.", "B"),
)
MC_HINT = "Hint: Please answer the question and provide the correct option letter, e.g., A, B, C, D, at the end."


def render_examples(hints: tuple[str, ...]) -> str:
    """The task description and the in-context examples (``hints[i]`` above :data:`EXAMPLE_CASES` ``[i]``), each
    example followed by a blank line."""
    if len(hints) != len(EXAMPLE_CASES):
        raise ValueError(f"{len(hints)} hints for {len(EXAMPLE_CASES)} in-context examples")
    parts = [EXTRACT_TASK]
    for hint, (question, choices, response, extracted) in zip(hints, EXAMPLE_CASES):
        choice_block = f"{choices}\n\n" if choices else ""
        parts.append(
            f"\n{hint}\n\nQuestion: {question}\n\n{choice_block}Model response: {response}\n\n"
            f"Extracted answer: {extracted}\n\n"
        )
    return "".join(parts)


def judge_prompt(preamble: str, row: Mapping[str, Any]) -> str:
    """``build_math*_gpt4_prompt``: ``preamble``, the question, ``Model respone: `` + prediction +
    ``Extracted answer:`` (no separator).

    Raises:
        TypeError: the question cell is not text.
    """
    question = row["question"]
    if not isinstance(question, str):
        raise TypeError(f"question is {type(question).__name__}, not text")
    return f"{preamble}{question}\nModel respone: {row['prediction']}Extracted answer:"


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


def score_slice(
    rows: Sequence[Row],
    responses: Sequence[str | None],
    ctx: ScoringContext,
    *,
    benchmark: str,
    post_check: Callable[..., Any],
    judge_prompt: Callable[[dict[str, Any]], str],
    score_row: Callable[[dict[str, Any]], bool],
    groups: Callable[[dict[str, Any]], list[Any]],
    detail: Callable[[dict[str, Any]], dict[str, Any]],
    aggregate: Callable[[int, int], float],
) -> SliceScore:
    """The whole route over a slice: prefetch with ``post_check(row, prefetch=True)``, judge the rest, the judged
    workbook, ``score_row`` of every judged row, then ``Overall`` and per-group accuracy in percent (``groups(row)``
    names a row's groups, ``str()`` of each) and ``aggregate(hit, total)`` as the reported number; each record's
    detail is its log and ``res`` plus ``detail(row)``.

    Raises:
        JudgeError: a row needs the judge and ``ctx.judge`` is None, or the judge output stays empty.
        InputError: no rows, or a row makes upstream's scorer abort.
    """
    if not rows:
        raise InputError("no rows to score", field=benchmark)
    table = prediction_workbook(rows, responses)
    extracted = extract(records(table), prefetch=lambda r: post_check(r, prefetch=True), judge_prompt=judge_prompt,
                        judge=ctx.judge, benchmark=benchmark)
    judged = judged_table(table, extracted, benchmark=benchmark)
    hits = [score_row(row) for row in judged]
    hit = sum(hits)
    metrics: dict[str, float] = {"Overall": hit / len(judged) * 100}
    tot: dict[str, int] = {}
    good: dict[str, int] = {}
    for row, ok in zip(judged, hits):
        for name in groups(row):
            key = str(name)
            tot[key] = tot.get(key, 0) + 1
            good[key] = good.get(key, 0) + int(ok)
    metrics.update({name: good[name] / tot[name] * 100 for name in tot if name != "Overall"})
    out = tuple(
        RowScore(
            index=str(row["index"]),
            extracted=None if isna(row["res"]) else row["res"],
            score=float(ok),
            judge_calls=calls,
            detail={"log": log, "res": row["res"], **detail(row)},
        )
        for row, ok, log, calls in zip(judged, hits, extracted.log, extracted.judge_calls)
    )
    prefetched = sum(1 for log in extracted.log if log == PREFETCH_LOG)
    return SliceScore(
        benchmark=benchmark,
        score=aggregate(hit, len(judged)),
        rows=len(judged),
        records=out,
        metrics=metrics,
        counts={"hit": hit, "total": len(judged), "prefetched": prefetched, "judged": len(judged) - prefetched},
    )


def direct_percent(acc: float) -> float:
    """``_build_summary`` then ``_primary_score``: the ``auto`` percent rule is applied twice to the table's
    ``acc`` (so an accuracy of at most 1 % is multiplied by 100; one at most 0.01 % by 10,000)."""
    return scale_value(scale_value(acc, "auto"), "auto")
