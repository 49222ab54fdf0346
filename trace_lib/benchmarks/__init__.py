"""The 24 ``trace_eval_v1`` benchmark protocols: one module per suite key, each ending in ``PROTOCOL``."""
