"""Shared fixtures-as-functions for the Science & Spatial benchmark tests: tiny TSVs, store-format response files,
the ``trace-repro score`` command, and the canonical slices of ``results.json`` (read at test time).

Imported by ``test_benchmarks_<key>.py`` and the archive tests (pytest's rootdir-prepend import mode puts this folder on ``sys.path``).
"""

from __future__ import annotations

import base64
import io
import json
import math
import subprocess
from pathlib import Path
from typing import Any, Callable, Sequence

from trace_lib.release import identity
from trace_lib.testing.cli_runner import run_cli


def tiny_png_b64(color: tuple[int, int, int] = (10, 20, 30)) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (4, 3), color).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def write_tsv(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """A VLMEvalKit-format TSV (``pandas.to_csv(sep='\\t')``, as the release's TSVs are read back)."""
    import pandas as pd

    pd.DataFrame(list(rows)).to_csv(path, sep="\t", index=False)
    return path


def write_responses(path: Path, key: str, rows: Sequence[dict[str, Any]], responses: Sequence[str],
                    *, seed: int = 42) -> Path:
    """A response file of the trace-repro store format for ``rows`` (as ``protocol.load`` returned them)."""
    from trace_lib.data.rowhash import row_key, source_row_hash
    from trace_lib.generation.store import SliceIdentity, SliceStore, StoredResponse

    ident = SliceIdentity(slice=f"test-model-seed{seed}-{key}", model="test-model", model_revision="r0", seed=seed,
                          benchmark=key)
    stored = []
    for ordinal, (row, text) in enumerate(zip(rows, responses)):
        digest = source_row_hash(row)
        stored.append(StoredResponse(row_key=row_key(ordinal, row["index"], digest), index=str(row["index"]),
                                     ordinal=ordinal, source_row_hash=digest, request_hash="0" * 64,
                                     response=text, finish_reason="stop", prompt_tokens=None,
                                     completion_tokens=None, model_revision="r0", backend="test"))
    with SliceStore.open(path, ident) as store:
        store.append(stored)
    return path


def run_score_cli(key: str, dataset: Path, responses: Path, out: Path, *, judge_url: str | None = None,
                  trace_root: str | None = None) -> subprocess.CompletedProcess[str]:
    """``trace-repro score --benchmark KEY --dataset FILE --responses FILE --out DIR --json``, in this process (a
    missing ``score`` subcommand fails the caller: argparse exits 2)."""
    command = ["score", "--benchmark", key, "--dataset", str(dataset), "--responses", str(responses),
               "--out", str(out), "--json"]
    if judge_url:
        command += ["--judge-url", judge_url]
    if trace_root:
        command += ["--trace-root", trace_root]
    return run_cli(command)


def canonical_slices(release: Any, key: str) -> list[dict[str, Any]]:
    """The ``results.json`` slice records (``scores.benchmark_scores``) of one benchmark."""
    records = release.read_json(identity.RESULTS)["scores"]["benchmark_scores"]
    return [r for r in records if r["benchmark_id"] == key]


def count_mismatches(aggregate: Callable[[list[int]], float], slices: Sequence[dict[str, Any]]) -> list[str]:
    """Slices whose canonical score is not what ``aggregate`` gives for the integer count it implies."""
    bad = []
    for record in slices:
        rows, canonical = record["evaluated_rows"], record["score"]
        correct = round(canonical * rows / 100)
        recomputed = aggregate([1] * correct + [0] * (rows - correct))
        if recomputed != canonical:
            bad.append(f"{record['model_id']}-seed{record['seed']}: {recomputed!r} != {canonical!r}")
    return bad


def isnan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def stub_reply(text: str) -> Callable[[str, dict[str, Any]], str]:
    """A responder for OpenAIStubServer answering ``text`` to every chat request (and ``ok`` to probes)."""
    return lambda route, body: text


def load_vectors(key: str) -> dict[str, Any]:
    return json.loads((Path(__file__).parent / "data" / key / "vectors.json").read_text(encoding="utf-8"))
