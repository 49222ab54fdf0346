"""Loaded by every Python process started with this directory on ``PYTHONPATH`` (``engine_input_ceiling.py
--stall-s`` and ``--sample-hz``), for ``$TRACE_STALL_DUMP_DIR``:

- registers ``SIGUSR1`` to write all of the process's thread tracebacks to ``<pid>.txt``, so a stalled run's
  processes can be read one by one. A daemon thread appends to ``<pid>.handler.txt`` each handler that later
  replaces faulthandler's for ``SIGUSR1`` (then the dumps stop): a Python one (the signal module's view), or one
  installed below Python (the C handler's address, read with ``sigaction`` and named with ``dladdr`` where the C
  library allows), every ``$TRACE_STALL_WATCH_S`` seconds (2 by default);
- with ``$TRACE_STACK_SAMPLE_HZ``, samples the process's own threads that often from a daemon thread
  (``sys._current_frames``, no signal) while the file ``sampling`` exists in that directory, appending each sample
  to ``<pid>.samples.txt`` in faulthandler's format after a ``# sample`` line (the file is created empty at start:
  the process runs the sampler).

(It shadows any other ``sitecustomize`` for those processes: a diagnostic run only.)"""

import faulthandler
import os
import signal
import sys
import threading
import time


def _c_handler():
    """The address of the process's C-level ``SIGUSR1`` handler, and a function naming an address; ``None`` where
    libc cannot be asked (the watch then covers the Python level only)."""
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

        class DlInfo(ctypes.Structure):
            _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                        ("saddr", ctypes.c_void_p)]

        old = ctypes.create_string_buffer(512)  # a struct sigaction; its first member is the handler

        def address():
            try:
                if libc.sigaction(signal.SIGUSR1, None, old) != 0:
                    return None
            except ctypes.ArgumentError:
                return None
            return ctypes.c_void_p.from_buffer(old).value or 0

        def name(addr):
            info = DlInfo()
            if addr > 1 and libc.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)):
                where = os.path.basename((info.fname or b"?").decode(errors="replace"))
                return f"{(info.sname or b'?').decode(errors='replace')} in {where}"
            return {0: "SIG_DFL", 1: "SIG_IGN"}.get(addr, "unknown")

        return address, name
    except (ImportError, OSError, AttributeError):
        return None


def _watch_handler(path: str, seen, c_level, seen_c, interval_s: float = 2.0) -> None:
    """Every ``interval_s``, compare the handler with the one seen last (first: faulthandler's, read at register)."""
    while True:
        threading.Event().wait(interval_s)
        now, now_c = signal.getsignal(signal.SIGUSR1), c_level[0]() if c_level else None
        lines = []
        if now is not seen:
            lines.append(f"SIGUSR1 handler replaced by {getattr(now, '__module__', '?')}."
                         f"{getattr(now, '__qualname__', repr(now))}")
        elif now_c != seen_c and now_c is not None:
            lines.append(f"SIGUSR1 handler replaced below Python by {c_level[1](now_c)} (0x{now_c:x})")
        seen, seen_c = now, now_c
        if lines:
            try:
                with open(path, "a", encoding="utf-8") as out:
                    out.write("\n".join(lines) + "\n")
            except OSError:
                return  # the dump directory is gone: nobody is reading


def _sample_stacks(dump_dir: str, interval_s: float) -> None:
    """Every ``interval_s`` while ``<dump_dir>/sampling`` exists: every other thread's stack, innermost first, as
    faulthandler writes it."""
    gate, me = os.path.join(dump_dir, "sampling"), threading.get_ident()
    try:
        out = open(os.path.join(dump_dir, f"{os.getpid()}.samples.txt"), "w", encoding="utf-8")  # noqa: SIM115
    except OSError:
        return
    with out:
        while True:
            time.sleep(interval_s)
            if not os.path.exists(gate):
                continue
            lines = ["# sample"]
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                lines.append(f"Thread 0x{ident:016x} (most recent call first):")
                while frame is not None:
                    code = frame.f_code
                    lines.append(f'  File "{code.co_filename}", line {frame.f_lineno} in {code.co_name}')
                    frame = frame.f_back
            try:
                out.write("\n".join(lines) + "\n\n")
                out.flush()
            except OSError:
                return  # the disk or the directory is gone: nobody is reading


_dump_dir = os.environ.get("TRACE_STALL_DUMP_DIR")
if _dump_dir:
    try:
        _dump_file = open(os.path.join(_dump_dir, f"{os.getpid()}.txt"), "w")  # noqa: SIM115 - kept open
        faulthandler.register(signal.SIGUSR1, file=_dump_file, all_threads=True)
        _c_level = _c_handler()
        try:
            _watch_s = float(os.environ.get("TRACE_STALL_WATCH_S") or 2.0)
        except ValueError:
            _watch_s = 2.0
        _watch_s = min(max(_watch_s, 0.05), 3600.0) if _watch_s == _watch_s else 2.0  # NaN: the default
        threading.Thread(target=_watch_handler, name="trace-stall-dump-watch", daemon=True,
                         args=(os.path.join(_dump_dir, f"{os.getpid()}.handler.txt"), signal.getsignal(signal.SIGUSR1),
                               _c_level, _c_level[0]() if _c_level else None, _watch_s)).start()
    except OSError:
        pass
    try:
        _hz = float(os.environ.get("TRACE_STACK_SAMPLE_HZ") or 0)
    except ValueError:
        _hz = 0.0
    if _hz > 0:
        threading.Thread(target=_sample_stacks, name="trace-stack-sampler", daemon=True,
                         args=(_dump_dir, 1.0 / _hz)).start()
