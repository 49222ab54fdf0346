"""Canonical JSON, the two hash conventions, atomic writers and strict readers of validation artifacts.

Canonical JSON is :func:`trace_lib.jsonio.canonical_json_utf8` (non-ASCII kept, unlike the evaluation release's
:func:`~trace_lib.jsonio.canonical_json_ascii`).
Upstream hashes it two ways (spec §A, conventions): :func:`h1` with a trailing newline (generation receipts, run
identities, API responses) and :func:`h0` without (judge request contracts). Every artifact is written through
:mod:`trace_lib.atomic` (temp file + ``fsync`` + rename), so an interrupted run never leaves a half-written file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from trace_lib.atomic import FileSet, staged_or_atomic, write_bytes_atomic, write_lines_atomic
from trace_lib.errors import InputError
from trace_lib.jsonio import DuplicateKey, NonFinite, canonical_json_utf8, json_object, loads_strict


def canonical_bytes(value: Any) -> bytes:
    """Canonical JSON + ``\\n`` as UTF-8: the line/file form of every artifact."""
    return (canonical_json_utf8(value) + "\n").encode("utf-8")


def h1(value: Any) -> str:
    """SHA-256 of the canonical JSON bytes *with* the trailing newline."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def h0(value: Any) -> str:
    """SHA-256 of the canonical JSON text *without* a trailing newline."""
    return sha256_text(canonical_json_utf8(value))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_bytes(path: Path, payload: bytes) -> str:
    """Atomically replace ``path`` with ``payload`` (:func:`trace_lib.atomic.write_bytes_atomic`); returns its
    SHA-256."""
    return write_bytes_atomic(path, payload)


def write_json(path: Path, value: Any, *, into: FileSet | None = None) -> str:
    """Atomically write ``value`` as canonical JSON bytes (or stage them ``into`` a file set); returns their
    SHA-256."""
    return _write(path, [canonical_bytes(value)], into)


def write_jsonl(path: Path, rows: Iterable[Any], *, into: FileSet | None = None) -> str:
    """Atomically write one canonical JSON line per row (streamed; or stage them ``into`` a file set); returns the
    SHA-256 of the file."""
    if into is None:
        return write_lines_atomic(path, (canonical_json_utf8(row) for row in rows))
    return _write(path, ((canonical_json_utf8(row) + "\n").encode("utf-8") for row in rows), into)


def write_text(path: Path, text: str, *, into: FileSet | None = None) -> str:
    """Atomically write ``text`` as UTF-8 (or stage it ``into`` a file set); returns its SHA-256."""
    return _write(path, [text.encode("utf-8")], into)


def _write(path: Path, chunks: Iterable[bytes], into: FileSet | None) -> str:
    digest = hashlib.sha256()
    with staged_or_atomic(path, into=into) as handle:
        for chunk in chunks:
            digest.update(chunk)
            handle.write(chunk)
    return digest.hexdigest()


def parse_strict(text: str, *, file: str, field: str | None = None) -> Any:
    """Strict JSON (duplicate keys, NaN/Infinity refused).

    Raises:
        InputError: naming ``file`` (and ``field``, e.g. ``line 7``) and what is wrong.
    """
    try:
        return loads_strict(text)
    except DuplicateKey as exc:
        raise InputError(f"duplicate key {exc.key!r}", file=file, field=field) from None
    except NonFinite as exc:
        raise InputError(f"non-finite constant {exc.name}", file=file, field=field) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg} at column {exc.colno})", file=file, field=field) from None
    except ValueError as exc:
        raise InputError(str(exc), file=file, field=field) from None


def read_text(path: Path) -> str:
    """The UTF-8 text of ``path``, read as every input is (``decoding.read_text``: a FIFO is never opened, a BOM or
    a byte that is not UTF-8 is named with its offset). Raises InputError (missing, unreadable, not UTF-8, or not a
    regular file)."""
    from trace_lib.decoding import read_text as read_input

    try:
        return read_input(path)
    except FileNotFoundError:
        raise InputError("file is missing", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read file ({exc.strerror or exc})", file=str(path)) from None


def read_json(path: Path) -> Any:
    """Strictly parse a JSON artifact. Raises InputError (missing, unreadable or malformed)."""
    return parse_strict(read_text(path), file=str(path))


def read_json_object(path: Path) -> dict[str, Any]:
    """:func:`read_json` of an artifact that is a JSON object (a receipt, run metadata, a summary). Raises
    InputError (as :func:`read_json`, or ``not a JSON object (found array)``)."""
    return json_object(read_json(path), file=str(path))


def read_jsonl(path: Path, *, allow_blank: bool = True) -> list[dict[str, Any]]:
    """Strictly parse a JSON Lines artifact of objects. Raises InputError naming the line."""
    text = read_text(path)
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            if allow_blank:
                continue
            raise InputError("blank line", file=str(path), field=f"line {number}")
        value = parse_strict(line, file=str(path), field=f"line {number}")
        if not isinstance(value, dict):
            raise InputError("line is not a JSON object", file=str(path), field=f"line {number}")
        rows.append(value)
    return rows
