"""benchmarks/_stack_samples.py with benchmarks/stall_dump: a real process's tracebacks, dumped on a signal or sampled
by the process itself, and attributed to its call paths."""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import _stack_samples as ss  # noqa: E402


def _spin(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(1000))


def test_parse_splits_appended_dumps_into_samples_innermost_first(tmp_path: Path) -> None:
    stop = threading.Event()
    worker = threading.Thread(target=_spin, args=(stop,), daemon=True)
    worker.start()
    try:
        with open(tmp_path / "dump.txt", "w") as dump:
            for _ in range(3):
                faulthandler.dump_traceback(dump, all_threads=True)
    finally:
        stop.set()
        worker.join()
    samples = ss.parse_dumps((tmp_path / "dump.txt").read_text())
    assert len(samples) == 3
    for sample in samples:
        spinning = [frames for frames in sample.values() if any(func == "_spin" for _, func in frames)]
        assert len(spinning) == 1
        funcs = [func for _, func in spinning[0]]
        assert funcs.index("_spin") < funcs.index("run")  # innermost first: _spin is called by Thread.run


def test_phases_and_innermost_count_the_anchor_threads_paths() -> None:
    busy = {"0x1": [("core.py", "execute_model"), ("core.py", "step"), ("core.py", "run_busy_loop")],
            "0x2": [("threading.py", "wait"), ("queue.py", "get")]}
    waiting = {"0x1": [("sched.py", "schedule"), ("core.py", "step"), ("core.py", "run_busy_loop")]}
    other = {"0x3": [("x.py", "f")]}
    samples = [busy, busy, waiting, other]
    assert ss.phases(samples, "run_busy_loop") == {"step > execute_model": 2, "step > schedule": 1,
                                                   "(no anchor)": 1}
    assert ss.innermost(samples, "run_busy_loop", depth=1) == {"core.py:execute_model": 2, "sched.py:schedule": 1}
    text = ss.report(samples, "run_busy_loop")
    assert "50.0%  step > execute_model" in text and "25.0%  (no anchor)" in text


CHILD = textwrap.dedent("""
    import faulthandler, os, signal, sys, time
    dump = open(os.path.join(sys.argv[1], f"{os.getpid()}.txt"), "w")
    faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True)
    print("ready", flush=True)

    def hot():
        end = time.monotonic() + 30
        while time.monotonic() < end:
            sum(range(500))

    def cold():
        time.sleep(30)

    def run_busy_loop():
        while True:
            hot(); cold()

    run_busy_loop()
""")


SAMPLED = textwrap.dedent("""
    import time

    def hot():
        end = time.monotonic() + 30
        while time.monotonic() < end:
            sum(range(500))

    def run_busy_loop():
        hot()

    print("ready", flush=True)
    run_busy_loop()
""")


def _with_stall_dump(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment under which a child loads benchmarks/stall_dump's sitecustomize for ``tmp_path``."""
    return {**os.environ, "TRACE_STALL_DUMP_DIR": str(tmp_path), **extra,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(BENCHMARKS / "stall_dump"), os.environ.get("PYTHONPATH")]))}


def test_a_process_samples_its_own_threads_only_while_the_gate_is_open(tmp_path: Path) -> None:
    """No signal: the sitecustomize's thread writes samples while StackSampler is entered, and none outside it; a
    process that runs no sampler is left out."""
    child = subprocess.Popen([sys.executable, "-c", SAMPLED], stdout=subprocess.PIPE, text=True,
                             env=_with_stall_dump(tmp_path, TRACE_STACK_SAMPLE_HZ="50"))
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.stdout.readline().strip() == "ready"
        samples_file = tmp_path / f"{child.pid}.samples.txt"
        time.sleep(0.5)
        assert samples_file.exists() and samples_file.stat().st_size == 0  # gate closed: nothing written
        with ss.StackSampler([child.pid, bystander.pid], tmp_path) as sampler:
            time.sleep(0.8)
        assert sampler.pids == [child.pid]
        samples = sampler.samples(child.pid)
        assert len(samples) >= 10
        assert ss.phases(samples, "run_busy_loop").most_common(1)[0][0] == "hot"
        assert all(not any("_sample_stacks" == func for frames in sample.values() for _, func in frames)
                   for sample in samples)  # the sampler leaves itself out
        assert sampler.account(child.pid) == f"{len(samples)} samples in {sampler.seconds:.1f} s"
        size = samples_file.stat().st_size
        time.sleep(0.3)
        assert samples_file.stat().st_size == size  # closed again: no more
        assert not (tmp_path / "sampling").exists() and bystander.poll() is None
    finally:
        for process in (child, bystander):
            process.kill()
            process.wait()


def test_each_own_sample_is_one_sample_even_when_threads_come_and_go() -> None:
    text = ("# sample\nThread 0x1 (most recent call first):\n  File \"a.py\", line 1 in f\n\n"
            "# sample\nThread 0x2 (most recent call first):\n  File \"b.py\", line 2 in g\n\n")
    assert ss.parse_dumps(text) == [{"0x1": [("a.py", "f")]}, {"0x2": [("b.py", "g")]}]


@pytest.mark.skipif(not hasattr(os, "kill") or sys.platform == "win32", reason="POSIX signals")
def test_dump_once_returns_this_dump_only(tmp_path: Path) -> None:
    """What a stalled run prints: each registered process's tracebacks of now, not the earlier samples' ones."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        ss.dump_once([child.pid], tmp_path, wait_s=0.3)
        dumps = ss.dump_once([child.pid, os.getpid()], tmp_path, wait_s=0.3)  # this process: no handler, skipped
        assert list(dumps) == [child.pid]
        assert len(ss.parse_dumps(dumps[child.pid])) == 1
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_a_pid_that_is_another_process_now_is_not_signalled() -> None:
    """The identity found first (start time) must still hold: a reused pid (here: a wrong start time recorded
    for a live process without the handler, which SIGUSR1 would kill) is skipped."""
    from trace_lib.scoring.judge_pool import process_identity

    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        now = process_identity(bystander.pid)
        assert now is not None
        ss._signal({bystander.pid: dataclasses.replace(now, start_ticks=now.start_ticks - 1)})
        time.sleep(0.3)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


NO_HANDLER = textwrap.dedent("""
    import os, sys, time
    open(os.path.join(sys.argv[1], f"{os.getpid()}.txt"), "w")  # the dump file, but no handler behind it
    print("ready", flush=True)
    time.sleep(30)
""")

BLOCKING = textwrap.dedent("""
    import faulthandler, os, signal, sys, time
    dump = open(os.path.join(sys.argv[1], f"{os.getpid()}.txt"), "w")
    faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # the only thread: the signal stays pending
    print("ready", flush=True)
    time.sleep(30)
""")


def _started(code: str, tmp_path: Path) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    return child


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/PID/status")
def test_a_dump_file_without_a_handler_behind_it_is_not_signalled(tmp_path: Path) -> None:
    """A dump file alone does not make a process safe to signal (SIGUSR1 would kill it): it must catch it."""
    child = _started(NO_HANDLER, tmp_path)
    try:
        assert ss.disposition(child.pid).caught is False
        assert ss.dump_once([child.pid], tmp_path, wait_s=0.3) == {}
        time.sleep(0.3)
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/PID/status")
def test_a_process_that_writes_no_dump_is_explained(tmp_path: Path) -> None:
    """Its threads all block SIGUSR1: the explanation says so (blocked, pending), not just an empty dump."""
    child = _started(BLOCKING, tmp_path)
    try:
        assert ss.dump_once([child.pid], tmp_path, wait_s=0.3) == {child.pid: ""}
        assert ss.why_no_dump(child.pid, tmp_path) == ("SIGUSR1 caught, blocked in 1 of 1 threads, pending, "
                                                       "dump file open")
    finally:
        child.kill()
        child.wait()


REPLACING = textwrap.dedent("""
    import signal, time

    def quiet(signum, frame):
        pass

    signal.signal(signal.SIGUSR1, quiet)  # over faulthandler's (stall_dump's sitecustomize): no dump any more
    print("ready", flush=True)
    time.sleep(30)
""")


REPLACING_IN_C = textwrap.dedent("""
    import ctypes, ctypes.util, signal, time

    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.signal.restype, libc.signal.argtypes = ctypes.c_void_p, [ctypes.c_int, ctypes.c_void_p]
    libc.signal(signal.SIGUSR1, ctypes.cast(libc.getpid, ctypes.c_void_p))  # a harmless C handler; Python unaware
    print("ready", flush=True)
    time.sleep(30)
""")


def _why_a_replaced_handler_writes_nothing(code: str, tmp_path: Path) -> str:
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env=_with_stall_dump(tmp_path, TRACE_STALL_WATCH_S="0.1"))
    try:
        assert child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while not (tmp_path / f"{child.pid}.handler.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ss.dump_once([child.pid], tmp_path, wait_s=0.3) == {child.pid: ""} and child.poll() is None
        return ss.why_no_dump(child.pid, tmp_path)
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/PID/status")
def test_a_python_handler_installed_over_the_dump_handler_is_named(tmp_path: Path) -> None:
    """benchmarks/stall_dump's sitecustomize watches the handler: the explanation names the Python one that replaced
    faulthandler's, the reason such a process writes nothing when signalled."""
    why = _why_a_replaced_handler_writes_nothing(REPLACING, tmp_path)
    assert why.endswith("SIGUSR1 handler replaced by __main__.quiet")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/PID/status")
def test_a_c_handler_installed_over_the_dump_handler_is_named(tmp_path: Path) -> None:
    """One installed below Python (a library's own sigaction, invisible to the signal module): named by the C
    library's dladdr."""
    account = _why_a_replaced_handler_writes_nothing(REPLACING_IN_C, tmp_path)
    assert "SIGUSR1 handler replaced below Python by " in account and "getpid in libc" in account
