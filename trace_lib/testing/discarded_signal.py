"""Deliver a stop signal where Python discards what its handler raises, as a real Ctrl-C can land.

Python drops an exception raised inside a weakref callback, a ``__del__`` or the import system's lock clean-up,
printing only "Exception ignored in ..." (``sys.unraisablehook``). A handler that raises
:class:`~trace_lib.interrupts.Interrupted` at such a moment has its exception lost; the tests use this to check that
the waits of long commands still stop.
"""

from __future__ import annotations

import signal
import weakref


class _Dropped:
    pass


def signal_python_discards(signum: int = signal.SIGINT) -> None:
    """Raise ``signum`` in this (main) thread from inside a weakref callback, and return normally."""
    target = _Dropped()
    ref = weakref.ref(target, lambda _: signal.raise_signal(signum))
    del target  # the callback runs here, and whatever the handler raises in it is discarded
    if ref() is not None:
        raise AssertionError("the weakref callback did not run")
