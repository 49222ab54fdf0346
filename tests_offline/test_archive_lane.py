"""The archive lane end to end (``pytest tests_reproduction/test_archive.py``, run in-process by pytester): a slice whose
archive was written from the protocol's own scoring and trace-repro's own requests passes with an exact score and
byte-identical prompts, recorded in the JUnit receipt; an injected prompt difference fails naming the row."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from slice_support import tiny_png_b64, write_tsv

from trace_lib.archive.identity import HASH_FIELDS, benchmark_snapshot, dataset_view
from trace_lib.archive.lane import ArchiveLane
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
# imported before the in-process pytester run, which would otherwise unload numpy (it cannot be imported twice)
pytest.importorskip("pandas", reason="the TSV fixtures are written with pandas")
REPO = Path(__file__).resolve().parents[1]
REF = Path(os.environ.get("TRACE_ROOT", "/work/shared/reference/trace-rlvr"))
MODEL = "trace-qwen2.5-vl-3b"
RUN = "qwen2.5-vl-3b-comparison-temp06-seeds42-44-v1"
GOOD, TAMPERED = f"{MODEL}-seed42-mmstar-archive", f"{MODEL}-seed43-mmstar-archive"  # seed 43: row 3's prompt edited
HELDOUT = f"{MODEL}-seed44-mmstar-archive"  # answered by run heldout-x, which the release does not pin
RESPONSES = {42: ["A", "B", "C", "the answer is D", "B and C"], 43: ["A", "A", "A", "D", "B"]}


def _world(tmp: Path, *, run: str = RUN, pin: bool = True) -> tuple[Path, Path, Path]:
    """A release copy whose canonical mmstar scores (seeds 42, 43: different values) are the archive's, an archive
    run written from trace-repro's own requests (the dataset view's hashes included) and the 5-row data root;
    ``pin``: the release pins the written run as its source artifact."""
    data = tmp / "data"
    data.mkdir()
    write_tsv(data / "MMStar.tsv", [{"index": i, "question": f"Which one {i}?", "A": "cat", "B": "dog", "C": "bird",
                                     "D": "fish", "answer": "ABCDA"[i], "category": "c", "l2-category": "l2",
                                     "image": tiny_png_b64((i, 2 * i, 3))} for i in range(5)])
    protocol = get_protocol("mmstar")
    rows = protocol.load(data / "MMStar.tsv")
    release = tmp / "release"
    shutil.copytree(REF, release)
    suite = load_suite(locate_release(release))
    prepared = prepare_rows(rows, protocol, data / "images" / "MMStar", served_name=MODEL,
                            generation=suite.generation, seed=42)
    view = dataset_view(suite, {"mmstar": benchmark_snapshot(prepared)}, {"mmstar": len(prepared)})
    slices, scores = [], {}
    for seed in (42, 43):
        paper = protocol.score(rows, RESPONSES[seed], ScoringContext(seed=seed, judge=CallableJudge(lambda *_: "B")))
        samples = [SampleSpec(p.index, p.ordinal, p.source_row_hash, p.prompt + (" " if (seed, i) == (43, 3) else ""),
                              RESPONSES[seed][i], tuple(sha256_file(x) for x in p.request.image_paths()),
                              judge_output="B" if rec.judge_calls else None, score=rec.score)
                   for i, (p, rec) in enumerate(zip(prepared, paper.records))]
        slices.append(SliceSpec(MODEL, seed, "mmstar", tuple(samples), paper.score,
                                dataset_sha256=view.dataset_sha256))
        scores[seed] = paper.score
    assert scores[42] != scores[43] != 59.725
    archive = tmp / "archive"
    written = write_archive_run(archive / "runs" / run, run, slices)
    # a run the release does not pin, holding seed 44 (the seed-42 responses; the release's canonical is 59.725)
    write_archive_run(archive / "runs" / "heldout-x", "heldout-x", [replace(slices[0], seed=44)])
    scores[44] = 59.725
    doc = json.loads((release / RESULTS).read_text())
    for entry in doc["scores"]["benchmark_scores"]:
        if (entry["model_id"], entry["benchmark_id"]) == (MODEL, "mmstar") and entry["seed"] in scores:
            entry["score"] = scores[entry["seed"]]
    for art in doc["source_artifacts"]:
        if pin and art["run_id"] == RUN:
            art.update(run_id=run, manifest_sha256=written.manifest_sha256, result_sha256=written.result_sha256)
    (release / RESULTS).write_text(json.dumps(doc))
    return release, archive, data


def _lane(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp: Path, release: Path, archive: Path,
          data: Path) -> tuple[pytest.RunResult, ET.Element]:
    junit = tmp / "archive.xml"
    monkeypatch.setenv("TRACE_ROOT", str(release))
    monkeypatch.delenv("TRACE_ARCHIVE_ROOT", raising=False)
    result = pytester.runpytest_inprocess(
        str(REPO / "tests_reproduction" / "test_archive.py"), "-m", "reproduction", "-k", f"{GOOD} or {TAMPERED} or {HELDOUT}",
        "--archive-root", str(archive), "--data-root", str(data), "-p", "no:randomly", "-p", "no:benchmark", "-q", f"--junitxml={junit}")
    return result, ET.parse(junit).getroot()


def _props(root: ET.Element, slice_id: str) -> dict[str, str]:
    case = next(c for c in root.iter("testcase") if slice_id in c.get("name", ""))
    return {p.get("name"): p.get("value") for p in case.iter("property")}


def test_lane_passes_exactly_and_fails_on_an_injected_prompt_difference(tmp_path, pytester, monkeypatch):
    release, archive, data = _world(tmp_path)
    result, root = _lane(pytester, monkeypatch, tmp_path, release, archive, data)
    stdout = result.stdout.str()
    assert result.ret == 1 and (result.parseoutcomes()["failed"], result.parseoutcomes()["passed"]) == (2, 1), stdout[-2000:]
    good = _props(root, GOOD)
    assert (good["verdict"], good["rows_score_agree"], good["identity_rows"], good["judge_mode"]) == (
        "exact", "5/5", "5/5", "replay")
    assert good["replay_keyed"] == "1" and good["delta"] == "0.0"
    assert "1/5 rows differ from the paper's requests (1 prompt text); first: 3: prompt text" in stdout
    tampered = _props(root, TAMPERED)
    assert tampered["verdict"] == "exact" and tampered["identity_prompt_text"] == "1"
    # the receipt names the run, all eight fields, where the data root departs from the suite, what is left
    assert good["identity_fields"] == ",".join(HASH_FIELDS) and len(HASH_FIELDS) == 8
    assert (good["archive_run"], good["source_artifact"]) == (RUN, "yes")
    assert good["identity_note[0]"] == "mmstar: 5 rows in the data root, the suite lists 1500; hashed as found"
    # mmstar is on the official route: the archive holds VLMEvalKit's input, so no extraction is compared
    assert good["rows_extraction_agree"] == "0/0" and "official route" in good["extraction_compared"]
    assert good["left_to_gpu"].startswith("sampling")
    # a run the release does not pin: one line saying so, no object reprs
    lines = [line for line in stdout.splitlines() if line.startswith("re-scored ")]
    assert lines == [f"re-scored {_props(root, HELDOUT)['rescored']} vs canonical 59.725: this archive run "
                     f"(heldout-x) is not the release's source artifact (expected run {RUN})"], stdout[-3000:]
    assert "RescoreOutcome" not in stdout and "ArchiveSliceResult" not in stdout


def _in_process(release: Path, archive: Path, data: Path, **kw) -> ArchiveLane:  # noqa: ANN003
    return ArchiveLane.create(locate_release(release), data_root=data, archive_root=str(archive), **kw)


def test_a_root_with_two_runs_of_one_slice_is_a_one_line_error_and_run_id_chooses(tmp_path):
    from trace_lib.slices import Slice
    from trace_lib.errors import UsageError

    release, archive, data = _world(tmp_path)
    shutil.copytree(archive / "runs" / RUN, archive / "runs" / "copy")
    manifest = archive / "runs" / "copy" / "metadata" / "manifest.json"
    manifest.write_text(manifest.read_text().replace(f'"run_ids":["{RUN}"]', '"run_ids":["copy"]'))
    slice_ = Slice(MODEL, 42, "mmstar")
    lane = _in_process(release, archive, data)
    assert lane.blocker(slice_) is None  # not a skip: the run fails
    with pytest.raises(UsageError) as info:
        lane.run(slice_)
    message = info.value.render()
    assert f"held by 2 runs under {archive}: copy, {RUN}" in message and "--run-id" in message
    assert "\n" not in message
    chosen = _in_process(release, archive, data, run_id="copy").run(slice_)
    assert chosen.source.run_id == "copy" and not chosen.source.pinned
    assert chosen.rescore.ok and chosen.failure() is None  # same bytes: exact, but the receipt says whose
    assert dict(chosen.properties())["source_artifact"].startswith("this archive run (copy) is not")


def test_the_skip_hint_never_fetches_into_a_run_directory(tmp_path):
    from trace_lib.slices import Slice

    release, archive, data = _world(tmp_path)
    run_dir = archive / "runs" / RUN
    missing = Slice(MODEL, 44, "mmstar")
    assert f"--dest {archive} " in _in_process(release, run_dir, data).blocker(missing)
    outside = tmp_path / "loose-run"
    shutil.copytree(run_dir, outside)
    hint = _in_process(release, outside, data).blocker(missing)
    assert f"--dest {outside}" not in hint and "run directory outside a fetch-runs layout" in hint


def test_the_blocker_names_parts_not_fetched_then_a_missing_dataset_and_never_blocks_a_slice_two_runs_hold(tmp_path):
    """One run holding the slice: a part file absent is "archive parts not fetched for <slice>: <parts> (<fetch
    hint>)"; with its parts there, a dataset absent from the data root is "dataset missing: ...". A slice two runs
    hold is never blocked, even with parts and dataset missing (run() fails on it in one line); a benchmark the
    release has no data source for is a one-line InputError naming benchmark_id."""
    from trace_lib.archive.schema import SliceKey
    from trace_lib.errors import InputError
    from trace_lib.slices import Slice

    release, archive, data = _world(tmp_path)
    lane = _in_process(release, archive, data)
    key = SliceKey(MODEL, 42, "mmstar")
    [run] = [r for r in lane.archive.runs if r.run_id == RUN]
    run.part_path(run.parts[key]["extractions"]).unlink()
    assert lane.blocker(Slice(MODEL, 42, "mmstar")) == (
        f"archive parts not fetched for {key.id}: extractions ({lane.archive.fetch_hint(key)})")
    dataset = lane.dataset_path("mmstar")
    dataset.rename(tmp_path / "moved.tsv")
    assert lane.blocker(Slice(MODEL, 43, "mmstar")) == (
        f"dataset missing: mmstar ({dataset}); the archive holds no questions or answers")
    shutil.copytree(archive / "runs" / RUN, archive / "runs" / "copy")
    manifest = archive / "runs" / "copy" / "metadata" / "manifest.json"
    manifest.write_text(manifest.read_text().replace(f'"run_ids":["{RUN}"]', '"run_ids":["copy"]'))
    assert _in_process(release, archive, data).blocker(Slice(MODEL, 42, "mmstar")) is None
    with pytest.raises(InputError) as info:
        lane.dataset_path("nope")
    assert info.value.render() == "benchmark_id: no data source for benchmark 'nope' in the release"
