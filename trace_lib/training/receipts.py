"""The training receipts on disk: input (upstream's format), run and merge (verl port), and how they are written.

Every receipt is ``json.dumps(payload, indent=2, sort_keys=True)`` plus a newline (upstream's layout), written
atomically (temporary file + rename). ``read_receipt`` refuses a missing, malformed or foreign receipt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trace_lib.atomic import write_text_atomic
from trace_lib.errors import InputError, ReleaseFileError
from trace_lib.release.load import load_json

INPUT_RECEIPT = "input_receipt.json"
INPUT_SCHEMA = "trace-rlvr-input-receipt-v1"  # same format as upstream's rlvr/train.py prepare
RUN_RECEIPT = "run_receipt.json"
RUN_SCHEMA = "trace-repro-verl-run-receipt-v1"
MERGE_RECEIPT = "trace_merge_receipt.json"
MERGE_SCHEMA = "trace-repro-verl-merge-receipt-v1"


def receipt_text(payload: dict[str, Any]) -> str:
    return json.dumps(payload, indent=2, sort_keys=True) + "\n"


def write_receipt(path: Path, payload: dict[str, Any]) -> None:
    """Write ``receipt_text(payload)`` to ``path`` atomically."""
    write_text_atomic(path, receipt_text(payload))


def read_receipt(path: Path, schema: str) -> dict[str, Any]:
    """The receipt at ``path``, which must be a JSON object with ``schema_version == schema``.

    Raises:
        InputError: missing, malformed, not an object, or another schema.
    """
    try:
        doc = load_json(path)
    except ReleaseFileError as exc:
        raise InputError(f"cannot read receipt: {exc.message}", file=str(path)) from None
    if not isinstance(doc, dict):
        raise InputError("receipt must be a JSON object", file=str(path))
    if doc.get("schema_version") != schema:
        raise InputError("unexpected receipt schema", file=str(path), field="schema_version",
                         expected=schema, found=doc.get("schema_version"))
    return doc
