"""An engine that does not start: one line naming why (the GPU's free and asked memory when that is the cause),
that model's slices failed, exit 3 for memory; and the worker supervisor running such a worker's share again
alone once the other engines on its GPU group have exited."""

from __future__ import annotations

import sys

import pytest

from trace_lib.cli.generate import supervise_workers
from trace_lib.cli.main import main
from trace_lib.errors import EngineStartError
from trace_lib.exitcodes import ExitCode
from trace_lib.generation.backends import base
from trace_lib.generation.backends.vllm import engine_start_error
from trace_lib.testing.tiny_bench import build_tiny_tsv

GIB = 2**30
COMMIT = "0" * 40


def test_too_little_free_memory_is_named_with_its_figures():
    exc = RuntimeError("Engine core initialization failed. See root cause above.\nFailed core proc(s): {'EngineCore': 1}")
    error = engine_start_error(exc, served_name="m3b", gpu_memory_utilization=0.15,
                               memory=lambda: (int(19.25 * GIB), int(139.8 * GIB)))
    assert error.out_of_memory
    line = error.render()
    assert line.startswith("--gpu-memory-utilization: m3b: the vllm engine did not start: its GPU has 19.2 GiB free "
                           "of 139.8 GiB and the engine asks for 0.15 of it (21.0 GiB)")
    assert "Failed core proc(s)" in line and "\n" not in line


@pytest.mark.parametrize("memory", [lambda: (int(100 * GIB), int(139.8 * GIB)), lambda: 1 / 0],
                         ids=["memory-enough", "no-cuda"])
def test_other_start_failures_keep_the_engines_own_line(memory):
    error = engine_start_error(ValueError("bad config\nmax_model_len 40000 > 32768"), served_name="m",
                               gpu_memory_utilization=0.5, memory=memory)
    assert not error.out_of_memory
    assert error.render().startswith("m: the vllm engine did not start: ValueError: max_model_len 40000 > 32768;")


def _raising_engine(**_):
    raise RuntimeError("CUDA error: no kernel image is available")


def _out_of_memory_engine(*, served_name, **_):
    raise EngineStartError(f"{served_name}: the vllm engine did not start: no memory", out_of_memory=True)


def test_create_backend_turns_an_engines_own_exception_into_one_line(monkeypatch):
    monkeypatch.setitem(base.BACKENDS, "raising", f"{__name__}:_raising_engine")
    with pytest.raises(EngineStartError) as caught:
        base.create_backend("raising", model_path="m", served_name="tiny")
    assert caught.value.render().startswith(
        "tiny: the raising engine did not start: RuntimeError: CUDA error: no kernel image is available;")
    assert not caught.value.out_of_memory


def _errno_less_engine(**kwargs):
    raise OSError("It looks like the config file at 'm/config.json' is not a valid JSON file.")


def _disk_engine(**kwargs):
    import errno
    import os

    raise OSError(errno.EIO, os.strerror(errno.EIO), "m/model.safetensors")


def test_a_librarys_errno_less_oserror_is_the_models_fault_a_real_one_the_machines(monkeypatch):
    monkeypatch.setitem(base.BACKENDS, "errnoless", f"{__name__}:_errno_less_engine")
    with pytest.raises(EngineStartError) as caught:  # one line, the slice fails (exit 1), not "the machine failed"
        base.create_backend("errnoless", model_path="m", served_name="tiny")
    assert "not a valid JSON file" in caught.value.render()
    monkeypatch.setitem(base.BACKENDS, "disk", f"{__name__}:_disk_engine")
    with pytest.raises(OSError) as machine:
        base.create_backend("disk", model_path="m", served_name="tiny")
    assert not isinstance(machine.value, EngineStartError) and machine.value.filename == "m/model.safetensors"


def test_an_engine_actor_keeps_its_start_error_for_the_driver(monkeypatch):
    """The body of a Ray engine actor (a plain object here): an engine that did not start leaves one line and its
    memory flag for ``node()`` to hand the driver, not an exception that kills the actor."""
    from trace_lib.generation.backends.ray_engines import _EngineActor

    monkeypatch.setitem(base.BACKENDS, "oom", f"{__name__}:_out_of_memory_engine")
    actor = _EngineActor("oom", "m", "tiny", {})
    assert actor.start_error == ("tiny: the vllm engine did not start: no memory", True)
    actor.close()  # nothing to close, and no error


def _argv(release, tmp_path, backend):
    return ["generate", "--trace-root", str(release.path), "--model", "tiny", str(tmp_path / "model"),
            f"sha256set:{'1' * 64}", f"org/tiny@{COMMIT}", "Tiny", "--seeds", "43", "--benchmark", "mmstar",
            "--campaign-root", str(tmp_path / "campaign"), "--data-root", str(tmp_path / "data"),
            "--backend", backend, "--unprepared-data", "--no-progress", "--model-verify", "none"]


@pytest.mark.parametrize(("factory", "code", "words"), [
    ("_raising_engine", ExitCode.FINDINGS, "the raising engine did not start: RuntimeError: CUDA error"),
    ("_out_of_memory_engine", ExitCode.SYSTEM, "the vllm engine did not start: no memory"),
])
def test_generate_fails_the_models_slices_with_one_line(release, tmp_path, capsys, monkeypatch, factory, code,
                                                        words):
    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=2)
    monkeypatch.setitem(base.BACKENDS, "raising", f"{__name__}:{factory}")
    assert main(_argv(release, tmp_path, "raising")) == code
    captured = capsys.readouterr()
    assert f"[generate] tiny: error: tiny: {words}" in captured.err
    assert "Traceback" not in captured.err
    assert "0/1 slice(s) complete; failed: tiny-seed43-mmstar" in captured.out
    assert not (tmp_path / "campaign" / "generation").exists()  # nothing half-written


def _worker(log, script: str) -> list[str]:
    """A worker command: python running ``script`` with ``LOG`` (a file it appends to) and ``RUN`` (its run)."""
    prelude = (f"import os, sys, time; LOG = {str(log)!r}; "
               "RUN = sum(1 for line in open(LOG) if line.startswith(sys.argv[1] + ' start')) if os.path.exists(LOG) else 0; "
               "open(LOG, 'a').write(f\"{sys.argv[1]} start {RUN} {os.environ['CUDA_VISIBLE_DEVICES']}\\n\"); ")
    return [sys.executable, "-c", prelude + script]


def test_a_worker_whose_engine_did_not_fit_runs_again_alone_after_the_others(tmp_path, capsys):
    log = tmp_path / "log"
    slow_ok = _worker(log, "time.sleep(0.5); open(LOG, 'a').write('w0 end\\n')") + ["w0"]
    fits_second_time = _worker(log, "sys.exit(3 if RUN == 0 else 0)") + ["w1"]
    assert supervise_workers([(slow_ok, "0"), (fits_second_time, "0")], rerun_alone=True) == ExitCode.OK
    lines = log.read_text().splitlines()
    assert lines.index("w1 start 1 0") > lines.index("w0 end")  # alone: after its sibling exited
    assert sorted(lines) == ["w0 end", "w0 start 0 0", "w1 start 0 0", "w1 start 1 0"]
    err = capsys.readouterr().err
    assert "worker 1 (GPUs 0) exited 3: the machine failed under it" in err and "running its share again alone" in err
    assert "2/2 worker(s) done" in err


@pytest.mark.parametrize(("w1_code", "rerun_alone", "expected", "w1_runs"), [
    (3, False, ExitCode.SYSTEM, 1),  # one engine per group: nothing of ours freed its GPU
    (1, True, ExitCode.FINDINGS, 1),  # a slice failed: running it again would fail again
    ("3", True, ExitCode.SYSTEM, 2),  # still no room when alone: reported, not looped
])
def test_only_a_memory_failure_beside_siblings_is_run_again_once(tmp_path, capsys, w1_code, rerun_alone, expected,
                                                                 w1_runs):
    log = tmp_path / "log"
    commands = [(_worker(log, "pass") + ["w0"], "0"), (_worker(log, f"sys.exit(int({w1_code!r}))") + ["w1"], "1")]
    assert supervise_workers(commands, rerun_alone=rerun_alone) == expected
    assert sum(line.startswith("w1 start") for line in log.read_text().splitlines()) == w1_runs
    err = capsys.readouterr().err
    assert f"worker 1 (GPUs 1) exited {int(w1_code)}: its slices are incomplete" in err
    assert "1/2 worker(s) done" in err


@pytest.mark.parametrize("backend", ["vllm", "hf"])
def test_a_local_checkpoint_that_cannot_load_is_named_before_any_engine_starts(release, tmp_path, capsys, backend):
    """Under --model-verify none too: a config.json that is a FIFO would block the loader, a missing one would
    send it to a hub. The model's slices fail with one line; nothing is imported, started or written."""
    import os

    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=2)
    (tmp_path / "model").mkdir()
    os.mkfifo(tmp_path / "model" / "config.json")
    assert main(_argv(release, tmp_path, backend)) == ExitCode.FINDINGS
    captured = capsys.readouterr()
    assert f"[generate] tiny: {tmp_path / 'model' / 'config.json'}: is a FIFO, not a regular file" in captured.err
    assert "Traceback" not in captured.err and not (tmp_path / "campaign" / "generation").exists()
