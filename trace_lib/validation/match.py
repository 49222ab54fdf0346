"""MATCH (``trace-answer-exact-match-v0``): a candidate is correct iff its canonical form equals the ground truth's.

Canonical form (upstream ``_canonical_jsonable`` in ``maveryn/trace:src/trace_tasks/core/reward_scoring.py``,
shared with the training reward in :mod:`trace_lib.answers.canonical`): bool stays bool; a real number becomes
``int`` when finite and integral, else ``float`` (non-finite: ``None``); a string is stripped and lower-cased;
mappings, sets and sequences are canonicalized recursively. So numbers have no tolerance (``0.33 != 0.333``),
option letters and strings compare case-insensitively, inner whitespace and punctuation count (spec §A8.2,
vectors §A10.3).
"""

from __future__ import annotations

from typing import Any

from trace_lib.answers.canonical import canonical as canonical_value

__all__ = ["canonical_value", "semantic_correct"]


def semantic_correct(candidate: Any, ground_truth_value: Any) -> int:
    """1 when ``candidate`` MATCHes the ground-truth value, else 0."""
    return int(canonical_value(candidate) == canonical_value(ground_truth_value))
