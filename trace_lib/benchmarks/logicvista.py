"""LogicVista: Qwen3-32B option extraction on every row, TRACE's label normalisation, exact multiset match.

Mirrors the direct route ``maveryn/trace@rlvr:rlvr/evaluation/scripts/run_external_benchmark_score_queue.py``
(``_run_logicvista_judge_with_official_retries``, ``_logicvista_label_tokens``, ``_normalize_logicvista_judgement``,
``_normalize_logicvista_option_summary``) over ``VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/logicvista.py``
(``build_prompt_logicvista``, ``evaluate_logicvista``).

Quirks reproduced on purpose:
- judge extraction on every row (no rule-based prefetch), five temperatures 0..2, 16 tokens -> 128 effective,
  an empty reply re-asked at 256/512/1024 tokens; a truncated reply is *not* re-asked within a temperature;
- a single terminal period is dropped; separators ``[\\s,;/]`` removed; ``[A-KZ]+`` or ``[1-9]+`` or invalid;
- numeric judge labels map to letters (1 -> A) and vice versa when the gold uses the other kind;
- exact multiset comparison (order free, duplicates count: AA != A);
- ``Overall`` passes through ``DataFrame.to_json`` (10 decimals) before it is reported.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks._puzzle_judge import check_judged_slice, run_temperature_schedule
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError, JudgeError
from trace_lib.extraction.choices import START_END_EXAMPLES
from trace_lib.extraction.workbook import roundtrip_column, roundtrip_rows

KEY = "logicvista"
#: Requested extraction budget (``run_logicvista_local_judge``: ``max_tokens=16``; the client lifts it to 128).
EXTRACT_MAX_TOKENS = 16
SKILLS = ("inductive", "deductive", "numerical", "spatial", "mechanical")
#: ``pandas.DataFrame.to_json`` default ``double_precision``.
JSON_DECIMALS = 10

#: ``build_prompt_logicvista`` (exact; ``{}`` slots: question, then ``str(prediction)``).
JUDGE_TEMPLATE = (
    "You are a information extractor that extracts multiple choice letter answer choices "
    "from a paragraph that contains the answer choice and sometimes explaination of why that "
    "choice is correct to the given question.\n"
    "What letter did the following answer choose? If the answer did not select a letter answer choice, "
    "first try to infer the answer based off the given choices.\n"
    "If it does not seem like the given answer corresponds to an answer choice OR if there is no selected answer, "
    "please just respond with Z.\n"
    "Make sure you answer with ONLY the letters chosen.\n"
) + START_END_EXAMPLES + (
    "Example 3: \n"
    "Question: <start>\nWhich figure is a rotation of the object?\n<end>\n"
    "Answer: <start>\nThe figure on the right, labeled \"D,\" is a rotation of the object shown in the top left "
    "corner.\n<end>\nYour output: D\n"
    "Example 4: \n"
    "Question: <start>\nWhich of the boxes comes next in the sequence? Select from A-E\n<end>\n"
    "Answer: <start>\nThe sequence of the boxes is A, B, C, D, E.\n<end>\nYour output: ABCDE\n"
    "Example 5: \n"
    "Question: <start>\n{}\n<end>\nAnswer: <start>\n{}\n<end>\nYour output: "
)
_SEPARATORS = re.compile(r"[\s,;/]+")
_LETTER_LABELS = re.compile(r"[A-KZ]+")
_NUMBER_LABELS = re.compile(r"[1-9]+")


def load(path: Path) -> list[Row]:
    """The LogicVista TSV rows (``question`` with embedded options, ``answer`` labels, ``skill``)."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Every image, then the question verbatim (``ImageBaseDataset.build_prompt``)."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", row["question"])]


def build_judge_prompt(question: Any, prediction: Any) -> str:
    """The extraction prompt for one workbook row (``str()`` of the prediction cell: NaN -> ``nan``)."""
    return JUDGE_TEMPLATE.format(question, str(prediction))


def label_tokens(value: Any) -> tuple[str, list[str]] | None:
    """``_logicvista_label_tokens``: ``("letter"|"number", tokens)``, or None for an invalid label string."""
    text = str(value or "").strip().upper()
    if text.endswith(".") and text.count(".") == 1:
        text = text[:-1].rstrip()  # quirk: only a single terminal period is dropped
    compact = _SEPARATORS.sub("", text)
    if _LETTER_LABELS.fullmatch(compact):
        return "letter", list(compact)
    if _NUMBER_LABELS.fullmatch(compact):
        return "number", list(compact)
    return None


def normalize_judgement(judge_output: Any, answer: Any) -> tuple[str, bool, bool] | None:
    """``_normalize_logicvista_judgement``: (sorted normalised labels, hit, kinds differed), or None if invalid."""
    extracted, target = label_tokens(judge_output), label_tokens(answer)
    if extracted is None or target is None:
        return None
    (got_kind, got), (want_kind, want) = extracted, target
    mapped = got_kind != want_kind
    if mapped and got == ["Z"]:
        tokens = ["Z"]
    elif got_kind == "number" and want_kind == "letter":
        tokens = [chr(ord("A") + int(t) - 1) for t in got]  # quirk: numeric labels -> letters (1 -> A)
    elif got_kind == "letter" and want_kind == "number":
        tokens = ["Z"] if "Z" in got else [str(ord(t) - ord("A") + 1) for t in got]
    else:
        tokens = got
    normalized = "".join(sorted(tokens))
    return normalized, normalized == "".join(sorted(want)), mapped


def aggregate(hits: Sequence[int]) -> float:
    """The reported number: ``Overall`` = hits / rows * 100, rounded to 10 decimals by ``DataFrame.to_json``."""
    return float(round(sum(hits) / len(hits) * 100, JSON_DECIMALS))


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """Judge-extracted option labels compared with gold, ``Overall`` accuracy in percent.

    Raises:
        JudgeError: no judge, or a row's extraction is still malformed after the five temperatures.
        InputError: a gold ``answer`` is not a label string.
    """
    check_judged_slice(rows, responses, ctx.judge, benchmark=KEY, name="LogicVista")
    table = roundtrip_rows(rows, responses, ("question", "answer", "skill"))
    prompts = {pos: build_judge_prompt(cell.get("question"), cell["prediction"]) for pos, cell in enumerate(table)}
    schedule = run_temperature_schedule(
        ctx.judge, prompts, max_tokens=lambda attempt: EXTRACT_MAX_TOKENS,
        accept=lambda _, reply: label_tokens(reply.text) is not None, retry_on_length=False,
    )
    if schedule.unresolved:
        first = sorted(schedule.unresolved)[:10]
        raise JudgeError(
            "LogicVista judge produced malformed option extraction after five official temperature attempts",
            field=f"rows {[str(rows[p]['index']) for p in first]}",
            found=repr(schedule.unresolved[first[0]].text[:80]),
        )
    # quirk: the judged table is written again and read with keep_default_na=False before normalisation
    answers = roundtrip_column([c.get("answer", "") for c in table], keep_default_na=False)
    records = []
    hits = Counter()
    totals = Counter()
    mapped_rows = 0
    for pos, (row, cell, answer) in enumerate(zip(rows, table, answers)):
        reply, attempt = schedule.accepted[pos]
        normalized = normalize_judgement(reply.text, answer)
        if normalized is None:
            raise InputError("gold answer is not an option label", field=f"rows[{row['index']}].answer",
                             found=repr(answer))
        value, hit, mapped = normalized
        mapped_rows += mapped
        skill = cell.get("skill")
        for name in ("Overall", *(s for s in SKILLS if isinstance(skill, str) and s in skill)):
            totals[name] += 1
            hits[name] += hit
        records.append(RowScore(str(row["index"]), value, float(hit), judge_calls=schedule.requests[pos],
                                detail={"judge_output": reply.text, "temperature_attempt": attempt,
                                        "label_kind_mapped": mapped}))
    accuracy = {name: hits[name] / totals[name] * 100 for name in ("Overall", *SKILLS) if totals[name]}
    return SliceScore(
        benchmark=KEY,
        score=aggregate([int(r.score) for r in records]),  # quirk: to_json rounds Overall to 10 decimals
        rows=len(rows),
        records=tuple(records),
        metrics={f"acc/{name}": value for name, value in accuracy.items()},
        counts={"correct": hits["Overall"], "total": totals["Overall"], "label_kind_mapped": mapped_rows,
                "temperature_retries": sum(1 for _, attempt in schedule.accepted.values() if attempt > 0)},
    )


PROTOCOL = Protocol(
    key=KEY,
    upstream="maveryn/trace@rlvr:rlvr/evaluation/scripts/run_external_benchmark_score_queue.py"
             " (logicvista_local_judge)",
    version="logicvista-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="always",
    quirks=(
        "judge extraction on every row: temperatures 0,0.5,1,1.5,2; 16 tokens -> 128; empty re-asked to 1024; "
        "length not re-asked",
        "label parse: single terminal period dropped, [\\s,;/] removed, [A-KZ]+ or [1-9]+, else invalid (retry)",
        "numeric judge labels map to letters (1 -> A) and letters to numbers when gold uses the other kind",
        "exact multiset match of sorted labels (AA != A, no partial credit)",
        "Overall rounded to 10 decimals by DataFrame.to_json",
        "invalid extraction after T=2.0 fails the slice (JudgeError), never a silent zero",
    ),
)
