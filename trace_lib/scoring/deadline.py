"""Calls with a wall-clock deadline, independent of signals: one long-lived child Python per target, killed and
restarted when a call runs past its limit.

Upstream limits MathVision's ``is_equal`` with ``timeout_decorator.timeout(30, use_signals=False)`` (a fresh
process per call). A process per call costs tens of milliseconds; :class:`DeadlineWorker` keeps one child alive
and only pays a restart after a timeout. It behaves the same under pytest (whose pytest-timeout owns SIGALRM),
in threads and in the CLI. Targets are ``"module:function"`` names (the child imports them); arguments and results
are pickled over the child's stdin/stdout.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
import weakref
from typing import Any

_HEADER = struct.Struct(">Q")


class DeadlineWorkerError(RuntimeError):
    """The child process died or could not answer (not a timeout)."""


class DeadlineWorker:
    """``call(*args)`` runs ``target(*args)`` in the child and returns its result or re-raises its exception;
    past ``limit_s`` seconds the child is killed and :class:`TimeoutError` raised (the next call starts a new
    child); a child that dies otherwise raises :class:`DeadlineWorkerError`. Thread-safe (calls are serialized)."""

    def __init__(self, target: str, limit_s: float) -> None:
        self.target = target
        self.limit_s = float(limit_s)
        self.restarts = 0  # children killed for running past the limit
        self._child: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        weakref.finalize(self, _kill, self.__dict__)  # also runs at interpreter exit

    def call(self, *args: Any) -> Any:
        with self._lock:
            child = self._ensure_child()
            payload = pickle.dumps(args, protocol=pickle.HIGHEST_PROTOCOL)
            try:
                child.stdin.write(_HEADER.pack(len(payload)) + payload)  # type: ignore[union-attr]
                child.stdin.flush()  # type: ignore[union-attr]
                status, value = pickle.loads(self._read_reply(child, time.monotonic() + self.limit_s))
            except TimeoutError:
                self.restarts += 1
                self._stop()
                raise
            except (OSError, EOFError, pickle.UnpicklingError, struct.error) as exc:
                self._stop()
                raise DeadlineWorkerError(f"deadline worker for {self.target} died: {exc}") from None
        if status == "ok":
            return value
        raise value

    def close(self) -> None:
        """Stop the child (a later call starts a new one)."""
        with self._lock:
            self._stop()

    def _ensure_child(self) -> subprocess.Popen[bytes]:
        if self._child is None or self._child.poll() is not None:
            self._stop()
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
            self._child = subprocess.Popen(
                [sys.executable, "-c", "from trace_lib.scoring.deadline import child_main; child_main()", self.target],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            )
        return self._child

    def _read_reply(self, child: subprocess.Popen[bytes], deadline: float) -> bytes:
        fd = child.stdout.fileno()  # type: ignore[union-attr]
        header = _read_exactly(fd, _HEADER.size, deadline)
        return _read_exactly(fd, _HEADER.unpack(header)[0], deadline)

    def _stop(self) -> None:
        _kill(self.__dict__)


def _kill(state: dict[str, Any]) -> None:
    child = state.get("_child")
    state["_child"] = None
    if child is None:
        return
    if child.poll() is None:
        child.kill()
    child.wait()
    for stream in (child.stdin, child.stdout):
        if stream is not None:
            stream.close()


def _read_exactly(fd: int, size: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise TimeoutError("call timed out")
        chunk = os.read(fd, left)
        if not chunk:
            raise EOFError("child exited")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def child_main() -> None:
    """The child's loop: read pickled argument tuples, answer ``("ok", result)`` or ``("raise", exception)``."""
    import importlib

    module, _, name = sys.argv[1].partition(":")
    target = getattr(importlib.import_module(module), name)
    inp, out = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything the target prints goes to stderr, never into the reply stream
    while True:
        header = inp.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        args = pickle.loads(inp.read(_HEADER.unpack(header)[0]))
        try:
            reply = ("ok", target(*args))
        except Exception as exc:  # noqa: BLE001 - handed back to the caller
            reply = ("raise", exc)
        try:
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an unpicklable result or exception
            data = pickle.dumps(("raise", RuntimeError(repr(reply[1]))), protocol=pickle.HIGHEST_PROTOCOL)
        out.write(_HEADER.pack(len(data)) + data)
        out.flush()
