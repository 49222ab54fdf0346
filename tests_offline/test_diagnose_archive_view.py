"""``trace-repro diagnose`` between any two runs: two archives (official route, aggregate-only benchmark), one
root holding both runs, the reference/candidate spellings, every row's stage in ``diagnose.json``, stages that
cannot be compared reported per slice, and the band's factor and sign."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from test_diagnose_campaign_view import KEY, MODEL, ROWS, _row, _score, write_slice

from trace_lib.archive import hashes
from trace_lib.cli.main import main
from trace_lib.diagnose.attribution import diagnose_slice
from trace_lib.diagnose.views import RowView, SliceKey, SliceView
from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run

AGG = SliceKey(MODEL, 42, "wemath")  # official route; scored here in aggregate only (no row credits)


def _samples(n: int = ROWS) -> list[SampleSpec]:
    return [SampleSpec(str(i), i, hashes.text_sha256(f"row{i}"), f"Question {i}?", f"The answer is {'ABCD'[i % 4]}.",
                       (hashes.text_sha256(f"img{i}"),), extraction_value=f"The answer is {'ABCD'[i % 4]}.",
                       score=float(i % 2)) for i in range(n)]


def _slices(samples: list[SampleSpec], *, agg_score: float = 40.0) -> list[SliceSpec]:
    return [SliceSpec(MODEL, 42, "mmstar", tuple(samples), 50.0),
            SliceSpec(MODEL, 42, "wemath", tuple(samples), agg_score, aggregate_only=True)]


def _edit_extractions(samples: list[SampleSpec], rows: dict[int, str]) -> list[SampleSpec]:
    out = list(samples)
    for i, value in rows.items():
        out[i] = replace(out[i], extraction_value=value)
    return out


def _diagnose(release, *argv: str) -> tuple[int, dict]:  # noqa: ANN001
    code = main(["diagnose", "--trace-root", str(release.path), "--no-plot", *argv])
    out = Path(argv[argv.index("--out") + 1])
    doc = json.loads((out / "diagnose.json").read_text()) if (out / "diagnose.json").is_file() else {}
    return code, {s["slice"]: s for s in doc.get("slices", [])}


def test_two_archives_compare_extractions_on_the_official_route_and_aggregate_only(tmp_path, release, capsys):
    base = _samples()
    edited = _edit_extractions(base, {3: "C", 8: "(A)"})
    write_archive_run(tmp_path / "a" / "runs" / "paper", "paper", _slices(base))
    write_archive_run(tmp_path / "b" / "runs" / "heldout-x", "heldout-x", _slices(edited, agg_score=45.0))
    code, slices = _diagnose(release, "--reference", str(tmp_path / "a"), "--candidate", str(tmp_path / "b"),
                             "--out", str(tmp_path / "o"))
    printed = capsys.readouterr().out
    assert code in (0, 1), printed
    official, aggregate = slices[KEY.id], slices[AGG.id]
    for entry in (official, aggregate):
        assert entry["counts"] == {"extraction": 2} and entry["first_stage"] == "extraction", entry
        assert "extraction" not in entry["not_comparable"]
        stages = {r["index"]: r["stage"] for r in entry["rows"]}
        assert len(stages) == ROWS and stages["3"] == stages["8"] == "extraction"
        assert {s for i, s in stages.items() if i not in ("3", "8")} == {"none"}
    assert "score" in aggregate["not_comparable"]  # aggregate only: no row credits on either side
    assert official["right"].startswith("archive run paper") and official["left"].startswith("archive run heldout-x")
    assert any("this archive run (heldout-x) is not the release's source artifact" in n for n in official["notes"])


def test_one_root_holding_both_runs_needs_a_run_id_per_side(tmp_path, release, capsys):
    base = _samples()
    write_archive_run(tmp_path / "r" / "runs" / "paper", "paper", _slices(base))
    write_archive_run(tmp_path / "r" / "runs" / "heldout-x", "heldout-x", _slices(_edit_extractions(base, {5: "Z"})))
    root = str(tmp_path / "r")
    code = main(["diagnose", "--trace-root", str(release.path), "--reference", root, "--candidate", root,
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "held by 2 runs" in err.splitlines()[0] and "--run-id" in err and "Traceback" not in err
    code, slices = _diagnose(release, "--reference", root, "--reference-run-id", "paper", "--candidate", root,
                             "--candidate-run-id", "heldout-x", "--out", str(tmp_path / "o2"))
    assert slices[KEY.id]["counts"] == {"extraction": 1}


def test_a_judge_stage_needs_a_recorded_call_not_the_used_judge_flag(tmp_path, release):
    base = _samples()
    edited = list(base)
    # row 2: upstream marks used_judge with an empty call list ("[]"): an extraction, not a judge, divergence
    base[2] = replace(base[2], judge_output="[]")
    edited[2] = replace(base[2], extraction_value="D")
    base[4] = replace(base[4], judge_output='["B"]')
    edited[4] = replace(base[4], extraction_value="D")
    write_archive_run(tmp_path / "a", "paper", _slices(base)[:1])
    write_archive_run(tmp_path / "b", "other", _slices(edited)[:1])
    _, slices = _diagnose(release, "--reference", str(tmp_path / "a"), "--candidate", str(tmp_path / "b"),
                          "--out", str(tmp_path / "o"))
    stages = {r["index"]: r["stage"] for r in slices[KEY.id]["rows"]}
    assert (stages["2"], stages["4"]) == ("extraction", "judge")


@pytest.mark.parametrize("short", ["candidate", "reference"])
def test_a_row_missing_from_one_side_is_charged_to_rows_never_identical(tmp_path, release, short):
    base = _samples()
    write_archive_run(tmp_path / "a", "paper", _slices(base[:-1] if short == "reference" else base)[:1])
    write_archive_run(tmp_path / "b", "other", _slices(base[:-1] if short == "candidate" else base)[:1])
    _, slices = _diagnose(release, "--reference", str(tmp_path / "a"), "--candidate", str(tmp_path / "b"),
                          "--out", str(tmp_path / "o"))
    entry = slices[KEY.id]
    assert entry["counts"] == {"rows": 1} and entry["identical_rows"] == ROWS - 1
    side = "right" if short == "candidate" else "left"  # the candidate is the left run
    assert [r for r in entry["rows"] if r["index"] == str(ROWS - 1)] == [
        {"index": str(ROWS - 1), "stage": "rows", "reason": f"only in the {side} run"}]


def test_campaign_against_an_official_route_archive_says_extraction_is_not_comparable(tmp_path, release):
    rows = [_row(i) for i in range(ROWS)]
    write_slice(tmp_path / "c", KEY, rows, score=_score(rows))
    write_archive_run(tmp_path / "a", "paper", _slices([replace(s, prompt_text=r["prompt"], response_text=r["response"])
                                                        for s, r in zip(_samples(), rows)])[:1])
    _, slices = _diagnose(release, "--archive-root", str(tmp_path / "a"), "--campaign-root", str(tmp_path / "c"),
                          "--out", str(tmp_path / "o"))
    why = slices[KEY.id]["not_comparable"]["extraction"]
    assert "official_vlmevalkit route" in why and "extracted answer" in why


@pytest.mark.parametrize("flags, expected", [
    (["--archive-root", "A", "--archive-root", "B"], "2 reference runs given: --archive-root A, --archive-root B"),
    (["--reference", "A", "--against", "B"], "2 reference runs given: --reference A, --against B"),
    (["--reference", "A", "--candidate", "C", "--campaign-root", "D"],
     "2 candidate runs given: --candidate C, --campaign-root D"),
])
def test_two_values_for_one_side_are_a_one_line_error(tmp_path, release, capsys, monkeypatch, flags, expected):
    monkeypatch.chdir(tmp_path)
    code = main(["diagnose", "--trace-root", str(release.path), *flags])
    err = capsys.readouterr().err
    assert code == 2 and expected in err.splitlines()[0] and "Traceback" not in err


def test_a_directory_of_neither_kind_and_an_archive_candidate_without_out_are_one_line_errors(tmp_path, release,
                                                                                            capsys):
    (tmp_path / "empty").mkdir()
    write_archive_run(tmp_path / "a", "paper", _slices(_samples())[:1])
    code = main(["diagnose", "--trace-root", str(release.path), "--reference", str(tmp_path / "a"),
                 "--candidate", str(tmp_path / "empty")])
    err = capsys.readouterr().err
    assert code == 2 and "neither a trace-repro campaign" in err.splitlines()[0] and "Traceback" not in err
    code = main(["diagnose", "--trace-root", str(release.path), "--reference", str(tmp_path / "a"),
                 "--candidate", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert code == 2 and "--out is required" in err and not (tmp_path / "a" / "diagnose").exists()


def _view(score: float) -> SliceView:
    return SliceView(KEY, "x", {"0": RowView("0", response="r")}, score=score)


def test_within_band_is_symmetric_in_the_sign_of_the_delta():
    assert diagnose_slice(_view(10.0), _view(30.0), band=5.0).within_band is False  # delta -20
    assert diagnose_slice(_view(30.0), _view(10.0), band=5.0).within_band is False
    assert diagnose_slice(_view(12.0), _view(10.0), band=5.0).within_band is True
    assert diagnose_slice(_view(8.0), _view(10.0), band=5.0).within_band is True


def test_the_sampling_band_is_sqrt2_times_the_one_run_band(release):
    """Two single-seed runs: the difference of two independent draws, sqrt(2) times one run's spread (the binomial
    bound at the canonical mean plus the release prior's seed-level excess), at the rule's per-test level."""
    from trace_lib.aggregation.canonical import load_canonical
    from trace_lib.aggregation.verdict import Rule, binomial_scale
    from trace_lib.campaign.verdicts import verdict_plan
    from trace_lib.diagnose.band import sampling_band

    canonical = load_canonical(release)
    rule = Rule.for_plan(canonical, verdict_plan(release))
    seeds = canonical.benchmarks[(KEY.model, KEY.benchmark)]
    scale = binomial_scale(sum(seeds.values()) / len(seeds), canonical.rows(KEY.benchmark))
    prior = canonical.seed_prior
    tau2 = max(0.0, prior.prior_var[KEY.benchmark] * scale - scale)
    crit, _ = rule.quantiles(prior.effective_prior_dof(KEY.benchmark) if tau2 > 0 else None)
    one_run = crit * math.sqrt(scale + tau2)
    band = sampling_band((canonical, rule), KEY)
    assert one_run > 0 and band == pytest.approx(math.sqrt(2.0) * one_run, rel=1e-12)
    assert sampling_band((canonical, rule), SliceKey("no-such-model", 42, "mmstar")) is None


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("side, out", [
    ("reference", "a/runs/paper/diagnose"),  # inside the reference archive's run directory
    ("reference", "a/diagnose"),  # the run directory given, its archive root holds the out
    ("candidate", "b/runs/heldout-x/metadata/x"),
])
def test_an_out_inside_an_archive_it_reads_is_one_line_and_writes_nothing(tmp_path, release, side, out):
    """--out inside a tree the diagnosis reads (an archive, either side) is refused up front, naming --out."""
    from trace_lib.testing.cli_runner import run_cli

    write_archive_run(tmp_path / "a" / "runs" / "paper", "paper", _slices(_samples()))
    write_archive_run(tmp_path / "b" / "runs" / "heldout-x", "heldout-x", _slices(_samples()))
    before = _tree(tmp_path)
    done = run_cli(["diagnose", "--trace-root", str(release.path), "--no-plot",
                    "--reference", str(tmp_path / "a" / "runs" / "paper"), "--candidate", str(tmp_path / "b"),
                    "--out", str(tmp_path / out)])
    tree = tmp_path / ("a" if side == "reference" else "b")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"error: {tmp_path / out}: --out: lies inside the {side} archive this command reads "
                           f"({tree}); outputs are never written into an input; name a directory outside it\n")
    assert _tree(tmp_path) == before
