"""``judge stop`` treats pids.txt as input: it signals only process groups this suite started (checked against
pool.json and /proc), never pid 0, 1, a negative pid or its own group, and escalates SIGTERM to SIGKILL on the
whole group."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from trace_lib.scoring import judge_pool as jp
from trace_lib.testing.cli_runner import run_cli

pytestmark = pytest.mark.offline
_REAL_KILL = os.kill  # for the tests' own cleanup while the fixture records every signal instead


@pytest.fixture
def signals(monkeypatch):
    """Every os.killpg/os.kill call, none of them delivered."""
    sent = []
    monkeypatch.setattr(os, "killpg", lambda pid, sig: sent.append(("killpg", pid, sig)))
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append(("kill", pid, sig)))
    return sent


def _stop(log_dir):
    return run_cli(["judge", "stop", "--log-dir", str(log_dir), "--grace", "0"])


def _one_error_line(result, *needles):
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


@pytest.mark.parametrize("pid", ["0", "1", "-1", "-7", "OWN_GROUP"])
def test_pid_0_1_negative_or_own_group_is_one_line_and_nothing_is_signalled(tmp_path, signals, pid):
    pid = str(os.getpgrp()) if pid == "OWN_GROUP" else pid
    (tmp_path / "pids.txt").write_text(f"{pid} 18100 0 {tmp_path}/endpoint.log\n")
    jp.write_json_atomic(tmp_path / "pool.json", {"boot_id": jp.boot_id(), "servers": [
        {"pid": int(pid), "start_ticks": 1}]})  # a record does not make them signalable either
    result = _stop(tmp_path)
    assert result.returncode == 2
    _one_error_line(result, "pids.txt", "line 1", f"pid {pid}")
    assert signals == []
    assert (tmp_path / "pids.txt").read_text().startswith(pid)  # input left as it was


def test_a_process_the_suite_did_not_start_is_never_signalled(tmp_path, signals):
    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)
    neighbour = subprocess.Popen(["sleep", "30"])  # in the caller's group, not leading one
    try:
        pids = f"{stranger.pid} 18100 0 log\n{neighbour.pid} 18101 1 log\n"
        (tmp_path / "pids.txt").write_text(pids)
        result = _stop(tmp_path)  # no pool.json at all
        assert result.returncode == 1, result.stderr  # findings: running processes left in the record
        assert result.stdout.count("not signalled") == 2 and "stopped 0 server(s)" in result.stdout
        assert "kept 2 line(s)" in result.stderr and (tmp_path / "pids.txt").read_text() == pids  # not forgotten
        # a record with the right pid but another start time (the pid was reused) does not vouch for it
        (tmp_path / "pids.txt").write_text(f"{stranger.pid} 18100 0 log\n")
        real = jp.observe_server(stranger.pid, 18100, "0", tmp_path / "log")
        jp.write_json_atomic(tmp_path / "pool.json", {"boot_id": jp.boot_id(), "servers": [
            {"pid": stranger.pid, "start_ticks": real.start_ticks + 1}]})
        record = (tmp_path / "pool.json").read_bytes()
        assert _stop(tmp_path).returncode == 1 and (tmp_path / "pool.json").read_bytes() == record
        # nor does the right start time on another boot
        (tmp_path / "pids.txt").write_text(f"{stranger.pid} 18100 0 log\n")
        jp.write_json_atomic(tmp_path / "pool.json", {"boot_id": "another-boot", "servers": [
            {"pid": stranger.pid, "start_ticks": real.start_ticks}]})
        assert _stop(tmp_path).returncode == 1
        assert signals == [] and stranger.poll() is None and neighbour.poll() is None
    finally:
        for process in (stranger, neighbour):
            _REAL_KILL(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.parametrize("data", [b"\xff\xfe1 2 3 4\n", b"123 18100 0 caf\xe9.log\n", b"\xef\xbb\xbf123 1 0 x\n",
                                  b"12a 18100 0 x\n", b"\xd9\xa3 18100 0 x\n"])
def test_a_malformed_or_non_utf8_pids_file_is_one_line(tmp_path, signals, data):
    (tmp_path / "pids.txt").write_bytes(data)
    result = _stop(tmp_path)
    assert result.returncode == 2
    _one_error_line(result, "pids.txt")
    assert signals == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["corrupt", "not-a-record", "fifo"])
def test_an_unreadable_pool_record_is_one_line_and_nothing_is_signalled_or_removed(tmp_path, signals, kind):
    import os

    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        (tmp_path / "pids.txt").write_text(f"{stranger.pid} 18100 0 log\n")
        (tmp_path / "endpoints.txt").write_text("http://127.0.0.1:18100/v1\n")
        if kind == "fifo":
            os.mkfifo(tmp_path / "pool.json")  # reading it would block for ever
        else:
            (tmp_path / "pool.json").write_text("[1,2" if kind == "corrupt" else '{"boot_id": "x"}')
        before = {p.name: None if p.is_fifo() else p.read_bytes() for p in tmp_path.iterdir()}
        result = _stop(tmp_path)
        assert result.returncode == 2
        _one_error_line(result, "pool.json")
        assert {p.name: None if p.is_fifo() else p.read_bytes() for p in tmp_path.iterdir()} == before
        assert signals == [] and stranger.poll() is None
    finally:
        _REAL_KILL(stranger.pid, signal.SIGKILL)
        stranger.wait()


@pytest.mark.timeout(60)
def test_a_fifo_for_pids_txt_or_a_file_for_the_log_dir_is_named_as_such(tmp_path, signals):
    import os

    os.mkfifo(tmp_path / "pids.txt")
    result = _stop(tmp_path)
    assert result.returncode == 2 and "is a FIFO" in result.stderr and (tmp_path / "pids.txt").is_fifo()
    (tmp_path / "file").write_text("x")
    result = _stop(tmp_path / "file")
    assert result.returncode == 2 and "--log-dir: is a regular file, not a directory" in result.stderr
    assert signals == []


def _stubborn_group():
    """A process group leader that ignores SIGTERM and has a child of its own that ignores it too; returns the
    leader's Popen and the child's pid once both have set up."""
    leader = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 60 & echo $!; wait"], stdout=subprocess.PIPE,
                              start_new_session=True, text=True)
    return leader, int(leader.stdout.readline())


def _wait_gone(pid, leader):
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        leader.poll()
        if jp.process_identity(pid) is None:
            return True
        time.sleep(0.01)
    return False


def test_stop_kills_the_whole_group_after_the_grace_period_when_sigterm_is_ignored(tmp_path):
    leader, child = _stubborn_group()
    try:
        server = jp.observe_server(leader.pid, 18100, "0", tmp_path / "endpoint.log")
        jp.write_records(tmp_path, [server], jp.boot_id())
        result = run_cli(["judge", "stop", "--log-dir", str(tmp_path), "--grace", "0.05"])
        assert result.returncode == 0, result.stderr
        assert f"[judge] kill pid={leader.pid}" in result.stdout and "stopped 1 server(s)" in result.stdout
        assert _wait_gone(leader.pid, leader), "the leader survived: no SIGKILL after the grace period"
        assert _wait_gone(child, leader), "the leader's child survived: the group was not signalled (kill, not killpg)"
        assert (tmp_path / "pids.txt").read_text() == "" and not (tmp_path / "pool.json").exists()
    finally:
        for pid in (child, leader.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        leader.wait()


def test_a_bad_host_is_named_as_such_not_as_a_taken_port():
    from trace_lib.errors import UsageError

    for host in ("192.0.2.1", "8.8.8.8"):  # numeric (no DNS lookup), not addresses of this machine
        with pytest.raises(UsageError, match="--host") as info:
            jp.port_taken(host, 18100)
        assert "taken" not in str(info.value)


def test_the_record_forgets_only_what_it_stopped(tmp_path):
    """One recorded server of the suite's and one stranger: the server is stopped, the stranger is not signalled
    and stays the record's one line (exit 1), with no pool.json entry vouching for it."""
    server_proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        server = jp.observe_server(server_proc.pid, 18100, "0", tmp_path / "endpoint.log")
        jp.write_records(tmp_path, [server], jp.boot_id())
        with open(tmp_path / "pids.txt", "a") as handle:
            handle.write(f"{stranger.pid} 18101 1 log\n")
        result = run_cli(["judge", "stop", "--log-dir", str(tmp_path), "--grace", "0.05"])
        assert result.returncode == 1 and "stopped 1 server(s)" in result.stdout, result.stderr
        assert _wait_gone(server_proc.pid, server_proc) and stranger.poll() is None
        assert (tmp_path / "pids.txt").read_text() == f"{stranger.pid} 18101 1 log\n"
        assert jp._read_record(tmp_path)["servers"] == []
    finally:
        for process in (server_proc, stranger):
            try:
                _REAL_KILL(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
