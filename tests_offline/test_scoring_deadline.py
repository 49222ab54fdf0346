"""Scoring time limits without SIGALRM: DeadlineWorker, and MathVision's is_equal cut and scored as upstream."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from trace_lib.benchmarks import _math_equal, mathvision
from trace_lib.scoring.deadline import DeadlineWorker

pytestmark = pytest.mark.offline


@pytest.fixture
def worker():
    w = DeadlineWorker("trace_lib.testing.slow_calls:sleep_then", 0.5)
    yield w
    w.close()


def test_a_call_past_the_limit_is_cut_and_the_next_call_gets_a_fresh_child(worker):
    assert worker.call(0, "warm") == "warm"
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        worker.call(30, "late")
    assert time.monotonic() - started < 10 and worker.restarts == 1
    assert worker.call(0.01, ["fresh"]) == ["fresh"]  # restarted child answers


def test_the_limit_holds_in_a_thread_and_under_an_armed_alarm(worker):
    """pytest-timeout (signal method) keeps SIGALRM armed during a test; the deadline must not care."""
    armed_here = signal.getitimer(signal.ITIMER_REAL)[0] == 0
    if armed_here:  # e.g. pytest -p no:timeout: arm one ourselves (disarmed below)
        previous = signal.signal(signal.SIGALRM, lambda *_: None)
        signal.setitimer(signal.ITIMER_REAL, 120)
    outcome: list[object] = []

    def run() -> None:
        try:
            worker.call(30, "late")
        except TimeoutError as exc:
            outcome.append(exc)

    try:
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0
        thread = threading.Thread(target=run)
        thread.start()
        thread.join(20)
    finally:
        if armed_here:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    assert len(outcome) == 1 and isinstance(outcome[0], TimeoutError)


def test_mathvision_uses_upstreams_30_second_limit():
    assert _math_equal.TIME_LIMIT_S == 30 and _math_equal._WORKER.limit_s == 30


def test_a_slow_is_equal_is_cut_and_scored_as_upstreams_timeout(monkeypatch):
    """Upstream: timeout_decorator raises TimeoutError, post_check catches it and scores False (prefetch: no
    answer); a string match never reaches the comparison."""
    slow = DeadlineWorker("trace_lib.testing.slow_calls:slow_is_equal", 0.5)
    monkeypatch.setattr(_math_equal, "_WORKER", slow)
    try:
        started = time.monotonic()
        assert _math_equal.is_equal("\\frac{1}{2}", "0.5") is False
        assert mathvision.post_check({"answer": "0.5", "choices": "[]", "prediction": "1/2"}, prefetch=True) is False
        assert mathvision.post_check({"answer": "0.5", "choices": "[]", "res": "1/2"}, prefetch=False) is False
        assert time.monotonic() - started < 15 and slow.restarts == 3
        assert _math_equal.is_equal(" 0.5", "0.5") is True
    finally:
        slow.close()
        monkeypatch.undo()
    assert _math_equal.is_equal("1/2", "0.5") is True  # the real comparison (eval) still says equal


def test_one_child_serves_call_after_call_and_a_call_past_the_limit_says_so():
    worker = DeadlineWorker("trace_lib.testing.slow_calls:pid", 5)
    try:
        first = worker.call()
        assert worker.call() == first and worker.restarts == 0
    finally:
        worker.close()
    late = DeadlineWorker("trace_lib.testing.slow_calls:sleep_then", 0.2)
    try:
        with pytest.raises(TimeoutError, match="^call timed out$"):
            late.call(30, "late")
    finally:
        late.close()


def test_the_targets_exception_is_raised_here_and_an_unpicklable_result_is_a_runtime_error_naming_it():
    worker = DeadlineWorker("trace_lib.testing.slow_calls:fail_with", 5)
    try:
        with pytest.raises(ValueError, match="^bad row$"):
            worker.call("bad row")
    finally:
        worker.close()
    worker = DeadlineWorker("trace_lib.testing.slow_calls:unpicklable", 5)
    try:
        with pytest.raises(RuntimeError, match="^<function unpicklable.<locals>.<lambda> at 0x"):
            worker.call()
    finally:
        worker.close()


def test_a_child_that_dies_mid_call_is_a_worker_error_and_the_next_call_gets_a_fresh_child():
    from trace_lib.scoring.deadline import DeadlineWorkerError

    target = "trace_lib.testing.slow_calls:exit_now"
    worker = DeadlineWorker(target, 5)
    try:
        with pytest.raises(DeadlineWorkerError) as caught:
            worker.call(3)
        assert str(caught.value) == f"deadline worker for {target} died: child exited"
        with pytest.raises(DeadlineWorkerError):
            worker.call(4)  # a new child, which dies the same way: never a hang on the dead one
        assert worker.restarts == 0  # deaths are not timeouts
    finally:
        worker.close()


def test_close_stops_the_child_and_closes_its_pipes():
    worker = DeadlineWorker("trace_lib.testing.slow_calls:pid", 5)
    child_pid = worker.call()
    child = worker._child
    worker.close()
    assert child.poll() is not None and child.stdin.closed and child.stdout.closed
    assert worker.call() != child_pid  # a later call starts a new child
    worker.close()
