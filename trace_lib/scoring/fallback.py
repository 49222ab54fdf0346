"""Deterministic stand-in for upstream's unseeded random choices (e.g. after repeated judge failures).

Upstream picks ``random.choice(options)`` without a seed; a reproduction must be repeatable, so the choice is
seeded by (benchmark, row index, decoding seed). Rows that take this path are marked ``fallback=True`` in their
RowScore and counted in the slice summary.
"""

from __future__ import annotations

import hashlib
import random
from typing import Sequence, TypeVar

T = TypeVar("T")


def fallback_rng(benchmark: str, index: object, seed: int) -> random.Random:
    """A ``random.Random`` seeded from (benchmark, row index, decoding seed) via SHA-256."""
    digest = hashlib.sha256(f"{benchmark}\x1f{index}\x1f{seed}".encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def deterministic_choice(options: Sequence[T], *, benchmark: str, index: object, seed: int) -> T:
    """The option upstream's unseeded ``random.choice`` would have drawn, made repeatable."""
    if not options:
        raise ValueError(f"{benchmark}[{index}]: no options to choose from")
    return fallback_rng(benchmark, index, seed).choice(list(options))
