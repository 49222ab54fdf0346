"""Find the TRACE release under test: ``--trace-root``, then ``TRACE_ROOT``, then discovery.

A release root is a directory holding ``rlvr/`` (a TRACE checkout of the ``rlvr`` branch, or a data-only copy).
Discovery looks at the working directory and the package's directory, their ancestors, and the direct children
of those ancestors (a checkout containing, or beside, the suite).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_lib.errors import ReleaseFileError, ReleaseNotFoundError
from trace_lib.release import identity
from trace_lib.release.load import load_json, load_yaml, sha256_file

ENV_VAR = "TRACE_ROOT"
_MARKER = identity.SUITE
HOW_TO_POINT = "pass --trace-root DIR, set TRACE_ROOT, or run 'trace-repro fetch-release --dest DIR'"


@dataclass
class ReleaseRoot:
    """A located release; reads its files strictly and remembers the SHA-256 of every file it read."""

    path: Path
    source: str = "flag"
    _hashes: dict[str, str] = field(default_factory=dict, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def file(self, rel: str) -> Path:
        """Absolute path of a release-relative path (the file may not exist)."""
        return self.path / rel

    def exists(self, rel: str) -> bool:
        return self.file(rel).is_file()

    def sha256(self, rel: str) -> str:
        """SHA-256 of a release file, computed once and recorded for receipts."""
        if rel not in self._hashes:
            path = self.file(rel)
            if not path.is_file():
                raise ReleaseFileError("file is missing", file=rel)
            self._hashes[rel] = sha256_file(path)
        return self._hashes[rel]

    def read_json(self, rel: str) -> Any:
        """Strictly parsed JSON of a release file (cached; the file's hash is recorded)."""
        if rel not in self._cache:
            self._cache[rel] = load_json(self.file(rel), name=rel)
            self.sha256(rel)
        return self._cache[rel]

    def read_yaml(self, rel: str) -> Any:
        """Strictly parsed YAML of a release file (cached; the file's hash is recorded)."""
        if rel not in self._cache:
            self._cache[rel] = load_yaml(self.file(rel), name=rel)
            self.sha256(rel)
        return self._cache[rel]

    def read_bytes(self, rel: str) -> bytes:
        path = self.file(rel)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ReleaseFileError("file is missing", file=rel) from None
        self.sha256(rel)
        return data

    @property
    def hashes_read(self) -> dict[str, str]:
        """Release-relative path -> SHA-256 of every file read so far (for receipts)."""
        return dict(sorted(self._hashes.items()))

    def is_pinned_release(self) -> bool:
        """True when every canonical file is present with the pinned paper-release hash."""
        try:
            return all(self.sha256(rel) == sha for rel, sha in identity.CANONICAL_SHA256.items())
        except ReleaseFileError:
            return False


def _is_root(path: Path) -> bool:
    return (path / _MARKER).is_file()


def _normalize(path: Path) -> Path:
    """Accept the checkout root or its ``rlvr`` directory."""
    path = path.expanduser().resolve()
    if not _is_root(path) and path.name == "rlvr" and _is_root(path.parent):
        return path.parent
    return path


def _discover(starts: list[Path]) -> Path | None:
    seen: set[Path] = set()
    for start in starts:
        for ancestor in [start, *start.parents]:
            if ancestor in seen:
                continue
            seen.add(ancestor)
            if _is_root(ancestor):
                return ancestor
            try:
                children = sorted(p for p in ancestor.iterdir() if p.is_dir())
            except OSError:
                continue
            for child in children:
                if _is_root(child):
                    return child
    return None


def locate_release(trace_root: str | os.PathLike[str] | None = None, *, env: dict[str, str] | None = None) -> ReleaseRoot:
    """Resolve the release root by flag, then ``TRACE_ROOT``, then discovery.

    Raises:
        ReleaseNotFoundError: nothing found, or the given directory holds no release (says how to point at one).
    """
    environ = os.environ if env is None else env
    for value, source in ((trace_root, "--trace-root"), (environ.get(ENV_VAR), ENV_VAR)):
        if value:
            path = _normalize(Path(value))
            if not path.is_dir():
                raise ReleaseNotFoundError(f"{source} {value}: no such directory", hint=HOW_TO_POINT)
            if not _is_root(path):
                raise ReleaseNotFoundError(
                    f"{source} {value}: not a TRACE release (no {_MARKER})", hint=HOW_TO_POINT
                )
            return ReleaseRoot(path, source=source)
    found = _discover([Path.cwd(), Path(__file__).resolve().parent])
    if found is None:
        raise ReleaseNotFoundError("no TRACE release found", hint=HOW_TO_POINT)
    return ReleaseRoot(found, source="discovery")
