"""The one input-decoding policy: every text file trace-repro reads is UTF-8 without a byte-order mark.

Invalid UTF-8 or a BOM is an :class:`~trace_lib.errors.InputError` naming the file and the byte offset, never a
``UnicodeDecodeError`` traceback and never a silent replacement character. Readers of text call :func:`read_text`
(a whole file) or :func:`decode` (bytes read at a known offset, e.g. one line of a JSONL file).
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Iterator

from trace_lib.errors import InputError, TraceReproError

_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def ascii_digits(text: str) -> bool:
    """``text`` is one or more ASCII digits, what ``int()`` reads as a plain number (``str.isdigit`` also takes
    ``²`` and other digits ``int()`` refuses)."""
    return text.isascii() and text.isdigit()


def decode(data: bytes, *, file: str | Path, offset: int = 0,
           error: type[TraceReproError] = InputError) -> str:
    """``data`` (found at byte ``offset`` of ``file``) as UTF-8 text.

    Raises:
        InputError (or ``error``): ``data`` starts the file with a byte-order mark, or is not valid UTF-8 (the
            message gives the file's byte offset of the first bad byte).
    """
    if offset == 0 and data.startswith(_BOMS):
        raise error("starts with a byte-order mark (byte offset 0); trace-repro reads UTF-8 without a BOM",
                    file=str(file), hint="save it as UTF-8 without BOM")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start:exc.end]
        raise error(f"not UTF-8 text at byte offset {offset + exc.start} (bytes {bad.hex(' ')})",
                    file=str(file), hint="save it as UTF-8") from None


def check_input_file(path: Path | str, *, name: str | None = None,
                     error: type[TraceReproError] = InputError) -> Path:
    """``path`` is a regular file (links followed), so reading it cannot block on a FIFO or a device.

    Raises:
        FileNotFoundError: it does not exist (callers name it their way).
        InputError (or ``error``): it is a directory, FIFO, socket or device.
    """
    import os
    import stat

    path = Path(path)
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        from trace_lib.outputs import kind

        raise error(f"is {kind(mode)}, not a regular file; trace-repro reads inputs from regular files",
                    file=name or str(path))
    return path


def read_text(path: Path | str, *, name: str | None = None, error: type[TraceReproError] = InputError) -> str:
    """The whole of ``path`` as UTF-8 text (:func:`decode`'s policy; messages name ``name`` or ``path``); OS
    errors propagate.

    Raises:
        InputError (or ``error``): a BOM or invalid UTF-8 (file and byte offset named).
    """
    path = check_input_file(path, name=name, error=error)
    return decode(path.read_bytes(), file=name or str(path), error=error)


def iter_lines(path: Path | str) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line of ``path`` (newline kept), decoded by :func:`decode`'s policy with
    the byte offset of each line, streaming."""
    offset = 0
    check_input_file(path)
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            yield number, decode(raw, file=path, offset=offset)
            offset += len(raw)
