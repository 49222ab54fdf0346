"""VLMEvalKit ImageMCQ machinery: prompt, ``can_infer`` (extraction.choices) and the MCQ judge loop (scoring.mcq_judge)."""

from __future__ import annotations

import hashlib
import math

import pytest

from trace_lib.errors import InputError, JudgeError
from trace_lib.extraction import choices as mcq
from trace_lib.scoring import mcq_judge
from trace_lib.scoring.judge import CallableJudge, JudgeReply

SUITCASE = {"A": "The suitcase is on the book.", "B": "The suitcase is beneath the cat.",
            "C": "The suitcase is beneath the bed.", "D": "The suitcase is beneath the book."}


def test_imagemcq_prompt_exact_text() -> None:
    row = {"index": 1, "hint": "Look left", "question": "Where?", "A": "up", "B": math.nan, "C": "down"}
    assert mcq.build_imagemcq_prompt(row) == (
        "Hint: Look left\nQuestion: Where?\nOptions:\nA. up\nC. down\n"
        "Please select the correct answer from the options above. \n"
    )


def test_imagemcq_prompt_without_options_or_hint() -> None:
    assert mcq.build_imagemcq_prompt({"question": "Why?", "hint": math.nan}) == "Question: Why?\n"


#: SHA-256 of each MCQ judge template rendered with slots {Q}, {O}, {P}; equal to the pinned upstream builders'.
TEMPLATE_SHA256 = {
    "default": "b432c7b0529cd6b51708600e9f3a55c49d23172f9db1d0b11ac38245ceae4728",
    "BLINK": "35ebd275240f39e6a50cee9e3db84bfd31d2a8de51172ac98ac31bd301a3ea9a",
    "WeMath": "90b84e95a11a82deec6f3eadc4a5b9905a5021474b32ad4151ab6478fb635d7a",
    "cn": "01453cabf7f7482248eaab341fa81718af65ee6de836aeae3dbc6b7de7c84ae8",
}


@pytest.mark.parametrize("variant", sorted(TEMPLATE_SHA256))
def test_judge_templates_are_pinned(variant: str) -> None:
    if variant == "cn":
        rendered = mcq.build_judge_prompt("{Q}问", "{O}", "{P}").replace("{Q}问", "{Q}")
    else:
        rendered = mcq.build_judge_prompt("{Q}", "{O}", "{P}", dataset=None if variant == "default" else variant)
    assert hashlib.sha256(rendered.encode()).hexdigest() == TEMPLATE_SHA256[variant]


def test_default_judge_template_length_and_tail() -> None:
    rendered = mcq.build_judge_prompt("{Q}", "{O}", "{P}")
    assert len(rendered) == 767
    assert rendered.endswith("Example 3: \nQuestion: {Q}?\nOptions: {O}\nAnswer: {P}\nYour output: ")


@pytest.mark.parametrize(
    ("question", "dataset", "opening"),
    [("箱子在哪里", None, "你是一个帮助我匹配答案"), ("Which point?", "BLINK", "You are an AI assistant who will help me to match an answer with several options of a single-choice question. You are provided"),
     ("Where?", "WeMath", "You are an AI assistant who will help me to match an answer")],
)
def test_judge_template_variants(question: str, dataset: str | None, opening: str) -> None:
    assert mcq.build_judge_prompt(question, "O", "P", dataset=dataset).startswith(opening)


def test_non_text_question_fails_like_upstream() -> None:
    with pytest.raises(InputError, match="question is not text") as info:
        mcq.build_judge_prompt(math.nan, "O", "P")
    assert (info.value.field, info.value.found) == ("question", "nan")


def test_option_string_lists_every_choice() -> None:
    assert mcq.build_option_str({"A": "x", "B": 5}) == "There are several options: \nA. x\nB. 5\n"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("A", "A"),
        ("The answer is B", "B"),                     # count 1 but early: the verbose rule finds it
        ("B and C both seem plausible", False),       # two letters
        ("so B is correct in my view", False),        # single letter too early, no verbose marker
        ("the answer is about the left side.", "A"),  # case-insensitive verbose rule
        ("Cannot determine the answer", "Z"),
        ("Z", "Z"),
        ("Failed to obtain answer via API.", False),
        ("**(C)**", "C"),
    ],
)
def test_can_infer_option(answer: str, expected: object) -> None:
    assert mcq.can_infer_option(answer, SUITCASE) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("so B w x y", "B"),  # five tokens: index 1 is among the last four
        ("B w x y z", False),  # the fifth token from the end is outside the window
    ],
    ids=["last-four", "fifth-from-end"],
)
def test_can_infer_option_last_four_tokens_window(answer: str, expected: object) -> None:
    assert mcq.can_infer_option(answer, SUITCASE) == expected


def test_api_failure_marker_wins_over_a_named_letter() -> None:
    assert mcq.can_infer_option("Failed to obtain answer via API. A", SUITCASE) is False


@pytest.mark.parametrize(("answer", "expected"), [("ab" + "." * 6, "A"), ("ab" + "." * 7, False)],
                         ids=["twice-the-texts", "one-more"])
def test_can_infer_text_length_limit_is_twice_the_option_texts(answer: str, expected: object) -> None:
    assert mcq.can_infer_text(answer, {"A": "ab", "B": "cd"}) == expected


def test_can_infer_text_rejects_a_label_that_is_not_an_uppercase_letter() -> None:
    with pytest.raises(InputError, match="^choices: option label is not an uppercase letter") as info:
        mcq.can_infer_text("x", {"A": "x", "b": "y"})
    assert (info.value.field, info.value.found) == ("choices", "b")


def test_can_infer_text_needs_a_short_answer_and_one_match() -> None:
    assert mcq.can_infer("The suitcase is beneath the cat.", dict(SUITCASE)) == "B"
    assert mcq.can_infer("beneath " * 40, dict(SUITCASE)) is False


def test_can_infer_text_lowercases_the_callers_choices_in_place() -> None:
    choices = {"A": "Lamp", "B": "Chair"}
    mcq.can_infer("a chair", choices)
    assert choices == {"A": "lamp", "B": "chair"}


def _items(*predictions: str) -> list[mcq_judge.McqItem]:
    return [mcq_judge.McqItem(index=i, question="Where is the suitcase", prediction=p, choices=dict(SUITCASE))
            for i, p in enumerate(predictions)]


def test_prefetch_needs_no_judge() -> None:
    out = mcq_judge.extract_options(_items("A"), judge=None, use_judge=True, benchmark="mmstar", seed=42)
    assert (out[0].option, out[0].method, out[0].judge_calls) == ("A", "prefetch", 0)


def test_exact_matching_policy_gives_z() -> None:
    out = mcq_judge.extract_options(_items("B and C"), judge=None, use_judge=False, benchmark="realworldqa", seed=42)
    assert (out[0].option, out[0].method) == ("Z", "exact_matching")


def test_missing_judge_on_a_judge_route_raises() -> None:
    with pytest.raises(JudgeError, match="need the Qwen3-32B judge"):
        mcq_judge.extract_options(_items("B and C"), judge=None, use_judge=True, benchmark="mmstar", seed=42)


def test_judge_prompt_and_settings() -> None:
    judge = CallableJudge(lambda prompt, transport, settings: "C")
    out = mcq_judge.extract_options(_items("B and C"), judge=judge, use_judge=True, benchmark="mmstar", seed=42)
    prompt, transport, settings = judge.calls[0]
    assert (out[0].option, transport, settings) == ("C", "chat", {"max_tokens": 256, "temperature": 0.0})
    assert prompt.endswith("Question: Where is the suitcase?\nOptions: There are several options: \n"
                           "A. The suitcase is on the book.\nB. The suitcase is beneath the cat.\n"
                           "C. The suitcase is beneath the bed.\nD. The suitcase is beneath the book.\n\n"
                           "Answer: B and C\nYour output: ")


def test_three_unusable_replies_fall_back_deterministically() -> None:
    judge = CallableJudge(lambda *_: "I cannot decide")
    first = mcq_judge.extract_options(_items("B and C"), judge=judge, use_judge=True, benchmark="mmstar", seed=43)
    again = mcq_judge.extract_options(_items("B and C"), judge=judge, use_judge=True, benchmark="mmstar", seed=43)
    assert first[0].fallback and first[0].judge_calls == 3 and first[0].option in "ABCDZ"
    assert first == again


def test_api_failure_rounds_count_toward_the_three() -> None:
    replies = iter(["Failed to obtain answer via API. ", "Failed to obtain answer via API. ", "D"])
    judge = CallableJudge(lambda *_: next(replies))
    out = mcq_judge.extract_options(_items("B and C"), judge=judge, use_judge=True, benchmark="mmstar", seed=42)
    assert (out[0].option, out[0].judge_calls, out[0].fallback) == ("D", 3, False)


class _DeadJudge(CallableJudge):
    def chat(self, prompts, *, max_tokens=256, temperature=0.0):  # type: ignore[override]
        return [JudgeReply("Failed to obtain answer via API. ", None, ok=False) for _ in prompts]


def test_unreachable_judge_is_a_hard_failure() -> None:
    with pytest.raises(JudgeError, match="every judge request failed"):
        mcq_judge.extract_options(_items("B and C"), judge=_DeadJudge(lambda *_: ""), use_judge=True,
                            benchmark="mmstar", seed=42)
