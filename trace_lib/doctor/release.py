"""Which release the suite reads (a checkout, a data-only copy, or the bundled pinned snapshot)."""

from __future__ import annotations

from trace_lib.doctor.context import CheckResult, DoctorContext, Status
from trace_lib.errors import TraceReproError


def check_release(ctx: DoctorContext) -> CheckResult:
    try:
        release = ctx.release()
    except TraceReproError as exc:
        return CheckResult("release", Status.MISSING, exc.render(), missing="no usable TRACE release",
                           fix="trace-repro fetch-release --dest DIR, then pass --trace-root DIR")
    return CheckResult("release", Status.OK, f"{release.label} [{release.source}]")


def _checks():
    from trace_lib.doctor.registry import Check

    return (Check("release", "the TRACE release the tests read", check_release),)


CHECKS = _checks()
