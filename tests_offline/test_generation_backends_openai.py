"""The openai backend against a loopback OpenAI-compatible server: exact payloads, retries, failures."""

from __future__ import annotations

import threading

import pytest

from trace_lib.benchmarks.protocol import PromptItem
from trace_lib.errors import BackendError
from trace_lib.generation.backends.base import create_backend
from trace_lib.generation.request import build_eval_request
from trace_lib.release.suite import load_suite
from trace_lib.testing.openai_server import OpenAIStubServer, StubHTTPError


@pytest.fixture(scope="module")
def requests(release, tmp_path_factory):
    generation = load_suite(release).generation
    root = tmp_path_factory.mktemp("img")
    return [build_eval_request([PromptItem("image", str(root / f"{i}.png")), PromptItem("text", f"question {i}")],
                               request_id=f"{i:08d}:{i}:{'0' * 16}", generation=generation, seed=42)
            for i in range(24)]


def _echo(route, body):
    return "answer to " + body["messages"][0]["content"][1]["text"]


def test_every_request_is_sent_verbatim_and_answered(requests):
    with OpenAIStubServer(_echo, model="m") as server:
        backend = create_backend("openai", model_path="unused", served_name="m", base_url=server.url, concurrency=8)
        results = {r.request_id: r for r in backend.generate(requests)}
    assert sorted(results) == sorted(r.request_id for r in requests)
    assert all(results[r.request_id].text == "answer to " + r.payload("m")["messages"][0]["content"][1]["text"]
               for r in requests)
    sent = sorted((body for route, body in server.requests), key=lambda b: b["messages"][0]["content"][1]["text"])
    assert sent == sorted((r.payload("m") for r in requests), key=lambda b: b["messages"][0]["content"][1]["text"])
    assert all(route == "chat/completions" for route, _ in server.requests)


def test_retryable_errors_are_retried(requests):
    failures: dict[str, int] = {}
    lock = threading.Lock()

    def flaky(route, body):
        key = body["messages"][0]["content"][1]["text"]
        with lock:
            failures[key] = failures.get(key, 0) + 1
            attempt = failures[key]
        if attempt == 1:
            raise StubHTTPError(503)
        if attempt == 2:
            raise StubHTTPError(429)
        return "ok"

    with OpenAIStubServer(flaky, model="m") as server:
        backend = create_backend("openai", model_path="unused", served_name="m", base_url=server.url,
                                 retry_sleep_cap_s=0.0)
        results = list(backend.generate(requests[:6]))
    assert [r.text for r in results] == ["ok"] * 6
    assert set(failures.values()) == {3}


def test_permanent_error_fails_only_that_request(requests):
    def reject_one(route, body):
        if body["messages"][0]["content"][1]["text"] == "question 3":
            raise StubHTTPError(400)
        return "ok"

    got = []
    with OpenAIStubServer(reject_one, model="m") as server:
        backend = create_backend("openai", model_path="unused", served_name="m", base_url=server.url,
                                 retry_sleep_cap_s=0.0)
        with pytest.raises(BackendError) as info:
            for result in backend.generate(requests[:8]):
                got.append(result.request_id)
    assert len(got) == 7 and requests[3].request_id not in got
    assert "1 request(s) failed" in info.value.render() and "HTTP 400" in info.value.render()
    assert sum(1 for _, b in server.requests if b["messages"][0]["content"][1]["text"] == "question 3") == 1


def test_exhausted_retries_report_the_last_error(requests):
    def always_down(route, body):
        raise StubHTTPError(502)

    with OpenAIStubServer(always_down, model="m") as server:
        backend = create_backend("openai", model_path="unused", served_name="m", base_url=server.url,
                                 max_attempts=3, retry_sleep_cap_s=0.0)
        with pytest.raises(BackendError, match="gave up after 3 attempts: .*HTTP 502"):
            list(backend.generate(requests[:1]))
    assert len(server.requests) == 3


def test_unknown_backend_lists_the_known_ones():
    from trace_lib.errors import UsageError

    with pytest.raises(UsageError, match="--backend: unknown backend 'vlm'; did you mean vllm"):
        create_backend("vlm", model_path="x", served_name="m")


# -- a malformed 200 is an endpoint fault: retried, then reported, never a row (issue 25) ----------------------

def _completion(content="ok", finish="stop", usage=None, drop=()):  # noqa: ANN001, ANN202
    import json

    from trace_lib.testing.openai_server import StubRaw

    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
    for name in drop:
        choice.pop(name)
    doc = {"id": "x", "object": "chat.completion", "choices": [choice]}
    if usage is not None:
        doc["usage"] = usage
    return StubRaw(json.dumps(doc).encode())


MALFORMED = {
    "content-null": (_completion(content=None), "message.content is NoneType, not a string"),
    "content-object": (_completion(content={"text": "B"}), "message.content is dict, not a string"),
    "content-list": (_completion(content=["B"]), "message.content is list, not a string"),
    "finish-null": (_completion(finish=None), "finish_reason is None"),
    "finish-missing": (_completion(drop=("finish_reason",)), "not a chat completion"),
    "finish-empty": (_completion(finish=""), "finish_reason is ''"),
    "usage-negative": (_completion(usage={"prompt_tokens": -1, "completion_tokens": 2}), "usage.prompt_tokens is -1"),
    "usage-bool": (_completion(usage={"prompt_tokens": 3, "completion_tokens": True}), "usage.completion_tokens is True"),
    "usage-float": (_completion(usage={"prompt_tokens": 3.5, "completion_tokens": 2}), "usage.prompt_tokens is 3.5"),
    "usage-text": (_completion(usage="lots"), "usage is str, not an object"),
    "usage-total": (_completion(usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 9}),
                    "usage.total_tokens 9 is not prompt_tokens 3 + completion_tokens 2"),
    "usage-over-budget": (_completion(usage={"prompt_tokens": 3, "completion_tokens": 10 ** 6}),
                          "1000000 completion tokens exceed max_tokens"),
    "usage-zero-for-text": (_completion(usage={"prompt_tokens": 3, "completion_tokens": 0}),
                            "text with 0 completion tokens"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_answer_is_retried_then_reported_never_returned(requests, case):
    answer, reason = MALFORMED[case]
    with OpenAIStubServer(lambda route, body: answer, model="m") as server:
        backend = create_backend("openai", model_path="unused", served_name="m", base_url=server.url,
                                 max_attempts=2, retry_sleep_cap_s=0.0)
        got = []
        with pytest.raises(BackendError) as info:
            got.extend(backend.generate(requests[:1]))
    assert got == [] and len(server.requests) == 2
    message = info.value.render()
    assert "gave up after 2 attempts" in message and reason in message and "\n" not in message


def test_a_well_formed_answer_after_a_malformed_one_is_the_result(requests):
    answers = iter([_completion(content=None),
                    _completion(content="B", usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4})])
    with OpenAIStubServer(lambda route, body: next(answers), model="m") as server:
        backend = create_backend("openai", model_path="unused", served_name="m", base_url=server.url,
                                 retry_sleep_cap_s=0.0)
        [result] = list(backend.generate(requests[:1]))
    assert (result.text, result.finish_reason, result.prompt_tokens, result.completion_tokens) == ("B", "stop", 3, 1)
    assert len(server.requests) == 2


def test_an_empty_answer_with_no_usage_is_a_real_row(requests):
    with OpenAIStubServer(lambda route, body: _completion(content="", finish="length"), model="m") as server:
        backend = create_backend("openai", model_path="unused", served_name="m", base_url=server.url)
        [result] = list(backend.generate(requests[:1]))
    assert (result.text, result.finish_reason, result.completion_tokens) == ("", "length", None)
