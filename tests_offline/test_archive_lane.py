"""The archive lane end to end (``pytest tests_reproduction/test_archive.py``, run in-process by pytester): a slice whose
archive was written from the protocol's own scoring and trace-repro's own requests passes with an exact score and
byte-identical prompts, recorded in the JUnit receipt; an injected prompt difference fails naming the row."""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_vlmeval_slicefiles import tiny_png_b64, write_tsv

from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.benchmarks.registry import get_protocol
from trace_lib.generation.run import prepare_rows
from trace_lib.release.identity import RESULTS
from trace_lib.release.load import sha256_file
from trace_lib.release.locate import locate_release
from trace_lib.release.suite import load_suite
from trace_lib.scoring.judge import CallableJudge
from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
REPO = Path(__file__).resolve().parents[1]
REF = Path(os.environ.get("TRACE_ROOT", "/work/shared/reference/trace-rlvr"))
MODEL = "trace-qwen2.5-vl-3b"
GOOD, TAMPERED = f"{MODEL}-seed42-mmstar-archive", f"{MODEL}-seed43-mmstar-archive"  # seed 43: row 3's prompt edited
RESPONSES = ["A", "B", "C", "the answer is D", "B and C"]


def _world(tmp: Path) -> tuple[Path, Path, Path]:
    data = tmp / "data"
    data.mkdir()
    write_tsv(data / "MMStar.tsv", [{"index": i, "question": f"Which one {i}?", "A": "cat", "B": "dog", "C": "bird",
                                     "D": "fish", "answer": "ABCDA"[i], "category": "c", "l2-category": "l2",
                                     "image": tiny_png_b64((i, 2 * i, 3))} for i in range(5)])
    protocol = get_protocol("mmstar")
    rows = protocol.load(data / "MMStar.tsv")
    release = tmp / "release"
    shutil.copytree(REF, release)
    prepared = prepare_rows(rows, protocol, data / "images" / "MMStar", served_name=MODEL,
                            generation=load_suite(locate_release(release)).generation, seed=42)
    slices = []
    for seed in (42, 43):
        paper = protocol.score(rows, RESPONSES, ScoringContext(seed=seed, judge=CallableJudge(lambda *_: "B")))
        samples = [SampleSpec(p.index, p.ordinal, p.source_row_hash, p.prompt + (" " if (seed, i) == (43, 3) else ""),
                              RESPONSES[i], tuple(sha256_file(x) for x in p.request.image_paths()),
                              judge_output="B" if rec.judge_calls else None, score=rec.score)
                   for i, (p, rec) in enumerate(zip(prepared, paper.records))]
        slices.append(SliceSpec(MODEL, seed, "mmstar", tuple(samples), paper.score))
    archive = tmp / "archive"
    run = "qwen2.5-vl-3b-comparison-temp06-seeds42-44-v1"
    write_archive_run(archive / "runs" / run, run, slices)
    doc = json.loads((release / RESULTS).read_text())
    for entry in doc["scores"]["benchmark_scores"]:
        if (entry["model_id"], entry["benchmark_id"]) == (MODEL, "mmstar") and entry["seed"] in (42, 43):
            entry["score"] = paper.score
    (release / RESULTS).write_text(json.dumps(doc))
    return release, archive, data


def _lane(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp: Path, release: Path, archive: Path,
          data: Path) -> tuple[pytest.RunResult, ET.Element]:
    junit = tmp / "archive.xml"
    monkeypatch.setenv("TRACE_ROOT", str(release))
    monkeypatch.delenv("TRACE_ARCHIVE_ROOT", raising=False)
    result = pytester.runpytest_inprocess(
        str(REPO / "tests_reproduction" / "test_archive.py"), "-m", "reproduction", "-k", f"{GOOD} or {TAMPERED}",
        "--archive-root", str(archive), "--data-root", str(data), "-p", "no:randomly", "-p", "no:benchmark", "-q", f"--junitxml={junit}")
    return result, ET.parse(junit).getroot()


def _props(root: ET.Element, slice_id: str) -> dict[str, str]:
    case = next(c for c in root.iter("testcase") if slice_id in c.get("name", ""))
    return {p.get("name"): p.get("value") for p in case.iter("property")}


def test_lane_passes_exactly_and_fails_on_an_injected_prompt_difference(tmp_path, pytester, monkeypatch):
    release, archive, data = _world(tmp_path)
    result, root = _lane(pytester, monkeypatch, tmp_path, release, archive, data)
    stdout = result.stdout.str()
    assert result.ret == 1 and (result.parseoutcomes()["failed"], result.parseoutcomes()["passed"]) == (1, 1), stdout[-2000:]
    good = _props(root, GOOD)
    assert (good["verdict"], good["rows_score_agree"], good["identity_rows"], good["judge_mode"]) == (
        "exact", "5/5", "5/5", "replay")
    assert good["replay_keyed"] == "1" and good["delta"] == "0.0"
    assert "1/5 rows differ from the paper's requests (1 prompt text); first: 3: prompt text" in stdout
    tampered = _props(root, TAMPERED)
    assert tampered["verdict"] == "exact" and tampered["identity_prompt_text"] == "1"
