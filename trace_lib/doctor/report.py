"""Run the checks the requested lanes need and say, per lane, whether it can run here and what fixes it if not.

``diagnose(ctx, lanes)`` returns a frozen :class:`DoctorReport` (text for people, ``to_json`` for machines); a
lane can run when every check it needs is ``ok``, and otherwise names the first missing one and its fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from trace_lib.doctor import registry
from trace_lib.doctor.context import CheckResult, DoctorContext


@dataclass(frozen=True)
class LaneVerdict:
    lane: str
    can_run: bool
    missing: str = ""
    fix: str = ""
    check: str = ""  # the check that blocks it

    def to_json(self) -> dict[str, Any]:
        return {"lane": self.lane, "can_run": self.can_run, "blocked_by": self.check or None,
                "missing": self.missing or None, "fix": self.fix or None}


@dataclass(frozen=True)
class DoctorReport:
    results: tuple[CheckResult, ...]
    lanes: tuple[LaneVerdict, ...]

    @property
    def ok(self) -> bool:
        return all(v.can_run for v in self.lanes)

    def to_json(self) -> dict[str, Any]:
        return {"status": "ok" if self.ok else "blocked",
                "lanes": [v.to_json() for v in self.lanes],
                "checks": [r.to_json() for r in self.results]}

    def render_text(self) -> str:
        width = max(len(r.name) for r in self.results)
        lines = ["trace-repro doctor: what this machine can run", "checks:"]
        lines += [f"  {r.status.value:<8} {r.name:<{width}}  {r.detail}" for r in self.results]
        lines.append("lanes:")
        lane_width = max(len(v.lane) for v in self.lanes)
        for v in self.lanes:
            if v.can_run:
                lines.append(f"  {v.lane:<{lane_width}}  can run")
            else:
                lines.append(f"  {v.lane:<{lane_width}}  cannot run: {v.missing}; fix: {v.fix}")
        ready = sum(v.can_run for v in self.lanes)
        lines.append(f"status: {ready}/{len(self.lanes)} requested lane(s) can run")
        return "\n".join(lines)


def diagnose(ctx: DoctorContext, lanes: Sequence[str] = ()) -> DoctorReport:
    """Check what ``lanes`` (default: every lane) need, in registry order.

    Raises:
        UsageError: an unknown lane name.
    """
    chosen = [registry.lane(name) for name in lanes] if lanes else list(registry.LANES)
    needed = set(registry.ALWAYS) | {name for lane in chosen for name in lane.needs}
    results = {c.name: registry.run_check(c, ctx) for c in registry.checks() if c.name in needed}
    verdicts = []
    for lane in chosen:
        blocking = next((results[n] for n in lane.needs if not results[n].ok), None)
        if blocking is None:
            verdicts.append(LaneVerdict(lane.name, True))
        else:
            verdicts.append(LaneVerdict(lane.name, False, blocking.missing, blocking.fix, blocking.name))
    return DoctorReport(tuple(results.values()), tuple(verdicts))
