"""Judge error taxonomy per client stack, against the loopback stub answering as a real vLLM judge does.

Per-request failures (vLLM's context-length HTTP 400, 5xx, empty and garbled replies) follow the stack's retries and
then its fallback; configuration failures (unknown served name, nothing listening, a judge answering every request
of the first round with 5xx) are one-line fatal errors. Request bodies are byte-identical to upstream's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_lib.errors import JudgeError
from trace_lib.scoring.mcq_judge import McqItem, extract_options
from trace_lib.scoring.judge import (
    JUDGE_SERVED_NAME,
    VLMEVAL_FAIL_MSG,
    OpenAIJudge,
    complete_with_ladder,
    render_qwen3_no_think,
)
from trace_lib.testing.openai_server import CONTEXT_LENGTH_MESSAGE, OpenAIStubServer, StubHTTPError, StubRaw

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
