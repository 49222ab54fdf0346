"""Text helpers shared by the ChartQAPro adapter and the EvoChart extension: the strict box scanner and ANLS.

- :func:`last_boxed_strict` mirrors ``_chartqapro_last_boxed`` (``run_official_vlmevalkit_saved_score.py``) and
  ``_last_boxed`` (``vlmevalkit_extensions/evochart.py``): the literal ``\\boxed{`` (no whitespace), the stripped
  content of the last balanced box, and the scan *stops* at the first unbalanced box. (TRACE's audit parser and
  the PuzzleVQA parser use other scanners on purpose; do not merge them.)
- :func:`anls_score` mirrors ``anls==0.0.2`` (``anls.metrics.score.anls_score``): lower-case, collapse
  whitespace, normalized Levenshtein distance over ``max(len(a.upper()), len(b.upper()))``, credit
  ``1 - NL`` below the threshold.
"""

from __future__ import annotations

from typing import Sequence

BOX_OPENER = "\\boxed{"


def last_boxed_strict(text: str) -> str | None:
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


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insert, delete, substitute; unit costs) over code points."""
    if len(a) > len(b):
        a, b = b, a
    previous = list(range(len(a) + 1))
    for j, cb in enumerate(b, 1):
        current = [j]
        for i, ca in enumerate(a, 1):
            current.append(previous[i - 1] if ca == cb else 1 + min(previous[i - 1], previous[i], current[-1]))
        previous = current
    return previous[-1]


def _similarity(prediction: str, gold: str, threshold: float) -> float:
    # quirk (anls 0.0.2): the length is measured on the upper-cased strings ('ß'.upper() is 'SS')
    length = max(len(prediction.upper()), len(gold.upper()))
    if length == 0:
        return 1.0
    if abs(len(prediction) - len(gold)) / length >= threshold:
        return 0.0  # the distance is at least the length difference: NL >= threshold, no credit
    distance = levenshtein(prediction, gold)
    nl = distance / length
    return 1 - nl if nl < threshold else 0.0


def anls_score(prediction: str, gold_labels: Sequence[str], threshold: float = 0.5) -> float:
    """``anls.anls_score``: the best normalized-Levenshtein similarity of the prediction to any gold label."""
    y_pred = " ".join(prediction.strip().lower().split())
    return max(_similarity(y_pred, " ".join(g.strip().lower().split()), threshold) for g in gold_labels)
