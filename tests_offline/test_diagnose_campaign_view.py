"""``trace-repro diagnose``: each injected divergence (rows, prompt, response, extraction, judge, score,
aggregation) is charged to its stage on the right rows; reports and exit codes."""

from __future__ import annotations

import hashlib
import json

import pytest

from trace_lib.cli.main import main
from trace_lib.diagnose.attribution import diagnose_slice
from trace_lib.diagnose.campaign_view import campaign_slice_keys, load_campaign_slice
from trace_lib.diagnose.views import SliceKey
from trace_lib.generation.store import SliceIdentity, SliceStore, StoredResponse, response_path
from trace_lib.scoring.score import scores_dir

MODEL = "trace-qwen2.5-vl-3b"  # a release model, so the sampling band is known
KEY = SliceKey(MODEL, 42, "mmstar")
ROWS = 40


def _row(i: int) -> dict:
    return {"index": str(i), "prompt": f"Question {i}? Answer with the letter.", "response": f"The answer is {'ABCD'[i % 4]}.",
            "extracted": "ABCD"[i % 4], "score": float(i % 2), "judge_calls": 0}


def write_slice(root, key: SliceKey, rows: list[dict], *, score: float | None = None) -> None:
    """A slice in the campaign layout: the response store, and (unless ``score`` is None) records + scores.json."""
    identity = SliceIdentity(slice=key.id, model=key.model, model_revision="0" * 40, seed=key.seed,
                             benchmark=key.benchmark, contract={"test": True})
    stored = [StoredResponse(row_key=f"{o:08d}:{r['index']}:x", index=r["index"], ordinal=o, source_row_hash="x",
                             request_hash=hashlib.sha256((r["prompt"] + r.get("decoding", "")).encode()).hexdigest(),
                             response=r["response"], finish_reason=r.get("finish", "stop"), prompt_tokens=10,
                             completion_tokens=len(r["response"]), model_revision="0" * 40, backend="test",
                             prompt=r["prompt"])
              for o, r in enumerate(rows)]
    with SliceStore.open(response_path(root, model=key.model, seed=key.seed, benchmark=key.benchmark),
                         identity) as store:
        store.append(stored)
    if score is None:
        return
    out = scores_dir(root, model=key.model, seed=key.seed, benchmark=key.benchmark)
    out.mkdir(parents=True)
    (out / "records.jsonl").write_text("".join(json.dumps({k: r[k] for k in ("index", "extracted", "score",
                                                                              "judge_calls")}) + "\n"
                                               for r in rows))
    (out / "scores.json").write_text(json.dumps({"score": score}))


def _score(rows):
    return 100.0 * sum(r["score"] for r in rows) / len(rows)


@pytest.fixture
def pair(tmp_path):
    """Two campaigns holding the same slice; ``right`` is the reference, ``left`` gets the injected divergences."""
    base = [_row(i) for i in range(ROWS)]
    write_slice(tmp_path / "right", KEY, base, score=_score(base))
    return tmp_path, base


def _diagnose(tmp_path, left_rows, *, score=None, band=None):
    write_slice(tmp_path / "left", KEY, left_rows, score=_score(left_rows) if score is None else score)
    left = load_campaign_slice(tmp_path / "left", KEY)
    right = load_campaign_slice(tmp_path / "right", KEY)
    return diagnose_slice(left, right, band=band)


def test_identical_runs_have_no_diverging_stage(pair):
    tmp_path, base = pair
    d = _diagnose(tmp_path, base)
    assert d.first_stage is None and d.counts == {} and d.identical_rows == ROWS and d.delta == 0.0


def test_each_injected_divergence_is_charged_to_its_stage_on_its_rows(pair):
    tmp_path, base = pair
    left = [dict(r) for r in base]
    left[3]["prompt"] += " Think step by step."                      # prompt text
    left[5]["decoding"] = "temperature=0"                             # same text, another request
    left[7]["response"] = "Let me see. The answer is C."              # sampling
    left[9]["extracted"] = "Z"                                        # extraction (deterministic route)
    left[11]["extracted"], left[11]["judge_calls"] = "Q", 1           # judge-made extraction
    left[13]["score"] = 1.0 - left[13]["score"]                       # scoring
    left[15]["prompt"] += "!"                                         # a row differing at several stages:
    left[15]["response"] = "other"                                    # charged to the first (prompt)
    d = _diagnose(tmp_path, left)
    assert d.counts == {"prompt": 3, "sampling": 1, "extraction": 1, "judge": 1, "score": 1}
    assert d.first_stage == "prompt"
    by_stage = {}
    for e in d.examples:
        by_stage.setdefault(e.stage, []).append(e.index)
    assert by_stage == {"prompt": ["3", "5", "15"], "sampling": ["7"], "extraction": ["9"], "judge": ["11"],
                        "score": ["13"]}
    assert "decoding" in next(e.reason for e in d.examples if e.index == "5")
    assert d.identical_rows == ROWS - 7


def test_response_divergence_alone_is_sampling_and_stats_are_side_by_side(pair):
    tmp_path, base = pair
    left = [dict(r, response=r["response"] + " " + "x" * 100, finish="length") if i < 10 else dict(r)
            for i, r in enumerate(base)]
    d = _diagnose(tmp_path, left)
    assert d.first_stage == "sampling" and d.counts == {"sampling": 10}
    assert d.left_stats.length_stop_rate == pytest.approx(0.25) and d.right_stats.length_stop_rate == 0.0
    assert d.left_stats.mean_chars > d.right_stats.mean_chars


def test_same_rows_other_slice_score_is_aggregation(pair):
    tmp_path, base = pair
    d = _diagnose(tmp_path, base, score=_score(base) + 0.5)
    assert d.counts == {"aggregation": 1} and d.first_stage == "aggregation"
    assert "aggregation" in d.headline()


def test_rows_on_one_side_only_are_charged_to_rows(pair):
    tmp_path, base = pair
    d = _diagnose(tmp_path, base[:-2])
    assert d.counts == {"rows": 2} and d.compared_rows == ROWS - 2
    assert sorted(e.index for e in d.examples) == [str(ROWS - 2), str(ROWS - 1)]


def test_unscored_slice_still_compares_prompt_and_sampling(tmp_path):
    base = [_row(i) for i in range(ROWS)]
    write_slice(tmp_path / "right", KEY, base)
    left = [dict(r) for r in base]
    left[0]["response"] = "changed"
    write_slice(tmp_path / "left", KEY, left)
    d = diagnose_slice(load_campaign_slice(tmp_path / "left", KEY), load_campaign_slice(tmp_path / "right", KEY))
    assert d.counts == {"sampling": 1} and d.delta is None
    assert any("extraction" in note for note in d.notes)


def test_band_decides_within(pair):
    tmp_path, base = pair
    left = [dict(r, score=1.0) for r in base]  # 100 vs 50
    d = _diagnose(tmp_path, left, band=5.0)
    assert d.delta == pytest.approx(50.0) and d.within_band is False
    assert diagnose_slice(load_campaign_slice(tmp_path / "left", KEY), load_campaign_slice(tmp_path / "right", KEY),
                          band=60.0).within_band is True
    assert diagnose_slice(load_campaign_slice(tmp_path / "left", KEY),
                          load_campaign_slice(tmp_path / "right", KEY)).within_band is None


def test_cli_writes_reports_and_exits_on_band(pair, capsys, release):
    tmp_path, base = pair
    left = [dict(r, score=1.0) for r in base]  # +50 points: far outside MMStar's sampling band
    write_slice(tmp_path / "left", KEY, left, score=_score(left))
    out = tmp_path / "report"
    code = main(["diagnose", "--trace-root", str(release.path), "--campaign-root", str(tmp_path / "left"),
                 "--against", str(tmp_path / "right"), "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 1
    assert f"{KEY.id}: first diverging stage 'score' ({ROWS // 2} of {ROWS} rows)" in printed
    assert "OUTSIDE band" in printed
    doc = json.loads((out / "diagnose.json").read_text())
    [entry] = doc["slices"]
    assert entry["first_stage"] == "score" and entry["delta"] == pytest.approx(50.0)
    assert 0 < entry["band"] < 50 and entry["within_band"] is False  # +50 points: outside any sampling band
    assert "| trace-qwen2.5-vl-3b-seed42-mmstar |" in (out / "diagnose.md").read_text()
    assert (out / f"diagnose-{MODEL}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_identical_campaigns_exit_zero(pair, capsys, release):
    tmp_path, base = pair
    write_slice(tmp_path / "left", KEY, base, score=_score(base))
    code = main(["diagnose", "--trace-root", str(release.path), "--campaign-root", str(tmp_path / "left"),
                 "--against", str(tmp_path / "right"), "--out", str(tmp_path / "o"), "--no-plot"])
    assert code == 0
    assert "no divergence in 40 compared rows" in capsys.readouterr().out


def test_cli_unknown_slice_is_one_line_usage_error(pair, capsys, release):
    tmp_path, base = pair
    code = main(["diagnose", "--trace-root", str(release.path), "--campaign-root", str(tmp_path / "right"),
                 "--against", str(tmp_path / "right"), "--slice", "nope-seed42-mmstar"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.splitlines()[0].startswith("error: --slice: no such slice in the campaign: nope-seed42-mmstar")


def test_campaign_slice_keys_lists_response_files(pair):
    tmp_path, _ = pair
    assert campaign_slice_keys(tmp_path / "right") == [KEY]
    assert load_campaign_slice(tmp_path / "right", SliceKey(MODEL, 43, "mmstar")) is None


def test_archive_reference_attributes_a_live_run_against_the_archive(pair, capsys, release):
    """Campaign vs a small archive in the public schema: the injected prompt and response differences are found
    on their rows; request hashes (another namespace) are not compared."""
    from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run

    tmp_path, base = pair
    samples = tuple(SampleSpec(source_index=r["index"], source_ordinal=i, source_row_sha256="a" * 64,
                               prompt_text=r["prompt"], response_text=r["response"], extraction_value=r["extracted"],
                               score=r["score"])
                    for i, r in enumerate(base))
    write_archive_run(tmp_path / "archive", "run-1",
                      [SliceSpec(MODEL, 42, "mmstar", samples, aggregate_score=_score(base))])
    left = [dict(r) for r in base]
    left[2]["prompt"] = "another prompt"
    left[4]["response"] = "another response"
    write_slice(tmp_path / "left", KEY, left, score=_score(left))
    code = main(["diagnose", "--trace-root", str(release.path), "--campaign-root", str(tmp_path / "left"),
                 "--archive-root", str(tmp_path / "archive"), "--out", str(tmp_path / "o"), "--no-plot"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    [entry] = json.loads((tmp_path / "o" / "diagnose.json").read_text())["slices"]
    assert entry["counts"] == {"prompt": 1, "sampling": 1} and entry["first_stage"] == "prompt"
    assert [e["index"] for e in entry["examples"]] == ["2", "4"]
    assert entry["delta"] == 0.0 and entry["right"].startswith("archive ")


def test_failing_slice_hint_names_the_first_stage_and_the_command(pair):
    from trace_lib.diagnose.hint import archive_divergence_hint
    from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run

    tmp_path, base = pair
    samples = tuple(SampleSpec(source_index=r["index"], source_ordinal=i, source_row_sha256="a" * 64,
                               prompt_text=r["prompt"], response_text=r["response"], extraction_value=r["extracted"],
                               score=r["score"]) for i, r in enumerate(base))
    write_archive_run(tmp_path / "archive", "run-1", [SliceSpec(MODEL, 42, "mmstar", samples,
                                                                aggregate_score=_score(base))])
    left = [dict(r, response="I cannot tell.") if i < 6 else dict(r) for i, r in enumerate(base)]
    write_slice(tmp_path / "left", KEY, left, score=_score(left))
    hint = archive_divergence_hint(tmp_path / "left", tmp_path / "archive", KEY)
    assert f"{KEY.id}: first diverging stage 'sampling' (6 of {ROWS} rows)" in hint
    assert f"trace-repro diagnose --candidate {tmp_path / 'left'} --reference {tmp_path / 'archive'} " \
           f"--slice {KEY.id}" in hint
    assert "not diagnosed (this run's responses not found)" in archive_divergence_hint(
        tmp_path / "left", tmp_path / "archive", SliceKey(MODEL, 43, "mmstar"))


def test_records_that_scores_json_does_not_name_are_one_line_not_no_divergence(pair, capsys, release):
    """scores.json names its records by sha256 (as trace-repro score writes it): records emptied, cut or edited
    after scoring are reported, not compared as if they held the slice's scoring."""
    tmp_path, base = pair
    write_slice(tmp_path / "left", KEY, base, score=_score(base))
    out = scores_dir(tmp_path / "left", model=KEY.model, seed=KEY.seed, benchmark=KEY.benchmark)
    records = out / "records.jsonl"
    summary = {"score": _score(base), "records": {"path": "records.jsonl",
                                                  "sha256": hashlib.sha256(records.read_bytes()).hexdigest()}}
    (out / "scores.json").write_text(json.dumps(summary))
    argv = ["diagnose", "--trace-root", str(release.path), "--campaign-root", str(tmp_path / "left"), "--against",
            str(tmp_path / "right"), "--out", str(tmp_path / "o"), "--no-plot"]
    assert main(argv) == 0  # the records scores.json names
    capsys.readouterr()
    records.write_text("")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith(f"error: {records}: records.jsonl differs from the sha256 in scores.json")


def test_an_out_inside_the_reference_campaign_is_refused_the_candidates_default_is_not(pair, capsys, release):
    """The reference is only read: --out inside it is one line naming --out (nothing written); the candidate
    campaign holds its own ``diagnose/`` by default."""
    tmp_path, base = pair
    write_slice(tmp_path / "left", KEY, base, score=_score(base))
    argv = ["diagnose", "--trace-root", str(release.path), "--campaign-root", str(tmp_path / "left"),
            "--against", str(tmp_path / "right"), "--no-plot"]
    before = sorted((tmp_path / "right").rglob("*"))
    assert main([*argv, "--out", str(tmp_path / "right" / "report")]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {tmp_path / 'right' / 'report'}: --out: lies inside the reference campaign this command "
                   f"reads ({tmp_path / 'right'}); outputs are never written into an input; name a directory outside "
                   "it\n")
    assert sorted((tmp_path / "right").rglob("*")) == before
    assert main(argv) == 0
    assert (tmp_path / "left" / "diagnose" / "diagnose.json").is_file()
