"""The campaign scorer keeps the judge saturated whatever the slice sizes (one in-flight window per endpoint
shared by all slices, slices started while it has room), with the same files at any concurrency; the transport
survives a judge that drops connections or never answers (trace_lib/testing/sim_engine.py)."""

from __future__ import annotations

import collections
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from trace_lib.scoring.judge import OpenAIJudge
from trace_lib.scoring.judge_http import CallFailed, JudgeTransport
from trace_lib.testing.loopback_http import trickling
from trace_lib.testing.sim_engine import SimulatedEngine, build_judged_campaign, score_judged_campaign
from trace_lib.testing.synthetic_campaign import toy_judge_answer

pytestmark = pytest.mark.offline

BENCHMARKS = ("erqa", "logicvista", "treebench", "blink", "mmstar", "realworldqa", "embspatial", "countqa")
SLOTS = 16  # the simulated engine's max_num_seqs


def _judge(url: str, concurrency: int, **kwargs) -> OpenAIJudge:
    return OpenAIJudge(url, transport=JudgeTransport(concurrency=concurrency), backoff_s=0, chat_pause_s=0,
                       **kwargs)


def _mean_running(tmp_path, name: str, *, jobs: int, max_jobs: int) -> float:
    """24 slices of 3 rows (a per-slice window of 4 slices offers at most 12 of the engine's 16 slots)."""
    campaign = build_judged_campaign(tmp_path / name, benchmarks=BENCHMARKS, seeds=(42, 43, 44), rows=3)
    with SimulatedEngine(toy_judge_answer, max_num_seqs=SLOTS, service_s=0.1) as engine:
        score_judged_campaign(campaign, _judge(engine.url, SLOTS + SLOTS // 2), jobs=jobs, max_jobs=max_jobs)
        stats = engine.stats
    assert stats.prompts == campaign.prompts
    return stats.mean_running


def test_small_slices_keep_the_engine_full(tmp_path):
    """With the shared window the engine runs >= 0.6 x its slots on average over the busy span; with a fixed
    four slices at once (the former per-slice design) it cannot (the bar is discriminating)."""
    shared = _mean_running(tmp_path, "shared", jobs=4, max_jobs=32)
    fixed = _mean_running(tmp_path, "fixed", jobs=4, max_jobs=4)
    assert shared >= 0.6 * SLOTS, f"mean running {shared:.1f} of {SLOTS} slots (fixed 4 slices: {fixed:.1f})"
    assert fixed < 0.6 * SLOTS, f"fixed 4 slices already ran {fixed:.1f} of {SLOTS}: the bar proves nothing"


def test_the_files_are_the_same_at_concurrency_one_and_high(tmp_path, monkeypatch):
    """records.jsonl bytes and scores.json (less time and paths) per slice: one slice and one request at a time,
    in the protocol's order, equal many slices and the whole window, prefix-ordered."""
    outputs = {}
    for name, concurrency, jobs, order in (("one", 1, 1, "0"), ("high", 192, 8, "1")):
        monkeypatch.setenv("TRACE_JUDGE_PREFIX_ORDER", order)
        campaign = build_judged_campaign(tmp_path / name, benchmarks=BENCHMARKS[:4], seeds=(42, 43), rows=9)
        with SimulatedEngine(toy_judge_answer, max_num_seqs=64, service_s=0.0) as engine:
            outputs[name] = score_judged_campaign(campaign, _judge(engine.url, concurrency, batch_size=4),
                                                  jobs=jobs, max_jobs=jobs)
    assert len(outputs["one"]) == 8 and outputs["one"] == outputs["high"]
    assert any(b'"extracted": "D"' in records for records, _ in outputs["one"].values())  # the ladder route ran


def test_one_window_per_endpoint_is_shared_by_all_calls(tmp_path):
    """Calls from many threads never put more sequences in flight at an endpoint than its window, and fill it."""
    with SimulatedEngine(toy_judge_answer, max_num_seqs=64, service_s=0.05) as engine:
        judge = _judge(engine.url, 24, batch_size=5)
        prompts = [f"Which letter does this answer give? B {i}" for i in range(40)]
        with ThreadPoolExecutor(6) as pool:
            replies = list(pool.map(lambda n: judge.complete(prompts, max_tokens=16) if n % 2 else
                                    judge.chat(prompts, max_tokens=16), range(6)))
        window = judge.transport.window(engine.url)
        assert all(r.text == "B" for batch in replies for r in batch)
        assert window.peak == 24 and engine.stats.peak_running <= 24 and window.load == 0


def test_connections_dropped_by_the_judge_neither_fail_nor_hang_a_request():
    """256 threads against a server that closes idle kept-alive connections after 50 ms: every request answers
    (httpcore's shared pool failed some with ReadError: Bad file descriptor, or left one waiting)."""
    transport = JudgeTransport(concurrency=256)
    failures: collections.Counter = collections.Counter()
    with SimulatedEngine(toy_judge_answer, max_num_seqs=256, service_s=0.002, idle_timeout_s=0.05) as engine:
        url = f"{engine.url}/chat/completions"
        body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "give? C"}]}]}

        def one(i: int) -> None:
            time.sleep((i % 7) * 0.004)
            try:
                assert transport.post(url, body, timeout_s=20).data["choices"][0]["message"]["content"] == "C"
            except CallFailed as exc:
                failures[exc.reason[:50]] += 1

        started = time.monotonic()
        with ThreadPoolExecutor(256) as pool:
            list(pool.map(one, range(256 * 8)))
    assert not failures and time.monotonic() - started < 60, dict(failures)
    transport.close()


def test_a_dropped_answer_and_a_hung_request_are_retried_within_their_timeouts():
    """Every 5th request loses its connection after being served, the 3rd never answers: the ladder's
    retries recover every reply, the hung one after its (bounded) timeout."""
    with SimulatedEngine(toy_judge_answer, max_num_seqs=8, service_s=0.01, drop_every=5, hang=3) as engine:
        judge = _judge(engine.url, 8, batch_size=2, timeout_s=1.5, chat_timeout_s=1.5)
        prompts = [f"Which letter does this answer give? {letter}" for letter in "ABCABCABCABC"]
        started = time.monotonic()
        chat = judge.chat(prompts, max_tokens=16)
        done = judge.complete(prompts, max_tokens=16)
        took = time.monotonic() - started
        assert engine.dropped >= 2
    assert [r.text for r in chat] == [r.text for r in done] == list("ABCABCABCABC")
    assert all(r.ok for r in chat) and 1.5 <= took < 10, took


def test_every_request_ends_by_its_deadline_even_when_the_server_trickles():
    """A server that sends a byte every 0.2 s never trips a read timeout of 1 s: the watchdog ends the exchange
    at its deadline, as a timeout."""
    transport = JudgeTransport(concurrency=4)
    with trickling(every_s=0.2, for_s=30.0) as base:
        started = time.monotonic()
        with pytest.raises(CallFailed) as failed:
            transport.post(f"{base}/v1/completions", {}, timeout_s=1.0)
    assert failed.value.kind == "timeout" and time.monotonic() - started < 3
