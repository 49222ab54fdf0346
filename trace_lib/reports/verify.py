"""Coverage and receipt checks of a campaign directory, per phase (``trace-repro verify``).

- ``generation``: every expected slice has a response file whose header names the slice and which holds every
  suite row;
- ``score``: every expected slice has a ``scores.json`` receipt for that slice (schema, identity, finite score,
  the suite's row count, the current protocol version) whose ``records.jsonl`` and response file still have the
  SHA-256 it recorded.

The report lists every slice; ``complete`` iff all expected slices pass (the CLI exits 0, else 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from trace_lib.reports.collect import CampaignReader, SliceState, current_protocol_versions, expected_slices
from trace_lib.release.suite import Suite

SCHEMA_VERSION = "trace-repro-verification-v1"
PHASES = ("generation", "score")


@dataclass(frozen=True)
class VerifyReport:
    """Every expected slice's state for one phase."""

    phase: str
    suite_id: str
    suite_sha256: str
    campaign_root: str
    models: tuple[str, ...]
    seeds: tuple[int, ...]
    benchmarks: tuple[str, ...]
    records: tuple[SliceState, ...]

    @property
    def completed_slices(self) -> int:
        return sum(r.complete for r in self.records)

    @property
    def expected_slices(self) -> int:
        return len(self.records)

    @property
    def incomplete(self) -> list[SliceState]:
        return [r for r in self.records if not r.complete]

    @property
    def complete(self) -> bool:
        return bool(self.records) and not self.incomplete

    def lines(self, *, limit: int = 25) -> list[str]:
        """The text report: one summary line, then up to ``limit`` incomplete slices."""
        head = (f"[trace-repro verify] phase={self.phase} complete={self.completed_slices}/{self.expected_slices} "
                f"incomplete={len(self.incomplete)} models={','.join(self.models) or '-'} "
                f"seeds={','.join(map(str, self.seeds)) or '-'} benchmarks={len(self.benchmarks)}")
        out = [head]
        for record in self.incomplete[:limit]:
            out.append(f"[trace-repro verify:missing] {record.key.id}: {record.detail} ({record.path})")
        if len(self.incomplete) > limit:
            out.append(f"[trace-repro verify:missing] ... and {len(self.incomplete) - limit} more (use --json)")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "suite_id": self.suite_id,
            "suite_manifest_sha256": self.suite_sha256,
            "campaign_root": self.campaign_root,
            "phase": self.phase,
            "models": list(self.models),
            "seeds": list(self.seeds),
            "benchmarks": list(self.benchmarks),
            "complete": self.complete,
            "completed_slices": self.completed_slices,
            "expected_slices": self.expected_slices,
            "incomplete": [r.key.id for r in self.incomplete],
            "records": [r.to_dict() for r in self.records],
        }


def verify_campaign(
    root: Path,
    suite: Suite,
    *,
    phase: str,
    models: Sequence[str],
    seeds: Sequence[int],
    benchmarks: Sequence[str] | None = None,
    reader: CampaignReader | None = None,
) -> VerifyReport:
    """Check every (model, seed, benchmark) slice of ``root`` for ``phase``.

    Raises:
        ValueError: ``phase`` is not one of :data:`PHASES`.
    """
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    keys = tuple(benchmarks) if benchmarks else suite.keys
    reader = reader or CampaignReader(Path(root), {b.key: b.rows for b in suite.benchmarks})
    slices = expected_slices(models, seeds, keys)
    if phase == "generation":
        records = tuple(reader.generation(k) for k in slices)
    else:
        versions = current_protocol_versions(keys)
        records = tuple(reader.score(k, protocol_versions=versions) for k in slices)
    return VerifyReport(phase, suite.suite_id, suite.sha256, str(root), tuple(models), tuple(seeds), keys, records)
