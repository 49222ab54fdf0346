"""Aggregation of scores: summaries (means, stddevs, categories, overall, paired deltas) and the tolerance rule."""

from trace_lib.aggregation.summaries import (
    ABS_TOLERANCE,
    MissingScoresError,
    PairedDelta,
    ScoreKey,
    Summary,
    benchmark_deltas,
    benchmark_summaries,
    category_scores,
    category_summaries,
    close,
    overall_delta,
    overall_scores,
    overall_summaries,
    paired_delta,
    summarize,
)

__all__ = [
    "ABS_TOLERANCE",
    "MissingScoresError",
    "PairedDelta",
    "ScoreKey",
    "Summary",
    "benchmark_deltas",
    "benchmark_summaries",
    "category_scores",
    "category_summaries",
    "close",
    "overall_delta",
    "overall_scores",
    "overall_summaries",
    "paired_delta",
    "summarize",
]
