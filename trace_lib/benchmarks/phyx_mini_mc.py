"""PhyX mini MC (``phyx_mini_mc``): images + the question verbatim; TRACE's letter extractor, then PhyX's MC match.

Upstream:
``maveryn/trace@rlvr:rlvr/evaluation/scripts/run_official_vlmevalkit_saved_score.py:_adapt_phyx_option_prediction``
(``run_external_benchmark_score_queue._extract_braced_answer`` / ``_extract_option_letter``, choices ``ABCD``), then
``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_vqa.py:PhyX.evaluate`` (``valid_type='STR'``, path contains ``_MC``)
with ``vlmeval/dataset/utils/phyx.py:PhyX_process_line_MC``. No judge is called (STR mode is rule-only).

Quirks reproduced on purpose:

- the adapter reads the staged workbook: an empty response is NaN and reads as ``'nan'``; a falsy cell as ``''``;
- the braced candidate is the content of the *last* ``{...}`` group without nested braces (``\\frac{1}{2}`` -> 2,
  JSON objects -> their inner text); else the last whole-word yes/no; else the first line after the *first*
  ``answer``/``final answer`` marker;
- the keyword rule returns the *first* hit (``Option A: ... the answer is C`` -> A), case-insensitively;
- the fallback is the last standalone letter a-d in any case, so the article "a" counts as option A;
- ``Answer: <L>`` / ``UNRESOLVED`` is written back, read again and matched by ``PhyX_process_line_MC``
  (first ``answer``/``option``/``correct`` keyword followed by A-D, then ``[ABCD]:``, then ``GT:``/``GT**``/``**GT``);
- ``Overall`` is the mean over all rows (a fraction; ``auto`` multiplies by 100).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.extraction.workbook import official_workbook, roundtrip_table
from trace_lib.scoring.percent import MetricTable, flatten_summary_metrics, mean, primary_score

KEY = "phyx_mini_mc"
ALIAS = "PhyX_mini_MC"
#: ``PhyX_process_line_MC`` treats this prediction as an API failure (``utils/phyx.py:FAIL_MSG``).
PHYX_FAIL_MSG = "Failed to obtain answer via API."
UNRESOLVED = "UNRESOLVED"


def load(path: Path) -> list[Row]:
    """The PhyX_mini_MC TSV rows as ``ImageBaseDataset`` reads them."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """All images of the row, then the question verbatim (``PhyX.build_prompt``; the alias has no ``TL``)."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", row["question"])]


# -- P1: TRACE's single-letter extractor ----------------------------------------------------------------------
def extract_braced_answer(text: Any) -> str:
    """``_extract_braced_answer``: last ``{...}`` group, else last yes/no, else the first answer marker's line."""
    text = str(text or "").strip()
    groups = re.findall(r"\{([^{}]+)\}", text)
    if groups:
        return groups[-1].strip()
    boxed = re.findall(r"\\boxed\{([^{}]+)\}", text)  # unreachable after the brace rule, kept as upstream has it
    if boxed:
        return boxed[-1].strip()
    yes_no = re.findall(r"\b(yes|no)\b", text, flags=re.I)
    if yes_no:
        return yes_no[-1].strip()
    final = list(re.finditer(r"\b(?:final\s+answer|answer)\b\s*[:：]?\s*(.+)", text, flags=re.I | re.S))
    if final:
        # quirk: the greedy DOTALL capture of the first marker swallows the rest, so this is the first marker
        return final[-1].group(1).strip().splitlines()[0].strip()
    return text


def extract_option_letter(text: Any, *, choices: str = "ABCD") -> str:
    """``_extract_option_letter``: one letter of ``choices`` or ``''``."""
    text = str(text or "").strip()
    braced = extract_braced_answer(text)
    patterns = (
        rf"<\s*answer\s*>\s*[:：]?\s*([{choices}])\b",
        rf"\b(?:final\s+answer|answer|option|choice|correct)\b\s*(?:is|:|：)?\s*([{choices}])\b",
    )
    for candidate in (braced, text):
        stripped = candidate.strip().upper()
        if stripped in set(choices):
            return stripped
        for pattern in patterns:
            match = re.search(pattern, candidate, flags=re.I)  # quirk: first hit wins
            if match:
                return match.group(1).upper()
    letters = re.findall(rf"\b([{choices}])\b", text, flags=re.I)  # quirk: the article "a" is option A
    return letters[-1].upper() if letters else ""


def adapt_prediction(value: Any) -> str:
    """The TRACE adapter's new prediction: ``Answer: <L>`` or ``UNRESOLVED``."""
    letter = extract_option_letter(value, choices="ABCD")
    return f"Answer: {letter}" if letter else UNRESOLVED


# -- PhyX's multiple-choice matcher ---------------------------------------------------------------------------
def process_line_mc(prediction: Any, answer: Any) -> tuple[int, str]:
    """``PhyX_process_line_MC`` on one row: ``(match, extracted)``."""
    gt = str(answer)
    pred = str(prediction).strip()
    match = re.search(r"\b(?:correct|answer|option|Answer|Option|Correct)\b[\s\S]*?([A-D])", pred)
    if pred == PHYX_FAIL_MSG:
        return 0, "Fail to Call API"
    extracted = "SAME as predict"
    if match:
        extracted = match.group(1)
        if gt.strip().lower() == extracted.strip().lower():
            return 1, extracted
    else:
        colon_letters = re.findall(r"([ABCD]):", pred)
        if colon_letters:
            extracted = colon_letters[-1]
            if gt.strip().lower() == extracted.strip().lower():
                return 1, extracted
    hit = gt + ":" in pred or gt + "**" in pred or "**" + gt in pred
    return int(hit), extracted


def summary(hits: Sequence[int], categories: Sequence[Any] | None = None) -> dict[str, float]:
    """``PhyX.evaluate``'s one-row result: ``Overall`` then each category's mean (sorted)."""
    result = {"Overall": mean(hits)}
    if categories is not None:
        for cat in sorted(set(categories)):
            result[cat] = mean([h for h, c in zip(hits, categories) if c == cat])
    return result


def as_table(result: dict[str, float]) -> MetricTable:
    """``d2df``: the one-row DataFrame ``PhyX.evaluate`` returns."""
    return MetricTable(columns=tuple(result), rows=(tuple(result.values()),))


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """Adapter, re-read workbook, ``PhyX_process_line_MC``; the reported number is ``Overall`` x 100."""
    columns = ["index", "prediction", "answer"] + (["category"] if any("category" in r for r in rows) else [])
    staged = official_workbook(rows, responses, columns)
    adapted = [adapt_prediction(cell) for cell in staged["prediction"]]
    table = roundtrip_table({**staged, "prediction": adapted})
    records = []
    hits = []
    for pos in range(len(rows)):
        hit, extracted = process_line_mc(table["prediction"][pos], table["answer"][pos])
        hits.append(hit)
        records.append(RowScore(index=str(table["index"][pos]), extracted=adapted[pos].removeprefix("Answer: ")
                                if adapted[pos] != UNRESOLVED else None, score=float(hit),
                                detail={"adapted": adapted[pos], "matched": extracted}))
    result = summary(hits, table.get("category"))
    counts = {"rows": len(hits), "correct": sum(hits), "unresolved": adapted.count(UNRESOLVED)}
    metrics = {k: float(v) for k, v in flatten_summary_metrics(as_table(result)).items()}
    return SliceScore(benchmark=KEY, score=aggregate(hits), rows=len(hits), records=tuple(records),
                      metrics=metrics, counts=counts)


def aggregate(hits: Sequence[int]) -> float:
    """The reported number for per-row hits (as ``score`` computes it)."""
    return primary_score("image_base", as_table(summary(hits))).score


PROTOCOL = Protocol(
    key=KEY,
    upstream=("maveryn/trace@rlvr:rlvr/evaluation/scripts/run_official_vlmevalkit_saved_score.py:"
              "_adapt_phyx_option_prediction + VLMEvalKit@a8b12bf1:vlmeval/dataset/image_vqa.py:PhyX (STR, _MC)"),
    version="phyx-mini-mc-option-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="none",
    quirks=(
        "adapter reads the staged workbook: empty response -> 'nan'",
        "braced candidate: last {...} group without nested braces (\\frac{1}{2} -> 2)",
        "else last whole-word yes/no, else first line after the first answer marker",
        "keyword rule returns the first hit (Option A: ... answer is C -> A), case-insensitive",
        "fallback: last standalone letter a-d in any case (the article 'a' is option A)",
        "Answer: <L> / UNRESOLVED re-read and matched by PhyX_process_line_MC",
        "Overall = mean over all rows (fraction, auto x100); categories sorted",
    ),
)
