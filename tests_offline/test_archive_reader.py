"""trace_lib.archive reader and writer: a written archive reads back joined, in order, with every field; a tampered
part is refused naming both hashes; unknown ids get one line with close matches."""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_lib.archive import hashes
from trace_lib.archive.reader import PartDigestError, open_archive
from trace_lib.errors import InputError, UsageError
from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run


def _samples(n: int) -> tuple[SampleSpec, ...]:
    return tuple(SampleSpec(str(100 + i), i, hashes.text_sha256(f"row{i}"), f"Question {i}?", f"The answer is {i}",
                            (hashes.text_sha256(f"img{i}"),), finish_reason="length" if i == 2 else "stop",
                            extraction_value=str(i), judge_output="B" if i == 1 else None, retry_count=i % 2,
                            score=float(i % 2)) for i in range(n))


@pytest.fixture
def archive(tmp_path: Path):
    write_archive_run(tmp_path / "runs" / "run-a", "run-a", [
        SliceSpec("model-a", 42, "mmstar", _samples(6), 50.0),
        SliceSpec("model-a", 43, "mmstar", _samples(4), 50.0, aggregate_only=True),
    ])
    return open_archive(tmp_path)


def test_slice_rows_join_all_three_configs(archive):
    rows = list(archive.iter_slice(archive.find("model-a", 42, "mmstar")))
    assert [r.source_index for r in rows] == [str(100 + i) for i in range(6)]
    r = rows[1]
    assert (r.response_text, r.used_judge, r.judge_output, r.retry_count, r.score_value) == (
        "The answer is 1", True, "B", 1, 1.0)
    assert rows[2].finish_reason == "length" and rows[0].extraction_value() == "0"
    assert r.response_sha256 == hashes.response_sha256(r.response_text)
    assert r.prompt_sha256 == hashes.prompt_sha256("Question 1?")
    assert r.row_key == f"00000001:101:{hashes.text_sha256('row1')[:16]}"
    assert archive.aggregate(archive.find("model-a", 42, "mmstar")).score == 50.0


def test_aggregate_only_slice_has_no_row_scores(archive):
    key = archive.find("model-a", 43, "mmstar")
    assert not any(r.has_row_score for r in archive.iter_slice(key))
    assert archive.aggregate(key).scoring_scope == "aggregate_only"


def test_tampered_part_is_refused_with_both_hashes(archive):
    key = archive.find("model-a", 42, "mmstar")
    ref = archive.run_of(key).parts[key]["responses"]
    path = archive.run_of(key).part_path(ref)
    path.write_bytes(path.read_bytes()[:-1] + b"\x00")
    with pytest.raises(PartDigestError) as info:
        list(archive.iter_slice(key))
    assert ref.sha256 in str(info.value) and path.name in str(info.value) and "found" in str(info.value)


@pytest.mark.parametrize("model, seed, bench, words", [
    ("model-b", 42, "mmstar", ["unknown model id 'model-b'", "did you mean: model-a"]),
    ("model-a", 42, "mmstr", ["unknown benchmark 'mmstr'", "did you mean: mmstar"]),
    ("model-a", 44, "mmstar", ["seed 44", "42, 43"]),
])
def test_unknown_ids_get_one_line_with_close_matches(archive, model, seed, bench, words):
    with pytest.raises(UsageError) as info:
        archive.find(model, seed, bench)
    text = info.value.render()
    assert "\n" not in text and all(w in text for w in words)


def test_no_root_and_empty_root_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="TRACE_ARCHIVE_ROOT"):
        open_archive(None)
    with pytest.raises(UsageError, match="no archive run found"):
        open_archive(tmp_path)


@pytest.mark.parametrize("config", ["responses", "extractions", "scores"])
def test_every_part_is_hash_checked(archive, config):
    key = archive.find("model-a", 42, "mmstar")
    path = archive.run_of(key).part_path(archive.run_of(key).parts[key][config])
    path.write_bytes(path.read_bytes()[:-1] + b"\x00")
    with pytest.raises(PartDigestError, match=path.name):
        list(archive.iter_slice(key))


def _edit_manifest(root: Path, edit) -> None:  # noqa: ANN001
    import json

    path = root / "runs" / "run-a" / "metadata" / "manifest.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("config", ["responses", "extractions", "scores"])
@pytest.mark.parametrize("delta", [1, -1])
def test_a_part_whose_row_count_differs_from_its_manifest_is_refused(archive, config, delta):
    def edit(doc):  # noqa: ANN001, ANN202
        art = next(a for a in doc["artifacts"] if a["config_name"] == config and a["seed"] == 42)
        art["rows"] += delta  # the part is shorter (delta 1) or longer (-1) than the manifest says

    _edit_manifest(archive.root, edit)
    reopened = open_archive(archive.root)
    with pytest.raises(InputError, match="part row count differs from the manifest"):
        list(reopened.iter_slice(reopened.find("model-a", 42, "mmstar")))


def _rewrite_part(archive, key, config: str, change) -> None:  # noqa: ANN001
    """Rewrite one part through ``change(rows) -> rows`` under a new content address, manifest updated."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from trace_lib.archive.schema import arrow_schema
    from trace_lib.release.load import sha256_file

    run = archive.run_of(key)
    ref = run.parts[key][config]
    old = run.part_path(ref)
    rows = change(pq.read_table(old).to_pylist())
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema(config)), old)
    digest = sha256_file(old)
    new = old.with_name(f"part-{digest}.parquet")
    old.replace(new)
    path = run.root / "metadata" / "manifest.json"
    doc = json.loads(path.read_text())
    for art in doc["artifacts"]:
        if art["parquet_path"] == ref.path:
            art.update(parquet_path=new.relative_to(run.root).as_posix(), parquet_sha256=digest,
                       parquet_size=new.stat().st_size, rows=len(rows))
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("config", ["extractions", "scores"])
def test_a_stray_row_linking_to_no_response_is_refused(archive, config):
    key = archive.find("model-a", 42, "mmstar")

    def stray(rows):  # noqa: ANN001, ANN202
        row = next(r for r in rows if r.get("score_scope", "row") == "row")
        return rows + [{**row, "sample_id": "sample-" + "9" * 64}]

    _rewrite_part(archive, key, config, stray)
    reopened = open_archive(archive.root)
    with pytest.raises(InputError, match=f"{config} row sample-9+ links to no response"):
        list(reopened.iter_slice(key))


def test_two_runs_holding_one_slice_are_an_error_until_one_is_chosen(tmp_path):
    for run in ("run-a", "run-b"):
        write_archive_run(tmp_path / "runs" / run, run, [SliceSpec("model-a", 42, "mmstar", _samples(2), 50.0)])
    archive = open_archive(tmp_path)
    with pytest.raises(UsageError) as info:
        archive.find("model-a", 42, "mmstar")
    assert "held by 2 runs" in info.value.render() and "run-a, run-b" in info.value.render()
    assert archive.slices() == [archive.runs[0].parts.__iter__().__next__()]  # listed once
    chosen = open_archive(tmp_path, run_id="run-b")
    assert chosen.run_of(chosen.find("model-a", 42, "mmstar")).run_id == "run-b"
    with pytest.raises(UsageError, match="unknown run id 'run-c'"):
        open_archive(tmp_path, run_id="run-c")


@pytest.mark.timeout(20)
def test_an_archive_json_that_is_a_fifo_or_not_strict_is_one_line(tmp_path):
    import os

    from trace_lib.archive.reader import _load_json
    from trace_lib.errors import InputError
    from trace_lib.validation.canonical import read_json

    fifo = tmp_path / "manifest.json"
    os.mkfifo(fifo)  # reading it would block archive verify, summarize and diagnose for ever
    for reader in (_load_json, read_json):  # the archive's reader and validation's
        with pytest.raises(InputError, match="is a FIFO, not a regular file"):
            reader(fifo)
    nan = tmp_path / "nan.json"
    nan.write_text('{"score": NaN, "score": 1}')
    with pytest.raises(InputError, match="unreadable JSON"):
        _load_json(nan)


@pytest.mark.parametrize("key, value, line", [
    ("artifacts", -1, "artifacts: not a JSON array (found number)"),
    ("artifacts", "abc", "artifacts: not a JSON array (found string)"),
    ("metadata_files", 7, "metadata_files: not a JSON array (found number)"),
    ("run_ids", 5, "run_ids: not a JSON array (found number)"),
])
def test_an_export_manifest_field_of_another_shape_is_one_line(archive, key, value, line):
    """Iterating a number was a ``TypeError`` traceback (exit 1); a string was read a character at a time."""
    import json

    run_dir = archive.runs[0].root
    manifest = run_dir / "metadata" / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc[key] = value
    manifest.write_text(json.dumps(doc))
    with pytest.raises(InputError) as refused:
        run = open_archive(run_dir).runs[0]
        run.view()
        run.run_id
    assert refused.value.render() == f"{manifest}: {line}"


def test_a_suite_view_that_is_not_an_object_is_one_line(archive):
    import json

    run_dir = archive.runs[0].root
    suite_id = json.loads((run_dir / "metadata" / "manifest.json").read_text())["suite_id"]
    view = run_dir / "metadata" / "suites" / f"{suite_id}.json"
    view.write_text("[]")
    with pytest.raises(InputError) as refused:
        open_archive(run_dir).runs[0].view()
    assert refused.value.render() == f"{view}: not a JSON object (found array)"
