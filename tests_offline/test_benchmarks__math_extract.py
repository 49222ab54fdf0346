"""The direct math route's extraction pipeline (``run_mathv_local_judge`` / ``run_mathvista_local_judge`` with the
persistent judge of ``run_external_benchmark_score_queue.py``): prefetch failures go to the judge, the judge's
request settings and ladder count, the judged workbook's empty-``res`` check, per-group accuracy, and the
helpers' error messages."""

from __future__ import annotations

import pytest

from trace_lib.benchmarks import _math_extract
from trace_lib.benchmarks._math_extract import Extracted, extract, judged_table
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError, JudgeError
from trace_lib.scoring.judge import CallableJudge, Judge, JudgeReply


class _FixedJudge(Judge):
    """Answers every completion with ``text``, the given finish reason and reported budget."""

    def __init__(self, text: str, finish_reason: str, budget: int | None = None) -> None:
        self.text, self.finish_reason, self.budget = text, finish_reason, budget
        self.budgets: list[int] = []

    def chat(self, prompts, *, max_tokens=256, temperature=0):  # type: ignore[override]
        raise AssertionError("the extraction judge uses completions")

    def complete(self, prompts, *, max_tokens=256, temperature=0.0, top_p=1.0, system=None):  # type: ignore[override]
        self.budgets.append(max_tokens)
        return [JudgeReply(self.text, self.finish_reason, max_tokens=self.budget or max_tokens) for _ in prompts]


def _rows(n: int = 1) -> list[dict]:
    return [{"index": 10 + i, "question": f"Q{i}?", "prediction": f"r{i}"} for i in range(n)]


def _extract(rows, judge, prefetch=lambda row: False):
    return extract(rows, prefetch=prefetch, judge_prompt=lambda row: _math_extract.judge_prompt("P:", row),
                   judge=judge, benchmark="mathvision")


def test_a_prefetch_that_raises_sends_the_row_to_the_judge():
    def prefetch(row):
        raise ValueError("no options")

    out = _extract(_rows(), CallableJudge(lambda p, t, s: " 14 "), prefetch)
    assert out == Extracted(["14"], ["Succeed"], [1], ["P:Q0?\nModel respone: r0Extracted answer:"])


def test_judge_calls_count_the_ladder_rung_of_the_accepted_reply():
    out = _extract(_rows(), CallableJudge(lambda p, t, s: "" if s["max_tokens"] == 128 else "B"))
    assert (out.res, out.judge_calls) == (["B"], [2])


def test_an_output_cut_at_128_tokens_is_accepted():
    judge = _FixedJudge("B", "length")
    out = _extract(_rows(), judge)
    assert (out.res, out.judge_calls, judge.budgets) == (["B"], [1], [128])


def test_a_reply_budget_off_the_ladder_counts_as_one_request():
    assert _extract(_rows(), _FixedJudge("B", "stop", budget=64)).judge_calls == [1]


def test_a_judge_prompt_that_cannot_be_built_is_an_input_error():
    rows = [{"index": 7, "question": 3, "prediction": "x"}]
    with pytest.raises(InputError) as info:
        _extract(rows, None)
    assert (info.value.message, info.value.field) == (
        "the judge prompt cannot be built (TypeError: question is int, not text); upstream's runner aborts",
        "rows[7]")


def test_rows_needing_the_judge_without_one_name_the_flag():
    with pytest.raises(JudgeError) as info:
        _extract(_rows(2), None)
    assert (info.value.message, info.value.field, info.value.hint) == (
        "mathvision: 2 rows need the Qwen3-32B extraction judge and none is configured", "--judge-url",
        "serve Qwen3-32B and pass --judge-url (TRACE_JUDGE_URL)")


def _extracted(res: list) -> Extracted:
    return Extracted(res, ["Succeed"] * len(res), [1] * len(res), [None] * len(res))


@pytest.mark.parametrize(
    ("table", "res", "message"),
    [({"index": ["10", "11", "12"]}, ["14", "", " "], "2 empty extractions (first index '11')"),
     ({"prediction": ["a", "b", "c"]}, ["14", "", ""], "2 empty extractions (first index 1)")],
    ids=["index", "position"],
)
def test_an_empty_extraction_fails_the_slice(table, res, message):
    with pytest.raises(JudgeError) as info:
        judged_table(table, _extracted(res), benchmark="mathvision")
    expected = (f"mathvision judge produced {message}", "upstream fails the slice here")
    assert (info.value.message, info.value.hint) == expected


def test_literal_na_tokens_are_not_empty_extractions():
    # _validate_math_like_judged_table reads with keep_default_na=False: "None" is a valid extraction
    rows = judged_table({"index": ["1", "2"]}, _extracted(["None", "NA"]), benchmark="mathvision")
    assert len(rows) == 2


def test_per_group_accuracy_in_percent():
    rows = [{**row, "category": cat} for row, cat in zip(_rows(3), ["alg", "alg", "geo"])]
    result = _math_extract.score_slice(
        rows, ["r0", "r1", "r2"], ScoringContext(seed=42, judge=CallableJudge(lambda p, t, s: "A")),
        benchmark="mathvision", post_check=lambda row, prefetch: False,
        judge_prompt=lambda row: _math_extract.judge_prompt("P:", row),
        score_row=lambda row: row["prediction"] != "r1", groups=lambda row: [row["category"]],
        detail=lambda row: {}, aggregate=lambda hit, total: hit / total * 100)
    assert result.metrics == {"Overall": 2 / 3 * 100, "alg": 50.0, "geo": 100.0}


def test_helper_error_messages():
    with pytest.raises(ValueError, match=r"^4 hints for 5 in-context examples$"):
        _math_extract.render_examples(("h",) * 4)
    with pytest.raises(TypeError, match=r"^choices cell is not a Python literal: "):
        _math_extract.parse_choices("[1, ")
