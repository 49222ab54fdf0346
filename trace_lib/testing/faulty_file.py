"""Fault injection for the response store without ``LD_PRELOAD``: a wrapper around its raw append handle.

:class:`FaultyFile` passes writes through to the real file until ``fail_at`` bytes have been written in total,
writes the bytes up to that offset for real (a short write, as a filling disk does), then raises ``error``
(an ``OSError`` such as ``ENOSPC``, or ``KeyboardInterrupt`` for a Ctrl-C timed to the write) once; later
writes pass through (the space came back). :func:`inject` installs one into an open
:class:`~trace_lib.generation.store.SliceStore`.
"""

from __future__ import annotations

import errno
import os
from typing import Any


def enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class FaultyFile:
    """The store's raw file, failing once after ``fail_at`` more bytes (see the module docstring)."""

    def __init__(self, real: Any, fail_at: int, error: BaseException) -> None:
        self.real, self.left, self.error = real, fail_at, error
        self.fired = False

    def write(self, data: Any) -> int:
        if self.fired or len(data) < self.left:
            self.left -= 0 if self.fired else len(data)
            return self.real.write(data)
        if self.left:
            self.real.write(bytes(data[: self.left]))
        self.left, self.fired = 0, True
        raise self.error

    def __getattr__(self, name: str) -> Any:  # fileno, close, closed
        return getattr(self.real, name)


def inject(store: Any, fail_at: int, error: BaseException) -> FaultyFile:
    """Wrap ``store``'s append handle so that the write reaching byte ``fail_at`` (counted from now) fails."""
    faulty = FaultyFile(store._file, fail_at, error)
    store._file = faulty
    return faulty
