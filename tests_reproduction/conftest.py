"""tests_reproduction: one test per slice of the campaign plan, plus one overall test per model and seed.

Parameters come from ``trace_lib.campaign.plan`` (the same flags as ``trace-repro plan``: ``--model-id``,
``--model``, ``--seeds``, ``--benchmark``, ``--model-root``, ``--data-root``, ``--gpu-groups`` ...); ids are
``MODEL-seedSEED-BENCHMARK`` so ``-k`` selects a slice, a model, a seed or a benchmark. Under pytest-xdist use
``--dist loadgroup``: every item of a model carries ``xdist_group(<model>)``, so one worker runs a model's slices
one after another with one engine, on the GPU group of its index (``gwN`` -> the N-th ``--gpu-groups`` group).
Slices run through :class:`trace_lib.campaign.run_slice.SliceRunner`; a missing model, dataset, GPU or judge URL
skips with the exact reason; an unimplemented protocol or any other error fails.
"""

from __future__ import annotations

import os
from typing import Callable

import pytest

from trace_lib import options
from trace_lib.errors import TraceReproError

_PLAN = pytest.StashKey[object]()


def reproduction_plan(config: pytest.Config):  # noqa: ANN201 - trace_lib.campaign.plan.Plan
    """The session's plan, built once from the command line (bad flags are a usage error)."""
    if _PLAN not in config.stash:
        from trace_lib.campaign.plan import plan_from_options
        from trace_lib.release.locate import locate_release

        try:
            release = locate_release(options.resolve(config.option, options.TRACE_ROOT))
            config.stash[_PLAN] = plan_from_options(release, config.option, with_judge=False)
        except TraceReproError as exc:
            raise pytest.UsageError(exc.render()) from None
    return config.stash[_PLAN]


def _pin_worker_gpu_group(config: pytest.Config, plan) -> None:  # noqa: ANN001
    """Bind this xdist worker to its GPU group (``gwN`` -> N-th group) before any engine touches CUDA.

    Done when the first slice needs an engine, not at configure time, so that lanes which collect this folder
    without running it (``pytest -m offline -n 2``) are unaffected by --gpu-groups.
    """
    from trace_lib.campaign.run_slice import GPU_BACKENDS, worker_gpu_group

    if options.resolve(config.option, options.BACKEND) not in GPU_BACKENDS:
        return
    try:
        group = worker_gpu_group(plan, os.environ.get("PYTEST_XDIST_WORKER"))
    except TraceReproError as exc:
        pytest.fail(exc.render(), pytrace=False)
    if group is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in group)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    plan = None
    if "eval_slice" in metafunc.fixturenames:
        plan = reproduction_plan(metafunc.config)
        metafunc.parametrize("eval_slice", [
            pytest.param(s, id=s.id, marks=pytest.mark.xdist_group(s.model)) for s in plan.slices
        ])
    if "model_seed" in metafunc.fixturenames:
        plan = plan or reproduction_plan(metafunc.config)
        metafunc.parametrize("model_seed", [
            pytest.param((m.slug, seed), id=f"{m.slug}-seed{seed}-overall", marks=pytest.mark.xdist_group(m.slug))
            for m in plan.models for seed in plan.seeds
        ])


@pytest.fixture(scope="session")
def slice_runner(pytestconfig: pytest.Config, release, tmp_path_factory, request):  # noqa: ANN201 - SliceRunner
    """One runner per session (per xdist worker): plan, tolerance rule, judge, and one engine per model; with
    ``--schedule stream`` (the default) the session's scheduler generates each model's selected slices ahead."""
    from pathlib import Path

    from trace_lib.campaign.run_slice import SliceRunner

    plan = reproduction_plan(pytestconfig)
    _pin_worker_gpu_group(pytestconfig, plan)
    option = pytestconfig.option
    try:
        runner = SliceRunner.from_plan(
            release, plan,
            backend=options.resolve(option, options.BACKEND),
            campaign_root=Path(plan.campaign_root) if plan.campaign_root else tmp_path_factory.mktemp("campaign"),
            base_url=options.resolve(option, options.BASE_URL),
            device=options.resolve(option, options.DEVICE),
            judge_url=options.resolve(option, options.JUDGE_URL),
            model_verify=options.resolve(option, options.MODEL_VERIFY),
            ray_address=options.resolve(option, options.RAY_ADDRESS),  # campaign scheduler on Ray (issue 15)
        )
    except TraceReproError as exc:
        pytest.fail(exc.render(), pytrace=False)
    # -- campaign scheduler (issue 15): generate ahead, each slice test waits for its own slice --
    from trace_lib.campaign.stream_ahead import session_stream

    try:
        runner.stream = session_stream(runner, request.session.items,
                                       schedule=options.resolve(option, options.SCHEDULE),
                                       dist=getattr(option, "dist", None), worker=os.environ.get("PYTEST_XDIST_WORKER"))
    except TraceReproError as exc:
        pytest.fail(exc.render(), pytrace=False)
    # -- end campaign scheduler --
    yield runner
    runner.close()


@pytest.fixture
def run_slice(slice_runner, receipt) -> Callable:
    """``run_slice(slice_) -> SliceOutcome`` inside the test: skips with the exact reason when the slice cannot
    run here, fails (no traceback) on any trace-repro error, records the receipt properties."""

    def run(slice_):  # noqa: ANN001, ANN202
        try:
            protocol = slice_runner.protocol(slice_)
            reason = slice_runner.blocker(slice_, protocol)
            if reason:
                pytest.skip(reason)
            outcome = slice_runner.run(slice_)
        except TraceReproError as exc:
            pytest.fail(exc.render(), pytrace=False)
        for name, value in outcome.properties():
            receipt(name, value)
        receipt("engine_loads", " ".join(slice_runner.engines.loads))
        receipt("cuda_visible_devices", os.environ.get("CUDA_VISIBLE_DEVICES", ""))
        if outcome.verdict is None:
            pytest.skip(f"no canonical score for model {slice_.model}: scored {outcome.score:.3f} "
                        f"({outcome.scored.scores_path})")
        return outcome

    return run


@pytest.fixture
def overall(slice_runner, receipt) -> Callable:
    """``overall(model, seed) -> Verdict`` from the campaign's verified scores; skips with the reason when
    some slice of that model and seed is not scored."""
    from trace_lib.campaign.run_slice import overall_outcome

    def judge(model: str, seed: int):  # noqa: ANN202
        outcome = overall_outcome(slice_runner, model, seed)
        if outcome.overall is None:
            pytest.skip(outcome.reason)
        for name, value in outcome.properties():
            receipt(name, value)
        failed = [v.explain() for v in outcome.categories if not v.ok]
        for line in failed:
            receipt("category_outside_tolerance", line)
        return outcome.overall

    return judge
