"""The campaign plan: slices and their ids, selection, GPU groups, and --print-config that starts nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from trace_lib.campaign.plan import Slice, build_plan
from trace_lib.options import parse_gpu_groups
from trace_lib.errors import UsageError
from trace_lib.release.suite import load_seeds, load_suite


def test_full_plan_is_models_x_seeds_x_benchmarks(release, tmp_path):
    plan = build_plan(release, model_root=tmp_path)
    suite = load_suite(release)
    assert len(plan.slices) == len(plan.models) * len(load_seeds(release)) * len(suite.keys)
    assert len({s.id for s in plan.slices}) == len(plan.slices)
    assert plan.slices[0] == Slice(plan.models[0].slug, load_seeds(release)[0], suite.keys[0])


def test_slice_id_format():
    assert Slice("trace-qwen2.5-vl-3b", 42, "mathvista").id == "trace-qwen2.5-vl-3b-seed42-mathvista"


def test_selection_keeps_suite_order(release, tmp_path):
    plan = build_plan(release, model_root=tmp_path, model_ids=["trace-qwen2.5-vl-3b"], seeds=["43"],
                      benchmarks=["mmstar", "chartqapro"])
    assert [s.id for s in plan.slices] == ["trace-qwen2.5-vl-3b-seed43-chartqapro", "trace-qwen2.5-vl-3b-seed43-mmstar"]
    assert plan.rows(plan.slices[1]) == load_suite(release).benchmark("mmstar").rows


@pytest.mark.parametrize("kwargs,message", [
    ({"benchmarks": ["mathvistaa"]}, "--benchmark: unknown benchmark 'mathvistaa'; did you mean mathvista"),
    ({"seeds": ["42", "42"]}, "--seeds: duplicate seed"),
    ({"seeds": ["-1"]}, "--seeds: invalid seed"),
    ({"model_ids": ["nope"]}, "unknown release model 'nope'"),
    ({"deltas": ["d=trace-qwen2.5-vl-3b=nope"]}, "delta names unknown model 'nope'"),
    ({"deltas": ["justalabel"]}, "--delta: invalid delta"),
    ({"gpu_groups": "0,1;2", }, "GPU groups differ in size"),
    ({"gpu_groups": "0,1;2,3", "tensor_parallel_size": 4}, "tensor parallel size exceeds a GPU group"),
    ({"seeds": ["\u0664\u0662"]}, "--seeds: invalid seed"),  # Arabic-Indic 42: int() reads it, upstream does not
    ({"deltas": ["=trace-qwen2.5-vl-3b=qwen2.5-vl-3b-base"]}, "--delta: invalid delta"),  # no label
    ({"models": [("m", "/m", f"sha256set:{'1' * 64}", f"org/m@{'0' * 40}", "M")], "model_ids": ["qwen2.5-vl-3b-base"]},
     "--model-id: --model and --model-id cannot be combined"),
])
def test_bad_plan_options_are_usage_errors(release, tmp_path, kwargs, message):
    from trace_lib.campaign.models import parse_descriptors

    if "models" in kwargs:
        kwargs = {**kwargs, "models": parse_descriptors(kwargs["models"])}
    with pytest.raises(UsageError) as info:
        build_plan(release, model_root=tmp_path, **kwargs)
    assert message in info.value.render()


@pytest.mark.parametrize("text,groups", [
    ("0", ((0,),)), ("0 1 2 3", ((0,), (1,), (2,), (3,))), ("0,1;2,3", ((0, 1), (2, 3))), ("4,5,6,7", ((4, 5, 6, 7),)),
])
def test_gpu_groups(text, groups):
    assert parse_gpu_groups(text) == groups


def test_gpu_in_two_groups_is_refused():
    with pytest.raises(UsageError, match="a GPU appears in two groups"):
        parse_gpu_groups("0,1;1,2")


def test_default_run_tag_follows_upstream(release, tmp_path):
    plan = build_plan(release, model_root=tmp_path, seeds=["42", "43", "44"])
    assert plan.run_tag == "trace_eval_v1_temp06_seed42_43_44"


def test_print_config_starts_nothing_and_writes_nothing(release, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACE_")}
    code = (
        "import sys; from trace_lib.cli.main import main; rc = main(sys.argv[1:]); "
        "heavy = sorted(m for m in ('torch', 'vllm', 'transformers', 'ray', 'huggingface_hub') if m in sys.modules); "
        "print('HEAVY=' + ','.join(heavy)); sys.exit(rc)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "plan", "--print-config", "--trace-root", str(release.path),
         "--campaign-root", str(tmp_path / "campaign"), "--gpu-groups", "0,1;2,3", "--delta",
         "gain=trace-qwen2.5-vl-3b=qwen2.5-vl-3b-base"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "suite=trace_eval_v1"
    assert "delta=gain=trace-qwen2.5-vl-3b=qwen2.5-vl-3b-base" in lines
    assert "gpu_groups=0,1;2,3 (2 engine(s), tensor_parallel_size=2)" in lines
    assert sum(line.startswith("slice=") for line in lines) == len(build_plan(release, model_root=tmp_path).slices)
    assert lines[-1] == "HEAVY="
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_print_config_shows_each_slice_band_from_the_release(release):
    """--print-config states every test's predicted band and minimum detectable shift (80% power): one seed's
    variance predicted from the release (the cell's canonical seed variance moderated by the release prior, which
    lies between the cell's own and its benchmark's prior scale), the plan's family (here one test: alpha itself)."""
    import math
    import statistics

    from trace_lib.aggregation.canonical import binomial_scale, load_canonical
    from trace_lib.aggregation.verdict import predicted_seed_variance
    from trace_lib.campaign.plan import build_plan

    model, bench = "qwen2.5-vl-3b-base", "cvbench_3d"
    plan = build_plan(release, model_ids=[model], seeds=[43], benchmarks=[bench])
    line = plan.render(plan.power(release)).splitlines()[-1]
    canonical = load_canonical(release)
    seeds = list(canonical.benchmarks[(model, bench)].values())
    scale = binomial_scale(statistics.fmean(seeds), plan.rows(plan.slices[0]))
    own, prior = statistics.variance(seeds), canonical.seed_prior.prior_var[bench] * scale
    predicted = predicted_seed_variance(canonical, model, bench)
    assert min(own, prior) < predicted < max(own, prior)
    se = math.sqrt(predicted * (1 + 1 / 3))
    z = statistics.NormalDist().inv_cdf(1 - 0.05 / 2)
    mds = (z + statistics.NormalDist().inv_cdf(0.8)) * se
    assert line == f"slice={model}-seed43-{bench} rows={plan.rows(plan.slices[0])} band=+-{z * se:.2f} mds={mds:.2f}"


@pytest.mark.parametrize("tag", ["../x", "a/b", ".hidden", "tag with space"])
def test_run_tags_that_are_not_plain_names_are_refused(release, tag):
    from trace_lib.campaign.plan import build_plan
    from trace_lib.errors import UsageError

    with pytest.raises(UsageError, match="--run-tag: invalid run tag"):
        build_plan(release, run_tag=tag)


def test_the_deal_counts_a_workers_engine_starts(release, tmp_path):
    """A model new to a worker costs it an engine start (START_COST_ROWS): the paper campaign's 16 workers (8 GPUs
    x 2 engines) hold one model each, where dealing by rows alone gives each 2-4; a one-model plan deals as before,
    and every worker still gets a share."""
    from trace_lib.campaign.plan import START_COST_ROWS, build_plan, deal_slices

    paper = build_plan(release, seeds=[42, 43, 44], data_root=tmp_path)
    assert len(paper.models) == 8
    held = [len({s.model for s in share}) for share in deal_slices(paper.slices, paper.rows, 16)]
    assert held == [1] * 16
    by_rows = [len({s.model for s in share}) for share in deal_slices(paper.slices, paper.rows, 16, start_rows=0)]
    assert min(by_rows) >= 2
    one = build_plan(release, model_ids=["trace-qwen2.5-vl-3b"], seeds=[42, 43, 44], data_root=tmp_path)
    for workers in (2, 3, 16):
        assert deal_slices(one.slices, one.rows, workers) == deal_slices(one.slices, one.rows, workers, start_rows=0)
    small = [s for s in one.slices if s.seed == 42][:8]
    shares = deal_slices(small, lambda _: 64, 2)  # 8 x 64 rows, far below one start's rows: both still work
    assert [len(share) for share in shares] == [4, 4] and 8 * 64 < START_COST_ROWS


def test_engines_sharing_a_gpu_start_the_same_model(release, tmp_path):
    """``worker_shares(..., per_group=2)`` only reorders the deal: workers 2g and 2g+1 (GPU group g) hold the same
    model, so the second engine on a GPU finds that model compiled."""
    from trace_lib.campaign.plan import build_plan, deal_slices, worker_shares

    paper = build_plan(release, seeds=[42, 43, 44], data_root=tmp_path)
    dealt = deal_slices(paper.slices, paper.rows, 16)
    assert worker_shares(paper, 16) == dealt
    paired = worker_shares(paper, 16, per_group=2)
    assert sorted(map(tuple, paired)) == sorted(map(tuple, dealt))  # the same shares, in another order
    models = [{s.model for s in share} for share in paired]
    assert all(models[2 * g] == models[2 * g + 1] for g in range(8))
    as_dealt = [{s.model for s in share} for share in dealt]
    assert not all(as_dealt[2 * g] == as_dealt[2 * g + 1] for g in range(8))  # the deal alone splits them


def test_shares_without_work_leave_no_gpu_running_two_engines_while_another_idles():
    """Fewer (model, benchmark) pairs than workers: ``side_by_side`` spreads the held shares over the GPU groups
    (two per group only where there are more held shares than groups), still keeping equal models side by side."""
    from types import SimpleNamespace

    from trace_lib.campaign.plan import side_by_side

    def share(*models):
        return [SimpleNamespace(model=m) for m in models]

    a, b, c = share("a"), share("b"), share("c")
    placed = side_by_side([a, b, [], []], 2)  # 2 groups x 2 engines, 2 held shares
    assert [[s.model for s in x] for x in placed] == [["a"], [], ["b"], []]
    placed = side_by_side([c, a, b, share("a"), [], []], 2)  # 3 groups, 4 held: one group doubles, equal models
    assert [[s.model for s in x] for x in placed] == [["a"], ["a"], ["b"], [], ["c"], []]
    full = [b, a, share("b"), share("a")]
    assert [[s.model for s in x] for x in side_by_side(full, 2)] == [["a"], ["a"], ["b"], ["b"]]
    assert side_by_side(full, 1) == full
    assert [[s.model for s in x] for x in side_by_side([c, b, a], 2)] == [["a"], ["b"], ["c"]]  # 2 + 1 slots


def test_slices_are_model_major_then_seed_then_benchmark(release, tmp_path):
    plan = build_plan(release, model_root=tmp_path, model_ids=["trace-qwen2.5-vl-3b", "qwen2.5-vl-3b-base"],
                      seeds=["43", "42"], benchmarks=["mmstar", "chartqapro"])
    models = [m.slug for m in plan.models]
    assert [(s.model, s.seed, s.benchmark) for s in plan.slices] == [
        (m, seed, b) for m in models for seed in (43, 42) for b in ("chartqapro", "mmstar")]
    assert plan.model(models[1]) is plan.models[1]
    with pytest.raises(KeyError):
        plan.model("not-planned")


def test_empty_selections_mean_the_release_s_defaults(release, tmp_path):
    from trace_lib.campaign.plan import select_benchmarks

    plan = build_plan(release, model_root=tmp_path, seeds=[], benchmarks=[])
    assert plan.seeds == tuple(load_seeds(release)) and plan.benchmarks == load_suite(release).keys
    assert select_benchmarks(load_suite(release), []) == load_suite(release).keys


def test_the_run_tag_and_gpu_groups_come_from_the_environment_when_no_flag_names_them(release, tmp_path,
                                                                                      monkeypatch):
    from trace_lib.campaign.plan import GPU_GROUPS_ENV, RUN_TAG_ENV

    monkeypatch.setenv(RUN_TAG_ENV, "nightly")
    monkeypatch.setenv(GPU_GROUPS_ENV, "0,1;2,3")
    plan = build_plan(release, model_root=tmp_path)
    assert (plan.run_tag, plan.gpu_groups, plan.tp_size) == ("nightly", ((0, 1), (2, 3)), 2)
    flagged = build_plan(release, model_root=tmp_path, run_tag="mine", gpu_groups="0,1", tensor_parallel_size=1)
    assert (flagged.run_tag, flagged.gpu_groups, flagged.tp_size) == ("mine", ((0, 1),), 1)
    assert "gpu_groups=0,1 (1 engine(s), tensor_parallel_size=1)" in flagged.render().splitlines()


def test_print_config_names_the_judge_and_models_without_canonical_scores(release, tmp_path):
    from trace_lib.campaign.models import parse_descriptors

    judged = build_plan(release, model_root=tmp_path, benchmarks=["erqa"], seeds=["42"])
    assert judged.judge is not None and f"judge={judged.judge.render().removeprefix('model=')}" in judged.render()
    bare = build_plan(release, model_root=tmp_path, benchmarks=["erqa"], seeds=["42"], with_judge=False)
    assert bare.judge is None and not [line for line in bare.render().splitlines() if line.startswith("judge=")]
    mine = build_plan(release, benchmarks=["erqa"], seeds=["42"], models=parse_descriptors(
        [("mine", str(tmp_path), f"sha256set:{'1' * 64}", f"org/mine@{'0' * 40}", "Mine")]))
    lines = mine.render(mine.power(release)).splitlines()
    assert "slice=mine-seed42-erqa rows=400 canonical=none (not a release model)" in lines
