"""trace-repro: the reproduction suite for the TRACE paper release.

Importing this package is cheap: it imports nothing heavy (no torch, vllm, ray or transformers).
"""

__version__ = "0.1.0"
