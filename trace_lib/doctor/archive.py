"""The paper's run archive (``trace-repro fetch-runs``): a directory given by ``--archive-root`` or
``TRACE_ARCHIVE_ROOT`` that holds at least one run manifest; reports how many of its listed slices are fetched."""

from __future__ import annotations

from trace_lib.doctor.context import CheckResult, DoctorContext, Status

FIX = "trace-repro fetch-runs --dest DIR, then pass --archive-root DIR (or set TRACE_ARCHIVE_ROOT)"


def check_archive(ctx: DoctorContext) -> CheckResult:
    from trace_lib.archive.reader import ARCHIVE_ENV, open_archive
    from trace_lib.errors import TraceReproError

    value = ctx.archive_root or ctx.env.get(ARCHIVE_ENV)
    if not value:
        return CheckResult("archive", Status.MISSING, f"no --archive-root given ({ARCHIVE_ENV} unset)",
                           missing="a fetched archive", fix=FIX)
    try:
        archive = open_archive(value)
    except TraceReproError as exc:
        return CheckResult("archive", Status.MISSING, exc.render(), missing=f"an archive run under {value}", fix=FIX)
    listed = archive.slices()
    fetched = sum(all(run.part_path(ref).is_file() for ref in run.parts[key].values())
                  for run in archive.runs for key in run.parts)
    return CheckResult("archive", Status.OK, f"archive root {value}: {len(archive.runs)} run(s), "
                       f"{fetched}/{len(listed)} listed slices fetched")


def _checks():
    from trace_lib.doctor.registry import Check

    return (Check("archive", "the paper's run archive (--archive-root), as trace-repro fetch-runs writes it",
                  check_archive),)


CHECKS = _checks()
