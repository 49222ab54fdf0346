"""Stage attribution (trace_lib.diagnose.attribution) on views the tests build: the first diverging stage of a row,
the stages not comparable, the slice's charges, examples, notes and response statistics, and the diagnosis'
delta, band and one-line headline."""

from __future__ import annotations

import pytest

from trace_lib.diagnose.attribution import (
    ResponseStats,
    RowDivergence,
    SliceDiagnosis,
    diagnose_slice,
    first_divergence,
    not_comparable,
)
from trace_lib.diagnose.views import RowView, SliceKey, SliceView

pytestmark = pytest.mark.offline

KEY = SliceKey("m", 42, "mmstar")
FULL = dict(prompt_sha256="p", media_set_sha256="i", request_key="q", response="r", extracted="A", score=1.0)


def _row(index: str = "0", **fields) -> RowView:
    return RowView(index, **{**FULL, **fields})


def _view(rows, *, score=None, namespace="ns", notes=(), form="extracted answer", key=KEY) -> SliceView:
    return SliceView(key, "src", {r.index: r for r in rows}, score=score, request_namespace=namespace, notes=notes,
                     extraction_form=form)


@pytest.mark.parametrize("left, right, same_ns, expected", [
    (_row(prompt_sha256="p1"), _row(prompt_sha256="p2", media_set_sha256="j"), True,
     ("prompt", "prompt text differs", "p1", "p2")),
    (_row(prompt_sha256=None, media_set_sha256="j"), _row(prompt_sha256="p2"), True,
     ("prompt", "images differ", "j", "i")),
    (_row(request_key="q1"), _row(request_key="q2"), True,
     ("prompt", "request differs with the same prompt text (decoding fields or images)", "q1", "q2")),
    (_row(request_key="q1", response="x"), _row(request_key="q2"), False, ("sampling", "response differs", "x", "r")),
    (_row(request_key=None, response="x"), _row(), True, ("sampling", "response differs", "x", "r")),
    (_row(response="a" * 81), _row(response="a" * 80), True, ("sampling", "response differs", "a" * 77 + "...",
                                                              "a" * 80)),
    (_row(response=None, extracted="B"), _row(), True, ("extraction", "extracted answer differs", "B", "A")),
    (_row(extracted="B"), _row(used_judge=True), True, ("judge", "extracted answer differs", "B", "A")),
    (_row(extracted="B", used_judge=True), _row(), True, ("judge", "extracted answer differs", "B", "A")),
    (_row(extracted=None, score=0.0), _row(), True, ("score", "row credit differs", "0.0", "1.0")),
    (_row(score=1.0 + 1e-8), _row(), True, ("score", "row credit differs", repr(1.0 + 1e-8), "1.0")),
], ids=["prompt", "images", "request", "ns", "nokey", "excerpt", "extract", "judge-r", "judge-l", "score", "tol"])
def test_a_row_is_charged_to_its_first_differing_stage(left, right, same_ns, expected):
    d = first_divergence(left, right, same_namespace=same_ns)
    assert (d.index, d.stage, d.reason, d.left, d.right) == ("0", *expected)


@pytest.mark.parametrize("left, right", [
    (_row(), _row()),
    (_row(prompt_sha256="p1", media_set_sha256=None), _row(prompt_sha256=None, media_set_sha256="j")),
    (_row(score=1.0 + 1e-10), _row()),
    (_row(response=None, extracted=None, score=None), _row(response="x", extracted="B", score=0.0)),
], ids=["same", "one-sided", "within-eps", "unrecorded"])
def test_a_row_with_no_comparable_difference_has_no_divergence(left, right):
    assert first_divergence(left, right, same_namespace=True) is None


def test_extractions_of_two_forms_are_not_compared_the_score_still_is():
    assert first_divergence(_row(extracted="B"), _row(), same_namespace=True, compare_extraction=False) is None
    d = first_divergence(_row(extracted="B", score=0.0), _row(), same_namespace=True, compare_extraction=False)
    assert d.stage == "score"


@pytest.mark.parametrize("left, right, expected", [
    ([_row()], [_row()], {}),
    ([_row(prompt_sha256=None)], [_row()], {"prompt": "the left run recorded no prompt_sha256"}),
    ([_row(response=None)], [_row(response=None)], {"sampling": "the left and right run recorded no response"}),
    ([_row()], [_row(extracted=None), _row("1", extracted=None)],
     {"extraction": "the right run recorded no extracted", "judge": "follows extraction"}),
    ([_row(score=None)], [_row()], {"score": "the left run recorded no score"}),
], ids=["all", "prompt", "both", "extract", "score"])
def test_a_stage_no_row_recorded_is_not_comparable(left, right, expected):
    assert not_comparable(_view(left), _view(right)) == expected


def test_one_row_recording_a_stage_makes_it_comparable():
    assert not_comparable(_view([_row(response=None), _row("1")]), _view([_row()])) == {}


def test_extractions_of_different_forms_are_not_comparable_unless_one_is_missing():
    left, right = _view([_row()], form="prediction"), _view([_row()])
    assert not_comparable(left, right) == {
        "extraction": "the two runs hold different forms (left: prediction; right: extracted answer)",
        "judge": "follows extraction"}
    assert not_comparable(_view([_row(extracted=None)], form="prediction"), right)["extraction"] == (
        "the left run recorded no extracted")


def test_diagnosis_of_two_slices_of_different_keys_is_a_value_error():
    other = SliceKey("m", 43, "mmstar")
    with pytest.raises(ValueError) as refused:
        diagnose_slice(_view([_row()]), _view([_row()], key=other))
    assert str(refused.value) == f"cannot compare slice {KEY.id} with {other.id}"


def test_rows_on_one_side_come_first_in_index_order_then_the_common_rows():
    left = _view([_row(i) for i in ("10", "a", "-3", "2", "9", "0")])
    right = _view([_row(i) for i in ("0", "2", "b", "-1")])
    d = diagnose_slice(left, right)
    assert [(r.index, r.stage, r.reason) for r in d.rows] == [
        ("-3", "rows", "only in the left run"), ("-1", "rows", "only in the right run"),
        ("9", "rows", "only in the left run"), ("10", "rows", "only in the left run"),
        ("a", "rows", "only in the left run"), ("b", "rows", "only in the right run"),
        ("2", "none", "identical where compared"), ("0", "none", "identical where compared")]
    assert d.counts == {"rows": 6} and d.compared_rows == 2 and d.identical_rows == 2 and d.first_stage == "rows"
    assert d.row_stage("b") == "rows" and d.row_stage("0") == "none" and d.row_stage("7") is None


def test_examples_are_three_per_stage_in_stage_order_and_counts_keep_every_row():
    left = [_row(str(i), score=0.0) for i in range(5)] + [_row(str(i), response="x") for i in range(5, 10)]
    right = [_row(str(i)) for i in range(10)] + [_row("10")]
    d = diagnose_slice(_view(left), _view(right))
    assert d.counts == {"rows": 1, "sampling": 5, "score": 5} and d.first_stage == "rows"
    assert [(e.index, e.stage) for e in d.examples] == [("10", "rows"), ("5", "sampling"), ("6", "sampling"),
                                                        ("7", "sampling"), ("0", "score"), ("1", "score"),
                                                        ("2", "score")]
    assert d.compared_rows == 10 and d.identical_rows == 0
    assert d.headline() == (f"{KEY.id}: first diverging stage 'rows' (1 of 10 rows): the two runs cover different "
                            "rows (dataset version, loader drops, an incomplete slice)")


def test_rows_that_agree_with_slice_scores_that_differ_charge_aggregation_once():
    d = diagnose_slice(_view([_row()], score=50.0), _view([_row()], score=40.0), band=10.0)
    assert d.counts == {"aggregation": 1} and d.first_stage == "aggregation" and d.identical_rows == 1
    assert [(r.index, r.stage) for r in d.rows] == [("0", "none")]
    assert [(e.index, e.stage, e.reason, e.left, e.right) for e in d.examples] == [
        ("*", "aggregation", "slice score differs although every row agrees", "50.0", "40.0")]
    assert d.delta == 10.0 and d.within_band is True
    assert d.headline() == (f"{KEY.id}: first diverging stage 'aggregation' (slice): every row agrees but the slice "
                            "score does not (aggregation or rounding)")


@pytest.mark.parametrize("left, right", [
    (_view([_row()], score=50.0), _view([_row()], score=50.0 + 1e-10)),
    (_view([_row()], score=50.0), _view([_row()])),
    (_view([_row()]), _view([_row()], score=50.0)),
    (_view([_row(score=0.0)], score=50.0), _view([_row()], score=40.0)),
], ids=["eps", "right-none", "left-none", "row-charged"])
def test_aggregation_is_charged_only_when_every_row_agrees_and_both_scores_differ(left, right):
    assert "aggregation" not in diagnose_slice(left, right).counts


def test_no_divergence_headline_and_no_delta_without_both_scores():
    d = diagnose_slice(_view([_row(), _row("1")], score=50.0), _view([_row(), _row("1")]), band=1.0)
    assert d.first_stage is None and d.counts == {} and d.examples == () and d.delta is None
    assert d.within_band is None and d.headline() == f"{KEY.id}: no divergence in 2 compared rows"


@pytest.mark.parametrize("left, right, band, expected", [
    (12.5, 10.0, 2.5, True), (10.0, 12.5, 2.5, True), (12.5, 10.0, 2.4, False), (12.5, 10.0, None, None),
    (1e-9, 0.0, 0.0, True),  # |delta| == band + SCORE_EPSILON exactly
], ids=["edge", "edge-neg", "out", "no-band", "eps"])
def test_within_band_includes_the_band_and_its_epsilon(left, right, band, expected):
    assert diagnose_slice(_view([_row()], score=left), _view([_row()], score=right), band=band).within_band is expected


def test_a_judge_stage_is_never_charged_when_extractions_are_not_comparable():
    d = diagnose_slice(_view([_row(extracted="B", used_judge=True)], form="prediction"), _view([_row()]))
    assert d.counts == {} and d.not_comparable["judge"] == "follows extraction"


def test_notes_name_each_side_the_stages_not_compared_and_differing_namespaces():
    left = _view([_row(score=None)], namespace="", notes=("cut short",))
    right = _view([_row(extracted=None)], namespace="other", notes=("old",))
    d = diagnose_slice(left, right)
    assert d.notes == ("left: cut short", "right: old", "not comparable: extraction (the right run recorded no "
                       "extracted)", "not comparable: score (the left run recorded no score)",
                       "request hashes not compared: namespaces differ (none vs other); the prompt stage compares "
                       "prompt text and images only")
    assert set(d.not_comparable) == {"extraction", "judge", "score"}


@pytest.mark.parametrize("left_ns, right_ns, prompt, charged", [
    ("ns", "ns", "p", "prompt"), ("", "", "p", None), ("ns", "other", "p", None), ("", "", None, None),
], ids=["same", "empty", "other", "noprompt"])
def test_request_keys_are_compared_only_within_one_nonempty_namespace(left_ns, right_ns, prompt, charged):
    left = _view([_row(request_key="q1", prompt_sha256=prompt)], namespace=left_ns)
    d = diagnose_slice(left, _view([_row(prompt_sha256=prompt)], namespace=right_ns))
    assert d.first_stage == charged
    namespace_note = [n for n in d.notes if n.startswith("request hashes")]
    assert len(namespace_note) == (1 if charged is None and prompt else 0)


def test_response_stats_of_the_common_rows_or_of_every_row_without_any():
    rows = [RowView("0", response="abcd", finish_reason="length", prompt_tokens=10, completion_tokens=4),
            RowView("1", response="ab", finish_reason="stop", prompt_tokens=20),
            RowView("2", finish_reason="length"), RowView("3")]
    assert ResponseStats.of(rows) == ResponseStats(4, 3.0, 2 / 3, 15.0, 4.0)
    assert ResponseStats.of([RowView("0")]) == ResponseStats(1, None, None, None, None)
    assert ResponseStats.of([]) == ResponseStats(0, None, None, None, None)
    d = diagnose_slice(_view(rows), _view([RowView("0"), RowView("1")]))
    assert d.left_stats == ResponseStats(2, 3.0, 0.5, 15.0, 4.0) and d.right_stats.rows == 2
    d = diagnose_slice(_view(rows), _view([RowView("9")]))
    assert d.left_stats == ResponseStats.of(rows) and d.right_stats.rows == 1 and d.compared_rows == 0


def test_identical_rows_leave_out_rows_and_aggregation_charges():
    d = SliceDiagnosis(KEY, "l", "r", 5, {"rows": 3, "prompt": 1, "score": 1, "aggregation": 1}, (), None, None,
                       None, ResponseStats.of([]), ResponseStats.of([]), rows=(RowDivergence("0", "prompt", "x"),))
    assert d.identical_rows == 3 and d.first_stage == "rows" and d.row_stage("0") == "prompt"
    assert d.headline() == (f"{KEY.id}: first diverging stage 'rows' (3 of 5 rows): the two runs cover different rows "
                            "(dataset version, loader drops, an incomplete slice)")


def test_an_index_of_two_dashes_and_digits_sorts_as_text_not_a_traceback():
    """Regression: ``--3`` (a row on one side only) was ordered as a number, ``int('--3')``: a ValueError traceback
    out of ``trace-repro diagnose``. Only one leading minus makes a number."""
    d = diagnose_slice(_view([_row(i) for i in ("0", "--3", "-2", "10")]), _view([_row("0")]))
    assert [(r.index, r.stage) for r in d.rows] == [("-2", "rows"), ("10", "rows"), ("--3", "rows"), ("0", "none")]
