"""The EASI rule matcher ``can_match_option`` and ``exact_match`` (P4, EmbSpatial's scorer).

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/spatial_bench/matching_func.py:can_match_option`` and
``cal_scores.py`` (``exact_match``, ``compute_mcq_score``). Seven steps, first hit wins:
``<answer>`` block with a leading letter (A-J) -> letter right before ``</answer>``, then before ``</think>``, in the
last 800 characters -> bottom-up scan of the last 6 lines after the last ``</think>`` (else ``<think>``) -> the same
on the last 6 lines of the last 800 characters -> the first conclusion phrase anywhere (the source comment says
"last", the code takes the first) -> exactly one distinct standalone capital letter in the whole text -> ``False``.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

_ZERO_WIDTH = re.compile(r"[\u200b\u200c\u200d\ufeff]")
_TAGGED_ANSWER_BLOCK = re.compile(
    r"<\s*answer\b[^>]*>\s*([A-Ja-j])(?:\s*[\.．:：\)\]】、])?.*?<\s*/\s*answer\s*>", re.IGNORECASE | re.DOTALL
)
_OPTION_LINE_PREFIX = re.compile(r"^(?:[*_>\-\s]*)(?:option|选项)\s+[A-J]\s*[:：]", re.IGNORECASE)
_MD_SINGLE = re.compile(r"^\s*[*_`>（）\[\]【】\(\)]*\s*([A-Fa-f])\s*[*_`（）\[\]【】\(\)]*\s*$")
_LINE_START_LABELED = re.compile(r"^\s*([A-F])\s*[\.．:：\)\]】、-]\s+", re.IGNORECASE)
_PUNC_TIGHT = r"\.,:;!?\)\]】》」』，。；、：）】》」』"
_TOKEN_INLINE = re.compile(
    rf"(?<![A-Za-z])[*_`（\[\{{\(]*\s*([A-F])\s*[*_`）\]\}})]*(?=$|[\s{_PUNC_TIGHT}])"
)
_THINK_CLOSE = re.compile(r"</\s*think\s*>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<\s*think\s*>", re.IGNORECASE)
TAIL_LINES = 6
TAIL_WINDOW = 800


def _letter_set(choices: Iterable[Any] | None) -> str:
    if not choices:
        return "ABCDEF"
    firsts = "".join(sorted({str(c).strip().upper()[:1] for c in choices if str(c)}))
    return "".join(ch for ch in "ABCDEFGHIJ" if ch in firsts) or "ABCDEF"


def _pick_from_lines(lines: list[str]) -> str | None:
    """Bottom-up: a lone letter line, a ``L.``-labelled line, or one distinct inline capital token."""
    for line in reversed([ln.strip() for ln in lines if ln.strip()]):
        if _OPTION_LINE_PREFIX.search(line):
            continue
        single = _MD_SINGLE.fullmatch(line)
        if single:
            return single.group(1).upper()
        labelled = _LINE_START_LABELED.match(line)
        if labelled:
            return labelled.group(1).upper()
        tokens = sorted({t.upper() for t in _TOKEN_INLINE.findall(line)})
        if len(tokens) == 1:
            return tokens[0]
    return None


def can_match_option(answer_text: Any, choices: Iterable[Any] | None = None) -> str | bool:
    """The option letter the text commits to, or ``False`` (``matching_func.can_match_option``)."""
    if not isinstance(answer_text, str):
        return False
    text = _ZERO_WIDTH.sub("", answer_text.strip())
    letters = _letter_set(choices)

    block = _TAGGED_ANSWER_BLOCK.search(text)
    if block:
        return block.group(1).upper()

    tail = text[-TAIL_WINDOW:]
    for closer in ("answer", "think"):
        anchor = re.compile(
            rf"(?<![A-Za-z])[\(\[\{{（【]?\s*([{letters}])\s*[\)\]\}}）】]?\s*</\s*{closer}\s*>", re.IGNORECASE
        )
        hit = anchor.search(tail)
        if hit:
            return hit.group(1).upper()  # quirk: a letter right before </think> beats the final sentence

    closes = list(_THINK_CLOSE.finditer(text))
    opens = list(_THINK_OPEN.finditer(text)) if not closes else []
    if closes:
        segment = text[closes[-1].end():].strip()
    elif opens:
        segment = text[opens[-1].end():].strip()
    else:
        segment = text
    pick = _pick_from_lines(segment.splitlines()[-TAIL_LINES:])
    if pick:
        return pick
    pick = _pick_from_lines(text[-TAIL_WINDOW:].splitlines()[-TAIL_LINES:])
    if pick:
        return pick

    phrase = re.compile(
        rf"(?i)(?:final\s*answer|the\s*answer\s*is|answer(?:\s*is)?|correct\s*answer|"
        rf"答案|最终答案|结论|所以|因此|我选(?:择)?|选择|选)"
        rf"\s*[:：>＝=]?\s*[\(\[\{{（【]?\s*([{letters}])\s*[\)\]\}}）】]?(?:\b|[.)、。])"
    )
    hit = phrase.search(text)  # quirk: first match over the whole text (the comment upstream says "last")
    if hit:
        return hit.group(1).upper()

    kept = "\n".join(line for line in text.splitlines() if not _OPTION_LINE_PREFIX.search(line))
    tokens = re.findall(rf"(?<![A-Za-z])[\(\[\{{（【]?\s*([{letters}])\s*[\)\]\}}）】]?(?![A-Za-z])", kept)
    distinct = sorted(set(tokens))
    return distinct[0] if len(distinct) == 1 else False


def exact_match(pred: Any, target: Any) -> float:
    """``cal_scores.exact_match``: case-insensitive, stripped ``str`` equality (``False`` reads as ``'false'``)."""
    return 1.0 if str(pred).strip().lower() == str(target).strip().lower() else 0.0


def rule_hit(prediction: Any, answer: Any) -> tuple[float, str | bool]:
    """``compute_mcq_score`` for one row: ``(hit, extracted)``; both sides go through ``can_match_option``."""
    pred = can_match_option(str(prediction))
    gt = can_match_option(str(answer).strip())
    return exact_match(pred, gt), pred
