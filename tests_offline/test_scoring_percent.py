"""Reported-number selection (``trace_lib.scoring.percent``): flattening, primary metric, ``auto`` scaling."""

from __future__ import annotations

import math

import pytest

from trace_lib.errors import TraceReproError
from trace_lib.scoring import percent


def test_report_acc_table_flattens_to_split_prefixed_keys() -> None:
    table = percent.report_acc([1, 0, 1, 1], category=["b", "a", "b", "a"], l2_category=["x", "x", "y", "y"])
    assert percent.flatten_summary_metrics(table) == {
        "split=none|Overall": 0.75, "split=none|x": 0.5, "split=none|y": 1.0,
        "split=none|a": 0.5, "split=none|b": 1.0,
    }


def test_report_acc_abbreviates_mmbench_categories() -> None:
    table = percent.report_acc([1], category=["logic_reasoning"])
    assert "LR" in table.columns


def test_imagemcq_reports_overall_acc_times_100() -> None:
    assert percent.primary_score("image_mcq", percent.report_acc([1, 0, 0])).key == "Overall Acc"


def test_split_column_uses_the_generic_rule_and_auto_scaling() -> None:
    result = percent.primary_score("image_mcq", percent.report_acc([1, 0, 1, 1], split=["3D"] * 4))
    assert (result.key, result.raw, result.score) == ("split=3D|Overall", 0.75, 75.0)


def test_mmmu_prefers_the_test_split() -> None:
    metrics = {"split=validation|Overall": 0.5, "split=test|Overall": 0.25}
    assert percent.report_primary_metric("mmmu", metrics) == {"Overall Acc (test)": 25.0}


def test_vqa_keeps_overall_as_is() -> None:
    assert percent.report_primary_metric("image_vqa", {"split=none|Overall": 0.5}) == {"Overall Acc": 0.5}


@pytest.mark.parametrize(
    ("keys", "winner"),
    [
        (["overall", "a_accuracy", "score"], "overall"),
        (["split=dev|Overall", "split=test|Overall"], "split=test|Overall"),
        (["Acc", "Overall Reasoning"], "Overall Reasoning"),
        (["b|acc", "a|acc"], "a|acc"),
    ],
)
def test_generic_key_ranking(keys: list[str], winner: str) -> None:
    assert percent.choose_primary_metric_key(dict.fromkeys(keys, 1.0)) == winner


def test_string_metrics_that_do_not_parse_are_dropped() -> None:
    flat = percent.flatten_summary_metrics({"overall": 35.0, "tabulated_keys": "overall, x", "nested": {"a": "2"}})
    assert flat == {"overall": 35.0, "nested|a": 2}


@pytest.mark.parametrize(("raw", "expected"), [(0.5, 50.0), (52.8, 52.8), (1.0, 100.0), ("45%", 45.0), (0.8, 80.0)])
def test_auto_scaling(raw: object, expected: float) -> None:
    assert percent.scale_value(raw) == pytest.approx(expected)


def test_auto_scaling_rescales_a_percent_at_most_one() -> None:
    # quirk: an 'overall' of 0.5 % is indistinguishable from a fraction and is multiplied again
    assert percent.primary_score("image_base", {"overall": 0.5}).score == 50.0


def test_non_finite_primary_metric_is_an_error() -> None:
    with pytest.raises(TraceReproError, match="not finite"):
        percent.scale_value(math.inf)


def test_mean_of_hits_matches_python_division() -> None:
    assert percent.mean([1] * 793 + [0] * 707) * 100 == 52.86666666666666
