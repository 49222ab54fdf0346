"""The campaign estimate (trace_lib.campaign.estimate): its arithmetic, the calibration file, and the CLI paths
(``plan --estimate``, ``status``'s comparison)."""

from __future__ import annotations

import json

import pytest

from trace_lib.campaign.estimate import (
    DEFAULT_RATES,
    FALLBACK_REQUESTS_PER_ROW,
    Progress,
    Rates,
    SliceWork,
    compare_progress,
    engines_for,
    estimate,
    judge_requests_per_row,
    load_rates,
    model_shape,
    record_calibration,
)
from trace_lib.cli.main import main
from trace_lib.errors import InputError

pytestmark = pytest.mark.offline

RATES = Rates(generation_rows_per_s={"3b": 50.0, "7b": 25.0}, judge_requests_per_s=10.0, scoring_rows_per_s=1000.0,
              engine_start_s=60.0, judge_start_s=100.0, source="test", generation_output_tokens={"3b": 256, "7b": 256})
WORK = [SliceWork("m3", "3b", 1000, 1000.0), SliceWork("m3", "3b", 500, 100.0), SliceWork("m7", "7b", 1000, 0.0)]


def test_phases_are_rows_over_rates_plus_start_up():
    est = estimate(WORK, RATES, gpus=1)
    gen, judge, scoring = (est.phase(n) for n in ("generation", "judge", "scoring"))
    assert gen.seconds == pytest.approx(2 * 60 + 1500 / 50 + 1000 / 25)  # a start per model
    assert judge.work == 1100 and judge.seconds == pytest.approx(100 + 1100 / 10)
    assert scoring.seconds == pytest.approx(2500 / 1000)
    assert est.total_s == pytest.approx(gen.seconds + judge.seconds + scoring.seconds)


def test_gpus_divide_the_work_by_whole_slices_not_the_start_up():
    one, four = estimate(WORK, RATES, gpus=1), estimate(WORK, RATES, gpus=4)
    assert one.phase("generation").seconds == pytest.approx(2 * 60 + 1500 / 50 + 1000 / 25)
    # one slice per engine process: the busiest is the 7B one, its one start and its own rows
    assert four.phase("generation").start_s == 60 and four.phase("generation").seconds == pytest.approx(60 + 40)
    assert four.phase("judge").seconds - 100 == pytest.approx((one.phase("judge").seconds - 100) / 4)
    assert four.phase("scoring").seconds == one.phase("scoring").seconds  # the CPU's share
    with pytest.raises(ValueError):
        estimate(WORK, RATES, gpus=0)


def test_output_tokens_scale_generation_from_the_measured_length():
    base, longer = estimate(WORK, RATES, gpus=1), estimate(WORK, RATES, gpus=1, output_tokens=512)
    assert longer.phase("generation").seconds - 120 == pytest.approx(2 * (base.phase("generation").seconds - 120))
    tokens = [n for n in base.notes if "output tokens" in n]
    assert tokens and not [n for n in longer.notes if "output tokens" in n]  # without it: the length assumed


def test_no_judge_work_has_no_judge_start_up():
    est = estimate([SliceWork("m", "7b", 10, 0.0)], RATES, gpus=1)
    assert est.phase("judge").seconds == 0


def test_judge_requests_follow_the_protocols_judge_use():
    assert judge_requests_per_row("countqa", "none") == 0
    assert judge_requests_per_row("charxivreason", "always") == 1.0
    assert judge_requests_per_row("mathverse", "always") > 1  # extraction, then the judgement
    assert judge_requests_per_row("mmstar", "fallback") == FALLBACK_REQUESTS_PER_ROW
    assert model_shape("trace-qwen2.5-vl-3b") == "3b" and model_shape("trace-qwen2.5-vl-7b-grpo") == "7b"


def test_progress_is_set_against_the_estimate():
    est = estimate(WORK, RATES, gpus=1)
    gen = est.phase("generation").seconds
    rest = est.phase("judge").seconds + est.phase("scoring").seconds
    lines = compare_progress(est, Progress(1250, 2500, 1, 4, elapsed_s=(gen / 2 + rest / 4) * 2))
    assert "50% of rows, 25% of slices scored" in lines[0]
    assert "2.00x the estimate (recalibrate" in lines[1]
    assert len(compare_progress(est, Progress(0, 2500, 0, 4, elapsed_s=None))) == 1
    assert len(compare_progress(est, Progress(1, 2500, 0, 4, elapsed_s=3.0))) == 1  # a first row sets no pace
    on_pace = compare_progress(est, Progress(1250, 2500, 1, 4, elapsed_s=(gen / 2 + rest / 4) * 1.2))
    assert on_pace[1].endswith("1.20x the estimate")  # within 0.8-1.25: no advice
    assert compare_progress(est, Progress(1250, 2500, 1, 4, elapsed_s=(gen / 2 + rest / 4) * 1.3))[1].endswith(
        "(recalibrate: run the GPU benchmarks with --calibration)")
    assert "100% of rows, 100% of slices scored" in compare_progress(est, Progress(0, 0, 0, 0, elapsed_s=None))[0]


@pytest.mark.parametrize(("seconds", "text"), [(89.4, "89 s"), (90, "1.5 min"), (5399, "90.0 min"), (5400, "1.50 h")])
def test_durations_read_in_seconds_minutes_then_hours(seconds, text):
    from trace_lib.campaign.estimate import format_duration

    assert format_duration(seconds) == text


def test_a_campaign_began_with_its_first_response_file(tmp_path):
    from trace_lib.campaign.estimate import campaign_started_at
    from trace_lib.generation.store import SliceIdentity, SliceStore, response_path

    assert campaign_started_at(tmp_path) is None
    stamps = {"a": "2026-12-02T10:00:00+00:00", "b": "2026-12-01T09:00:00+00:00", "c": "2026-12-03T08:00:00+00:00"}
    for bench, stamp in stamps.items():
        path = response_path(tmp_path, model="m", seed=42, benchmark=bench)
        SliceStore.open(path, SliceIdentity(f"m-seed42-{bench}", "m", "a" * 40, 42, bench)).close()
        header = json.loads(path.read_text())
        path.write_text(json.dumps({**header, "created_at": stamp}) + "\n")
    assert campaign_started_at(tmp_path) == pytest.approx(1796115600.0)  # 2026-12-01 09:00 UTC: the earliest


def test_calibration_overrides_defaults_and_bad_values_name_the_field(tmp_path):
    path = tmp_path / "calibration.json"
    assert load_rates(path) is DEFAULT_RATES  # absent: the stated defaults
    record_calibration(path, "judge", {"requests_per_s": 12.5})
    record_calibration(path, "generation_7b", {"rows_per_s": 40.0, "max_tokens": 128})
    rates = load_rates(path)
    assert rates.judge_requests_per_s == 12.5 and rates.generation_rows_per_s["7b"] == 40.0
    assert rates.generation_rows_per_s["3b"] == DEFAULT_RATES.generation_rows_per_s["3b"]
    assert rates.generation_output_tokens["7b"] == 128 and str(path) in rates.source
    path.write_text(json.dumps({"judge": {"requests_per_s": -1}}))
    with pytest.raises(InputError, match="judge.requests_per_s"):
        load_rates(path)
    path.write_text("{not json")
    with pytest.raises(InputError, match="not JSON at line 1 column 2"):
        load_rates(path)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("text", "field", "message"), [
    ('{"judge": {"requests_per_s": 1' + "0" * 400 + "}}", "judge.requests_per_s", "not a number from 1e-06 to 1e+09"),
    ('{"judge": {"requests_per_s": 1e-320}}', "judge.requests_per_s", "not a number from"),  # an infinite estimate
    ('{"generation_7b": {"start_s": 1e308}}', "generation_7b.start_s", "not a number from"),  # a NaN one
    ('{"generation_3b": {"max_tokens": 0.5}}', "generation_3b.max_tokens", "not an integer from 1"),
    ('{"judge": {"requests_per_s": 5, "requests_per_s": 9}}', None, "duplicate key 'requests_per_s'"),
    ('{"judge": {"requests_per_sec": 5}}', "judge.requests_per_sec", "unknown field 'requests_per_sec'"),
    ('{"generaton_3b": {"rows_per_s": 5}}', "generaton_3b", "unknown section 'generaton_3b'"),
    ('{"generation_3B": {"rows_per_s": 5}}', "generation_3B", "unknown section 'generation_3B'"),  # not a shape
    ('{"generation_": {"rows_per_s": 5}}', "generation_", "unknown section 'generation_'"),
    ('{"generation_13b": {"rows_per_s": 5}}', "generation_13b", "unknown section 'generation_13b'"),
    ('{"judge": {"requests_per_s": true}}', "judge.requests_per_s", "not a number from"),  # not 1.0
    ('{"generation_3b": {"max_tokens": 0}}', "generation_3b.max_tokens", "not an integer from 1"),
    ("", None, "not JSON at line 1 column 1"),
    ('{"judge": {"requests_per_s": NaN}}', None, "non-finite number NaN"),
    ('{"generation_7b": {"max_tokens": 1000001}}', "generation_7b.max_tokens", "not an integer from 1 to 1,000,000"),
    ("[]", None, "not a JSON object"),
])
def test_a_bad_calibration_file_is_one_line_naming_the_field(tmp_path, text, field, message):
    path = tmp_path / "calibration.json"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_rates(path)
    assert err.value.field == field and message in str(err.value)


@pytest.mark.timeout(30)
def test_a_calibration_file_the_user_named_must_be_a_regular_file_that_is_there(tmp_path, monkeypatch, capsys):
    import os

    from trace_lib.campaign.estimate import calibrated_rates

    os.mkfifo(tmp_path / "fifo")  # opening it would block
    for named, message in ((tmp_path / "absent.json", "calibration file not found"),
                           (tmp_path / "fifo", "is a FIFO"), (tmp_path, "is a directory")):
        with pytest.raises(InputError, match=message):
            calibrated_rates(str(named))
    assert calibrated_rates(os.devnull) is DEFAULT_RATES  # the defaults, on purpose
    monkeypatch.setenv("TRACE_CALIBRATION", str(tmp_path / "absent.json"))
    with pytest.raises(InputError, match="calibration file not found"):
        calibrated_rates(None)
    monkeypatch.delenv("TRACE_CALIBRATION")
    monkeypatch.chdir(tmp_path)  # no trace-repro-work/calibration.json here: the defaults
    assert calibrated_rates(None) is DEFAULT_RATES


@pytest.mark.parametrize(("argv", "message"), [
    (["--gpus", "100000000000000000"], "argument --gpus: must be an integer from 1 to 4096"),
    (["--gpus", "0"], "argument --gpus: must be an integer from 1 to 4096"),
    (["--output-tokens", "0"], "argument --output-tokens: must be an integer from 1 to 1,000,000"),
])
def test_estimate_counts_out_of_range_are_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main(["plan", "--estimate", "--calibration", "/dev/null", *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_plan_estimate_prints_every_phase(capsys, tmp_path):
    calibration = tmp_path / "c.json"
    record_calibration(calibration, "judge", {"requests_per_s": 20.0})
    assert main(["plan", "--estimate", "--gpus", "2", "--calibration", str(calibration)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("estimate on 2 GPU(s), rates from calibration")
    judge = next(line for line in out.splitlines() if line.strip().startswith("judge"))
    assert "at      40.0/s" in judge  # 20 requests/s on each of 2 GPUs
    with pytest.raises(SystemExit) as exit_:
        main(["plan", "--estimate", "--gpus", "0"])
    assert exit_.value.code == 2
    assert "--gpus" in capsys.readouterr().err
    assert main(["plan", "--estimate", "--engines-per-group", "3"]) == 2  # no rates measured for 3
    err = capsys.readouterr().err
    assert "--engines-per-group" in err and "at most 2" in err and len(err.strip().splitlines()) == 1
    assert main(["plan", "--estimate", "--engines-per-group", "1"]) == 0
    assert "1 engine(s) per GPU" in capsys.readouterr().out


def test_status_sets_the_campaign_against_the_estimate(capsys, tmp_path):
    from trace_lib.testing.synthetic_campaign import build_toy_campaign

    root = tmp_path / "campaign"
    build_toy_campaign(root, tmp_path / "data", model="trace-qwen2.5-vl-7b", rows={"erqa": 400},
                       accuracy={(42, "erqa"): 0.4})
    assert main(["status", "--campaign-root", str(root), "--no-gpu", "--gpus", "2", "--benchmark", "erqa"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[trace-repro status:estimate]")]
    assert lines and "on 2 GPU(s)" in lines[0] and "100% of rows, 0% of slices scored" in lines[0]
    assert main(["status", "--campaign-root", str(root), "--no-gpu", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["estimate"]["gpus"] == 1 and [p["name"] for p in doc["estimate"]["phases"]] == [
        "generation", "judge", "scoring"]
    assert doc["estimate"]["engine_caches"] == "new-model"
    assert main(["status", "--campaign-root", str(root), "--no-gpu", "--json", "--engine-caches", "warm"]) == 0
    warm = json.loads(capsys.readouterr().out)["estimate"]
    assert warm["engine_caches"] == "warm" and warm["total_s"] < doc["estimate"]["total_s"]


def test_plan_estimate_of_a_mini_campaign_caps_the_rows_and_prints_json(release, capsys):
    """``plan --estimate --rows N --json`` (what benchmarks/mini_campaign.py sets against its measured run)."""
    import json

    from trace_lib.cli.main import main

    assert main(["plan", "--trace-root", str(release.path), "--estimate", "--json", "--gpus", "1", "--model-id",
                 "trace-qwen2.5-vl-3b", "--seeds", "42", "--benchmark", "mmstar", "--benchmark", "charxivreason",
                 "--rows", "32"]) == 0
    est = json.loads(capsys.readouterr().out)
    phases = {p["name"]: p for p in est["phases"]}
    assert phases["generation"]["work"] == 64  # 2 slices x 32 rows, not the suite's 2,500
    assert phases["judge"]["work"] == 32 * 1.0 + 32 * 0.2  # CharXiv every row, MMStar's fallback share
    assert abs(est["total_s"] - sum(p["seconds"] for p in est["phases"])) <= 0.2  # each rounded to 0.1 s


def test_engines_per_gpu_follow_auto_s_rows_rule():
    """Below MIN_ROWS_FOR_SECOND_ENGINE rows on a GPU one engine (its rate and start), from it on two; a forced
    count is used as given (capped at the two measured)."""
    from dataclasses import replace

    from trace_lib.campaign.engines import MIN_ROWS_FOR_SECOND_ENGINE

    rates = replace(RATES, one_engine_rows_per_s={"3b": 40.0}, one_engine_start_s=30.0)
    small = [SliceWork("m", "3b", MIN_ROWS_FOR_SECOND_ENGINE - 1, 0.0)]
    large = [SliceWork("m", "3b", MIN_ROWS_FOR_SECOND_ENGINE // 2, 0.0, key) for key in ("a", "b")]
    gen = estimate(small, rates, gpus=1).phase("generation")
    assert gen.start_s == 30 and gen.seconds == pytest.approx(30 + (MIN_ROWS_FOR_SECOND_ENGINE - 1) / 40)
    gen = estimate(large, rates, gpus=1).phase("generation")
    half, alone = MIN_ROWS_FOR_SECOND_ENGINE // 2, 30 * 40  # each engine's rows; the first's before the second is up
    together = half - alone  # rows each does at 25/s until the first is done; the second's rest go at 40/s
    assert gen.start_s == 60 and gen.seconds == pytest.approx(60 + together / 25 + (half - together) / 40)
    # the rule reads a GPU's share: two GPUs halve the rows each engine set sees
    assert estimate(large, rates, gpus=2).phase("generation").start_s == 30
    assert estimate(large, rates, gpus=2).notes[0].startswith("1 engine(s) per GPU")
    assert estimate(large, rates, gpus=1).notes[0].startswith("2 engine(s) per GPU")
    # forced: two engines for one slice leave the second without work, so the first starts and runs alone
    assert estimate(small, rates, gpus=1, engines_per_gpu=2).phase("generation").start_s == 30
    gen = estimate(large, rates, gpus=1, engines_per_gpu=1).phase("generation")
    assert gen.start_s == 30 and gen.seconds == pytest.approx(30 + MIN_ROWS_FOR_SECOND_ENGINE / 40)
    assert engines_for(10, 5) == 2 and engines_for(10 ** 6) == 2 and engines_for(10) == 1
    # a shape without a one-engine rate uses the two-engine one (older calibration files)
    assert estimate([SliceWork("m", "7b", 100, 0.0)], rates, gpus=1).phase("generation").rate == 25.0


def test_calibration_carries_one_engine_rates(tmp_path):
    path = tmp_path / "calibration.json"
    record_calibration(path, "generation_3b", {"rows_per_s": 60.0, "start_s": 120.0,
                                                "one_engine_rows_per_s": 41.0, "one_engine_start_s": 66.0})
    rates = load_rates(path)
    assert rates.generation("3b", 1) == (41.0, 66.0) and rates.generation("3b", 2) == (60.0, 120.0)
    path.write_text(json.dumps({"generation_7b": {"one_engine_rows_per_s": "fast"}}))
    with pytest.raises(InputError, match="generation_7b.one_engine_rows_per_s"):
        load_rates(path)


def test_the_defaults_say_what_they_are_worth_and_a_calibration_does_not(tmp_path):
    from trace_lib.campaign.estimate import DEFAULT_RATES, DEFAULTS_NOTE

    work = [SliceWork("m-3b", "3b", 1000, 100.0)]
    assert DEFAULTS_NOTE in estimate(work, DEFAULT_RATES, gpus=1).notes
    path = tmp_path / "calibration.json"
    record_calibration(path, "judge", {"requests_per_s": 20.0})
    assert DEFAULTS_NOTE not in estimate(work, load_rates(path), gpus=1).notes


def test_engine_starts_are_called_out_when_they_are_a_large_share():
    from trace_lib.campaign.estimate import START_SHARE_NOTED, start_share_note

    mini = estimate([SliceWork("m-3b", "3b", 256, 50.0)], RATES, gpus=1)  # 60 s start, 5 s of rows
    noted = [n for n in mini.notes if "engine start(s)" in n]
    assert noted and noted[0].startswith("1 engine start(s) are ")
    full = estimate([SliceWork("m-3b", "3b", 100_000, 0.0)], RATES, gpus=1)  # 60 s of 2,000 s
    assert not [n for n in full.notes if "engine start(s)" in n]
    by_caches = {"cold": 90.0, "new-model": 60.0, "warm": 30.0}
    assert start_share_note(START_SHARE_NOTED * 100, 100, 1, "warm", by_caches) is None
    note = start_share_note(60, 100, 1, "new-model", by_caches)
    assert "caches new-model" in note and "cold 90 s, warm 30 s" in note
    assert start_share_note(0, 0, 0, "warm", by_caches) is None
    assert START_SHARE_NOTED == 0.10 and start_share_note(15, 100, 1, "warm", by_caches) is not None
    # one engine running two models starts twice: the note counts the starts of the engine that finishes last
    two = estimate([SliceWork("a", "3b", 256, 50.0, "x"), SliceWork("b", "3b", 256, 50.0, "y")], RATES, gpus=1,
                   engines_per_gpu=1)
    assert [n for n in two.notes if "engine start(s)" in n][0].startswith("2 engine start(s) are ")


EXTRAS = {"cold": 60.0, "new-model": 30.0, "warm": 0.0}


def test_an_engine_alone_on_its_gpu_runs_at_the_one_engine_rate():
    """Two engines share a GPU's two-engine rate while both generate; one whose neighbour is waiting for the start
    lock, starting or done runs at the one-engine rate. Starts take the GPU's lock one at a time: the first is the
    one-engine start, the second engine's first what the two-engine start adds. Arithmetic by hand."""
    from dataclasses import replace

    rates = replace(RATES, generation_rows_per_s={"3b": 60.0}, engine_start_s=10.0, one_engine_start_s=5.0,
                    one_engine_rows_per_s={"3b": 40.0})

    def generation(work):
        return estimate(work, rates, gpus=1, engines_per_gpu=2, engine_caches="warm", start_rows=0).phase(
            "generation")

    # 1,200 and 600 rows of one model: the first engine is up at 5 s and alone until the second is, at 10 s (200
    # rows at 40/s); both at 30/s until the 600 are done, at 30 s; the first's last 400 rows alone at 40/s
    tail = generation([SliceWork("a", "3b", 1200, 0.0, "x"), SliceWork("a", "3b", 600, 0.0, "y")])
    assert tail.seconds == pytest.approx(5 + 200 / 40 + 600 / 30 + 400 / 40) and tail.start_s == 5
    # a: 600 rows; b then c: 300 each. b is up at 10 s and done at 20 s, a then has 100 rows left; c starts alone
    # for 5 s, a's 100 rows go at 40/s meanwhile (2.5 s); c's 300 rows run alone at 40/s from 25 s
    later = generation([SliceWork("a", "3b", 600, 0.0, "x"), SliceWork("b", "3b", 300, 0.0, "y"),
                        SliceWork("c", "3b", 300, 0.0, "z")])
    assert later.seconds == pytest.approx(25 + 300 / 40)
    assert later.start_s == 10 + 5  # the last to finish (b, c): from asking for the lock at 0 s to up, twice
    # without a one-engine start (older calibration files) the two-engine start is the first's, and the second's
    # adds nothing: both are up at 10 s
    both = estimate([SliceWork("a", "3b", 600, 0.0, "x"), SliceWork("a", "3b", 600, 0.0, "y")],
                    replace(rates, one_engine_start_s=None), gpus=1, engines_per_gpu=2, engine_caches="warm")
    assert both.phase("generation").seconds == pytest.approx(10 + 600 / 30)


def test_a_later_start_beside_a_generating_engine_takes_the_beside_factor_longer_while_it_generates():
    """The case above with ``start_beside_factor`` 2: c asks for the lock at 20 s, when a has 100 rows left (2.5 s
    at 40/s alone); c's 5 s start goes at half speed for those 2.5 s (1.25 s of it) and alone for the other
    3.75 s. An engine's first start is not slowed: the two-engine start was measured beside its neighbour."""
    from dataclasses import replace

    rates = replace(RATES, generation_rows_per_s={"3b": 60.0}, engine_start_s=10.0, one_engine_start_s=5.0,
                    one_engine_rows_per_s={"3b": 40.0}, start_beside_factor=2.0)
    work = [SliceWork("a", "3b", 600, 0.0, "x"), SliceWork("b", "3b", 300, 0.0, "y"),
            SliceWork("c", "3b", 300, 0.0, "z")]
    later = estimate(work, rates, gpus=1, engines_per_gpu=2, engine_caches="warm", start_rows=0).phase("generation")
    assert later.seconds == pytest.approx(20 + 2.5 + 3.75 + 300 / 40)
    assert later.start_s == pytest.approx(10 + 2.5 + 3.75)
    first_only = [SliceWork("a", "3b", 1200, 0.0, "x"), SliceWork("a", "3b", 600, 0.0, "y")]
    assert estimate(first_only, rates, gpus=1, engines_per_gpu=2, engine_caches="warm",
                    start_rows=0).phase("generation").seconds == pytest.approx(5 + 200 / 40 + 600 / 30 + 400 / 40)


def test_the_first_models_start_pays_for_the_caches_it_finds_and_later_ones_compile():
    from dataclasses import replace

    rates = replace(RATES, start_extra_s=EXTRAS)
    start = {caches: estimate(WORK, rates, gpus=1, engine_caches=caches).phase("generation").start_s
             for caches in ("cold", "new-model", "warm")}
    assert start == {"cold": 2 * 60 + 60 + 30, "new-model": 2 * 60 + 30 + 30, "warm": 2 * 60}
    assert estimate(WORK, rates, gpus=1).phase("generation").start_s == start["new-model"]  # the default
    two = estimate(WORK, rates, gpus=1, engines_per_gpu=2, engine_caches="cold").phase("generation")
    # the engines hold a model each: the 3B one starts cold (120 s); the 7B one waits for the lock, then compiles
    # its own model (30 s: the two-engine start adds nothing to the one-engine start here); the 3B engine's 1,500
    # rows go alone at 50/s meanwhile, and the 7B one's 1,000 at 25/s
    assert two.start_s == 60 + 60 + 30 and two.seconds == pytest.approx(150 + 1000 / 25)
    assert estimate(WORK, rates, gpus=1, engine_caches="cold").to_json()["engine_caches"] == "cold"
    with pytest.raises(ValueError, match="engine_caches"):
        estimate(WORK, rates, gpus=1, engine_caches="hot")


def test_an_engine_start_section_sets_the_warm_start_and_what_the_others_add(tmp_path):
    path = tmp_path / "calibration.json"
    record_calibration(path, "engine_start", {"cold": 146.7, "new-model": 114.4, "warm": 80.1, "shape": "3b"})
    rates = load_rates(path)
    assert rates.one_engine_start_s == 80.1
    assert rates.start_extra("cold") == pytest.approx(66.6) and rates.start_extra("new-model") == pytest.approx(34.3)
    record_calibration(path, "engine_start", {"new-model": 100.0, "warm": 80.0})
    assert load_rates(path).start_extra("cold") == DEFAULT_RATES.start_extra("cold")  # not measured: the default
    record_calibration(path, "generation_3b", {"one_engine_start_s": 55.0})  # the campaign's own warm start wins
    assert load_rates(path).one_engine_start_s == 55.0
    unsorted = {"generation_3b": {"one_engine_start_s": 55.0}, "engine_start": {"warm": 80.0}}
    path.write_text(json.dumps(unsorted), encoding="utf-8")  # a hand-written file: the order does not matter
    assert load_rates(path).one_engine_start_s == 55.0
    record_calibration(path, "engine_start", {"warm": 60.0, "beside_factor": 1.25})
    assert load_rates(path).start_beside_factor == 1.25
    assert DEFAULT_RATES.start_beside_factor == 1.17  # engine_start.py's 1.09 (3B) and 1.25 (7B), 2026-12-07
    for section, field in (({"cold": 140.0}, "engine_start.warm"), ({"warm": 80.0, "cold": -1}, "engine_start.cold"),
                           ({"warm": 80.0, "beside_factor": 0}, "engine_start.beside_factor"),
                           ({"warm": 80.0, "beside": 1.2}, "engine_start.beside")):
        path.write_text(json.dumps({"engine_start": section}), encoding="utf-8")
        with pytest.raises(InputError) as err:
            load_rates(path)
        assert err.value.field == field


def test_plan_estimate_takes_the_engine_caches_from_the_command_line(capsys):
    import os

    root = os.path.join(os.path.dirname(__file__), "..", "trace_lib", "release", "pinned")
    starts = {}
    for caches in ("cold", "new-model", "warm"):
        assert main(["plan", "--estimate", "--json", "--trace-root", root, "--rows", "8", "--calibration",
                     os.devnull, "--engine-caches", caches]) == 0
        est = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert est["engine_caches"] == caches
        starts[caches] = next(p["start_s"] for p in est["phases"] if p["name"] == "generation")
    models = 8
    assert starts["cold"] - starts["new-model"] == pytest.approx(DEFAULT_RATES.start_extra("cold")
                                                                 - DEFAULT_RATES.start_extra("new-model"))
    assert starts["new-model"] - starts["warm"] == pytest.approx(models * DEFAULT_RATES.start_extra("new-model"))


def test_the_paper_campaign_on_8_gpus_starts_one_engine_per_worker(capsys):
    """Dealt as generate deals it (trace_lib.campaign.plan.deal_slices), each of the 16 engine processes holds one
    model: generation pays one start, not the 8 models' (docs/performance.md: 39.7 min)."""
    import os

    root = os.path.join(os.path.dirname(__file__), "..", "trace_lib", "release", "pinned")
    assert main(["plan", "--estimate", "--json", "--trace-root", root, "--gpus", "8", "--calibration",
                 os.devnull]) == 0
    est = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    generation = next(p for p in est["phases"] if p["name"] == "generation")
    assert generation["start_s"] == pytest.approx(DEFAULT_RATES.engine_start_s + DEFAULT_RATES.start_extra("new-model"))
    assert generation["seconds"] / 60 == pytest.approx(39.75, abs=0.01)


@pytest.mark.parametrize("text", ['{"judge": {"requests_per_s": 9.0}', "[1, 2]", "\udcff"])
def test_recording_into_a_calibration_file_it_cannot_read_leaves_the_file_as_it_is(tmp_path, text):
    path = tmp_path / "calibration.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))  # cut short, not an object, not UTF-8
    before = path.read_bytes()
    with pytest.raises(InputError) as refused:
        record_calibration(path, "engine_start", {"warm": 60.0})
    assert refused.value.file == str(path) and path.read_bytes() == before  # the judge section is not lost
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration.json"]


def test_a_start_state_measured_faster_than_warm_adds_nothing_and_scoring_is_read(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"engine_start": {"warm": 80.0, "cold": 70.0}, "scoring": {"rows_per_s": 10.0}}))
    rates = load_rates(path)
    assert rates.start_extra("cold") == 0.0 and rates.scoring_rows_per_s == 10.0
    cold = estimate(WORK, DEFAULT_RATES, gpus=1, engine_caches="cold").phase("generation")
    warm = estimate(WORK, DEFAULT_RATES, gpus=1, engine_caches="warm").phase("generation")
    assert cold.start_s - warm.start_s == pytest.approx(66.6 + 34.3)  # m3 cold, then m7 a new path: run 38


def test_a_two_engine_start_measured_below_the_one_engine_start_adds_nothing_to_the_second_engines_start():
    """The second engine's first start is what the two-engine start adds to the one-engine start, never less than
    nothing: a calibration can measure the two (separate runs, ``generation_<shape>``'s ``start_s`` and
    ``one_engine_start_s``) the other way round. Here 5 s against 10 s: the second engine's start is only what its
    caches cost it. Arithmetic by hand; a (600 rows) on the first engine, b (2,400) on the second."""
    from dataclasses import replace

    rates = replace(RATES, generation_rows_per_s={"3b": 60.0}, engine_start_s=5.0, one_engine_start_s=10.0,
                    one_engine_rows_per_s={"3b": 40.0}, start_extra_s=EXTRAS)
    work = [SliceWork("a", "3b", 600, 0.0, "x"), SliceWork("b", "3b", 2400, 0.0, "y")]

    def generation(caches):
        return estimate(work, rates, gpus=1, engines_per_gpu=2, engine_caches=caches, start_rows=0).phase(
            "generation")

    # cold: a starts in 10 + 60 s; b, asking at 0 s, gets the lock at 70 s and compiles its new model (0 + 30 s),
    # up at 100 s (a's 600 rows went alone at 40/s meanwhile); b's 2,400 rows alone at 40/s: done at 160 s
    cold = generation("cold")
    assert cold.start_s == pytest.approx(100.0) and cold.seconds == pytest.approx(100 + 2400 / 40)
    # new-model: a up at 40 s, b at 70 s
    new_model = generation("new-model")
    assert new_model.start_s == pytest.approx(70.0) and new_model.seconds == pytest.approx(70 + 2400 / 40)
    # warm: b is up the moment a is (10 s); both at 30/s until a's 600 are done (30 s), b's last 1,800 at 40/s
    warm = generation("warm")
    assert warm.start_s == pytest.approx(10.0) and warm.seconds == pytest.approx(30 + 1800 / 40)


def test_a_mini_campaigns_rows_per_slice_caps_a_benchmarks_rows_and_leaves_a_smaller_one_as_it_is():
    """``plan --estimate --rows N`` (:func:`slice_work`'s ``rows_per_slice``): at most N rows a slice, the judge
    requests following the capped rows; a benchmark with fewer rows keeps its own."""
    from types import SimpleNamespace

    from trace_lib.campaign.estimate import slice_work

    rows = {"charxivreason": 1000, "realworldqa": 40}
    suite = SimpleNamespace(benchmark=lambda key: SimpleNamespace(rows=rows[key]))
    slices = [("m-3b", 42, "charxivreason"), ("m-3b", 42, "realworldqa")]
    full = slice_work(suite, slices)
    assert [(w.rows, w.judge_requests) for w in full] == [(1000, 1000.0), (40, 0.0)]
    capped = slice_work(suite, slices, rows_per_slice=64)
    assert [(w.benchmark, w.shape, w.rows, w.judge_requests) for w in capped] == [
        ("charxivreason", "3b", 64, 64.0), ("realworldqa", "3b", 40, 0.0)]
    assert [w.rows for w in slice_work(suite, slices, rows_per_slice=40)] == [40, 40]
    assert [w.rows for w in slice_work(suite, slices, rows_per_slice=5000)] == [1000, 40]
