"""The judge client against the loopback OpenAI stub: settings sent, batching, retries, failures, token ladder."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from trace_lib.errors import JudgeError
from trace_lib.scoring import judge as judge_mod
from trace_lib.scoring.judge import (
    VLMEVAL_FAIL_MSG,
    CallableJudge,
    Judge,
    JudgeReply,
    OpenAIJudge,
    complete_with_ladder,
    render_qwen3_no_think,
    retry_token_limits,
)
from trace_lib.testing.openai_server import OpenAIStubServer, StubHTTPError

SERVED = judge_mod.JUDGE_SERVED_NAME


def _fast(url: str, **kwargs: Any) -> OpenAIJudge:
    return OpenAIJudge(url, backoff_s=0, chat_pause_s=0, **kwargs)


def _dead_url() -> str:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture(scope="module")
def _server():
    with OpenAIStubServer(lambda route, body: "  yes  ", model=SERVED) as server:
        yield server


@pytest.fixture
def stub(_server):
    """The module's stub server, answering ``yes`` with a fresh request log (one server: shutdown costs 0.5 s)."""
    _server.responder = lambda route, body: "  yes  "
    _server.requests.clear()
    return _server


def test_chat_sends_the_vlmevalkit_official_route_settings(stub):
    replies = _fast(stub.url).chat(["Is it B?"])
    assert replies == [JudgeReply("yes", "stop")]
    route, body = stub.requests[0]
    assert route == "chat/completions"
    assert body == {
        "model": SERVED,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Is it B?"}]}],
        "temperature": 0,
        "chat_template_kwargs": {"enable_thinking": False},
        "max_tokens": 256,
    }


def test_complete_renders_qwen3_no_think_client_side_with_min_budget(stub):
    replies = _fast(stub.url).complete(["Extract the answer."], max_tokens=16, system="sys")
    assert replies == [JudgeReply("yes", "stop", max_tokens=128)]
    route, body = stub.requests[0]
    assert route == "completions"
    assert body == {
        "model": SERVED,
        "prompt": render_qwen3_no_think("Extract the answer.", system="sys"),  # scalar when alone, as upstream
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 128,
    }
    assert body["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_complete_batches_by_count_and_characters(stub):
    prompts = [f"p{i}" for i in range(5)] + ["x" * 300]
    replies = _fast(stub.url, batch_size=2, max_batch_chars=250).complete(prompts)
    assert len(replies) == 6 and all(r.text == "yes" for r in replies)
    sizes = sorted(len(b["prompt"]) if isinstance(b["prompt"], list) else 1 for _, b in stub.requests)
    assert sizes == [1, 1, 2, 2]  # [p0 p1] [p2 p3] [p4] [x*300 alone: over the character cap]


def test_transient_http_errors_are_retried(stub):
    failures = iter([503, 500])

    def responder(route: str, body: dict) -> str:
        code = next(failures, None)
        if code:
            raise StubHTTPError(code)
        return "ok"

    stub.responder = responder
    assert _fast(stub.url).complete(["q"])[0].text == "ok"
    assert len(stub.requests) == 3


@pytest.mark.parametrize("transport", ["chat", "complete"])
def test_unknown_served_model_is_one_line_fatal_and_not_retried(stub, transport):
    def responder(route: str, body: dict) -> str:
        raise StubHTTPError(404, "The model `qwen3-32b-judge` does not exist.")

    stub.responder = responder
    with pytest.raises(JudgeError) as info:
        getattr(_fast(stub.url), transport)(["q"])
    message = str(info.value)
    assert "does not serve the requested judge model" in message and "--served-model-name" in message
    assert "\n" not in message
    assert len(stub.requests) == 1


@pytest.mark.parametrize("transport", ["chat", "complete"])
def test_unreachable_judge_is_one_line_error(transport):
    url = _dead_url()
    with pytest.raises(JudgeError) as info:
        getattr(_fast(url, attempts=2, chat_attempts=2), transport)(["q"])
    assert str(info.value) == (
        f"--judge-url {url}: judge unreachable (connection refused); start the judge ('trace-repro judge serve') "
        "or choose non-judge slices"
    )
    assert "\n" not in str(info.value)


def test_chat_returns_vlmevalkit_failure_text_when_the_judge_answers_badly(stub):
    def responder(route: str, body: dict) -> str:
        raise StubHTTPError(503)

    stub.responder = responder
    reply = _fast(stub.url, chat_attempts=3).chat(["q"])[0]
    assert reply == JudgeReply(VLMEVAL_FAIL_MSG, None, ok=False, failure="server")
    assert len(stub.requests) == 3


def test_chat_empty_content_is_retried_then_failure_text(stub):
    stub.responder = lambda route, body: "   "
    reply = _fast(stub.url, chat_attempts=2).chat(["q"])[0]
    assert not reply.ok and reply.text == VLMEVAL_FAIL_MSG
    assert len(stub.requests) == 2


def test_complete_fails_loudly_after_retries_on_server_errors(stub):
    def responder(route: str, body: dict) -> str:
        raise StubHTTPError(500)

    stub.responder = responder
    with pytest.raises(JudgeError, match=r"judge failed after 3 attempts \(HTTP 500: stub error\)"):
        _fast(stub.url, attempts=3).complete(["q"])
    assert len(stub.requests) == 3


def test_a_pool_fails_over_to_the_next_endpoint(stub):
    client = _fast(f"{_dead_url()},{stub.url}")
    assert client.attempts == 5
    assert [r.text for r in client.complete(["a", "b"])] == ["yes", "yes"]


@pytest.mark.parametrize(
    ("choices", "reason"),
    [
        ([{"index": 0, "text": "a"}], "answered 1 choices for 2 prompts"),
        ([{"index": 0, "text": "a"}, {"index": 0, "text": "b"}], "choice index 0 is missing, duplicated"),
        ([{"index": 0, "text": "a"}, {"index": True, "text": "b"}], "choice index True is missing"),
        ([{"index": 0, "text": "a"}, {"index": 2, "text": "b"}], "choice index 2 is missing"),
    ],
)
def test_completion_choices_must_cover_each_prompt_once(choices, reason):
    with pytest.raises(judge_mod.CallFailed, match=reason):
        judge_mod._completion_choices({"choices": choices}, 2, 128)


def test_completion_choices_are_mapped_by_index():
    replies = judge_mod._completion_choices(
        {"choices": [{"index": 1, "text": " b ", "finish_reason": "length"}, {"index": 0, "text": "a"}]}, 2, 256
    )
    assert replies == [JudgeReply("a", None, max_tokens=256), JudgeReply("b", "length", max_tokens=256)]


def test_check_requires_the_served_judge_name(stub):
    _fast(stub.url).check()
    with pytest.raises(JudgeError, match="endpoint does not serve the judge .expected 'other', found 'qwen3-32b-judge'"):
        _fast(stub.url, model="other").check()
    with pytest.raises(JudgeError, match="judge unreachable"):
        _fast(_dead_url()).check()


@pytest.mark.parametrize(
    ("requested", "ladder"),
    [(16, [128, 256, 512, 1024]), (128, [128, 256, 512, 1024]), (256, [256, 512, 1024]), (300, [300, 600, 1024]),
     (1024, [1024]), (2048, [2048])],
)
def test_retry_token_limits_match_upstream(requested, ladder):
    assert retry_token_limits(requested) == ladder


class _LadderJudge(Judge):
    """Answers ``answer(prompt, budget) -> (text, finish_reason)``; records every budget asked."""

    def __init__(self, answer):
        self.answer = answer
        self.budgets: list[tuple[str, int]] = []

    def chat(self, prompts, *, max_tokens=256, temperature=0.0):  # pragma: no cover - not used here
        raise AssertionError

    def complete(self, prompts, *, max_tokens=256, temperature=0.0, top_p=1.0, system=None):
        out = []
        for p in prompts:
            self.budgets.append((p, max_tokens))
            text, finish = self.answer(p, max_tokens)
            out.append(JudgeReply(text, finish))
        return out


def test_ladder_reasks_only_unresolved_prompts_at_doubling_budgets():
    fake = _LadderJudge(lambda p, n: ("" if p == "hard" and n < 512 else "A", "stop"))
    replies = complete_with_ladder(fake, ["easy", "hard"], max_tokens=128)
    assert [r.text for r in replies] == ["A", "A"]
    assert [r.max_tokens for r in replies] == [128, 512]
    assert fake.budgets == [("easy", 128), ("hard", 128), ("hard", 256), ("hard", 512)]


def test_ladder_retries_on_length_unless_disabled():
    fake = _LadderJudge(lambda p, n: ("partial", "length" if n < 1024 else "stop"))
    assert complete_with_ladder(fake, ["q"], max_tokens=256)[0].max_tokens == 1024
    fake = _LadderJudge(lambda p, n: ("partial", "length"))
    assert complete_with_ladder(fake, ["q"], max_tokens=256, retry_on_length=False)[0].max_tokens == 256


def test_ladder_fails_loudly_when_the_validator_never_accepts():
    fake = _LadderJudge(lambda p, n: ("maybe", "stop"))
    with pytest.raises(JudgeError, match=r"after the token ladder for 1 prompt\(s\)"):
        complete_with_ladder(fake, ["q"], validator=lambda text: text in {"yes", "no"})
    replies = complete_with_ladder(fake, ["q"], validator=lambda text: 1 / 0, allow_unresolved=True)
    assert replies[0].text == "maybe" and replies[0].max_tokens == 1024


def test_callable_judge_applies_the_minimum_completion_budget():
    fake = CallableJudge(lambda prompt, transport, settings: f"{transport}:{settings['max_tokens']}")
    assert fake.complete(["q"], max_tokens=16)[0].text == "completions:128"
    assert fake.chat(["q"], max_tokens=16)[0].text == "chat:16"


def test_a_stack_name_cannot_be_registered_with_another_policy():
    """One ladder, per-stack body policies by name: re-registering a name with other settings is refused."""
    from trace_lib.scoring.judge import StackPolicy, register_stack, stack_policy

    assert register_stack(StackPolicy("persistent")) is not None  # the same policy again: a no-op
    with pytest.raises(ValueError, match="already registered"):
        register_stack(StackPolicy("persistent", seed=1))
    assert stack_policy("persistent").seed is None


def test_climb_ladder_reasks_only_what_check_rejects():
    from trace_lib.scoring.judge import climb_ladder

    asked = []

    def ask(rung, budget, indices):
        asked.append((rung, budget, list(indices)))
        return [JudgeReply("x" * rung, "stop", max_tokens=budget) for _ in indices]

    ladders = climb_ladder(ask, 3, [1, 2, 4], check=lambda rung, i, r: None if rung >= i else "no")
    assert asked == [(0, 1, [0, 1, 2]), (1, 2, [1, 2]), (2, 4, [2])]
    assert [len(rungs) for rungs in ladders] == [1, 2, 3] and ladders[2][-1].problem is None


class _ScriptedTransport:
    """A transport answering ``answer(url, body)`` (raise CallFailed to fail); records every post's timeout."""

    concurrency = 2

    def __init__(self, answer):
        self.answer = answer
        self.timeouts: list[tuple[str, float]] = []
        self.cancelled = False

    def post(self, url, body, *, timeout_s, model=None, weight=1):
        from trace_lib.scoring.judge_http import Answer

        self.timeouts.append((url.split("/v1/", 1)[-1], timeout_s))
        return Answer(self.answer(url, body), 0.0)

    def cancel_all(self):
        self.cancelled = True


def _failing(kind):
    def answer(url, body):
        raise judge_mod.CallFailed(kind, f"{kind} failure")

    return answer


def _recording_sleeps(client, monkeypatch):
    sleeps: list[float] = []
    monkeypatch.setattr(client, "_sleep", sleeps.append)
    return sleeps


def test_complete_backs_off_exponentially_up_to_eight_seconds_between_attempts(monkeypatch):
    client = OpenAIJudge("http://127.0.0.1:9/v1", attempts=7, transport=_ScriptedTransport(_failing("server")))
    sleeps = _recording_sleeps(client, monkeypatch)
    with pytest.raises(JudgeError, match="judge failed after 7 attempts"):
        client.complete(["q"])
    assert sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]  # none after the last attempt
    assert client.transport.timeouts == [("completions", 120.0)] * 7


def test_chat_defaults_to_five_attempts_with_pauses_under_two_seconds_and_a_330_second_timeout(monkeypatch):
    client = OpenAIJudge("http://127.0.0.1:9/v1", transport=_ScriptedTransport(_failing("server")))
    sleeps = _recording_sleeps(client, monkeypatch)
    assert client.chat(["q"]) == [JudgeReply(VLMEVAL_FAIL_MSG, None, ok=False, failure="server")]
    assert client.transport.timeouts == [("chat/completions", 330.0)] * 5
    assert len(sleeps) == 4 and all(0 <= s < 2.0 for s in sleeps)


def test_an_empty_judge_url_is_refused():
    with pytest.raises(JudgeError) as info:
        OpenAIJudge(" , ")
    assert (info.value.message, info.value.field) == ("no judge URL given", "--judge-url")
    assert info.value.hint == "pass --judge-url or set TRACE_JUDGE_URL"


@pytest.mark.parametrize(
    ("failures", "broken"),
    [([], False), (["server", "timeout"], True), (["server", None], False), (["server", "context_length"], False),
     (["garbled"], False), (["empty", "rejected"], False)],
)
def test_a_first_round_failed_only_when_no_reply_is_usable_and_none_failed_for_its_own_request(failures, broken):
    replies = [JudgeReply("A") if kind is None else JudgeReply(VLMEVAL_FAIL_MSG, ok=False, failure=kind)
               for kind in failures]
    assert judge_mod.first_round_failed(replies) is broken


def test_callable_judge_defaults_match_the_judge_interface():
    fake = CallableJudge(lambda prompt, transport, settings: "A")
    fake.chat(["q"])
    fake.complete(["q"])
    assert [settings for _, _, settings in fake.calls] == [
        {"max_tokens": 256, "temperature": 0.0},
        {"max_tokens": 256, "temperature": 0.0, "top_p": 1.0, "system": None},
    ]


def test_the_ladder_sends_greedy_settings_by_default():
    fake = CallableJudge(lambda prompt, transport, settings: "A")
    complete_with_ladder(fake, ["q"])
    assert fake.calls == [("q", "completions", {"max_tokens": 256, "temperature": 0.0, "top_p": 1.0,
                                                 "system": None})]


def test_an_unresolved_ladder_names_the_prompt_the_ceiling_and_the_last_answer():
    fake = _LadderJudge(lambda p, n: ("fine" if p == "ok" else "maybe " * 30, "stop"))
    with pytest.raises(JudgeError) as info:
        complete_with_ladder(fake, ["ok", "q", "r"], validator=lambda text: text == "fine")
    assert info.value.message.endswith("for 2 prompt(s)")
    assert (info.value.field, info.value.expected) == ("prompt #1", "a valid answer within 1024 tokens")
    assert info.value.found == ("maybe " * 30).strip()[:80]


def test_batches_hold_at_most_the_character_cap_and_restart_counting_after_each():
    lengths = [6, 4, 10, 5, 5, 1, 9, 1]
    batches = judge_mod._batches(["x" * n for n in lengths], batch_size=64, max_chars=10)
    assert batches == [[0, 1], [2], [3, 4], [5, 6], [7]]


def test_the_client_counts_the_calls_waiting_for_replies(stub):
    client = _fast(stub.url)
    seen = []
    stub.responder = lambda route, body: seen.append(client.callers) or "yes"
    assert client.callers == 0
    client.complete(["q"])
    assert seen == [1] and client.callers == 0


def test_a_stopped_call_waits_for_the_exchanges_still_running():
    import threading
    import time

    client = OpenAIJudge("http://127.0.0.1:9/v1", concurrency=2, transport=_ScriptedTransport(_failing("server")))
    started, finished = threading.Event(), []

    def fn(item):
        if item == 0:
            started.wait(5)
            raise KeyboardInterrupt
        started.set()
        time.sleep(0.3)
        finished.append(item)
        return item

    try:
        with pytest.raises(KeyboardInterrupt):
            client._map(fn, [0, 1], [(0, 1), (0, 1)])
        assert client.transport.cancelled and finished == [1]
    finally:
        client.close()


def test_close_cancels_queued_requests_without_waiting_for_the_running_one():
    import threading
    import time

    client = OpenAIJudge("http://127.0.0.1:9/v1", concurrency=1, transport=_ScriptedTransport(_failing("server")))
    release = threading.Event()
    lane = client._lane(0)
    running = lane.submit(release.wait, 5)
    queued = lane.submit(lambda: "ran")
    try:
        begun = time.monotonic()
        client.close()
        assert time.monotonic() - begun < 2 and not running.done()
        assert queued.cancelled()
    finally:
        release.set()
    assert running.result(timeout=5) is True
