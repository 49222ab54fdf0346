"""Synthetic campaigns for tests and measurements: a toy deterministic MCQ protocol, its data files, and response
files in the real store format (``trace_lib.generation.store``), written without any model.

- :func:`toy_mcq_protocol` is *not* a benchmark protocol: it answers "the last standalone letter A-D of the
  response equals the row's ``answer``", percent of rows, for a suite key of your choice (register it with
  ``monkeypatch.setitem(registry.PROTOCOLS, key, ...)`` or pass it directly);
- :func:`write_toy_dataset` writes ``rows`` MCQ rows as JSONL (``index, question, A-D, answer``);
- :func:`toy_responses` makes responses hitting a given fraction of rows, deterministically;
- :func:`write_response_file` writes a slice's response file (header + one line per row) through the store.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore

_LETTER = re.compile(r"\b([A-D])\b")
TOY_REVISION = "0" * 40


def _load(path: Path) -> list[Row]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    options = "".join(f"{k}. {row[k]}\n" for k in "ABCD")
    return [PromptItem("text", f"Question: {row['question']}\nOptions:\n{options}Answer with the letter.")]


def extract_letter(response: str | None) -> str | None:
    """The last standalone capital A-D of a response (None when there is none)."""
    found = _LETTER.findall(response or "")
    return found[-1] if found else None


def _score_for(key: str):  # noqa: ANN202
    def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
        records = []
        hits = 0
        for row, response in zip(rows, responses):
            letter = extract_letter(response)
            hit = letter == row["answer"]
            hits += hit
            records.append(RowScore(index=str(row["index"]), extracted=letter, score=float(hit)))
        return SliceScore(benchmark=key, score=100.0 * hits / len(rows), rows=len(rows), records=tuple(records),
                          counts={"correct": hits})

    return score


def toy_mcq_protocol(key: str, *, judge: str = "none") -> Protocol:
    """A deterministic MCQ protocol for suite key ``key`` (see the module docstring)."""
    return Protocol(key=key, upstream="trace_lib.testing.synthetic_campaign", version="toy-mcq-1", load=_load,
                    build_prompt=_build_prompt, score=_score_for(key), judge=judge)  # type: ignore[arg-type]


def toy_rows(count: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` MCQ rows with indices ``0..count-1`` and a seeded answer letter."""
    rng = random.Random(seed)
    return [{"index": i, "question": f"Which option is right in item {i}?", "A": "one", "B": "two", "C": "three",
             "D": "four", "answer": rng.choice("ABCD")} for i in range(count)]


def write_toy_dataset(path: Path, count: int, *, seed: int = 0) -> Path:
    """Write :func:`toy_rows` as JSONL to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in toy_rows(count, seed=seed)), encoding="utf-8")
    return path


def toy_responses(rows: Sequence[Row], accuracy: float, *, seed: int = 0) -> list[str]:
    """One response per row; the first ``round(accuracy * len(rows))`` rows of a seeded shuffle are right."""
    rng = random.Random(seed)
    order = list(range(len(rows)))
    rng.shuffle(order)
    right = set(order[: round(accuracy * len(rows))])
    out = []
    for i, row in enumerate(rows):
        letter = row["answer"] if i in right else "ABCD"[("ABCD".index(row["answer"]) + 1) % 4]
        out.append(f"Counting carefully, the answer is {letter}.")
    return out


def write_response_file(
    path: Path,
    *,
    model: str,
    seed: int,
    benchmark: str,
    rows: Sequence[Row],
    texts: Sequence[str],
    model_revision: str = TOY_REVISION,
    contract: dict[str, Any] | None = None,
) -> Path:
    """Write a complete response file for one slice in the store format (header, then one line per row)."""
    from trace_lib.data.rowhash import row_key, source_row_hash
    from trace_lib.generation.store import SliceIdentity, SliceStore, StoredResponse

    identity = SliceIdentity(slice=f"{model}-seed{seed}-{benchmark}", model=model, model_revision=model_revision,
                             seed=seed, benchmark=benchmark, contract=contract or {"synthetic": True, "seed": seed})
    stored = []
    for ordinal, (row, text) in enumerate(zip(rows, texts)):
        row_hash = source_row_hash(row)
        stored.append(StoredResponse(
            row_key=row_key(ordinal, row["index"], row_hash), index=str(row["index"]), ordinal=ordinal,
            source_row_hash=row_hash, request_hash="0" * 64, response=text, finish_reason="stop",
            prompt_tokens=None, completion_tokens=None, model_revision=model_revision, backend="synthetic",
        ))
    with SliceStore.open(Path(path), identity) as store:
        store.append(stored)
    return Path(path)
