"""The literal ``\\boxed{`` scanner that upstream copies verbatim into three places.

:func:`last_boxed_literal` mirrors ``_last_boxed`` of ``vlmevalkit_extensions/trace_eval_local_vqa.py`` (CountQA),
of ``vlmevalkit_extensions/evochart.py`` (EvoChart) and ``_chartqapro_last_boxed`` of
``run_official_vlmevalkit_saved_score.py`` (ChartQAPro): the literal opener (no whitespace), the stripped content of
the last balanced box, and the scan *stops* at the first unbalanced box. PuzzleVQA/VisualPuzzles
(``extraction/abcd.py``), TreeBench and the CharXiv audit parser use other scanners on purpose: never merge them.
:func:`final_answer_cascade` is the box-first cascade that CountQA and EvoChart wrap around it (their answer-marker
patterns differ and are passed in).
"""

from __future__ import annotations

import re

BOX_OPENER = "\\boxed{"
_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", flags=re.I | re.S)
_JSON_ANSWER = re.compile(r"\{.*\"answer\"\s*:\s*(.+?)\}", flags=re.S)


def last_boxed_literal(text: str) -> str | None:
    """Stripped content of the last balanced ``\\boxed{...}``; an unbalanced box ends the scan (keeping the
    previous one); None when there is no complete box."""
    found = None
    start = 0
    while True:
        opener = text.find(BOX_OPENER, start)
        if opener < 0:
            return found
        pos = begin = opener + len(BOX_OPENER)
        depth = 1
        while pos < len(text) and depth:
            if text[pos] == "{":
                depth += 1
            elif text[pos] == "}":
                depth -= 1
            pos += 1
        if depth:
            return found
        found = text[begin : pos - 1].strip()
        start = pos


def final_answer_cascade(text: str, marker: re.Pattern[str]) -> str:
    """The final answer of ``text``: the last balanced box (an empty box falls through), else the first
    ``<answer>`` block, else a JSON ``"answer"`` value (quotes stripped), else the first line of group 1 of the
    last ``marker`` match, else ``text`` itself; each stripped."""
    boxed = last_boxed_literal(text)
    if boxed:
        return boxed.strip()
    block = _ANSWER_BLOCK.search(text)
    if block:
        return block.group(1).strip()
    json_answer = _JSON_ANSWER.search(text)
    if json_answer:
        return json_answer.group(1).strip().strip("\"'")
    markers = list(marker.finditer(text))
    if markers:
        # quirk: a marker ending in (.+) under DOTALL swallows the rest, so the first marker is the last match
        return markers[-1].group(1).strip().splitlines()[0].strip()
    return text
