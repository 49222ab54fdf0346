"""Prompt identity (trace_lib.archive.identity): trace-repro's own requests hash to the archive's prompt, image and
request hashes; an injected prompt-text, image-byte or decoding difference is found on exactly the right rows."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from slice_support import tiny_png_b64

from trace_lib.archive.identity import compare_identity
from trace_lib.archive.reader import open_archive
from trace_lib.archive.schema import SliceKey
from trace_lib.benchmarks.registry import get_protocol
from trace_lib.generation.run import prepare_rows
from trace_lib.release.load import sha256_file
from trace_lib.release.suite import load_suite
from trace_lib.testing.archive_writer import PAPER_SAMPLING, SampleSpec, SliceSpec, write_archive_run

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
MODEL = "trace-qwen2.5-vl-3b"


@pytest.fixture
def prepared(tmp_path: Path, release):
    rows = [{"index": i, "image": tiny_png_b64(), "question": f"What is shown {i}?", "A": "cat", "B": "dog",
             "C": "bird", "D": "fish", "answer": "A", "category": "c", "l2-category": "l2"} for i in range(6)]
    generation = load_suite(release).generation
    return prepare_rows(rows, get_protocol("mmstar"), tmp_path / "images", served_name=MODEL,
                        generation=generation, seed=42)


def _samples(prepared):  # noqa: ANN001, ANN202
    return [SampleSpec(p.index, p.ordinal, p.source_row_hash, p.prompt, "A",
                       tuple(sha256_file(x) for x in p.request.image_paths())) for p in prepared]


def _report(tmp_path, prepared, samples, **spec):  # noqa: ANN001, ANN202
    write_archive_run(tmp_path / "runs" / "r", "r", [SliceSpec(MODEL, 42, "mmstar", tuple(samples), 0.0, **spec)])
    archive = open_archive(tmp_path)
    key = archive.find(MODEL, 42, "mmstar")
    return compare_identity(key, list(archive.iter_slice(key)), prepared, model_id=MODEL)


def test_trace_repro_requests_are_identical_to_the_archive(tmp_path, prepared):
    report = _report(tmp_path / "a", prepared, _samples(prepared))
    assert report.ok and (report.compared, report.identical) == (6, 6), report.explain()


def test_injected_prompt_and_image_differences_are_found_on_their_rows(tmp_path, prepared):
    samples = _samples(prepared)
    samples[2] = replace(samples[2], prompt_text=samples[2].prompt_text + " ")
    samples[4] = replace(samples[4], ordered_media_sha256=("f" * 64,))
    report = _report(tmp_path / "a", prepared, samples)
    assert not report.ok and report.identical == 4
    assert [(d.source_index, d.reasons) for d in report.first] == [("2", ("prompt text",)), ("4", ("image bytes",))]
    assert dict(report.reasons) == {"prompt text": 1, "image bytes": 1}
    assert "2: prompt text" in report.explain()


def test_a_decoding_difference_names_the_field(tmp_path, prepared):
    report = _report(tmp_path / "a", prepared, _samples(prepared), sampling={**PAPER_SAMPLING, "temperature": 0.7})
    assert report.identical == 0 and dict(report.reasons) == {"decoding field": 6}
    assert "temperature=0.6!=0.7" in report.first[0].reasons[0]


def test_a_report_that_compared_no_row_is_not_ok():
    from trace_lib.archive.identity import IdentityTally

    report = IdentityTally().report(SliceKey(MODEL, 42, "mmstar"))
    assert report.compared == 0 and not report.ok and "no archived row was compared" in report.explain()


def test_an_archived_row_trace_repro_does_not_have_is_a_dataset_row_difference(tmp_path, prepared):
    write_archive_run(tmp_path / "runs" / "r", "r", [SliceSpec(MODEL, 42, "mmstar", tuple(_samples(prepared)), 0.0)])
    archive = open_archive(tmp_path)
    key = archive.find(MODEL, 42, "mmstar")
    report = compare_identity(key, list(archive.iter_slice(key)), prepared[:-1], model_id=MODEL)
    assert (report.compared, report.identical) == (6, 5) and not report.ok
    assert dict(report.reasons) == {"dataset row": 1} and report.first[0].source_index == prepared[-1].index
