"""Re-scoring archived responses (trace_lib.archive.rescore) through the live protocol code: an archive written from
a protocol's own scoring re-scores exactly, judge rows included through the replay judge; injected score
differences are named row by row; unreplayable judge requests void the score instead of being guessed."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from trace_lib.archive.reader import open_archive
from trace_lib.archive.rescore import EXACT, rescore_slice
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.benchmarks.registry import get_protocol
from trace_lib.data.rowhash import source_row_hash
from trace_lib.errors import InputError, JudgeError
from trace_lib.scoring.judge import CallableJudge
from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run

CHOICES = {"A": "a cat", "B": "a dog", "C": "a bird", "D": "a fish"}
ANSWERS = "ABCDABCD"
RESPONSES = ["A", "B", "the answer is C", "A", "B and C", "C", "(C)", "D"]  # row 4 needs the judge (fallback route)
JUDGE_SAYS = "B"


def _rows() -> list[dict]:
    return [{"index": 10 + i, "question": f"What is in picture {i}?", **CHOICES, "answer": a,
             "category": "coarse perception", "l2-category": "scene"} for i, a in enumerate(ANSWERS)]


def _paper_slice(rows, *, judged=True, tamper_row=None):  # noqa: ANN001, ANN202
    """Score with the protocol and a judge answering JUDGE_SAYS, and write what the paper archive would hold."""
    protocol = get_protocol("mmstar")
    judge = CallableJudge(lambda *_: JUDGE_SAYS)
    result = protocol.score(rows, RESPONSES, ScoringContext(seed=42, judge=judge))
    samples = []
    for i, (row, rec) in enumerate(zip(rows, result.records)):
        used = judged and rec.judge_calls > 0
        score = rec.score if i != tamper_row else 1.0 - rec.score
        samples.append(SampleSpec(str(row["index"]), i, source_row_hash(row), f"prompt {i}", RESPONSES[i],
                                  extraction_value=rec.extracted, judge_output=JUDGE_SAYS if used else None,
                                  score=score))
    return protocol, result, samples


@pytest.fixture
def rows():
    return _rows()


def _archive(tmp_path: Path, samples, aggregate: float):  # noqa: ANN001, ANN202
    write_archive_run(tmp_path / "runs" / "r", "r", [SliceSpec("m", 42, "mmstar", tuple(samples), aggregate)])
    archive = open_archive(tmp_path)
    return archive, archive.find("m", 42, "mmstar")


def test_exact_rescore_with_the_replay_judge(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert out.ok and out.score == paper.score and out.judge_mode == "replay"
    assert (out.score_agree, out.score_compared) == (8, 8) and out.first_diffs == ()
    assert (out.replay.recorded, out.replay.keyed, out.replay.missing_count, out.replay.served) == (1, 1, 0, 1)
    assert dict(out.properties())["verdict"] == "exact"


def test_a_differing_canonical_fails_the_exact_check(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score + 1e-6)
    assert not out.ok and "vs canonical" in out.explain()


def test_injected_row_score_difference_is_named(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows, tamper_row=5)
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert (out.score_agree, out.score_compared) == (7, 8)
    assert [(d.source_index, d.stage) for d in out.first_diffs] == [("15", "score")]
    assert "score@15" in out.explain()


def test_judge_request_without_a_recorded_output_voids_the_score(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows, judged=False)
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert out.score is None and not out.ok
    assert out.replay.missing_count == 1 and "without a recorded output" in out.replay.explain()
    assert "not re-scored" in out.explain() and "pass --judge-url" in out.explain()


def test_live_judge_is_used_when_given(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows, judged=False)
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score,
                        judge=CallableJudge(lambda *_: JUDGE_SAYS))
    assert out.ok and out.judge_mode == "live" and out.replay is None


def test_dataset_rows_differing_from_the_archive_are_refused(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    archive, key = _archive(tmp_path, samples, paper.score)
    edited = [dict(r) for r in rows]
    edited[3] = {**edited[3], "question": "edited"}
    with pytest.raises(InputError, match="1 dataset row\\(s\\) without an archived response"):
        rescore_slice(archive, key, protocol, edited, canonical=paper.score)


def test_replay_counts_conflicting_and_multi_prompt_rows_instead_of_guessing():
    from trace_lib.archive.replay_judge import build_replay

    def score_one(row, response, judge):  # noqa: ANN001, ANN202 - asks one prompt per row, two for row "m"
        judge.chat([f"judge {row['q']} {response}"])
        if row["q"] == "m":
            judge.chat([f"second {response}"])

    rows = [{"q": "same"}, {"q": "same"}, {"q": "m"}, {"q": "solo"}]
    judge = build_replay(rows, ["r", "r", "r", "r"], [("0", "B"), ("1", "C"), ("2", "A"), ("3", "D")], score_one)
    stats = judge.stats
    assert (stats.recorded, stats.keyed, stats.conflict, stats.multi_prompt) == (4, 2, ["1"], ["2"])
    assert [r.text for r in judge.chat(["judge solo r"])] == ["D"]
    replies = judge.chat(["judge same r", "judge same r"])  # the conflicting prompt is dropped, never guessed
    assert [r.ok for r in replies] == [False, False] and stats.missing_count == 1 and not stats.complete


def test_a_half_credit_row_difference_is_a_difference(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    samples[5] = replace(samples[5], score=abs(samples[5].score - 0.5))
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert (out.score_agree, out.score_compared) == (7, 8) and out.first_diffs[0].source_index == "15"


def test_archived_rows_the_dataset_does_not_have_are_refused(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    extra = replace(samples[0], source_index="99", source_ordinal=8, source_row_sha256="e" * 64)
    archive, key = _archive(tmp_path, [*samples, extra], paper.score)
    with pytest.raises(InputError, match="0 dataset row\\(s\\) without an archived response, 1 archived row\\(s\\) "
                                         "not in the dataset"):
        rescore_slice(archive, key, protocol, rows, canonical=paper.score)


class _AsksAnUnrecordedPrompt:
    """mmstar, but every scoring also asks the judge one prompt the archive never recorded and ignores the failed
    reply (a protocol that does not raise on a failed judge call)."""

    def __init__(self, inner):  # noqa: ANN001
        self.inner = inner

    def __getattr__(self, name):  # noqa: ANN001, ANN204
        return getattr(self.inner, name)

    def score(self, rows, responses, context):  # noqa: ANN001, ANN201
        context.judge.chat([f"unrecorded {rows[0]['index']}"])
        return self.inner.score(rows, responses, ScoringContext(seed=context.seed,
                                                                judge=CallableJudge(lambda *_: JUDGE_SAYS)))


def test_an_incomplete_replay_voids_the_score_even_when_scoring_succeeds(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, _AsksAnUnrecordedPrompt(protocol), rows, canonical=paper.score)
    assert not out.replay.complete and out.score is None and not out.ok


def test_a_recorded_vlmevalkit_failure_text_replays_as_a_failed_call():
    from trace_lib.archive.replay_judge import ReplayJudge, ReplayStats
    from trace_lib.scoring.judge import VLMEVAL_FAIL_MSG

    judge = ReplayJudge({(None, "p"): VLMEVAL_FAIL_MSG, (None, "q"): "B"}, ReplayStats())
    failed, good = judge.chat(["p", "q"])
    assert (failed.ok, good.ok, good.text) == (False, True, "B")


def test_a_failing_live_judge_raises_instead_of_voiding_the_score(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    archive, key = _archive(tmp_path, samples, paper.score)

    def down(*_):  # noqa: ANN202
        raise JudgeError("judge endpoint down")

    with pytest.raises(JudgeError, match="judge endpoint down"):
        rescore_slice(archive, key, protocol, rows, canonical=paper.score, judge=CallableJudge(down))


def test_a_delta_of_exactly_the_tolerance_is_exact_and_one_ulp_more_is_not(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    edge = replace(out, score=0.0, canonical=EXACT)
    assert abs(edge.delta) == EXACT and edge.ok
    assert not replace(out, score=0.0, canonical=math.nextafter(EXACT, 1.0)).ok


def test_extraction_agreement_counts_each_compared_row_once_by_default(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    samples[1] = replace(samples[1], extraction_value="D")
    samples[2] = replace(samples[2], extraction_status="ambiguous")
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert (out.extraction_agree, out.extraction_compared, out.extraction_note) == (6, 7, None)
    props = dict(out.properties())
    assert props["rows_extraction_agree"] == "6/7" and "extraction_compared" not in props


def test_only_the_first_five_differing_rows_are_kept(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    samples[:6] = [replace(s, score=1.0 - s.score) for s in samples[:6]]
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert (out.score_agree, out.score_compared) == (2, 8)
    assert [d.source_index for d in out.first_diffs] == ["10", "11", "12", "13", "14"]


def test_excluded_and_unscored_rows_are_not_compared(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    samples[3] = replace(samples[3], excluded=True, score=1.0 - samples[3].score)
    samples[4] = replace(samples[4], score=None)
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert (out.score_agree, out.score_compared, out.first_diffs) == (6, 6, ()) and out.ok


def test_a_voided_slice_compares_no_rows(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows, judged=False)
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert out.score is None and (out.rows, out.first_diffs) == (8, ())
    assert (out.score_agree, out.score_compared, out.extraction_agree, out.extraction_compared) == (0, 0, 0, 0)
    props = dict(out.properties())
    assert (props["rows_score_agree"], props["rows_extraction_agree"]) == ("0/0", "0/0")


def test_the_row_mismatch_refusal_names_the_file_the_slice_the_counts_and_the_first_missing_row(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    archive, key = _archive(tmp_path, samples, paper.score)
    edited = [dict(r, question="edited") if i in (2, 5) else r for i, r in enumerate(rows)]
    first = f"00000002:12:{source_row_hash(edited[2])[:16]}"
    with pytest.raises(InputError) as err:
        rescore_slice(archive, key, protocol, edited, canonical=paper.score, dataset="data/mmstar.tsv")
    assert str(err.value) == (
        "data/mmstar.tsv: the archive's rows differ from the dataset for m-seed42-mmstar: 2 dataset row(s) without "
        f"an archived response, 2 archived row(s) not in the dataset; first: {first}; the dataset is not the "
        "paper's (prepare-data at the pinned revision) or rows were edited")


def test_an_extraction_only_divergence_is_listed_and_makes_the_slice_differ(tmp_path, rows):
    """Row 10's archived extraction is edited and its score is not: the score stays exact, the extraction is the
    first differing row and the slice's verdict is ``differs``."""
    protocol, paper, samples = _paper_slice(rows)
    samples[0] = replace(samples[0], extraction_value="D")
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert out.ok and not out.extractions_agree and (out.score_agree, out.score_compared) == (8, 8)
    assert [d.render() for d in out.first_diffs] == ["extraction@10: archive 'D' vs trace-repro 'A'"]
    assert dict(out.properties())["verdict"] == "differs"
    assert "7/8 extractions agree; first differing rows: extraction@10" in out.explain()


def test_row_score_differences_that_cancel_make_the_slice_differ(tmp_path, rows):
    """One credited row archived as 0 and one uncredited row as 1: the slice score is exact, the extractions agree,
    and still the verdict is ``differs`` with both rows listed."""
    protocol, paper, samples = _paper_slice(rows)
    right = next(i for i, r in enumerate(paper.records) if r.score == 1.0)
    wrong = next(i for i, r in enumerate(paper.records) if r.score == 0.0)
    for i in (right, wrong):
        samples[i] = replace(samples[i], score=1.0 - samples[i].score)
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert (out.ok, out.extractions_agree, out.row_scores_agree, out.exact) == (True, True, False, False)
    assert sorted(d.source_index for d in out.first_diffs) == sorted(samples[i].source_index for i in (right, wrong))
    assert dict(out.properties())["verdict"] == "differs" and "rows 6/8 scores" in out.explain()


def test_at_most_five_differing_rows_are_listed_and_each_is_a_receipt_property(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows)
    samples = [replace(s, score=1.0 - s.score) for s in samples]  # all 8 rows differ
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert out.score_agree == 0 and [d.source_index for d in out.first_diffs] == [s.source_index for s in samples[:5]]
    props = dict(out.properties())
    assert [props[f"first_diff[{i}]"] for i in range(5)] == [d.render() for d in out.first_diffs]
    assert "first_diff[5]" not in props
    _, _, samples = _paper_slice(rows)
    archive, key = _archive(tmp_path / "x", [replace(s, extraction_value="Z") for s in samples], paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert out.extraction_agree == 0 and [d.stage for d in out.first_diffs] == ["extraction"] * 5


def test_a_row_differing_in_both_stages_lists_both(tmp_path, rows):
    protocol, paper, samples = _paper_slice(rows, tamper_row=1)
    samples[1] = replace(samples[1], extraction_value="C")
    archive, key = _archive(tmp_path, samples, paper.score)
    out = rescore_slice(archive, key, protocol, rows, canonical=paper.score)
    assert [(d.stage, d.source_index) for d in out.first_diffs] == [("score", "11"), ("extraction", "11")]
