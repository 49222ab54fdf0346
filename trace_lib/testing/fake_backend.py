"""A deterministic generation backend for scheduler tests (no model): the answer is a function of the request.

:class:`FakeStreamBackend` answers ``"seed <S>: <first 12 hex of the request's payload hash>"`` so a row's
response depends on its slice's seed and prompt only, never on how it was scheduled. It offers both
``generate`` (per-slice path) and ``generate_stream`` (keeps ``window`` requests in flight, refilling only when
empty, so a window spans slice boundaries); it records the request ids of every window for assertions, and can
skip a request, answer an unknown id, or sleep per answer (``delay_s``) to be killed mid-run.
"""

from __future__ import annotations

import time
from typing import Iterator, Sequence

from trace_lib.generation.backends.base import RequestFeed
from trace_lib.generation.request import ChatRequest, GenerationResult


def fake_answer(request: ChatRequest) -> str:
    return f"seed {request.seed}: {request.request_hash('fake')[:12]}"


class FakeStreamBackend:
    name = "fake"

    def __init__(self, *, window: int = 16, delay_s: float = 0.0, skip: str | None = None,
                 unknown_after: int | None = None) -> None:
        self.window, self.delay_s, self.skip, self.unknown_after = window, delay_s, skip, unknown_after
        self.windows: list[list[str]] = []
        self.answered = 0

    def _answer(self, request: ChatRequest) -> GenerationResult | None:
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.skip is not None and request.request_id.endswith(self.skip):
            return None
        self.answered += 1
        request_id = request.request_id
        if self.unknown_after is not None and self.answered > self.unknown_after:
            request_id = "not-sent"
        return GenerationResult(request_id, fake_answer(request), "stop", 11, 7)

    def generate(self, requests: Sequence[ChatRequest]) -> Iterator[GenerationResult]:
        self.windows.append([r.request_id for r in requests])
        for request in requests:
            result = self._answer(request)
            if result is not None:
                yield result

    def generate_stream(self, feed: RequestFeed) -> Iterator[GenerationResult]:
        while True:
            pool: list[ChatRequest] = []
            while len(pool) < self.window and not feed.finished:
                pool += feed.take(self.window - len(pool), wait=True)
            if not pool:
                return
            self.windows.append([r.request_id for r in pool])
            for request in pool:
                result = self._answer(request)
                if result is not None:
                    yield result

    def close(self) -> None:
        pass
