"""tests_reproduction: one test per planned verdict: each slice, each model-benchmark mean, categories, overall and
the paper's claims (``trace_lib.aggregation.verdict.planned_tests``).

Parameters come from ``trace_lib.campaign.plan`` (the same flags as ``trace-repro plan``: ``--model-id``,
``--model``, ``--seeds``, ``--benchmark``, ``--model-root``, ``--data-root``, ``--gpu-groups`` ...); ids are
``MODEL-seedSEED-BENCHMARK`` (slices), ``MODEL-BENCHMARK`` (means), ``MODEL-category[NAME]``, ``MODEL-overall`` and
``MODEL-vs-BASE-BENCHMARK|category[NAME]|overall`` (claims), so ``-k`` selects a slice, a model, a seed, a
benchmark or a claim; ``-k`` never changes the family the budget is spread over. A verdict is reproduced (pass),
differs (fail) or inconclusive (``--inconclusive fail|skip|xfail``, default fail: never a pass). Under pytest-xdist use
``--dist loadgroup``: every item of a model carries ``xdist_group(<model>)``, so one worker runs a model's slices
one after another with one engine, on the GPU group of its index (``gwN`` -> the N-th ``--gpu-groups`` group).
Every item here runs under ``--slice-timeout`` (default: no per-test limit) instead of pytest.ini's 300 s, and
logs its generation progress (``trace_lib.progress``; live with ``--log-cli-level INFO``; under xdist watch
``trace-repro status --campaign-root C --watch 30``). Slices run through
:class:`trace_lib.campaign.run_slice.SliceRunner`; a missing model, dataset, GPU or judge URL
skips with the exact reason; an unimplemented protocol or any other error fails.
"""

from __future__ import annotations

import os
from typing import Callable

import pytest

from trace_lib import options
from trace_lib.benchmarks import deviations
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
    if "planned_test" in metafunc.fixturenames:
        plan = plan or reproduction_plan(metafunc.config)
        metafunc.parametrize("planned_test", [
            pytest.param(spec.test_id, id=spec.test_id, marks=pytest.mark.xdist_group(spec.cells[0][0]))
            for spec in _planned_specs(metafunc.config, plan) if spec.kind != "slice"
        ])
    _generate_archive_tests(metafunc)


def _planned_specs(config: pytest.Config, plan) -> list:  # noqa: ANN001
    from trace_lib.aggregation.canonical import load_canonical
    from trace_lib.aggregation.verdict import planned_tests
    from trace_lib.release.locate import locate_release

    try:
        options.reject_tolerance_z(config.option)
        return planned_tests(load_canonical(locate_release(options.resolve(config.option, options.TRACE_ROOT))), plan)
    except TraceReproError as exc:
        raise pytest.UsageError(exc.render()) from None


@pytest.fixture(scope="session")
def slice_runner(pytestconfig: pytest.Config, release, tmp_path_factory, request):  # noqa: ANN201 - SliceRunner
    """One runner per session (per xdist worker): plan, tolerance rule, judge, and one engine per model; with
    ``--schedule stream`` (the default) the session's scheduler generates each model's selected slices ahead."""
    from pathlib import Path

    from trace_lib.campaign.run_slice import SliceRunner
    from trace_lib.generation.run import logged_progress

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
            progress=logged_progress,
            ray_address=options.resolve(option, options.RAY_ADDRESS),  # campaign scheduler on Ray (issue 15)
            request_timeout=options.resolve(option, options.REQUEST_TIMEOUT),
            archive_root=options.resolve(option, options.ARCHIVE_ROOT),
        )
    except TraceReproError as exc:
        pytest.fail(exc.render(), pytrace=False)
    # -- campaign scheduler (issue 15): generate ahead, each slice test waits for its own slice --
    try:
        runner.stream_session(request.session.items, schedule=options.resolve(option, options.SCHEDULE),
                              dist=getattr(option, "dist", None), worker=os.environ.get("PYTEST_XDIST_WORKER"))
    except TraceReproError as exc:
        pytest.fail(exc.render(), pytrace=False)
    # -- end campaign scheduler --
    yield runner
    runner.close()


@pytest.fixture
def run_slice(slice_runner, receipt, trace_phase, pytestconfig: pytest.Config, release) -> Callable:
    """``run_slice(slice_) -> SliceOutcome`` inside the test: skips with the exact reason when the slice cannot
    run here, fails (no traceback) on any trace-repro error, records the receipt properties. With an archive
    (``--archive-root``), a slice outside tolerance fails naming its first stage diverging from the paper's run."""

    def run(slice_):  # noqa: ANN001, ANN202
        phase = trace_phase  # --phase generate|score|all (trace_lib.pytest_judge)
        try:
            protocol = slice_runner.protocol(slice_)
            reason = slice_runner.blocker(slice_, protocol, need_judge=phase != "generate")
            if reason:
                pytest.skip(reason)
            if phase == "generate":  # --phase generate: coverage and identity verified, nothing scored
                generated = slice_runner.generate(slice_)
                receipt("generated_rows", generated.generated)
                receipt("reused_rows", generated.reused)
                if not generated.complete:
                    pytest.fail(f"{slice_.id}: responses do not cover the dataset after generation", pytrace=False)
                pytest.skip(f"phase generate: {slice_.id} generated and verified; scored in --phase score")
            if phase == "score" and not slice_runner.responses_complete(slice_):
                pytest.fail(f"{slice_.id}: responses incomplete; run --phase generate first", pytrace=False)
            outcome = slice_runner.judged(slice_, generate=phase != "score")
        except TraceReproError as exc:
            pytest.fail(exc.render(), pytrace=False)
        lines = deviations.for_benchmark(slice_.benchmark)  # the one list of deliberate deviations
        for name, value in outcome.properties() + deviations.receipt_properties(lines):
            receipt(name, value)
        receipt("engine_loads", " ".join(slice_runner.engines.loads))
        receipt("cuda_visible_devices", os.environ.get("CUDA_VISIBLE_DEVICES", ""))
        if outcome.verdict is None:
            pytest.skip(f"{outcome.verdict_reason}: scored {outcome.score:.3f} ({outcome.scored.scores_path})")
        archive_root = options.resolve(pytestconfig.option, options.ARCHIVE_ROOT)
        if outcome.verdict.outcome == "differs" and archive_root:
            from trace_lib.diagnose.hint import archive_divergence_hint

            from trace_lib.archive.extraction_form import benchmark_routes

            hint = archive_divergence_hint(slice_runner.campaign_root, archive_root, slice_,
                                           routes=benchmark_routes(release))
            pytest.fail(f"DIFFERS {outcome.verdict.explain()}\n{hint}", pytrace=False)
        return outcome

    return run


@pytest.fixture
def judge_planned(slice_runner, receipt, trace_phase) -> Callable:
    """``judge_planned(test_id) -> Verdict`` of a mean, category, overall or claim test from the campaign's verified
    scores; skips with the reason while some slice it needs is not scored."""

    def judge(test_id: str):  # noqa: ANN202
        if trace_phase == "generate":
            pytest.skip("phase generate: verdicts come in --phase score")
        try:
            verdict = slice_runner.verdicts.judge(test_id)
        except TraceReproError as exc:
            pytest.fail(exc.render(), pytrace=False)
        if isinstance(verdict, str):
            pytest.skip(verdict)
        for name, value in verdict.properties():
            receipt(name, value)
        return verdict

    return judge


@pytest.fixture
def verdict_outcome(pytestconfig: pytest.Config) -> Callable:
    """``verdict_outcome(verdict)``: pass (reproduced), fail (differs) or the ``--inconclusive`` mode."""
    from trace_lib.pytest_plugin import assert_verdict, inconclusive_mode

    mode = inconclusive_mode(pytestconfig)
    return lambda verdict: assert_verdict(verdict, mode)


# -- the archive lane (test_archive.py): the paper's own responses, re-scored on CPU --------------------------------

_ARCHIVE_LANE = pytest.StashKey[object]()


def _archive_lane(config: pytest.Config, release):  # noqa: ANN001, ANN202 - trace_lib.archive.lane.ArchiveLane
    if _ARCHIVE_LANE not in config.stash:
        from trace_lib.archive.lane import ArchiveLane

        config.stash[_ARCHIVE_LANE] = ArchiveLane.create(
            release, data_root=reproduction_plan(config).data_root,
            archive_root=options.resolve(config.option, options.ARCHIVE_ROOT),
            judge_url=options.resolve(config.option, options.JUDGE_URL),
            run_id=options.resolve(config.option, options.ARCHIVE_RUN_ID))
    return config.stash[_ARCHIVE_LANE]


def _validation_slices(config: pytest.Config) -> list:
    from trace_lib.release.locate import locate_release
    from trace_lib.validation.pipeline import plan_validation

    try:
        return plan_validation(locate_release(options.resolve(config.option, options.TRACE_ROOT)))
    except TraceReproError:
        return []


def _generate_archive_tests(metafunc: pytest.Metafunc) -> None:
    """``archive_slice`` (ids ``MODEL-seedSEED-BENCHMARK-archive``) and ``validation_archive_slice``
    (``MODEL-validation-archive``) parameters of ``test_archive.py``."""
    if "archive_slice" in metafunc.fixturenames:
        plan = reproduction_plan(metafunc.config)
        metafunc.parametrize("archive_slice", [pytest.param(s, id=f"{s.id}-archive") for s in plan.slices])
    if "validation_archive_slice" in metafunc.fixturenames:
        slices = _validation_slices(metafunc.config)
        metafunc.parametrize("validation_archive_slice", [pytest.param(s, id=f"{s.id}-archive") for s in slices])


@pytest.fixture
def archive_check(pytestconfig: pytest.Config, release, receipt) -> Callable:
    """``archive_check(slice_) -> ArchiveSliceResult``: skips with the exact reason when the archive slice or the
    benchmark data is absent, fails (no traceback) on a trace-repro error, records the receipt properties."""
    lane = _archive_lane(pytestconfig, release)

    def check(slice_):  # noqa: ANN001, ANN202
        reason = lane.blocker(slice_)
        if reason:
            pytest.skip(reason)
        try:
            result = lane.run(slice_)
        except TraceReproError as exc:
            pytest.fail(exc.render(), pytrace=False)
        for name, value in result.properties():
            receipt(name, value)
        return result

    return check


@pytest.fixture
def validation_archive_check(pytestconfig: pytest.Config, release, receipt) -> Callable:
    """``validation_archive_check(slice_) -> ValidationArchiveResult``: the exact re-score against the prepared
    validation dataset and, with its images, prompt identity."""
    from trace_lib.archive.lane import NO_ARCHIVE
    from trace_lib.validation.layout import ValidationLayout

    lane = _archive_lane(pytestconfig, release)
    layout = ValidationLayout.resolve(None, options.resolve(pytestconfig.option, options.CAMPAIGN_ROOT))

    def check(slice_):  # noqa: ANN001, ANN202
        from trace_lib.archive.validation import (
            VALIDATION_SEED, rescore_validation, validation_archive_identity, validation_benchmark_id,
        )
        from trace_lib.archive.schema import SliceKey
        from trace_lib.validation.manifest import load_validation_manifest

        if lane.archive is None:
            pytest.skip(lane.archive_problem or NO_ARCHIVE)
        benchmark_id = validation_benchmark_id(release)
        key = SliceKey(slice_.model.slug, VALIDATION_SEED, benchmark_id)
        if not any(key in run.parts for run in lane.archive.runs):
            pytest.skip(f"validation slice not in the fetched archive: {slice_.id} "
                        f"({lane.archive.fetch_hint(select='--validation')})")
        if not layout.manifest.is_file():
            pytest.skip(f"validation dataset missing: {layout.manifest} (run 'trace-repro validation prepare "
                        "--download'); the archive holds no ground truth")
        try:
            manifest = load_validation_manifest(layout.manifest, verify_media=False)
            outcome = rescore_validation(lane.archive, slice_.model.slug, manifest.rows,
                                         canonical=slice_.canonical.score, benchmark_id=benchmark_id)
            result = validation_archive_identity(lane.archive, key, outcome, release, layout.manifest)
        except TraceReproError as exc:
            pytest.fail(exc.render(), pytrace=False)
        for name, value in result.properties():
            receipt(name, value)
        return result

    return check
