"""The 24 ``trace_eval_v1`` benchmark protocols: one module per suite key, each ending in ``PROTOCOL``.

How a protocol is written: docs/adding-a-benchmark.md; its deviations from upstream: docs/deviations.md.
"""
