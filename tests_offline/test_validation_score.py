"""Scoring one model's validation run (spec §A8): the input checks, the judge bookkeeping and the report's unit.

One stub generation (tiny dataset, loopback OpenAI stub) is shared by the module; a test that edits it works on a
copy below its own ``tmp_path``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from trace_lib.errors import InputError
from trace_lib.release.load import sha256_file
from trace_lib.release.validation_suite import load_system_prompt, load_validation_suite
from trace_lib.testing.openai_server import OpenAIStubServer
from trace_lib.testing.validation_bytes import RESPONSES, SLUG, prepare_stub_work, row_of
from trace_lib.validation.canonical import read_jsonl
from trace_lib.validation.generate import GenerationTarget, generate_validation_responses
from trace_lib.validation.judge import load_pending, run_judge
from trace_lib.validation.score import (
    Generation,
    ScoreReport,
    load_generation,
    load_judge_results,
    load_scoring_manifest,
    run_score,
    score_rows,
)


@pytest.fixture(scope="module")
def run(release, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The stub model's six responses generated into a prepared tiny work directory."""
    tmp = tmp_path_factory.mktemp("score-run")
    layout, ident, model_dir, template = prepare_stub_work(release, tmp)
    suite = load_validation_suite(release)
    model = suite.model(SLUG)
    with OpenAIStubServer(lambda route, body: RESPONSES[row_of(body)], model=SLUG) as server:
        target = GenerationTarget(model=model, model_path=model_dir, backend="openai", served_model=SLUG,
                                  endpoint_url=server.url)
        generate_validation_responses(release, layout.manifest, layout.generation_dir(SLUG), target, expected=ident)
    return SimpleNamespace(release=release, layout=layout, ident=ident, template=template, suite=suite, model=model,
                           prompt_sha=load_system_prompt(release, suite)[1])


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _edited_generation(run: SimpleNamespace, tmp_path: Path, *, row: Callable[[dict], None] | None = None,
                       meta: Callable[[dict], None] | None = None) -> Path:
    """A copy of the run with row 0 and/or the metadata edited; the metadata records the edited file's hash."""
    out = tmp_path / "generation"
    shutil.copytree(run.layout.generation_dir(SLUG), out)
    rows = read_jsonl(out / "responses.jsonl")
    if row is not None:
        row(rows[0])
    _write_jsonl(out / "responses.jsonl", rows)
    metadata = json.loads((out / "run_metadata.json").read_text())
    metadata["responses_sha256"] = sha256_file(out / "responses.jsonl")
    if meta is not None:
        meta(metadata)
    (out / "run_metadata.json").write_text(json.dumps(metadata))
    return out


def _load(run: SimpleNamespace, generation_dir: Path) -> Generation:
    manifest = load_scoring_manifest(run.layout.manifest, run.ident)
    return load_generation(generation_dir, model=run.model, manifest=manifest, suite=run.suite,
                           prompt_sha=run.prompt_sha)


def test_an_edited_copy_with_its_hash_recorded_still_loads(run, tmp_path: Path) -> None:
    generation = _load(run, _edited_generation(run, tmp_path))
    assert [r["row_index"] for r in generation.rows] == list(range(6))


def _set(key: str, value: Any) -> Callable[[dict], None]:
    return lambda row: row.__setitem__(key, value)


def _empty_response(row: dict) -> None:
    row["raw_response"], row["raw_response_sha256"] = "", hashlib.sha256(b"").hexdigest()


ROW_EDITS = [
    ("request", lambda row: row["request"].__setitem__("prompt_sha256", "0" * 64),
     "request provenance differs from the dataset row"),
    ("backend", lambda row: row["backend_response"].__setitem__("edited", True), "backend response hash mismatch"),
    ("finish", _set("finish_reason", 5), "invalid finish_reason"),
    ("empty", _empty_response, "empty raw_response"),
    ("index-neg", _set("row_index", -1), "row_index out of range"),
    ("index-len", _set("row_index", 6), "row_index out of range"),
    ("index-bool", _set("row_index", True), "row_index out of range"),
    ("index-str", _set("row_index", "0"), "row_index out of range"),
]


@pytest.mark.parametrize(("edit", "message"), [(e, m) for _, e, m in ROW_EDITS], ids=[i for i, _, _ in ROW_EDITS])
def test_a_generation_row_that_breaks_a_rule_is_refused(run, tmp_path: Path, edit: Callable[[dict], None],
                                                        message: str) -> None:
    with pytest.raises(InputError) as caught:
        _load(run, _edited_generation(run, tmp_path, row=edit))
    assert caught.value.message == message


def test_a_run_with_error_rows_is_incomplete_whatever_its_status(run, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="generation run is not complete"):
        _load(run, _edited_generation(run, tmp_path, meta=lambda m: m.__setitem__("error_rows", 1)))


def _edited_manifest(run: SimpleNamespace, tmp_path: Path, edit: Callable[[dict], None]) -> Path:
    dataset = tmp_path / "dataset"
    shutil.copytree(run.layout.dataset_dir, dataset)
    path = dataset / run.layout.manifest.name
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


def test_scoring_reads_the_manifest_without_rehashing_media(run, tmp_path: Path) -> None:
    path = _edited_manifest(run, tmp_path, lambda doc: None)
    image = json.loads(path.read_text())["rows"][0]["images"][0]["relative_path"]
    (path.parent / image).write_bytes(b"not the image")
    assert len(load_scoring_manifest(path, run.ident).rows) == 6


def _retype(answer_type: str, value: Any) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        doc["rows"][0]["answer_type"] = answer_type
        doc["rows"][0]["answer_gt"] = {"type": answer_type, "value": value}
    return edit


@pytest.mark.parametrize(("answer_type", "value", "message"), [
    ("boolean", True, "unsupported answer_type"),
    ("integer", "four", "ground truth is not a well-typed answer"),
], ids=["type", "value"])
def test_a_manifest_row_the_scorer_cannot_type_is_refused(run, tmp_path: Path, answer_type: str, value: Any,
                                                          message: str) -> None:
    path = _edited_manifest(run, tmp_path, _retype(answer_type, value))
    with pytest.raises(InputError) as caught:
        load_scoring_manifest(path, run.ident)
    assert (caught.value.message, caught.value.field) == (message, "rows[0].answer_gt")


def test_judge_result_keys(tmp_path: Path) -> None:
    path = tmp_path / "judge_results.jsonl"
    _write_jsonl(path, [{"model_slug": "m", "row_index": 0, "n": 1}, {"model_slug": "m", "row_index": 1}])
    assert load_judge_results(path) == {("m", 0): {"model_slug": "m", "row_index": 0, "n": 1},
                                        ("m", 1): {"model_slug": "m", "row_index": 1}}
    for bad in ({"model_slug": "m", "row_index": -1}, {"model_slug": "m", "row_index": True},
                {"model_slug": "", "row_index": 0}, {"row_index": 0}):
        _write_jsonl(path, [bad])
        with pytest.raises(InputError) as caught:
            load_judge_results(path)
        assert caught.value.message == "judge result lacks a valid model_slug/row_index"
    _write_jsonl(path, [{"model_slug": "m", "row_index": 0}] * 2)
    with pytest.raises(InputError, match="duplicate judge result"):
        load_judge_results(path)


def test_a_coverage_mismatch_names_at_most_ten_missing_rows() -> None:
    rows = [{"row_index": i, "instance_id": f"i{i}", "task": "t", "domain": "d", "answer_type": "integer",
             "answer_gt": {"type": "integer", "value": 1}} for i in range(12)]
    generation = Generation(model=SimpleNamespace(slug="m"), provenance={},
                            rows=tuple({"row_index": i, "raw_response": "no answer here"} for i in range(12)))
    scored, pending = score_rows(generation, SimpleNamespace(rows=rows), None, None)  # type: ignore[arg-type]
    assert len(pending) == 12 and {r["final_extraction_route"] for r in scored} == {"pending:missing"}
    with pytest.raises(InputError) as caught:
        score_rows(generation, SimpleNamespace(rows=rows), {}, None)  # type: ignore[arg-type]
    assert caught.value.found == f"missing={[('m', i) for i in range(10)]} extra=[]"


def test_accuracy_percent_is_rounded_to_two_places() -> None:
    report = ScoreReport(model_slug="m", rows=3, correct=1, deterministic_found=1, judge_requested=2,
                         judge_resolved=0, unresolved=2, judge_finalized=False, output_dir=Path("out"))
    assert report.accuracy_percent == 33.33 and report.to_dict()["accuracy_percent"] == 33.33
    assert ScoreReport(**{**report.__dict__, "rows": 0, "correct": 0}).accuracy_percent == 0.0


def test_an_unknown_model_is_refused_naming_the_suite_models(run, tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        run_score(run.release, tmp_path / "manifest.json", tmp_path / "generation", tmp_path / "score",
                  model_slug="no-such-model", expected=run.ident)
    assert (caught.value.message, caught.value.hint) == ("unknown validation model",
                                                        f"suite models: {', '.join(run.suite.slugs)}")


def test_failed_judge_receipts_finalize_and_a_tampered_one_is_refused(run, tmp_path: Path) -> None:
    generation_dir = run.layout.generation_dir(SLUG)
    run_score(run.release, run.layout.manifest, generation_dir, tmp_path / "first", model_slug=SLUG,
              expected=run.ident)
    pending = load_pending(tmp_path / "first" / "judge_pending.jsonl")
    with OpenAIStubServer(lambda route, body: "not the judge JSON", model=run.suite.judge.served_model_name) as judge:
        run_judge(pending, judge=run.suite.judge, template=run.template, endpoints=[judge.url],
                  output_dir=tmp_path / "judge", batch_size=1, workers=1)
    results = tmp_path / "judge" / "judge_results.jsonl"
    report = run_score(run.release, run.layout.manifest, generation_dir, tmp_path / "final", model_slug=SLUG,
                       judge_results=results, expected=run.ident)
    assert (report.judge_finalized, report.judge_requested, report.judge_resolved) == (True, 3, 0)
    routes = [r["final_extraction_route"] for r in read_jsonl(tmp_path / "final" / "scored_rows.jsonl")]
    assert routes.count("judge:failed") == 3
    receipts = read_jsonl(results)
    receipts[0]["instance_id"] += "-other"
    _write_jsonl(results, receipts)
    with pytest.raises(InputError) as caught:
        run_score(run.release, run.layout.manifest, generation_dir, tmp_path / "again", model_slug=SLUG,
                  judge_results=results, expected=run.ident)
    assert caught.value.message == "judge receipt provenance validation failed (receipt instance_id identity mismatch)"
