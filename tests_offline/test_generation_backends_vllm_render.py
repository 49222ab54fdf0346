"""The vllm backend rendering in worker processes (``input_workers``) on a stub ``vllm.LLM``: real spawned
processes run the render-worker protocol with :func:`~trace_lib.testing.stub_vllm.stub_renderer`; every request
is answered once with its own seed, each image reaches the engine core once (a worker ships it once; repeats come
as ``None`` and are entered into the engine's sender cache in step with the engine core's), an image the engine's
cache no longer holds is rendered on the engine's thread instead, refusals at rendering or at adding fail only
their request, and a dead worker is a clear error."""

from __future__ import annotations

import pickle
import sys
from collections import OrderedDict

import pytest

from trace_lib.errors import BackendError
from trace_lib.generation.backends import vllm_render
from trace_lib.generation.backends.base import RequestFeed
from trace_lib.generation.backends.vllm_render import route
from trace_lib.generation.request import ChatRequest, RequestFailure
from trace_lib.testing.stub_vllm import STUB_RENDER_CONFIG, StubLLM, stub_renderer, stub_vllm_module

STUB_RENDERER = "trace_lib.testing.stub_vllm:stub_renderer"


@pytest.fixture
def make_backend(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", stub_vllm_module())
    from trace_lib.generation.backends.vllm import VLLMBackend

    made = []

    def make(*, workers: int = 2, refuse: str | None = None, factory: str | None = STUB_RENDERER,
             mm_cache_items: int = 1 << 20):
        llm = StubLLM(per_step=40, refuse=refuse, mm_cache_items=mm_cache_items)
        backend = VLLMBackend(model_path="stub", served_name="stub", llm=llm, max_num_seqs=64,
                              input_workers=workers, renderer_factory=factory)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def _request(i: int, seed: int, text: str = "") -> ChatRequest:
    return ChatRequest(f"{seed}|row{i}", ({"role": "user", "content": [{"type": "text", "text": f"q{i} {text}"}]},),
                       {"temperature": 0.6, "top_p": 0.95, "max_tokens": 16, "seed": seed},
                       {"min_pixels": 3136, "max_pixels": 12845056})


def _images_request(request_id: str, *images: str) -> ChatRequest:
    """A request whose conversation holds these stub images (one text part each)."""
    return ChatRequest(request_id, ({"role": "user", "content": [{"type": "text", "text": i} for i in images]},),
                       {"max_tokens": 16, "seed": 42})


def test_every_request_is_answered_once_with_its_seed_and_each_image_reaches_the_engine_once(make_backend):
    backend = make_backend(workers=3)
    backend._renders.wait_started()
    requests = [_request(i, seed) for i in range(150) for seed in (42, 43, 44)]
    results = list(backend.generate_stream(RequestFeed.of(requests), in_flight=200))
    assert sorted(r.request_id for r in results) == sorted(r.request_id for r in requests)
    assert all(r.text == f"answer with seed {r.request_id.split('|')[0]}" for r in results)
    llm = backend.llm
    assert all(len(b) == 1 for b in llm.batches)  # added one at a time
    assert llm.engine_core_cache.received_whole == 150 and llm.rendered_here == 0  # one image per row, all shipped
    assert 8 < llm.most_held <= 200 and llm.most_seeds_held == 3  # several chunks held at once, never over
    stats = backend.loop_stats
    assert stats.requests == len(requests) and stats.rerendered == 0
    assert 0 < stats.render_wait_s <= stats.adding_s  # the engine empty at the start: it waited for the workers
    assert "waiting for render workers" in stats.summary(1.0)


def test_a_worker_ships_an_image_once_and_its_repeats_as_none(monkeypatch):
    monkeypatch.setattr(vllm_render, "_RENDER", stub_renderer(pickle.dumps(STUB_RENDER_CONFIG)))
    monkeypatch.setattr(vllm_render, "_SHIPPED", OrderedDict())
    monkeypatch.setattr(vllm_render, "SHIPPED_MEMORY", 2)
    conversations = [_request(i, 42).messages_json() for i in range(3)]

    def shipped(*indices):
        chunk = vllm_render._render_chunk([(n, conversations[i], None) for n, i in enumerate(indices)])
        return [payload["mm_kwargs"]["image"][0] is not None for _, _, payload in pickle.loads(chunk)]

    assert shipped(0, 0, 1, 0) == [True, False, True, False]
    assert shipped(2, 0, 1) == [True, False, True]  # it remembers the 2 latest: 2 made it forget 1, not 0


def test_an_image_the_engine_no_longer_holds_is_rendered_again_whole_by_a_worker(make_backend):
    backend = make_backend(mm_cache_items=4)  # the engine's caches evict long before a row's next seed comes
    requests = [_request(i, seed) for seed in (42, 43) for i in range(40)]
    results = list(backend.generate_stream(RequestFeed.of(requests)))
    assert sorted(r.request_id for r in results) == sorted(r.request_id for r in requests)
    stats, llm = backend.loop_stats, backend.llm
    assert 0 < stats.rerendered <= 40 and llm.rendered_here == 0  # seed 43's, mostly; never on the engine's thread
    assert llm.engine_core_cache.received_whole == 40 + stats.rerendered and stats.requests == 80


def test_a_requests_images_are_all_touched_before_any_is_stored(make_backend):
    """Caches of 2 images, a request of images (B, A) with A held but the older: storing B first would evict A
    before A is entered, as vLLM's rendering never does (it touches every hash of a request first)."""
    backend = make_backend(workers=1, mm_cache_items=2)
    requests = [_images_request("r1", "A"), _images_request("r2", "X"), _images_request("r3", "B", "A")]
    results = list(backend.generate_stream(RequestFeed.of(requests)))
    assert sorted(r.request_id for r in results) == ["r1", "r2", "r3"]
    assert backend.loop_stats.rerendered == 0 and backend.llm.engine_core_cache.received_whole == 3  # A went once


def test_a_repeat_touches_the_engines_cache_so_it_evicts_in_step_with_the_engine_core(make_backend):
    """Caches of 2 images: a repeat of row 0 must make row 1's image the older one on both sides; if the sender
    cache were not touched, row 2 would evict row 0 there and row 1 in the engine core, and row 1's repeat would go
    as ``None`` to an engine core that no longer holds it."""
    backend = make_backend(workers=1, mm_cache_items=2)
    requests = [_request(0, 42), _request(1, 42), _request(0, 43), _request(2, 42), _request(1, 43)]
    results = list(backend.generate_stream(RequestFeed.of(requests)))
    assert sorted(r.request_id for r in results) == sorted(r.request_id for r in requests)
    assert backend.loop_stats.rerendered == 1  # row 1's repeat: evicted on both sides, rendered here


def test_without_an_engine_cache_every_image_goes_whole(make_backend):
    backend = make_backend(mm_cache_items=0)  # vLLM's mm_processor_cache_gb=0: no sender cache to omit against
    requests = [_request(i, seed) for i in range(20) for seed in (42, 43, 44)]
    assert len(list(backend.generate_stream(RequestFeed.of(requests)))) == 60
    assert backend.llm.engine_core_cache.received_whole == 60 and backend.loop_stats.rerendered == 0


def test_requests_sharing_an_id_are_each_answered(make_backend):
    """Request ids need not be unique in a stream (a benchmark's seeds fed raw); the in-thread path answers each,
    and so must the render path (it once keyed renders by request id and waited on an empty engine)."""
    backend = make_backend()
    requests = [ChatRequest(f"row{i}", r.messages, r.sampling, r.mm_processor_kwargs)
                for i in range(30) for r in (_request(i, 42), _request(i, 43))]
    results = list(backend.generate_stream(RequestFeed.of(requests)))
    assert sorted((r.request_id, r.text) for r in results) == sorted(
        (f"row{i}", f"answer with seed {seed}") for i in range(30) for seed in (42, 43))


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
