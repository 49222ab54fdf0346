"""Reproduction items run under ``--slice-timeout`` (default: none), every other lane keeps pytest.ini's 300 s; no
release is a usage error in both reproduction lanes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trace_lib.testing.child_pytest import child_pytest_argv, child_pytest_env

pytestmark = pytest.mark.offline

REPO = Path(__file__).resolve().parents[1]
_REPORTER = '''
import json, pytest_timeout

def pytest_collection_finish(session):
    limits = {item.nodeid: pytest_timeout._get_item_settings(item).timeout for item in session.items}
    print("LIMITS=" + json.dumps(limits))
'''
_SELECTION = ["tests_reproduction", "tests_offline/test_atomic.py", "--model-id", "trace-qwen2.5-vl-3b",
              "--seeds", "42", "--benchmark", "mathvista"]


def _limits(release, tmp_path: Path, *argv: str, env_extra: dict[str, str] | None = None,
            autoload: bool = False) -> dict[str, float]:
    """Each collected item's limit; ``autoload``: pytest-timeout loaded from its entry point (as a user's pytest
    does) instead of by name (``-p pytest_timeout``, the suite's children)."""
    (tmp_path / "timeout_reporter.py").write_text(_REPORTER)
    env = {k: v for k, v in os.environ.items() if k != "TRACE_SLICE_TIMEOUT"}
    env.update(TRACE_ROOT=str(release.path), **(env_extra or {}))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), str(REPO), env.get("PYTHONPATH")]))
    args = ("--collect-only", "-q", "-p", "timeout_reporter", *_SELECTION, *argv)
    command = [sys.executable, "-m", "pytest", *args] if autoload else child_pytest_argv(*args)
    env = {k: v for k, v in env.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"} if autoload else child_pytest_env(env)
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("LIMITS="))
    return json.loads(line.removeprefix("LIMITS="))


def _split(limits: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    reproduction = {k: v for k, v in limits.items() if k.startswith("tests_reproduction/")}
    offline = {k: v for k, v in limits.items() if k.startswith("tests_offline/")}
    assert any("test_slice[" in k for k in reproduction) and any("test_planned[" in k for k in reproduction)
    assert any("test_validation[" in k for k in reproduction) and offline
    return reproduction, offline


@pytest.mark.parametrize("autoload", [False, True], ids=["by-name", "autoloaded"])
def test_reproduction_items_have_no_per_test_limit_by_default_and_offline_keeps_300s(release, tmp_path, autoload):
    reproduction, offline = _split(_limits(release, tmp_path, autoload=autoload))
    assert set(reproduction.values()) == {0.0}, reproduction
    assert set(offline.values()) == {300.0}, offline


def test_slice_timeout_sets_the_reproduction_limit_only(release, tmp_path):
    reproduction, offline = _split(_limits(release, tmp_path, env_extra={"TRACE_SLICE_TIMEOUT": "7200"}))
    assert set(reproduction.values()) == {7200.0} and set(offline.values()) == {300.0}


def test_both_reproduction_lanes_are_usage_errors_without_a_release(tmp_path):
    """No release: one configure-time usage line names how to point at one (exit 4), never an empty (skipped)
    lane nor a stack per test file."""
    env = {**os.environ, "TRACE_ROOT": str(tmp_path)}
    for path in ("tests_reproduction/test_validation.py", "tests_reproduction/test_slices.py"):
        done = subprocess.run(child_pytest_argv("--collect-only", "-q", path), cwd=REPO,
                              env=child_pytest_env(env), capture_output=True, text=True, timeout=120)
        assert done.returncode == 4, (path, done.stdout[-1000:], done.stderr[-1000:])
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        assert len(errors) == 1 and "set TRACE_ROOT" in errors[0], done.stderr
        assert "Traceback" not in done.stdout + done.stderr and "skipped" not in done.stdout
