"""A row's prompt as its protocol builds it, with a bad cell named where the user can find it.

A protocol's ``build_prompt`` raises :class:`~trace_lib.errors.InputError` for a cell it cannot use (an image that
does not decode, a list literal that does not parse, a column the file lacks: ``errors.MissingColumn``) naming only
``rows[<index>].<column>``: the row does not know the file it came from. :func:`build_row_prompt` adds the benchmark
and the data file (:func:`name_data_file`), so every caller (generation, ``prepare-data``) prints
``<data file>: <benchmark>.rows[<index>].<column>: ...``; scoring names a missing column so too
(``scoring/score.py: score_slice``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from trace_lib.errors import InputError

if TYPE_CHECKING:
    from trace_lib.protocol import PromptItem, Protocol, Row


def build_row_prompt(
    protocol: Protocol, row: Row, image_dir: Path, *, source: str | os.PathLike[str] | None = None,
) -> list[PromptItem]:
    """``protocol.build_prompt(row, image_dir)``; an InputError that names no file is raised again naming ``source``
    (the data file the row was read from) and the benchmark before its field. One that names a file is kept."""
    try:
        return protocol.build_prompt(row, image_dir)
    except InputError as exc:
        if exc.file is not None:
            raise
        raise name_data_file(exc, protocol.key, source) from None


def name_data_file(exc: InputError, benchmark: str, source: str | os.PathLike[str] | None) -> InputError:
    """``exc`` (a bad cell, naming no file) as the line the user can act on: the data file ``source`` and
    ``<benchmark>.`` before its field (kept when the field already starts with the benchmark)."""
    field = exc.field or ""
    if not (field == benchmark or field.startswith((f"{benchmark}.", f"{benchmark}["))):
        field = f"{benchmark}.{field}" if field else benchmark
    return InputError(exc.message, file=None if source is None else str(source), field=field,
                      expected=exc.expected, found=exc.found, hint=exc.hint)
