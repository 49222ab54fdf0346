"""Validation re-score from the archive (trace_lib.archive.validation): deterministic rows, replayed judge outputs
validated as the scoring contract does, unresolved rows at 0, exact comparison with the canonical percent."""

from __future__ import annotations

import json

import pytest

from trace_lib.archive import hashes
from trace_lib.archive.reader import open_archive
from trace_lib.archive.validation import rescore_validation, score_validation_row
from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run

BENCH = "trace_validation_iid2000"
ROWS = [{"row_index": i, "answer_type": "integer", "answer_gt": {"value": 7}} for i in range(4)]
OK = json.dumps({"status": "ok", "answer": 7, "evidence": "maybe 7"})
RESPONSES = [("Final answer: 7", None), ("maybe 7 or 8", OK), ("no idea", None), ("Final answer: 3", None)]


def _archive(tmp_path):  # noqa: ANN001, ANN202
    samples = tuple(SampleSpec(str(i), i, hashes.text_sha256(str(i)), "p", text, judge_output=out,
                               score=float(i in (0, 1))) for i, (text, out) in enumerate(RESPONSES))
    write_archive_run(tmp_path / "runs" / "v", "v", [SliceSpec("m", 42, BENCH, samples, 50.0)])
    return open_archive(tmp_path)


def test_rows_take_their_routes():
    assert score_validation_row("Final answer: 7", ROWS[0], None) == (1, "deterministic")
    assert score_validation_row("maybe 7 or 8", ROWS[1], OK) == (1, "judge")
    assert score_validation_row("maybe 7 or 8", ROWS[1], "not json") == (0, "unresolved")


def test_exact_validation_rescore(tmp_path):
    out = rescore_validation(_archive(tmp_path), "m", ROWS, canonical=50.0, benchmark_id=BENCH)
    assert out.ok and (out.deterministic, out.judged, out.unresolved) == (2, 1, 1)
    assert (out.score_agree, out.score_compared) == (4, 4)
    bad = rescore_validation(_archive(tmp_path / "b"), "m", ROWS, canonical=75.0, benchmark_id=BENCH)
    assert not bad.ok and "vs canonical 75.0" in bad.explain()


def test_row_scores_that_differ_but_cancel_make_the_validation_slice_differ(tmp_path):
    """The archive credits rows 0 and 2 where trace-repro credits 0 and 1: the accuracy is 50.0 on both sides, but
    the verdict is "differs" and the failure names both rows."""
    from types import SimpleNamespace

    from trace_lib.archive.validation import ValidationArchiveResult

    samples = tuple(SampleSpec(str(i), i, hashes.text_sha256(str(i)), "p", text, judge_output=out,
                               score=float(i in (0, 2))) for i, (text, out) in enumerate(RESPONSES))
    write_archive_run(tmp_path / "runs" / "v", "v", [SliceSpec("m", 42, BENCH, samples, 50.0)])
    out = rescore_validation(open_archive(tmp_path), "m", ROWS, canonical=50.0, benchmark_id=BENCH)
    assert (out.ok, out.row_scores_agree, out.exact) == (True, False, False)
    assert dict(out.properties())["verdict"] == "differs"
    failure = ValidationArchiveResult(out, None).failure()
    assert "rows 2/4 agree" in failure and "score@1: archive 0.0 vs trace-repro 1" in failure, failure
    assert "score@2: archive 1.0 vs trace-repro 0" in failure
    exact = rescore_validation(_archive(tmp_path / "e"), "m", ROWS, canonical=50.0, benchmark_id=BENCH)
    assert exact.exact and dict(exact.properties())["verdict"] == "exact"
    assert ValidationArchiveResult(exact, None).failure() is None
    differing = SimpleNamespace(ok=False, explain=lambda: "prompt identity: 3/4 rows identical")
    assert ValidationArchiveResult(exact, differing).failure() == "prompt identity: 3/4 rows identical"
    assert ValidationArchiveResult(out, differing).failure().endswith("; prompt identity: 3/4 rows identical")


def test_rows_not_covering_the_dataset_are_refused(tmp_path):
    from trace_lib.errors import InputError

    with pytest.raises(InputError, match="do not cover the dataset"):
        rescore_validation(_archive(tmp_path), "m", ROWS + ROWS[:1], canonical=50.0, benchmark_id=BENCH)


# -- prompt identity of the validation rows (trace_lib.archive.validation_identity) --------------------------------

def _manifest_rows():  # noqa: ANN202
    return [{"row_index": i, "instance_id": f"task-{i}", "answer_type": "integer", "answer_gt": {"value": 7},
             "prompt_answer": f"<image>How many dots? ({i})", "images": [{"sha256": hashes.text_sha256(f"img{i}")}]}
            for i in range(4)]


def _identity_archive(tmp_path, suite, rows, *, prompt=lambda r: r["prompt_answer"], index=lambda r: str(r["row_index"]),
                      sampling=None):  # noqa: ANN001, ANN202
    from trace_lib.validation.request import sampling_fields

    bounds = suite.mm_processor_kwargs()
    media = {"media_contract_version": "trace_eval_media_v1", "source_media_contract_sha256": "c" * 64,
             "media_transport": "data-url", "min_image_pixels": bounds["min_pixels"],
             "max_image_pixels": bounds["max_pixels"], "max_image_side": None, "image_jpeg_quality": None}
    samples = tuple(SampleSpec(index(r), r["row_index"], "d" * 64, prompt(r), "Final answer: 7",
                               ordered_media_sha256=tuple(i["sha256"] for i in r["images"]), score=1.0) for r in rows)
    sampling = sampling or {k: v for k, v in sampling_fields(suite).items() if k != "seed"}
    write_archive_run(tmp_path / "runs" / "v", "v", [SliceSpec("trace-qwen2.5-vl-3b", 42, BENCH, samples, 100.0,
                                                               sampling=sampling)], media_inputs=media)
    archive = open_archive(tmp_path)
    return archive, list(archive.iter_slice(archive.find("trace-qwen2.5-vl-3b", 42, BENCH)))


def test_validation_prompts_identical_to_the_archive(tmp_path, release):
    from trace_lib.archive.validation_identity import compare_validation_identity
    from trace_lib.release.validation_suite import load_validation_suite

    suite, rows = load_validation_suite(release), _manifest_rows()
    archive, archived = _identity_archive(tmp_path, suite, rows)
    report = compare_validation_identity(archive.find("trace-qwen2.5-vl-3b", 42, BENCH), archived, rows, suite=suite)
    assert report.ok and report.identical == 4, report.explain()
    assert "source_row_sha256" in report.not_compared
    # instance ids as source_index name the same rows
    archive, archived = _identity_archive(tmp_path / "i", suite, rows, index=lambda r: r["instance_id"])
    assert compare_validation_identity(archive.find("trace-qwen2.5-vl-3b", 42, BENCH), archived, rows,
                                       suite=suite).ok
    # a source_index naming no row (the producer's naming is not public) does not contradict the ordinal
    archive, archived = _identity_archive(tmp_path / "n", suite, rows, index=lambda r: "None")
    assert compare_validation_identity(archive.find("trace-qwen2.5-vl-3b", 42, BENCH), archived, rows,
                                       suite=suite).ok


def test_validation_prompt_decoding_and_row_differences_are_named(tmp_path, release):
    from trace_lib.archive.validation_identity import compare_validation_identity
    from trace_lib.validation.request import sampling_fields
    from trace_lib.release.validation_suite import load_validation_suite

    suite, rows = load_validation_suite(release), _manifest_rows()
    key = ("trace-qwen2.5-vl-3b", 42, BENCH)
    archive, archived = _identity_archive(tmp_path / "p", suite, rows, prompt=lambda r: r["prompt_answer"] + (
        " " if r["row_index"] == 2 else ""))
    report = compare_validation_identity(archive.find(*key), archived, rows, suite=suite)
    assert (report.identical, dict(report.reasons)) == (3, {"prompt text": 1}) and report.first[0].source_index == "2"
    hot = {k: v for k, v in sampling_fields(suite).items() if k != "seed"} | {"temperature": 1.0}
    archive, archived = _identity_archive(tmp_path / "t", suite, rows, sampling=hot)
    report = compare_validation_identity(archive.find(*key), archived, rows, suite=suite)
    assert report.identical == 0 and "temperature=0.6!=1.0" in report.first[0].render()
    archive, archived = _identity_archive(tmp_path / "s", suite, rows, index=lambda r: f"task-{(r['row_index'] + 1) % 4}")
    report = compare_validation_identity(archive.find(*key), archived, rows, suite=suite)
    assert dict(report.reasons) == {"dataset row": 4}


def test_validation_judge_call_list_uses_its_final_call(tmp_path):
    calls = json.dumps(["not json", OK], separators=(",", ":"))  # a recorded list of attempts, final one last
    samples = tuple(SampleSpec(str(i), i, hashes.text_sha256(str(i)), "p", text,
                               judge_output=(calls if i == 1 else out), score=float(i in (0, 1)))
                    for i, (text, out) in enumerate(RESPONSES))
    write_archive_run(tmp_path / "runs" / "v", "v", [SliceSpec("m", 42, BENCH, samples, 50.0)])
    out = rescore_validation(open_archive(tmp_path), "m", ROWS, canonical=50.0, benchmark_id=BENCH)
    assert out.ok and out.judged == 1


# -- the re-score's edges -------------------------------------------------------------------------------------------

def test_the_benchmark_id_is_the_validation_results_source_and_none_without_one(release):
    from types import SimpleNamespace

    from trace_lib.archive.validation import validation_benchmark_id

    assert validation_benchmark_id(release) == BENCH
    assert validation_benchmark_id(SimpleNamespace(read_json=lambda name: {"source": None})) == "None"


def test_a_judge_abstention_is_unresolved_not_a_judged_zero():
    missing = json.dumps({"status": "missing", "answer": None, "evidence": ""})
    assert score_validation_row("maybe 7 or 8", ROWS[1], missing) == (0, "unresolved")


def test_the_accuracy_is_exact_up_to_and_including_the_tolerance():
    from trace_lib.archive.rescore import EXACT
    from trace_lib.archive.schema import SliceKey
    from trace_lib.archive.validation import ValidationRescore

    def rescore(canonical):  # noqa: ANN001, ANN202
        return ValidationRescore(SliceKey("m", 42, BENCH), 4, 0.0, canonical, 4, 0, 0, 4, 4, ())

    assert rescore(EXACT).ok and rescore(EXACT).exact and not rescore(2 * EXACT).ok


def test_only_archived_row_scores_that_count_are_compared_and_at_most_five_differences_listed(tmp_path):
    """Rows with no score or excluded are not compared; of the rows that differ, the first five are listed."""
    rows = [{"row_index": i, "answer_type": "integer", "answer_gt": {"value": 7}} for i in range(9)]
    scores = [0.0] * 7 + [None, 0.0]  # every row answers 7 (credit 1): rows 0-6 differ, row 7 has no score
    samples = tuple(SampleSpec(str(i), i, hashes.text_sha256(str(i)), "p", "Final answer: 7", score=scores[i],
                               excluded=(i == 8)) for i in range(9))
    write_archive_run(tmp_path / "runs" / "v", "v", [SliceSpec("m", 42, BENCH, samples, 100.0)])
    out = rescore_validation(open_archive(tmp_path), "m", rows, canonical=100.0, benchmark_id=BENCH)
    assert (out.score_agree, out.score_compared, out.ok, out.exact) == (0, 7, True, False)
    assert [d.source_index for d in out.first_diffs] == ["0", "1", "2", "3", "4"]


def test_rows_not_covering_the_dataset_name_both_counts(tmp_path):
    from trace_lib.errors import InputError

    with pytest.raises(InputError) as caught:
        rescore_validation(_archive(tmp_path), "m", ROWS + ROWS[:1], canonical=50.0, benchmark_id=BENCH)
    assert caught.value.render() == ("the archive's validation rows of m do not cover the dataset (expected '5 rows "
                                     "0..4', found '4 rows')")


def test_identity_needs_the_images_verified_and_properties_say_when_it_was_not_checked(tmp_path, monkeypatch):
    """validation_archive_identity loads the manifest verifying every image byte; when it cannot, identity is None
    and the receipt says why; with a report the receipt carries its properties after the re-score's."""
    from types import SimpleNamespace

    import trace_lib.validation.manifest as manifest_module
    from trace_lib.archive.validation import ValidationArchiveResult, validation_archive_identity
    from trace_lib.errors import InputError

    calls = []

    def refuse(path, *, verify_media):  # noqa: ANN001, ANN202
        calls.append(verify_media)
        raise InputError("image bytes changed", file=str(path))

    monkeypatch.setattr(manifest_module, "load_validation_manifest", refuse)
    out = rescore_validation(_archive(tmp_path), "m", ROWS, canonical=50.0, benchmark_id=BENCH)
    result = validation_archive_identity(None, out.key, out, None, tmp_path / "manifest.json")
    assert calls == [True] and result.identity is None
    assert result.properties()[-1] == ("identity", "not checked: the prepared validation images are missing or "
                                                   "changed")
    report = SimpleNamespace(ok=True, properties=lambda: [("rows_identical", "4/4")])
    assert ValidationArchiveResult(out, report).properties() == out.properties() + [("rows_identical", "4/4")]
