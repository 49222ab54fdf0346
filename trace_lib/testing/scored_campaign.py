"""A tiny generated-and-judged campaign for the overlap tests (``tests_offline/test_cli_generate_overlap.py``): two suite
benchmarks with judge routes (MMStar's official route, whose judge runs where rule extraction fails; MathVista's
direct-score extraction), loopback model and judge stubs whose answers depend on the prompt only, the
``trace-repro generate`` command line of each design, and the campaign's outputs in a comparable form."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Sequence

MODEL_ID = "trace-qwen2.5-vl-3b"  # a release model: 'trace-repro score --campaign-root' plans it
SEED = 42
#: benchmark -> (data file under the data root, tiny_bench style)
BENCHMARKS = {"mmstar": ("MMStar.tsv", "mcq"), "mathvista": ("MathVista_MINI.tsv", "vqa")}
#: scores.json fields that name where or when, not what (paths, times, the judge's address, the responses' hash,
#: which covers the header's created_at)
VOLATILE = ("created_at", "inputs", "judge_url")


def build_data(data_root: Path, rows: int = 8) -> None:
    """The benchmarks' tiny TSVs under ``data_root``."""
    import pandas as pd

    from trace_lib.testing.tiny_bench import build_tiny_tsv

    for name, style in BENCHMARKS.values():
        path = build_tiny_tsv(Path(data_root) / name, style=style, rows=rows)
        if style == "vqa":  # MathVista's scorer reads these columns too
            frame = pd.read_csv(path, sep="\t")
            frame["task"], frame["skills"], frame["category"] = "figure question answering", "['counting']", "x"
            frame.to_csv(path, sep="\t", index=False)


def _text(body: dict[str, Any]) -> str:
    """The request's text parts (not its image paths: the answers do not depend on where the campaign lives)."""
    if "messages" in body:
        return json.dumps([item.get("text") for message in body["messages"] for item in message.get("content") or []
                           if isinstance(item, dict) and item.get("type") == "text"])
    return json.dumps(body.get("prompt"), sort_keys=True)


def model_answer(route: str, body: dict[str, Any], delay_s: float = 0.0) -> str:  # noqa: ARG001
    """The model stub: an answer rule extraction reads for some prompts, one it cannot read for others."""
    if delay_s:
        time.sleep(delay_s)
    digest = hashlib.sha256(_text(body).encode("utf-8")).digest()[0]
    return ("The answer is B.", "I cannot tell from the image.", "There are 5 of them.")[digest % 3]


def judge_answer(route: str, body: dict[str, Any], delay_s: float = 0.0) -> str:  # noqa: ARG001
    """The judge stub: a letter for the MCQ judge (chat), a number for the math extraction (completions)."""
    if delay_s:
        time.sleep(delay_s)
    return "B" if route == "chat/completions" else "5"


def generate_argv(release: Any, root: Path, model_url: str, *, score: str | None = None,
                  judge_url: str | None = None, extra: Sequence[str] = ()) -> list[str]:
    """``trace-repro generate`` of the campaign under ``root`` (``score``: ``overlap``, ``phased`` or None)."""
    root = Path(root)
    argv = ["generate", "--trace-root", str(release.path), "--model-id", MODEL_ID, "--model-root",
            str(root / "models"), "--seeds", str(SEED), "--campaign-root", str(root / "campaign"), "--data-root",
            str(root / "data"), "--backend", "openai", "--base-url", model_url, "--unprepared-data", "--no-progress",
            "--concurrency", "2", "--batch-size", "2"]
    for key in BENCHMARKS:
        argv += ["--benchmark", key]
    if score is not None:
        argv += ["--score", score, "--judge-url", str(judge_url)]
    return [*argv, *extra]


def score_argv(release: Any, root: Path, judge_url: str) -> list[str]:
    """``trace-repro score --campaign-root`` of the campaign under ``root`` (upstream's order, the reference)."""
    root = Path(root)
    argv = ["score", "--trace-root", str(release.path), "--campaign-root", str(root / "campaign"), "--data-root",
            str(root / "data"), "--model-id", MODEL_ID, "--seeds", str(SEED), "--judge-url", judge_url]
    for key in BENCHMARKS:
        argv += ["--benchmark", key]
    return argv


def stored_rows(root: Path) -> int:
    """Rows durably stored in the campaign's response files so far (a killed writer's torn line not counted)."""
    from trace_lib.generation.store import load_responses

    total = 0
    for path in (Path(root) / "campaign" / "generation").rglob("*.jsonl"):
        try:
            total += len(load_responses(path))
        except Exception:  # noqa: BLE001 - a file being created
            continue
    return total


def responses(root: Path) -> dict[str, list[tuple[str, str]]]:
    """Each response file's ``(row_key, response)`` pairs in file order (a row stored twice would show twice)."""
    from trace_lib.generation.store import load_responses

    campaign = Path(root) / "campaign"
    return {str(p.relative_to(campaign)): [(r.row_key, r.response) for r in load_responses(p)]
            for p in sorted((campaign / "generation").rglob("*.jsonl"))}


def scoring(root: Path) -> dict[str, Any]:
    """The scoring part of :func:`outputs` (records and scores: independent of where the campaign lives)."""
    return {k: v for k, v in outputs(root).items() if k.startswith("scoring/")}


def outputs(root: Path) -> dict[str, Any]:
    """What the campaign under ``root`` produced, comparable across runs: each response file's row lines (bytes,
    sorted: rows are stored in the order their answers arrive),
    each slice's ``records.jsonl`` (bytes) and ``scores.json`` without :data:`VOLATILE` fields."""
    campaign = Path(root) / "campaign"
    out: dict[str, Any] = {}
    for path in sorted((campaign / "generation").rglob("*.jsonl")):
        out[str(path.relative_to(campaign))] = sorted(path.read_bytes().split(b"\n")[1:])  # arrival order varies
    for path in sorted((campaign / "scoring").rglob("records.jsonl")):
        out[str(path.relative_to(campaign))] = path.read_bytes()
    for path in sorted((campaign / "scoring").rglob("scores.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        out[str(path.relative_to(campaign))] = {k: v for k, v in doc.items() if k not in VOLATILE}
    return out
