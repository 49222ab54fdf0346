"""The ordered table of preflight check groups; ``trace-repro check``, its ``--help`` and the tests iterate it.

Each group module defines ``GROUP = CheckGroup(name, summary, run)``; ``run(ctx, out)`` records findings into
``out`` and never raises for bad release data. :func:`run_group` turns an unexpected exception into one finding
(with ``TRACE_REPRO_DEBUG=1`` it propagates), so the preflight always lists everything and never shows a traceback.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from trace_lib import options
from trace_lib.errors import InputError, UsageError
from trace_lib.preflight.context import CheckContext, GroupOutcome

#: Group modules in check order (upstream's preflight order, then train.py check's, then the pinned identity).
GROUP_MODULES: tuple[str, ...] = (
    "trace_lib.preflight.suite",
    "trace_lib.preflight.provenance",
    "trace_lib.preflight.results",
    "trace_lib.preflight.recompute",
    "trace_lib.preflight.receipts",
    "trace_lib.preflight.patches",
    "trace_lib.preflight.equivalence",
    "trace_lib.preflight.validation_release",
    "trace_lib.preflight.source_map",
    "trace_lib.preflight.profiles",
    "trace_lib.preflight.prompt_hash",
    "trace_lib.preflight.source_inventory",
    "trace_lib.preflight.identity",
)


@dataclass(frozen=True)
class CheckGroup:
    """One part of the release contract: a name (test id, ``--json`` key), a one-line summary and its check."""

    name: str
    summary: str
    run: Callable[[CheckContext, GroupOutcome], None]


def groups() -> tuple[CheckGroup, ...]:
    """Every check group, in order."""
    return tuple(importlib.import_module(name).GROUP for name in GROUP_MODULES)


def group(name: str) -> CheckGroup:
    """The group called ``name``.

    Raises:
        UsageError: no such group (the message lists the valid names).
    """
    for candidate in groups():
        if candidate.name == name:
            return candidate
    valid = ", ".join(g.name for g in groups())
    raise UsageError(f"unknown check group {name!r}", field="--group", hint=f"choose one of: {valid}")


def run_group(check: CheckGroup, ctx: CheckContext) -> GroupOutcome:
    """Run one group; an unexpected exception becomes a finding naming the group (never a traceback)."""
    out = GroupOutcome(check.name)
    try:
        check.run(ctx, out)
    except Exception as exc:  # noqa: BLE001 - the safety net of "all failures listed, never a traceback"
        if options.DEBUG_ENV.enabled():
            raise
        out.fail(
            f"preflight group {check.name}",
            f"stopped on unexpected release structure: {type(exc).__name__}: {exc}",
        )
    return out


def require_group(check: CheckGroup, ctx: CheckContext, *, error: type[InputError] = InputError) -> GroupOutcome:
    """Run one group for a caller that stops at the first failure (``validation verify``, the equivalence bridge).

    Raises:
        error: the group's first failure, as one line naming its file and field.
    """
    outcome = run_group(check, ctx)
    if outcome.failures:
        first = outcome.failures[0]
        raise error(first.message, file=first.file, field=first.field, expected=first.expected, found=first.found)
    return outcome
