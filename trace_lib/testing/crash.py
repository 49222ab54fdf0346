"""Crash a child mid-run for resume tests: SIGKILL it the moment it has durably written enough."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable


def sigkill_once(proc: subprocess.Popen, written: Callable[[], int], at_least: int, *, timeout: float = 60.0) -> None:
    """Poll ``written()`` and SIGKILL ``proc`` once it reports ``at_least``.

    Raises:
        AssertionError: the child exited first (its output attached) or made no progress within ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while written() < at_least:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "child made no progress"
        time.sleep(0.003)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
