"""``trace-repro judge serve|stop`` with a fake ``vllm`` executable: start, readiness, crash, timeout, stop, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trace_lib.cli.main import main
from trace_lib.errors import InputError, JudgeError, UsageError
from trace_lib.release import identity
from trace_lib.scoring import judge_pool as jp
from trace_lib.scoring.judge import OpenAIJudge
from trace_lib.testing.fake_vllm import fake_judge_weights, free_port_run, write_fake_vllm

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A fake vllm, judge weights, a chat template and a record directory."""
    vllm = write_fake_vllm(tmp_path / "bin")
    weights = fake_judge_weights(tmp_path / "models" / "qwen3-32b-judge")
    template = tmp_path / "no_think.jinja"
    template.write_text("{{ messages }}")
    record = tmp_path / "record"
    record.mkdir()
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(record))
    yield {"vllm": vllm, "weights": weights, "template": template, "record": record, "logs": tmp_path / "logs"}
    for path in record.glob("*.json"):  # a failing assertion must not leave a fake server behind
        try:
            os.kill(json.loads(path.read_text())["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass


def _spec(release, env, groups="0,1;2", **kw) -> jp.PoolSpec:
    return jp.pool_spec(release, judge_model=env["weights"], gpu_groups=groups, port_start=free_port_run(2),
                        chat_template=env["template"], vllm=str(env["vllm"]), log_dir=env["logs"], **kw)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:  # not our child: gone only as a zombie waiting for its parent
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True


def test_serve_starts_one_server_per_group_with_upstreams_flags_and_stop_ends_them(release, env, capsys):
    spec = _spec(release, env)
    pool = jp.start_pool(spec, poll_s=0.05)
    try:
        assert len(pool.servers) == 2 and pool.urls == spec.urls()
        OpenAIJudge(pool.judge_url).check()  # both endpoints list the judge
        first = json.loads((env["record"] / f"{spec.port_start}.json").read_text())
        second = json.loads((env["record"] / f"{spec.port_start + 1}.json").read_text())
        argv = first["argv"]
        assert argv[:2] == ["serve", str(env["weights"].resolve())]
        flags = dict(zip(argv[2::1], argv[3::1]))
        for flag, value in [("--max-model-len", "8192"), ("--max-num-seqs", "128"),
                            ("--max-num-batched-tokens", "32768"), ("--gpu-memory-utilization", "0.90"),
                            ("--reasoning-parser", "qwen3"), ("--tensor-parallel-size", "2"),
                            ("--chat-template", str(env["template"].resolve())), ("--host", "127.0.0.1")]:
            assert flags[flag] == value, flag
        names = argv[argv.index("--served-model-name") + 1: argv.index("--host")]
        assert names == ["qwen3-32b-judge", "qwen3-32b-trace-validation-extractor"]
        assert "--trust-remote-code" in argv
        assert first["env"]["CUDA_VISIBLE_DEVICES"] == "0,1" and second["env"]["CUDA_VISIBLE_DEVICES"] == "2"
        assert (first["env"]["VLLM_PORT"], second["env"]["VLLM_PORT"]) == ("29000", "29100")
        assert dict(zip(second["argv"][2:], second["argv"][3:]))["--tensor-parallel-size"] == "1"
        lines = (env["logs"] / "pids.txt").read_text().splitlines()
        assert [line.split()[1:3] for line in lines] == [[str(spec.port_start), "0,1"], [str(spec.port_start + 1), "2"]]
        assert (env["logs"] / "endpoints.txt").read_text().split() == pool.urls
    finally:
        code = main(["judge", "stop", "--log-dir", str(env["logs"]), "--grace", "5"])
    assert code == 0 and "stopped 2 server(s)" in capsys.readouterr().out
    for process in pool.processes:
        process.wait(timeout=5)
    assert all(_gone(s.pid) for s in pool.servers)
    assert (env["logs"] / "pids.txt").read_text() == ""


def test_a_server_crashing_while_starting_is_one_line_and_nothing_stays_up(release, env, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "crash")
    with pytest.raises(JudgeError) as info:
        jp.start_pool(_spec(release, env), poll_s=0.05)
    message = str(info.value)
    assert "exited with code 3 while starting (RuntimeError: CUDA out of memory (fake))" in message
    assert "\n" not in message and (env["logs"] / "pids.txt").read_text() == ""
    assert not (env["logs"] / "endpoints.txt").exists() and not (env["logs"] / "pool.json").exists()  # no stale pool


def test_readiness_timeout_stops_every_server(release, env, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "hang")
    with pytest.raises(JudgeError, match=r"not ready within 0.5 s"):
        jp.start_pool(_spec(release, env, ready_timeout_s=0.5), poll_s=0.05)
    pids = [json.loads(p.read_text())["pid"] for p in env["record"].glob("*.json")]
    assert pids and all(_gone(pid) for pid in pids)


def test_a_taken_port_and_missing_weights_are_clear_errors(release, env, tmp_path):
    spec = _spec(release, env)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", spec.port_start + 1))
        sock.listen()
        with pytest.raises(UsageError, match=f"port {spec.port_start + 1} is taken"):
            jp.start_pool(spec)
    with pytest.raises(InputError, match="judge weights missing"):
        jp.start_pool(jp.pool_spec(release, judge_model=tmp_path / "empty", gpu_groups="0", log_dir=env["logs"],
                                   chat_template=env["template"], vllm=str(env["vllm"])))


def test_the_chat_template_comes_from_the_release_or_is_a_one_line_error(release, tmp_path):
    from types import SimpleNamespace

    if not (release.path / jp.CHAT_TEMPLATE_REL).is_file():
        with pytest.raises(InputError, match="not in this release copy .*--chat-template FILE"):
            jp.release_chat_template(release)
    fake = tmp_path / "release"
    (fake / "rlvr/examples/prompts").mkdir(parents=True)
    (fake / jp.CHAT_TEMPLATE_REL).write_text("tampered")
    (fake / identity.RELEASE_FILES).write_text(json.dumps(
        {"files": [{"path": "examples/prompts/chat_template_no_think.jinja", "sha256": "0" * 64}]}))
    with pytest.raises(InputError, match="chat template differs from the release record"):
        jp.release_chat_template(SimpleNamespace(path=fake))


@pytest.mark.parametrize(("text", "groups"), [("0 1 2 3", ("0", "1", "2", "3")), ("0,1;2,3", ("0,1", "2,3")),
                                              (" 4,5 ; 6 ", ("4,5", "6"))])
def test_gpu_groups_are_parsed_as_upstreams_launcher(text, groups):
    from trace_lib.options import cuda_visible_devices, parse_gpu_groups

    assert tuple(cuda_visible_devices(group) for group in parse_gpu_groups(text)) == groups


@pytest.mark.parametrize("text", ["", "a b", "0,1;1,2"])
def test_bad_gpu_groups_are_usage_errors(text):
    with pytest.raises(UsageError):
        from trace_lib.options import parse_gpu_groups

        parse_gpu_groups(text)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_stop_signal_while_waiting_stops_every_server(release, env, tmp_path, sig):
    port = free_port_run(1)
    environment = {**os.environ, "FAKE_VLLM_MODE": "hang", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "trace_lib", "judge", "serve", "--trace-root", str(release.path),
               "--judge-model", str(env["weights"]), "--gpu-groups", "0", "--port-start", str(port),
               "--chat-template", str(env["template"]), "--vllm", str(env["vllm"]), "--log-dir", str(env["logs"])]
    process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # interrupt once the command is waiting for readiness: it has printed its start line (so the server is
        # in its pool) and the fake server has recorded itself
        started = process.stdout.readline()
        deadline = time.monotonic() + 60
        while not list(env["record"].glob("*.json")) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        if not started.startswith("[judge] start") or not list(env["record"].glob("*.json")):
            process.kill()
            pytest.fail(f"the fake server never started: {started!r} {process.communicate(timeout=10)}")
        process.send_signal(sig)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    # 128 + signum, or death by the signal after the handler ran (CPython can re-raise SIGINT at exit): a shell
    # reads both as 128 + signum; SIGTERM killed the command and left its servers running
    assert process.returncode in (128 + sig, -sig), err
    assert "interrupted: every server started was stopped" in err
    server_pid = json.loads(next(env["record"].glob("*.json")).read_text())["pid"]
    deadline = time.monotonic() + 5
    while not _gone(server_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(server_pid)


def test_a_stop_signal_python_discarded_while_waiting_still_stops_every_server(release, env, monkeypatch):
    """A Ctrl-C handled where Python discards the exception (here a weakref callback; in the lane, the import
    system's lock clean-up) was lost, and the readiness wait went on to its timeout: the next poll raises it."""
    from trace_lib.interrupts import Interrupted, stop_on_signals
    from trace_lib.testing.discarded_signal import signal_python_discards

    monkeypatch.setenv("FAKE_VLLM_MODE", "hang")
    signalled = []

    def not_ready(url, names):
        if not signalled and list(env["record"].glob("*.json")):  # the server is up and in the pool
            signalled.append(url)
            signal_python_discards()
        return False

    monkeypatch.setattr(jp, "_ready", not_ready)
    start = time.monotonic()
    with pytest.raises(Interrupted):
        with stop_on_signals():
            jp.start_pool(_spec(release, env, groups="0", ready_timeout_s=30), poll_s=0.05)
    assert time.monotonic() - start < 15
    pids = [json.loads(p.read_text())["pid"] for p in env["record"].glob("*.json")]
    deadline = time.monotonic() + 5
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids and all(_gone(pid) for pid in pids)


def test_judge_serve_takes_a_memory_share_for_a_gpu_shared_with_generation(release, env, capsys):
    """``judge serve --gpu-memory-utilization F`` replaces upstream's 0.90 (the rest of the GPU left to the
    generation engines: docs/judge.md, 'Sharing a GPU with generation')."""
    port = free_port_run(1)
    code = main(["judge", "serve", "--trace-root", str(release.path), "--judge-model", str(env["weights"]),
                 "--gpu-groups", "0", "--port-start", str(port), "--chat-template", str(env["template"]),
                 "--vllm", str(env["vllm"]), "--log-dir", str(env["logs"]), "--gpu-memory-utilization", "0.6"])
    try:
        assert code == 0
        argv = json.loads((env["record"] / f"{port}.json").read_text())["argv"]
        assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.6"
        assert argv.count("--gpu-memory-utilization") == 1
    finally:
        main(["judge", "stop", "--log-dir", str(env["logs"]), "--grace", "5"])


def test_process_identity_reads_start_time_group_and_session_and_a_zombie_is_gone():
    me = jp.process_identity(os.getpid())
    assert me.start_ticks > 0 and (me.pgid, me.sid) == (os.getpgrp(), os.getsid(0))
    child = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
        assert jp.process_identity(child.pid) is None  # exited, not yet reaped: gone, not a server
    finally:
        child.wait()


def test_the_callers_own_pid_is_refused_even_where_it_leads_no_group(monkeypatch):
    monkeypatch.setattr(jp.os, "getpgrp", lambda: 2 ** 22 + 1)  # a caller that does not lead its process group
    with pytest.raises(InputError, match=f"pid {os.getpid()} would signal the caller's own process group"):
        jp.check_pid(os.getpid())


def test_a_group_leader_that_leads_no_session_is_not_owned(tmp_path):
    process = subprocess.Popen([sys.executable, "-c", "import os, time; os.setpgid(0, 0); print(flush=True); "
                                "time.sleep(30)"], stdout=subprocess.PIPE)  # its own group, the caller's session
    try:
        process.stdout.readline()  # it has left the caller's group
        server = jp.observe_server(process.pid, 18100, "0", tmp_path / "log")
        assert server.start_ticks is not None and not jp.owned(server, boot=jp.boot_id())
    finally:
        process.kill()
        process.wait()


def test_a_release_without_a_record_of_the_chat_template_still_serves_it(tmp_path):
    from types import SimpleNamespace

    (tmp_path / "rlvr/examples/prompts").mkdir(parents=True)
    (tmp_path / jp.CHAT_TEMPLATE_REL).write_text("{{ messages }}")
    (tmp_path / identity.RELEASE_FILES).write_text(json.dumps({"files": []}))
    assert jp.release_chat_template(SimpleNamespace(path=tmp_path)) == tmp_path / jp.CHAT_TEMPLATE_REL


def test_judge_weights_need_a_config_and_bin_weights_will_do(tmp_path):
    (tmp_path / "model.bin").write_bytes(b"w")
    with pytest.raises(InputError, match=r"judge weights missing \(no config.json\)"):
        jp.check_weights(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    jp.check_weights(tmp_path)


def test_extra_args_end_the_serve_command_and_a_multiproc_method_set_by_the_user_is_kept(tmp_path):
    spec = jp.PoolSpec(model_root=tmp_path, gpu_groups=("0",), log_dir=tmp_path, chat_template=None,
                       extra_args=("--enforce-eager",))
    assert jp.serve_command(spec, 0)[-1] == "--enforce-eager"
    assert jp.serve_environment(spec, 0, base={})["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    kept = jp.serve_environment(spec, 0, base={"VLLM_WORKER_MULTIPROC_METHOD": "fork"})
    assert kept["VLLM_WORKER_MULTIPROC_METHOD"] == "fork"


def test_a_stale_endpoints_file_is_gone_while_the_pool_starts(release, env, monkeypatch):
    env["logs"].mkdir()
    (env["logs"] / "endpoints.txt").write_text("http://127.0.0.1:1/v1\n")  # an earlier pool's
    seen = []
    monkeypatch.setattr(jp, "_ready", lambda url, names: seen.append((env["logs"] / "endpoints.txt").exists()) or True)
    pool = jp.start_pool(_spec(release, env, groups="0"), poll_s=0.05)
    try:
        assert seen == [False] and (env["logs"] / "endpoints.txt").read_text() == pool.urls[0] + "\n"
    finally:
        pool.stop(grace_s=5.0)


def test_a_server_that_ends_on_sigterm_is_not_killed_and_the_stop_removes_the_endpoints(tmp_path):
    from trace_lib.testing.cli_runner import run_cli

    process = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        jp.write_records(tmp_path, [jp.observe_server(process.pid, 18100, "0", tmp_path / "log")], jp.boot_id())
        (tmp_path / "endpoints.txt").write_text("http://127.0.0.1:18100/v1\n")
        result = run_cli(["judge", "stop", "--log-dir", str(tmp_path), "--grace", "5"])
        assert result.returncode == 0 and "stopped 1 server(s)" in result.stdout, result.stderr
        assert f"[judge] stop pid={process.pid}" in result.stdout and "[judge] kill" not in result.stdout
        assert sorted(p.name for p in tmp_path.iterdir()) == ["pids.txt"]
    finally:
        process.kill()
        process.wait()


def test_pids_file_blank_lines_are_skipped_and_a_bad_port_is_one_line(tmp_path):
    (tmp_path / "pids.txt").write_text("\n4242 18100 0 endpoint.log\n\n")
    assert [(s.pid, s.port) for s in jp.read_pids(tmp_path)] == [(4242, 18100)]
    (tmp_path / "pids.txt").write_text("4242 18l00 0 endpoint.log\n")
    with pytest.raises(InputError, match="not 'pid port group log'"):
        jp.read_pids(tmp_path)
    (tmp_path / "pids.txt").write_text("--3 18100 0 endpoint.log\n")  # int('--3') was a ValueError traceback
    with pytest.raises(InputError, match="not 'pid port group log'"):
        jp.read_pids(tmp_path)
    (tmp_path / "pids.txt").write_text("-3 18100 0 endpoint.log\n")
    with pytest.raises(InputError):
        jp.read_pids(tmp_path)


def test_pool_spec_refuses_a_zero_timeout_and_a_missing_chat_template(release, env):
    with pytest.raises(UsageError, match="must be positive"):
        _spec(release, env, ready_timeout_s=0)
    with pytest.raises(InputError, match="no such chat template"):
        jp.pool_spec(release, judge_model=env["weights"], gpu_groups="0", chat_template=env["template"].parent / "x",
                     log_dir=env["logs"])


def test_the_last_servers_port_may_be_65535_but_not_beyond(release, env):
    def spec(groups, port):  # noqa: ANN001, ANN202
        return jp.pool_spec(release, judge_model=env["weights"], gpu_groups=groups, port_start=port,
                            chat_template=env["template"], log_dir=env["logs"])

    assert spec("0 1", 65534).urls()[-1].endswith(":65535/v1") and spec("0", 65535).port(0) == 65535
    with pytest.raises(UsageError, match="not a port"):
        spec("0 1", 65535)
