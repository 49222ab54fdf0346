"""The openai backend against a loopback OpenAI-compatible server: exact payloads, retries, failures."""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager

import pytest

from trace_lib.benchmarks.protocol import PromptItem
from trace_lib.errors import BackendError
from trace_lib.generation.backends.base import RequestsFailed, create_backend
from trace_lib.generation.request import build_eval_request
from trace_lib.release.suite import load_suite
from trace_lib.testing.loopback_http import answering
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


def _backend(base_url: str, **options):  # noqa: ANN003, ANN202
    return create_backend("openai", model_path="unused", served_name="m", base_url=base_url, **options)


@contextmanager
def _raw_server(status: int, data: bytes):
    """A loopback server answering every request with ``status`` and ``data``; yields its ``/v1`` URL and what it
    saw of each request (:func:`~trace_lib.testing.loopback_http.answering`)."""
    with answering(lambda method, path: (status, data)) as (base, seen):
        yield f"{base}/v1", seen


def test_the_defaults_are_five_attempts_300_s_and_32_requests_per_endpoint():
    one = _backend("http://127.0.0.1:1/v1")
    assert (one.max_attempts, one.timeout_s, one.retry_sleep_cap_s, one.concurrency) == (5, 300.0, 5.0, 32)
    assert _backend("http://127.0.0.1:1/v1,http://127.0.0.1:2/v1").concurrency == 64
    assert _backend("http://127.0.0.1:1/v1", concurrency=3, max_attempts=1).concurrency == 3


@pytest.mark.parametrize("base_url,endpoints", [
    ("http://h/v1", ["http://h:80/v1/chat/completions"]),
    ("https://h/v1/", ["https://h:443/v1/chat/completions"]),
    ("http://h:8000/RELAY/", ["http://h:8000/RELAY/chat/completions"]),
    ("http://a:1/v1, ,http://b:2/v1", ["http://a:1/v1/chat/completions", "http://b:2/v1/chat/completions"]),
])
def test_base_urls_name_their_chat_completions_endpoints(base_url, endpoints):
    assert [str(e) for e in _backend(base_url).endpoints] == endpoints


def test_an_https_endpoint_is_reached_over_tls():
    import http.client

    backend = _backend("https://h/v1,http://h/v1")
    assert type(backend._connection(backend.endpoints[0])) is http.client.HTTPSConnection
    assert type(backend._connection(backend.endpoints[1])) is http.client.HTTPConnection
    backend.close()


@pytest.mark.parametrize("options,field,message", [
    ({"base_url": "ftp://h/v1"}, "--base-url", "not an http(s) base URL"),
    ({"base_url": "http:///v1"}, "--base-url", "not an http(s) base URL"),
    ({"base_url": " , "}, "--base-url", "no endpoint given"),
    ({"base_url": "http://h/v1", "max_attempts": 0}, "max_attempts", "must be at least 1"),
    ({"base_url": "http://h/v1", "timeout_s": 0}, "--request-timeout", "must be a positive number of seconds"),
    ({"base_url": "http://h/v1", "timeout_s": float("nan")}, "--request-timeout",
     "must be a positive number of seconds"),
])
def test_bad_options_are_usage_errors_naming_the_option(options, field, message):
    from trace_lib.errors import UsageError

    with pytest.raises(UsageError) as info:
        create_backend("openai", model_path="unused", served_name="m", **options)
    assert (info.value.field, info.value.message) == (field, message)


@pytest.mark.parametrize("api_key,env,authorization", [
    ("k1", "env-key", "Bearer k1"), (None, "env-key", "Bearer env-key"), (None, None, "Bearer EMPTY"),
])
def test_requests_are_json_with_the_bearer_key(requests, monkeypatch, api_key, env, authorization):
    if env is None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", env)
    with _raw_server(200, _completion(content="B").payload) as (url, seen):
        assert [r.text for r in _backend(url, api_key=api_key).generate(requests[:1])] == ["B"]
    assert (seen[0][2]["content-type"], seen[0][2]["authorization"]) == ("application/json", authorization)


def test_an_http_500_is_retried(requests):
    answers = iter([StubHTTPError(500), None])

    def responder(route, body):
        error = next(answers)
        if error is not None:
            raise error
        return "ok"

    with OpenAIStubServer(responder, model="m") as server:
        assert [r.text for r in _backend(server.url, retry_sleep_cap_s=0.0).generate(requests[:1])] == ["ok"]
    assert len(server.requests) == 2


@pytest.mark.parametrize("status,shown,prefix", [(503, 200, "gave up after 1 attempts: "), (404, 300, "")])
def test_a_failed_requests_reason_names_the_endpoint_status_and_the_answers_head(requests, status, shown, prefix):
    with _raw_server(status, b"x" * 500) as (url, _):
        with pytest.raises(RequestsFailed) as info:
            list(_backend(url, max_attempts=1).generate(requests[:1]))
    assert info.value.field == "openai"
    assert info.value.failures == {
        requests[0].request_id: f"{prefix}{url}/chat/completions: HTTP {status}: {b'x' * shown!r}"}


@pytest.mark.parametrize("doc,reason", [
    ([list(range(100))], f"not a chat completion: {str([list(range(100))])[:200]}"),
    ({"choices": [{"message": {"content": "B"}, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 1, "completion_tokens": 0}},
     "malformed chat completion: text with 0 completion tokens"),
])
def test_a_malformed_answers_reason(requests, doc, reason):
    with _raw_server(200, json.dumps(doc).encode()) as (url, _):
        with pytest.raises(RequestsFailed) as info:
            list(_backend(url, max_attempts=1).generate(requests[:1]))
    assert info.value.failures == {requests[0].request_id: f"gave up after 1 attempts: {reason}"}


def test_requests_start_round_robin_over_the_endpoints(requests):
    with OpenAIStubServer(lambda route, body: "a", model="m") as one, \
            OpenAIStubServer(lambda route, body: "b", model="m") as two:
        texts = [r.text for r in _backend(f"{one.url},{two.url}", concurrency=1).generate(requests[:6])]
    assert sorted(texts) == ["a"] * 3 + ["b"] * 3 and len(one.requests) == len(two.requests) == 3


class _RecordedSleeps(threading.Event):
    """An event whose waits return at once (never set), recording each timeout."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return False


@pytest.mark.parametrize("attempts,cap,sleeps", [(5, None, [0.25, 0.5, 0.75, 1.0]), (4, 0.6, [0.25, 0.5, 0.6]),
                                                 (1, None, [])])
def test_retries_sleep_a_quarter_second_more_each_time_up_to_the_cap(requests, attempts, cap, sleeps):
    def down(route, body):
        raise StubHTTPError(502)

    with OpenAIStubServer(down, model="m") as server:
        options = {"max_attempts": attempts} | ({} if cap is None else {"retry_sleep_cap_s": cap})
        backend = _backend(server.url, **options)
        backend._cancelled = _RecordedSleeps()
        with pytest.raises(RequestsFailed):
            list(backend.generate(requests[:1]))
    assert backend._cancelled.waits == sleeps and len(server.requests) == attempts


def test_a_cancelled_backend_sends_no_new_attempt(requests):
    from trace_lib.generation.backends.openai import _Cancelled

    with OpenAIStubServer(lambda route, body: "ok", model="m") as server:
        backend = _backend(server.url)
        backend._cancelled.set()
        with pytest.raises(_Cancelled):
            backend._one(requests[0])
        time.sleep(0.3)  # a request sent would have arrived by now
        assert server.requests == []


def test_a_timed_out_connection_is_closed_and_the_retry_opens_a_new_one(requests):
    calls: list[int] = []

    def slow_first(route, body):
        calls.append(1)
        if len(calls) == 1:
            time.sleep(1.0)
        return "ok"

    with OpenAIStubServer(slow_first, model="m") as server:
        backend = _backend(server.url, timeout_s=0.3, retry_sleep_cap_s=0.0, concurrency=1)
        for result in backend.generate(requests[:1]):
            closed = [conn.sock is None for conn in backend._all_conns]
    assert result.text == "ok" and closed == [True, False] and len(server.requests) == 2


def test_stopping_early_ends_the_requests_in_flight_at_once_without_retries(requests):
    def answer(route, body):
        if body["messages"][0]["content"][1]["text"] != "question 0":
            time.sleep(6)
        return "ok"

    with OpenAIStubServer(answer, model="m") as server:
        backend = _backend(server.url, concurrency=4)
        results = backend.generate(requests[:4])
        first = next(results)
        deadline = time.monotonic() + 5
        while len(server.requests) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        results.close()
        took = time.monotonic() - started
        time.sleep(0.3)
        assert first.request_id == requests[0].request_id and took < 3 and len(server.requests) == 4
        assert [r.text for r in backend.generate(requests[:1])] == ["ok"]  # the next call is not cancelled
