"""Whether ``HF_TOKEN`` is set (its value is never read into the report); the release's models are public."""

from __future__ import annotations

from trace_lib.doctor.context import CheckResult, DoctorContext, Status


def check_hf_token(ctx: DoctorContext) -> CheckResult:
    state = "set" if ctx.env.get("HF_TOKEN") else "not set (public downloads only; gated or rate-limited repos need it)"
    return CheckResult("hf_token", Status.INFO, f"HF_TOKEN {state}")


def _checks():
    from trace_lib.doctor.registry import Check

    return (Check("hf_token", "whether HF_TOKEN is set (never printed)", check_hf_token),)


CHECKS = _checks()
