"""TRACE's patched ``extract_answer`` of VLMEvalKit's PuzzleVQA/VisualPuzzles scorers: one unambiguous A-D letter.

Mirrors ``maveryn/trace@rlvr:rlvr/evaluation/vlmevalkit_extensions/trace_eval_answer_parsing.py``
(``extract_unambiguous_abcd``), which ``apply_vlmevalkit_trace_extensions.py`` substitutes for the body of
``extract_answer`` in ``vlmeval/dataset/utils/{puzzlevqa,visualpuzzles}.py``.

Candidates, in order: every ``answer: X`` marker (A-D, case-insensitive); the single ``<answer>`` block (its last
balanced box, else the whole block, else its last ``answer:`` line), when there is exactly one block; the last
balanced ``\\boxed{...}`` of the whole text. Exactly one distinct candidate is the answer; none or a conflict is ``Z``.
This box scanner (``\\boxed`` + optional whitespace + ``{``, unbalanced openers skipped, content unstripped) is one of
three deliberately different scanners in this suite; do not merge it with CountQA's or TreeBench's.
"""

from __future__ import annotations

import math
import re
from typing import Any

#: The sentinel upstream's scorers compare against gold (never equal to a gold letter).
UNRESOLVED = "Z"

_ANSWER_BLOCK = re.compile(r"<answer>\s*(.*?)\s*</answer>", flags=re.I | re.S)
_ANSWER_MARKER = re.compile(r"\banswer\s*:\s*([A-D])\b", flags=re.I)
_ANSWER_LINE = re.compile(r"^\s*answer\s*:\s*(.*?)\s*$", flags=re.I | re.M)
_BOX_OPENER = re.compile(r"\\boxed\s*\{")
_LEADING_ANSWER = re.compile(r"answer\s*:\s*(.*)", flags=re.I | re.S)
# Full-string wrappers peeled by the atomic rule, tried in this order on every pass.
_WRAPPERS = tuple(
    re.compile(pattern, flags=re.I | re.S)
    for pattern in (
        r"\\\(\s*(.*?)\s*\\\)",
        r"\\\[\s*(.*?)\s*\\\]",
        r"\$\s*(.*?)\s*\$",
        r"\\(?:text|mathrm|mathbf)\s*\{\s*(.*?)\s*\}",
        r"[\(\[\{]\s*(.*?)\s*[\)\]\}]",
    )
)
_ONE_LETTER = re.compile(r"[A-D]", flags=re.I)


def _as_text(value: Any) -> str:
    """None and NaN read as empty text; anything else as ``str(value)``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def last_balanced_box(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (whitespace allowed before ``{``) whose braces balance; unstripped."""
    found = None
    for opener in _BOX_OPENER.finditer(text):
        start = pos = opener.end()
        depth = 1
        while pos < len(text) and depth:
            char = text[pos]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            pos += 1
        if depth == 0:
            found = text[start : pos - 1]
    return found


def atomic_abcd(value: Any) -> str | None:
    """The letter a value *is* once an ``answer:`` prefix and full-string wrappers are peeled, else None."""
    text = _as_text(value).strip()
    leading = _LEADING_ANSWER.fullmatch(text)
    if leading:
        text = leading.group(1).strip()
    while text:
        before = text
        for wrapper in _WRAPPERS:
            peeled = wrapper.fullmatch(text)
            if peeled:
                text = peeled.group(1).strip()
                break
        if text == before:
            break
    return text.upper() if _ONE_LETTER.fullmatch(text) else None


def extract_unambiguous_abcd(text: Any) -> str:
    """The one A-D letter a response commits to, or ``"Z"`` when it names none or conflicting ones."""
    text = _as_text(text)
    candidates = [m.group(1).upper() for m in _ANSWER_MARKER.finditer(text)]

    blocks = list(_ANSWER_BLOCK.finditer(text))
    if len(blocks) == 1:
        block = blocks[0].group(1).strip()
        block_box = last_balanced_box(block)
        candidate = atomic_abcd(block_box) if block_box is not None else atomic_abcd(block)
        if candidate is None:
            lines = list(_ANSWER_LINE.finditer(block))
            if lines:
                candidate = atomic_abcd(lines[-1].group(1))
        if candidate is not None:
            candidates.append(candidate)

    box = last_balanced_box(text)
    box_candidate = atomic_abcd(box) if box is not None else None
    if box_candidate is not None:
        candidates.append(box_candidate)

    distinct = list(dict.fromkeys(candidates))
    return distinct[0] if len(distinct) == 1 else UNRESOLVED
