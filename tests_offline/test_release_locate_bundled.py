"""The bundled pinned snapshot: byte-identical to the pins, the locator's last resort, and named as such."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import types

import pytest

from trace_lib.errors import ReleaseNotFoundError
from trace_lib.receipts.properties import release_properties
from trace_lib.release import identity
from trace_lib.release.locate import BUNDLED_LABEL, BUNDLED_PATH, locate_release


def test_bundled_bytes_are_the_pinned_files():
    bundled = sorted(p.relative_to(BUNDLED_PATH).as_posix() for p in BUNDLED_PATH.rglob("*") if p.is_file())
    assert bundled == sorted(identity.CANONICAL_SHA256)
    for rel, sha in identity.CANONICAL_SHA256.items():
        assert hashlib.sha256((BUNDLED_PATH / rel).read_bytes()).hexdigest() == sha, rel


#: A working directory whose walk adds nothing to the package directory's own (tmp_path's neighbours may hold
#: release copies made by other tests, which discovery would rightly find).
NO_RELEASE_AROUND = BUNDLED_PATH.parent


def test_bundled_copy_is_the_last_resort_and_says_so(monkeypatch):
    monkeypatch.chdir(NO_RELEASE_AROUND)
    found = locate_release(None, env={})
    assert found.path == BUNDLED_PATH and found.source == "bundled" and found.is_pinned_release()
    assert found.label == BUNDLED_LABEL == f"bundled pinned snapshot ({identity.COMMIT[:8]})"
    assert dict(release_properties(found))["release_root"] == BUNDLED_LABEL
    with pytest.raises(ReleaseNotFoundError, match="no TRACE release found"):
        locate_release(None, env={}, bundled=False)


def test_the_bundled_copy_named_by_flag_or_environment_is_still_called_the_bundled_snapshot():
    named = (locate_release(str(BUNDLED_PATH), env={}), locate_release(str(BUNDLED_PATH / "rlvr"), env={}),
             locate_release(None, env={"TRACE_ROOT": str(BUNDLED_PATH)}))
    for found in named:
        assert found.path == BUNDLED_PATH and found.label == BUNDLED_LABEL, found.source


def test_a_checkout_beats_the_bundled_copy_and_is_named_by_its_path(release, tmp_path, monkeypatch):
    from preflight_support import copy_data_files

    checkout = copy_data_files(release, tmp_path / "checkout")
    monkeypatch.chdir(checkout / "rlvr")
    found = locate_release(None, env={})
    assert found.source == "discovery" and found.label == str(checkout.resolve())


def test_discovery_never_mistakes_the_bundled_copy_for_a_checkout(monkeypatch):
    monkeypatch.chdir(BUNDLED_PATH / "rlvr" / "evaluation")
    assert locate_release(None, env={}).source == "bundled"


def test_check_plan_and_pytest_header_name_the_bundled_snapshot(monkeypatch):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACE_")}
    code = ("import sys; from trace_lib.cli.main import main; "
            "main(['check', '--json']); main(['plan', '--print-config', '--model-id', 'qwen2.5-vl-3b-base'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=NO_RELEASE_AROUND,
                          timeout=60)
    report_text, _, plan_text = done.stdout.partition("\n}\n")
    report = json.loads(report_text + "\n}")
    assert report["release"] == BUNDLED_LABEL and report["status"] == "ok" and report["source_files"] == "absent"
    assert f"release={BUNDLED_LABEL}" in plan_text.splitlines()
    assert done.returncode == 0, done.stderr
    from trace_lib.preflight.report import check_release
    from trace_lib.pytest_plugin import pytest_report_header

    monkeypatch.chdir(NO_RELEASE_AROUND)
    text = check_release(locate_release(None, env={}), only=["suite"]).render_text()
    assert text.splitlines()[0].startswith(f"trace-repro check {BUNDLED_LABEL} (pinned to ")
    monkeypatch.delenv("TRACE_ROOT", raising=False)
    config = types.SimpleNamespace(stash=pytest.Stash(), option=types.SimpleNamespace(trace_root=None))
    assert pytest_report_header(config) == f"trace-repro release: {BUNDLED_LABEL} [bundled]"
