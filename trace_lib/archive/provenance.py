"""Whether an archive run is the one the release pins: its run id and manifest hash against ``results.json``
``source_artifacts[]`` (and the validation run's pin), so every verdict says what it was given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trace_lib.archive.reader import ArchiveRun


@dataclass(frozen=True)
class SourceCheck:
    """One run against the release's pins: ``pinned`` when its run id and manifest hash are a pin's."""

    run_id: str
    manifest_sha256: str
    pinned: bool
    expected_run: str | None  # the pinned run for the slice's model (None: the release pins none for it)
    expected_manifest_sha256: str | None = None

    def describe(self) -> str:
        """One clause: ``this archive run (X) is [not] the release's source artifact (...)``."""
        if self.pinned:
            return f"this archive run ({self.run_id}) is the release's source artifact"
        if self.expected_run == self.run_id:
            return (f"this archive run ({self.run_id}) is not the release's source artifact (manifest sha256 "
                    f"{self.manifest_sha256[:12]}, the release pins {str(self.expected_manifest_sha256)[:12]})")
        expected = f"expected run {self.expected_run}" if self.expected_run else "the release pins no run for it"
        return f"this archive run ({self.run_id}) is not the release's source artifact ({expected})"


def source_check(release: Any, run: ArchiveRun, *, model_id: str | None = None) -> SourceCheck:
    """Check ``run`` against the release's pins; ``model_id`` picks the expected run when the ids differ."""
    from trace_lib.archive.fetch import release_pins

    pins = release_pins(release)
    digest = run.manifest_sha256
    same_id = next((p for p in pins if p.run_id == run.run_id), None)
    if same_id is not None:
        return SourceCheck(run.run_id, digest, same_id.manifest_sha256 == digest, same_id.run_id,
                           same_id.manifest_sha256)
    for_model = next((p for p in pins if model_id is not None and model_id in p.model_ids), None)
    return SourceCheck(run.run_id, digest, False, None if for_model is None else for_model.run_id,
                       None if for_model is None else for_model.manifest_sha256)
