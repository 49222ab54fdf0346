"""A campaign's credits (trace_lib.campaign.verdicts.campaign_credits): the aggregate's fields read from each
``records.jsonl`` ``detail`` are held to the same domains as a credits file's, naming the records file and row."""

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
