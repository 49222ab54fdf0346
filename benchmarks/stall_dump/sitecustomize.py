"""Loaded by every Python process started with this directory on ``PYTHONPATH`` (``engine_input_ceiling.py
--stall-s`` and ``--sample-hz``): registers ``SIGUSR1`` to write all of the process's thread tracebacks to
``$TRACE_STALL_DUMP_DIR/<pid>.txt``, so a stalled run's processes can be read one by one. (It shadows any other
``sitecustomize`` for those processes: a diagnostic run only.)"""

import faulthandler
import os
import signal

_dump_dir = os.environ.get("TRACE_STALL_DUMP_DIR")
if _dump_dir:
    try:
        _dump_file = open(os.path.join(_dump_dir, f"{os.getpid()}.txt"), "w")  # noqa: SIM115 - kept open
        faulthandler.register(signal.SIGUSR1, file=_dump_file, all_threads=True)
    except OSError:
        pass
