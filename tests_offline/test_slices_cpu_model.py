"""Whole slices through the hf backend on CPU: tiny random Qwen2.5-VL -> real mmstar protocol -> loopback
judge -> verdict against a canonical value this test constructs (marker cpu_model; needs the 'hf' extra).

Run: ``python -m pytest tests_offline/test_slices_cpu_model.py -m cpu_model`` (the README's Quick start runs
``-k test_a_whole_slice_generates_scores_and_is_judged``).
"""

from __future__ import annotations

import pytest

from trace_lib.testing.openai_server import OpenAIStubServer
from trace_lib.testing.synthetic_campaign import TINY_SLUG, tiny_rule, tiny_slice_runner

pytestmark = pytest.mark.cpu_model

ROWS = 8


@pytest.fixture(scope="module")
def judge():
    with OpenAIStubServer(lambda route, body: "A", model="qwen3-32b-judge") as server:
        yield server


@pytest.fixture(scope="module")
def runner(release, tmp_path_factory, judge):
    pytest.importorskip("torch", reason="cpu_model lane needs torch (install the 'hf' extra)")
    pytest.importorskip("transformers", reason="cpu_model lane needs transformers (install the 'hf' extra)")
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl

    work = tmp_path_factory.mktemp("slices")
    model_dir = build_tiny_qwen25vl(work / "models" / TINY_SLUG, seed=0)
    runner = tiny_slice_runner(release, work, model_dir, backend="hf", judge_url=judge.url,
                               rule=tiny_rule(50.0, rows=ROWS))
    yield runner
    runner.engines.close()


def test_a_whole_slice_generates_scores_and_is_judged(runner):
    seed42 = runner.plan.slices[0]
    assert runner.blocker(seed42, runner.protocol(seed42)) is None
    outcome = runner.run(seed42)
    records = outcome.scored.score.records
    assert outcome.generation.generated == ROWS and outcome.scored.score.rows == ROWS
    assert outcome.score == pytest.approx(100.0 * sum(r.score for r in records) / ROWS)
    assert outcome.verdict.ok, outcome.verdict.explain()  # 8 rows: the binomial band covers every possible score
    assert dict(outcome.properties())["canonical_mean"] == "50.0"


def test_a_rerun_reuses_every_row_and_the_engine_is_loaded_once(runner):
    first = runner.run(runner.plan.slices[0])
    other_seed = runner.run(runner.plan.slices[1])
    assert (first.generation.generated, first.generation.reused) == (0, ROWS)
    assert other_seed.generation.generated == ROWS
    assert runner.engines.loads == [TINY_SLUG]


def test_the_verdict_fails_against_a_distant_canonical_value(runner):
    outcome = runner.run(runner.plan.slices[0])
    far = tiny_rule(outcome.score + 50.0 if outcome.score < 50 else outcome.score - 50.0, rows=ROWS, z=0.5)
    verdict = far.check_slice(TINY_SLUG, "mmstar", outcome.score, seed=42, rows=ROWS)
    assert not verdict.ok and "FAILED" in verdict.explain()
