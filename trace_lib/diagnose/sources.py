"""Open either kind of run a diagnosis compares: a trace-repro campaign (``generation/`` …) or an archive run of
the paper's public schema (a root holding ``runs/<run_id>/`` or one run directory). Both answer ``keys()``,
``slice(key)`` and ``description``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol

from trace_lib.archive.schema import MANIFEST_PATH
from trace_lib.diagnose.views import SliceKey, SliceView
from trace_lib.errors import UsageError


class Run(Protocol):
    """One side of a diagnosis."""

    kind: str
    description: str

    @property
    def tree(self) -> Path:
        """The directory this side is read from."""
        ...

    def keys(self) -> list[SliceKey]: ...

    def slice(self, key: SliceKey) -> SliceView | None: ...


@dataclass(frozen=True)
class CampaignRun:
    """A trace-repro campaign directory."""

    root: Path
    kind: str = "campaign"

    @property
    def description(self) -> str:
        return f"campaign {self.root}"

    @property
    def tree(self) -> Path:
        return self.root

    def keys(self) -> list[SliceKey]:
        from trace_lib.diagnose.campaign_view import campaign_slice_keys

        return campaign_slice_keys(self.root)

    def slice(self, key: SliceKey) -> SliceView | None:
        from trace_lib.diagnose.campaign_view import load_campaign_slice

        return load_campaign_slice(self.root, key)


@dataclass(frozen=True)
class ArchiveRun:
    """An archive root or run directory (:class:`~trace_lib.diagnose.archive_view.ArchiveReference`)."""

    reference: Any
    kind: str = "archive"

    @property
    def description(self) -> str:
        return self.reference.description

    @property
    def tree(self) -> Path:
        return self.reference.archive.tree

    def keys(self) -> list[SliceKey]:
        return self.reference.keys()

    def slice(self, key: SliceKey) -> SliceView | None:
        return self.reference.slice(key)


def is_archive(path: Path) -> bool:
    """Whether ``path`` is an archive run directory or a root holding ``runs/<run_id>/metadata/manifest.json``."""
    return (path / MANIFEST_PATH).is_file() or any(path.glob("runs/*/" + MANIFEST_PATH))


def open_run(path: str | Path, *, flag: str, routes: Mapping[str, str] | None = None, run_id: str | None = None,
             release: Any = None) -> CampaignRun | ArchiveRun:
    """The run at ``path`` (``flag`` names the option in errors).

    Raises:
        UsageError: not a directory, neither kind of run, or ``run_id`` given for a campaign (one line each).
    """
    base = Path(path).expanduser()
    if not base.is_dir():
        raise UsageError("not a directory", field=flag, found=str(path))
    if is_archive(base):
        from trace_lib.diagnose.archive_view import ArchiveReference

        return ArchiveRun(ArchiveReference.open(base, routes=routes, run_id=run_id, release=release))
    if (base / "generation").is_dir():
        if run_id is not None:
            raise UsageError("a run id selects an archive run, but this is a trace-repro campaign", field=flag,
                             found=str(base))
        return CampaignRun(base)
    raise UsageError("neither a trace-repro campaign (no generation/) nor an archive run (no metadata/manifest.json "
                     "or runs/<run_id>/metadata/manifest.json)", field=flag, found=str(base))
