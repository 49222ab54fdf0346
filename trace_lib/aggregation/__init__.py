"""Aggregation of scores: summaries (means, stddevs, categories, overall, deltas) and the tolerance rule."""
