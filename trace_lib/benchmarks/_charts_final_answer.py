"""TRACE's audit-only final-answer parser (CharXiv's ``extract_answer`` fallback).

Mirrors ``maveryn/trace@rlvr:rlvr/evaluation/scripts/trace_benchmark_answer_parsing.py``
(``extract_final_answer``, ``clean_final_answer``, ``last_boxed``): the last ``<answer>`` block, else the last
balanced ``\\boxed{...}``, else the last JSON object with an ``answer`` key, else the last ``answer is/=/:``
marker, else the raw text. Its box scanner accepts whitespace before the brace and keeps scanning past an
unbalanced box; it is deliberately not the chart scanner of :mod:`._charts_text`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_ANSWER_BLOCK = re.compile(r"<answer>\s*(.*?)\s*</answer>", flags=re.I | re.S)
_BOX_OPENER = re.compile(r"\\boxed\s*\{")
_MARKER = re.compile(r"(?is)(?:^|\n|\b)(?:the\s+)?(?:final\s+)?answer\s*(?:is|=|:|：)\s*(.+)")


def _clean_cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def last_boxed_lenient(text: Any) -> str | None:
    """Content of the last balanced ``\\boxed {...}`` (whitespace allowed; unbalanced boxes are skipped)."""
    raw = _clean_cell(text)
    found = None
    for match in _BOX_OPENER.finditer(raw):
        start = pos = match.end()
        depth = 1
        while pos < len(raw) and depth:
            if raw[pos] == "{":
                depth += 1
            elif raw[pos] == "}":
                depth -= 1
            pos += 1
        if depth == 0:
            found = raw[start : pos - 1]
    return found


def clean_final_answer(text: Any) -> str:
    """Drop answer tags, a leading ``:``/``,``/``-``, backticks and quotes; keep the first line of a short lead."""
    value = _clean_cell(text)
    value = re.sub(r"</?answer>", "", value, flags=re.I).strip()
    value = re.sub(r"^\s*[:：,\-]+\s*", "", value).strip()
    value = value.strip("` \n\t\r").strip("\"'")
    lines = [line.strip() for line in value.splitlines() if line.strip()]
    if len(lines) > 1 and len(lines[0]) <= 160:
        value = lines[0]
    return value.strip().strip("\"'")


def extract_final_answer(value: Any) -> tuple[str, str]:
    """The final answer and how it was found: ``answer_tag``, ``boxed``, ``json_answer``, ``answer_marker``,
    ``raw`` or ``empty``."""
    text = _clean_cell(value)
    if not text:
        return "", "empty"
    tagged = list(_ANSWER_BLOCK.finditer(text))
    if tagged:
        return clean_final_answer(tagged[-1].group(1)), "answer_tag"
    boxed = last_boxed_lenient(text)
    if boxed is not None:
        return clean_final_answer(boxed), "boxed"
    decoder = json.JSONDecoder()
    answers = []
    for match in re.finditer(r"\{", text):
        try:
            payload, _ = decoder.raw_decode(text[match.start():])
        except (TypeError, ValueError):
            continue
        if isinstance(payload, dict) and "answer" in payload:
            answers.append(payload["answer"])
    if answers:
        return clean_final_answer(answers[-1]), "json_answer"
    markers = list(_MARKER.finditer(text))
    if markers:
        return clean_final_answer(markers[-1].group(1)), "answer_marker"
    return text, "raw"
