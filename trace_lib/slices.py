"""The two contracts every stage names a slice by: :class:`ModelDescriptor` (which checkpoint, where) and
:class:`Slice` (model x decoding seed x benchmark).

They sit below every package so that data, generation and reports can take them without importing the campaign
that builds them (:mod:`trace_lib.campaign.models` validates descriptors, :mod:`trace_lib.campaign.plan` plans
slices; docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ModelDescriptor:
    """One model of a campaign: served name, local directory, immutable revision, public source, label."""

    slug: str
    local_path: str  # used verbatim
    revision: str  # IMMUTABLE_REVISION: what the directory's marker must record
    source: str  # "owner/repo@<40|64 hex>"
    label: str
    canonical_revision: str | None = None  # results.json ``model_revision`` when it differs from ``revision``

    @property
    def repository(self) -> str:
        return self.source.rpartition("@")[0]

    @property
    def repository_revision(self) -> str:
        return self.source.rpartition("@")[2]

    @property
    def path(self) -> Path:
        return Path(self.local_path)

    def render(self) -> str:
        """The ``--print-config`` line, as upstream prints it (plus the canonical revision when it differs)."""
        line = (f"model={self.slug} path={self.local_path} revision={self.revision} source={self.source} "
                f"label={self.label}")
        if self.canonical_revision and self.canonical_revision != self.revision:
            line += f" canonical_revision={self.canonical_revision}"
        return line


@dataclass(frozen=True, order=True)
class Slice:
    """One (model, seed, benchmark): the unit of generation, scoring, verification and of one test."""

    model: str  # model slug
    seed: int
    benchmark: str  # suite key

    @property
    def id(self) -> str:
        return f"{self.model}-seed{self.seed}-{self.benchmark}"
