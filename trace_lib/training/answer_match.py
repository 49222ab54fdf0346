"""The reward's names for the shared "exact_json" answer rule, which lives in :mod:`trace_lib.answers.canonical`
(re-exports only; upstream's reward and TRACE-validation scorer share one implementation, and so does trace-repro)."""

from __future__ import annotations

from trace_lib.answers.canonical import (
    answer_matches,
    canonical,
    is_sequence,
    scalar_number,
)

__all__ = ["answer_matches", "canonical", "is_sequence", "scalar_number"]
