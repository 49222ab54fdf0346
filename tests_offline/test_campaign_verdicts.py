"""A campaign's credits (trace_lib.campaign.verdicts.campaign_credits): the aggregate's fields read from each
``records.jsonl`` ``detail`` are held to the same domains as a credits file's, naming the records file and row;
slices not usable are left out; the archive's canonical credits, a test not judged yet and the verdict plan."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from trace_lib.errors import InputError
from trace_lib.slices import Slice

pytestmark = pytest.mark.offline

TRACE = "trace-qwen2.5-vl-3b"
SPLITS = ("fintabnetqa", "vtabfact", "vwtq", "vwtq_syn")


def _campaign(tmp_path, monkeypatch, exact_at_4):
    """One scored TableVQA-Bench slice: ``records.jsonl`` as the scorer writes it, but ``exact_score`` of index 4
    (a fintabnetqa row) set to ``exact_at_4``; the reader reports the slice scored and verified."""
    from trace_lib.reports import collect

    records = tmp_path / "records.jsonl"
    lines = []
    for i in range(8):
        detail = {"split": SPLITS[i % 4]}
        if detail["split"] == "fintabnetqa":
            detail["exact_score"] = exact_at_4 if i == 4 else 1
        lines.append(json.dumps({"index": str(i), "score": 1.0, "detail": detail}))
    records.write_text("\n".join(lines) + "\n")

    class Reader:  # the slice's receipt checks are collect's own tests; here: what its records become
        def __init__(self, root, rows):
            pass

        def score(self, key, *, protocol_versions=None):
            return SimpleNamespace(complete=True, score=50.0, path=str(tmp_path / "scores.json"))

    monkeypatch.setattr(collect, "CampaignReader", Reader)
    return records


def test_campaign_credits_refuse_a_detail_field_outside_its_domain(tmp_path, monkeypatch):
    from trace_lib.campaign.verdicts import campaign_credits

    records = _campaign(tmp_path, monkeypatch, 5)
    with pytest.raises(InputError) as refused:
        campaign_credits(tmp_path, [Slice(TRACE, 42, "tablevqabench")])
    assert str(refused.value) == (f"{records}: row 5 ({TRACE}, seed 42, tablevqabench, index 4).exact_score: value "
                                  "outside what tablevqabench's scorer writes (expected [0, 1], found 5)")


def test_campaign_credits_keep_what_the_scorer_writes(tmp_path, monkeypatch):
    from trace_lib.campaign.verdicts import campaign_credits

    _campaign(tmp_path, monkeypatch, 0)
    table, missing = campaign_credits(tmp_path, [Slice(TRACE, 42, "tablevqabench")])
    assert missing == [] and len(table) == 8 and list(table.extra["exact_score"]) == [1, None, None, None, 0, None,
                                                                                      None, None]


class _States:
    """A reader whose slices are in the states given (``key.seed`` -> (complete, score)); each scored one's
    records are those under ``tmp_path``."""

    def __init__(self, tmp_path, states):
        self.tmp_path, self.states = tmp_path, states

    def __call__(self, root, rows):
        return self

    def score(self, key, *, protocol_versions=None):
        complete, score = self.states[key.seed]
        return SimpleNamespace(key=key, complete=complete, score=score, path=str(self.tmp_path / "scores.json"))


def test_campaign_credits_leave_out_a_slice_incomplete_or_without_a_score(tmp_path, monkeypatch):
    from trace_lib.campaign.verdicts import campaign_credits
    from trace_lib.reports import collect

    (tmp_path / "records.jsonl").write_text("".join(json.dumps({"index": str(i), "score": 1.0}) + "\n"
                                                    for i in range(3)))
    monkeypatch.setattr(collect, "CampaignReader", _States(tmp_path, {42: (False, 50.0), 43: (True, None),
                                                                       44: (True, 100.0)}))
    table, missing = campaign_credits(tmp_path, [Slice(TRACE, s, "mmstar") for s in (42, 43, 44)])
    assert [m.key.seed for m in missing] == [42, 43]
    assert {(r["seed"], r["index"], r["credit"]) for r in table.to_records()} == {(44, str(i), 1.0) for i in range(3)}


def test_campaign_credits_name_the_records_line_without_a_score(tmp_path, monkeypatch):
    from trace_lib.campaign.verdicts import campaign_credits
    from trace_lib.reports import collect

    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"index": "0", "score": 1.0}) + "\n\n" + json.dumps({"index": "1"}) + "\n")
    monkeypatch.setattr(collect, "CampaignReader", _States(tmp_path, {42: (True, 50.0)}))
    with pytest.raises(InputError) as refused:
        campaign_credits(tmp_path, [Slice(TRACE, 42, "mmstar")])
    assert str(refused.value) == f"{records}: line 3.score: record has no score"


@pytest.mark.parametrize("n, shown", [
    (5, "s0 s1 s2 s3 s4"), (6, "s0 s1 s2 s3 s4 ..."),
], ids=["five", "six"])
def test_a_test_not_judged_yet_names_its_first_five_unscored_slices(n, shown):
    from trace_lib.campaign.verdicts import CampaignJudge

    judge = CampaignJudge.__new__(CampaignJudge)  # only the specs and what each cell misses matter here
    judge.specs = {"t": SimpleNamespace(cells=[("m", "b")])}
    judge.missing = lambda cell: [SimpleNamespace(id=f"s{i}") for i in range(n)]
    assert judge.judge("t") == f"t: {n} planned slice(s) not scored and verified yet: {shown}"


def test_verdict_plan_never_resolves_the_judge(release, monkeypatch):
    """Judging needs no judge: a release whose judge record is unusable still gives the plan's family."""
    from trace_lib.campaign import plan as plan_module
    from trace_lib.campaign.verdicts import verdict_plan
    from trace_lib.errors import ReleaseFileError

    def no_judge(release, root):
        raise ReleaseFileError("judge model is missing", file="results.json", field="judge_model")

    monkeypatch.setattr(plan_module, "release_judge", no_judge)
    plan = verdict_plan(release, model_ids=[TRACE], seeds=[42], benchmarks=["mmstar"])
    assert (plan.models, plan.seeds, plan.benchmarks) == ((TRACE,), (42,), ("mmstar",))


def _archive(tmp_path):
    """A fetched archive: row scores for seed 42 (index 2 excluded), only an aggregate for seed 43, a null row score
    for seed 44, every row excluded for seed 45, and slices of cells not asked for or not a plain mean."""
    from trace_lib.archive import hashes
    from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run

    def samples(scores, excluded=()):
        return tuple(SampleSpec(str(i), i, hashes.text_sha256(f"row{i}"), f"Question {i}?", "A", score=s,
                                excluded=i in excluded) for i, s in enumerate(scores))

    write_archive_run(tmp_path / "arch" / "runs" / "paper", "paper", [
        SliceSpec(TRACE, 42, "mmstar", samples([1.0, 0.0, 1.0], excluded={2}), 50.0),
        SliceSpec(TRACE, 43, "mmstar", samples([1.0, 0.0, 1.0]), 50.0, aggregate_only=True),
        SliceSpec(TRACE, 44, "mmstar", samples([1.0, None, 1.0]), 50.0),
        SliceSpec(TRACE, 45, "mmstar", samples([1.0, 1.0], excluded={0, 1}), 50.0),
        SliceSpec(TRACE, 42, "erqa", samples([1.0, 1.0]), 100.0),
        SliceSpec(TRACE, 42, "tablevqabench", samples([1.0, 1.0]), 100.0),
    ])
    return tmp_path / "arch"


def test_archive_credits_are_the_row_scores_of_the_cells_asked_for(tmp_path):
    from trace_lib.campaign.verdicts import archive_credits

    root = _archive(tmp_path)
    table = archive_credits(root, [(TRACE, "mmstar"), (TRACE, "tablevqabench")])
    assert [(r["model_id"], r["seed"], r["benchmark_id"], r["index"], r["credit"]) for r in table.to_records()] == [
        (TRACE, 42, "mmstar", "0", 1.0), (TRACE, 42, "mmstar", "1", 0.0)]
    assert table.source == str(root)
    assert archive_credits(root, [(TRACE, "tablevqabench"), ("other", "mmstar")]) is None
