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


@pytest.mark.parametrize(
    ("keys", "winner"),
    [
        (["overall", "model=A|split=test|Overall"], "overall"),  # 100 beats 95 + 4
        (["b|overall", "Overall (split=test)"], "b|overall"),  # 95 beats 90 + 4
        (["a_accuracy", "score"], "a_accuracy"),  # 70 beats 60
        (["b|score", "a_score"], "b|score"),  # 60 beats 50
        (["x_score", "a_other"], "x_score"),  # 50 beats 0
        (["b|split=test|acc", "a|split=validation|acc"], "b|split=test|acc"),  # +4 beats +3
        (["b|split=validation|acc", "a|split=val|acc"], "b|split=validation|acc"),  # +3 beats +2
        (["b|split=val|acc", "a|split=dev|acc"], "b|split=val|acc"),  # +2 beats +1
        (["b|split=dev|acc", "a|acc"], "b|split=dev|acc"),  # +1 beats none
    ],
    ids=["exact-overall", "bar-overall", "acc-in", "bar-score", "score-in", "test", "validation", "val", "dev"],
)
def test_generic_key_ranking_margins_of_one(keys: list[str], winner: str) -> None:
    assert percent.choose_primary_metric_key(dict.fromkeys(keys, 1.0)) == winner


def test_mmmu_falls_back_to_the_validation_split() -> None:
    metrics = {"split=validation|Overall": 0.5, "split=none|Overall": 0.25}
    assert percent.report_primary_metric("mmmu", metrics) == {"Overall Acc (val)": 50.0}


def test_a_non_numeric_primary_value_reports_nothing() -> None:
    assert percent.report_primary_metric("image_base", {"overall": "n/a"}) == {}


def test_no_primary_metric_is_an_error_naming_what_was_found() -> None:
    with pytest.raises(TraceReproError, match="^evaluator did not report exactly one primary metric") as info:
        percent.primary_score("image_base", {"note": "text only"})
    assert info.value.found == []


def test_group_column_mixing_text_and_missing_values_is_an_error() -> None:
    with pytest.raises(TraceReproError, match="^category: group column mixes text and missing values") as info:
        percent.report_acc([1, 0], category=["a", None])
    assert info.value.field == "category"


def test_flattening_numbers_lists_and_keys() -> None:
    result = {" acc ": 1, "": 0.5, "flag": True, "one": [0.25], "pair": [1, 2], "mixed": [1, "x"]}
    assert percent.flatten_summary_metrics(result) == {
        "acc": 1, "value": 0.5, "one": 0.25, "pair|0": 1, "pair|1": 2, "mixed|0": 1}


def test_a_nested_table_is_prefixed_and_an_empty_one_gives_nothing() -> None:
    nested = {"res": percent.report_acc([1, 0]), "empty": percent.MetricTable(("split", "Overall"), ())}
    assert percent.flatten_summary_metrics(nested) == {"res|split=none|Overall": 0.5}
    assert percent.flatten_summary_metrics(percent.MetricTable(("split", "Overall"), ())) == {}


def test_numeric_text_cells_make_a_table_column_numeric() -> None:
    table = percent.MetricTable(("split", "Overall"), (("none", "0.5"), ("dev", "1")))
    assert percent.flatten_summary_metrics(table) == {"split=none|Overall": 0.5, "split=dev|Overall": 1}
