"""What upstream's exporter can write, written with our writer: direct-route judge-call lists (``"[]"`` without a
call), official-route extraction values that are predictions, excluded rows, null finish reasons and token counts,
several runs under one root. Each is read, re-scored and diagnosed without charging a stage by form alone."""

from __future__ import annotations

import pytest

from trace_lib.archive.extraction_form import comparable, extraction_key
from trace_lib.archive.reader import open_archive
from trace_lib.archive.replay_judge import build_replay
from trace_lib.archive.rescore import rescore_slice
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.benchmarks.registry import get_protocol
from trace_lib.data.rowhash import source_row_hash
from trace_lib.scoring.judge import CallableJudge
from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run

MODEL = "trace-qwen2.5-vl-3b"
QUESTION = "Which shape comes next? A. circle B. square C. star D. moon"
RESPONSES = ["I pick B", "answer: A", "C", "hmm"]


def _rows() -> list[dict]:
    return [{"index": i, "image": "x", "question": QUESTION, "answer": "ABCD"[i], "skill": "inductive"}
            for i in range(4)]


def _write(tmp_path, bench: str, rows, responses, outputs, *, values=None, run="r", **sample_kw):  # noqa: ANN001, ANN202
    protocol = get_protocol(bench)
    result = protocol.score(rows, responses, ScoringContext(seed=42, judge=CallableJudge(lambda *_: "B")))
    samples = tuple(SampleSpec(str(r["index"]), i, source_row_hash(r), f"p{i}", resp, judge_output=out,
                               extraction_value=(rec.extracted if values is None else values[i]),
                               **{"score": rec.score, **sample_kw})
                    for i, (r, resp, rec, out) in enumerate(zip(rows, responses, result.records, outputs)))
    write_archive_run(tmp_path / "runs" / run, run, [SliceSpec(MODEL, 42, bench, samples, result.score)])
    return result


def test_direct_route_judge_call_lists_are_read_as_calls(tmp_path):
    rows = _rows()
    result = _write(tmp_path, "logicvista", rows, RESPONSES, ['["B"]', '["B"]', '["B","B"]', '["B"]'])
    archive = open_archive(tmp_path)
    key = archive.find(MODEL, 42, "logicvista")
    assert [a.judge_outputs() for a in archive.iter_slice(key)] == [("B",), ("B",), ("B", "B"), ("B",)]
    out = rescore_slice(archive, key, get_protocol("logicvista"), rows, canonical=result.score)
    assert out.ok and out.judge_mode == "replay" and out.replay.keyed == 4  # the list replays as "B", not as text


def test_recorded_calls_map_to_distinct_prompts_in_order_or_are_counted():
    def score_one(row, response, judge):  # noqa: ANN001, ANN202 - MathVerse-like: extract, then score the extraction
        extracted = judge.chat([f"extract {row['q']}"])[0].text
        if row["q"] != "one":
            judge.chat([f"score {extracted}"])

    rows = [{"q": "two"}, {"q": "one"}, {"q": "three"}]
    judge = build_replay(rows, ["r"] * 3, [("0", ("7", "1")), ("1", ("A", "B")), ("2", ("5", "0", "1"))], score_one)
    assert (judge.stats.keyed, judge.stats.multi_prompt) == (1, ["1", "2"])  # 1 prompt/2 calls, 2 prompts/3 calls
    assert [r.text for r in judge.chat(["extract two", "score 7"])] == ["7", "1"]


def test_official_route_values_are_predictions_not_compared(tmp_path):
    rows = _rows()
    protocol = get_protocol("realworldqa")
    rwq = [{"index": i, "question": f"What {i}? A. x B. y", "answer": "AB"[i % 2]} for i in range(4)]
    responses = ["A", "B.", "the answer is A", "B"]
    result = _write(tmp_path, "realworldqa", rwq, responses, [None] * 4, values=responses)  # value = prediction
    archive = open_archive(tmp_path)
    key = archive.find(MODEL, 42, "realworldqa")
    compared = rescore_slice(archive, key, protocol, rwq, canonical=result.score, compare_extraction=True)
    assert compared.extraction_agree < compared.extraction_compared  # forms differ: the count would be noise
    out = rescore_slice(archive, key, protocol, rwq, canonical=result.score,
                        compare_extraction=comparable("official_vlmevalkit"))
    assert out.ok and out.extraction_compared == 0
    assert dict(out.properties())["extraction_compared"].startswith("official route") and compared.extraction_note is None
    assert comparable("direct_score") and comparable("dedicated_score") and rows


@pytest.mark.parametrize(("a", "b"), [("3", 3), (3.0, "3"), (" 2.50", 2.5), (["A"], ("A",))])
def test_extraction_key_maps_forms_of_one_answer(a, b):
    assert extraction_key(a) == extraction_key(b)
    assert extraction_key("B") != extraction_key("C") and extraction_key("3") != extraction_key("3.5")


def test_excluded_rows_null_counts_and_two_runs(tmp_path):
    rows = _rows()
    _write(tmp_path, "logicvista", rows, RESPONSES, ['["B"]'] * 4, finish_reason=None, prompt_tokens=None,
           completion_tokens=None)
    rwq = [{"index": i, "question": f"What {i}? A. x B. y", "answer": "AB"[i % 2]} for i in range(4)]
    _write(tmp_path, "realworldqa", rwq, ["A", "B", "A", "B"], ["[]"] * 4, run="s", excluded=True, score=None)
    archive = open_archive(tmp_path)
    assert sorted(run.run_id for run in archive.runs) == ["r", "s"]
    first = next(archive.iter_slice(archive.find(MODEL, 42, "logicvista")))
    assert (first.finish_reason, first.prompt_tokens, first.completion_tokens) == (None, None, None)
    excluded = list(archive.iter_slice(archive.find(MODEL, 42, "realworldqa")))
    assert all(a.excluded and a.has_row_score and a.score_value is None for a in excluded)
    assert all(a.used_judge and a.judge_outputs() == () for a in excluded)  # "[]": marked used, no call


def test_diagnose_charges_no_extraction_on_official_route_predictions(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_diagnose_campaign_view import write_slice

    from trace_lib.diagnose.archive_view import ArchiveReference
    from trace_lib.diagnose.attribution import diagnose_slice
    from trace_lib.diagnose.campaign_view import load_campaign_slice
    from trace_lib.diagnose.views import SliceKey

    rwq = [{"index": i, "question": f"What {i}? A. x B. y", "answer": "AB"[i % 2]} for i in range(4)]
    responses = ["A", "B.", "the answer is A", "B"]
    result = _write(tmp_path / "a", "realworldqa", rwq, responses, [None] * 4, values=responses)
    key = SliceKey(MODEL, 42, "realworldqa")
    write_slice(tmp_path / "c", key, [{"index": str(i), "prompt": f"p{i}", "response": resp, "extracted": rec.extracted,
                                       "score": float(rec.score), "judge_calls": 0}
                                      for i, (resp, rec) in enumerate(zip(responses, result.records))],
                score=result.score)
    left = load_campaign_slice(tmp_path / "c", key)
    bare = diagnose_slice(left, ArchiveReference.open(tmp_path / "a").slice(key), band=None)
    routed = ArchiveReference.open(tmp_path / "a", routes={"realworldqa": "official_vlmevalkit"}).slice(key)
    d = diagnose_slice(left, routed, band=None)
    assert d.counts == {} and d.identical_rows == 4 and bare.counts == {}
    assert "official_vlmevalkit route" in d.not_comparable["extraction"] and "extraction" in bare.not_comparable
