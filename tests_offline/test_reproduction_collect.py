"""tests_reproduction as a user runs it (pytest in a subprocess): ids, --print-config, skip reasons, failures."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from trace_lib.testing.child_pytest import child_pytest_argv, child_pytest_env

REPO = Path(__file__).resolve().parents[1]
SLICES = "tests_reproduction/test_slices.py"


def _run(release, *argv, extra_path: Path | None = None):
    env = {**os.environ, "TRACE_ROOT": str(release.path)}
    env.pop("TRACE_JUDGE_URL", None)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), env.get("PYTHONPATH")]))
    command = child_pytest_argv(*argv[2:]) if argv[:2] == ("-m", "pytest") else [sys.executable, *argv]
    return subprocess.run(command, cwd=REPO, env=child_pytest_env(env), capture_output=True, text=True, timeout=120)


def test_print_config_prints_the_plan_and_runs_nothing(release):
    selection = ["--model-id", "trace-qwen2.5-vl-3b", "--seeds", "42", "43", "--benchmark", "mathvista"]
    printed = _run(release, "-m", "pytest", "tests_reproduction", "--print-config", *selection)
    planned = _run(release, "-m", "trace_lib", "plan", "--print-config", *selection)
    assert printed.returncode == planned.returncode == 0
    assert printed.stdout == planned.stdout and "slice=trace-qwen2.5-vl-3b-seed43-mathvista rows=" in printed.stdout


def test_ids_skip_reasons_and_a_missing_protocol_failure(release, tmp_path):
    """Ids are MODEL-seedSEED-BENCHMARK; each blocker skips with its exact sentence; no protocol = failure."""
    plugin = tmp_path / "plugins" / "drop_erqa_protocol.py"
    plugin.parent.mkdir()
    plugin.write_text("from trace_lib.benchmarks import registry\n"
                      "registry.PROTOCOLS['erqa'] = 'trace_lib.benchmarks._not_written_yet:PROTOCOL'\n")
    present, absent = tmp_path / "models" / "present", tmp_path / "models" / "absent"
    present.mkdir(parents=True)
    data = tmp_path / "data"
    data.mkdir()
    (data / "MMStar.tsv").write_text("index\tquestion\n")  # present: mmstar is blocked by its judge route next
    rev, src = "0" * 40, "org/m@" + "0" * 40
    junit = tmp_path / "junit.xml"
    result = _run(
        release, "-m", "pytest", SLICES, "-p", "drop_erqa_protocol", "--junitxml", str(junit),
        "--model", "absent-model", str(absent), rev, src, "Absent",
        "--model", "present-model", str(present), rev, src, "Present",
        "--seeds", "42", "--benchmark", "mathvista", "--benchmark", "mmstar", "--benchmark", "erqa",
        "--data-root", str(data), "--backend", "hf", "--campaign-root", str(tmp_path / "campaign"),
        extra_path=plugin.parent,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        node = next((n for n in case if n.tag in ("skipped", "failure", "error")), None)
        outcomes[case.get("name")] = (node.tag if node is not None else "passed",
                                      (node.get("message") if node is not None else "") or "")
    empty = outcomes.pop("test_planned[NOTSET]")  # models without canonical scores plan no mean, overall or claim
    assert empty[0] == "skipped" and "got empty parameter set" in empty[1]
    fail_message = "Failed: erqa: evaluation protocol not implemented; this slice cannot be scored by trace-repro yet"
    assert outcomes == {
        "test_slice[absent-model-seed42-mathvista]": ("skipped", f"model dir missing: absent-model ({absent})"),
        "test_slice[absent-model-seed42-mmstar]": ("skipped", f"model dir missing: absent-model ({absent})"),
        "test_slice[absent-model-seed42-erqa]": ("failure", fail_message),
        "test_slice[present-model-seed42-mathvista]": (
            "skipped", f"dataset missing: mathvista ({data / 'MathVista_MINI.tsv'})"),
        "test_slice[present-model-seed42-mmstar]": (
            "skipped", "judge URL not set (--judge-url / TRACE_JUDGE_URL) for judge route mmstar"),
        "test_slice[present-model-seed42-erqa]": ("failure", fail_message),
    }
