"""The published run archive: a local directory given by ``--archive-root`` or ``TRACE_ARCHIVE_ROOT``.

A basic presence check; the archive lane's own specifics extend this module.
"""

from __future__ import annotations

from pathlib import Path

from trace_lib.doctor.context import CheckResult, DoctorContext, Status

ARCHIVE_ROOT_ENV = "TRACE_ARCHIVE_ROOT"


def check_archive(ctx: DoctorContext) -> CheckResult:
    value = ctx.archive_root or ctx.env.get(ARCHIVE_ROOT_ENV)
    if not value:
        return CheckResult("archive", Status.MISSING, f"no --archive-root given ({ARCHIVE_ROOT_ENV} unset)",
                           missing="the archive directory", fix=f"pass --archive-root DIR or set {ARCHIVE_ROOT_ENV}")
    path = Path(value)
    if not path.is_dir():
        return CheckResult("archive", Status.MISSING, f"archive root {path} is not a directory",
                           missing=f"archive directory {path}", fix=f"pass --archive-root DIR or set {ARCHIVE_ROOT_ENV}")
    return CheckResult("archive", Status.OK, f"archive root {path}")


def _checks():
    from trace_lib.doctor.registry import Check

    return (Check("archive", "the run archive directory (--archive-root)", check_archive),)


CHECKS = _checks()
