"""A row's prompt as its protocol builds it, with a bad cell named where the user can find it.

A protocol's ``build_prompt`` raises :class:`~trace_lib.errors.InputError` for a cell it cannot use (an image that
does not decode, a list literal that does not parse) naming only ``rows[<index>].<column>``: the row does not know
the file it came from. :func:`build_row_prompt` adds the benchmark and the data file, so every caller (generation,
``prepare-data``) prints ``<data file>: <benchmark>.rows[<index>].<column>: ...``.
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
        field = exc.field or ""
        if not (field == protocol.key or field.startswith((f"{protocol.key}.", f"{protocol.key}["))):
            field = f"{protocol.key}.{field}" if field else protocol.key
        raise InputError(exc.message, file=None if source is None else str(source), field=field,
                         expected=exc.expected, found=exc.found, hint=exc.hint) from None
