"""``trace-repro generate`` end to end on loopback: the real MMStar protocol over a tiny MMStar-format table,
an OpenAI-compatible stub server, the response store, and a resumed second run that generates nothing."""

from __future__ import annotations

import dataclasses

from trace_lib.cli.main import main
from trace_lib.generation.store import load_header, load_responses, response_path
from trace_lib.testing.openai_server import OpenAIStubServer
from trace_lib.testing.tiny_bench import build_tiny_tsv

COMMIT = "0" * 40


def _argv(release, tmp_path, url):
    return ["generate", "--trace-root", str(release.path), "--model", "tiny", str(tmp_path / "model"),
            f"sha256set:{'1' * 64}", f"org/tiny@{COMMIT}", "Tiny", "--seeds", "43", "--benchmark", "mmstar",
            "--campaign-root", str(tmp_path / "campaign"), "--data-root", str(tmp_path / "data"),
            "--backend", "openai", "--base-url", url, "--unprepared-data", "--no-progress"]


def test_generate_then_resume(release, tmp_path, capsys):
    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=6)
    with OpenAIStubServer(lambda route, body: "The answer is B.", model="tiny") as server:
        assert main(_argv(release, tmp_path, server.url)) == 0
        first = capsys.readouterr().out
        assert main(_argv(release, tmp_path, server.url)) == 0
        second = capsys.readouterr().out
    assert "generated 6" in first and "1/1 slice(s) complete" in first
    assert "generated 0" in second and "reused 6" in second
    assert len(server.requests) == 6
    assert {body["seed"] for _, body in server.requests} == {43}
    assert {body["model"] for _, body in server.requests} == {"tiny"}
    path = response_path(tmp_path / "campaign", model="tiny", seed=43, benchmark="mmstar")
    assert [r.response for r in load_responses(path)] == ["The answer is B."] * 6
    assert load_header(path)["slice"] == "tiny-seed43-mmstar"


def test_unprepared_benchmark_is_refused_without_the_flag(release, tmp_path, capsys):
    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=2)
    argv = [a for a in _argv(release, tmp_path, "http://127.0.0.1:9/v1") if a != "--unprepared-data"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "mmstar: benchmark data is not prepared; run 'trace-repro prepare-data --benchmark mmstar'" in err


def test_failing_endpoint_fails_the_slice_and_keeps_answers(release, tmp_path, capsys):
    from trace_lib.testing.openai_server import StubHTTPError

    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=5)

    def one_bad(route, body):
        if "How many circles" in body["messages"][0]["content"][-1]["text"]:
            raise StubHTTPError(400)
        return "A"

    with OpenAIStubServer(one_bad, model="tiny") as server:
        assert main(_argv(release, tmp_path, server.url)) == 1
    assert "failed: tiny-seed43-mmstar" in capsys.readouterr().out
    path = response_path(tmp_path / "campaign", model="tiny", seed=43, benchmark="mmstar")
    assert len(load_responses(path)) == 4


def test_engine_flags_override_only_what_is_given(release, tmp_path):
    """Unset engine flags keep the vllm backend's upstream defaults; given ones are passed through."""
    import argparse

    from trace_lib.campaign.plan import build_plan
    from trace_lib.cli.generate import _backend_options

    plan = build_plan(release, model_ids=["trace-qwen2.5-vl-3b"], seeds=[42], benchmarks=["mmstar"],
                      gpu_groups="0,1", data_root=tmp_path)
    args = argparse.Namespace(backend="vllm", base_url=None, device=None, max_model_len=None, max_num_seqs=128,
                              gpu_memory_utilization=None, enforce_eager=None, concurrency=None)
    assert _backend_options(args, plan) == {
        "tensor_parallel_size": 2, "allowed_local_media_path": str(tmp_path.resolve()), "max_num_seqs": 128,
    }


def test_generate_scores_each_slice_as_it_completes(release, tmp_path, capsys):
    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=6)
    with OpenAIStubServer(lambda route, body: "The answer is B.", model="tiny") as server, \
            OpenAIStubServer(lambda route, body: "A", model="qwen3-32b-judge") as judge:
        argv = _argv(release, tmp_path, server.url) + ["--score", "--seeds", "42", "43", "--judge-url", judge.url]
        assert main(argv) == 0
    out = capsys.readouterr().out
    for seed in (42, 43):
        assert f"[score] tiny-seed{seed}-mmstar: " in out and "over 6 rows" in out
        assert (tmp_path / "campaign" / "scoring" / f"seed_{seed}" / "tiny" / "mmstar" / "scores.json").is_file()


def test_worker_shares_keep_a_benchmarks_seeds_together_and_balance_rows(release, tmp_path):
    from trace_lib.campaign.plan import build_plan, worker_shares

    plan = build_plan(release, model_ids=["trace-qwen2.5-vl-3b", "trace-qwen2.5-vl-7b"], seeds=[42, 43, 44],
                      data_root=tmp_path)
    shares = worker_shares(plan, 3)
    assert sorted(s for share in shares for s in share) == sorted(plan.slices)  # every slice once
    owner = {s: i for i, share in enumerate(shares) for s in share}
    for slice_ in plan.slices:  # the seeds of a (model, benchmark) share one worker
        assert owner[slice_] == owner[dataclasses.replace(slice_, seed=42)]
    for share in shares:
        assert share == sorted(share, key=plan.slices.index)  # plan order within a share
    loads = [sum(plan.rows(s) for s in share) for share in shares]
    heaviest = max(3 * plan.rows(s) for s in plan.slices)
    assert max(loads) - min(loads) <= heaviest  # greedy largest-first: within one benchmark's weight


def test_engines_per_group_start_workers_per_group_with_a_share_of_the_memory(release, tmp_path):
    import argparse

    from trace_lib.campaign.plan import build_plan
    from trace_lib.cli.generate import _backend_options, worker_commands

    plan = build_plan(release, model_ids=["trace-qwen2.5-vl-3b"], seeds=[42], benchmarks=["mmstar"],
                      gpu_groups="0;1", data_root=tmp_path)
    commands = worker_commands(plan, ["generate", "--seeds", "42"], 2)
    assert [(cmd[-1], gpus) for cmd, gpus in commands] == [("0/4", "0"), ("1/4", "0"), ("2/4", "1"), ("3/4", "1")]
    assert all(cmd[1:5] == ["-m", "trace_lib", "generate", "--seeds"] for cmd, _ in commands)
    args = argparse.Namespace(backend="vllm", base_url=None, device=None, max_model_len=None, max_num_seqs=None,
                              gpu_memory_utilization=None, enforce_eager=None, concurrency=None,
                              engines_per_group=2)
    assert _backend_options(args, plan)["gpu_memory_utilization"] == 0.45
    args.gpu_memory_utilization = 0.8
    assert _backend_options(args, plan)["gpu_memory_utilization"] == 0.4


def test_engines_per_group_need_the_vllm_backend(release, tmp_path, capsys):
    assert main(_argv(release, tmp_path, "http://127.0.0.1:9/v1") + ["--engines-per-group", "2"]) == 2
    assert "several engines per GPU group need the vllm backend" in capsys.readouterr().err


def test_workers_generate_disjoint_whole_benchmarks(release, tmp_path, capsys):
    """Two ``--worker i/2`` runs (what --engines-per-group 2 starts): each generates its own benchmarks, every
    seed of a benchmark on one worker, together every slice once."""
    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=3)
    build_tiny_tsv(tmp_path / "data" / "RealWorldQA.tsv", style="mcq", rows=3)
    with OpenAIStubServer(lambda route, body: "B", model="tiny") as server:
        argv = _argv(release, tmp_path, server.url) + ["--benchmark", "realworldqa"]
        argv[argv.index("--seeds") + 1:argv.index("--seeds") + 2] = ["42", "43"]
        outputs = []
        for worker in ("0/2", "1/2"):
            assert main(argv + ["--worker", worker]) == 0
            outputs.append(capsys.readouterr().out)
    assert all("2/2 slice(s) complete" in out for out in outputs)
    stored = [sorted(line.split(":")[0].split()[1] for line in out.splitlines() if "rows stored" in line)
              for out in outputs]
    assert sorted(stored) == [["tiny-seed42-mmstar", "tiny-seed43-mmstar"],
                              ["tiny-seed42-realworldqa", "tiny-seed43-realworldqa"]]
    for benchmark in ("mmstar", "realworldqa"):
        for seed in (42, 43):
            path = response_path(tmp_path / "campaign", model="tiny", seed=seed, benchmark=benchmark)
            assert len(load_responses(path)) == 3
    assert len(server.requests) == 12  # nothing generated twice


def test_score_without_a_judge_url_is_refused_before_anything_is_generated(release, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TRACE_JUDGE_URL", raising=False)
    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=3)
    with OpenAIStubServer(lambda route, body: "B", model="tiny") as server:
        assert main(_argv(release, tmp_path, server.url) + ["--score"]) == 2
    assert "judge URL not set (--judge-url / TRACE_JUDGE_URL) for judge route mmstar" in capsys.readouterr().err
    assert server.requests == []
    assert not response_path(tmp_path / "campaign", model="tiny", seed=43, benchmark="mmstar").exists()


def test_generate_reads_trace_model_verify_from_the_environment(release, tmp_path, monkeypatch, capsys):
    """The option table documents TRACE_MODEL_VERIFY for generate as for pytest: a bad value is one line."""

    monkeypatch.setenv("TRACE_MODEL_VERIFY", "bogus")
    code = main(["generate", "--trace-root", str(release.path), "--campaign-root", str(tmp_path / "c"),
                 "--backend", "vllm"])
    assert code == 2 and "unknown --model-verify mode 'bogus'" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_a_stop_signal_python_discarded_while_workers_run_still_stops_them(monkeypatch):
    """``supervise_workers`` waits by polling through :func:`trace_lib.interrupts.pause`: a Ctrl-C whose exception
    Python discarded (here in a weakref callback) is raised by the next poll, and every worker is terminated
    (``Popen.wait`` would have waited on)."""
    import subprocess
    import sys
    import time

    import pytest

    from trace_lib import interrupts
    from trace_lib.cli.generate import supervise_workers
    from trace_lib.testing.discarded_signal import signal_python_discards

    real_pause, started = interrupts.pause, []

    def pause(seconds):
        if not started:
            started.append(seconds)
            signal_python_discards()
        real_pause(seconds)

    monkeypatch.setattr(interrupts, "pause", pause)
    popen, procs = subprocess.Popen, []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: procs.append(popen(*a, **k)) or procs[-1])
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    start = time.monotonic()
    with pytest.raises(interrupts.Interrupted):
        with interrupts.stop_on_signals():
            supervise_workers([(sleeper, "0"), (sleeper, "1")], rerun_alone=False)
    assert time.monotonic() - start < 10 and len(procs) == 2 and all(p.poll() is not None for p in procs)
    assert supervise_workers([([sys.executable, "-c", "raise SystemExit(0)"], "0")], rerun_alone=False) == 0
