"""Deliberately slow targets for :class:`trace_lib.scoring.deadline.DeadlineWorker` tests (importable by its child)."""

from __future__ import annotations

import time
from typing import Any


def sleep_then(seconds: float, value: Any) -> Any:
    """``value`` after sleeping ``seconds``."""
    time.sleep(seconds)
    return value


def slow_is_equal(asw: str, gt: str) -> bool:
    """A stand-in for MathVision's comparison that takes an hour and would then say "equal"."""
    time.sleep(3600)
    return True
