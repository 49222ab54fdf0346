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
from trace_lib.errors import InputError, UsageError
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
    from scipy.stats import norm

    assert (hi - lo) / 2 == pytest.approx(norm.isf(0.05) * wide.se)  # the 90% interval: 5% on either side
    with pytest.raises(UsageError, match="--margin: margin must be a positive number"):
        _judge(release, canonical, credits, margin=0)


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
    # (V + tau^2)(1/k + 1/3), each side with its own row-level variance; critical values Student t on the dof
    c, tau2 = verdict.components, verdict.components["seed_excess_variance"]
    assert verdict.se ** 2 == pytest.approx((c["row_variance"] + tau2) / 3 + (c["canonical_row_variance"] + tau2) / 3)
    from scipy.stats import t

    assert c["crit"] == pytest.approx(t.isf(verdict.per_test_alpha / 2, c["dof"]))


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
    assert f"{TRACE}-erqa" not in _judge(release, canonical, credits).by_id()  # one seed: no mean test


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
    (_rows(index=True), "row 4.index: index is not a string or an integer (found True)"),
    (_rows(seed=True), "row 4.seed: seed is not an integer in 0..9223372036854775807 (found True)"),
    (_rows(seed=42.5), "row 4.seed: seed is not an integer in 0..9223372036854775807 (found 42.5)"),
    (_rows(seed="4_2"), "row 4.seed: seed is not an integer in 0..9223372036854775807 (found '4_2')"),  # int() reads it
    (_rows(credit=True), "row 4.credit: credit is not a number (found True)"),
    (_rows(credit="1"), "row 4.credit: credit is not a number (found '1')"),
    (_rows() + [dict(r, seed=43) for r in _rows(index="400")],
     "erqa.index: seed 43 holds 400 rows, seed 42 holds 400, or their indices differ"),  # as many rows, others
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
    ("\n[1, 2]\n", "row 1: a row is not an object"),
], ids=["empty", "nested-100000-deep", "duplicate-key", "not-an-object"])  # the deep one's own id was 200 kB long
def test_an_empty_deep_or_ambiguous_credits_file_is_one_line(capsys, release, tmp_path, text, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    code, out, err = _verdict_cli(capsys, release, path)
    assert (code, out) == (2, "") and err.splitlines()[0] == f"error: {path}: {message}"


def test_blank_lines_and_seed_zero_are_read_as_any_other(capsys, release, tmp_path):
    path = tmp_path / "credits.jsonl"
    path.write_text("\n" + "".join(json.dumps(r) + "\n\n" for r in _rows()) + "  \n")
    table = CreditTable.read(path)
    assert len(table) == 400 and _verdict_cli(capsys, release, path)[0] in (0, 1)
    assert CreditTable.from_records([dict(r, seed=0) for r in _rows()]).seed.tolist() == [0] * 400


def test_a_table_built_from_columns_is_held_to_the_same_checks():
    """The library's own constructor (a campaign's records, synthetic credits) validates as a file does."""
    columns = [np.array(["m", "m"], dtype=object), np.array([42, 42]), np.array(["erqa", "erqa"], dtype=object),
               np.array(["0", "1"], dtype=object)]
    with pytest.raises(InputError, match=r"credit: credit outside \[0, 1\] \(found nan\)"):
        CreditTable(*columns, np.array([1.0, float("nan")]))
    with pytest.raises(InputError, match="seed: column has 1 values, credit has 2"):
        CreditTable(columns[0], columns[1][:1], *columns[2:], np.array([1.0, 0.0]))


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


# -- the row-level variance and the seed-level excess -----------------------------------------------------------

def test_the_row_variance_is_the_unbiased_per_row_variance_over_seeds_carried_to_the_canonical_mean(release,
                                                                                                    canonical):
    """V_R = sum_u w_u^2 s_u^2 with each row's sample variance over the seeds (ddof 1: unbiased); without the
    archive, V_C is V_R scaled by the one-seed bounds at the two means (the reproduction 10 points below)."""
    cell = (TRACE, "erqa")
    mu = mean(canonical.benchmarks[cell])
    credits = synthetic_credits(canonical, [cell], rng=np.random.default_rng(21), means={cell: mu - 10})
    verdict = _judge(release, canonical, credits).by_id()[f"{TRACE}-erqa"]
    rows = credits.cells()[cell].credits
    n = rows.shape[0]
    assert verdict.components["row_variance"] == pytest.approx((100 / n) ** 2 * rows.var(axis=1, ddof=1).sum())
    p_r, p_c = rows.mean(), mu / 100
    assert verdict.components["canonical_row_variance"] == pytest.approx(
        verdict.components["row_variance"] * p_c * (1 - p_c) / (p_r * (1 - p_r)))


def test_seeds_that_vary_where_rows_allow_none_are_seed_unstable():
    """Rows that never change between seeds explain no seed spread: a canonical side whose seeds differ anyway has
    infinite excess (p = 0), however small its spread."""
    from trace_lib.aggregation.verdict import seed_excess

    excess = seed_excess(np.array([50.0, 50.0, 50.0]), np.array([49.9, 50.0, 50.1]), 0.0)
    assert (excess.p_value, excess.unstable, excess.dof) == (0.0, True, 4)


def test_the_release_cells_are_tested_on_their_own_three_seeds(canonical):
    from scipy.stats import chi2

    model, bench, excess = next(e for e in release_seed_excess(canonical) if e[1] == "erqa")
    seeds = np.array(list(canonical.benchmarks[(model, bench)].values()))
    p = seeds.mean() / 100
    bound = 1e4 * p * (1 - p) / canonical.rows(bench)
    assert excess.dof == 2 and excess.spread == pytest.approx(seeds.std(ddof=1))
    assert excess.p_value == pytest.approx(chi2.sf(2 * seeds.var(ddof=1) / bound, 2))


def test_the_one_seed_bound_holds_each_unit_inside_its_range():
    """Shifted to a higher canonical score, a group already at its upper bound stays there (no variance), never
    past it (which would subtract variance)."""
    from trace_lib.aggregation.verdict import one_seed_bound
    from trace_lib.linear_aggregate import Linear

    linear = Linear(0.0, np.array([50.0, 50.0]), np.array([[1.0], [0.0]]), np.ones(2), np.array([0, 1]))
    assert linear.scores()[0] == 50.0
    assert one_seed_bound(linear, shift_to=75.0, only_shifted=True) == pytest.approx(50.0 ** 2 * 0.25 * 0.75)


# -- what is judged: the plan's seeds, composites over the same seeds, claims over paired seeds --------------------

def test_seeds_outside_the_plan_are_not_judged(release, canonical):
    credits = synthetic_credits(canonical, [(TRACE, "erqa")], seeds=(42, 43, 44, 45), rng=np.random.default_rng(22))
    result = _judge(release, canonical, credits, plan=VerdictPlan((TRACE,), (42, 43, 44), ("erqa",)))
    by_id = result.by_id()
    assert f"{TRACE}-seed45-erqa" not in by_id and by_id[f"{TRACE}-erqa"].reproduced_seeds == 3


def test_a_composite_or_claim_over_cells_of_other_seeds_is_not_judged(release, canonical):
    """A category whose benchmarks were scored on other seeds, and a claim whose two models were, have no seed-paired
    score: they are left out, and every cell is still judged on its own."""
    members = canonical.suite.categories["Puzzles & Logic"]
    full = synthetic_credits(canonical, [(TRACE, b) for b in members[1:]] + [(BASE, "erqa")],
                             rng=np.random.default_rng(23))
    short = synthetic_credits(canonical, [(TRACE, members[0]), (TRACE, "erqa")], seeds=(42, 43),
                              rng=np.random.default_rng(24))
    by_id = _judge(release, canonical, CreditTable.concat([full, short])).by_id()
    assert f"{TRACE}-category[Puzzles & Logic]" not in by_id and f"{TRACE}-vs-{BASE}-erqa" not in by_id
    assert {f"{TRACE}-{b}" for b in members} | {f"{TRACE}-erqa", f"{BASE}-erqa"} <= set(by_id)


def test_a_seed_moving_every_benchmark_of_a_category_widens_the_category(release, canonical):
    """Each benchmark's seeds vary as their rows allow, but one seed lifts all four together: the category's own
    seed spread exceeds the sum of theirs, and that excess enters its variance (on its own dof)."""
    members = canonical.suite.categories["Puzzles & Logic"]
    rng = np.random.default_rng(25)
    base_p = {(TRACE, b): np.full(canonical.rows(b), mean(canonical.benchmarks[(TRACE, b)]) / 100) for b in members}
    tables = [synthetic_credits(canonical, list(base_p), seeds=(seed,), rng=rng,
                                probabilities={k: np.clip(p + lift, 0, 1) for k, p in base_p.items()})
              for seed, lift in ((42, 0.06), (43, -0.06), (44, 0.0))]
    category = _judge(release, canonical, CreditTable.concat(tables)).by_id()[f"{TRACE}-category[Puzzles & Logic]"]
    assert category.seed_unstable is not None and category.components["moderation_own_tau2"] > 0
    assert category.components["seed_excess_variance"] > category.components["moderation_component_tau2"]


def test_a_claim_with_the_paper_s_own_rows_takes_their_paired_variance(release, canonical):
    bench = "erqa"
    cells = [(BASE, bench), (TRACE, bench)]
    credits = synthetic_credits(canonical, cells, rng=np.random.default_rng(26))
    archive = synthetic_credits(canonical, cells, rng=np.random.default_rng(27))
    claim = _judge(release, canonical, credits, archive_credits=archive).by_id()[f"{TRACE}-vs-{BASE}-{bench}"]
    assert claim.components["variance_source"] == ("paired rows over 3 reproduced seeds + the archive's canonical "
                                                   "rows")
    arch = archive.cells()
    paired = arch[(TRACE, bench)].credits - arch[(BASE, bench)].credits
    expected = (100 / paired.shape[0]) ** 2 * paired.var(axis=1, ddof=1).sum()
    assert claim.components["canonical_row_variance"] == pytest.approx(expected)


def test_an_archive_whose_two_models_hold_other_rows_is_not_paired(release, canonical):
    """The archive leaves out a slice's excluded rows: where the model and its base lost different ones, their
    rows do not pair, so the claim's canonical side is carried as without an archive (it was a ValueError)."""
    bench = "erqa"
    cells = [(BASE, bench), (TRACE, bench)]
    credits = synthetic_credits(canonical, cells, rng=np.random.default_rng(26))
    archive = synthetic_credits(canonical, cells, rng=np.random.default_rng(27)).to_records()
    archive = CreditTable.from_records(r for r in archive if (r["model_id"], r["index"]) != (BASE, "7"))
    claim = _judge(release, canonical, credits, archive_credits=archive).by_id()[f"{TRACE}-vs-{BASE}-{bench}"]
    assert claim.components["variance_source"] == "paired rows over 3 reproduced seeds"


# -- a claim's sign -------------------------------------------------------------------------------------------------

def _claim_of(release, canonical, reproduced, canonical_delta, variance=4.0):
    """A claim test on an exact score: ``reproduced`` per-seed deltas against ``canonical_delta`` at every
    canonical seed, row-level variance ``variance`` on both sides (normal critical values: no seed excess)."""
    from trace_lib.aggregation.verdict import Rule, Scored

    rule = Rule.for_plan(canonical, VerdictPlan((BASE, TRACE), (42, 43, 44), ("erqa",)))
    scored = Scored(np.array(reproduced), np.full(3, canonical_delta), variance, variance, "paired rows",
                    seeds=(42, 43, 44))
    agreement = rule.judge("claim", "claim", scored, estimate=float(np.mean(reproduced)), canonical=canonical_delta,
                           reproduced_weight=1 / 3, model_id=TRACE, benchmark_id="erqa")
    return agreement, rule.judge_sign(agreement, scored)


def test_a_claim_s_sign_is_reproduced_only_beyond_its_one_sided_bound(release, canonical):
    _, claim = _claim_of(release, canonical, [0.5, 0.5, 0.5], 3.0)  # the right sign, well inside the noise
    assert claim.sign["outcome"] == "inconclusive" and claim.sign["lower_bound_toward_canonical"] < 0 < claim.estimate


def test_a_significantly_opposite_sign_makes_the_claim_differ(release, canonical):
    agreement, claim = _claim_of(release, canonical, [-3.4, -3.4, -3.4], 0.5)
    assert agreement.outcome != "differs" and claim.sign["outcome"] == "differs" and claim.outcome == "differs"


def test_planned_power_of_a_mean_counts_both_sides(release, canonical):
    """A k-seed mean's predicted variance is one seed's times (1/k + 1/n): the canonical mean's n seeds count too."""
    from trace_lib.aggregation.verdict import planned_power, predicted_seed_variance

    tests = {t.test_id: t for t in planned_power(canonical, VerdictPlan((TRACE,), (42, 43), ("erqa",)))}
    v = predicted_seed_variance(canonical, TRACE, "erqa")
    assert tests[f"{TRACE}-erqa"].se == pytest.approx(np.sqrt(v * (1 / 2 + 1 / 3)))
    assert tests[f"{TRACE}-seed42-erqa"].se == pytest.approx(np.sqrt(v * (1 + 1 / 3)))


def test_a_full_suite_is_judged_overall_as_the_mean_of_its_benchmarks(release, canonical):
    plain = [b for b in canonical.suite.keys if b not in ("tablevqabench", "wemath")]
    rows = _structured_rows("tablevqabench", TRACE, canonical.rows("tablevqabench"))
    rows += _structured_rows("wemath", TRACE, canonical.rows("wemath"))
    credits = CreditTable.concat([CreditTable.from_records(rows),
                                  synthetic_credits(canonical, [(TRACE, b) for b in plain],
                                                    rng=np.random.default_rng(28))])
    by_id = _judge(release, canonical, credits).by_id()
    overall = by_id[f"{TRACE}-overall"]
    assert overall.kind == "overall" and overall.canonical == pytest.approx(mean(canonical.overall[TRACE]))
    assert overall.estimate == pytest.approx(np.mean([by_id[f"{TRACE}-{b}"].estimate for b in canonical.suite.keys]))
