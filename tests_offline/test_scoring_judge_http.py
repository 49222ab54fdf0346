"""Judge error taxonomy per client stack, against the loopback stub answering as a real vLLM judge does.

Per-request failures (vLLM's context-length HTTP 400, 5xx, empty and garbled replies) follow the stack's retries and
then its fallback; configuration failures (unknown served name, nothing listening, a judge answering every request
of the first round with 5xx) are one-line fatal errors. Request bodies are byte-identical to upstream's.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from trace_lib.errors import JudgeError
from trace_lib.scoring import judge_http
from trace_lib.scoring.judge_http import (
    CallFailed,
    JudgeTransport,
    JudgeWindow,
    _connect_reason,
    classify_status,
    models_url,
    probe,
    raise_fd_limit,
    shared_transport,
)
from trace_lib.scoring.mcq_judge import McqItem, extract_options
from trace_lib.scoring.judge import (
    JUDGE_SERVED_NAME,
    VLMEVAL_FAIL_MSG,
    OpenAIJudge,
    complete_with_ladder,
    render_qwen3_no_think,
)
from trace_lib.testing.hub_server import refused_url
from trace_lib.testing.loopback_http import answering, trickling
from trace_lib.testing.openai_server import (
    CONTEXT_LENGTH_MESSAGE,
    OpenAIStubServer,
    StubDrop,
    StubHTTPError,
    StubRaw,
)

pytestmark = pytest.mark.offline

LONG = "LONG RESPONSE"  # prompts holding this answer vLLM's context-length 400


def _fast(url: str, **kwargs) -> OpenAIJudge:
    return OpenAIJudge(url, backoff_s=0, chat_pause_s=0, **kwargs)


def _vllm_like(route: str, body: dict) -> str:
    text = json.dumps(body)
    if LONG in text:
        raise StubHTTPError(400, CONTEXT_LENGTH_MESSAGE)
    if "EMPTY" in text:
        return "   "
    if "GARBLED" in text:
        return StubRaw(b"<html>502 Bad Gateway</html>")
    if "FIVEHUNDRED" in text:
        raise StubHTTPError(500, "Internal Server Error")
    if "ECHOFAIL" in text:  # a reply that quotes VLMEvalKit's failure text is no answer
        return f"Let me see. {VLMEVAL_FAIL_MSG} B"
    return "B"


@pytest.fixture(scope="module")
def stub():
    with OpenAIStubServer(_vllm_like, model=JUDGE_SERVED_NAME) as server:
        yield server


def _items(predictions: list[str]) -> list[McqItem]:
    return [McqItem(index=i, question="Which one?", prediction=p, choices={"A": "cat", "B": "dog"})
            for i, p in enumerate(predictions)]


@pytest.mark.parametrize("marker,kind", [(LONG, "context_length"), ("EMPTY", "empty"), ("GARBLED", "garbled"),
                                         ("FIVEHUNDRED", "server")])
def test_chat_per_request_failures_are_retried_then_the_failure_text(stub, marker, kind):
    stub.requests.clear()
    reply = _fast(stub.url, chat_attempts=3).chat([f"judge this: {marker}"])[0]
    assert (reply.ok, reply.text, reply.failure) == (False, VLMEVAL_FAIL_MSG, kind)
    assert len(stub.requests) == 3  # every attempt used, as VLMEvalKit's wrapper retries any unusable answer


def test_context_length_rows_fall_back_and_the_slice_goes_on(stub):
    items = _items(["I think it is a pet", f"{LONG} maybe", "EMPTY thoughts"])
    options = extract_options(items, judge=_fast(stub.url, chat_attempts=2), use_judge=True, benchmark="mmstar",
                              seed=42)
    assert [(o.option, o.method) for o in options][0] == ("B", "judge")
    for option in options[1:]:  # three unusable rounds -> upstream's random draw (seeded stand-in), marked
        assert option.fallback and option.method == "fallback" and option.judge_calls == 3
        assert option.option in {"A", "B", "Z"}


def test_a_judge_answering_every_first_round_request_with_5xx_is_fatal(stub):
    items = _items(["FIVEHUNDRED one", "FIVEHUNDRED two"])
    with pytest.raises(JudgeError, match="every judge request failed.*check the judge's log"):
        extract_options(items, judge=_fast(stub.url, chat_attempts=1), use_judge=True, benchmark="mmstar", seed=42)


def test_completions_stack_retries_the_context_length_400_then_fails_as_upstream(stub):
    stub.requests.clear()
    with pytest.raises(JudgeError) as info:
        complete_with_ladder(_fast(stub.url, attempts=3), [f"extract: {LONG}"], max_tokens=128)
    message = str(info.value)
    assert "judge failed after 3 attempts (HTTP 400: This model's maximum context length is 8192" in message
    assert "--max-model-len" in message and "\n" not in message
    assert len(stub.requests) == 3


def test_completions_stack_retries_a_garbled_answer(stub):
    answers = iter([StubRaw(b"{not json"), "C"])
    original = stub.responder
    stub.responder = lambda route, body: next(answers)
    try:
        assert [r.text for r in _fast(stub.url).complete(["q"])] == ["C"]
    finally:
        stub.responder = original


def test_bodies_are_byte_identical_to_upstreams(stub, monkeypatch):
    """Bodies as upstream builds them: VLMEvalKit ``OpenAIWrapper.generate_inner`` (``json.dumps`` of model,
    messages, n, temperature, default kwargs, then max_tokens, ``n`` popped for a local base); the persistent and
    validation clients (``requests`` ``json=``: ``json.dumps(..., allow_nan=False)``). Prompts in the protocol's
    order (prefix ordering off), as upstream batches them."""
    from trace_lib.scoring.judge import completions_body, post_completions
    from trace_lib.scoring.request_order import ORDER_ENV
    from trace_lib.validation.judge import STACK

    monkeypatch.setenv(ORDER_ENV, "0")

    prompt = "Which is it? é 数 \"quoted\"\n\tB"
    stub.raw_requests.clear()
    client = _fast(stub.url)
    client.chat([prompt], max_tokens=256, temperature=0)
    client.complete([prompt], max_tokens=16)
    client.complete([prompt, prompt + "2"], max_tokens=300, temperature=0.0, top_p=1.0)
    body = completions_body("qwen3-32b-trace-validation-extractor", [prompt], max_tokens=128, temperature=0.0,
                            top_p=1.0, stack=STACK.name)
    post_completions(stub.url, body, count=1, timeout_s=10)
    got = [raw for _, raw in stub.raw_requests]

    payload = dict(model=JUDGE_SERVED_NAME, messages=[dict(role="user", content=[dict(type="text", text=prompt)])],
                   n=1, temperature=0, chat_template_kwargs={"enable_thinking": False})
    payload["max_tokens"] = 256
    payload.pop("n", None)
    rendered = render_qwen3_no_think(prompt)
    rendered2 = render_qwen3_no_think(prompt + "2")
    expected = [
        json.dumps(payload).encode(),
        json.dumps({"model": JUDGE_SERVED_NAME, "prompt": rendered, "temperature": 0.0, "top_p": 1.0,
                    "max_tokens": 128}, allow_nan=False).encode("utf-8"),
        json.dumps({"model": JUDGE_SERVED_NAME, "prompt": [rendered, rendered2], "temperature": 0.0, "top_p": 1.0,
                    "max_tokens": 300}, allow_nan=False).encode("utf-8"),
        json.dumps({"model": "qwen3-32b-trace-validation-extractor", "prompt": [prompt], "temperature": 0.0,
                    "top_p": 1.0, "max_tokens": 128, "seed": 0}, allow_nan=False).encode("utf-8"),
    ]
    assert got == expected


def test_a_pool_spreads_chat_requests_over_every_endpoint():
    seen: list[str] = []
    with OpenAIStubServer(lambda r, b: seen.append("a") or "A", model=JUDGE_SERVED_NAME) as one, \
            OpenAIStubServer(lambda r, b: seen.append("b") or "B", model=JUDGE_SERVED_NAME) as two:
        client = _fast(f"{one.url},{two.url}")
        client.check()
        replies = client.chat([f"q{i}" for i in range(6)])
    assert [r.text for r in replies] == ["A", "B"] * 3
    assert sorted(seen) == ["a"] * 3 + ["b"] * 3


# -- TRACE validation stack -------------------------------------------------------------------------------------
QWEN3_LIKE = (
    "{%- for message in messages %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)
ROWS = [("I considered B, but the final answer is C.", "option_letter", "missing"),
        ("Answer: 4\n\\boxed{5}", "integer", "ambiguous")]


def _responder(route: str, body: dict) -> str:
    (prompt,) = body["prompt"]
    if "final answer is C" in prompt:
        return '{"status":"ok","answer":"C","evidence":"the final answer is C."}'
    return '{"status":"ambiguous","answer":null,"evidence":""}'


def _validation_inputs(release, tmp_path: Path):
    from trace_lib.validation.chat_template import ChatTemplate
    from trace_lib.validation.score import pending_row
    from trace_lib.release.validation_suite import load_validation_suite

    judge = load_validation_suite(release).judge
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": QWEN3_LIKE, "eos_token": "<|im_end|>"}))
    template = ChatTemplate.from_tokenizer_dir(tmp_path / "tok")
    pending = [pending_row("m", {"row_index": i, "instance_id": f"i{i}", "answer_type": t}, raw, status)
               for i, (raw, t, status) in enumerate(ROWS)]
    return judge, template, pending


def test_validation_context_length_costs_the_row_a_rung(release, tmp_path: Path):
    from trace_lib.validation.judge import run_judge

    judge, template, pending = _validation_inputs(release, tmp_path)
    first = {"done": False}

    def responder(route: str, body: dict) -> str:
        if route == "completions" and not first["done"]:
            first["done"] = True
            raise StubHTTPError(400, CONTEXT_LENGTH_MESSAGE)
        return _responder(route, body)

    with OpenAIStubServer(responder, model=judge.served_model_name) as server:
        report = run_judge(pending, judge=judge, template=template, endpoints=[server.url], output_dir=tmp_path / "out",
                           batch_size=1, workers=1)
    assert report.transport_failed_attempts == 1 and report.rows == len(pending)
    results = [json.loads(line) for line in report.results_path.read_text().splitlines()]
    hit = [r for r in results if r["attempts"][0]["validation_error"]
           and "maximum context length" in r["attempts"][0]["validation_error"]]
    assert len(hit) == 1 and len(hit[0]["attempts"]) >= 2  # went on to the next rung


def test_validation_first_round_all_5xx_is_fatal_before_any_receipt(release, tmp_path: Path):
    from trace_lib.validation.judge import run_judge

    judge, template, pending = _validation_inputs(release, tmp_path)

    def responder(route: str, body: dict) -> str:
        raise StubHTTPError(503, "Service Unavailable")

    with OpenAIStubServer(responder, model=judge.served_model_name) as server:
        with pytest.raises(JudgeError, match="every judge request of the first round failed"):
            run_judge(pending, judge=judge, template=template, endpoints=[server.url], output_dir=tmp_path / "out")
    assert not (tmp_path / "out" / "receipts").exists()


def test_validation_unknown_model_name_is_fatal(release, tmp_path: Path):
    from trace_lib.validation.judge import run_judge

    judge, template, pending = _validation_inputs(release, tmp_path)

    def responder(route: str, body: dict) -> str:
        raise StubHTTPError(404, f"The model `{judge.served_model_name}` does not exist.")

    with OpenAIStubServer(responder, model=judge.served_model_name) as server:
        with pytest.raises(JudgeError, match="does not serve the requested judge model"):
            run_judge(pending, judge=judge, template=template, endpoints=[server.url], output_dir=tmp_path / "out")


# -- fault paths that a mutant could silently change (issue 25) ------------------------------------------------

def test_a_first_round_of_only_context_length_400s_falls_back_instead_of_failing(stub):
    items = _items([f"{LONG} one", f"{LONG} two"])
    options = extract_options(items, judge=_fast(stub.url, chat_attempts=1), use_judge=True, benchmark="mmstar",
                              seed=42)
    assert all(o.fallback and o.method == "fallback" for o in options)  # rows to fall back on, not a broken judge


def test_one_usable_first_round_reply_among_5xx_failures_is_not_a_broken_judge(stub):
    items = _items(["I think it is a pet", "FIVEHUNDRED two"])
    options = extract_options(items, judge=_fast(stub.url, chat_attempts=1), use_judge=True, benchmark="mmstar",
                              seed=42)
    assert [(o.option, o.method) for o in options][0] == ("B", "judge") and options[1].fallback


def test_the_chat_stack_makes_five_attempts_by_default(stub):
    stub.requests.clear()
    reply = OpenAIJudge(stub.url, chat_pause_s=0).chat(["judge this: FIVEHUNDRED"])[0]
    assert (reply.ok, reply.failure) == (False, "server")
    assert len(stub.requests) == 5  # VLMEvalKit's OpenAIWrapper retry default


def test_a_reply_containing_the_failure_text_is_not_an_answer(stub):
    stub.requests.clear()
    reply = _fast(stub.url, chat_attempts=2).chat(["judge this: ECHOFAIL"])[0]
    assert (reply.ok, reply.text, reply.failure) == (False, VLMEVAL_FAIL_MSG, "empty")
    assert len(stub.requests) == 2


@pytest.mark.parametrize("marker", ["GARBLED", "EMPTY"])
def test_a_first_round_of_only_garbled_or_empty_replies_falls_back_instead_of_failing(stub, marker):
    items = _items([f"{marker} one", f"{marker} two"])
    options = extract_options(items, judge=_fast(stub.url, chat_attempts=1), use_judge=True, benchmark="mmstar",
                              seed=42)
    assert all(o.fallback and o.method == "fallback" for o in options)


@contextmanager
def _trickler(seconds: float = 5.0):
    """A completions URL whose server sends a byte every 0.1 s for ``seconds`` (no read ever times out)."""
    with trickling(every_s=0.1, for_s=seconds) as base:
        yield f"{base}/v1/completions"


def _until(condition, timeout_s: float = 5.0) -> None:
    ends = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < ends, "condition not reached"
        time.sleep(0.005)


@pytest.mark.parametrize("status,message,kind", [
    (400, "This model's maximum context length is 8192 tokens", "context_length"),
    (400, "prompt exceeds the context length", "context_length"),
    (400, "request exceeds the maximum model length of 8192", "context_length"),
    (400, "prompt plus max_tokens is above max_model_len=8192", "context_length"),
    (400, "the prompt is too long", "context_length"),
    (400, "temperature must be non-negative", "rejected"),
    (422, "unprocessable", "rejected"),
    (499, "client closed", "rejected"),
    (408, "request timeout", "server"),
    (429, "too many requests", "server"),
    (500, "boom", "server"),
    (503, "maximum context length", "server"),
])
def test_an_http_error_answer_is_classified_by_status_and_message(status, message, kind):
    payload = json.dumps({"error": {"message": message, "code": status}}).encode()
    failure = classify_status(status, payload, url="http://h:1/v1", model="m")
    assert isinstance(failure, CallFailed)
    assert (failure.kind, failure.reason) == (kind, f"HTTP {status}: {message}")


@pytest.mark.parametrize("payload,reason", [
    (b"  <html>502 Bad Gateway</html>\n", "HTTP 502: <html>502 Bad Gateway</html>"),
    (b"\xffbad gateway", "HTTP 502: \ufffdbad gateway"),
    (b"x" * 250, "HTTP 502: " + "x" * 200),
    (json.dumps({"error": {"message": "m" * 400}}).encode(), "HTTP 502: " + "m" * 300),
    (json.dumps({"error": "e" * 400}).encode(), "HTTP 502: " + "e" * 300),
    (json.dumps({"error": {"message": None}}).encode(), "HTTP 502"),
    (json.dumps({"message": "top level"}).encode(), "HTTP 502: top level"),
    (json.dumps(["message"]).encode(), "HTTP 502"),
    (json.dumps("a message").encode(), "HTTP 502"),
    (b"", "HTTP 502"),
])
def test_an_error_answers_reason_quotes_its_message_shortened(payload, reason):
    assert classify_status(502, payload, url="http://h:1/v1", model="m").reason == reason


def test_a_404_naming_the_model_is_a_configuration_error_for_that_model():
    payload = json.dumps({"error": {"message": "The model `judge` does not exist."}}).encode()
    error = classify_status(404, payload, url="http://h:1/v1", model="judge")
    assert isinstance(error, JudgeError) and error.field == "--judge-url http://h:1/v1"
    assert (error.expected, error.found) == ("judge", "HTTP 404: The model `judge` does not exist.")
    assert "does not serve the requested judge model" in error.message


def test_a_404_not_about_the_model_says_the_url_is_not_an_endpoint():
    error = classify_status(404, b'{"error": "not found"}', url="http://h:1/x", model="judge")
    assert isinstance(error, JudgeError) and error.field == "--judge-url http://h:1/x"
    assert error.message == "judge URL is not an OpenAI endpoint (HTTP 404: not found)"


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_are_a_configuration_error(status):
    error = classify_status(status, b'{"error": {"message": "bad key"}}', url="http://h:1/v1", model="judge")
    assert isinstance(error, JudgeError) and error.field == "--judge-url http://h:1/v1"
    assert error.message == f"judge refused the credentials (HTTP {status}: bad key)"


def test_a_fresh_window_is_empty_and_counts_what_it_holds():
    window = JudgeWindow(0)
    assert (window.capacity, window.in_flight, window.waiting, window.peak, window.load) == (1, 0, 0, 0, 0)
    window = JudgeWindow(3)
    with window.hold(2):
        assert (window.in_flight, window.peak, window.load) == (2, 2, 2)
    with window.hold(7):  # above the capacity: the whole window
        assert window.in_flight == 3
    assert (window.in_flight, window.waiting, window.peak, window.load) == (0, 0, 3, 0)


def test_a_window_serves_requests_in_arrival_order_even_when_a_later_one_would_fit():
    window = JudgeWindow(2)
    order: list[str] = []

    def take(name: str, weight: int) -> None:
        with window.hold(weight):
            order.append(name)

    with window.hold(1):
        big = threading.Thread(target=take, args=("big", 2))
        big.start()
        _until(lambda: window.waiting == 2)
        small = threading.Thread(target=take, args=("small", 1))
        small.start()
        _until(lambda: window.waiting == 3 or bool(order))
        time.sleep(0.05)
        assert order == [] and window.load == 4
    big.join(5)
    small.join(5)
    assert order == ["big", "small"] and window.load == 0


class _Limits:
    """A stand-in for ``resource``'s open-files limit."""

    def __init__(self, soft: int, hard: int, fail: bool = False) -> None:
        self.soft, self.hard, self.fail = soft, hard, fail
        self.calls: list[tuple[int, int]] = []

    def getrlimit(self, which: int) -> tuple[int, int]:
        return self.soft, self.hard

    def setrlimit(self, which: int, limits: tuple[int, int]) -> None:
        if self.fail:
            raise ValueError("not allowed")
        self.calls.append(limits)
        self.soft = limits[0]


@pytest.mark.parametrize("soft,hard,needed,fail,now,calls", [
    (1024, 4096, 100, False, 1024, []),
    (1024, 4096, 1024, False, 1024, []),
    (1024, 4096, 2000, False, 2000, [(2000, 4096)]),
    (1024, 4096, 10000, False, 4096, [(4096, 4096)]),
    (1024, "inf", 10000, False, 10000, [(10000, "inf")]),
    ("inf", "inf", 10000, False, "inf", []),
    (1024, 4096, 2000, True, 1024, []),
])
def test_the_open_files_limit_is_raised_to_what_is_needed_never_lowered(monkeypatch, soft, hard, needed, fail, now,
                                                                        calls):
    import resource

    inf = resource.RLIM_INFINITY
    value = {"inf": inf}.get
    limits = _Limits(value(soft, soft), value(hard, hard), fail)
    monkeypatch.setattr(resource, "getrlimit", limits.getrlimit)
    monkeypatch.setattr(resource, "setrlimit", limits.setrlimit)
    assert raise_fd_limit(needed) == value(now, now)
    assert limits.calls == [(value(a, a), value(b, b)) for a, b in calls]


def test_each_endpoint_has_one_window_and_raises_the_open_files_limit_for_all(monkeypatch):
    needed: list[int] = []
    monkeypatch.setattr(judge_http, "raise_fd_limit", needed.append)
    transport = JudgeTransport(concurrency=3)
    one = transport.window("http://a:1/v1/completions")
    assert transport.window("http://a:1/v1/chat/completions") is one and one.capacity == 3
    other = transport.window("http://a:2/v1/completions")
    assert other is not one
    assert transport.windows() == {"http://a:1": one, "http://a:2": other}
    assert needed == [2 * 3 + 256, 2 * 3 * 2 + 256]
    assert JudgeTransport().concurrency == 192


@pytest.mark.parametrize("api_key,authorization", [("sk-local", "Bearer sk-local"), ("k2", "Bearer k2"), (None, None)])
def test_requests_send_json_and_the_bearer_key(api_key, authorization):
    with answering(lambda method, path: (200, b'{"ok": 1}')) as (base, seen):
        transport = JudgeTransport(api_key=api_key)
        assert transport.post(f"{base}/v1/completions", {"a": 1}, timeout_s=5).data == {"ok": 1}
        transport.close()
    headers = seen[0][2]
    assert headers["content-type"] == "application/json" and headers.get("authorization") == authorization


@pytest.mark.parametrize("status", [200, 201, 299])
def test_every_2xx_answer_is_parsed(status):
    with answering(lambda method, path: (status, b'{"ok": 2}')) as (base, _):
        assert JudgeTransport().get(f"{base}/v1/models", timeout_s=5).data == {"ok": 2}


def test_a_2xx_answer_that_is_not_json_is_garbled():
    with answering(lambda method, path: (200, b"<html>")) as (base, _):
        with pytest.raises(CallFailed) as failed:
            JudgeTransport().get(f"{base}/v1/models", timeout_s=5)
    assert (failed.value.kind, failed.value.reason) == ("garbled", "answer is not JSON")


def _dropping(drops: int):
    count = {"n": 0}

    def responder(route: str, body: dict) -> str:
        count["n"] += 1
        if count["n"] <= drops:
            raise StubDrop()
        return "fine"

    return OpenAIStubServer(responder)


def test_a_request_the_server_closed_without_answering_is_sent_again_twice():
    with _dropping(2) as server:
        answer = JudgeTransport().post(f"{server.url}/chat/completions", {"messages": []}, timeout_s=5)
        assert answer.data["choices"][0]["message"]["content"] == "fine" and len(server.requests) == 3


def test_a_server_closing_every_attempt_fails_as_server_after_three_sends():
    with _dropping(99) as server:
        with pytest.raises(CallFailed) as failed:
            JudgeTransport().post(f"{server.url}/chat/completions", {"messages": []}, timeout_s=5)
        assert len(server.requests) == 3
    assert failed.value.kind == "server"
    assert failed.value.reason == "RemoteProtocolError: Server disconnected without sending a response."


def test_after_a_timed_out_exchange_the_threads_next_request_is_resent_as_usual():
    transport = JudgeTransport()
    with _trickler() as url, pytest.raises(CallFailed) as failed:
        transport.post(url, {}, timeout_s=0.5)
    assert (failed.value.kind, failed.value.reason) == ("timeout", "no complete answer within 0.5 s")
    with _dropping(1) as server:
        answer = transport.post(f"{server.url}/chat/completions", {"messages": []}, timeout_s=5)
        assert answer.data["choices"][0]["message"]["content"] == "fine" and len(server.requests) == 2


def test_the_watchdog_ends_only_the_late_threads_exchange():
    """One thread's exchange past its deadline is ended near it; another thread's slow exchange within its own
    deadline is untouched (answered on its first send)."""
    transport = JudgeTransport()
    outcome: dict[str, object] = {}

    def late(url: str) -> None:
        started = time.monotonic()
        try:
            transport.post(url, {}, timeout_s=0.5)
        except CallFailed as exc:
            outcome["late"] = (exc.kind, time.monotonic() - started < 3)

    def slow(route: str, body: dict) -> str:
        time.sleep(1.5)
        return "slow"

    with OpenAIStubServer(slow) as server, _trickler(6.0) as url:
        thread = threading.Thread(target=late, args=(url,))
        thread.start()
        answer = transport.post(f"{server.url}/chat/completions", {"messages": []}, timeout_s=10)
        thread.join(10)
        assert answer.data["choices"][0]["message"]["content"] == "slow" and len(server.requests) == 1
    assert outcome == {"late": ("timeout", True)}


def test_one_tls_context_serves_every_threads_client(monkeypatch):
    import httpx

    built: list[object] = []
    original = httpx.create_ssl_context
    monkeypatch.setattr(httpx, "create_ssl_context", lambda *a, **k: built.append(1) or original(*a, **k))
    transport = JudgeTransport()
    with answering(lambda method, path: (200, b"{}")) as (base, seen):
        threads = [threading.Thread(target=transport.get, args=(f"{base}/v1/models",), kwargs={"timeout_s": 5})
                   for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert len(seen) == 2
    assert built == [1]


def test_nothing_listening_is_a_refused_connection():
    with pytest.raises(CallFailed) as failed:
        JudgeTransport().get(f"{refused_url()}/v1/models", timeout_s=5)
    assert (failed.value.kind, failed.value.reason) == ("connection", "connection refused")


@pytest.mark.parametrize("text,reason", [
    ("[Errno 111] Connection refused", "connection refused"),
    ("errno 111", "connection refused"),
    ("[Errno -2] Name or service not known", "unknown host"),
    ("nodename nor servname provided", "unknown host"),
    ("getaddrinfo failed", "unknown host"),
    ("y" * 300, "y" * 200),
    ("", "OSError"),
])
def test_a_connect_failure_is_named_shortly(text, reason):
    assert _connect_reason(OSError(text) if text else OSError()) == reason


@pytest.mark.parametrize("raw,error", [("abc", "not an integer"), ("0", "must be at least 1")])
def test_the_shared_transports_window_must_be_a_positive_integer(monkeypatch, raw, error):
    monkeypatch.setattr(judge_http, "_shared", None)
    monkeypatch.setenv("TRACE_JUDGE_CONCURRENCY", raw)
    with pytest.raises(JudgeError, match=error) as failed:
        shared_transport()
    assert (failed.value.field, failed.value.found) == ("TRACE_JUDGE_CONCURRENCY", raw)


def test_the_shared_transport_is_made_once_with_the_configured_window(monkeypatch):
    monkeypatch.setattr(judge_http, "_shared", None)
    monkeypatch.setenv("TRACE_JUDGE_CONCURRENCY", "7")
    transport = shared_transport()
    assert transport.concurrency == 7 and shared_transport() is transport


@pytest.mark.parametrize("base", ["http://h:1", "http://h:1/", " http://h:1/v1 ", "http://h:1/v1/",
                                  "http://h:1/v1/completions", "http://h:1/v1/chat/completions/"])
def test_the_models_url_of_every_way_to_name_an_endpoint(base):
    assert models_url(base) == "http://h:1/v1/models"


def test_probing_nothing_listening_says_the_judge_is_unreachable_and_how_to_start_it():
    base = refused_url()
    with pytest.raises(JudgeError) as failed:
        probe(base, "judge", timeout_s=5, transport=JudgeTransport())
    assert failed.value.message == "judge unreachable (connection refused)"
    assert failed.value.field == f"--judge-url {base}"
    assert failed.value.hint == "start the judge ('trace-repro judge serve') or pass the URL that serves it"


@pytest.mark.parametrize("listed,found", [(b'{"data": []}', "no models"), (b'["judge"]', "no models"),
                                          (b'{"data": [{"id": "a"}, "judge", {"id": "b"}]}', "a, b")])
def test_probing_an_endpoint_serving_other_models_names_them(listed, found):
    with answering(lambda method, path: (200, listed)) as (base, seen):
        with pytest.raises(JudgeError) as failed:
            probe(base, "judge", transport=JudgeTransport())
        assert seen[0][1] == "/v1/models"
    assert (failed.value.expected, failed.value.found) == ("judge", found)


def test_probing_an_endpoint_serving_the_model_passes():
    with answering(lambda method, path: (200, b'{"data": [{"id": "x"}, {"id": "judge"}]}')) as (base, _):
        probe(base, "judge", transport=JudgeTransport())


def test_a_transport_failures_reason_is_its_type_and_message_in_200_characters():
    with pytest.raises(CallFailed) as failed:
        JudgeTransport().get(f"{'x' * 250}://127.0.0.1:9/v1/models", timeout_s=5)
    assert failed.value.kind == "server" and len(failed.value.reason) == 200
    assert failed.value.reason.startswith("UnsupportedProtocol: ")
