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
