"""Ctrl-C and SIGTERM stop a long command the same way: stop feeding, persist what was received, one line, exit.

:func:`stop_on_signals` makes SIGINT and SIGTERM raise :class:`Interrupted` (a ``KeyboardInterrupt``) in the main
thread, so SIGTERM takes the path Ctrl-C takes instead of killing the process with answers still buffered: the
``finally`` blocks on the way up close the backends (the vllm backend aborts its batch) and flush every answer
received into the stores, whose appends are all or nothing (:meth:`~trace_lib.generation.store.SliceStore.append`),
so a signal that lands mid-write leaves each file as it was. A backend waiting on requests in flight registers a
cancel hook (:func:`cancel_on_stop`; the openai backend): the first signal then cancels those requests, the
backend hands over the answers it already has and raises :class:`Interrupted` itself (:func:`raise_if_stopped`).
The judge transport registers one around each request (its hook shuts down the pooled sockets), so a stop ends
the judge requests in flight at once; worker threads see the stop through :func:`raise_if_stopped` and
:func:`pause` (a retry's back-off), which raise :class:`Interrupted` in any thread. :func:`stoppable` wraps a command: on a signal it prints one line and returns the shell's
code for that signal, ``128 + signum`` (130 for SIGINT, 143 for SIGTERM). A second signal while stopping
interrupts the clean-up too (the stores stay consistent; answers not yet flushed are generated again on resume).
Only the main thread can install handlers; elsewhere the context manager does nothing.

Python discards an exception raised where nothing can catch it (a weakref or ``__del__`` callback, the import
system's lock clean-up): a signal handled at such a moment would be lost, and a wait would go on. So the block
records every stop signal, :func:`pause` and :func:`raise_if_stopped` raise a recorded one again, and every wait
of a long command polls through them; the discarded :class:`Interrupted` is not printed (``sys.unraisablehook``).
"""

from __future__ import annotations

import functools
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived (``signum``); ``exit_code`` is ``128 + signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _State:
    pending: int | None = None  # the first stop signal, while a cancel hook turned it into a graceful stop
    received: int | None = None  # the first stop signal of the current block, however it was handled
    stopped = threading.Event()  # set with ``received`` (wakes :func:`pause`)
    hooks: list[Callable[[], None]] = []


def _reset() -> None:
    _State.pending = _State.received = None
    _State.stopped.clear()


def _handle(signum: int, frame: object) -> None:
    if _State.received is None:
        _State.received = signum
        _State.stopped.set()
    if _State.pending is None and _State.hooks:
        _State.pending = signum
        for hook in list(_State.hooks):
            hook()
        return
    raise Interrupted(signum)


@contextmanager
def cancel_on_stop(cancel: Callable[[], None]) -> Iterator[None]:
    """While the block runs, a first stop signal calls ``cancel()`` (end the requests in flight) instead of raising,
    so the block can hand over every answer it already holds; it then calls :func:`raise_if_stopped`."""
    _State.hooks.append(cancel)
    try:
        yield
    finally:
        _State.hooks.remove(cancel)


def raise_if_stopped() -> None:
    """Raise :class:`Interrupted` when a stop signal arrived in the current :func:`stop_on_signals` block (in any
    thread: a worker stops instead of starting another request)."""
    if _State.received is not None:
        raise Interrupted(_State.received)


def pause(seconds: float) -> None:
    """Sleep ``seconds`` (a retry's back-off), raising :class:`Interrupted` as soon as a stop signal arrives."""
    if seconds > 0:
        _State.stopped.wait(seconds)
    raise_if_stopped()


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread (handlers restored after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _handle) for signum in STOP_SIGNALS}
    unraisable = sys.unraisablehook

    def discarded(what: Any) -> None:
        if not isinstance(what.exc_value, Interrupted):  # an Interrupted is recorded, and raised again by a wait
            unraisable(what)

    sys.unraisablehook = discarded
    _reset()
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sys.unraisablehook = unraisable
        _reset()


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM for the block (a write and its roll-back, which a second Ctrl-C must not cut in two),
    then deliver the first that came to the handler in place before. Main thread only: elsewhere neither raises."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {}
    try:
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) is not None:  # None: a handler not set from Python, which cannot be restored
                previous[signum] = signal.signal(signum, lambda signum, frame: held.append(signum))
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:
            signal.raise_signal(held[0])


def stoppable(command: Callable[..., int], *, label: str) -> Callable[..., int]:
    """``command`` run under :func:`stop_on_signals`; a signal prints ``[label] stopped by SIGTERM: ...`` on stderr
    and returns ``128 + signum`` (the CLI's thin wiring: ``parser.set_defaults(run=stoppable(run, ...))``)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> int:
        with stop_on_signals():
            try:
                return command(*args, **kwargs)
            except Interrupted as exc:
                print(f"[{label}] stopped by {exc.name}: everything stored so far is kept; re-run to resume",
                      file=sys.stderr, flush=True)
                return exc.exit_code

    return run
