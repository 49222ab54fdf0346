"""``pytest --judge-serve --phase ...``: the session's judge pool (fake ``vllm``) and upstream's phase order.

A throwaway project using the trace-repro plugin runs in a subprocess: in ``--phase all`` every test first runs as
``--phase generate`` in a child session, the pool starts only after it ended, the tests then run as ``score`` with
``TRACE_JUDGE_URL`` pointing at the pool; the pool is stopped at the end, also when a test fails, on Ctrl-C and on
SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trace_lib.testing.child_pytest import child_pytest_argv, child_pytest_env
from trace_lib.testing.fake_vllm import fake_judge_weights, free_port_run, write_fake_vllm

REPO = Path(__file__).resolve().parents[1]

THROWAWAY = '''
import json, os, time, urllib.request
from pathlib import Path

LOG = Path(os.environ["PHASE_LOG"])

def test_slice(trace_phase, request):
    url = os.environ.get("TRACE_JUDGE_URL")
    with LOG.open("a") as handle:
        handle.write(json.dumps({"phase": trace_phase, "t": time.time(), "url": url}) + "\\n")
    if trace_phase == "generate":
        assert url is None  # nothing needs a judge while generating
        return
    with urllib.request.urlopen(url.split(",")[0] + "/models", timeout=5) as response:
        names = [m["id"] for m in json.loads(response.read())["data"]]
    assert "qwen3-32b-judge" in names
    if os.environ.get("THROWAWAY_SLEEP"):
        Path(os.environ["THROWAWAY_SLEEP"]).write_text("sleeping")
        time.sleep(60)


def test_fails(trace_phase):
    assert trace_phase == "generate" or not os.environ.get("THROWAWAY_FAIL"), "a failing test"
'''


@pytest.fixture
def project(release, tmp_path):
    (tmp_path / "proj").mkdir()
    project = tmp_path / "proj"
    (project / "conftest.py").write_text('pytest_plugins = ["trace_lib.pytest_plugin"]\n')
    (project / "test_throwaway.py").write_text(THROWAWAY)
    template = tmp_path / "no_think.jinja"
    template.write_text("{{ messages }}")
    record = tmp_path / "record"
    record.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TRACE_"))}
    env.update(TRACE_ROOT=str(release.path), PYTHONPATH=str(REPO), FAKE_VLLM_RECORD=str(record),
               PHASE_LOG=str(tmp_path / "phases.jsonl"))
    env = child_pytest_env(env)
    args = [*child_pytest_argv("-q", "-p", "no:cacheprovider"), "test_throwaway.py", "--judge-serve",
            "--judge-model", str(fake_judge_weights(tmp_path / "judge")), "--judge-gpu-groups", "0 1",
            "--judge-port-start", str(free_port_run(2)), "--judge-chat-template", str(template),
            "--judge-vllm", str(write_fake_vllm(tmp_path / "bin")), "--judge-log-dir", str(tmp_path / "logs"),
            f"--junitxml={tmp_path / 'receipts.xml'}"]
    yield {"args": args, "env": env, "cwd": project, "record": record, "tmp": tmp_path}
    for path in record.glob("*.json"):  # a failing assertion must not leave a fake server behind
        try:
            os.kill(json.loads(path.read_text())["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass


def _phases(project) -> list[dict]:
    path = project["tmp"] / "phases.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _server_pids(project) -> list[int]:
    return [json.loads(p.read_text())["pid"] for p in project["record"].glob("*.json")]


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_phase_all_generates_first_then_judges_through_the_pool_and_stops_it_even_on_failure(project):
    env = {**project["env"], "THROWAWAY_FAIL": "1"}  # test_fails fails in the score phase
    done = subprocess.run([*project["args"], "--phase", "all"], cwd=project["cwd"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    phases = _phases(project)
    assert [p["phase"] for p in phases] == ["generate", "score"]
    started = min(p.stat().st_mtime for p in project["record"].glob("*.json"))
    assert phases[0]["t"] <= started <= phases[1]["t"]  # the judge started after the last generation
    assert len(phases[1]["url"].split(",")) == 2  # one endpoint per judge GPU group
    pids = _server_pids(project)
    assert len(pids) == 2 and all(_gone(pid) for pid in pids)
    receipts = (project["tmp"] / "receipts.xml").read_text()
    assert 'name="phase" value="score"' in receipts and 'name="phase_requested" value="all"' in receipts
    assert 'name="phase" value="generate"' in (project["tmp"] / "receipts.generate.xml").read_text()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_stops_the_pool(project, sig):
    marker = project["tmp"] / "sleeping"
    env = {**project["env"], "THROWAWAY_SLEEP": str(marker)}
    process = subprocess.Popen([*project["args"], "--phase", "score"], cwd=project["cwd"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert marker.exists(), process.communicate(timeout=10)[0] if process.poll() is not None else "no start"
        process.send_signal(sig)
        output = process.communicate(timeout=60)[0]
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 2, output  # pytest's "interrupted"
    pids = _server_pids(project)
    assert pids and all(_gone(pid) for pid in pids)


def test_judge_serve_with_a_judge_url_is_a_usage_error():
    from types import SimpleNamespace

    from trace_lib import pytest_judge

    values = {"judge_serve": True, "judge_url": "http://127.0.0.1:1/v1", "trace_phase": None}
    config = SimpleNamespace(getoption=lambda name, default=None: values.get(name, default))
    with pytest.raises(pytest.UsageError, match="drop --judge-url"):
        pytest_judge.pytest_configure(config)
    values["judge_url"] = None
    pytest_judge.pytest_configure(config)  # fine without
