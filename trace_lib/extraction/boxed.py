"""The literal ``\\boxed{`` scanner that upstream copies verbatim into three places.

:func:`last_boxed_literal` mirrors ``_last_boxed`` of ``vlmevalkit_extensions/trace_eval_local_vqa.py`` (CountQA),
of ``vlmevalkit_extensions/evochart.py`` (EvoChart) and ``_chartqapro_last_boxed`` of
``run_official_vlmevalkit_saved_score.py`` (ChartQAPro): the literal opener (no whitespace), the stripped content of
the last balanced box, and the scan *stops* at the first unbalanced box. PuzzleVQA/VisualPuzzles
(``extraction/abcd.py``), TreeBench and the CharXiv audit parser use other scanners on purpose: never merge them.
"""

from __future__ import annotations

BOX_OPENER = "\\boxed{"


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
