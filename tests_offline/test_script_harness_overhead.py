"""benchmarks/harness_overhead.py's own arithmetic (the paths ``--paths`` selects, the engine processes' CPU, the
steps counted) and benchmarks/_processes.py, the /proc reader it shares with engine_input_ceiling.py."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import harness_overhead  # noqa: E402


@pytest.mark.parametrize(("text", "paths"), [("stream", ["raw", "stream"]), ("stream,raw", ["raw", "stream"]),
                                             ("harness, stream", ["raw", "harness", "stream"]), ("raw", ["raw"])])
def test_paths_are_kept_in_run_order_with_raw_always_first(text, paths):
    assert harness_overhead.paths_arg(text) == paths


def test_an_unknown_path_is_refused_by_name():
    with pytest.raises(argparse.ArgumentTypeError, match=r"unknown path\(s\) streamed \(choose from"):
        harness_overhead.paths_arg("raw,streamed")


def test_the_cpu_of_live_descendants_is_counted_and_not_that_of_other_processes():
    """A child and its grandchild spinning for about a second each count; this process's own CPU does not."""
    spin = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass\ntime.sleep(30)"
    grandparent = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {spin!r}]); exec({spin!r})"
    child = subprocess.Popen([sys.executable, "-c", grandparent], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while harness_overhead.children_cpu_seconds() < 1.9 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert 1.9 <= harness_overhead.children_cpu_seconds() < 3.5
        assert harness_overhead.children_cpu_seconds(child.pid) < harness_overhead.children_cpu_seconds()
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the group this test started: child and grandchild
        child.wait()


def test_engine_steps_are_counted_for_every_caller_of_the_instance():
    from types import SimpleNamespace

    engine = SimpleNamespace(step=lambda: ["out"])
    count = harness_overhead.count_engine_steps(engine)
    assert [engine.step() for _ in range(3)] == [["out"]] * 3 and count == [3]


def test_a_process_whose_name_holds_parentheses_and_spaces_is_read_whole(tmp_path):
    """``/proc/<pid>/stat`` puts the command name in parentheses, and a name may hold ``) (`` itself."""
    import _processes

    odd = tmp_path / "a) (b c"
    odd.symlink_to(sys.executable)
    child = subprocess.Popen([str(odd), "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while (found := _processes.read_process(child.pid)) is None or found.name != "a) (b c":
            assert time.monotonic() < deadline, found
            time.sleep(0.05)
        assert found.ppid == os.getpid() and found.cpu_s >= 0
        assert child.pid in [p.pid for p in _processes.descendants()]
        assert _processes.read_process(2**22 + 1) is None and _processes.cpu_seconds(2**22 + 1) == 0.0
    finally:
        child.kill()
        child.wait()



def test_each_add_is_timed_for_every_caller_and_the_ramp_up_read_from_the_times():
    from types import SimpleNamespace

    engine = SimpleNamespace(add_request=lambda request_id, prompt, params: request_id)
    times = harness_overhead.record_add_times(engine)
    assert [engine.add_request(str(i), "p", None) for i in range(3)] == ["0", "1", "2"] and len(times) == 3
    assert times == sorted(times)
    assert harness_overhead.ramp_up([10.5, 10.75, 11.0], 10.0, 2) == (0.75, 1.0)
    assert harness_overhead.ramp_up([10.5, 10.75], 10.0, 256) == (0.75, 0.75)  # fewer requests than slots
    assert all(value != value for value in harness_overhead.ramp_up([], 10.0, 2))  # NaN: nothing was added
