"""Deliberately slow targets for :class:`trace_lib.scoring.deadline.DeadlineWorker` tests (importable by its child)."""

from __future__ import annotations

import os
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


def pid() -> int:
    """The serving child's process id (two calls answered by one child give one id)."""
    return os.getpid()


def exit_now(code: int) -> None:
    """The child dies mid-call without a reply."""
    os._exit(code)


def fail_with(message: str) -> None:
    """Raises ``ValueError(message)`` in the child."""
    raise ValueError(message)


def unpicklable() -> Any:
    """A result pickle cannot send back (a lambda)."""
    return lambda: None
