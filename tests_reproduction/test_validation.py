"""The TRACE validation table: one test per model (id ``<slug>-validation``), seed 42, 2,000 rows.

Each test runs (or resumes) generate -> score -> judge -> final score for its model through
:func:`trace_lib.validation.pipeline.run_validation_slice` and asserts the reproduced exact-match accuracy is within
the binomial tolerance of the release's ``results.v1.json`` score. Inputs: the prepared dataset under the
validation work directory (``<campaign-root>/validation`` or ``$TRACE_VALIDATION_DIR``; prepared from the pinned
parquet if only that is present), the model at ``<model-root>/<slug>`` (``--model-root`` / ``$TRACE_MODEL_ROOT``),
the judge at ``--judge-url`` with its tokenizer at ``$TRACE_JUDGE_TOKENIZER`` (default
``<model-root>/qwen3-32b-judge``). Engine: ``$TRACE_VALIDATION_BACKEND`` (``vllm``, default; ``openai`` with
``$TRACE_VALIDATION_BASE_URL``), extra engine options as JSON in ``$TRACE_VALIDATION_BACKEND_OPTIONS``.

Run: ``TRACE_ROOT=<release> python -m pytest tests_reproduction/test_validation.py -m reproduction
--campaign-root <dir> --model-root <dir> --judge-url http://127.0.0.1:8001/v1 --junitxml validation.xml``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trace_lib import options
from trace_lib.campaign.plan import MODEL_ROOT_ENV
from trace_lib.options import DEFAULT_WORK_DIR
from trace_lib.errors import TraceReproError
from trace_lib.release.locate import locate_release
from trace_lib.validation.layout import ValidationLayout
from trace_lib.validation.pipeline import plan_validation

pytestmark = pytest.mark.reproduction  # like the evaluation slices: selected by -m reproduction, skipped with the reason


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per suite model, in suite order (the plan comes from the release under test)."""
    if "slice_" in metafunc.fixturenames:
        try:
            slices = plan_validation(locate_release(options.resolve(metafunc.config.option, options.TRACE_ROOT)))
        except TraceReproError as exc:  # like test_slices.py: no release is a usage error, never an empty lane
            raise pytest.UsageError(exc.render()) from None
        metafunc.parametrize("slice_", slices, ids=[s.id for s in slices])


def _option(config: pytest.Config, name: str, env: str) -> str | None:
    return getattr(config.option, name, None) or os.environ.get(env) or None


@pytest.fixture(scope="session")
def validation_layout(pytestconfig: pytest.Config) -> ValidationLayout:
    return ValidationLayout.resolve(None, options.resolve(pytestconfig.option, options.CAMPAIGN_ROOT))


@pytest.fixture(scope="session")
def prepared_dataset(release, validation_layout: ValidationLayout) -> Path:
    """The pinned prepared manifest (prepared here from the pinned parquet when only the parquet is present)."""
    from trace_lib.validation.prepare import prepare_dataset, verify_prepared

    layout = validation_layout
    try:
        if layout.manifest.is_file():
            verify_prepared(layout.dataset_dir)
        elif layout.parquet.is_file():
            prepare_dataset(layout.parquet, layout.dataset_dir)
        else:
            pytest.skip(f"validation dataset missing: {layout.parquet} "
                        "(run 'trace-repro validation prepare --download')")
    except TraceReproError as exc:
        pytest.fail(exc.render(), pytrace=False)
    return layout.manifest


@pytest.fixture(scope="session")
def slice_settings(pytestconfig: pytest.Config, trace_phase: str):
    from trace_lib.validation.chat_template import ChatTemplate
    from trace_lib.validation.pipeline import SliceSettings

    judge_url = options.resolve(pytestconfig.option, options.JUDGE_URL)
    if not judge_url and trace_phase != "generate":  # --phase generate needs no judge
        pytest.skip("judge not configured: pass --judge-url or --judge-serve (the suite's Qwen3-32B judge)")
    model_root = Path(_option(pytestconfig, "model_root", MODEL_ROOT_ENV) or DEFAULT_WORK_DIR / "models")
    tokenizer = Path(options.JUDGE_TOKENIZER_ENV.read() or model_root / "qwen3-32b-judge")
    if not tokenizer.is_dir():
        pytest.skip(f"judge tokenizer missing: {tokenizer} (set TRACE_JUDGE_TOKENIZER)")
    backend = options.VALIDATION_BACKEND_ENV.read()
    if backend == "vllm":
        try:
            import torch
        except ImportError:
            pytest.skip("torch is not installed")
        if not torch.cuda.is_available():
            pytest.skip("no CUDA device visible")
    try:
        return SliceSettings(
            backend=backend,
            backend_options=json.loads(options.VALIDATION_BACKEND_OPTIONS_ENV.read()),
            endpoint_url=options.VALIDATION_BASE_URL_ENV.read(),
            judge_urls=tuple(u.strip() for u in str(judge_url or "").split(",") if u.strip()),
            judge_template=ChatTemplate.from_tokenizer_dir(tokenizer),
            z=options.resolve(pytestconfig.option, options.TOLERANCE_Z),
            alpha=options.resolve(pytestconfig.option, options.ALPHA),
        )
    except TraceReproError as exc:
        pytest.fail(exc.render(), pytrace=False)


def test_validation(slice_, release, pytestconfig, receipt, request):
    from trace_lib.generation.run import logged_counts
    from trace_lib.validation.pipeline import run_validation_slice

    model_root = Path(_option(pytestconfig, "model_root", MODEL_ROOT_ENV) or DEFAULT_WORK_DIR / "models")
    model_path = model_root / slice_.model.slug
    if not model_path.is_dir():
        pytest.skip(f"model dir missing: {slice_.model.slug} ({model_path})")
    request.getfixturevalue("prepared_dataset")  # skips/fails with the dataset's reason, after the model check
    validation_layout = request.getfixturevalue("validation_layout")
    slice_settings = request.getfixturevalue("slice_settings")
    receipt("slice", slice_.id)
    receipt("model_revision", slice_.model.inference_revision)
    receipt("model_path", str(model_path))
    phase = request.getfixturevalue("trace_phase")  # --phase generate|score|all (trace_lib.pytest_judge)
    try:
        if phase == "generate":
            from trace_lib.validation.pipeline import run_validation_generation

            generated = run_validation_generation(release, slice_, validation_layout, model_path, slice_settings,
                                                  progress=logged_counts(slice_.id))
            receipt("generated_rows", generated.generated_rows)
            pytest.skip(f"phase generate: {slice_.id} generated and verified; judged and scored in --phase score")
        outcome = run_validation_slice(release, slice_, validation_layout, model_path, slice_settings,
                                       progress=logged_counts(slice_.id))
    except TraceReproError as exc:
        pytest.fail(exc.render(), pytrace=False)
    for name, value in outcome.properties():
        receipt(name, value)
    assert outcome.verdict.ok, outcome.verdict.explain()
