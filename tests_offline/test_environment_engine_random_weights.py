"""``TRACE_VLLM_LOAD_FORMAT=dummy`` (benchmarks only): ``trace-repro generate --backend vllm --engines-per-group 2
--model-verify none`` on a config-only model directory (a stub ``vllm`` package, trace_lib.testing.stub_vllm)
passes ``load_format`` to every engine, marks the store headers as random weights, refuses to resume them on real
weights, and ``trace-repro score`` gives their scores no verdict; ``--score phased`` scores in the parent once
both workers have exited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from trace_lib.generation.store import load_header, response_path
from trace_lib.testing.openai_server import OpenAIStubServer
from trace_lib.testing.stub_vllm import write_stub_vllm_package
from trace_lib.testing.tiny_bench import build_tiny_tsv

REPO = Path(__file__).resolve().parents[1]


def _generate(release, tmp_path, env, engines="2", extra=()):  # noqa: ANN001, ANN202
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}", encoding="utf-8")  # config only: no weights
    argv = [sys.executable, "-m", "trace_lib", "generate", "--trace-root", str(release.path), "--model", "bench-3b",
            str(model), "sha256set:" + "0" * 64, f"org/bench@{'0' * 40}", "Bench", "--seeds", "42",
            "--benchmark", "mmstar", "--benchmark", "realworldqa", "--campaign-root", str(tmp_path / "campaign"),
            "--data-root", str(tmp_path / "data"), "--backend", "vllm", "--engines-per-group", engines,
            "--gpu-memory-utilization", "0.3", "--model-verify", "none", "--unprepared-data", "--no-progress",
            *extra]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=REPO)


def test_dummy_weights_are_loaded_marked_and_never_judged(release, tmp_path, capsys):
    for name in ("MMStar.tsv", "RealWorldQA.tsv"):
        build_tiny_tsv(tmp_path / "data" / name, style="mcq", rows=3)
    write_stub_vllm_package(tmp_path / "stub")
    record = tmp_path / "engines.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "stub"), str(REPO)]),
               CUDA_VISIBLE_DEVICES="0", STUB_VLLM_RECORD=str(record), TRACE_VLLM_LOAD_FORMAT="dummy")
    with OpenAIStubServer(lambda route, body: "B", model="qwen3-32b-judge") as judge:  # phased: after both workers
        done = _generate(release, tmp_path, env, extra=("--score", "phased", "--judge-url", judge.url))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[generate] scored 2/2 slice(s)" in done.stdout
    assert done.stdout.rindex("rows stored") < done.stdout.index("[score] ")
    engines = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(engines) == 2  # one engine per worker, each with half of the memory, random weights
    assert {(e["load_format"], e["gpu_memory_utilization"]) for e in engines} == {("dummy", 0.15)}
    path = response_path(tmp_path / "campaign", model="bench-3b", seed=42, benchmark="mmstar")
    engine = load_header(path)["engine"]
    assert engine["load_format"] == "dummy" and engine["random_weights"] is True and engine["matches_paper"] is False
    assert "weights random (load_format dummy)" in done.stderr
    from trace_lib.environment.engine import engine_properties

    assert ("engine_random_weights", "true") in engine_properties(engine)  # the JUnit receipt says so too

    # a random-weight slice never resumes on real weights (one line naming the header field)
    path.write_bytes(path.read_bytes().rsplit(b"\n", 2)[0] + b"\n")  # drop the last row: something to resume
    real = _generate(release, tmp_path, {**env, "TRACE_VLLM_LOAD_FORMAT": "auto"}, engines="1")
    assert real.returncode == 1
    assert "header.engine.load_format" in real.stderr and "responses were generated on another engine" in real.stderr

    from trace_lib.cli.main import main

    assert main(["score", "--trace-root", str(release.path), "--benchmark", "realworldqa", "--dataset",
                 str(tmp_path / "data" / "RealWorldQA.tsv"), "--out", str(tmp_path / "scores"), "--responses",
                 str(response_path(tmp_path / "campaign", model="bench-3b", seed=42, benchmark="realworldqa"))]) == 0
    assert "no verdict: the responses were generated with random weights" in capsys.readouterr().out
    assert json.loads((tmp_path / "scores" / "scores.json").read_text())["random_weights"] is True
