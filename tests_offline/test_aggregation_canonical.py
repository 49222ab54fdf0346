"""The release's canonical numbers (``aggregation.canonical``) read from a tiny ``results.json`` beside the release's
suite: per-seed scores keyed by (model, benchmark), (model, category) and model, the claims' per-seed deltas, the rows
of a benchmark, category deltas, the binomial scale and its clamp, the cells the seed-variance prior is fitted to, and
one error line naming ``results.json`` and the field of each malformed entry."""

from __future__ import annotations

import json
import shutil

import pytest

from trace_lib.aggregation import moderation
from trace_lib.aggregation.canonical import Canonical, Comparison, binomial_scale, load_canonical, mean
from trace_lib.errors import ReleaseFileError
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot
from trace_lib.release.suite import load_suite

pytestmark = pytest.mark.offline

BASE, TRACE = "qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"
SPATIAL = "Spatial Reasoning"
COMPARISON_FIELDS = "comparison lacks model_id, base_model_id, benchmark_deltas or overall_delta"


def _scores(model: str, values: dict[int, float], **key: str) -> list[dict]:
    return [{"model_id": model, **key, "seed": seed, "score": score} for seed, score in values.items()]


def _deltas(values: dict[int, float]) -> dict:
    return {"seed_values": [{"seed": seed, "delta": delta} for seed, delta in values.items()]}


def _doc() -> dict:
    """Two models' scores on ERQA, one category and overall, and the claim ``trace - base``."""
    return {
        "scores": {
            "benchmark_scores": _scores(TRACE, {42: 40.0, 43: 42.0, 44: 44.0}, benchmark_id="erqa")
            + _scores(BASE, {42: 30.5}, benchmark_id="erqa"),
            "category_scores": _scores(TRACE, {42: 50.0}, category_name=SPATIAL)
            + _scores(BASE, {42: 45.0}, category_name=SPATIAL),
            "overall_scores": _scores(TRACE, {42: 60.0}) + _scores(BASE, {42: 55.0}),
        },
        "comparisons": [{"model_id": TRACE, "base_model_id": BASE,
                         "benchmark_deltas": [{"benchmark_id": "erqa", **_deltas({42: 9.5})}],
                         "overall_delta": _deltas({42: 5.0})}],
    }


def _release(tmp_path, release, doc: object) -> ReleaseRoot:
    """A release root holding the session release's suite and ``doc`` as its ``results.json``, one level below
    ``tmp_path`` (a release directly in a test's directory is discovered by the in-process pytest runs beside it)."""
    root = tmp_path / "release"
    (root / identity.RESULTS).parent.mkdir(parents=True)
    shutil.copyfile(release.file(identity.SUITE), root / identity.SUITE)
    (root / identity.RESULTS).write_text(json.dumps(doc))
    return ReleaseRoot(root)


def test_scores_are_keyed_by_model_and_benchmark_or_category_and_overall_by_model(tmp_path, release):
    canonical = load_canonical(_release(tmp_path, release, _doc()))
    assert canonical.benchmarks == {(TRACE, "erqa"): {42: 40.0, 43: 42.0, 44: 44.0}, (BASE, "erqa"): {42: 30.5}}
    assert canonical.categories == {(TRACE, SPATIAL): {42: 50.0}, (BASE, SPATIAL): {42: 45.0}}
    assert canonical.overall == {TRACE: {42: 60.0}, BASE: {42: 55.0}}
    assert canonical.model_ids == (TRACE, BASE)
    assert canonical.suite.keys == load_suite(release).keys and canonical.row_counts is None


def test_a_comparison_holds_its_per_seed_benchmark_and_overall_deltas(tmp_path, release):
    (claim,) = load_canonical(_release(tmp_path, release, _doc())).comparisons
    assert claim == Comparison(TRACE, BASE, {"erqa": {42: 9.5}}, {42: 5.0})
    assert claim.comparison_id == f"{TRACE}-vs-{BASE}"


def test_a_release_without_comparisons_has_none(tmp_path, release):
    doc = _doc()
    del doc["comparisons"]
    assert load_canonical(_release(tmp_path, release, doc)).comparisons == ()


def test_rows_are_the_lanes_count_where_it_names_the_benchmark_else_the_suites(release):
    suite = load_suite(release)
    lane = Canonical(suite, {}, {}, {}, (), row_counts={"erqa": 8})
    assert (lane.rows("erqa"), lane.rows("treebench")) == (8, suite.benchmark("treebench").rows)
    assert Canonical(suite, {}, {}, {}, ()).rows("erqa") == suite.benchmark("erqa").rows != 8


def test_a_category_delta_is_model_minus_base_on_their_common_seeds_in_seed_order(release):
    categories = {(TRACE, SPATIAL): {44: 51.0, 42: 50.0, 43: 49.0}, (BASE, SPATIAL): {42: 45.0, 44: 40.0}}
    delta = Canonical(load_suite(release), {}, categories, {}, ()).category_delta(Comparison(TRACE, BASE, {}, {}),
                                                                                  SPATIAL)
    assert delta == {42: 5.0, 44: 11.0} and list(delta) == [42, 44]


def test_a_category_delta_is_empty_when_either_model_lacks_the_category(release):
    categories = {(TRACE, "Charts & Tables"): {42: 1.0}, (BASE, "Visual Math"): {42: 2.0}}
    canonical, claim = Canonical(load_suite(release), {}, categories, {}, ()), Comparison(TRACE, BASE, {}, {})
    assert [canonical.category_delta(claim, c) for c in ("Charts & Tables", "Visual Math", SPATIAL)] == [{}, {}, {}]


def test_mean_is_the_mean_over_seeds():
    assert mean({42: 1.0, 43: 2.0, 44: 6.0}) == 3.0


def test_binomial_scale_is_100_squared_p_1_minus_p_over_rows():
    assert binomial_scale(50.0, 100) == 25.0
    assert binomial_scale(20.0, 400) == pytest.approx(4.0, rel=1e-12)


def test_binomial_scale_keeps_p_half_a_row_inside_0_and_1():
    rows = 50
    edge = 1e4 * (0.5 / rows) * (1 - 0.5 / rows) / rows
    for percent in (-5.0, 0.0, 1.0, 99.0, 100.0, 130.0):  # 1% of 50 rows is half a row
        assert binomial_scale(percent, rows) == pytest.approx(edge, rel=1e-12), percent


def test_the_seed_prior_fits_each_suite_cells_seed_variance_over_its_binomial_scale(release, monkeypatch):
    """Cells of one seed and benchmarks outside the suite are left out; dof is seeds - 1; one-way: no members."""
    fitted = []

    def fit(groups, members):  # noqa: ANN001, ANN202
        fitted.append((groups, members))
        return "prior"

    monkeypatch.setattr(moderation, "fit_variance_prior", fit)
    suite = load_suite(release)
    cells = {(TRACE, "erqa"): {42: 40.0, 43: 42.0, 44: 44.0}, (BASE, "erqa"): {42: 30.0, 43: 31.0},
             (BASE, "treebench"): {42: 50.0}, (TRACE, "not_a_suite_benchmark"): {42: 1.0, 43: 2.0}}
    canonical = Canonical(suite, cells, {}, {}, ())
    assert canonical.seed_prior == "prior" and canonical.seed_prior == "prior" and len(fitted) == 1
    rows = suite.benchmark("erqa").rows
    assert fitted[0] == ({"erqa": [(4.0 / binomial_scale(42.0, rows), 2), (0.5 / binomial_scale(30.5, rows), 1)]},
                         None)
    monkeypatch.setattr(moderation, "TWO_WAY_PRIOR", True)
    assert Canonical(suite, cells, {}, {}, ()).seed_prior == "prior" and fitted[1][1] == {"erqa": [TRACE, BASE]}


def test_the_seed_prior_is_none_with_a_single_cell(release):
    assert Canonical(load_suite(release), {(TRACE, "erqa"): {42: 40.0, 43: 42.0}}, {}, {}, ()).seed_prior is None


def _pop(*path: str | int):  # noqa: ANN202
    def edit(doc: dict) -> None:
        for step in path[:-1]:
            doc = doc[step]
        doc.pop(path[-1])

    return edit


def _set(value: object, *path: str | int):  # noqa: ANN202
    def edit(doc: dict) -> None:
        for step in path[:-1]:
            doc = doc[step]
        doc[path[-1]] = value

    return edit


@pytest.mark.parametrize(("edit", "field", "message"), [
    pytest.param(_pop("scores", "category_scores"), "scores.category_scores", "required field is missing",
                 id="no-category-scores"),
    pytest.param(_set([], "scores"), "scores.benchmark_scores", "required field is missing", id="scores-a-list"),
    pytest.param(_pop("scores", "benchmark_scores", 1, "seed"), "scores.benchmark_scores[1]",
                 "entry lacks a key, seed or score", id="no-seed"),
    pytest.param(_set("n/a", "scores", "overall_scores", 1, "score"), "scores.overall_scores[1]",
                 "entry lacks a key, seed or score", id="score-not-a-number"),
    pytest.param(_pop("scores", "category_scores", 0, "category_name"), "scores.category_scores[0]",
                 "entry lacks a key, seed or score", id="no-category-name"),
    pytest.param(_pop("comparisons", 0, "base_model_id"), "comparisons[0]", COMPARISON_FIELDS, id="no-base"),
    pytest.param(_pop("comparisons", 0, "benchmark_deltas", 0, "benchmark_id"), "comparisons[0]", COMPARISON_FIELDS,
                 id="no-benchmark-id"),
    pytest.param(_pop("comparisons", 0, "benchmark_deltas", 0, "seed_values", 0, "delta"),
                 "comparisons[0].benchmark_deltas", "delta lacks seed_values of seed and delta", id="no-delta"),
    pytest.param(_pop("comparisons", 0, "overall_delta", "seed_values"), "comparisons[0].overall_delta",
                 "delta lacks seed_values of seed and delta", id="no-overall-seed-values"),
])
def test_a_malformed_entry_is_one_line_naming_results_json_and_the_field(tmp_path, release, edit, field, message):
    doc = _doc()
    edit(doc)
    with pytest.raises(ReleaseFileError) as caught:
        load_canonical(_release(tmp_path, release, doc))
    assert (caught.value.file, caught.value.field, str(caught.value)) == (identity.RESULTS, field,
                                                                           f"{identity.RESULTS}: {field}: {message}")


@pytest.mark.parametrize(("edit", "field", "found"), [
    pytest.param(_set(None, "scores", "category_scores"), "scores.category_scores", "NoneType", id="null-scores"),
    pytest.param(_set(5, "comparisons"), "comparisons", "int", id="comparisons-a-number"),
])
def test_scores_or_comparisons_that_are_not_a_list_are_one_line_naming_the_field(tmp_path, release, edit, field,
                                                                                   found):
    doc = _doc()
    edit(doc)
    with pytest.raises(ReleaseFileError) as caught:
        load_canonical(_release(tmp_path, release, doc))
    assert str(caught.value) == f"{identity.RESULTS}: {field}: not a list (found {found!r})"


def test_results_json_that_is_not_an_object_is_one_line_naming_the_file(tmp_path, release):
    with pytest.raises(ReleaseFileError) as caught:
        load_canonical(_release(tmp_path, release, []))
    assert str(caught.value) == f"{identity.RESULTS}: document must be a JSON object (found 'list')"
