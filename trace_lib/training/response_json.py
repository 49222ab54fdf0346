"""The reward's names for the shared answer-block machinery, which lives in :mod:`trace_lib.answers` (re-exports only).

Upstream's reward adapter and TRACE-validation scorer share one implementation, so trace-repro's do too; this
module keeps the training-side import path stable.
"""

from __future__ import annotations

from trace_lib.answers.json_blocks import (
    brace_spans,
    final_block,
    json_candidates,
    parse_json_like,
)
from trace_lib.answers.prediction import ANSWER_ONLY_KEYS, Prediction, locate_prediction

__all__ = [
    "ANSWER_ONLY_KEYS",
    "Prediction",
    "brace_spans",
    "final_block",
    "json_candidates",
    "locate_prediction",
    "parse_json_like",
]
