"""The prepared benchmark data under the data root against its manifest and the suite (sizes, no re-hashing)."""

from __future__ import annotations

from trace_lib.doctor.context import CheckResult, DoctorContext, Status
from trace_lib.errors import TraceReproError


def check_datasets(ctx: DoctorContext) -> CheckResult:
    from trace_lib.campaign.plan import DATA_ROOT_ENV
    from trace_lib.data.manifest import check_manifest, load_manifest, manifest_path
    from trace_lib.release.suite import load_suite

    root = ctx.root(ctx.data_root, DATA_ROOT_ENV, "data")
    path = manifest_path(root)
    fix = f"trace-repro prepare-data --data-root {root}"
    if not path.is_file():
        return CheckResult("datasets", Status.MISSING, f"no dataset manifest at {path}",
                           missing=f"prepared data under {root}", fix=fix)
    try:
        manifest = load_manifest(path)
    except TraceReproError as exc:
        return CheckResult("datasets", Status.MISSING, exc.render(), missing=f"a readable manifest at {path}",
                           fix=f"{fix} --force")
    suite = load_suite(ctx.release())
    problems = check_manifest(manifest, suite, rehash=False, keys=suite.keys)
    if problems:
        return CheckResult("datasets", Status.MISSING, f"{len(problems)} problem(s) in {path}; first: {problems[0]}",
                           missing=problems[0], fix=fix)
    return CheckResult("datasets", Status.OK, f"{len(suite.keys)} benchmarks prepared under {root} "
                       f"(sizes checked; 'trace-repro prepare-data --verify-only' re-hashes)")


def _checks():
    from trace_lib.doctor.registry import Check

    return (Check("datasets", "benchmark data prepared under --data-root, per the manifest", check_datasets),)


CHECKS = _checks()
