"""Judge requests ordered for prefix reuse (trace_lib.scoring.request_order): a deterministic permutation that
makes every shared prefix contiguous, used by the judge client without changing what a protocol gets back."""

from __future__ import annotations

import random

import pytest

from trace_lib.scoring.judge import JUDGE_SERVED_NAME, OpenAIJudge, render_qwen3_no_think
from trace_lib.scoring.request_order import ORDER_ENV, dispatch_order, enabled, prefix_order
from trace_lib.testing.openai_server import OpenAIStubServer

pytestmark = pytest.mark.offline

INSTRUCTIONS = ["Extract the answer.\n", "Judge the answer.\n", "Extract the answer. Examples: 1, 2\n"]
QUESTIONS = [f"Question {q}: how many?\n" for q in range(6)]


def _requests(seed: int) -> list[str]:
    """Judge prompts of three 'seeds' of a slice: instruction + question + a response that differs by seed."""
    rng = random.Random(seed)
    prompts = [f"{i}{q}Response (seed {s}): {rng.choice('ABCD')}" for s in (42, 43, 44)
               for i in INSTRUCTIONS for q in QUESTIONS]
    rng.shuffle(prompts)
    return prompts


def test_every_shared_prefix_is_contiguous():
    prompts = _requests(0)
    order = prefix_order(prompts)
    assert sorted(order) == list(range(len(prompts)))
    sent = [prompts[i] for i in order]
    for prefix in INSTRUCTIONS + [i + q for i in INSTRUCTIONS for q in QUESTIONS]:
        hits = [n for n, text in enumerate(sent) if text.startswith(prefix)]
        assert hits == list(range(hits[0], hits[0] + len(hits))), prefix


def test_the_order_is_a_function_of_the_requests_alone():
    prompts = _requests(1)
    shuffled = prompts[:]
    random.Random(2).shuffle(shuffled)
    assert [prompts[i] for i in prefix_order(prompts)] == [shuffled[i] for i in prefix_order(shuffled)]
    twins = ["same", "other", "same"]
    assert prefix_order(twins) == [1, 0, 2]  # equal prompts keep their positions


def test_the_switch_turns_ordering_off(monkeypatch):
    prompts = ["b", "a", "c"]
    assert dispatch_order(prompts) == [1, 0, 2]
    monkeypatch.setenv(ORDER_ENV, "0")
    assert dispatch_order(prompts) == [0, 1, 2]


@pytest.mark.parametrize(("value", "on"), [("0", False), (" Off ", False), ("FALSE", False), ("no", False),
                                           ("1", True), ("yes", True), ("", True)])
def test_the_switch_reads_the_words_for_off_in_any_case_and_anything_else_is_on(monkeypatch, value, on):
    """``0``, ``false``, ``no`` and ``off`` (any case, spaces around) turn ordering off; anything else leaves it
    on."""
    monkeypatch.setenv(ORDER_ENV, value)
    assert (enabled(), dispatch_order(["b", "a"])) == (on, [1, 0] if on else [0, 1])


def _echo(route: str, body: dict) -> str:
    if route == "completions":
        return body["prompt"].split("\n")[1].removeprefix("Q:").removesuffix("<|im_end|>")
    return body["messages"][0]["content"][0]["text"].removeprefix("Q:")


@pytest.mark.parametrize("route", ["completions", "chat"])
def test_replies_come_back_in_prompt_order_and_requests_go_out_sorted(route):
    prompts = [f"Q:{w}" for w in ("pear", "apple", "fig", "apple", "kiwi")]
    with OpenAIStubServer(_echo, model=JUDGE_SERVED_NAME) as stub:
        judge = OpenAIJudge(stub.url, concurrency=1, batch_size=1, backoff_s=0, chat_pause_s=0)
        ask = judge.complete if route == "completions" else judge.chat
        replies = ask(prompts)
        sent = [body.get("prompt") or body["messages"][0]["content"][0]["text"] for _, body in stub.requests]
    assert [r.text for r in replies] == ["pear", "apple", "fig", "apple", "kiwi"]
    expected = sorted(prompts)
    if route == "completions":
        expected = [render_qwen3_no_think(p) for p in expected]
    assert sent == expected
