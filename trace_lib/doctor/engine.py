"""Engine drift: this environment's vllm, torch and transformers (CUDA build with ``--probe-cuda``) against the
paper's pins read from the release. Reported, never blocking: trace-repro runs on newer engines too, but a
reproducer should know when the numbers come from another engine than the paper's."""

from __future__ import annotations

from trace_lib.doctor.context import CheckResult, DoctorContext, Status

FIX = "trace-repro env constraints --out paper.txt && pip install -c paper.txt -e '.[eval]'"


def check_engine(ctx: DoctorContext) -> CheckResult:
    from trace_lib.environment.engine import ENGINE_PACKAGES, engine_record
    from trace_lib.errors import TraceReproError

    try:
        record = engine_record(ctx.release(), probe=ctx.probe_cuda)
    except TraceReproError as exc:
        return CheckResult("engine", Status.INFO, f"not compared with the paper's: {exc.render()}")
    if record.matches_paper:
        pins = ", ".join(f"{n} {record.engine.packages[n]}" for n in ENGINE_PACKAGES)
        cuda = f", CUDA {record.engine.cuda}" if record.engine.cuda else " (CUDA not probed: --probe-cuda)"
        return CheckResult("engine", Status.INFO, f"the paper's engine: {pins}{cuda}")
    return CheckResult("engine", Status.INFO, f"{record.drift()}; for the paper's: {FIX}")


def _checks():
    from trace_lib.doctor.registry import Check

    return (Check("engine", "vllm/torch/transformers (CUDA with --probe-cuda) against the paper's pins",
                  check_engine),)


CHECKS = _checks()
