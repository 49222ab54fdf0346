"""Read one slice of a trace-repro campaign directory into a :class:`~trace_lib.diagnose.views.SliceView`.

Responses come from the generation store (``generation/seed_<S>/<model>/<benchmark>.jsonl``), extractions and
row credits from the scoring records (``scoring/seed_<S>/<model>/<benchmark>/records.jsonl``) and the slice score
from ``scores.json`` beside them. An unscored slice still diagnoses its prompt and sampling stages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trace_lib.archive.extraction_form import extraction_key
from trace_lib.archive.hashes import prompt_sha256
from trace_lib.diagnose.views import RowView, SliceKey, SliceView
from trace_lib.decoding import ascii_digits, check_input_file, read_text
from trace_lib.errors import InputError
from trace_lib.jsonio import loads_strict
from trace_lib.release.load import sha256_file
from trace_lib.scoring.plain_responses import indexed_records

NAMESPACE = "trace-repro-request-v1"


def campaign_slice_keys(campaign_root: Path) -> list[SliceKey]:
    """Every slice with a response file under ``campaign_root``, sorted by model, seed, benchmark."""
    keys = []
    for path in sorted((Path(campaign_root) / "generation").glob("seed_*/*/*.jsonl")):
        seed_text = path.parent.parent.name.removeprefix("seed_")
        if ascii_digits(seed_text):
            keys.append(SliceKey(path.parent.name, int(seed_text), path.stem))
    return sorted(keys, key=lambda k: (k.model, k.seed, k.benchmark))


def load_campaign_slice(campaign_root: Path, key: SliceKey) -> SliceView | None:
    """The slice ``key`` of the campaign at ``campaign_root``, or ``None`` when it has no response file.

    Raises:
        InputError: a corrupt response, records or scores file.
    """
    from trace_lib.generation.store import read_response_file, response_path
    from trace_lib.scoring.score import RECORDS_FILE, SCORES_FILE, check_header_slice, scores_dir

    root = Path(campaign_root)
    path = response_path(root, model=key.model, seed=key.seed, benchmark=key.benchmark)
    if not path.is_file():
        return None
    # a file filed under another slice's path (seeds swapped) is refused, not compared as that slice
    header, stored_rows = read_response_file(path)
    check_header_slice(path, header, benchmark=key.benchmark, seed=key.seed, model=key.model)
    rows: dict[str, RowView] = {}
    for stored in stored_rows:
        rows[stored.index] = RowView(
            index=stored.index,
            prompt_sha256=prompt_sha256(stored.prompt) if stored.prompt else None,
            request_key=stored.request_hash,
            response=stored.response,
            finish_reason=stored.finish_reason,
            prompt_tokens=stored.prompt_tokens,
            completion_tokens=stored.completion_tokens,
        )
    score = None
    notes: list[str] = []
    out = scores_dir(root, model=key.model, seed=key.seed, benchmark=key.benchmark)
    if (out / SCORES_FILE).is_file() and (out / RECORDS_FILE).is_file():
        try:
            summary = loads_strict(read_text(out / SCORES_FILE))
            score = float(summary["score"])
            recorded = (summary.get("records") or {}).get("sha256")  # what trace-repro score wrote
        except (ValueError, KeyError, TypeError, AttributeError, InputError):
            raise InputError("unreadable slice score", file=str(out / SCORES_FILE), field="score") from None
        if recorded is not None and sha256_file(check_input_file(out / RECORDS_FILE)) != recorded:
            raise InputError("records.jsonl differs from the sha256 in scores.json", file=str(out / RECORDS_FILE),
                             hint="re-run 'trace-repro score' for this slice")
        for _, record in indexed_records(out / RECORDS_FILE):
            index = str(record["index"])
            if index not in rows:
                continue  # scored from another response file; the response stage reports the row as missing
            credit = record.get("score")
            rows[index] = _with_scoring(rows[index], record, credit)
    else:
        notes.append("not scored (no scores.json): extraction and score stages not compared")
    return SliceView(key=key, source=f"campaign {root}", rows=rows, score=score, request_namespace=NAMESPACE,
                     notes=tuple(notes))


def _with_scoring(row: RowView, record: dict[str, Any], credit: Any) -> RowView:
    from dataclasses import replace

    return replace(
        row,
        extracted=extraction_key(record.get("extracted")),
        used_judge=bool(record.get("judge_calls")),
        score=float(credit) if isinstance(credit, (int, float)) and not isinstance(credit, bool) else None,
    )
