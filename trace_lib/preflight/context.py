"""What every check group receives (:class:`CheckContext`) and what it returns (:class:`GroupOutcome`).

The context reads release files without raising: a missing or malformed file becomes one finding of the group
that needed it, and the group carries on with what it can check. It also knows whether source files (code,
Markdown) are present: a data-only copy has none, and checks that need them report ``not checked`` (or fail
under ``--require-source``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from trace_lib.errors import UNSET, ReleaseFileError
from trace_lib.preflight.finding import Finding, Severity
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot

#: Release-relative paths that are data (not source): every canonical file of the pinned identity.
DATA_PATHS: frozenset[str] = frozenset(identity.CANONICAL_SHA256)

SOURCE_ABSENT = "source files absent"


class Status(str, enum.Enum):
    """A group's verdict: everything checked held; some parts not checked; nothing checked; something failed."""

    OK = "ok"
    PARTIAL = "partial"
    NOT_CHECKED = "not_checked"
    FAILED = "failed"


@dataclass
class GroupOutcome:
    """Findings and counts one check group collected (filled by the group; never raises for bad data)."""

    group: str
    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)

    def fail(
        self, file: str, message: str, *, field: str | None = None, expected: Any = UNSET, found: Any = UNSET
    ) -> None:
        """Record a failed expectation."""
        self.findings.append(Finding(file, message, field, expected, found))

    def not_checked(self, file: str, reason: str, *, field: str | None = None) -> None:
        """Record an expectation that could not be evaluated here (and why)."""
        self.findings.append(Finding(file, f"not checked: {reason}", field, severity=Severity.NOT_CHECKED))

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    def count(self, name: str, value: Any) -> None:
        """Record one count for the report (``--json`` shows every group's counts)."""
        self.counts[name] = value

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.FAIL]

    @property
    def unchecked(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.NOT_CHECKED]

    @property
    def status(self) -> Status:
        if self.failures:
            return Status.FAILED
        if self.unchecked:
            return Status.PARTIAL if self.counts else Status.NOT_CHECKED
        return Status.OK


@dataclass
class CheckContext:
    """The release under check and the mode: ``pinned`` (paper identity asserted) and ``require_source``."""

    release: ReleaseRoot
    pinned: bool = True
    require_source: bool = False

    # -- reading -------------------------------------------------------------------------------------------
    def read_json(self, rel: str, out: GroupOutcome) -> Any | None:
        """The strictly parsed JSON of ``rel``, or None after recording why it cannot be read."""
        return self._read(rel, out, self.release.read_json)

    def read_yaml(self, rel: str, out: GroupOutcome) -> Any | None:
        """The strictly parsed YAML of ``rel``, or None after recording why it cannot be read."""
        return self._read(rel, out, self.release.read_yaml)

    def read_object(self, rel: str, out: GroupOutcome) -> dict[str, Any] | None:
        """Like :meth:`read_json` but the document must be an object."""
        doc = self.read_json(rel, out)
        if doc is None:
            return None
        if not isinstance(doc, dict):
            out.fail(rel, "document must be a JSON object", found=type(doc).__name__)
            return None
        return doc

    def _read(self, rel: str, out: GroupOutcome, reader: Any) -> Any | None:
        try:
            return reader(rel)
        except ReleaseFileError as exc:
            out.fail(exc.file or rel, exc.message)
            return None

    def sha256(self, rel: str) -> str | None:
        """SHA-256 of a release file's bytes, or None when it does not exist."""
        try:
            return self.release.sha256(rel)
        except (ReleaseFileError, OSError):
            return None

    def exists(self, rel: str) -> bool:
        return self.release.exists(rel)

    # -- source files ----------------------------------------------------------------------------------------
    @cached_property
    def source_paths(self) -> frozenset[str]:
        """Release-relative source (non-data) paths the release's own manifests list."""
        paths: set[str] = set()
        try:
            files = self.release.read_json(identity.RELEASE_FILES).get("files")
            paths.update(f"rlvr/{e['path']}" for e in (files if isinstance(files, list) else [])
                         if isinstance(e, dict) and isinstance(e.get("path"), str))
        except (ReleaseFileError, AttributeError):
            pass
        try:
            doc = self.release.read_json(identity.SOURCE_MAP)
            listed = [doc.get("files"), doc.get("public_authored_files")]
            for entry in [e for group in listed if isinstance(group, list) for e in group]:
                if isinstance(entry, dict):
                    for key in ("destination_path", "path"):
                        if isinstance(entry.get(key), str):
                            paths.add(entry[key])
        except (ReleaseFileError, AttributeError):
            pass
        return frozenset(paths - DATA_PATHS)

    @cached_property
    def source_present(self) -> bool:
        """True for a checkout with source files; False for a data-only copy (no listed source file exists)."""
        return any(self.exists(p) for p in self.source_paths)

    def needs_source(self, out: GroupOutcome, file: str, *, field: str | None = None) -> bool:
        """Whether a source-dependent check can run; if not, record ``not checked`` (or a failure under
        ``--require-source``) against ``file``/``field`` and return False."""
        if self.source_present:
            return True
        if self.require_source:
            out.fail(file, f"{SOURCE_ABSENT} (data-only copy); --require-source needs a full checkout", field=field)
        else:
            out.not_checked(file, SOURCE_ABSENT, field=field)
        return False
