"""The identity properties every test records (release, file hashes, trace-repro version, Python, platform, and
the installed engine against the paper's pins)."""

from __future__ import annotations

import functools
import platform
import sys
from pathlib import Path

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
    return props + engine_env_properties(release)


@functools.lru_cache(maxsize=8)
def _engine_env(root: str) -> tuple[tuple[str, str], ...]:
    from trace_lib.environment.engine import ENGINE_PACKAGES, compare_to_paper, engine_versions, paper_engine
    from trace_lib.errors import TraceReproError

    versions = engine_versions()
    props = [(f"env_{name}", versions.packages.get(name) or "not installed") for name in ENGINE_PACKAGES]
    try:  # a fresh root: the pins read here are not files the test itself read
        record = compare_to_paper(versions, paper_engine(ReleaseRoot(Path(root))))
        props.append(("env_matches_paper", "true" if record.matches_paper else "false"))
    except TraceReproError:
        props.append(("env_matches_paper", "unknown"))
    return tuple(props)


def engine_env_properties(release: ReleaseRoot) -> list[tuple[str, str]]:
    """The installed vllm/torch/transformers (metadata; nothing imported) and whether they equal the release's
    pins (``env_matches_paper``; CUDA is not probed here: ``trace-repro env show --probe``)."""
    return list(_engine_env(str(release.path)))
