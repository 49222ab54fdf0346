"""Plain response files: one ``{"index": ..., "response": "..."}`` JSON object per line, in any order.

This is how responses produced elsewhere (another harness, a published archive converted to JSONL) are scored
with ``trace-repro score``. Files that trace-repro generated carry an identity header and are read by
:mod:`trace_lib.generation.store` instead; :func:`is_store_file` tells the two apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Sequence

from trace_lib.protocol import Row
from trace_lib.errors import InputError
from trace_lib.jsonio import loads_strict, strict_error

#: Accepted names of the response text field, in order of preference.
TEXT_FIELDS = ("response", "prediction")


def indexed_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for each non-blank line of a JSONL file whose records are keyed by ``index``.

    Raises:
        InputError: a line that is not a JSON object with an ``index`` (naming the file and line).
    """
    from trace_lib.decoding import iter_lines

    for number, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            record = loads_strict(line)
        except ValueError as exc:  # not JSON, a repeated key, NaN/Infinity, nesting too deep
            raise InputError(f"not a JSON object: {strict_error(exc)}", file=str(path), field=f"line {number}") from None
        if not isinstance(record, dict) or "index" not in record:
            raise InputError("each line needs an 'index'", file=str(path), field=f"line {number}")
        yield number, record


def is_store_file(path: Path) -> bool:
    """True when the first line is a trace-repro store header (``{"kind": "header", ...}``), or is meant to be one
    but is corrupt (it names ``"kind"`` and ``"header"``): the store reader then reports what is wrong with it,
    instead of the file being taken for a plain one that needs ``--seed``. An empty file is one cut before its
    header ended (a plain file has a line per row)."""
    with open(path, "rb") as handle:
        first = handle.readline()
    if not first:
        return True
    try:
        record = loads_strict(first.decode("utf-8", errors="replace"))
    except ValueError:
        return b'"kind"' in first and b'"header"' in first
    return isinstance(record, dict) and record.get("kind") == "header"


def read_plain_responses(
    path: Path, rows: Sequence[Row], *, dropped: Callable[[], Collection[str]] | None = None
) -> tuple[list[str | None], int]:
    """The responses of ``path`` in dataset row order, matched on ``str(index)`` (null means no text), and how
    many lines answer rows the benchmark's loader drops (``dropped()``: their indices, asked once, lazily; upstream
    never scores such rows, e.g. VLMEvalKit's ``skip_noimg``).

    Raises:
        InputError: a line that is not an object with ``index`` and a text field, a repeated index, an index the
            dataset file does not hold at all, or a dataset row without a response (each names the file and line).
    """
    file = str(path)
    known_dropped: Collection[str] | None = None
    dropped_seen: set[str] = set()
    order = {str(row["index"]): i for i, row in enumerate(rows)}
    found: dict[int, str | None] = {}
    for number, record in indexed_records(path):
        present = [f for f in TEXT_FIELDS if f in record]
        if not present:
            raise InputError(f"each line needs one of {', '.join(TEXT_FIELDS)}", file=file, field=f"line {number}")
        if len(present) > 1:
            raise InputError(f"a line holds both {' and '.join(present)}: which is the answer?", file=file,
                             field=f"line {number}", hint="keep one text field per line")
        field = present[0]
        text = record[field]
        if text is not None and not isinstance(text, str):
            raise InputError("response must be a string or null", file=file, field=f"line {number}.{field}",
                             found=type(text).__name__)
        index = str(record["index"])
        if index not in order and dropped is not None:
            if known_dropped is None:
                known_dropped = dropped()
            if index in known_dropped:
                if index in dropped_seen:
                    raise InputError("second response for one index", file=file, field=f"line {number}.index",
                                     found=index)
                dropped_seen.add(index)
                continue
        if index not in order:
            raise InputError("index not in the dataset", file=file, field=f"line {number}.index", found=index,
                             hint="--dataset names another benchmark file?")
        position = order[index]
        if position in found:
            raise InputError("second response for one index", file=file, field=f"line {number}.index",
                             found=index)
        found[position] = text
    if len(found) != len(rows):
        first_missing = next(str(rows[i]["index"]) for i in range(len(rows)) if i not in found)
        raise InputError(f"responses do not cover the dataset (expected {len(rows)} rows, found {len(found)})",
                         file=file, hint=f"first missing index {first_missing}")
    return [found[i] for i in range(len(rows))], len(dropped_seen)
