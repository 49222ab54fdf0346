"""Run the preflight over a release and render its report (text for people, JSON for machines).

``check_release(release, pinned=..., require_source=...)`` runs every registry group and returns a frozen
:class:`PreflightReport`; it never raises for bad release data (bad data is findings). The text form lists one
line per group, then every finding as ``FILE: FIELD: what is wrong (expected X, found Y)``; ``to_json`` holds the
same with each group's status and counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from trace_lib.preflight import registry
from trace_lib.preflight.context import SOURCE_ABSENT, CheckContext, GroupOutcome, Status
from trace_lib.preflight.finding import Finding, Severity, _json_safe
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot


@dataclass(frozen=True)
class PreflightReport:
    """Every group's outcome for one release, in registry order."""

    release_root: str
    pinned: bool
    source_present: bool
    outcomes: tuple[GroupOutcome, ...]
    release_label: str = ""  #: how the header names the release (the bundled snapshot says so; else the root)

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> list[Finding]:
        """Failed findings of all groups, each distinct line once, in group order."""
        return _distinct(f for o in self.outcomes for f in o.failures)

    @property
    def unchecked(self) -> list[Finding]:
        return _distinct(f for o in self.outcomes for f in o.unchecked)

    def outcome(self, name: str) -> GroupOutcome:
        for out in self.outcomes:
            if out.group == name:
                return out
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        summaries = {g.name: g.summary for g in registry.groups()}
        return {
            "release_root": self.release_root,
            "release": self.release_label or self.release_root,
            "mode": "pinned" if self.pinned else "unpinned",
            "pinned_release": f"{identity.REPOSITORY}@{identity.COMMIT}" if self.pinned else None,
            "source_files": "present" if self.source_present else "absent",
            "status": "ok" if self.ok else "failed",
            "failures": len(self.failures),
            "not_checked": len(self.unchecked),
            "groups": [
                {
                    "name": out.group,
                    "summary": summaries.get(out.group, ""),
                    "status": out.status.value,
                    "counts": _json_safe(out.counts),
                    "findings": [f.to_json() for f in out.findings],
                }
                for out in self.outcomes
            ],
        }

    def render_text(self) -> str:
        mode = f"pinned to {identity.REPOSITORY}@{identity.COMMIT[:12]}" if self.pinned else "unpinned"
        source = "source files present" if self.source_present else f"data-only copy ({SOURCE_ABSENT})"
        lines = [f"trace-repro check {self.release_label or self.release_root} ({mode}; {source})"]
        width = max(len(o.group) for o in self.outcomes) if self.outcomes else 0
        for out in self.outcomes:
            lines.append(f"  {out.status.value:<12} {out.group:<{width}}  {_counts(out.counts)}".rstrip())
        for finding in self.unchecked:
            lines.append(finding.line())
        for finding in self.failures:
            lines.append(finding.line())
        statuses = [o.status for o in self.outcomes]
        partial = sum(s in (Status.PARTIAL, Status.NOT_CHECKED) for s in statuses)
        tail = f"; {partial} group(s) partly or not checked" if partial else ""
        if self.ok:
            lines.append(f"status: ok ({len(statuses)} groups{tail})")
        else:
            failed = sum(s is Status.FAILED for s in statuses)
            lines.append(f"status: failed ({len(self.failures)} failure(s) in {failed} group(s){tail})")
        return "\n".join(lines)


def _distinct(findings: Iterable[Finding]) -> list[Finding]:
    seen: set[str] = set()
    out = []
    for finding in findings:
        line = finding.line()
        if line not in seen:
            seen.add(line)
            out.append(finding)
    return out


def _counts(counts: dict[str, Any]) -> str:
    parts = []
    for name, value in counts.items():
        if isinstance(value, dict):
            value = f"{len(value)} entries"
        elif isinstance(value, float):
            value = f"{value:.1e}"
        elif isinstance(value, str) and len(value) > 16:
            value = value[:12]
        parts.append(f"{name}={value}")
    return " ".join(parts)


def check_release(
    release: ReleaseRoot,
    *,
    pinned: bool = True,
    require_source: bool = False,
    only: Iterable[str] | None = None,
) -> PreflightReport:
    """Run the preflight groups (all, or those named in ``only``) over ``release``.

    Raises:
        UsageError: ``only`` names an unknown group.
    """
    ctx = CheckContext(release, pinned=pinned, require_source=require_source)
    chosen = [registry.group(name) for name in only] if only else list(registry.groups())
    outcomes = tuple(registry.run_group(group, ctx) for group in chosen)
    return PreflightReport(str(release.path), pinned, ctx.source_present, outcomes, release.label)


__all__ = ["PreflightReport", "Severity", "check_release"]
