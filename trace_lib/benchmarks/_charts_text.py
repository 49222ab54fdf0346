"""Text helpers of the chart benchmarks (the literal box scanner lives in ``trace_lib.extraction.boxed``).

- :func:`anls_score` mirrors ``anls==0.0.2`` (``anls.metrics.score.anls_score``): lower-case, collapse
  whitespace, normalized Levenshtein distance over ``max(len(a.upper()), len(b.upper()))``, credit
  ``1 - NL`` below the threshold.
"""

from __future__ import annotations

from typing import Sequence

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
