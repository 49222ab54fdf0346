"""Engine drift: this environment's vllm, torch and transformers (CUDA build with ``--probe-cuda``) against the
paper's pins read from the release. Reported, never blocking: trace-repro runs on newer engines too, but a
reproducer should know when the numbers come from another engine than the paper's."""

from __future__ import annotations

from trace_lib.doctor.context import CheckResult, DoctorContext, Status

FIX = "trace-repro env constraints --out paper.txt && pip install -c paper.txt -e '.[eval]'"
FIX_WORKBOOK = "trace-repro env constraints --pypi-only --out paper.txt && pip install -c paper.txt -e '.[test]'"


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


def check_workbook(ctx: DoctorContext) -> CheckResult:
    """pandas / XlsxWriter / openpyxl against the paper's: some prediction-workbook reads differ across versions."""
    from trace_lib.environment.engine import installed_version
    from trace_lib.environment.requirements import workbook_pins
    from trace_lib.errors import TraceReproError

    try:
        pins = workbook_pins(ctx.release())
    except TraceReproError as exc:
        return CheckResult("workbook", Status.INFO, f"not compared with the paper's: {exc.render()}")
    found = {name: installed_version(name) for name in pins}
    differ = [f"{name} {found[name]} vs {pin}" for name, pin in pins.items() if found[name] != pin]
    if not differ:
        return CheckResult("workbook", Status.INFO, "the paper's workbook libraries: " +
                           ", ".join(f"{n} {v}" for n, v in pins.items()))
    return CheckResult("workbook", Status.INFO, f"workbook libraries differ from the paper's ({'; '.join(differ)}); "
                       f"for the paper's: {FIX_WORKBOOK}")


def _checks():
    from trace_lib.doctor.registry import Check

    return (Check("engine", "vllm/torch/transformers (CUDA with --probe-cuda) against the paper's pins",
                  check_engine),
            Check("workbook", "pandas/XlsxWriter/openpyxl (the prediction-workbook round trip) against the paper's",
                  check_workbook))


CHECKS = _checks()
