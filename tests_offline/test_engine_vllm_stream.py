"""The vllm backend's request flow on a stub ``vllm.LLM`` (no engine): the feed is consumed while the engine
runs, at most ``max_num_seqs`` requests per ``enqueue_chat`` call and never more than ``in_flight`` held, each
request with its own seed, every request answered once under its own id."""

from __future__ import annotations

import json
import sys
import threading

import pytest

from trace_lib.generation.backends.base import RequestFeed
from trace_lib.generation.request import ChatRequest
from trace_lib.testing.stub_vllm import StubLLM, stub_vllm_modules


@pytest.fixture
def backend(monkeypatch):
    for name, module in stub_vllm_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    from trace_lib.generation.backends.vllm import VLLMBackend

    return VLLMBackend(model_path="stub", served_name="stub", llm=StubLLM(per_step=40), max_num_seqs=64)


def _request(i: int, seed: int) -> ChatRequest:
    return ChatRequest(f"{seed}|row{i}", ({"role": "user", "content": [{"type": "text", "text": f"q{i}"}]},),
                       {"temperature": 0.6, "top_p": 0.95, "max_tokens": 16, "seed": seed},
                       {"min_pixels": 3136, "max_pixels": 12845056})


def test_a_stream_of_two_seeds_is_answered_once_each_with_its_seed(backend):
    requests = [_request(i, seed) for seed in (42, 43) for i in range(300)]
    results = list(backend.generate_stream(RequestFeed.of(requests), in_flight=200))
    assert sorted(r.request_id for r in results) == sorted(r.request_id for r in requests)
    assert all(r.text == f"answer with seed {r.request_id.split('|')[0]}" for r in results)
    llm = backend.llm
    assert max(len(batch) for batch in llm.batches) <= 64 and 64 < llm.most_held <= 200  # topped up while running
    assert llm.most_seeds_held == 2  # the engine held both seeds' requests at once (no drain between them)


def test_a_producer_thread_feeding_a_bounded_queue_loses_nothing(backend):
    feed = RequestFeed(capacity=50)
    requests = [_request(i, 5) for i in range(500)]

    def produce() -> None:
        for request in requests:
            feed.put(request)
        feed.finish()

    producer = threading.Thread(target=produce)
    producer.start()
    results = list(backend.generate_stream(feed, in_flight=200))
    producer.join()
    assert sorted(r.request_id for r in results) == sorted(r.request_id for r in requests)


def test_a_slice_is_fed_in_chunks_while_the_engine_runs(backend):
    results = list(backend.generate([_request(i, 7) for i in range(150)]))
    assert len(results) == 150 and [len(b) for b in backend.llm.batches][:3] == [64, 64, 22]


def test_the_loop_stats_count_requests_added_and_engine_steps(backend):
    before = backend.loop_stats.snapshot()
    results = list(backend.generate([_request(i, 42) for i in range(600)]))
    stats = backend.loop_stats.since(before)
    assert len(results) == 600 and stats.requests == 600
    assert stats.steps >= 15 and stats.adding_s > 0 and stats.stepping_s >= 0  # the stub answers 40 per step
    assert stats.summary(2.0).startswith("adding 600 requests took ")


@pytest.fixture
def rendering(monkeypatch):
    """A backend whose stub engine renders on vLLM's asynchronous renderer (render_workers > 1)."""
    for name, module in stub_vllm_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    from trace_lib.generation.backends.vllm import VLLMBackend

    backend = VLLMBackend(model_path="stub", served_name="stub", max_num_seqs=64,
                          llm=StubLLM(per_step=40, render_workers=4, render_delay_s=0.002))
    yield backend
    backend.close()


def _question(result) -> str:  # noqa: ANN001 - the text the stub's renderer rendered for this answer
    return json.loads(result.text.split(" to ", 1)[1])[0]["content"][0]["text"]


def test_concurrent_rendering_renders_a_rows_seeds_once_and_answers_each_request_with_its_own_render(rendering):
    requests = [_request(row, seed) for chunk in range(0, 120, 40) for seed in (42, 43, 44)
                for row in range(chunk, chunk + 40)]  # lockstep: 40 rows of each seed, chunk after chunk
    results = list(rendering.generate_stream(RequestFeed.of(requests), in_flight=200))
    assert sorted(r.request_id for r in results) == sorted(r.request_id for r in requests)
    for r in results:
        seed, row = r.request_id.split("|")
        assert r.text.startswith(f"answer with seed {seed} to ") and _question(r) == f"q{row[3:]}"
    llm = rendering.llm
    assert len(llm.renderer.rendered) == 120 == len(set(llm.renderer.rendered))  # one render per row
    assert (rendering.renderer.stats.rendered, rendering.renderer.stats.shared) == (120, 240)
    assert llm.batches == [] and llm.most_seeds_held == 3  # added rendered, never through enqueue_chat


def test_a_render_failure_is_raised_after_aborting_what_the_engine_holds_and_the_backend_recovers(rendering):
    failing = ChatRequest("42|bad", ({"role": "user", "content": [{"type": "text", "text": "FAIL"}]},),
                          {"max_tokens": 16, "seed": 42}, {})
    requests = [_request(i, 42) for i in range(100)] + [failing] + [_request(i, 43) for i in range(100)]
    rendering.llm.per_step = 0  # the engine still holds the rows rendered before the failing one
    with pytest.raises(ValueError, match="cannot render"):
        list(rendering.generate_stream(RequestFeed.of(requests), in_flight=300))
    assert rendering.llm.aborted and not rendering.llm.llm_engine.has_unfinished_requests()
    assert rendering.renderer.pending == 0
    rendering.llm.per_step = 40
    results = list(rendering.generate([_request(i, 44) for i in range(50)]))
    assert sorted(r.request_id for r in results) == sorted(f"44|row{i}" for i in range(50))


def test_an_idle_engine_waiting_for_renders_is_counted(rendering):
    before = rendering.loop_stats.snapshot()
    results = list(rendering.generate([_request(i, 42) for i in range(30)]))
    stats = rendering.loop_stats.since(before)
    assert len(results) == 30 and stats.requests == 30 and stats.render_wait_s > 0
    assert "an idle engine waited" in stats.summary(1.0)


def test_render_workers_need_the_asynchronous_renderer(monkeypatch):
    for name, module in stub_vllm_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    from trace_lib.errors import BackendError
    from trace_lib.generation.backends.vllm import VLLMBackend
    from trace_lib.generation.backends.vllm_render import ConcurrentRenderer

    with pytest.raises(BackendError, match="no asynchronous chat renderer"):
        ConcurrentRenderer(StubLLM())
    with pytest.raises(BackendError, match="at least 1"):
        VLLMBackend(model_path="stub", served_name="stub", render_workers=0)
