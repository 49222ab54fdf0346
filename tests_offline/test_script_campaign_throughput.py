"""benchmarks/campaign_throughput.py's command line (its paths need vLLM and a GPU: tests_gpu and the device)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "campaign_throughput.py"
sys.path.insert(0, str(SCRIPT.parent))

import campaign_throughput  # noqa: E402


def test_replicas_takes_one_or_several_engine_counts_in_order() -> None:
    assert campaign_throughput._counts("3") == [3]
    assert campaign_throughput._counts("2,3") == [2, 3]
    with pytest.raises(argparse.ArgumentTypeError, match="a count given twice"):
        campaign_throughput._counts("2,3,2")


def test_a_bad_replica_count_is_one_usage_line_and_exit_2() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--replicas", "2,x"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == ("campaign_throughput.py: error: argument --replicas: not a "
                                                   "comma-separated list of counts: '2,x'")


def test_engine_counts_without_a_baseline_are_compared_with_the_first_that_ran() -> None:
    two, three = "streaming, 2 engines on the GPU", "streaming, 3 engines on the GPU"
    lines = campaign_throughput.ratio_lines({two: 64.9, three: 69.9}, ["streaming", two, three])
    assert lines == [f"{three} / {two} = 1.08"]


def test_every_path_is_set_against_upstream_and_a_path_that_did_not_run_gets_no_line() -> None:
    three = "streaming, 3 engines on the GPU"
    rate = {"streaming": 40.0, three: 67.9, "upstream design (vllm serve, 32 in flight)": 20.3}
    lines = campaign_throughput.ratio_lines(rate, ["streaming", "streaming, 2 engines on the GPU", three])
    assert lines == ["streaming / upstream design = 1.97 (target >= 2.5)",
                     f"{three} / upstream design = 3.34 (target >= 2.5); / streaming = 1.70"]


def test_a_reused_work_dir_keeps_no_stored_rows_that_a_path_would_resume(tmp_path: Path) -> None:
    stale = tmp_path / "campaign-streaming" / "model" / "slice.jsonl"  # an earlier invocation's rows
    stale.parent.mkdir(parents=True)
    stale.write_text("{}\n")
    outside = tmp_path.parent / f"{tmp_path.name}-campaign-kept"
    outside.mkdir()
    (tmp_path / "campaign-linked").symlink_to(outside, target_is_directory=True)
    model = tmp_path / "qwen25vl-3b-shapes"  # the config-only model, as an earlier invocation left it (written by
    model.mkdir()  # transformers, which the offline lane does not install; no engine here reads it)
    (model / "config.json").write_text("{}", encoding="utf-8")
    done = subprocess.run([sys.executable, str(SCRIPT), "--skip-single", "--skip-upstream", "--replicas", "1",
                           "--benchmarks", "1", "--seeds", "1", "--rows", "1", "--work-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (tmp_path / "campaign-streaming").exists()
    assert outside.is_dir()  # a link is not this run's directory: left alone


def test_model_runners_are_v1_and_v2_each_at_most_once() -> None:
    assert campaign_throughput._runners("v1,v2") == ["v1", "v2"]
    assert campaign_throughput._runners("v2") == ["v2"]
    for bad in ("v3", "v1,v1", "", "v1,"):
        with pytest.raises(argparse.ArgumentTypeError, match="v1 and v2, each at most once"):
            campaign_throughput._runners(bad)


def test_the_v1_path_keeps_the_name_of_earlier_runs_and_v2_is_set_against_it() -> None:
    v1, v2 = campaign_throughput.single_path_name("v1"), campaign_throughput.single_path_name("v2")
    assert v1 == "streaming"
    lines = campaign_throughput.ratio_lines({v1: 40.0, v2: 60.0, "upstream design (vllm serve, 32 in flight)": 20.0},
                                            [v1, v2])
    assert lines[1] == f"{v2} / upstream design = 3.00 (target >= 2.5); / streaming = 1.50"


def test_upstreams_server_runs_vllms_default_model_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(campaign_throughput.RUNNER_ENV, "0")
    campaign_throughput.set_runner("v2")
    env = campaign_throughput.upstream_server_env(dict(os.environ, HOME="/h"))
    assert campaign_throughput.RUNNER_ENV not in env
    assert env["HOME"] == "/h" and env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"


def test_ignore_eos_reaches_both_trace_repros_sampling_and_upstreams_body(monkeypatch: pytest.MonkeyPatch) -> None:
    from trace_lib.generation import request as request_module
    from trace_lib.generation.backends import vllm as vllm_backend

    # registered with monkeypatch, so the patched attributes are restored after the test
    monkeypatch.setattr(vllm_backend, "sampling_kwargs", vllm_backend.sampling_kwargs)
    monkeypatch.setattr(request_module.ChatRequest, "payload", request_module.ChatRequest.payload)
    request = request_module.ChatRequest("r1", ({"role": "user", "content": "hi"},),
                                         {"temperature": 0.6, "max_tokens": 8, "seed": 42})
    assert "ignore_eos" not in request.payload("m")
    campaign_throughput.force_ignore_eos()
    assert request.payload("m")["ignore_eos"] is True and request.payload("m")["seed"] == 42
    kwargs = vllm_backend.sampling_kwargs(request.sampling, {})
    assert kwargs["ignore_eos"] is True and kwargs["temperature"] == 0.6
