"""The row-level verdict (trace_lib.aggregation.verdict) on campaigns built at the row level: the three outcomes,
seed-level excess, the paper's claims, the linearised aggregates, ``trace-repro verdict --credits`` and bad files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trace_lib.aggregation.canonical import load_canonical, mean
from trace_lib.aggregation.credits import CreditTable
from trace_lib.aggregation.verdict import VerdictPlan, judge_credits, release_seed_excess
from trace_lib.cli.main import main
from trace_lib.errors import InputError
from trace_lib.testing.synthetic_credits import synthetic_credits

pytestmark = pytest.mark.offline

BASE, TRACE = "qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"
SMALL = ("erqa", "treebench", "logicvista", "countbenchqa")  # 400-490 rows each


@pytest.fixture(scope="module")
def canonical(release):
    return load_canonical(release)


def _judge(release, canonical, credits, **kwargs):
    return judge_credits(credits, release, canonical=canonical, **kwargs)


def test_a_zeroed_benchmark_differs(release, canonical):
    credits = synthetic_credits(canonical, [(TRACE, "erqa")], rng=np.random.default_rng(1), means={(TRACE, "erqa"): 0})
    result = _judge(release, canonical, credits)
    by_id = result.by_id()
    assert {by_id[f"{TRACE}-seed{s}-erqa"].outcome for s in (42, 43, 44)} == {"differs"}
    mean_test = by_id[f"{TRACE}-erqa"]
    assert mean_test.outcome == "differs" and mean_test.estimate == 0.0 and mean_test.band < mean_test.canonical
    assert result.status == "differs" and mean_test.explain().endswith(": DIFFERS")


def test_a_faithful_campaign_is_reproduced_or_inconclusive_never_differs(release, canonical):
    cells = [(m, b) for m in (BASE, TRACE) for b in SMALL]
    for seed in range(3):
        result = _judge(release, canonical, synthetic_credits(canonical, cells, rng=np.random.default_rng(seed)))
        counts = result.counts()
        assert counts["differs"] == 0, [v.explain() for v in result.verdicts if v.outcome == "differs"]
        assert counts["reproduced"] + counts["inconclusive"] == len(result.verdicts) > 0


def test_a_wide_margin_turns_inconclusive_into_reproduced(release, canonical):
    credits = synthetic_credits(canonical, [(TRACE, "erqa")], rng=np.random.default_rng(4))
    tight, wide = (_judge(release, canonical, credits, margin=m).by_id()[f"{TRACE}-erqa"] for m in (0.5, 15.0))
    assert (tight.outcome, wide.outcome) == ("inconclusive", "reproduced")
    lo, hi = wide.interval
    assert -15.0 <= lo < wide.difference < hi <= 15.0 and tight.se == wide.se


def test_an_overdispersed_cell_is_flagged_seed_unstable_and_its_band_widens(release, canonical):
    cell = (TRACE, "erqa")
    probabilities = {cell: np.random.default_rng(5).beta(0.7, 1.3, 400)}
    quiet = _judge(release, canonical, synthetic_credits(canonical, [cell], rng=np.random.default_rng(6),
                                                         probabilities=probabilities))
    noisy = _judge(release, canonical, synthetic_credits(canonical, [cell], rng=np.random.default_rng(6),
                                                         probabilities=probabilities, shock={cell: 0.08}))
    assert not quiet.cells[cell].unstable and noisy.cells[cell].unstable
    verdict = noisy.by_id()[f"{TRACE}-erqa"]
    evidence = verdict.seed_unstable
    assert evidence["spread"] > 2 * evidence["expected_spread"] and evidence["p_value"] < 0.01
    assert verdict.components["seed_excess_variance"] > 0 and verdict.components["dof"] is not None
    assert verdict.se > quiet.by_id()[f"{TRACE}-erqa"].se
    assert "seed-unstable: spread" in verdict.explain()


def test_each_claim_is_judged_paired_by_row_and_seed(release, canonical):
    bench = "charxivreason"  # the paper's 3B claim: +5.77 points
    base_p = np.random.default_rng(7).beta(1.0, 1.5, 1000)
    claimed = mean(next(c for c in canonical.comparisons if c.model_id == TRACE).benchmarks[bench]) / 100
    rng = np.random.default_rng(8)
    faithful = synthetic_credits(canonical, [(BASE, bench), (TRACE, bench)], rng=rng, probabilities={
        (BASE, bench): base_p, (TRACE, bench): np.clip(base_p + claimed, 0, 1)})
    reversed_ = synthetic_credits(canonical, [(BASE, bench), (TRACE, bench)], rng=rng, probabilities={
        (BASE, bench): base_p, (TRACE, bench): np.clip(base_p - claimed, 0, 1)})
    claim_id = f"{TRACE}-vs-{BASE}-{bench}"
    good = _judge(release, canonical, faithful).by_id()[claim_id]
    bad = _judge(release, canonical, reversed_).by_id()[claim_id]
    assert good.kind == "claim" and good.canonical == pytest.approx(claimed * 100)
    assert good.sign["outcome"] == "reproduced" and good.outcome in ("reproduced", "inconclusive")
    assert good.components["variance_source"] == "paired rows over 3 reproduced seeds"
    assert bad.sign["outcome"] == "differs" and bad.outcome == "differs" and bad.estimate < 0


def test_the_family_is_the_plan_never_what_the_credits_hold(release, canonical):
    credits = synthetic_credits(canonical, [(TRACE, "erqa")], rng=np.random.default_rng(9))
    alone = _judge(release, canonical, credits)
    planned = _judge(release, canonical, credits, plan=VerdictPlan((BASE, TRACE), (42, 43, 44), ("erqa", "treebench")))
    assert alone.rule.family_size == 4  # 3 slices + 1 mean
    assert planned.rule.family_size == 2 * 3 * 2 + 2 * 2 + 2 * 2  # slices, means, claims (sign and agreement)
    assert planned.rule.per_test_alpha < alone.rule.per_test_alpha


def test_categories_and_overall_average_the_benchmark_scores(release, canonical):
    members = canonical.suite.categories["Puzzles & Logic"]
    credits = synthetic_credits(canonical, [(TRACE, b) for b in members], rng=np.random.default_rng(10))
    result = _judge(release, canonical, credits)
    by_id = result.by_id()
    category = by_id[f"{TRACE}-category[Puzzles & Logic]"]
    assert category.estimate == pytest.approx(np.mean([by_id[f"{TRACE}-{b}"].estimate for b in members]))
    assert category.canonical == pytest.approx(mean(canonical.categories[(TRACE, "Puzzles & Logic")]))
    assert category.components["row_variance"] == pytest.approx(
        sum(by_id[f"{TRACE}-{b}"].components["row_variance"] for b in members) / len(members) ** 2)


def test_one_seed_uses_the_binomial_bound_and_says_so(release, canonical):
    credits = synthetic_credits(canonical, [(TRACE, "erqa")], seeds=(42,), rng=np.random.default_rng(11))
    verdict = _judge(release, canonical, credits).by_id()[f"{TRACE}-seed42-erqa"]
    assert verdict.components["variance_source"] == "binomial bound (one reproduced seed)"
    p = verdict.estimate / 100
    assert verdict.components["row_variance"] >= 1e4 * p * (1 - p) / 400 - 1e-9


def test_the_release_cells_show_seed_excess(canonical):
    flagged = [(m, b) for m, b, e in release_seed_excess(canonical) if e.unstable]
    assert len(flagged) == 9 and flagged[:2] == [(BASE, "phyx_mini_mc"), (BASE, "cvbench_3d")]


@pytest.mark.parametrize("bad", ["x", [1], float("inf")])
def test_a_per_row_field_the_aggregate_cannot_read_is_one_line_naming_the_file(bad):
    from trace_lib.aggregation.credits import Cell
    from trace_lib.aggregation.verdict import cell_linear
    from trace_lib.benchmarks.tablevqabench import SPLITS
    from trace_lib.errors import InputError

    split = np.array([[SPLITS[i % 4]] for i in range(8)], dtype=object)
    exact = np.array([[0.0]] * 8, dtype=object)
    exact[3, 0] = bad  # "x" was a ValueError traceback, [1] a TypeError one, inf a silent "differs"
    cell = Cell("m", "tablevqabench", (42,), tuple(str(i) for i in range(8)), np.ones((8, 1)),
                {"split": split, "exact_score": exact})
    with pytest.raises(InputError) as refused:
        cell_linear(cell, source="credits.parquet")
    assert refused.value.file == "credits.parquet" and "do not aggregate" in str(refused.value)


# -- the linearised aggregates equal the protocols' own numbers ---------------------------------------------------

def test_tablevqabench_linearisation_is_its_five_value_macro_mean():
    from trace_lib.benchmarks.tablevqabench import PROTOCOL, SPLITS, aggregate, split_accuracy

    rng = np.random.default_rng(12)
    split = np.array([SPLITS[i % 4] for i in range(40)], dtype=object)
    credit = (rng.random(40) < 0.5).astype(float)
    exact = np.where(split == "fintabnetqa", credit * (rng.random(40) < 0.7), 0.0)
    linear = PROTOCOL.row_aggregate.linearize(credit[:, None], {"split": split[:, None], "exact_score": exact[:, None]})
    counts = {s: (int(credit[split == s].sum()), int((split == s).sum())) for s in SPLITS[1:]}
    counts["fintabnetqa_relieved"] = (int(credit[split == "fintabnetqa"].sum()), 10)
    counts["fintabnetqa_exact"] = (int(exact.sum()), 10)
    order = ("fintabnetqa_relieved", "fintabnetqa_exact", "vtabfact", "vwtq", "vwtq_syn")  # upstream's five values
    reported = aggregate([split_accuracy(*counts[name]) for name in order])
    assert linear.scores()[0] == pytest.approx(reported, abs=1e-5)


def test_wemath_linearisation_is_its_strict_score():
    from trace_lib.benchmarks.wemath import PROBLEMS, Dimensions, PROTOCOL, dimensions

    rng = np.random.default_rng(13)
    keys, ids = [], []
    for problem in range(PROBLEMS):
        steps = 2 if problem % 3 else 3
        for label in [*map(str, range(1, steps + 1)), "multi"]:
            keys.append(f"{steps}steps_{label}")
            ids.append(str(problem))
    hits = (rng.random(len(keys)) < 0.6).astype(float)
    linear = PROTOCOL.row_aggregate.linearize(hits[:, None], {"key": np.array(keys, dtype=object)[:, None],
                                                              "problem_id": np.array(ids, dtype=object)[:, None]})
    dims = dimensions([{"key": k, "ID": i, "joker": bool(h)} for k, i, h in zip(keys, ids, hits)])
    exact = (PROBLEMS - 0.5 * dims.inadequate_generalization - dims.rote_memorization_strict
             - dims.insufficient_knowledge) / PROBLEMS * 100
    assert isinstance(dims, Dimensions) and linear.scores()[0] == pytest.approx(exact, abs=1e-9)


# -- trace-repro verdict --credits ----------------------------------------------------------------------------------

def _verdict_cli(capsys, release, path, *extra):
    code = main(["verdict", "--trace-root", str(release.path), "--credits", str(path), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_verdict_credits_reads_jsonl_and_parquet_alike(capsys, release, canonical, tmp_path, fmt):
    credits = synthetic_credits(canonical, [(TRACE, "erqa")], rng=np.random.default_rng(14),
                                means={(TRACE, "erqa"): 0})
    path = getattr(credits, f"to_{fmt}")(tmp_path / f"credits.{fmt}")
    code, out, err = _verdict_cli(capsys, release, path, "--json")
    document = json.loads(out)
    assert (code, err) == (1, "") and document["status"] == "differs" and document["family_size"] == 4
    tests = {t["test_id"]: t for t in document["tests"]}
    assert set(tests) == {f"{TRACE}-seed{s}-erqa" for s in (42, 43, 44)} | {f"{TRACE}-erqa"}
    first = tests[f"{TRACE}-erqa"]
    assert {"outcome", "estimate", "interval", "band", "se", "mds", "components"} <= set(first)
    assert {"row_variance", "canonical_row_variance", "seed_excess_variance"} <= set(first["components"])
    # the same verdicts the library gives
    assert first["outcome"] == _judge(release, canonical, credits).by_id()[f"{TRACE}-erqa"].outcome


def _rows(n=400, **change):
    rows = [{"model_id": TRACE, "seed": 42, "benchmark_id": "erqa", "index": str(i), "credit": 1.0} for i in range(n)]
    rows[3].update(change)
    return rows


@pytest.mark.parametrize(("rows", "message"), [
    ([{k: v for k, v in r.items() if k != "credit"} for r in _rows()], "row 1.credit: required field is missing"),
    (_rows(credit=1.5), "row 4 (trace-qwen2.5-vl-3b, seed 42, erqa, index 3).credit: credit outside [0, 1] "
                        "(found 1.5)"),
    (_rows(index="2"), "duplicate row (model_id, seed, benchmark_id, index)"),
    ([dict(r, benchmark_id="nope") for r in _rows()], "benchmark_id: unknown benchmark 'nope'"),
    (_rows(399), "index: trace-qwen2.5-vl-3b/erqa has 399 rows per seed, the suite has 400"),
    (_rows(seed="x"), "row 4.seed: seed is not an integer in 0..9223372036854775807 (found 'x')"),
    (_rows(seed=10 ** 30), "row 4.seed: seed is not an integer in 0..9223372036854775807"),  # not an overflow
    (_rows(seed=-1), "row 4.seed: seed is not an integer in 0..9223372036854775807 (found -1)"),
    (_rows(index={}), "row 4.index: index is not a string or an integer (found {})"),
    (_rows(model_id=5), "row 4.model_id: model_id is not a string (found 5)"),
])
def test_bad_credits_files_are_one_line_errors(capsys, release, tmp_path, rows, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = _verdict_cli(capsys, release, path)
    assert (code, out) == (2, "")
    assert err.splitlines()[0].startswith(f"error: {path}: ") and message in err.splitlines()[0]


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty file: no credit rows"),
    ("[" * 100_000 + "]" * 100_000 + "\n", "line 1: not strict JSON (arrays or objects nested too deeply)"),
    ('{"model_id": "m", "seed": 42, "seed": 43}\n', "line 1: duplicate key 'seed'"),
])
def test_an_empty_deep_or_ambiguous_credits_file_is_one_line(capsys, release, tmp_path, text, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    code, out, err = _verdict_cli(capsys, release, path)
    assert (code, out) == (2, "") and err.splitlines()[0] == f"error: {path}: {message}"


@pytest.mark.timeout(30)
def test_a_fifo_for_credits_is_refused_without_opening_it(capsys, release, tmp_path):
    import os

    path = tmp_path / "credits.jsonl"
    os.mkfifo(path)  # opening it to read would block for ever
    code, _, err = _verdict_cli(capsys, release, path)
    assert code == 2 and err.splitlines()[0].startswith(f"error: {path}: is a FIFO")


def test_a_nan_credit_is_named_as_nan_not_as_missing(capsys, release, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"model_id": [TRACE], "seed": [42], "benchmark_id": ["erqa"], "index": ["0"],
                             "credit": [float("nan")]}), path)
    code, _, err = _verdict_cli(capsys, release, path)
    assert code == 2 and err.splitlines()[0] == f"error: {path}: row 1.credit: required field is NaN"


def test_a_parquet_file_without_the_credit_column_names_it(capsys, release, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"model_id": [TRACE], "seed": [42], "benchmark_id": ["erqa"], "index": ["0"]}), path)
    code, _, err = _verdict_cli(capsys, release, path)
    assert code == 2 and err.splitlines()[0].startswith(f"error: {path}: credit: required column is missing")


def test_a_structured_aggregate_needs_its_fields(release, canonical):
    rows = [{"model_id": TRACE, "seed": s, "benchmark_id": "wemath", "index": str(i), "credit": 1.0}
            for s in (42, 43) for i in range(canonical.rows("wemath"))]
    with pytest.raises(InputError, match="wemath's aggregate needs the per-row field 'key'"):
        _judge(release, canonical, CreditTable.from_records(rows))


def test_benchmarks_json_lists_each_aggregate_and_its_fields(capsys, release):
    code = main(["benchmarks", "--trace-root", str(release.path), "--json"])
    rows = {r["key"]: r["aggregate"] for r in json.loads(capsys.readouterr().out)}
    assert code == 0 and len(rows) == 24
    assert rows["tablevqabench"] == {"kind": "split-macro-mean", "fields": ["credit", "split", "exact_score"],
                                     "description": rows["tablevqabench"]["description"]}
    assert rows["wemath"]["fields"] == ["credit", "key", "problem_id"]
    assert {r["kind"] for k, r in rows.items() if k not in ("tablevqabench", "wemath")} == {"mean"}


# -- the moderated seed excess: which cells keep their own variance ---------------------------------------------------

def _moderated(reproduced, canonical, row_variance, prior_q):
    """One cell's moderated excess under a hand-made prior (benchmark "b": scale ``prior_q``, d0 = 4 from 8 cells)."""
    from trace_lib.aggregation.moderation import VariancePrior, trigamma
    from trace_lib.aggregation.verdict import moderated_excess

    prior = VariancePrior(4.0, {"b": prior_q}, 192, 168, {"b": 8}, trigamma(1.0))
    return moderated_excess(np.array(reproduced), np.array(canonical), row_variance, row_variance, 1.0, 1.0, prior,
                            "b")


def test_a_cell_whose_seeds_exceed_its_rows_keeps_its_own_variance_on_a_noisy_benchmark():
    """Seed variance S^2 = 2.25 on a benchmark whose prior scale is 3: ordinary under the prior predictive, but 9x
    what the cell's own rows allow (V = 0.25, chi-square p ~ 1e-6): not shrunk, its own variance on f = 4 dof. The
    same seeds on rows that nearly explain them (V = 2) are shrunk toward the prior."""
    from trace_lib.aggregation.verdict import ROWS_OUTLIER_LEVEL

    seeds_r, seeds_c = [50.0, 51.5, 48.5], [48.5, 50.0, 51.5]  # S^2 = (4.5 + 4.5) / 4 = 2.25
    excess, dof, evidence = _moderated(seeds_r, seeds_c, 0.25, 3.0)
    assert evidence["prior_outlier_p"] > 0.5 and evidence["rows_excess_p"] < ROWS_OUTLIER_LEVEL
    assert dof == 4 and evidence["q_moderated"] == evidence["q_hat"] == pytest.approx(2.25)
    assert excess == pytest.approx(2.25 - 0.25)
    quiet, quiet_dof, quiet_evidence = _moderated(seeds_r, seeds_c, 2.0, 3.0)
    assert quiet_evidence["rows_excess_p"] > 0.3 and quiet_dof > 4
    assert 2.25 < quiet_evidence["q_moderated"] < 3.0 and quiet == pytest.approx(quiet_evidence["q_moderated"] - 2.0)


# -- claims pair the two models' rows one by one ---------------------------------------------------------------------

SPLITS = ("fintabnetqa", "vtabfact", "vwtq", "vwtq_syn")


def _structured_rows(bench, model, n, *, shift=0):
    """A whole TableVQA-Bench or WeMath cell of ``model`` as its scorer writes it (``shift`` moves its credits)."""
    out = []
    for seed in (42, 43, 44):
        for i in range(n):
            credit = float((i + seed + shift) % 3 != 0)
            row = {"model_id": model, "seed": seed, "benchmark_id": bench, "index": str(i), "credit": credit}
            if bench == "tablevqabench":
                row["split"] = SPLITS[i % 4]
                if row["split"] == "fintabnetqa":
                    row["exact_score"] = int(credit and i % 5 != 0)
            else:
                row.update(key=("2steps_1", "2steps_2", "2steps_multi")[i % 3], problem_id=i // 3)
            out.append(row)
    return out


@pytest.mark.parametrize("bench", ["tablevqabench", "wemath"])
def test_a_structured_claim_is_the_difference_of_the_two_scores(release, canonical, bench):
    n = canonical.rows(bench)
    rows = _structured_rows(bench, TRACE, n) + _structured_rows(bench, BASE, n, shift=1)
    by_id = _judge(release, canonical, CreditTable.from_records(rows)).by_id()
    claim = by_id[f"{TRACE}-vs-{BASE}-{bench}"]
    assert claim.estimate == pytest.approx(by_id[f"{TRACE}-{bench}"].estimate - by_id[f"{BASE}-{bench}"].estimate)


@pytest.mark.parametrize(("bench", "change", "field", "detail"), [
    ("tablevqabench", {"split": "vtabfact"}, "index 3.split", "(expected 'vwtq_syn', found 'vtabfact')"),
    ("wemath", {"problem_id": 7}, "index 3.problem_id", "(expected 1, found 7)"),
])
def test_a_claim_whose_models_hold_other_dataset_rows_is_one_line(capsys, release, canonical, tmp_path, bench, change,
                                                                 field, detail):
    """The base model's copy of a dataset-row field (a split, a problem id) differs from the model's: a claim pairs
    their rows one by one, so that is bad input naming the row, never a traceback (``paired linearisations need
    the same units``) nor a delta over rows that are not the same."""
    n = canonical.rows(bench)
    base = _structured_rows(bench, BASE, n, shift=1)
    for seed in range(3):
        base[seed * n + 3].update(change)  # index 3 at every seed: the field stays one value per dataset row
    path = tmp_path / "credits.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _structured_rows(bench, TRACE, n) + base))
    code, out, err = _verdict_cli(capsys, release, path)
    assert (code, out) == (2, "")
    assert err == (f"error: {path}: {BASE}/{bench} {field}: a field of the dataset row differs between {TRACE} and "
                   f"{BASE} (a claim pairs the two models' rows one by one) {detail}\n")


def test_a_claim_whose_models_score_other_rows_is_one_line(capsys, release, canonical, tmp_path):
    n = canonical.rows("erqa")
    rows = [{"model_id": m, "seed": s, "benchmark_id": "erqa", "index": str(i if m == TRACE or i else n),
             "credit": float(i % 2)} for m in (TRACE, BASE) for s in (42, 43) for i in range(n)]
    path = tmp_path / "credits.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = _verdict_cli(capsys, release, path)
    assert (code, out) == (2, "")
    assert err == (f"error: {path}: {BASE}/erqa.index: {BASE} scores other rows than {TRACE} (a claim pairs the two "
                   f"models' rows one by one) (expected '0', found '1')\n")
