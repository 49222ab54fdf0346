"""The identity properties every test records (trace_lib.receipts.properties): the release's root, pinned commit
(or ``unpinned``) and hashes read, the installed engine against the release's pins, and the environment."""

from __future__ import annotations

import platform
import shutil
import sys

import pytest

from trace_lib import __version__
from trace_lib.environment import engine
from trace_lib.receipts import properties
from trace_lib.release import identity
from trace_lib.release.locate import BUNDLED_PATH, ReleaseRoot

pytestmark = pytest.mark.offline


@pytest.fixture
def fresh_engine_cache():
    """``_engine_env`` caches per release root: each test sees its own engine."""
    properties._engine_env.cache_clear()
    yield
    properties._engine_env.cache_clear()


def _installed(monkeypatch, versions: dict) -> None:
    monkeypatch.setattr(engine, "engine_versions", lambda **_: engine.EngineVersions(versions))


def test_the_pinned_release_records_its_commit_each_file_read_and_an_engine_at_the_pins(monkeypatch,
                                                                                      fresh_engine_cache):
    """Properties in order: root, commit, one ``sha256:<file>`` per file read, then ``env_<package>`` and
    ``env_matches_paper`` (``true``: every engine package at the release's pin)."""
    release = ReleaseRoot(BUNDLED_PATH)
    pins = engine.paper_engine(ReleaseRoot(BUNDLED_PATH)).packages
    _installed(monkeypatch, dict(pins))
    release.read_json(identity.SUITE)
    props = properties.release_properties(release)
    assert props[:2] == [("release_root", release.label), ("release_commit", identity.COMMIT)]
    hashes = [(name, value) for name, value in props if name.startswith("sha256:")]
    assert hashes == [(f"sha256:{rel}", sha) for rel, sha in release.hashes_read.items()] and hashes
    assert props[-4:] == [*((f"env_{name}", pins[name]) for name in engine.ENGINE_PACKAGES),
                          ("env_matches_paper", "true")]


def test_an_edited_copy_is_unpinned_and_an_engine_off_the_pins_or_missing_is_named(tmp_path, monkeypatch,
                                                                                   fresh_engine_cache):
    """A release whose files differ from the pins is ``unpinned``; a package not installed is ``not installed``
    and the engine then does not match (``false``)."""
    copy = tmp_path / "release"
    shutil.copytree(BUNDLED_PATH, copy)
    (copy / identity.SUITE).write_bytes((copy / identity.SUITE).read_bytes() + b"\n")
    _installed(monkeypatch, {"vllm": None, "torch": "0.0.1", "transformers": None})
    props = dict(properties.release_properties(ReleaseRoot(copy)))
    assert props["release_commit"] == "unpinned"
    assert [props[f"env_{name}"] for name in engine.ENGINE_PACKAGES] == ["not installed", "0.0.1", "not installed"]
    assert props["env_matches_paper"] == "false"


def test_a_release_without_the_engine_pins_records_unknown(tmp_path, monkeypatch, fresh_engine_cache):
    _installed(monkeypatch, {"vllm": "1", "torch": "2", "transformers": "3"})
    props = properties.release_properties(ReleaseRoot(tmp_path))
    assert props[0] == ("release_root", str(tmp_path)) and props[1] == ("release_commit", "unpinned")
    assert props[-1] == ("env_matches_paper", "unknown")


def test_environment_properties_name_the_version_python_platform_and_workbook_libraries():
    props = properties.environment_properties()
    assert props[:3] == [("trace_repro_version", __version__), ("python", platform.python_version()),
                         ("platform", f"{sys.platform}-{platform.machine()}")]
    assert props[3:] and all(name.startswith("workbook_") for name, _ in props[3:])
