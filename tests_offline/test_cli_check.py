"""``trace-repro check`` end to end: a subprocess per case, matching what a user sees and the exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from preflight_support import copy_data_files, edit_json, rehash_listed

from trace_lib.preflight import registry
from trace_lib.release import identity

HEAVY = ("torch", "ray", "vllm", "transformers", "verl")


def check(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("TRACE_ROOT", "TRACE_UNPINNED", "TRACE_REPRO_DEBUG")}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "trace_lib", "check", *args], capture_output=True, text=True,
                          env=environ, cwd=cwd, timeout=120)


@pytest.fixture
def data_copy(release, tmp_path) -> Path:
    return copy_data_files(release, tmp_path / "release")


def test_data_only_copy_passes_pinned_and_says_what_was_not_checked(data_copy):
    done = check("--trace-root", str(data_copy))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not checked: source files absent" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith("status: ok")


def test_require_source_fails_a_data_only_copy(data_copy):
    done = check("--trace-root", str(data_copy), "--require-source")
    assert done.returncode == 1
    assert "source files absent (data-only copy); --require-source needs a full checkout" in done.stdout


def test_corruption_exits_1_with_one_line_per_failure(data_copy):
    def change(doc):
        row = doc["scores"]["overall_summaries"][0]
        row["stddev"] += 1.0
        change.model = row["model_id"]
    edit_json(data_copy, identity.RESULTS, change)
    done = check("--trace-root", str(data_copy), "--unpinned")
    assert done.returncode == 1
    assert (f"{identity.RESULTS}: scores.overall_summaries[{change.model}].stddev: differs from the value "
            "recomputed from the seed scores (expected ") in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_json_report_lists_every_group_with_status_and_counts(data_copy):
    done = check("--trace-root", str(data_copy), "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 0
    assert report["status"] == "ok" and report["source_files"] == "absent" and report["mode"] == "pinned"
    assert [g["name"] for g in report["groups"]] == [g.name for g in registry.groups()]
    assert all({"status", "counts", "findings"} <= set(g) for g in report["groups"])


def test_trace_root_from_environment_and_unpinned_switch(data_copy):
    edit_json(data_copy, identity.VALIDATION_PATCHES, lambda d: d.update(reviewed="extra field"))
    rehash_listed(data_copy, identity.VALIDATION_PATCHES)
    pinned = check(env={"TRACE_ROOT": str(data_copy)})
    unpinned = check(env={"TRACE_ROOT": str(data_copy), "TRACE_UNPINNED": "1"})
    assert pinned.returncode == 1 and f"{identity.VALIDATION_PATCHES}: sha256: differs from the paper" in pinned.stdout
    assert unpinned.returncode == 0, unpinned.stdout


def test_missing_release_is_one_error_line_exit_2(tmp_path):
    done = check("--trace-root", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (f"error: --trace-root {tmp_path / 'nowhere'}: no such directory; pass "
                                           "--trace-root DIR, set TRACE_ROOT, or run 'trace-repro fetch-release "
                                           "--dest DIR'")


def test_help_lists_the_registry_groups():
    done = check("--help")
    assert done.returncode == 0
    listed = [line.split()[0] for line in done.stdout.split("check groups, in order:")[1].splitlines() if line.strip()]
    assert listed == [group.name for group in registry.groups()]


def test_check_imports_nothing_heavy_and_opens_no_socket(data_copy, tmp_path):
    """An audit hook fails any socket use; at exit the interpreter lists its modules."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    modules = tmp_path / "modules.json"
    (hooks / "sitecustomize.py").write_text(
        "import atexit, json, sys\n"
        "def _no_network(event, args):\n"
        "    if event.startswith('socket.'):\n"
        "        raise RuntimeError(f'network use during check: {event}')\n"
        "sys.addaudithook(_no_network)\n"
        f"atexit.register(lambda: open({str(modules)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
    )
    done = check("--trace-root", str(data_copy), env={"PYTHONPATH": os.pathsep.join(
        [str(hooks), *filter(None, [os.environ.get("PYTHONPATH")])])})
    assert done.returncode == 0, done.stdout + done.stderr
    loaded = set(json.loads(modules.read_text()))
    assert "sitecustomize" in loaded
    assert not {m.split(".")[0] for m in loaded} & set(HEAVY)
