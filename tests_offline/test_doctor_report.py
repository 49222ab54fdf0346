"""``trace-repro doctor``: each missing piece is named with its fix, lanes follow their checks, nothing heavy loads."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from trace_lib.doctor import registry
from trace_lib.doctor.archive import check_archive
from trace_lib.doctor.context import CheckResult, DoctorContext, Status
from trace_lib.doctor.cuda import NO_GPU_FIX, check_cuda
from trace_lib.doctor.datasets import check_datasets
from trace_lib.doctor.extras import check_extra, extra_requirements
from trace_lib.doctor.judge import check_judge
from trace_lib.doctor.models import check_models
from trace_lib.doctor.report import diagnose
from trace_lib.errors import UsageError
from trace_lib.testing.openai_server import OpenAIStubServer

REPO = Path(__file__).resolve().parents[1]


def _ctx(tmp_path: Path, **kw) -> DoctorContext:
    env = {"PATH": str(tmp_path / "empty-bin"), **kw.pop("env", {})}
    return DoctorContext(env=env, **kw)


def _fake_dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- CUDA ------------------------------------------------------------------------------------------------------

def test_cuda_less_machine_says_no_gpu_and_how(tmp_path):
    result = check_cuda(_ctx(tmp_path))
    assert result.status is Status.MISSING and "nvidia-smi not found" in result.detail
    assert result.missing == "a CUDA GPU" and result.fix == NO_GPU_FIX


def test_cuda_devices_and_memory_from_nvidia_smi(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, NVIDIA H200, 143771, 512'\necho '1, NVIDIA H200, 143771, 0'\n")
    smi.chmod(0o755)
    result = check_cuda(DoctorContext(env={"PATH": str(bin_dir)}))
    assert result.status is Status.OK
    assert result.detail == ("2 device(s) via nvidia-smi: 0: NVIDIA H200 140.4 GiB (0.5 GiB used); "
                             "1: NVIDIA H200 140.4 GiB (0.0 GiB used)")
    hidden = check_cuda(DoctorContext(env={"PATH": str(bin_dir), "CUDA_VISIBLE_DEVICES": ""}))
    assert hidden.status is Status.MISSING and hidden.fix == "unset CUDA_VISIBLE_DEVICES"


# -- extras ----------------------------------------------------------------------------------------------------

def test_missing_extra_package_names_it_and_the_pip_command(tmp_path, monkeypatch):
    from trace_lib.doctor import extras

    real = extras.installed_version
    monkeypatch.setattr(extras, "installed_version", lambda name: None if name == "hypothesis" else real(name))
    result = check_extra("test")
    assert result.status is Status.MISSING and result.missing == "hypothesis not installed"
    assert result.fix.startswith("pip install") and result.fix.endswith("[test]'")


def test_ranges_are_read_from_the_installed_metadata():
    names = {r.name for r in extra_requirements("eval")}
    assert "vllm" in names and "sympy" in names  # sympy arrives through the trace-repro[math] self-reference
    assert any(r.name == "verl" and str(r.specifier) for r in extra_requirements("train"))


def test_wrong_vllm_version_is_outside_the_declared_range(tmp_path, monkeypatch):
    (vllm,) = [r for r in extra_requirements("eval") if r.name == "vllm"]
    _fake_dist(tmp_path / "site", "vllm", "0.1.0")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    result = check_extra("eval")
    assert result.status is Status.MISSING
    assert result.missing == f"vllm 0.1.0 (supported {vllm.specifier})"
    assert result.fix == f"pip install 'vllm{vllm.specifier}'"


def test_supported_vllm_version_passes_its_requirement(tmp_path, monkeypatch):
    _fake_dist(tmp_path / "site", "vllm", "0.24.0")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    result = check_extra("eval")
    assert not result.missing.startswith("vllm")  # a later package of the extra may still be absent here
    assert result.status is Status.MISSING or result.detail.startswith("vllm 0.24.0, ")


# -- models, data, judge, archive ------------------------------------------------------------------------------

def test_missing_model_root_and_missing_model_dir(release, tmp_path):
    absent = check_models(_ctx(tmp_path, trace_root=str(release.path), model_root=str(tmp_path / "nowhere")))
    assert absent.status is Status.MISSING
    assert absent.fix == f"trace-repro prepare-models --model-root {tmp_path / 'nowhere'}"
    (tmp_path / "models").mkdir()
    empty = check_models(_ctx(tmp_path, trace_root=str(release.path), model_root=str(tmp_path / "models")))
    assert empty.status is Status.MISSING and "0/8 release models" in empty.detail
    assert "model directory is missing" in empty.detail
    slug = empty.missing.split()[1]
    assert empty.fix == f"trace-repro prepare-models --model-root {tmp_path / 'models'} --model-id {slug}"


def test_missing_datasets_point_at_prepare_data(release, tmp_path):
    result = check_datasets(_ctx(tmp_path, trace_root=str(release.path), data_root=str(tmp_path / "data")))
    assert result.status is Status.MISSING and result.fix == f"trace-repro prepare-data --data-root {tmp_path / 'data'}"


def test_unreachable_judge_on_a_closed_loopback_port(release, tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = check_judge(_ctx(tmp_path, trace_root=str(release.path), judge_url=url))
    assert result.status is Status.MISSING and result.missing == f"a judge serving at {url}"
    assert result.detail.startswith(f"judge unreachable: {url}/models: ")


@pytest.mark.timeout(20)
def test_a_judge_url_that_is_not_http_is_never_opened(release, tmp_path):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it would block doctor
    for url in (f"file://{fifo}#", "file:///etc/passwd", "ftp://127.0.0.1/"):
        result = check_judge(_ctx(tmp_path, trace_root=str(release.path), judge_url=url))
        assert result.status is Status.MISSING and "not an http(s) URL" in result.detail, result.detail


def test_reachable_judge_lists_what_it_serves(release, tmp_path):
    with OpenAIStubServer(lambda body: "ok", model="Qwen/Qwen3-32B") as server:
        result = check_judge(_ctx(tmp_path, trace_root=str(release.path), judge_url=server.url))
    assert result.status is Status.OK and result.detail == f"{server.url}/models: serving Qwen/Qwen3-32B"


def test_archive_root_from_flag_or_environment(tmp_path):
    assert check_archive(_ctx(tmp_path)).status is Status.MISSING
    assert check_archive(_ctx(tmp_path, archive_root=str(tmp_path / "no"))).status is Status.MISSING
    assert check_archive(_ctx(tmp_path, env={"TRACE_ARCHIVE_ROOT": str(tmp_path)})).status is Status.MISSING  # no run
    from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run

    sample = SampleSpec(source_index="0", source_ordinal=0, source_row_sha256="a" * 64, prompt_text="q?",
                        response_text="A", extraction_value="A", score=1.0)
    write_archive_run(tmp_path / "runs" / "r1", "r1", [SliceSpec("m", 42, "mmstar", (sample,), aggregate_score=100.0)])
    result = check_archive(_ctx(tmp_path, env={"TRACE_ARCHIVE_ROOT": str(tmp_path)}))
    assert result.status is Status.OK and result.detail.endswith("1 run(s), 1/1 listed slices fetched")


# -- lanes and the CLI -----------------------------------------------------------------------------------------

def test_lane_names_its_first_missing_check_and_its_fix(tmp_path, monkeypatch):
    def fake(name: str, ok: bool):
        status = Status.OK if ok else Status.MISSING
        return registry.Check(name, name, lambda ctx: CheckResult(name, status, name, "" if ok else f"no {name}",
                                                                  "" if ok else f"fix {name}"))

    present = {"python", "release", "extra:test", "hf_token", "extra:hf"}
    names = {n for lane in registry.LANES for n in lane.needs} | set(registry.ALWAYS)
    monkeypatch.setattr(registry, "checks", lambda: tuple(fake(n, n in present) for n in sorted(names)))
    report = diagnose(_ctx(tmp_path), ["offline", "cpu_model", "reproduction"])
    verdicts = {v.lane: v for v in report.lanes}
    assert verdicts["offline"].can_run and verdicts["cpu_model"].can_run and not report.ok
    assert (verdicts["reproduction"].check, verdicts["reproduction"].fix) == ("extra:eval", "fix extra:eval")
    assert "  reproduction  cannot run: no extra:eval; fix: fix extra:eval" in report.render_text()
    with pytest.raises(UsageError, match="unknown lane 'gpus'"):
        diagnose(_ctx(tmp_path), ["gpus"])


def test_cli_offline_lane_exits_0_imports_nothing_heavy_and_never_prints_the_token(tmp_path):
    code = ("import sys; from trace_lib.cli.main import main; rc = main(sys.argv[1:]); "
            "print('HEAVY=' + ','.join(m for m in ('torch', 'vllm', 'transformers', 'ray', 'verl') "
            "if m in sys.modules)); sys.exit(rc)")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TRACE_")}
    environ.update(HF_TOKEN="hf_secret_value_123", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", code, "doctor", "--json", "--lane", "offline"], capture_output=True,
                          text=True, env=environ, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout.rsplit("HEAVY=", 1)[0])
    assert doc["status"] == "ok" and [v["lane"] for v in doc["lanes"]] == ["offline"]
    assert {c["name"]: c["detail"] for c in doc["checks"]}["hf_token"].startswith("HF_TOKEN set")
    assert "hf_secret_value_123" not in done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("HEAVY=")


def _main(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    from trace_lib.cli.main import main

    for key in [k for k in os.environ if k.startswith("TRACE_")]:
        monkeypatch.delenv(key)
    code = main(["doctor", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_wrong_vllm_blocks_the_gpu_lane_exit_1(tmp_path, monkeypatch, capsys):
    _fake_dist(tmp_path / "site", "vllm", "0.1.0")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    code, out, _ = _main(capsys, monkeypatch, "--json", "--lane", "gpu")
    assert code == 1
    (gpu,) = json.loads(out)["lanes"]
    assert gpu["blocked_by"] == "extra:eval" and gpu["missing"].startswith("vllm 0.1.0 (supported ")


def test_cli_unknown_lane_is_a_usage_error_and_help_lists_the_lanes(monkeypatch, capsys):
    code, _, err = _main(capsys, monkeypatch, "--lane", "gpus")
    assert code == 2 and err.startswith("error: --lane: unknown lane 'gpus'")
    with pytest.raises(SystemExit):
        _main(capsys, monkeypatch, "--help")
    helped = capsys.readouterr().out
    assert all(f"  {lane.name} " in helped for lane in registry.LANES)
    from trace_lib.cli.main import main

    with pytest.raises(SystemExit):
        main(["--help"])
    root_help = capsys.readouterr().out
    assert "first steps:\n  trace-repro doctor " in root_help and "pytest -m offline -n 2" in root_help


def test_models_at_their_pinned_revisions_pass(release, tmp_path):
    from trace_lib.campaign.models import release_models

    for model in release_models(release, tmp_path / "models"):
        model.path.mkdir(parents=True)
        (model.path / "config.json").write_text("{}")
        (model.path / "model.safetensors").write_bytes(b"w")
        marker = {"schema_version": "trace-model-revision-v1", "slug": model.slug,
                  "immutable_revision": model.revision, "resolved_commit": model.revision}
        (model.path / ".trace_model_revision.json").write_text(json.dumps(marker))
    result = check_models(_ctx(tmp_path, trace_root=str(release.path), model_root=str(tmp_path / "models")))
    assert result.status is Status.OK and result.detail.startswith("8/8 release models at their pinned revisions")


def test_ranges_fall_back_to_the_installed_metadata_outside_a_checkout(tmp_path, monkeypatch):
    from trace_lib.doctor import extras

    from_checkout = extras.project_metadata()
    monkeypatch.setattr(extras, "CHECKOUT", tmp_path)  # no pyproject.toml here: an installed wheel
    installed = extras.project_metadata()
    assert from_checkout.origin.endswith("pyproject.toml")
    if installed is None:
        pytest.skip("trace-repro is not installed in this Python (run from a checkout by PYTHONPATH)")
    assert installed.origin.startswith("installed trace-repro ")
    assert any(r.startswith("vllm") and 'extra == "eval"' in r for r in installed.requires)
