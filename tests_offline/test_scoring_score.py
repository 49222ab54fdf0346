"""The slice scorer: alignment by row key, protocol contract checks, per-row records, atomic writes."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from trace_lib.benchmarks.protocol import RowScore, ScoringContext, SliceScore
from trace_lib.errors import InputError, JudgeError
from trace_lib.extraction.workbook import library_versions
from trace_lib.generation.store import load_responses
from trace_lib.scoring.judge import CallableJudge
from trace_lib.scoring.score import (
    check_judge,
    record_to_dict,
    responses_for_rows,
    score_slice,
    write_slice_scores,
)
from trace_lib.atomic import write_lines_atomic
from trace_lib.testing.synthetic_campaign import toy_mcq_protocol, toy_responses, toy_rows, write_response_file

PROTOCOL = toy_mcq_protocol("mmstar")


@pytest.fixture
def stored(tmp_path):
    rows = toy_rows(20, seed=1)
    path = write_response_file(tmp_path / "r.jsonl", model="m", seed=42, benchmark="mmstar", rows=rows,
                               texts=toy_responses(rows, 0.5))
    return rows, load_responses(path)


def test_responses_are_aligned_by_row_key_not_file_order(stored):
    rows, responses = stored
    texts = responses_for_rows(rows, list(reversed(responses)))
    assert texts == [r.response for r in responses]


def test_any_permutation_of_the_stored_responses_gives_each_row_its_own(tmp_path):
    import random

    rows = toy_rows(30, seed=3)
    own = [f"row {r['index']} says {r['answer']}" for r in rows]  # one distinct text per row
    path = write_response_file(tmp_path / "r.jsonl", model="m", seed=42, benchmark="mmstar", rows=rows, texts=own)
    responses = load_responses(path)
    for trial in range(3):
        shuffled = random.Random(trial).sample(responses, len(responses))
        assert shuffled != responses
        assert responses_for_rows(rows, shuffled) == own


def test_a_changed_row_does_not_get_its_old_response(stored):
    rows, responses = stored
    changed = [dict(r) for r in rows]
    changed[5]["answer"] = "D" if rows[5]["answer"] != "D" else "A"
    with pytest.raises(InputError, match=r"responses do not cover the dataset \(expected 20 rows, found 19\); "
                                         r"first missing row 00000005:5:"):
        responses_for_rows(changed, responses)


def test_a_response_for_an_unknown_row_is_refused(stored):
    rows, responses = stored
    with pytest.raises(InputError, match="response for a row this dataset does not have"):
        responses_for_rows(rows[:-1], responses[:-1] + [replace(responses[-1], row_key="x")])


def test_score_slice_scores_in_row_order(stored):
    rows, responses = stored
    result = score_slice(PROTOCOL, rows, responses_for_rows(rows, responses), ScoringContext(seed=42))
    assert (result.score, result.rows, result.counts) == (50.0, 20, {"correct": 10})


def test_a_protocol_that_drops_rows_breaks_its_contract(stored):
    rows, responses = stored
    short = replace(PROTOCOL, score=lambda r, s, c: SliceScore("mmstar", 0.0, 19, tuple(
        RowScore(str(i), None, 0.0) for i in range(19))))
    with pytest.raises(RuntimeError, match="scored 19 rows with 19 records for 20 rows"):
        score_slice(short, rows, [None] * 20, ScoringContext(seed=42))


def test_judge_routes_need_a_judge_only_when_they_always_call_it():
    with pytest.raises(JudgeError, match=r"^judge URL not set \(--judge-url / TRACE_JUDGE_URL\) for judge route mmstar"):
        check_judge(replace(PROTOCOL, judge="always"), None)
    check_judge(replace(PROTOCOL, judge="fallback"), None)
    check_judge(replace(PROTOCOL, judge="always"), CallableJudge(lambda *a: "A"))


def test_records_are_json_safe():
    record = RowScore("7", {"b", "a"}, math.nan, judge_calls=2, fallback=True, detail={"raw": (1, math.inf)})
    assert json.loads(json.dumps(record_to_dict(record))) == {
        "index": "7", "extracted": ["a", "b"], "score": "nan", "judge_calls": 2, "fallback": True,
        "detail": {"raw": [1, "inf"]},
    }


def test_write_slice_scores_writes_records_then_summary(tmp_path, stored):
    rows, responses = stored
    result = score_slice(PROTOCOL, rows, responses_for_rows(rows, responses), ScoringContext(seed=42))
    scored = write_slice_scores(tmp_path / "out", result, PROTOCOL, seed=42, identity={"model": "m"})
    summary = json.loads(scored.scores_path.read_text())
    assert summary["records"]["path"] == "records.jsonl" and summary["model"] == "m"
    assert summary["workbook_libraries"] == library_versions() and set(library_versions()) == {
        "pandas", "xlsxwriter", "openpyxl"}
    assert summary["protocol"] == {"key": "mmstar", "version": "toy-mcq-1",
                                   "upstream": "trace_lib.testing.synthetic_campaign", "judge": "none"}
    assert len(scored.records_path.read_text().splitlines()) == 20
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["records.jsonl", "scores.json"]


def test_a_failed_rename_of_the_records_leaves_the_old_records_and_scores_as_they_were(tmp_path, stored,
                                                                                        monkeypatch):
    import errno
    import os

    rows, responses = stored
    out = tmp_path / "out"
    first = write_slice_scores(out, score_slice(PROTOCOL, rows, responses_for_rows(rows, responses),
                                                ScoringContext(seed=42)), PROTOCOL, seed=42, identity={"model": "m"})
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real_replace = os.replace

    def failing_replace(src, dst):
        if str(dst) == str(first.records_path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_replace(src, dst)

    monkeypatch.setattr("trace_lib.atomic.os.replace", failing_replace)
    again = score_slice(PROTOCOL, rows, responses_for_rows(rows, responses), ScoringContext(seed=43))
    with pytest.raises(OSError):
        write_slice_scores(out, again, PROTOCOL, seed=43, identity={"model": "m"})
    monkeypatch.undo()
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert after == before  # the receipt set aside is put back beside the records it names; no temp is left


def test_a_full_disk_at_any_fsync_of_a_rescore_leaves_both_files_as_they_were(tmp_path, stored, monkeypatch):
    """ENOSPC at each fsync of a rescore in turn: a rescore that fails leaves records.jsonl and scores.json byte for
    byte as they were (the new receipt is written and fsynced before the records are replaced; its write after
    their rename once left the slice with new records and no scores.json); one that goes through (a directory's
    fsync is best effort) leaves a receipt naming its records."""
    import errno
    import hashlib
    import os

    rows, responses = stored
    out = tmp_path / "out"
    write_slice_scores(out, score_slice(PROTOCOL, rows, responses_for_rows(rows, responses), ScoringContext(seed=42)),
                       PROTOCOL, seed=42, identity={"model": "m"})
    again = score_slice(PROTOCOL, rows, responses_for_rows(rows, responses), ScoringContext(seed=43))
    real_fsync, failed = os.fsync, 0
    for nth in range(1, 8):
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        calls = []

        def fsync(fd, nth=nth, calls=calls):
            calls.append(fd)
            if len(calls) == nth:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        try:
            write_slice_scores(out, again, PROTOCOL, seed=43, identity={"model": "m"})
            went_in = True
        except OSError:
            went_in, failed = False, failed + 1
        monkeypatch.undo()
        after = {p.name: p.read_bytes() for p in out.iterdir()}
        if went_in:
            receipt = json.loads(after["scores.json"])
            assert receipt["records"]["sha256"] == hashlib.sha256(after["records.jsonl"]).hexdigest(), nth
        else:
            assert after == before, nth
        if len(calls) < nth:
            break
    assert failed >= 3  # the receipt's and the records' bytes, and the records' own fsync at the rename


def test_an_interrupted_write_leaves_nothing(tmp_path):
    def lines():
        yield "one"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_lines_atomic(tmp_path / "records.jsonl", lines())
    assert list(tmp_path.iterdir()) == []


# -- one scorer per output directory; scores and records one unit (issue 25) ----------------------------------

def _score_to(out, stored_rows, responses_path, **kwargs):  # noqa: ANN001, ANN202
    from trace_lib.scoring.score import run_scoring

    return run_scoring(PROTOCOL, stored_rows, responses_path, out, **kwargs)


@pytest.fixture
def response_file(tmp_path):
    rows = toy_rows(20, seed=1)
    return rows, write_response_file(tmp_path / "r.jsonl", model="m", seed=42, benchmark="mmstar", rows=rows,
                                     texts=toy_responses(rows, 0.5))


def test_a_second_scorer_on_one_directory_is_refused_in_one_line(tmp_path, response_file):
    from trace_lib.scoring.score import scoring_lock

    rows, path = response_file
    out = tmp_path / "out"
    _score_to(out, rows, path)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with scoring_lock(out):  # another scorer holds the directory
        with pytest.raises(InputError) as info:
            _score_to(out, rows, path)
    assert info.value.render() == (f"{out}: another process is scoring into this directory; wait for it to finish, "
                                   "or score into another directory")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # untouched, and no lock file left
    assert sorted(before) == ["records.jsonl", "scores.json"]


def test_a_scorer_that_fails_leaves_no_directory_and_no_summary_for_other_records(tmp_path, response_file,
                                                                                monkeypatch):
    import contextlib
    import hashlib

    from trace_lib.scoring import score as score_module

    rows, path = response_file
    out = tmp_path / "new" / "out"
    monkeypatch.setattr(score_module, "score_slice", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        _score_to(out, rows, path)
    assert not out.exists()  # the directory it created is gone again
    monkeypatch.undo()
    _score_to(out, rows, path)

    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = score_module.atomic_output

    @contextlib.contextmanager
    def full_disk(path, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - the disk fills mid-records
        with real(path, *args, **kwargs) as handle:
            def write(data):  # noqa: ANN001, ANN202
                raise OSError(28, "No space left on device")

            handle.write = write
            yield handle

    monkeypatch.setattr(score_module, "atomic_output", full_disk)
    with pytest.raises(OSError):
        _score_to(out, rows, path)
    # the failed write left the disk as it was: the old scores.json, naming the old records beside it
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert json.loads(before["scores.json"])["records"]["sha256"] == hashlib.sha256(
        before["records.jsonl"]).hexdigest()


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
@pytest.mark.parametrize("name", ["scores.json", "records.jsonl"])
def test_an_output_that_is_not_a_regular_file_is_refused_and_the_old_scores_kept(tmp_path, response_file, kind,
                                                                                    name):
    """Neither output is replaced when either is a FIFO or a link, and the old commit marker is not removed."""
    import os

    from trace_lib.errors import UsageError

    rows, path = response_file
    out = tmp_path / "out"
    _score_to(out, rows, path)
    target = out / name
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    else:
        (tmp_path / "elsewhere").write_text("keep")
        target.symlink_to(tmp_path / "elsewhere")
    before = {p.name: (p.is_fifo(), p.is_symlink(), None if p.is_fifo() else p.read_bytes()) for p in out.iterdir()}
    with pytest.raises(UsageError):
        _score_to(out, rows, path)
    assert {p.name: (p.is_fifo(), p.is_symlink(), None if p.is_fifo() else p.read_bytes())
            for p in out.iterdir()} == before
    assert (tmp_path / "elsewhere").exists() is (kind == "symlink")


@pytest.mark.parametrize("seed", [10 ** 40, -1])
def test_a_header_seed_out_of_range_is_one_line_before_anything_is_written(tmp_path, seed):
    from trace_lib.errors import InputError

    rows = toy_rows(5, seed=1)
    path = write_response_file(tmp_path / "r.jsonl", model="m", seed=42, benchmark="mmstar", rows=rows,
                               texts=toy_responses(rows, 0.5))
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    header["seed"] = seed
    path.write_text(json.dumps(header) + "\n" + "".join(lines[1:]), encoding="utf-8")
    with pytest.raises(InputError) as err:
        _score_to(tmp_path / "out", rows, path)
    assert err.value.field == "header.seed" and "wrong type or range" in str(err.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(30)
def test_a_fifo_at_the_scoring_lock_is_refused_and_left(tmp_path, response_file):
    """The lock file is opened without blocking and used only when it is a regular file: a FIFO there is an
    EEXIST error (the CLI's one line, exit 2) and is neither locked nor removed."""
    import errno
    import os

    rows, path = response_file
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / ".scoring.lock")
    with pytest.raises(OSError) as err:
        _score_to(out, rows, path)
    assert err.value.errno == errno.EEXIST and "not a regular lock file" in str(err.value)
    assert (out / ".scoring.lock").is_fifo() and sorted(p.name for p in out.iterdir()) == [".scoring.lock"]


def test_values_json_cannot_hold_are_recorded_as_their_text():
    from decimal import Decimal
    from pathlib import PurePosixPath

    record = RowScore("3", PurePosixPath("a/b.png"), 1.0, detail={"weight": Decimal("1.5")})
    assert record_to_dict(record)["extracted"] == "a/b.png"
    assert record_to_dict(record)["detail"] == {"weight": "1.5"}


def test_the_hint_names_the_first_missing_row_and_how_to_finish(stored):
    rows, responses = stored
    changed = [dict(r) for r in rows]
    for i in (3, 7):
        changed[i]["question"] += " (edited)"
    with pytest.raises(InputError) as err:
        responses_for_rows(changed, responses)
    assert "found 18" in err.value.message
    assert err.value.hint.startswith("first missing row 00000003:3:")
    assert "finish generation (it resumes), or pass the dataset the responses were generated from" in err.value.hint


def test_a_response_for_an_unknown_row_names_that_row_key(stored):
    rows, responses = stored
    with pytest.raises(InputError) as err:
        responses_for_rows(rows, responses + [replace(responses[-1], row_key="stray-key")])
    assert err.value.field == "row_key stray-key"
    assert err.value.hint == "the dataset changed since generation, or --dataset names another file"


def test_a_protocol_that_scores_another_benchmark_breaks_its_contract(stored):
    rows, _ = stored
    other = replace(PROTOCOL, score=lambda r, s, c: SliceScore("mathvista", 0.0, len(r), tuple(
        RowScore(str(i), None, 0.0) for i in range(len(r)))))
    with pytest.raises(RuntimeError, match=r"^protocol mmstar returned a score for 'mathvista'$"):
        score_slice(other, rows, [None] * 20, ScoringContext(seed=42))


def test_a_protocol_with_fewer_records_than_rows_breaks_its_contract(stored):
    rows, _ = stored
    short = replace(PROTOCOL, score=lambda r, s, c: SliceScore("mmstar", 0.0, len(r), tuple(
        RowScore(str(i), None, 0.0) for i in range(len(r) - 1))))
    with pytest.raises(RuntimeError, match="scored 20 rows with 19 records for 20 rows"):
        score_slice(short, rows, [None] * 20, ScoringContext(seed=42))


def test_a_missing_column_names_the_data_file_and_the_benchmark(stored):
    from trace_lib.errors import MissingColumn

    rows, _ = stored

    def missing(r, s, c):  # noqa: ANN001, ANN202
        raise MissingColumn("answer", index=3)

    with pytest.raises(InputError) as err:
        score_slice(replace(PROTOCOL, score=missing), rows, [None] * 20, ScoringContext(seed=42), source="MMStar.tsv")
    assert (err.value.file, err.value.field) == ("MMStar.tsv", "mmstar.rows[3].answer")


def test_a_missing_column_that_already_names_its_file_is_raised_as_it_is(stored):
    from trace_lib.errors import MissingColumn

    rows, _ = stored
    raised = MissingColumn("answer", index=3, file="own.tsv")

    def missing(r, s, c):  # noqa: ANN001, ANN202
        raise raised

    with pytest.raises(MissingColumn) as err:
        score_slice(replace(PROTOCOL, score=missing), rows, [None] * 20, ScoringContext(seed=42), source="MMStar.tsv")
    assert err.value is raised and err.value.field == "rows[3].answer"


def test_a_summary_counts_no_dropped_rows_unless_told(tmp_path, stored):
    from trace_lib.scoring.score import build_summary

    rows, responses = stored
    result = score_slice(PROTOCOL, rows, responses_for_rows(rows, responses), ScoringContext(seed=42))
    assert build_summary(result, PROTOCOL, seed=42, records_sha256="0" * 64)["dropped_rows"] == 0
    assert write_slice_scores(tmp_path / "out", result, PROTOCOL, seed=42).summary["dropped_rows"] == 0
    told = write_slice_scores(tmp_path / "told", result, PROTOCOL, seed=42, dropped_rows=2)
    assert json.loads(told.scores_path.read_text())["dropped_rows"] == 2


def test_records_are_written_with_sorted_keys_and_utf8_text(tmp_path):
    import hashlib

    records = (RowScore("0", "café", 1.0, detail={"z": 1, "a": "ü"}),
               RowScore("1", "naïve", 0.0, detail={"a": "ü", "z": 1}))
    scored = write_slice_scores(tmp_path / "out", SliceScore("mmstar", 50.0, 2, records), PROTOCOL, seed=42)
    data = scored.records_path.read_bytes()
    assert data.decode("utf-8").splitlines() == [
        '{"detail": {"a": "ü", "z": 1}, "extracted": "café", "fallback": false, "index": "0", "judge_calls": 0, '
        '"score": 1.0}',
        '{"detail": {"a": "ü", "z": 1}, "extracted": "naïve", "fallback": false, "index": "1", "judge_calls": 0, '
        '"score": 0.0}',
    ]
    assert scored.summary["records"]["sha256"] == hashlib.sha256(data).hexdigest()


def test_a_rescore_into_a_scored_directory_leaves_only_the_two_files(tmp_path, stored):
    rows, responses = stored
    out = tmp_path / "out"
    texts = responses_for_rows(rows, responses)
    write_slice_scores(out, score_slice(PROTOCOL, rows, texts, ScoringContext(seed=42)), PROTOCOL, seed=42)
    again = write_slice_scores(out, score_slice(PROTOCOL, rows, texts, ScoringContext(seed=43)), PROTOCOL, seed=43)
    assert sorted(p.name for p in out.iterdir()) == ["records.jsonl", "scores.json"]
    assert json.loads(again.scores_path.read_text())["seed"] == 43


def test_a_failed_rename_of_the_new_receipt_leaves_the_new_records_without_the_old_receipt(tmp_path, stored,
                                                                                           monkeypatch):
    """The old scores.json is moved aside before the records are replaced: once they are, a failure leaves the
    slice unscored (no receipt naming other records) and no temp file."""
    import errno
    import os

    rows, responses = stored
    out = tmp_path / "out"
    texts = responses_for_rows(rows, responses)
    first = write_slice_scores(out, score_slice(PROTOCOL, rows, texts, ScoringContext(seed=42)), PROTOCOL, seed=42,
                               identity={"model": "m"})
    real_replace = os.replace

    def failing_replace(src, dst):  # noqa: ANN001, ANN202
        if str(dst) == str(first.scores_path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_replace(src, dst)

    changed = replace(PROTOCOL.score(rows, texts, ScoringContext(seed=43)), records=tuple(
        replace(r, detail={"rescored": True}) for r in first.score.records))
    monkeypatch.setattr("trace_lib.atomic.os.replace", failing_replace)
    with pytest.raises(OSError):
        write_slice_scores(out, changed, PROTOCOL, seed=43, identity={"model": "m"})
    monkeypatch.undo()
    assert sorted(p.name for p in out.iterdir()) == ["records.jsonl"]
    assert all(json.loads(line)["detail"] == {"rescored": True}
               for line in first.records_path.read_text().splitlines())


def test_scores_live_under_scoring_seed_model_benchmark(tmp_path):
    from trace_lib.scoring.score import scores_dir

    expected = tmp_path / "scoring" / "seed_43" / "m" / "mmstar"
    assert scores_dir(tmp_path, model="m", seed=43, benchmark="mmstar") == expected


def _with_header(path, **fields):  # noqa: ANN001, ANN003, ANN202
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    header.update(fields)
    path.write_text(json.dumps(header) + "\n" + "".join(lines[1:]), encoding="utf-8")
    return path


def test_a_file_read_as_another_seed_is_refused_before_anything_is_written(tmp_path, response_file):
    rows, path = response_file
    with pytest.raises(InputError) as err:
        _score_to(tmp_path / "out", rows, path, seed=43)
    assert (err.value.field, err.value.expected, err.value.found) == ("header.seed", 43, 42)
    assert err.value.message == "the response file holds another seed than the slice it is read as"
    assert not (tmp_path / "out").exists()
    assert _score_to(tmp_path / "out", rows, path, seed=42, model="m").summary["seed"] == 42


def test_a_file_read_as_another_model_is_refused(tmp_path, response_file):
    rows, path = response_file
    with pytest.raises(InputError) as err:
        _score_to(tmp_path / "out", rows, path, model="other")
    assert (err.value.field, err.value.expected, err.value.found) == ("header.model", "other", "m")
    assert err.value.message == "the response file holds another model than the slice it is read as"


def test_another_benchmarks_responses_are_refused(tmp_path):
    rows = toy_rows(5, seed=1)
    path = write_response_file(tmp_path / "r.jsonl", model="m", seed=42, benchmark="mathvista", rows=rows,
                               texts=toy_responses(rows, 0.5))
    with pytest.raises(InputError) as err:
        _score_to(tmp_path / "out", rows, path)
    assert (err.value.field, err.value.expected, err.value.found) == ("header.benchmark", "mmstar", "mathvista")
    assert err.value.message == "responses belong to another benchmark"


def test_responses_from_random_weights_are_marked_in_the_summary(tmp_path, response_file):
    rows, path = response_file
    plain = _score_to(tmp_path / "plain", rows, path)
    assert "random_weights" not in plain.summary
    marked = _score_to(tmp_path / "out", rows, _with_header(path, engine={"random_weights": True}))
    assert json.loads(marked.scores_path.read_text())["random_weights"] is True
