"""``trace-repro archive verify``: per slice, what a CPU proves (scores exact, rows identical in all eight hash
fields), which run answered and whether the release pins it, and what is left to a GPU; Markdown and JSON."""

from __future__ import annotations

import json

import pytest
from test_archive_lane import MODEL, RUN, _world

from trace_lib.archive.identity import HASH_FIELDS
from trace_lib.cli.main import main

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")


@pytest.fixture
def world(tmp_path):
    return _world(tmp_path)


def test_verify_reports_each_slice_in_json_and_markdown(world, tmp_path, capsys):
    release, archive, data = world
    out = tmp_path / "o"
    code = main(["archive", "verify", str(archive), "--trace-root", str(release), "--data-root", str(data), "--json",
                 "--out", str(out)])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc == json.loads((out / "archive-verify.json").read_text())
    by_id = {s["slice"]: s for s in doc["slices"]}
    good, tampered, heldout = (by_id[f"{MODEL}-seed{s}-mmstar"] for s in (42, 43, 44))
    assert (good["scores_exact"], good["identity_ok"], good["rows_identical"], good["run_id"],
            good["source_artifact"]) == (True, True, "5/5", RUN, "yes")
    assert tuple(good["fields"]) == HASH_FIELDS and good["left_to_gpu"].startswith("sampling")
    assert (tampered["scores_exact"], tampered["identity_ok"], tampered["rows_identical"]) == (True, False, "4/5")
    assert heldout["run_id"] == "heldout-x" and heldout["scores_exact"] is False
    assert heldout["problem"].endswith(f"is not the release's source artifact (expected run {RUN})")
    assert doc["proven"] == 1
    markdown = (out / "archive-verify.md").read_text()
    assert "proven on this CPU: 1/3 slices" in markdown and "left to a GPU: sampling" in markdown
    assert f"| {MODEL}-seed42-mmstar | {RUN} | yes | yes | " in markdown and "| 5/5 | 8 |" in markdown


def test_a_proven_selection_exits_zero_with_markdown_on_stdout(world, capsys):
    release, archive, data = world
    code = main(["archive", "verify", str(archive / "runs" / RUN), "--trace-root", str(release), "--data-root",
                 str(data), "--model-id", MODEL, "--seeds", "42"])
    printed = capsys.readouterr().out
    assert code == 0 and "proven on this CPU: 1/1 slices" in printed, printed


def test_bad_archive_and_empty_selection_are_one_line_errors(world, tmp_path, capsys):
    release, archive, data = world
    code = main(["archive", "verify", str(tmp_path / "nope"), "--trace-root", str(release)])
    err = capsys.readouterr().err
    assert code == 2 and "no archive run found" in err.splitlines()[0] and "Traceback" not in err
    code = main(["archive", "verify", str(archive), "--trace-root", str(release), "--benchmark", "wemath"])
    err = capsys.readouterr().err
    assert code == 2 and "matches no slice" in err.splitlines()[0]


@pytest.mark.parametrize("inside, what", [("archive/runs", "archive"), ("data/reports", "data root")])
def test_an_out_inside_what_it_reads_is_one_line_before_any_slice(world, tmp_path, capsys, monkeypatch, inside, what):
    """--out inside the archive or the data root is refused up front, naming --out; no slice is verified."""
    import trace_lib.archive.verify as archive_verify

    release, archive, data = world
    monkeypatch.setattr(archive_verify, "verify_slices", lambda *a: pytest.fail("verified before --out was checked"))
    out = tmp_path / inside
    code = main(["archive", "verify", str(archive), "--trace-root", str(release), "--data-root", str(data),
                 "--out", str(out)])
    tree = archive if what == "archive" else data
    assert (code, capsys.readouterr().err) == (2, (
        f"error: {out}: --out: lies inside the {what} this command reads ({tree}); outputs are never written into "
        "an input; name a directory outside it\n"))
    assert not (out / "archive-verify.md").exists()


def test_a_slice_whose_extractions_alone_differ_is_not_proven(tmp_path):
    """Scores exact, identity not checked, one archived extraction read differently: the slice's problem names the
    extraction, it is not proven, and the table shows the count in bold."""
    from types import SimpleNamespace

    from trace_lib.archive.lane import ArchiveSliceResult
    from trace_lib.archive.provenance import SourceCheck
    from trace_lib.archive.rescore import RescoreOutcome, RowDiff
    from trace_lib.archive.schema import SliceKey
    from trace_lib.archive.verify import render_markdown, verify_slices

    key = SliceKey(MODEL, 42, "mathverse")
    rescore = RescoreOutcome(key, 8, 62.5, 62.5, 62.5, 8, 8, 7, 8, (RowDiff("10", "extraction", "D", "A"),), "replay")
    result = ArchiveSliceResult(rescore, None, SourceCheck(RUN, "0" * 64, True, RUN), "no data root")
    lane = SimpleNamespace(blocker=lambda slice_: None, run=lambda slice_: result)
    [proof] = verify_slices(lane, [key])
    assert (proof.scores_exact, proof.extractions, proof.extractions_agree, proof.proven) == (True, "7/8", False,
                                                                                                False)
    assert "7/8 extractions agree; first differing rows: extraction@10: archive 'D' vs trace-repro 'A'" in (
        proof.problem)
    assert f"| {key.id} | {RUN} | yes | yes | 8/8 | **7/8** | 62.5000 |" in render_markdown([proof], archive="a")
    exact = ArchiveSliceResult(RescoreOutcome(key, 8, 62.5, 62.5, 62.5, 8, 8, 8, 8, (), "replay"), None,
                               result.source)
    assert exact.failure() is None


def test_a_slice_whose_row_scores_differ_but_cancel_is_not_proven():
    """The slice score exact because two rows' differences cancel (archive 1, 0; trace-repro 0, 1), extractions
    all agree: the verdict is "differs", the problem names both rows, the slice is not proven and the row-score
    count is bold."""
    from types import SimpleNamespace

    from trace_lib.archive.lane import ArchiveSliceResult
    from trace_lib.archive.provenance import SourceCheck
    from trace_lib.archive.rescore import RescoreOutcome, RowDiff
    from trace_lib.archive.schema import SliceKey
    from trace_lib.archive.verify import render_markdown, to_json, verify_slices

    key = SliceKey(MODEL, 42, "mathverse")
    diffs = (RowDiff("3", "score", 1.0, 0.0), RowDiff("5", "score", 0.0, 1.0))
    rescore = RescoreOutcome(key, 8, 62.5, 62.5, 62.5, 6, 8, 8, 8, diffs, "replay")
    assert (rescore.ok, rescore.row_scores_agree, rescore.extractions_agree, rescore.exact) == (True, False, True,
                                                                                               False)
    assert dict(rescore.properties())["verdict"] == "differs"
    result = ArchiveSliceResult(rescore, None, SourceCheck(RUN, "0" * 64, True, RUN), "no data root")
    assert "rows 6/8 scores and 8/8 extractions agree; first differing rows: score@3: archive 1.0 vs trace-repro " \
           "0.0; score@5: archive 0.0 vs trace-repro 1.0" in result.failure()
    [proof] = verify_slices(SimpleNamespace(blocker=lambda slice_: None, run=lambda slice_: result), [key])
    assert (proof.scores_exact, proof.row_scores, proof.row_scores_agree, proof.proven) == (True, "6/8", False,
                                                                                             False)
    assert f"| {key.id} | {RUN} | yes | yes | **6/8** | 8/8 | 62.5000 |" in render_markdown([proof], archive="a")
    assert to_json([proof], archive="a")["slices"][0]["row_scores"] == "6/8"
    unpinned = ArchiveSliceResult(rescore, None, SourceCheck("copy", "0" * 64, False, RUN), "no data root")
    assert "rows 6/8 scores" in unpinned.failure(), "a cancelling difference is explained on an unpinned run too"


def test_a_blocked_slice_is_not_run_a_slice_error_is_its_problem_and_a_run_id_error_raises():
    """A slice the lane blocks is reported "not checked: <blocker>" without running it; a slice whose run raises a
    TraceReproError carries the error's one line as its problem; an error naming --run-id (several runs hold the
    slice) is not a per-slice problem: verify_slices raises it."""
    from types import SimpleNamespace

    from trace_lib.archive.schema import SliceKey
    from trace_lib.archive.verify import SliceProof, verify_slices
    from trace_lib.errors import InputError, UsageError

    blocked, broken = SliceKey(MODEL, 42, "mathverse"), SliceKey(MODEL, 43, "mathverse")

    def run(slice_):
        assert slice_.seed == 43, "a blocked slice was run"
        raise InputError("rows differ from the dataset", file="MathVerse.tsv")

    lane = SimpleNamespace(blocker=lambda slice_: "dataset missing: mathverse" if slice_.seed == 42 else None, run=run)
    assert verify_slices(lane, [blocked, broken]) == [
        SliceProof(blocked.id, None, "-", problem="not checked: dataset missing: mathverse"),
        SliceProof(broken.id, None, "-", problem="MathVerse.tsv: rows differ from the dataset")]
    ambiguous = UsageError("held by 2 runs", field="--run-id")

    def held_twice(slice_):
        raise ambiguous

    with pytest.raises(UsageError) as info:
        verify_slices(SimpleNamespace(blocker=lambda slice_: None, run=held_twice), [broken])
    assert info.value is ambiguous


def test_an_exact_slice_whose_identity_was_not_checked_says_why_and_is_not_proven():
    """Scores and extractions exact but no identity report: the problem is "identity not checked: <why>", the rows
    and hash fields are "-", and an unpinned run's source artifact is its sentence (bold "no" in the table)."""
    from types import SimpleNamespace

    from trace_lib.archive.lane import ArchiveSliceResult
    from trace_lib.archive.provenance import SourceCheck
    from trace_lib.archive.rescore import RescoreOutcome
    from trace_lib.archive.schema import SliceKey
    from trace_lib.archive.verify import render_markdown, verify_slices

    key = SliceKey(MODEL, 42, "mathverse")
    source = SourceCheck("copy", "0" * 64, False, RUN)
    result = ArchiveSliceResult(RescoreOutcome(key, 8, 62.5, 62.5, 62.5, 8, 8, 8, 8, (), "replay"), None, source,
                                "no data root")
    [proof] = verify_slices(SimpleNamespace(blocker=lambda slice_: None, run=lambda slice_: result), [key])
    assert result.failure() is None and proof.problem == "identity not checked: no data root"
    assert (proof.scores_exact, proof.extractions_agree, proof.identity_ok, proof.proven) == (True, True, None, False)
    assert (proof.rows_identical, proof.fields, proof.not_compared, proof.notes) == (None, (), {}, ())
    assert (proof.run_id, proof.source_artifact) == ("copy", source.describe())
    markdown = render_markdown([proof], archive="a")
    assert f"| {key.id} | copy | **no** | yes | 8/8 | 8/8 | 62.5000 | 62.5000 | - | - |" in markdown
    assert f"\n- {key.id}: identity not checked: no data root\n- {key.id}: {source.describe()}\n" in markdown


def test_markdown_details_list_each_problem_unpinned_source_field_not_compared_and_note_of_only_those_slices():
    """The Details section has, per slice in order: its problem, and the sentence of a source artifact that is
    not the release's unless the problem already says it; then each hash field not compared (sorted by name) and
    each note. A clean slice adds nothing, and a table of only clean slices has no Details section. The source
    column is yes, "-" (not checked) or bold no."""
    from trace_lib.archive.verify import SliceProof, render_markdown

    proven = dict(scores_exact=True, row_scores="5/5", row_scores_agree=True, extractions="0/0",
                  extractions_agree=True, rows_identical="5/5",
                  identity_ok=True, fields=HASH_FIELDS)
    clean = SliceProof("s-clean", RUN, "yes", **proven)
    skipped = SliceProof("s-skipped", None, "-", problem="not checked: dataset missing")
    unpinned = SliceProof("s-unpinned", "copy", "this archive run (copy) is not the release's source artifact",
                          **proven)
    partial = SliceProof("s-partial", RUN, "yes", **dict(proven, fields=HASH_FIELDS[2:]),
                         not_compared={"source_row_sha256": "why row", "dataset_sha256": "why dataset"},
                         notes=("5 rows",))
    said = SliceProof("s-said", "copy", unpinned.source_artifact, problem="differs: " + unpinned.source_artifact)
    table, details = render_markdown([clean, skipped, unpinned, said, partial], archive="a").split(
        "\n## Details\n\n")
    assert details.splitlines() == [
        "- s-skipped: not checked: dataset missing",
        "- s-unpinned: this archive run (copy) is not the release's source artifact",
        "- s-said: differs: this archive run (copy) is not the release's source artifact",
        "- s-partial: dataset_sha256 not compared: why dataset",
        "- s-partial: source_row_sha256 not compared: why row",
        "- s-partial: note: 5 rows"]
    assert f"| s-clean | {RUN} | yes | yes | 5/5 | 0/0 |" in table and "| s-unpinned | copy | **no** | yes |" in table
    assert "| s-skipped | - | - | - | - | - | - | - | - | - |" in table and f"| 5/5 | {len(HASH_FIELDS) - 2} |" in table
    assert "## Details" not in render_markdown([clean], archive="a")
