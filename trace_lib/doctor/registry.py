"""The ordered table of doctor checks and the lanes that need them; ``trace-repro doctor`` and its tests iterate it.

Each check module defines ``CHECKS = (Check(name, summary, run), ...)``; ``run(ctx)`` returns a
:class:`~trace_lib.doctor.context.CheckResult` and never raises for a missing piece (an unexpected exception
becomes a ``missing`` result naming the check). To add a check: write a module with ``CHECKS``, list it in
:data:`CHECK_MODULES`, and name it in the :data:`LANES` that need it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from trace_lib import options
from trace_lib.doctor.context import CheckResult, DoctorContext, Status
from trace_lib.errors import UsageError

#: Check modules in report order.
CHECK_MODULES: tuple[str, ...] = (
    "trace_lib.doctor.python_env",
    "trace_lib.doctor.release",
    "trace_lib.doctor.extras",
    "trace_lib.doctor.cuda",
    "trace_lib.doctor.models",
    "trace_lib.doctor.datasets",
    "trace_lib.doctor.judge",
    "trace_lib.doctor.archive",
    "trace_lib.doctor.hf_token",
    "trace_lib.doctor.engine",
)


@dataclass(frozen=True)
class Check:
    """One fact about this machine: a name (``--json`` key, lane requirement), a one-line summary and its probe."""

    name: str
    summary: str
    run: Callable[[DoctorContext], CheckResult]


@dataclass(frozen=True)
class Lane:
    """A pytest lane / job and the checks it needs, in the order a newcomer would fix them."""

    name: str
    summary: str
    needs: tuple[str, ...]


_BASE = ("python", "release", "extra:test")
LANES: tuple[Lane, ...] = (
    Lane("offline", "pytest -m offline: preflight and unit tests", _BASE),
    Lane("cpu_model", "pytest -m cpu_model: tiny-model pipelines on CPU", (*_BASE, "extra:hf")),
    Lane("gpu", "pytest -m gpu: vLLM slices on a CUDA GPU", (*_BASE, "extra:eval", "cuda")),
    Lane("reproduction", "pytest -m reproduction: paper slices with the real models, data and judge",
         (*_BASE, "extra:eval", "cuda", "models", "datasets", "judge")),
    Lane("archive", "the published run archive", ("python", "release", "archive")),
    Lane("training", "trace-repro train: RLVR on verl", (*_BASE, "extra:train", "cuda")),
)

#: Checks every report carries whatever lanes were asked for (they never block a lane).
ALWAYS = ("python", "release", "hf_token", "engine", "workbook")


def checks() -> tuple[Check, ...]:
    """Every check, in report order."""
    return tuple(c for name in CHECK_MODULES for c in importlib.import_module(name).CHECKS)


def lane(name: str) -> Lane:
    """The lane called ``name``.

    Raises:
        UsageError: no such lane (the message lists the valid names).
    """
    for candidate in LANES:
        if candidate.name == name:
            return candidate
    raise UsageError(f"unknown lane {name!r}", field="--lane", hint=f"choose from: {', '.join(l.name for l in LANES)}")


def run_check(check: Check, ctx: DoctorContext) -> CheckResult:
    """Run one check; an unexpected exception becomes a ``missing`` result naming it (never a traceback)."""
    try:
        return check.run(ctx)
    except Exception as exc:  # noqa: BLE001 - the doctor always answers
        if options.DEBUG_ENV.enabled():
            raise
        return CheckResult(check.name, Status.MISSING, f"check stopped: {type(exc).__name__}: {exc}",
                           missing=f"{check.name} could not be checked", fix="TRACE_REPRO_DEBUG=1 trace-repro doctor")
