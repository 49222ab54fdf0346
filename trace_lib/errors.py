"""Every error trace-repro raises for a user mistake or bad input, and its one-line rendering.

The rendered form is ``FILE: FIELD: what is wrong (expected X, found Y); what to do``. Parts that do not apply
are left out. The CLI prints it after ``error:`` and exits with :class:`~trace_lib.exitcodes.ExitCode.USAGE`
(an ``OSError`` is rendered by :func:`os_error_line`, with the exit code :func:`~trace_lib.exitcodes.exit_code_for`
gives it);
inside pytest it becomes ``pytest.fail(..., pytrace=False)``. A traceback is shown only with
``TRACE_REPRO_DEBUG=1``.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

_UNSET: Any = object()


class TraceReproError(Exception):
    """Base of every expected failure; carries the parts of the one-line message as attributes.
    ``machine_failure``: the machine failed under the command (a GPU's memory, a dead engine), not the user's
    input: the CLI exits SYSTEM, not USAGE."""

    machine_failure: bool = False

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        field: str | None = None,
        expected: Any = _UNSET,
        found: Any = _UNSET,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.field = field
        self.expected = expected
        self.found = found
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        """The one-line message: ``FILE: FIELD: message (expected X, found Y); hint``.

        Parts that are ``None`` (file, field, hint) or :data:`UNSET` (expected, found) are left out.
        """
        parts = [_printable(str(p)) for p in (self.file, self.field) if p]  # a path with a newline stays one line
        text = self.message
        details = []
        if self.expected is not _UNSET:
            details.append(f"expected {_show(self.expected)}")
        if self.found is not _UNSET:
            details.append(f"found {_show(self.found)}")
        if details:
            text += f" ({', '.join(details)})"
        if self.hint:
            text += f"; {self.hint}"
        return ": ".join([*parts, text])


#: Marks an ``expected``/``found`` part that does not apply (``None`` is a value that can be expected).
UNSET: Any = _UNSET


def render_line(message: str, **parts: Any) -> str:
    """The one renderer of every error and preflight finding: the line of a :class:`TraceReproError` with
    ``message`` and these parts (``file``, ``field``, ``expected``, ``found``, ``hint``)."""
    return TraceReproError(message, **parts).render()


def _printable(text: str) -> str:
    """``text`` with each control character (a newline in a path ...) written as its escape, ``\\n``."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _show(value: Any) -> str:
    """Short values verbatim; long ones keep their head and tail (paths and reasons sit at the ends)."""
    text = repr(value)
    if len(text) <= 240:
        return text
    return text[:150] + " ... " + text[-80:]


def did_you_mean(word: str, choices: Sequence[str], *, n: int = 3, cutoff: float = 0.75) -> str:
    """The hint of an "unknown NAME" error: ``did you mean X?`` when some of ``choices`` is close to ``word``
    (difflib ratio >= ``cutoff``), else the known names (the first 12)."""
    import difflib

    close = difflib.get_close_matches(str(word), list(choices), n=n, cutoff=cutoff)
    if close:
        return f"did you mean {' or '.join(close)}?"
    known = sorted(set(choices))
    more = f" ... ({len(known)} in all)" if len(known) > 12 else ""
    return f"known: {', '.join(known[:12])}{more}"


def os_error_line(exc: OSError) -> str:
    """An OS error as one line: ``PATH: errno text (ENAME)`` (``PATH -> PATH2`` for a rename), or its text when
    it names no path."""
    import errno as _errno

    text = exc.strerror or str(exc) or type(exc).__name__
    code = _errno.errorcode.get(exc.errno or -1)
    if code:
        text += f" ({code})"
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    if not paths:
        return text
    return f"{' -> '.join(paths)}: {text}"


def symlink_loop_error(exc: RuntimeError) -> OSError | None:
    """Before Python 3.13, ``pathlib.Path.resolve`` reports a symbolic-link loop as ``RuntimeError("Symlink loop
    from 'PATH'")``: that error as the ``OSError`` (ELOOP) later versions raise; None for any other RuntimeError."""
    import ast
    import errno as _errno

    prefix = "Symlink loop from "
    text = str(exc)
    if type(exc) is not RuntimeError or not text.startswith(prefix):
        return None
    try:
        path = ast.literal_eval(text[len(prefix):])
    except (ValueError, SyntaxError):
        path = text[len(prefix):]
    return OSError(_errno.ELOOP, os.strerror(_errno.ELOOP), str(path))


class ReleaseNotFoundError(TraceReproError):
    """No TRACE release could be located."""


class ReleaseFileError(TraceReproError):
    """A release file is missing, unreadable or malformed (bad JSON/YAML, duplicate keys, NaN)."""


class InputError(TraceReproError):
    """A user-supplied file (dataset, responses, model directory, descriptor) violates its contract."""


class MissingColumn(InputError, KeyError):
    """A dataset row lacks a column its benchmark reads (:class:`trace_lib.protocol.DataRow`): one line naming the
    row and the column (the data file is named by whoever knows it: ``data/prompts.py: name_data_file``), never a
    ``KeyError`` traceback. Still a ``KeyError``, for code that looks a column up and handles its absence."""

    def __init__(self, column: Any, *, index: Any = None, file: str | None = None) -> None:
        self.column, self.index = column, index
        row = "rows" if index is None else f"rows[{index}]"
        super().__init__("column is missing from the data file (the benchmark reads it)", file=file,
                         field=f"{row}.{column}", hint="use the benchmark's own data file ('trace-repro prepare-data')")

    def __str__(self) -> str:  # KeyError's would quote the line
        return self.render()


class UsageError(TraceReproError):
    """Flags or options that cannot work together or name unknown things."""


class JudgeError(TraceReproError):
    """The judge endpoint is unreachable or keeps answering outside its contract (never a silent fallback)."""


class BackendError(TraceReproError):
    """A generation backend could not be created or failed permanently."""


class EngineStartError(BackendError):
    """A generation engine did not start. ``out_of_memory``: its GPU had less free memory than the engine asks for,
    the machine's state rather than the user's flags (the CLI exits SYSTEM; ``generate`` runs the share of a worker
    that failed so again once the other engines on its GPUs have exited)."""

    def __init__(self, message: str, *, out_of_memory: bool = False, **parts: Any) -> None:
        self.out_of_memory = out_of_memory
        super().__init__(message, **parts)

    @property
    def machine_failure(self) -> bool:  # type: ignore[override]
        return self.out_of_memory


class EngineStoppedError(BackendError):
    """A generation engine that had started stopped while it generated (vLLM's engine core died: most often CUDA
    out of memory once another process on its GPU grew). The machine's state: its slices keep what was stored and
    the CLI exits SYSTEM (``generate`` runs the worker's share again alone where engines share a GPU)."""

    machine_failure = True


class ProtocolNotImplementedError(TraceReproError):
    """A benchmark of the suite has no evaluation protocol in trace-repro yet; its slices fail, never pass."""
