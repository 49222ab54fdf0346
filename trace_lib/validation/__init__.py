"""The TRACE validation workflow: 8 models x 2,000 in-distribution rows, seed 42, exact-match accuracy.

Pipeline order: :mod:`~trace_lib.validation.prepare` (parquet -> content-addressed images + manifest),
:mod:`~trace_lib.validation.generate` (one request per row through an engine backend; durable receipts),
:mod:`~trace_lib.validation.score` (deterministic :mod:`~trace_lib.validation.extraction` + MATCH; judge queue),
:mod:`~trace_lib.validation.judge` (ground-truth-blind Qwen3-32B fallback), final score,
:mod:`~trace_lib.validation.verify` (release / generation-only / full) and
:mod:`~trace_lib.validation.tolerance` (reproduced vs ``results.v1.json``). :mod:`~trace_lib.validation.pipeline`
runs one model's slice end to end; ``trace-repro validation`` exposes every stage. Where each stage lives and what
it shares with the evaluation pipeline: docs/architecture.md.
"""
