"""The TRACE answer machinery shared by the training reward and the TRACE-validation scorer.

Upstream keeps one implementation (``maveryn/trace@rlvr:src/trace_tasks/core/reward_scoring.py``) that both the
reward adapter and ``rlvr/evaluation/trace_validation/score.py`` import; so does trace-repro:
:mod:`~trace_lib.answers.json_blocks` (JSON-like parsing, brace spans, the final answer block),
:mod:`~trace_lib.answers.prediction` (the format verdict and the answer/annotation a response yields) and
:mod:`~trace_lib.answers.canonical` (canonical form and the ``exact_json`` answer rule).
"""
