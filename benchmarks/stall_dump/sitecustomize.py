"""Loaded by every Python process started with this directory on ``PYTHONPATH`` (``engine_input_ceiling.py
--stall-s`` and ``--sample-hz``): registers ``SIGUSR1`` to write all of the process's thread tracebacks to
``$TRACE_STALL_DUMP_DIR/<pid>.txt``, so a stalled run's processes can be read one by one. A daemon thread appends to
``<pid>.handler.txt`` each Python-level handler that later replaces faulthandler's for ``SIGUSR1`` (then the dumps
stop). (It shadows any other ``sitecustomize`` for those processes: a diagnostic run only.)"""

import faulthandler
import os
import signal
import threading


def _watch_handler(path: str, interval_s: float = 2.0) -> None:
    seen = signal.getsignal(signal.SIGUSR1)  # the signal module's view: faulthandler's C handler is not in it
    while True:
        threading.Event().wait(interval_s)
        now = signal.getsignal(signal.SIGUSR1)
        if now is not seen:
            seen = now
            name = f"{getattr(now, '__module__', '?')}.{getattr(now, '__qualname__', repr(now))}"
            with open(path, "a", encoding="utf-8") as out:
                out.write(f"SIGUSR1 handler replaced by {name}\n")


_dump_dir = os.environ.get("TRACE_STALL_DUMP_DIR")
if _dump_dir:
    try:
        _dump_file = open(os.path.join(_dump_dir, f"{os.getpid()}.txt"), "w")  # noqa: SIM115 - kept open
        faulthandler.register(signal.SIGUSR1, file=_dump_file, all_threads=True)
        threading.Thread(target=_watch_handler, args=(os.path.join(_dump_dir, f"{os.getpid()}.handler.txt"),),
                         name="trace-stall-dump-watch", daemon=True).start()
    except OSError:
        pass
