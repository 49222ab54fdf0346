"""benchmarks/engine_start.py: vLLM's start-up figures read from its log lines, the calibration a run writes, and
a dry run end to end (the stub ``vllm`` package, loopback only)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import engine_start as es  # noqa: E402

from trace_lib.campaign.estimate import load_rates, record_calibration  # noqa: E402

pytestmark = pytest.mark.offline

#: Run 38's cold start, as the worker's log held it (vLLM 0.24.0; the parts the figures come from).
COLD_LOG = """\
   81.12 (EngineCore pid=934) INFO 12-04 21:25:54 [gpu_model_runner.py:5255] Model loading took 6.49 GiB memory and 1.397277 seconds
  116.43 (EngineCore pid=934) INFO 12-04 21:26:29 [backends.py:393] Compiling a graph for compile range (1, 32768) takes 16.50 s
  125.39 (EngineCore pid=934) INFO 12-04 21:26:38 [monitor.py:53] torch.compile took 36.15 s in total
  145.79 (EngineCore pid=934) INFO 12-04 21:26:58 [gpu_model_runner.py:6656] Graph capturing finished in 8 secs, took 0.46 GiB
  146.54 (EngineCore pid=934) INFO 12-04 21:26:59 [core.py:337] init engine (profile, create kv cache, warmup model) took 65.42 s (compilation: 36.15 s)
"""
WARM_LINE = ("   61.23 (EngineCore pid=1263) INFO 12-04 21:28:11 [backends.py:292] Directly load the compiled graph(s) "
             "for compile range (1, 32768) from the cache, took 2.389 s\n")


def test_vllms_figures_are_read_from_its_log_lines():
    cold = es.vllm_figures(COLD_LOG)
    assert cold == {"weights_s": 1.397277, "compile_s": 36.15, "graphs_s": 8.0, "init_engine_s": 65.42,
                    "compile_cache_hit": False}
    assert es.vllm_figures(COLD_LOG + WARM_LINE)["compile_cache_hit"]
    assert es.vllm_figures("no vLLM here") == {"weights_s": None, "compile_s": None, "graphs_s": None,
                                               "init_engine_s": None, "compile_cache_hit": False}


def test_the_calibration_holds_the_first_start_of_each_state_and_plan_reads_it(tmp_path):
    starts = [es.Start("first", "cold", 146.7, 156.9), es.Start("again", "warm", 80.1, 90.6),
              es.Start("new-path", "new-model", 114.4, 124.8), es.Start("no-cache", "cold", 158.7, 169.9),
              es.Start("lost", "warm", None, 3.0)]
    section = es.calibration_section(starts, {"shape": "3b"})
    assert section == {"cold": 146.7, "warm": 80.1, "new-model": 114.4, "shape": "3b"}
    path = tmp_path / "calibration.json"
    record_calibration(path, "engine_start", section)
    rates = load_rates(path)
    assert rates.one_engine_start_s == 80.1 and rates.start_extra("cold") == pytest.approx(66.6)
    assert es.calibration_section([es.Start("lost", "cold", None, 3.0)], {"shape": "3b"}) == {}
    table = es.table(starts)
    assert table[2].startswith("| first | cold | 146.7 | 1.00 |") and "| again | warm | 80.1 | 0.55 |" in table[3]


def test_unknown_starts_are_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        es.main(["--work-dir", "unused", "--starts", "first,hot"])
    with pytest.raises(SystemExit):  # beside starts model A warm: something must have compiled it first
        es.main(["--work-dir", "unused", "--starts", "new-path,beside,first"])
    assert "put first or again before it" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # nothing to start is no run
        es.main(["--work-dir", "unused", "--starts", ","])
    assert "starts are first, again" in capsys.readouterr().err


def test_a_start_beside_a_neighbour_is_set_against_again_and_kept_out_of_the_calibration():
    starts = [es.Start("first", "cold", 146.7, 156.9), es.Start("beside", "warm", 96.0, 99.0, note="n"),
              es.Start("again", "warm", 80.1, 90.6)]
    section = es.calibration_section(starts, {})
    assert section["warm"] == 80.1 and section["beside_factor"] == 1.199  # the start alone, though beside came first
    assert load_rates(None).start_beside_factor == 1.17
    neighbour_done = [starts[0], replace(starts[1], overlapped=False), starts[2]]
    assert "beside_factor" not in es.calibration_section(neighbour_done, {})  # not a start beside anything
    lines = es.table(starts)
    assert "beside a generating engine / alone (again): 1.20 (96.0 s against 80.1 s" in lines[-2]
    assert lines[-1] == "note (beside): n"


def test_a_dry_run_starts_the_stub_engine_and_writes_no_calibration(release, tmp_path, capsys):
    calibration = tmp_path / "calibration.json"
    assert es.main(["--work-dir", str(tmp_path / "work"), "--starts", "first,again,beside", "--rows", "2",
                    "--load-rows", "20",
                    "--trace-root", str(release.path), "--calibration", str(calibration), "--dry-run"]) == 0
    measured = json.loads((tmp_path / "work" / "engine_start.json").read_text(encoding="utf-8"))
    assert [(m["name"], m["caches"]) for m in measured] == [("first", "warm"), ("again", "warm"),
                                                             ("beside", "warm")]  # stubs cache nothing
    load = (tmp_path / "work" / "generate-beside-load.log").read_text(encoding="utf-8")
    assert "20/20 rows stored" in load  # the neighbour ran to its end, after its engine was up
    assert all(m["up_s"] is not None and m["up_s"] <= m["wall_s"] for m in measured)
    assert not calibration.exists()
    assert "| first | warm |" in capsys.readouterr().out


def test_auto_memory_keeps_run_38s_share_unless_the_shape_needs_more(tmp_path):
    from trace_lib.testing.tiny_qwen import QWEN25VL_SHAPES

    shapes = {}
    for shape, layers in QWEN25VL_SHAPES.items():  # the layers only: the size rule reads nothing else
        shapes[shape] = tmp_path / shape
        shapes[shape].mkdir()
        config = {"text_config": {**layers["text"], "vocab_size": 152064}, "vision_config": layers["vision"]}
        (shapes[shape] / "config.json").write_text(json.dumps(config), encoding="utf-8")
    h100, h200 = 81559 * 2**20, 143771 * 2**20
    assert es.generation_share(shapes["3b"], 32768, h100) == 0.26 == es.DEFAULT_SHARE
    assert es.generation_share(shapes["7b"], 32768, h200) == 0.26
    # 0.26 of an H100 failed to start on 2026-12-07. 15.44 GiB of weights + 4 + 4 x 32,768 x 56 KiB of KV is
    # 26.44 GiB, 0.332 of 79.6 GiB, rounded up; two still fit beside each other under 0.9
    assert es.generation_share(shapes["7b"], 32768, h100) == 0.34
    assert es.generation_share(shapes["7b"], 8192, h100) == 0.27  # 21.19 GiB
    assert es.generation_share(shapes["7b"], 32768, None) == es.DEFAULT_SHARE


def test_a_share_outside_the_gpu_is_refused(capsys):
    for bad in ("0", "1.5", "most"):
        with pytest.raises(SystemExit):
            es.main(["--work-dir", "unused", "--generation-memory", bad])
    assert "auto or a share of the GPU in (0, 1]" in capsys.readouterr().err


def test_a_failed_start_says_so_stays_out_of_the_calibration_and_fails_the_run():
    starts = [es.Start("first", "cold", None, 88.8, note="failed: generate exited 1 (log L)", exit_code=1),
              es.Start("again", "warm", 40.0, 55.0, note="failed: generate exited 1 (log M)", exit_code=1)]
    assert es.calibration_section(starts, {"shape": "7b"}) == {}  # an engine up, then a failure, is no start
    assert "note (first): failed: generate exited 1 (log L)" in es.table(starts)


@pytest.mark.parametrize(("measured", "code", "written"), [
    ([es.Start("first", "cold", 146.73, 150.0), es.Start("again", "warm", 80.06, 90.0)], 0, {"cold": 146.7,
                                                                                          "warm": 80.1}),
    ([es.Start("first", "cold", 146.7, 150.0)], 0, None),  # no warm start to set the others against
    ([es.Start("first", "cold", None, 88.8, note="failed", exit_code=1),
      es.Start("again", "warm", 80.1, 90.0)], 1, {"warm": 80.1}),
])
def test_main_writes_the_calibration_it_can_and_fails_on_a_failed_start(release, tmp_path, monkeypatch, measured,
                                                                          code, written):
    starts = iter(measured)
    monkeypatch.setattr(es, "measure", lambda name, ctx: next(starts))
    monkeypatch.setattr(es.mc, "model_dir", lambda work, dry_run, shape, suffix: tmp_path)
    calibration = tmp_path / "calibration.json"
    names = ",".join(s.name for s in measured)
    assert es.main(["--work-dir", str(tmp_path / "work"), "--starts", names, "--rows", "2", "--generation-memory",
                    "0.3", "--trace-root", str(release.path), "--calibration", str(calibration)]) == code
    if written is None:
        assert not calibration.exists()
    else:
        section = json.loads(calibration.read_text(encoding="utf-8"))["engine_start"]
        assert {k: v for k, v in section.items() if k in ("cold", "warm", "new-model")} == written


def _ctx(tmp_path: Path, **args) -> dict:
    from types import SimpleNamespace

    models = {name: tmp_path / f"qwen25vl-3b-shapes-{name}" for name in ("a", "b")}
    args = SimpleNamespace(**{"load_rows": 40, "timeout": 60.0, "generation_memory": 0.26, "max_model_len": 4096,
                              **args})
    return {"args": args, "release": SimpleNamespace(path=tmp_path / "release"), "work": tmp_path,
            "data_root": tmp_path / "data", "env": {"PATH": "/bin"}, "models": models}


def test_new_path_starts_model_b_a_copy_of_a_at_another_path_and_every_other_start_model_a(tmp_path, monkeypatch):
    """vLLM keys its compile cache by the model's path: ``new-path`` must start the second directory (model B, A's
    files elsewhere); first, again and no-cache start model A, no-cache with every compile cache emptied."""
    ctx = _ctx(tmp_path)
    seen = {}

    def start(name, model, env, ctx):
        seen[name] = (model, env)
        return es.Start(name, "warm", 1.0, 2.0)

    monkeypatch.setattr(es, "_start", start)
    for name in ("first", "again", "new-path", "no-cache"):
        assert es.measure(name, ctx).name == name
    models = ctx["models"]
    assert {name: model for name, (model, _) in seen.items()} == {
        "first": models["a"], "again": models["a"], "new-path": models["b"], "no-cache": models["a"]}
    for name, (_, env) in seen.items():
        assert env["TRACE_VLLM_LOAD_FORMAT"] == "dummy" and env["PATH"] == "/bin"
        emptied = {var: env.get(var) for var in es.CACHE_ENV}
        if name == "no-cache":
            assert emptied == {var: str(tmp_path / "empty-caches" / var.lower()) for var in es.CACHE_ENV}
        else:
            assert emptied == dict.fromkeys(es.CACHE_ENV)


def test_the_two_models_are_one_models_files_at_two_paths(release, tmp_path, monkeypatch):
    """``main`` builds model A and model B as the same files in two directories (a dry run's placeholders)."""
    contexts = []

    def measure(name, ctx):
        contexts.append(ctx)
        return es.Start(name, "warm", 1.0, 2.0)

    monkeypatch.setattr(es, "measure", measure)
    assert es.main(["--work-dir", str(tmp_path / "work"), "--starts", "again,new-path", "--rows", "2",
                    "--trace-root", str(release.path), "--dry-run"]) == 0
    models = contexts[0]["models"]
    assert models["a"] != models["b"] and models["a"].parent == models["b"].parent == (tmp_path / "work").resolve()
    assert sorted(p.name for p in models["a"].iterdir()) == sorted(p.name for p in models["b"].iterdir())
    assert (models["a"] / "config.json").read_bytes() == (models["b"] / "config.json").read_bytes()


class _Neighbour:
    """``mc.TimedRun`` of the beside start's neighbour: its engine up at once, done ``load_s`` after its start."""

    def __init__(self, load_s: float, code: int = 0) -> None:
        import time

        self.t0, self.ups, self.load_s, self.code, self.stopped = time.monotonic(), [3.0], load_s, code, False

    def wait(self, timeout):
        return self.load_s, self.ups, self.code

    def stop(self):
        self.stopped = True


@pytest.mark.parametrize(("load_s", "overlapped"), [(1000.0, True), (5.0, False)])
def test_a_beside_start_is_overlapped_only_while_the_neighbour_still_generates(tmp_path, monkeypatch, load_s,
                                                                             overlapped):
    """The neighbour done 5 s after it began, the start up 30 s after: not a start beside a generating engine, noted,
    and no beside factor; done after 1,000 s: overlapped."""
    ctx = _ctx(tmp_path)
    neighbours = []

    def neighbour(argv, env, log):
        neighbours.append((argv, env, log))
        return _Neighbour(load_s)

    monkeypatch.setattr(es.mc, "build_data", lambda release, root, keys, rows: None)
    monkeypatch.setattr(es.mc, "TimedRun", neighbour)
    monkeypatch.setattr(es, "_start", lambda name, model, env, ctx: es.Start(name, "warm", 30.0, 31.0))
    start = es.measure("beside", ctx)
    assert [log.name for _, _, log in neighbours] == ["generate-beside-load.log"]
    assert start.name == "beside" and start.overlapped is overlapped and start.exit_code == 0
    assert ("the neighbour was done" in start.note) is not overlapped
    alone = es.Start("again", "warm", 20.0, 21.0)
    assert es.beside_factor([alone, start]) == (1.5 if overlapped else None)
