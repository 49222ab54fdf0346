"""TreeBench: TRACE's option repair and final-boxed-letter adapter before VLMEvalKit's ``TreeBench`` scorer.

Mirrors ``maveryn/trace@rlvr:rlvr/evaluation/scripts/benchmark_queue_lib.py`` (``_normalize_treebench_options``,
``parse_lettered_option_blob``), ``.../run_official_vlmevalkit_saved_score.py`` (``_treebench_final_boxed_option``,
``_adapt_treebench_prediction``) and ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py`` (``TreeBench``) with
``vlmeval/dataset/utils/multiple_choice.py:extract_characters_regex`` and ``utils/treebench.py``.
The adapter's box rule (a box holding one letter A-E that ends the single ``<answer>`` block) is deliberately
different from CountQA's and PuzzleVQA's box scanners; do not merge them.

Quirks reproduced on purpose:
- the adapter rewrites the workbook and the scorer reads it back: two xlsx round trips before parsing;
- the first ``<answer>`` block is upper-cased, then the *first* capital A-E anywhere wins ("THE ANSWER IS C" -> E);
- case-sensitive answer prefixes are deleted before that search; an empty rest matches ``(a)`` -> A;
- more than 10 words without any A-E -> '' (score 0, kept in the denominator);
- the reported ``Overall`` is a fraction, scaled x100 by the campaign's ``auto`` rule.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.extraction.choices import build_imagemcq_prompt
from trace_lib.extraction.workbook import isna, official_workbook, roundtrip_table
from trace_lib.scoring.percent import primary_score

KEY = "treebench"
INSTRUCTION = "Answer with the correct option's letter directly. \n"
#: Option letters the TRACE repair considers (``_normalize_treebench_options``).
REPAIR_LETTERS = "ABCDEFGHIJK"
PERCEPTION_SUBTASKS = ("Attributes", "Material", "Physical State", "Object Retrieval", "OCR")
REASONING_SUBTASKS = ("Perspective Transform", "Ordering", "Contact and Occlusion", "Spatial Containment", "Comparison")
#: Deleted in this order before the letter search (``extract_characters_regex``; case-sensitive).
ANSWER_PREFIXES = (
    "The best answer is", "The correct answer is", "The answer is", "The answer",
    "The best option is", "The correct option is", "Best answer:", "Best option:",
)
_CHOICE_LABELS = ("(A)", "(B)", "(C)", "(D)", "(E)")

_ANSWER_BLOCKS = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.I | re.S)
_FINAL_BOX = re.compile(r"\\boxed\s*\{\s*([A-E])\s*\}\s*[.!?。！？]*\s*$", re.I)
_THINK = re.compile(r"<think>(.*?)</think>", re.S)
_FIRST_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
_LETTER = re.compile(r"[ABCDE]")
_BOX_TAG = re.compile(r"<box>(.*?)</box>", re.S)
_COORDS = re.compile(r"\[(\d+),(\d+),(\d+),(\d+)\]")
_BLOB_MARKER = re.compile(r"(?:^|\s)([A-K])[\.\):]\s+")
_BLOB_LINE_MARKER = re.compile(r"(?m)^\s*([A-K])\s+(?=\S)")


# -- data ------------------------------------------------------------------------------------------------------
def parse_lettered_option_blob(value: Any) -> dict[str, str]:
    """``A. ... B. ...`` option text (the ``multi-choice options`` column) -> ``{letter: text}``."""
    text = str(value or "").strip()
    if not text:
        return {}
    starts: dict[int, tuple[int, str]] = {}
    for marker in _BLOB_MARKER.finditer(text):
        starts[marker.start(1)] = (marker.end(), marker.group(1))
    for marker in _BLOB_LINE_MARKER.finditer(text):
        starts.setdefault(marker.start(1), (marker.end(), marker.group(1)))
    markers = sorted((start, end, letter) for start, (end, letter) in starts.items())
    options: dict[str, str] = {}
    for pos, (_, value_start, letter) in enumerate(markers):
        value_end = markers[pos + 1][0] if pos + 1 < len(markers) else len(text)
        option = re.sub(r"\s+", " ", text[value_start:value_end]).strip()
        if option:
            options.setdefault(letter, option)
    return options


def _has_value(value: Any) -> bool:
    return not isna(value) and bool(str(value).strip())


def repair_options(rows: list[Row]) -> list[dict[str, Any]]:
    """TRACE's fail-closed repair of a merged option cell (``"x B. y"`` -> columns A/B), in place; the changes.

    Raises:
        InputError: a row's gold letter is still not among its options (upstream raises ``ValueError``).
    """
    columns = {key for row in rows for key in row}
    changes = []
    for row in rows:
        original = dict(row)
        answer = str(original.get("answer", "")).strip().upper()
        if len(answer) != 1 or answer not in REPAIR_LETTERS:
            continue
        present = [L for L in REPAIR_LETTERS if L in columns and _has_value(original.get(L))]
        if answer in present:
            continue
        if not present and answer in parse_lettered_option_blob(original.get("multi-choice options")):
            continue  # OCR rows: the choices are printed in the image
        repaired = False
        for letter in present:
            if letter == REPAIR_LETTERS[-1]:
                continue
            following = REPAIR_LETTERS[REPAIR_LETTERS.index(letter) + 1]
            text = str(original.get(letter, ""))
            marker = re.search(rf"\s+{re.escape(following)}\.\s+", text)
            if marker is None:
                continue
            prefix, embedded = text[: marker.start()].strip(), text[marker.end() :].strip()
            if not prefix or not embedded:
                continue
            highest = max(REPAIR_LETTERS.index(item) for item in present)
            for position in range(highest, REPAIR_LETTERS.index(following) - 1, -1):
                row[REPAIR_LETTERS[position + 1]] = original.get(REPAIR_LETTERS[position], math.nan)
            row[letter], row[following] = prefix, embedded
            changes.append({"index": str(row.get("index")), "split_column": letter,
                            "inserted_column": following, "ground_truth": answer})
            repaired = True
            break
        if not repaired or answer not in [L for L in REPAIR_LETTERS if _has_value(row.get(L))]:
            raise InputError("ground-truth option missing from the row's choices", field=f"rows[{row.get('index')}]",
                             expected=answer, found=present)
    return changes


def load(path: Path) -> list[Row]:
    """The TreeBench TSV rows with TRACE's option repair applied (the columns the prompt and scorer see)."""
    rows = load_vlmeval_tsv(path)
    repair_options(rows)
    return rows


# -- prompt ----------------------------------------------------------------------------------------------------
def build_prompt_text(row: Row) -> str:
    """``TreeBench.build_prompt``'s text: the ImageMCQ layout with TreeBench's instruction (none without options)."""
    return build_imagemcq_prompt(row, instruction=INSTRUCTION)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Every image, then the TreeBench option prompt."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", build_prompt_text(row))]


# -- extraction ------------------------------------------------------------------------------------------------
def final_boxed_option(value: Any) -> str | None:
    """TRACE adapter: the letter of a ``\\boxed{X}`` (A-E) ending the single non-empty ``<answer>`` block."""
    text = str(value or "")
    blocks = list(_ANSWER_BLOCKS.finditer(text))
    if len(blocks) != 1:
        return None
    block = blocks[0].group(1).strip()
    if not block:
        return None
    match = _FINAL_BOX.search(block)
    return match.group(1).upper() if match else None


def extract_characters_regex(text: str) -> str:
    """``extract_characters_regex``: first capital A-E after prefix removal; '' when nothing fits."""
    text = text.strip()
    for prefix in ANSWER_PREFIXES:
        text = text.replace(prefix, "")
    if len(text.split()) > 10 and not _LETTER.search(text):
        return ""
    match = _LETTER.search(text)
    if match is None:
        for label in _CHOICE_LABELS:
            if text.lower() in label.lower():
                return label[1]  # quirk: an empty rest is a substring of "(a)" -> A
        return ""
    return match[0]


def parse_prediction(pred: str) -> str:
    """The scorer's letter for a (possibly adapted) prediction: first ``<answer>`` upper-cased, then the regex."""
    block = _FIRST_ANSWER.search(pred)
    if block:
        pred = block.group(1).strip().upper()  # quirk: upper-casing makes "the answer is c" -> "E"
    return extract_characters_regex(pred)


def box_iou(text: str, targets: list[Any]) -> float:
    """``TreeBench.evaluate_box_iou``: mean over targets of the best IoU with any ``<box>[x1,y1,x2,y2]</box>``."""
    boxes = []
    for raw in _BOX_TAG.findall(text):
        coords = _COORDS.match(raw.strip())
        if coords:
            x1, y1, x2, y2 = map(int, coords.groups())
            if x1 < x2 and y1 < y2:
                boxes.append([x1, y1, x2, y2])
    if not boxes:
        return 0
    if len(targets) == 0:
        return len(boxes) > 0  # quirk: upstream returns True here

    def iou(a: Sequence[float], b: Sequence[float]) -> float:
        inter_w = max(0, min(a[2], b[2]) - max(a[0], b[0]))
        inter_h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        inter = inter_w * inter_h
        union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
        return inter / union if union > 0 else 0.0

    total = 0.0
    for target in targets:
        best = 0.0
        for box in boxes:
            value = iou(target, box)
            if value > best:
                best = value
        total += best
    return total / len(targets)


# -- scoring ---------------------------------------------------------------------------------------------------
def _targets(cell: Any, index: str) -> list[Any] | None:
    if isna(cell):
        return None
    try:
        return ast.literal_eval(cell) if isinstance(cell, str) else list(cell)
    except (ValueError, SyntaxError, TypeError):
        raise InputError("target_instances is not a list literal", field=f"rows[{index}].target_instances",
                         found=str(cell)[:80]) from None


def aggregate(hits: Sequence[int]) -> float:
    """The reported number: ``Overall`` (a fraction) picked by the key ranking, then ``auto`` x100."""
    return primary_score("image_mcq", {"Overall": sum(hits) / len(hits)}).score


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """TreeBench accuracy (``Overall``) over all rows, in percent.

    Raises:
        InputError: a row's category is not one of the ten TreeBench subtasks (upstream raises ``KeyError``).
    """
    first = official_workbook(rows, responses, ("prediction", "answer", "category", "target_instances"))
    boxed = [final_boxed_option(cell) for cell in first["prediction"]]
    first["prediction"] = [cell if letter is None else letter for cell, letter in zip(first["prediction"], boxed)]
    # quirk: the adapter writes the workbook again, so every column is read back a second time
    second = roundtrip_table(first)
    nan_column = [math.nan] * len(rows)
    answers = second.get("answer", nan_column)
    categories = second.get("category", nan_column)
    targets_col = second.get("target_instances", nan_column)

    tallies = {"Perception": {s: [0, 0] for s in PERCEPTION_SUBTASKS},
               "Reasoning": {s: [0, 0] for s in REASONING_SUBTASKS}}
    records, ious = [], []
    crashed = 0
    for row, pred, gold, category, targets_cell, adapter in zip(rows, second["prediction"], answers, categories,
                                                                targets_col, boxed):
        index = str(row["index"])
        task, _, subtask = str(category).partition("/")
        if task not in tallies or subtask.split("/")[0] not in tallies[task]:
            raise InputError("unknown TreeBench category", field=f"rows[{index}].category", found=str(category))
        subtask = subtask.split("/")[0]
        if not isinstance(pred, str):
            # upstream raises TypeError on a non-text cell (empty/NA/'=' response); scored 0 here
            crashed += 1
            tallies[task][subtask][1] += 1
            records.append(RowScore(index, None, 0.0, detail={"upstream": "TypeError on non-text prediction"}))
            ious.append(0)
            continue
        think = _THINK.search(pred)
        targets = _targets(targets_cell, index)
        iou = box_iou(think.group(1).strip() if think else pred, targets) if targets is not None else None
        if iou is not None:
            ious.append(iou)
        letter = parse_prediction(pred)
        hit = 0 if letter == "" else int(letter == gold)
        tallies[task][subtask][0] += hit
        tallies[task][subtask][1] += 1
        records.append(RowScore(index, letter or None, float(hit),
                                detail={"adapter": adapter, "iou": iou, "rejected": letter == ""}))
    hits = sum(t[0] for task in tallies.values() for t in task.values())
    total = sum(t[1] for task in tallies.values() for t in task.values())
    result: dict[str, Any] = {"Overall": hits / total}
    for task, subtasks in tallies.items():
        result[task] = {s: (h / n if n > 0 else 0) for s, (h, n) in subtasks.items()}
    if ious:
        result["mIoU"] = math.fsum(float(v) for v in ious) / len(ious)
    # `Overall` (rank 100) outranks every Perception|/Reasoning|/mIoU key, so the reported number is aggregate()
    return SliceScore(
        benchmark=KEY,
        score=aggregate([int(r.score) for r in records]),
        rows=len(rows),
        records=tuple(records),
        metrics={"Overall": result["Overall"], **({"mIoU": result["mIoU"]} if ious else {})},
        counts={"correct": hits, "total": total, "rejected": sum(r.detail.get("rejected", False) for r in records),
                "adapted": sum(r.detail.get("adapter") is not None for r in records),
                "upstream_crash_rows": crashed},
    )


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py:TreeBench"
             " + TRACE treebench-explicit-final-boxed-option-v1",
    version="treebench-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="none",
    quirks=(
        "TRACE option repair splits a merged 'x B. y' option cell before prompts are built",
        "adapter: a \\boxed{A-E} ending the single <answer> block replaces the prediction, then a 2nd xlsx round trip",
        "first <answer> block upper-cased, then the first capital A-E anywhere ('the answer is c' -> E)",
        "case-sensitive answer prefixes deleted first; an empty rest matches '(a)' -> A",
        ">10 words and no A-E -> '' (score 0, still in the denominator)",
        "Overall is a fraction; reported x100 by auto scaling",
    ),
)
