"""The release's models under the model root, each carrying the marker of its pinned revision (no re-hashing)."""

from __future__ import annotations

from trace_lib.doctor.context import CheckResult, DoctorContext, Status


def check_models(ctx: DoctorContext) -> CheckResult:
    from trace_lib.campaign.models import release_models
    from trace_lib.campaign.plan import MODEL_ROOT_ENV
    from trace_lib.data.model_dirs import verify_model_dir

    root = ctx.root(ctx.model_root, MODEL_ROOT_ENV, "models")
    models = release_models(ctx.release(), root)
    fix = f"trace-repro prepare-models --model-root {root}"
    if not root.is_dir():
        what = "is not a directory" if root.exists() or root.is_symlink() else "does not exist"
        return CheckResult("models", Status.MISSING, f"model root {root} {what}", missing=f"model root {root}",
                           fix=fix)
    bad = [(m, verify_model_dir(m, deep=False)) for m in models]
    bad = [(m, r) for m, r in bad if not r.ok]
    ready = len(models) - len(bad)
    if bad:
        model, report = bad[0]
        return CheckResult("models", Status.MISSING, f"{ready}/{len(models)} release models at their pinned "
                           f"revisions under {root}; first problem: {report.problems[0]}",
                           missing=f"model {model.slug} at {model.revision[:12]}",
                           fix=f"trace-repro prepare-models --model-root {root} --model-id {model.slug}")
    return CheckResult("models", Status.OK, f"{ready}/{len(models)} release models at their pinned revisions under "
                       f"{root} (markers checked; 'trace-repro prepare-models --verify-only' re-hashes)")


def _checks():
    from trace_lib.doctor.registry import Check

    return (Check("models", "release models present at their pinned revisions (--model-root)", check_models),)


CHECKS = _checks()
