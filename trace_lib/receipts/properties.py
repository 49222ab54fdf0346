"""The identity properties every test records (release, file hashes, trace-repro version, Python, platform)."""

from __future__ import annotations

import platform
import sys

from trace_lib import __version__
from trace_lib.extraction.workbook import library_versions
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot


def environment_properties() -> list[tuple[str, str]]:
    """Properties independent of the release: trace-repro version, Python, platform, workbook libraries."""
    return [
        ("trace_repro_version", __version__),
        ("python", platform.python_version()),
        ("platform", f"{sys.platform}-{platform.machine()}"),
        *((f"workbook_{name}", version) for name, version in library_versions().items()),
    ]


def release_properties(release: ReleaseRoot) -> list[tuple[str, str]]:
    """Properties naming the release: its root (or ``bundled pinned snapshot (...)``), pinned commit (or
    ``unpinned``) and the files read so far."""
    commit = identity.COMMIT if release.is_pinned_release() else "unpinned"
    props = [("release_root", release.label), ("release_commit", commit)]
    props += [(f"sha256:{rel}", sha) for rel, sha in release.hashes_read.items()]
    return props
