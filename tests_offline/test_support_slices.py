"""The benchmark tests' own support (tests_offline/slice_support.py): its checks can fail, and its files read back."""

from __future__ import annotations

from pathlib import Path

from slice_support import count_mismatches, write_responses


def test_count_mismatches_detects_a_wrong_aggregate() -> None:
    slices = [{"evaluated_rows": 4, "score": 75.0, "model_id": "m", "seed": 42}]
    assert count_mismatches(lambda hits: 100 * sum(hits) / len(hits), slices) == []
    assert count_mismatches(lambda hits: 100 * sum(hits) / (len(hits) + 1), slices) != []


def test_write_responses_round_trips_through_the_store(tmp_path: Path) -> None:
    from trace_lib.generation.store import load_responses

    rows = [{"index": 1, "question": "q", "image": "x"}]
    path = write_responses(tmp_path / "r.jsonl", "mmstar", rows, ["A"])
    assert [r.response for r in load_responses(path)] == ["A"]
