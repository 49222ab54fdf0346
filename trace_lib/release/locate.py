"""Find the TRACE release under test: ``--trace-root``, then ``TRACE_ROOT``, then discovery, then the bundled copy.

A release root is a directory holding ``rlvr/`` (a TRACE checkout of the ``rlvr`` branch, or a data-only copy).
Discovery looks at the working directory and the suite's own checkout (the directory above ``trace_lib``): each of
them and their ancestors (a checkout containing them), and the direct children of each and of its parent (a
checkout inside or beside them), never further up the tree. When nothing is found, the release is the
bundled pinned snapshot: the 19 canonical files at the paper's commit, shipped as package data
(``trace_lib/release/pinned/``, byte-identical to :data:`identity.CANONICAL_SHA256`); reports name it
:data:`BUNDLED_LABEL` so a check of the bundled copy is never mistaken for a check of a checkout.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_lib import options
from trace_lib.errors import ReleaseFileError, ReleaseNotFoundError, os_error_line, symlink_loop_error
from trace_lib.release import identity
from trace_lib.release.load import load_json, load_yaml, sha256_file

ENV_VAR = options.TRACE_ROOT.env
_MARKER = identity.SUITE
HOW_TO_POINT = "pass --trace-root DIR, set TRACE_ROOT, or run 'trace-repro fetch-release --dest DIR'"
#: The package-data copy of the canonical files (release-relative paths under it).
BUNDLED_PATH = Path(__file__).resolve().parent / "pinned"
BUNDLED_SOURCE = "bundled"
BUNDLED_LABEL = f"bundled pinned snapshot ({identity.COMMIT[:8]})"


@dataclass
class ReleaseRoot:
    """A located release; reads its files strictly and remembers the SHA-256 of every file it read."""

    path: Path
    source: str = "flag"
    _hashes: dict[str, str] = field(default_factory=dict, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_bundled(self) -> bool:
        """True for the package's own pinned snapshot, whether nothing else was found or it was named."""
        return self.source == BUNDLED_SOURCE or self.path == BUNDLED_PATH

    @property
    def label(self) -> str:
        """How reports name this release: :data:`BUNDLED_LABEL` for the bundled copy, else its directory."""
        return BUNDLED_LABEL if self.is_bundled else str(self.path)

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
    seen: set[Path] = {BUNDLED_PATH}  # the bundled copy is the last resort, never a discovered checkout
    for start in starts:
        for depth, ancestor in enumerate([start, *start.parents]):
            if ancestor in seen:
                continue
            seen.add(ancestor)
            if _is_root(ancestor):
                return ancestor
            if depth > 1:  # beside means in the start directory or its parent, not anywhere up the tree
                continue
            try:
                children = sorted(p for p in ancestor.iterdir() if p.is_dir())
            except OSError:
                continue
            for child in children:
                if child not in seen and _is_root(child):
                    return child
    return None


def locate_release(
    trace_root: str | os.PathLike[str] | None = None,
    *,
    env: dict[str, str] | None = None,
    bundled: bool = True,
) -> ReleaseRoot:
    """Resolve the release root by flag, then ``TRACE_ROOT``, then discovery, then (``bundled``) the bundled copy.

    Raises:
        ReleaseNotFoundError: the given directory holds no release, or nothing was found and ``bundled`` is off
            or the bundled copy is missing (says how to point at one).
    """
    environ = os.environ if env is None else env
    for value, source in ((trace_root, "--trace-root"), (environ.get(ENV_VAR), ENV_VAR)):
        if value:
            try:
                path = _normalize(Path(value))
            except (OSError, RuntimeError) as exc:  # a symbolic-link loop (RuntimeError before Python 3.13) ...
                loop = symlink_loop_error(exc) if isinstance(exc, RuntimeError) else exc
                if loop is None:
                    raise
                raise ReleaseNotFoundError(f"{source} {value}: {os_error_line(loop)}", hint=HOW_TO_POINT) from None
            if not path.is_dir():
                what = "no such directory" if not path.exists() else "not a directory"
                raise ReleaseNotFoundError(f"{source} {value}: {what}", hint=HOW_TO_POINT)
            if not _is_root(path):
                raise ReleaseNotFoundError(
                    f"{source} {value}: not a TRACE release (no {_MARKER})", hint=HOW_TO_POINT
                )
            return ReleaseRoot(path, source=source)
    found = _discover([Path.cwd(), Path(__file__).resolve().parents[2]])
    if found is not None:
        return ReleaseRoot(found, source="discovery")
    if bundled and _is_root(BUNDLED_PATH):
        return ReleaseRoot(BUNDLED_PATH, source=BUNDLED_SOURCE)
    raise ReleaseNotFoundError("no TRACE release found", hint=HOW_TO_POINT)
