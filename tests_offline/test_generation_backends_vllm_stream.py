"""The vllm backend's request flow on a stub ``vllm.LLM`` (no engine): the feed is consumed while the engine
runs, at most ``max_num_seqs`` requests per ``enqueue_chat`` call and never more than ``in_flight`` held, each
request with its own seed, every request answered once under its own id."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from trace_lib.generation.backends.base import RequestFeed
from trace_lib.generation.request import ChatRequest
from trace_lib.testing.stub_vllm import StubLLM, stub_vllm_module


@pytest.fixture
def backend(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", stub_vllm_module())
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


@pytest.mark.parametrize("in_flight", [10, 150])
def test_the_loop_stats_say_how_many_requests_the_engine_held_per_step(backend, in_flight):
    before = backend.loop_stats.snapshot()
    list(backend.generate_stream(RequestFeed.of([_request(i, 42) for i in range(600)]), in_flight=in_flight))
    stats = backend.loop_stats.since(before)
    # topped up to in_flight while the feed lasts, then drained: the mean lies below in_flight, well above a
    # step's answers at the larger cap
    assert in_flight / 2 < stats.held / stats.steps <= in_flight
    assert f"holding {stats.held / stats.steps:.0f} requests on average" in stats.summary(1.0)


def test_engines_starting_on_one_gpu_take_turns_and_other_gpus_do_not_wait(tmp_path):
    """The engine-start lock (engines sharing a GPU size their KV caches one at a time): while an engine starts on
    GPU 0, one starting on GPUs 1,0 waits for it and one on GPU 2 does not."""
    from trace_lib.generation.backends.vllm import engine_start_lock

    events: list[tuple[str, str]] = []
    a_in, c_in = threading.Event(), threading.Event()

    def first() -> None:
        with engine_start_lock("0", lock_dir=tmp_path):
            events.append(("a", "in"))
            a_in.set()
            c_in.wait(timeout=10)  # held until GPU 2's engine got in (or 10 s, if it wrongly waited)
            events.append(("a", "out"))

    def other(name: str, devices: str, entered: threading.Event | None = None) -> None:
        with engine_start_lock(devices, lock_dir=tmp_path):
            events.append((name, "in"))
            if entered is not None:
                entered.set()

    threads = [threading.Thread(target=first)]
    threads[0].start()
    assert a_in.wait(timeout=10)
    threads += [threading.Thread(target=other, args=("b", "1,0")),
                threading.Thread(target=other, args=("c", "2", c_in))]
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    order = events.index
    assert order(("c", "in")) < order(("a", "out")) < order(("b", "in"))


def test_an_engine_that_dies_mid_stream_is_one_machine_line_after_what_it_answered(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", stub_vllm_module())
    from trace_lib.errors import EngineStoppedError
    from trace_lib.generation.backends.vllm import VLLMBackend

    backend = VLLMBackend(model_path="stub", served_name="m3b", llm=StubLLM(per_step=10, die_after_steps=2),
                          max_num_seqs=64)
    answered = []
    with pytest.raises(EngineStoppedError) as caught:
        for result in backend.generate_stream(RequestFeed.of([_request(i, 42) for i in range(50)]), in_flight=50):
            answered.append(result.request_id)
    assert len(answered) == 20  # two steps' answers were yielded before the third step found the engine dead
    assert caught.value.machine_failure
    line = caught.value.render()
    assert line.startswith("vllm: m3b: the vllm engine stopped while it generated, after 20 answer(s) with 30 "
                           "request(s) in flight (EngineDeadError: EngineCore encountered an issue.")
    assert "out of memory" in line and "\n" not in line


def test_an_engine_core_killed_outright_ends_the_stream_instead_of_stalling_it(monkeypatch):
    """vLLM's client marks a SIGKILLed engine core dead but leaves ``step()`` waiting for ever (the stub waits
    20 s, then fails the stream with ``AssertionError``): the stream ends in the same line within a second."""
    import time

    monkeypatch.setitem(sys.modules, "vllm", stub_vllm_module())
    from trace_lib.errors import EngineStoppedError
    from trace_lib.generation.backends.vllm import VLLMBackend

    backend = VLLMBackend(model_path="stub", served_name="m3b", llm=StubLLM(per_step=10, vanish_after_steps=2),
                          max_num_seqs=64)
    answered = []
    started = time.monotonic()
    with pytest.raises(EngineStoppedError) as caught:
        for result in backend.generate_stream(RequestFeed.of([_request(i, 42) for i in range(50)]), in_flight=50):
            answered.append(result.request_id)
    assert time.monotonic() - started < 5
    assert len(answered) == 20
    assert caught.value.render().startswith(
        "vllm: m3b: the vllm engine stopped while it generated, after 20 answer(s) with 30 request(s) in flight "
        "(EngineDeadError: EngineCore encountered an issue.")


def test_a_stop_signal_python_discarded_ends_the_stream_at_the_next_step(backend):
    """A Ctrl-C handled where Python discards the exception (here a weakref callback during a step) still ends the
    stream: the loop raises it again after the step, with the requests still held aborted."""
    from trace_lib.interrupts import Interrupted, stop_on_signals
    from trace_lib.testing.discarded_signal import signal_python_discards

    llm, step = backend.llm, backend.llm.llm_engine.step

    def discarding_step():
        if llm.steps == 2:
            signal_python_discards()
        return step()

    llm.llm_engine.step = discarding_step
    results = []
    with pytest.raises(Interrupted):
        with stop_on_signals():
            for result in backend.generate_stream(RequestFeed.of([_request(i, 42) for i in range(600)])):
                results.append(result)
    assert llm.steps == 3 and len(results) == 3 * 40  # the step that was running answered; no step after it


class _ProducingLLM(StubLLM):
    """A stub whose producer readies the next ``chunk`` requests while each batch is being added (as the
    campaign's producer thread does while the engine's thread renders), and records the engine's state."""

    def __init__(self, feed: RequestFeed, requests: list[ChatRequest], chunk: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.feed, self.waiting, self.chunk = feed, list(requests), chunk
        self.steps_at_add: list[int] = []
        self.held_at_step: list[int] = []

    def enqueue_chat(self, conversations, sampling_params, use_tqdm=False, mm_processor_kwargs=None):
        ids = super().enqueue_chat(conversations, sampling_params, use_tqdm, mm_processor_kwargs)
        self.steps_at_add.append(self.steps)
        ready, self.waiting = self.waiting[:self.chunk], self.waiting[self.chunk:]
        for request in ready:
            self.feed.put(request)
        if not self.waiting and ready:
            self.feed.finish()
        return ids

    def _step(self):
        self.held_at_step.append(len(self._pending))
        return super()._step()


def test_requests_readied_while_a_batch_is_added_join_it_before_the_engine_is_stepped(monkeypatch):
    """While the engine holds fewer than max_num_seqs, the loop adds what the feed holds ready before it waits on a
    step (a step only collects outputs), and steps once the engine holds max_num_seqs."""
    monkeypatch.setitem(sys.modules, "vllm", stub_vllm_module())
    from trace_lib.generation.backends.vllm import VLLMBackend

    feed = RequestFeed(capacity=1000)
    requests = [_request(i, 42) for i in range(100)]
    for request in requests[:16]:
        feed.put(request)
    llm = _ProducingLLM(feed, requests[16:], chunk=16, per_step=40)
    backend = VLLMBackend(model_path="stub", served_name="stub", llm=llm, max_num_seqs=64)
    results = list(backend.generate_stream(feed))
    assert sorted(r.request_id for r in results) == sorted(r.request_id for r in requests)
    # four chunks of 16 before the first step, which came once the engine held its 64
    assert llm.steps_at_add[:4] == [0] * 4 and llm.steps_at_add[4] >= 1 and llm.held_at_step[0] == 64


def test_with_nothing_ready_the_engine_is_stepped_rather_than_the_feed_polled(backend):
    """A producer that readies each next chunk only once the engine has stepped again: the loop, finding the feed
    empty, steps (it does not spin on the feed while the engine has free slots)."""
    feed = RequestFeed(capacity=1000)
    requests = [_request(i, 42) for i in range(40)]
    llm = backend.llm
    results: list = []

    def produce() -> None:
        for start in range(0, len(requests), 8):
            deadline = time.monotonic() + 10
            while llm.steps < start // 8 and time.monotonic() < deadline:
                time.sleep(0.001)
            for request in requests[start:start + 8]:
                feed.put(request)
        feed.finish()

    consumer = threading.Thread(target=lambda: results.extend(backend.generate_stream(feed)), daemon=True)
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    consumer.start()
    consumer.join(timeout=30)
    assert not consumer.is_alive() and len(results) == 40 and llm.steps >= 4
