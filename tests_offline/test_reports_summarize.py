"""verify / status / summarize on a synthetic campaign directory (toy MCQ protocols, real store and score files)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from trace_lib.benchmarks import registry
from trace_lib.cli.main import main
from trace_lib.release.suite import load_suite
from trace_lib.reports.collect import CampaignReader, SliceKey, expected_slices
from trace_lib.reports.status import build_status
from trace_lib.campaign.verdicts import judge_campaign, verdict_plan
from trace_lib.reports.summarize import build_campaign_summary, write_reports
from trace_lib.reports.verify import verify_campaign
from trace_lib.testing.synthetic_campaign import build_toy_campaign, toy_mcq_protocol

MODEL = "trace-qwen2.5-vl-3b"
KEYS = ("erqa", "countbenchqa")  # small suite benchmarks; their rows come from the suite


@pytest.fixture
def toy_registry(monkeypatch):
    """Register the toy MCQ protocol under the two suite keys (in place of the real protocols)."""
    for key in KEYS:
        module = types.ModuleType(f"toy_protocol_{key}")
        module.PROTOCOL = toy_mcq_protocol(key)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        monkeypatch.setitem(registry.PROTOCOLS, key, f"{module.__name__}:PROTOCOL")


@pytest.fixture
def campaign(tmp_path, release, toy_registry):
    """Seeds 42 and 43 generated for both keys; scored: 42/erqa, 42/countbenchqa, 43/erqa (the last one far off)."""
    rows = {key: load_suite(release).benchmark(key).rows for key in KEYS}
    root = tmp_path / "campaign"
    build_toy_campaign(
        root, tmp_path / "data", model=MODEL, rows=rows,
        accuracy={(42, "erqa"): 0.36, (42, "countbenchqa"): 0.69, (43, "erqa"): 0.60, (43, "countbenchqa"): 0.68},
        scored={(42, "erqa"), (42, "countbenchqa"), (43, "erqa")},
    )
    return root


def _cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _select(root):
    return ["--campaign-root", str(root), "--benchmark", KEYS[0], "--benchmark", KEYS[1]]


def test_verify_generation_is_complete(capsys, campaign):
    code, out, _ = _cli(capsys, "verify", "--phase", "generation", *_select(campaign))
    assert code == 0
    assert out.splitlines() == [
        f"[trace-repro verify] phase=generation complete=4/4 incomplete=0 models={MODEL} seeds=42,43 benchmarks=2"
    ]


def test_verify_score_lists_the_unscored_slice(capsys, campaign):
    code, out, _ = _cli(capsys, "verify", "--phase", "score", *_select(campaign))
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("[trace-repro verify] phase=score complete=3/4 incomplete=1 ")
    assert lines[1].startswith(f"[trace-repro verify:missing] {MODEL}-seed43-countbenchqa: scores missing (")


def test_verify_json_names_every_slice(capsys, campaign):
    code, out, _ = _cli(capsys, "verify", "--phase", "score", "--json", *_select(campaign))
    report = json.loads(out)
    assert (code, report["completed_slices"], report["expected_slices"]) == (1, 3, 4)
    assert report["incomplete"] == [f"{MODEL}-seed43-countbenchqa"]
    assert {r["slice"] for r in report["records"]} == {f"{MODEL}-seed{s}-{k}" for s in (42, 43) for k in KEYS}


def test_score_receipt_breaks_when_records_change(campaign, release):
    records = campaign / "scoring" / "seed_42" / MODEL / "erqa" / "records.jsonl"
    records.write_text(records.read_text().replace('"score": 0.0', '"score": 1.0', 1))
    state = _reader(campaign, release).score(SliceKey(MODEL, 42, "erqa"))
    assert not state.complete and state.detail == "records.jsonl differs from the sha256 in scores.json"


def test_score_receipt_breaks_when_responses_change_after_scoring(campaign, release):
    responses = campaign / "generation" / "seed_42" / MODEL / "erqa.jsonl"
    responses.write_bytes(responses.read_bytes().replace(b"the answer is", b"the answer was", 1))
    state = _reader(campaign, release).score(SliceKey(MODEL, 42, "erqa"))
    assert state.detail == "responses changed since scoring (re-run 'trace-repro score')"


def test_score_receipt_breaks_when_the_protocol_version_changes(campaign, release):
    state = _reader(campaign, release).score(SliceKey(MODEL, 42, "erqa"), protocol_versions={"erqa": "toy-mcq-2"})
    assert state.detail == "scored with protocol 'toy-mcq-1', current is 'toy-mcq-2'"


def _reader(root, release):
    return CampaignReader(root, {b.key: b.rows for b in load_suite(release).benchmarks})


def test_verify_campaign_counts_a_partial_generation(campaign, release):
    responses = campaign / "generation" / "seed_43" / MODEL / "countbenchqa.jsonl"
    lines = responses.read_bytes().splitlines(keepends=True)
    responses.write_bytes(b"".join(lines[:-10]) + lines[-10][:5])  # 10 rows short, last line torn
    report = verify_campaign(campaign, load_suite(release), phase="generation", models=[MODEL], seeds=[42, 43],
                             benchmarks=KEYS)
    assert [r.detail for r in report.incomplete] == ["477/487 rows generated"]


def test_status_counts_rows_scores_and_rate(campaign, release):
    suite = load_suite(release)
    first = build_status(campaign, suite, models=[MODEL], seeds=[42, 43], benchmarks=KEYS, now=100.0)
    total = 2 * (suite.benchmark("erqa").rows + suite.benchmark("countbenchqa").rows)
    assert (first.durable_rows, first.expected_rows, first.score_slices, first.expected_score_slices) == (total, total, 3, 4)
    assert first.rows_per_second is None and first.generation_eta_seconds == 0.0 and not first.complete
    second = build_status(campaign, suite, models=[MODEL], seeds=[42, 43], benchmarks=KEYS, previous=first, now=110.0)
    assert second.rows_per_second == 0.0
    assert set(first.to_json()) >= {"durable_rows", "expected_rows", "recent_rows_per_second", "generation_eta_seconds",
                                    "score_slices", "observed_score_files", "expected_score_slices", "records", "complete"}


@pytest.mark.timeout(30)
def test_status_names_a_fifo_or_directory_in_place_of_a_slice_file_without_opening_it(capsys, campaign, release):
    import os

    from trace_lib.reports.collect import response_file, scores_file

    responses = response_file(campaign, SliceKey(MODEL, 43, "erqa"))
    responses.unlink()
    os.mkfifo(responses)  # opening it would block status for ever
    scores = scores_file(campaign, SliceKey(MODEL, 42, "erqa"))
    scores.unlink()
    scores.mkdir()
    code, out, _ = _cli(capsys, "status", "--no-gpu", *_select(campaign))
    warnings = [line for line in out.splitlines() if line.startswith("[trace-repro status:warning]")]
    assert code == 0 and len(warnings) == 2, out
    assert any(f"{responses}: is a FIFO, not a regular file (counted as absent" in w for w in warnings), warnings
    assert any(f"{scores}: is a directory, not a regular file" in w for w in warnings), warnings
    assert f"{MODEL} seed 43: rows {887 - load_suite(release).benchmark('erqa').rows}/887" in out
    code, out, _ = _cli(capsys, "verify", "--phase", "generation", *_select(campaign))
    assert code == 1 and "is a FIFO, not a regular file" in out and "responses missing" not in out, out


def test_status_cli_fails_if_incomplete_only_when_asked(capsys, campaign):
    code, out, _ = _cli(capsys, "status", "--no-gpu", *_select(campaign))
    assert code == 0 and out.startswith("[trace-repro status] generation 1774/1774 rows (100.0%)")
    assert f"[trace-repro status:slice] {MODEL} seed 43: rows 887/887, benchmarks generated 2/2, scores verified 1/2" in out
    code, out, _ = _cli(capsys, "status", "--no-gpu", "--json", "--fail-if-incomplete", *_select(campaign))
    assert code == 1 and json.loads(out)["complete"] is False


def test_summarize_judges_seed_scores_and_writes_three_reports(tmp_path, campaign, release):
    pytest.importorskip("openpyxl", reason="the 'report' extra (openpyxl) writes the spreadsheet")
    pytest.importorskip("matplotlib", reason="the 'report' extra (matplotlib) draws the plot")
    plan = verdict_plan(release, benchmarks=list(KEYS))
    judged = judge_campaign(campaign, release, plan, expected_slices([MODEL], [42, 43], KEYS))
    summary = build_campaign_summary(campaign, release, load_suite(release), judged, models=[MODEL], seeds=[42, 43],
                                     benchmarks=KEYS)
    assert [m.key.id for m in summary.missing] == [f"{MODEL}-seed43-countbenchqa"]
    # seed 43 of erqa (60 %) is far from seed 42 (36 %): the cell is seed-unstable, so nothing there can pass
    outcomes = {v.test_id: v.outcome for v in summary.verdicts}
    assert set(outcomes) == {f"{MODEL}-seed42-erqa", f"{MODEL}-seed43-erqa", f"{MODEL}-erqa",
                             f"{MODEL}-seed42-countbenchqa", f"{MODEL}-countbenchqa"}
    assert set(outcomes.values()) == {"inconclusive"} and summary.status == "inconclusive" and not summary.ok
    assert summary.result.cells[(MODEL, "erqa")].unstable
    paths = write_reports(summary, tmp_path / "out")
    assert [p.name for p in paths] == ["summary.md", "summary.xlsx", "summary.png"]
    markdown = paths[0].read_text()
    assert "- coverage: 3/4 slices scored and receipt-verified" in markdown
    assert "**inconclusive**: 0 reproduced, 0 differs, 5 inconclusive" in markdown
    assert f"- {summary.verdicts[0].explain()}" in markdown and "within tolerance" not in markdown
    import pandas as pd

    sheets = pd.read_excel(paths[1], sheet_name=None)
    assert list(sheets) == ["seed_values", "benchmark_means", "aggregates", "claims", "metadata"]
    assert sorted(sheets["seed_values"]["score"]) == [36.0, 60.0, pytest.approx(100 * 336 / 487)]
    assert set(sheets["seed_values"]["outcome"]) == {"inconclusive"}
    assert paths[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for path in paths:
        path.write_bytes(b"an earlier run's " + path.name.encode())
    before = {p.name: p.read_bytes() for p in paths}
    import trace_lib.reports.summarize as summarize_module

    def failing_plot(*args, **kwargs):
        raise OSError(28, "No space left on device", str(paths[2]))

    real_plot = summarize_module.write_plot
    summarize_module.write_plot = failing_plot  # the third file fails: the two before it are not put in either
    try:
        with pytest.raises(OSError):
            write_reports(summary, tmp_path / "out", stem="summary")
    finally:
        summarize_module.write_plot = real_plot
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before


def test_summarize_cli_exit_code_and_paths(capsys, tmp_path, campaign, release):
    pytest.importorskip("openpyxl", reason="the 'report' extra (openpyxl) writes the spreadsheet")
    code, out, _ = _cli(capsys, "summarize", "--no-plot", "--out", str(tmp_path / "r"), *_select(campaign))
    assert code == 1
    assert out.splitlines()[0] == ("[trace-repro summarize] 3/4 slices scored; 5 test(s): 0 reproduced, 0 differs, "
                                   "5 inconclusive; verdict: inconclusive")
    # the family is the plan's (8 release models x 3 release seeds x 2 benchmarks, means, claims), not the disk's
    assert out.splitlines()[1].startswith("[trace-repro summarize] rule: alpha=0.05 family-wise over 88 tests "
                                          "(48 slices + 16 means + 24 claim tests)")
    assert out.splitlines()[2] == f"[trace-repro summarize] release: {release.label}"
    assert f"\n- release: {release.label}\n" in (tmp_path / "r" / "summary.md").read_text()
    assert (tmp_path / "r" / "summary.xlsx").is_file() and not (tmp_path / "r" / "summary.png").exists()


def test_summarize_and_score_judge_one_benchmark_with_the_same_family(capsys, tmp_path, campaign, release):
    """``score --benchmark X`` and ``summarize --benchmark X`` spread the budget over the same planned family."""
    _, summarized, _ = _cli(capsys, "summarize", "--no-plot", "--no-xlsx", "--out", str(tmp_path / "r"),
                            "--campaign-root", str(campaign), "--benchmark", "erqa")
    rule = next(line for line in summarized.splitlines() if line.startswith("[trace-repro summarize] rule: "))
    assert "over 44 tests (24 slices + 8 means + 12 claim tests)" in rule


def test_summarize_with_nothing_scored_says_nothing_was_verified(capsys, tmp_path, release, toy_registry):
    rows = {key: load_suite(release).benchmark(key).rows for key in KEYS}
    root = tmp_path / "empty"
    build_toy_campaign(root, tmp_path / "data", model=MODEL, rows=rows, accuracy={(42, "erqa"): 0.36})
    code, out, _ = _cli(capsys, "summarize", "--no-plot", "--no-xlsx", "--out", str(tmp_path / "r"),
                        "--campaign-root", str(root), "--benchmark", "erqa")
    assert code == 1
    assert "[trace-repro summarize] campaign verdict: nothing verified (no test could be judged)" in out
    markdown = (tmp_path / "r" / "summary.md").read_text()
    assert "**nothing verified**" in markdown and "within tolerance" not in markdown


def test_status_watch_stops_once_the_campaign_is_complete(capsys, campaign, tmp_path):
    from trace_lib.generation.store import response_path
    from trace_lib.scoring.score import run_scoring, scores_dir

    protocol = toy_mcq_protocol("countbenchqa")
    run_scoring(protocol, protocol.load(tmp_path / "data" / "countbenchqa.jsonl"),
                response_path(campaign, model=MODEL, seed=43, benchmark="countbenchqa"),
                scores_dir(campaign, model=MODEL, seed=43, benchmark="countbenchqa"))
    code, out, _ = _cli(capsys, "status", "--no-gpu", "--watch", "5", "--fail-if-incomplete", *_select(campaign))
    assert code == 0
    assert out.count("[trace-repro status] ") == 1 and "complete=true" in out


@pytest.mark.parametrize("cut", ["repeated row", "last line cut before its newline"])
def test_verify_counts_the_rows_the_readers_parse_not_the_lines(campaign, release, cut):
    responses = campaign / "generation" / "seed_43" / MODEL / "countbenchqa.jsonl"
    lines = responses.read_bytes().splitlines(keepends=True)
    if cut == "repeated row":
        responses.write_bytes(b"".join(lines[:-1]) + lines[-2])  # as many lines, one row twice
    else:
        responses.write_bytes(b"".join(lines[:-1]) + lines[-1][:20] + b"\n")  # as many lines, the last one torn
    report = verify_campaign(campaign, load_suite(release), phase="generation", models=[MODEL], seeds=[42, 43],
                             benchmarks=KEYS)
    detail = [r.detail for r in report.incomplete]
    if cut == "repeated row":
        assert len(detail) == 1 and "two lines for one row" in detail[0], detail
    else:
        assert detail == ["486/487 rows generated"]


@pytest.mark.parametrize(("field", "value", "detail"), [
    ("records", ["x"], "scores.json records is not an object"),
    ("records", "x", "scores.json records is not an object"),
    ("records", {"path": "../../erqa/records.jsonl"}, "scores.json records.path is not a file name beside it"),
    ("inputs", "x", "scores.json inputs.responses is not an object"),
    ("inputs", {"responses": "x"}, "scores.json inputs.responses is not an object"),
    ("protocol", "x", "scores.json protocol is not an object"),
    ("score", 10 ** 400, "score is not a finite number"),
])
def test_a_mistyped_scores_json_is_an_incomplete_slice_not_a_traceback(campaign, release, capsys, field, value,
                                                                         detail):
    scores = campaign / "scoring" / "seed_42" / MODEL / "erqa" / "scores.json"
    doc = json.loads(scores.read_text(encoding="utf-8"))
    doc[field] = value
    scores.write_text(json.dumps(doc), encoding="utf-8")
    state = _reader(campaign, release).score(SliceKey(MODEL, 42, "erqa"))
    assert not state.complete and state.detail.startswith(detail), state.detail
    code, out, err = _cli(capsys, "verify", "--phase", "score", *_select(campaign))
    assert code == 1 and detail in out and "Traceback" not in err


def test_a_seed_directory_int_cannot_read_is_not_a_seed(campaign):
    from trace_lib.reports.collect import discover

    (campaign / "generation" / "seed_\u00b2" / MODEL).mkdir(parents=True)  # '²'.isdigit() is true
    assert discover(campaign) == ([MODEL], [42, 43])


def test_score_names_what_stands_where_responses_belong(capsys, campaign):
    import os

    from trace_lib.reports.collect import response_file

    responses = response_file(campaign, SliceKey(MODEL, 43, "erqa"))
    responses.unlink()
    os.mkfifo(responses)  # never opened: it would block
    code, out, err = _cli(capsys, "score", *_select(campaign), "--data-root", str(campaign.parent / "data"))
    assert code != 0 and "Traceback" not in err
    assert f"{MODEL}-seed43-erqa: {responses} is a FIFO, not a regular file" in err, err
    assert "not generated yet" not in err


def test_an_output_directory_that_is_a_fifo_is_named_not_file_exists(tmp_path):
    import os

    from trace_lib.errors import UsageError
    from trace_lib.filelock import locked_directory

    out_dir = tmp_path / "scoring" / "countbenchqa"
    out_dir.parent.mkdir()
    os.mkfifo(out_dir)
    with pytest.raises(UsageError) as refused:
        with locked_directory(out_dir, ".lock", busy=lambda: RuntimeError("busy")):
            pass
    assert str(refused.value).startswith(f"{out_dir}: is a FIFO, not a directory"), str(refused.value)
    with pytest.raises(UsageError):  # under a file: nothing is made
        with locked_directory(tmp_path / "scoring" / "countbenchqa" / "x", ".lock", busy=lambda: RuntimeError()):
            pass


def test_an_empty_response_file_is_a_store_file_cut_before_its_header(tmp_path):
    from trace_lib.scoring.plain_responses import is_store_file

    empty = tmp_path / "r.jsonl"
    empty.write_bytes(b"")
    assert is_store_file(empty)
