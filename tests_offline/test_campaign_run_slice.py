"""The slice runner behind tests_reproduction: generate -> score -> verdict, engine reuse, exact skip reasons.

The engine here is a scripted stand-in (this lane claims no real engine); the store, the scorer, the verdict
rule and the campaign layout are the real ones. The real engines run in tests_offline/test_slices_cpu_model.py
(hf, marker cpu_model) and tests_gpu/test_slices_vllm.py (vllm, marker gpu).
"""

from __future__ import annotations

import re
import sys
import types

import pytest

from trace_lib.benchmarks import registry
from trace_lib.slices import ModelDescriptor
from trace_lib.campaign.plan import build_plan
from trace_lib.campaign.run_slice import EnginePool, SliceRunner, worker_gpu_group
from trace_lib.campaign.verdicts import CampaignJudge
from trace_lib.data.prepare import load_artifact_sources
from trace_lib.errors import InputError, ProtocolNotImplementedError, UsageError
from trace_lib.aggregation.canonical import load_canonical, mean
from trace_lib.generation.request import GenerationResult
from trace_lib.release.suite import load_suite
from trace_lib.testing.synthetic_campaign import toy_mcq_protocol, toy_rows, write_toy_dataset

MODEL = "trace-qwen2.5-vl-3b"
KEYS = ("erqa", "countbenchqa")
_ITEM = re.compile(r"item (\d+)\?")


class ScriptedBackend:
    """Answers toy question ``i`` right when ``(i + 13 * seed) % 100 < percent`` (else with the next letter): each
    seed gets ``percent`` % right, on rows that differ between seeds (row-level sampling variance)."""

    name = "scripted"

    def __init__(self, answers: dict[int, str], percent: int) -> None:
        self.answers = answers
        self.percent = percent
        self.requests = 0
        self.closed = False

    def generate(self, requests):
        for request in requests:
            self.requests += 1
            text = request.messages_json()[0]["content"][-1]["text"]
            index = int(_ITEM.search(text).group(1))
            right = self.answers[index]
            letter = right if (index + 13 * request.seed) % 100 < self.percent else "ABCD"[("ABCD".index(right) + 1) % 4]
            yield GenerationResult(request.request_id, f"So the answer is {letter}.", "stop", 10, 5)

    def close(self):
        self.closed = True


@pytest.fixture
def toy(monkeypatch):
    def register(key: str, judge: str = "none") -> None:
        module = types.ModuleType(f"toy_runner_{key}")
        module.PROTOCOL = toy_mcq_protocol(key, judge=judge)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        monkeypatch.setitem(registry.PROTOCOLS, key, f"{module.__name__}:PROTOCOL")

    for key in KEYS:
        register(key)
    return register


@pytest.fixture
def setup(tmp_path, release, toy):
    """A plan over the two toy keys with the model directory and suite-sized toy data in place."""
    sources = load_artifact_sources(release)
    data_root = tmp_path / "data"
    rows = {}
    for key in KEYS:
        count = load_suite(release).benchmark(key).rows
        write_toy_dataset(sources[key].local_path(data_root), count, seed=7)
        rows[key] = {r["index"]: r["answer"] for r in toy_rows(count, seed=7)}
    model_dir = tmp_path / "models" / MODEL
    model_dir.mkdir(parents=True)
    model = ModelDescriptor(MODEL, str(model_dir), "0" * 40, f"org/{MODEL}@{'0' * 40}", "TRACE 3B")
    plan = build_plan(release, models=[model], seeds=[42, 43], benchmarks=list(KEYS), data_root=data_root,
                      campaign_root=tmp_path / "campaign", with_judge=False)
    return plan, sources, rows


def _runner(plan, release, sources, backend, **extra) -> SliceRunner:
    return SliceRunner(plan=plan, verdicts=CampaignJudge(plan.campaign_root, release, plan), sources=sources,
                       campaign_root=plan.campaign_root, engines=EnginePool(lambda model: backend),
                       backend_kind="hf", allow_unprepared=True, **extra)


def _backend(rows, key, percent):
    return ScriptedBackend(rows[key], percent)


def test_a_slice_generates_scores_and_is_judged(setup, release):
    plan, sources, rows = setup
    backend = _backend(rows, "erqa", 37)
    runner = _runner(plan, release, sources, backend)
    erqa42 = plan.slices[0]
    assert erqa42.id == f"{MODEL}-seed42-erqa"
    outcome = runner.judged(erqa42)  # runs seed 43 of the cell too: the verdict needs every planned seed
    assert (outcome.generation.generated, outcome.score, outcome.scored.score.rows) == (400, 37.0, 400)
    assert backend.requests == 800 and outcome.verdict.outcome in ("reproduced", "inconclusive")
    assert outcome.verdict.components["variance_source"] == "rows over 2 reproduced seeds"
    props = dict(outcome.properties())
    assert {"score", "canonical_mean", "difference", "band", "interval", "se", "mds", "rows", "responses_sha256",
            "records_sha256", "dataset_sha256", "generation_contract_hash", "protocol_version"} <= set(props)
    # the family is the plan's: 1 model x 2 seeds x 2 benchmarks, plus 2 means
    assert props["rows"] == "400" and (props["verdict"], props["family_size"]) == (outcome.verdict.outcome, "6")
    assert runner.judged(plan.slices[2]).generation is runner.judged(plan.slices[2]).generation  # run once
    assert (plan.campaign_root / "scoring" / "seed_42" / MODEL / "erqa" / "scores.json").is_file()


def test_responses_from_random_weights_get_no_verdict(setup, release, monkeypatch):
    """A slice whose response file says random weights (``TRACE_VLLM_LOAD_FORMAT=dummy``) is scored but never
    judged: the reason names the setting (a 0-point benchmark run must not read as a failed reproduction)."""
    import trace_lib.campaign.run_slice as run_slice

    plan, sources, rows = setup
    runner = _runner(plan, release, sources, _backend(rows, "erqa", 37))
    stored = run_slice.read_stored_engine
    monkeypatch.setattr(run_slice, "read_stored_engine",
                        lambda path: {**(stored(path) or {}), "load_format": "dummy", "random_weights": True})
    outcome = runner.judged(plan.slices[0])
    assert outcome.verdict is None and outcome.score == 37.0
    assert "random weights" in outcome.verdict_reason and "TRACE_VLLM_LOAD_FORMAT" in outcome.verdict_reason
    monkeypatch.setattr(run_slice, "read_stored_engine", stored)
    assert _runner(plan, release, sources, _backend(rows, "erqa", 37)).judged(plan.slices[0]).verdict is not None


def test_the_engine_is_loaded_once_per_model_and_not_at_all_when_rows_are_stored(setup, release):
    plan, sources, rows = setup
    backend = _backend(rows, "erqa", 37)
    runner = _runner(plan, release, sources, backend)
    runner.run(plan.slices[0])
    runner.run(plan.slices[2])  # erqa seed 43, same model
    assert runner.engines.loads == [MODEL] and backend.requests == 800
    again = _runner(plan, release, sources, backend)
    outcome = again.run(plan.slices[0])
    assert (outcome.generation.generated, outcome.generation.reused, again.engines.loads) == (0, 400, [])
    runner.engines.close()
    assert backend.closed


def test_a_replaced_runner_starts_a_session_of_its_own(setup, release, tmp_path):
    """``dataclasses.replace(runner, campaign_root=...)`` (the GPU lane's streamed twin) shares the engines but not
    the session: no outcome, dataset hash or stream of the first runner answers for the second's campaign."""
    import dataclasses

    plan, sources, rows = setup
    backend = _backend(rows, "erqa", 37)
    runner = _runner(plan, release, sources, backend)
    assert runner.judged(plan.slices[0]).generation.generated == 400
    twin = dataclasses.replace(runner, campaign_root=tmp_path / "twin")
    outcome = twin.judged(plan.slices[0])
    assert (outcome.generation.generated, twin.stream, runner.engines.loads) == (400, None, [MODEL])
    assert outcome.generation.path.is_relative_to(tmp_path / "twin")  # not the first runner's outcome


def test_an_out_of_tolerance_slice_explains_itself(setup, release):
    plan, sources, rows = setup
    outcome = _runner(plan, release, sources, _backend(rows, "erqa", 60)).judged(plan.slices[0])
    assert outcome.verdict.outcome == "differs"
    assert outcome.verdict.explain().startswith(f"{MODEL}-seed42-erqa: seed score 60.000 vs canonical ")
    assert ": DIFFERS (engine not recorded)" in outcome.verdict.explain()


@pytest.mark.parametrize("percent", [12, 88])
def test_the_verdict_judges_the_reproduced_score_against_the_canonical_mean(setup, release, percent):
    plan, sources, rows = setup
    outcome = _runner(plan, release, sources, _backend(rows, "erqa", percent)).judged(plan.slices[0])
    canonical = mean(load_canonical(release).benchmarks[MODEL, "erqa"])
    verdict = outcome.verdict
    assert outcome.score == float(percent) != canonical
    assert (verdict.estimate, verdict.canonical) == (pytest.approx(outcome.score), canonical)
    assert verdict.difference == pytest.approx(outcome.score - canonical) and verdict.outcome == "differs"
    assert float(dict(outcome.properties())["difference"]) == pytest.approx(outcome.score - canonical, abs=1e-3)


def test_blockers_are_exact_sentences(setup, release, toy, tmp_path):
    plan, sources, rows = setup
    runner = _runner(plan, release, sources, _backend(rows, "erqa", 37))
    erqa = plan.slices[0]
    protocol = runner.protocol(erqa)
    assert runner.blocker(erqa, protocol) is None
    gpu = _runner(plan, release, sources, None, cuda_available=lambda: False)
    gpu.backend_kind = "vllm"
    assert gpu.blocker(erqa, protocol) == "no CUDA GPU"
    toy("erqa", judge="always")
    assert runner.blocker(erqa, runner.protocol(erqa)) == (
        "judge URL not set (--judge-url / TRACE_JUDGE_URL) for judge route erqa")
    dataset = sources["erqa"].local_path(plan.data_root)
    dataset.unlink()
    assert runner.blocker(erqa, protocol) == f"dataset missing: erqa ({dataset})"
    model_dir = plan.model(MODEL).local_path
    (tmp_path / "models" / MODEL).rmdir()
    assert runner.blocker(erqa, protocol) == f"model dir missing: {MODEL} ({model_dir})"


def test_an_unimplemented_protocol_is_an_error_not_a_skip(setup, release, monkeypatch):
    plan, sources, rows = setup
    monkeypatch.setitem(registry.PROTOCOLS, "erqa", "trace_lib.benchmarks._not_written_yet:PROTOCOL")
    with pytest.raises(ProtocolNotImplementedError, match="erqa: evaluation protocol not implemented"):
        _runner(plan, release, sources, None).run(plan.slices[0])


def test_unprepared_data_is_refused_unless_allowed(setup, release):
    plan, sources, rows = setup
    runner = _runner(plan, release, sources, _backend(rows, "erqa", 37))
    runner.allow_unprepared = False
    with pytest.raises(UsageError, match="erqa: benchmark data is not prepared; run 'trace-repro prepare-data"):
        runner.run(plan.slices[0])


def test_a_mean_waits_for_every_planned_seed_and_no_overall_is_planned_for_two_benchmarks(setup, release):
    plan, sources, rows = setup
    runner = _runner(plan, release, sources, _backend(rows, "erqa", 37))
    assert set(runner.verdicts.specs) == {f"{MODEL}-seed{s}-{k}" for s in (42, 43) for k in KEYS} | {
        f"{MODEL}-{k}" for k in KEYS}
    assert runner.verdicts.judge(f"{MODEL}-erqa") == (f"{MODEL}-erqa: 2 planned slice(s) not scored and verified "
                                                      f"yet: {MODEL}-seed42-erqa {MODEL}-seed43-erqa")
    runner.run(plan.slices[0])
    runner.run(plan.slices[2])
    assert runner.verdicts.judge(f"{MODEL}-erqa").kind == "mean"


def test_each_xdist_worker_gets_its_own_gpu_group(release):
    plan = build_plan(release, model_ids=[MODEL], gpu_groups="0,1;2,3", with_judge=False)
    assert worker_gpu_group(plan, None) is None
    assert worker_gpu_group(plan, "gw1") == (2, 3)
    with pytest.raises(UsageError, match="xdist worker gw2 has no GPU group"):
        worker_gpu_group(plan, "gw2")


def test_a_model_directory_that_fails_verification_is_refused_before_loading(setup, release):
    plan, sources, rows = setup
    runner = SliceRunner.from_plan(release, plan, backend="hf", campaign_root=plan.campaign_root,
                                   model_verify="shallow", allow_unprepared=True)
    with pytest.raises(InputError, match=rf"^{MODEL}: model directory does not match its descriptor \(found "
                                         r"'.*config.json is missing'\); 3 problem\(s\)"):
        runner.run(plan.slices[0])
    assert runner.engines.loads == []


# -- the session's scheduler generating ahead (issue 15) ------------------------------------------------------

def test_streamed_slices_equal_per_slice_ones_and_share_one_engine(setup, release, caplog):
    import logging

    from trace_lib.generation.store import response_path

    plan, sources, rows = setup
    erqa = [s for s in plan.slices if s.benchmark == "erqa"]
    per_slice = [_runner(plan, release, sources, _backend(rows, "erqa", 37)).run(s) for s in erqa]
    stream_plan = type(plan)(**{**{f: getattr(plan, f) for f in ("suite", "run_tag", "seeds", "models", "benchmarks",
                                                                  "gpu_groups", "data_root")},
                                "campaign_root": plan.campaign_root.parent / "streamed"})
    backend = _backend(rows, "erqa", 37)
    runner = _runner(stream_plan, release, sources, backend)
    runner.stream_ahead(erqa)
    with caplog.at_level(logging.INFO, logger="trace_lib.progress"):
        streamed = [runner.run(s) for s in erqa]
        runner.close()
    assert runner.engines.loads == [MODEL] and backend.requests == 800 and backend.closed
    status = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"[generate] {MODEL}: ")]
    assert status and status[-1].startswith(f"[generate] {MODEL}: 2/2 slices, 800/800 rows (0 reused)")
    assert [o.generation.generated for o in streamed] == [400, 400]
    assert [o.score for o in streamed] == [o.score for o in per_slice] == [37.0, 37.0]
    for slice_ in erqa:
        files = [response_path(p.campaign_root, model=MODEL, seed=slice_.seed, benchmark="erqa").read_bytes()
                 for p in (plan, stream_plan)]
        assert [f.partition(b"\n")[2] for f in files] == [files[0].partition(b"\n")[2]] * 2


def test_a_streamed_engine_failure_fails_each_slice_with_the_per_slice_message(setup, release):

    plan, sources, rows = setup

    def broken(model):
        raise InputError("model directory does not match its descriptor", field=model.slug, found="x")

    messages = []
    for stream in (False, True):
        runner = SliceRunner(plan=plan, verdicts=CampaignJudge(plan.campaign_root, release, plan), sources=sources,
                             campaign_root=plan.campaign_root, engines=EnginePool(broken), backend_kind="hf",
                             allow_unprepared=True)
        if stream:
            runner.stream_ahead(plan.slices)
        for slice_ in plan.slices[:2]:
            with pytest.raises(InputError) as info:
                runner.run(slice_)
            messages.append(info.value.render())
        runner.close()
    assert messages[:2] == messages[2:] and "does not match its descriptor" in messages[0]


def test_session_stream_follows_the_selection_schedule_and_xdist_mode(setup, release):
    from trace_lib.campaign.stream_ahead import session_stream

    plan, sources, rows = setup
    runner = _runner(plan, release, sources, None)
    items = [types.SimpleNamespace(callspec=types.SimpleNamespace(params={"eval_slice": s})) for s in plan.slices[1:]]
    items.append(types.SimpleNamespace(callspec=types.SimpleNamespace(params={"planned_test": f"{MODEL}-erqa"})))
    stream = runner.stream_session(items, schedule="stream", dist=None, worker=None)
    assert runner.stream is stream and stream.selected == plan.slices[1:] and not stream.covers(plan.slices[0])  # -k deselected slice 0
    assert session_stream(runner, items, schedule="stream", dist="loadgroup", worker="gw1") is not None
    assert session_stream(runner, items, schedule="stream", dist="load", worker="gw1") is None  # a model split
    assert session_stream(runner, items, schedule="per-slice", dist=None, worker=None) is None
    with pytest.raises(UsageError, match="unknown schedule"):
        session_stream(runner, items, schedule="fast", dist=None, worker=None)


def test_a_slice_is_not_judged_while_a_planned_seed_of_its_cell_cannot_run(setup, release):
    """--phase score: seed 43 of the cell has no stored responses, so seed 42 is scored but not judged (a verdict
    from one of two planned seeds would change with the order the tests run in)."""
    plan, sources, rows = setup
    backend = _backend(rows, "erqa", 37)
    outcome = _runner(plan, release, sources, backend).judged(plan.slices[0], generate=False)
    assert outcome.verdict is None and backend.requests == 400
    assert outcome.verdict_reason == ("not judged: seed 43 of the cell cannot run here (responses incomplete; run "
                                      "--phase generate first)")
    assert dict(outcome.properties())["verdict"] == "not judged"


# -- streaming faults and settings (issue 25) ------------------------------------------------------------------

OTHER = "trace-qwen2.5-vl-7b"


def _two_model_plan(setup, release, tmp_path):
    plan, sources, rows = setup
    models = [plan.model(MODEL)]
    (tmp_path / "models" / OTHER).mkdir(parents=True)
    models.append(ModelDescriptor(OTHER, str(tmp_path / "models" / OTHER), "1" * 40, f"org/{OTHER}@{'1' * 40}",
                                  "TRACE 7B"))
    two = build_plan(release, models=models, seeds=[42], benchmarks=["erqa"], data_root=plan.data_root,
                     campaign_root=tmp_path / "two", with_judge=False)
    return two, sources, rows


def test_a_models_stream_runs_only_that_models_slices_on_its_engine(setup, release, tmp_path):

    plan, sources, rows = _two_model_plan(setup, release, tmp_path)
    backends = {MODEL: _backend(rows, "erqa", 37), OTHER: _backend(rows, "erqa", 37)}
    runner = SliceRunner(plan=plan, verdicts=CampaignJudge(plan.campaign_root, release, plan), sources=sources,
                         campaign_root=plan.campaign_root, engines=EnginePool(lambda model: backends[model.slug]),
                         backend_kind="hf", allow_unprepared=True)
    runner.stream_ahead(plan.slices)
    first = [s for s in plan.slices if s.model == MODEL]
    assert runner.stream.result(first[0]).generated == 400
    runner.stream._join(runner.stream._streams[MODEL])
    assert (backends[MODEL].requests, backends[OTHER].requests) == (400, 0)  # the other model waits for its engine
    second = [s for s in plan.slices if s.model == OTHER]
    assert runner.stream.result(second[0]).generated == 400
    runner.close()
    assert (backends[MODEL].requests, backends[OTHER].requests) == (400, 400) and runner.engines.loads == [MODEL, OTHER]


def test_streaming_applies_the_generation_overrides(setup, release):
    from trace_lib.generation.store import load_header, response_path

    plan, sources, rows = setup
    sent = []

    class Recording(ScriptedBackend):
        def generate(self, requests):
            sent.extend(r.sampling["max_tokens"] for r in requests)
            yield from super().generate(requests)

    runner = _runner(plan, release, sources, Recording(rows["erqa"], 37), generation_overrides={"max_tokens": 17})
    erqa = plan.slices[0]
    runner.stream_ahead([erqa])
    assert runner.run(erqa).generation.generated == 400
    runner.close()
    assert set(sent) == {17}
    header = load_header(response_path(plan.campaign_root, model=MODEL, seed=42, benchmark="erqa"))
    assert header["contract"]["max_tokens"] == 17


def test_a_late_stream_crash_keeps_the_slices_already_completed(setup, release):

    plan, sources, rows = setup
    erqa, countbench = [s for s in plan.slices if s.seed == 42]  # streamed one benchmark after the other

    class DiesAfterOneSlice(ScriptedBackend):
        def generate(self, requests):
            for request in requests:
                if self.requests == 400:  # erqa's 400 rows are answered: the engine dies on the next benchmark
                    raise RuntimeError("engine died")
                yield from super().generate([request])

    runner = _runner(plan, release, sources, DiesAfterOneSlice(rows["erqa"], 37))
    runner.stream_ahead([erqa, countbench])
    stream = runner.stream._start(MODEL)
    stream.thread.join()  # the crash has been handled: every slice has its final result
    assert stream.results[erqa].ok and stream.results[erqa].run.generated == 400
    assert "generation stopped" in stream.results[countbench].error.render()
    assert runner.stream.result(erqa).generated == 400
    runner.close()


def test_backend_options_pass_the_request_timeout_and_the_device(setup):
    from trace_lib.campaign.run_slice import backend_options

    plan, _, _ = setup
    assert backend_options("openai", plan, base_url="http://127.0.0.1:9/v1", request_timeout=7.5) == {
        "base_url": "http://127.0.0.1:9/v1", "timeout_s": 7.5}
    assert backend_options("openai", plan, base_url="http://127.0.0.1:9/v1") == {"base_url": "http://127.0.0.1:9/v1"}
    assert backend_options("hf", plan, device="cuda:1") == {"device": "cuda:1"}


def test_the_engine_of_the_previous_model_is_closed_when_another_model_needs_one(setup):
    plan, _, rows = setup
    other = ModelDescriptor("other", "/nonexistent", "1" * 40, f"org/other@{'1' * 40}", "Other")
    backends = {MODEL: _backend(rows, "erqa", 37), "other": _backend(rows, "erqa", 37)}
    pool = EnginePool(lambda model: backends[model.slug])
    assert pool.get(plan.model(MODEL)) is backends[MODEL] and pool.get(plan.model(MODEL)) is backends[MODEL]
    assert pool.get(other) is backends["other"]
    assert backends[MODEL].closed and not backends["other"].closed and pool.loads == [MODEL, "other"]


def test_blockers_an_openai_ray_or_stored_slice_does_not_have(setup, release, toy, tmp_path):
    plan, sources, rows = setup
    erqa = plan.slices[0]
    served = _runner(plan, release, sources, None)
    served.backend_kind = "openai"
    (tmp_path / "models" / MODEL).rmdir()
    assert served.blocker(erqa, served.protocol(erqa)) is None  # the model is served elsewhere: no directory
    (tmp_path / "models" / MODEL).mkdir()
    gpu = _runner(plan, release, sources, None, cuda_available=lambda: False, ray_address="ray://head:10001")
    gpu.backend_kind = "vllm"
    assert gpu.blocker(erqa, gpu.protocol(erqa)) is None  # the GPUs are the Ray cluster's
    _runner(plan, release, sources, _backend(rows, "erqa", 37)).run(erqa)
    gpu.ray_address = None
    assert gpu.responses_complete(erqa) and gpu.blocker(erqa, gpu.protocol(erqa)) is None  # nothing to generate
    toy("erqa", judge="always")
    assert gpu.blocker(erqa, gpu.protocol(erqa), need_judge=False) is None  # --phase generate scores nothing


def test_responses_are_complete_only_with_every_planned_row_and_a_readable_file(setup, release):
    from trace_lib.generation.store import response_path

    plan, sources, rows = setup
    runner = _runner(plan, release, sources, _backend(rows, "erqa", 37))
    erqa = plan.slices[0]
    runner.run(erqa)
    path = response_path(plan.campaign_root, model=erqa.model, seed=erqa.seed, benchmark=erqa.benchmark)
    header, *lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(header + b"".join(lines[:-1]))
    assert not runner.responses_complete(erqa)  # 399 of 400 rows
    path.write_bytes(b"not a response file\n")
    assert not runner.responses_complete(erqa)


class _CountingJudge:
    def __init__(self) -> None:
        self.checks = 0

    def check(self) -> None:
        self.checks += 1


def test_the_judge_is_checked_once_per_session_and_only_for_a_judge_route(setup, release, toy):
    plan, sources, rows = setup
    judge = _CountingJudge()
    runner = _runner(plan, release, sources, None, judge=judge)
    runner._check_judge(runner.protocol(plan.slices[0]))  # noqa: SLF001 - erqa's toy route needs no judge
    assert judge.checks == 0
    toy("erqa", judge="always")
    for _ in range(2):
        runner._check_judge(runner.protocol(plan.slices[0]))  # noqa: SLF001
    assert judge.checks == 1


def test_an_empty_cuda_visible_devices_means_no_gpu_without_asking_torch(monkeypatch):
    from trace_lib.campaign.run_slice import _cuda_available

    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: True)
    monkeypatch.setitem(sys.modules, "torch", torch)  # a torch that would say yes
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert _cuda_available() is False
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert _cuda_available() is True


def test_an_openai_engine_needs_no_model_directory_and_model_verify_is_checked(setup, release):
    plan, _, _ = setup
    runner = SliceRunner.from_plan(release, plan, backend="openai", base_url="http://127.0.0.1:9/v1",
                                   campaign_root=plan.campaign_root, model_verify="deep", allow_unprepared=True)
    assert runner.engines.get(plan.model(MODEL)).name == "openai"  # the directory holds no config.json
    runner.close()
    with pytest.raises(UsageError, match="--model-verify: invalid model verification"):
        SliceRunner.from_plan(release, plan, backend="hf", campaign_root=plan.campaign_root, model_verify="full")


def test_properties_count_generated_and_reused_rows_and_a_slice_without_canonical_says_so(setup, release,
                                                                                          monkeypatch):
    plan, sources, rows = setup
    _runner(plan, release, sources, _backend(rows, "erqa", 37)).run(plan.slices[0])
    runner = _runner(plan, release, sources, _backend(rows, "erqa", 37))
    monkeypatch.delitem(runner.verdicts.specs, plan.slices[0].id)
    outcome = runner.judged(plan.slices[0])
    props = dict(outcome.properties())
    assert (props["rows_generated"], props["rows_reused"]) == ("0", "400")
    assert outcome.verdict_reason == props["verdict_reason"] == f"no canonical score for model {MODEL}"
