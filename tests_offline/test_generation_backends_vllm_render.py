"""The vllm backend rendering in worker processes (``input_workers``) on a stub ``vllm.LLM``: real spawned
processes run the render-worker protocol with :func:`~trace_lib.testing.stub_vllm.stub_renderer`; every request
is answered once with its own seed, each rendered request's images are injected into the engine's cache before it
is added, refusals at rendering or at adding fail only their request, and a dead worker is a clear error."""

from __future__ import annotations

import sys

import pytest

from trace_lib.errors import BackendError
from trace_lib.generation.backends.base import RequestFeed
from trace_lib.generation.backends.vllm_render import route
from trace_lib.generation.request import ChatRequest, RequestFailure
from trace_lib.testing.stub_vllm import STUB_RENDER_CONFIG, StubLLM, stub_vllm_module

STUB_RENDERER = "trace_lib.testing.stub_vllm:stub_renderer"


@pytest.fixture
def make_backend(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", stub_vllm_module())
    from trace_lib.generation.backends.vllm import VLLMBackend

    made = []

    def make(*, workers: int = 2, refuse: str | None = None, factory: str | None = STUB_RENDERER):
        backend = VLLMBackend(model_path="stub", served_name="stub", llm=StubLLM(per_step=40, refuse=refuse),
                              max_num_seqs=64, input_workers=workers, renderer_factory=factory)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def _request(i: int, seed: int, text: str = "") -> ChatRequest:
    return ChatRequest(f"{seed}|row{i}", ({"role": "user", "content": [{"type": "text", "text": f"q{i} {text}"}]},),
                       {"temperature": 0.6, "top_p": 0.95, "max_tokens": 16, "seed": seed},
                       {"min_pixels": 3136, "max_pixels": 12845056})


def test_every_request_is_answered_once_with_its_seed_and_its_images_injected_first(make_backend):
    backend = make_backend(workers=3)
    backend._renders.wait_started()
    requests = [_request(i, seed) for i in range(150) for seed in (42, 43, 44)]
    results = list(backend.generate_stream(RequestFeed.of(requests), in_flight=200))
    assert sorted(r.request_id for r in results) == sorted(r.request_id for r in requests)
    assert all(r.text == f"answer with seed {r.request_id.split('|')[0]}" for r in results)
    llm = backend.llm
    assert len(llm.injected) == len(requests) and all(len(b) == 1 for b in llm.batches)  # injected, then added
    assert 8 < llm.most_held <= 200 and llm.most_seeds_held == 3  # several chunks held at once, never over
    assert backend.loop_stats.requests == len(requests)


def test_a_rows_seeds_go_to_the_same_worker_and_rows_spread_over_workers():
    conversations = [_request(i, 42).messages_json() for i in range(64)]
    assert [route(c, 4) for c in conversations] == [route(_request(i, 43).messages_json(), 4) for i in range(64)]
    assert len({route(c, 4) for c in conversations}) == 4


def test_refusals_at_rendering_and_at_adding_fail_only_their_requests(make_backend):
    backend = make_backend(refuse="TOO LONG")
    requests = [_request(i, 42) for i in range(40)]
    requests[5] = _request(5, 42, STUB_RENDER_CONFIG["refuse_render"])
    requests[17] = _request(17, 42, "TOO LONG")
    results = list(backend.generate_stream(RequestFeed.of(requests)))
    failed = {r.request_id: r.error for r in results if isinstance(r, RequestFailure)}
    assert set(failed) == {"42|row5", "42|row17"}
    assert failed["42|row5"] == "refused by the engine: Failed to load image: cannot identify image file"
    assert failed["42|row17"].startswith("refused by the engine: The decoder prompt (length 40001)")
    assert len(results) == 40


def test_a_stream_left_early_leaves_nothing_behind_for_the_next(make_backend):
    backend = make_backend()
    requests = [_request(i, 42) for i in range(120)]
    stream = backend.generate_stream(RequestFeed.of(requests))
    next(stream)
    stream.close()  # the caller stopped: renders still in the workers belong to that stream
    backend.llm._pending.clear()
    results = list(backend.generate_stream(RequestFeed.of(requests)))
    assert sorted(r.request_id for r in results) == sorted(r.request_id for r in requests)


def test_a_worker_that_dies_is_a_backend_error_naming_the_option(make_backend):
    backend = make_backend()
    requests = [_request(i, 42) for i in range(20)] + [_request(20, 42, STUB_RENDER_CONFIG["crash"])]
    with pytest.raises(BackendError) as caught:
        list(backend.generate_stream(RequestFeed.of(requests)))
    assert caught.value.field == "input_workers" and "render worker failed" in str(caught.value)


def test_a_vllm_without_the_renderer_api_is_refused_at_construction(make_backend):
    with pytest.raises(BackendError) as caught:
        make_backend(factory=None)
    assert caught.value.field == "input_workers" and "vllm.renderers" in str(caught.value)
