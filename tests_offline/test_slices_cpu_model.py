"""Whole slices through the hf backend on CPU: tiny random Qwen2.5-VL -> real mmstar protocol -> loopback
judge -> verdict against a canonical value this test constructs (marker cpu_model; needs the 'hf' extra).
The stored responses are checked against an independent ``model.generate`` of the same requests and seed.

Run: ``python -m pytest tests_offline/test_slices_cpu_model.py -m cpu_model`` (the README's Quick start runs
``-k test_a_whole_slice_generates_scores_and_is_judged``).
"""

from __future__ import annotations

import pytest

from trace_lib.testing.openai_server import OpenAIStubServer
from trace_lib.testing.synthetic_campaign import TINY_SLUG, slice_requests, tiny_canonical, tiny_slice_runner

pytestmark = pytest.mark.cpu_model

ROWS = 8
CANONICAL = 56.25  # 4.5 of 8 rows: a score the slice can never reproduce exactly


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
                               canonical=tiny_canonical(release, CANONICAL, rows=ROWS))
    yield runner
    runner.engines.close()


def test_a_whole_slice_generates_scores_and_is_judged(runner, release):
    from trace_lib.generation.store import load_responses
    from trace_lib.testing.hf_reference import reference_prompt_lengths, reference_responses

    seed42 = runner.plan.slices[0]
    assert runner.blocker(seed42, runner.protocol(seed42)) is None
    outcome = runner.judged(seed42)  # runs seed 43 too: the verdict reads every planned seed of the cell
    records = outcome.scored.score.records
    assert outcome.generation.generated == ROWS and outcome.scored.score.rows == ROWS
    assert outcome.score == pytest.approx(100.0 * sum(r.score for r in records) / ROWS)
    # what the engine stored is the model's own output for each request (not canned, not another row's)
    rows = load_responses(outcome.generation.path)
    requests, model_dir = slice_requests(runner, seed42), runner.plan.model(TINY_SLUG).local_path
    expected = reference_responses(model_dir, requests)
    assert {r.row_key: r.response for r in rows} == expected and len(set(expected.values())) > 1
    assert {r.row_key: r.prompt_tokens for r in rows} == reference_prompt_lengths(model_dir, requests)
    # the verdict judges the reproduced score (never the canonical mean: CANONICAL is no multiple of 1/ROWS)
    verdict = outcome.verdict
    assert verdict.estimate == pytest.approx(outcome.score) != CANONICAL and verdict.canonical == CANONICAL
    assert verdict.difference == pytest.approx(outcome.score - CANONICAL)
    assert dict(outcome.properties())["canonical_mean"] == repr(CANONICAL)
    exact = _judge_against(runner, release, outcome.score)
    assert exact.outcome != "differs" and exact.difference == 0, exact.explain()


def test_a_rerun_reuses_every_row_and_the_engine_is_loaded_once(runner):
    first = runner.run(runner.plan.slices[0])
    other_seed = runner.run(runner.plan.slices[1])
    assert (first.generation.generated, first.generation.reused) == (0, ROWS)
    assert (other_seed.generation.generated, other_seed.generation.reused) == (0, ROWS)  # judged() generated it
    assert runner.engines.loads == [TINY_SLUG]


def _judge_against(runner, release, canonical_mean):  # noqa: ANN001, ANN202
    """The seed-42 verdict of the runner's campaign against another constructed canonical value."""
    from trace_lib.campaign.verdicts import CampaignJudge

    judge = CampaignJudge(runner.campaign_root, release, runner.plan,
                          canonical=tiny_canonical(release, canonical_mean, rows=ROWS))
    return judge.judge(runner.plan.slices[0].id)


def test_the_verdict_differs_from_a_distant_canonical_value(runner, release):
    outcome = runner.judged(runner.plan.slices[0])
    verdict = _judge_against(runner, release, outcome.score + 50.0 if outcome.score < 50 else outcome.score - 50.0)
    assert verdict.outcome == "differs" and verdict.explain().endswith(": DIFFERS")


def test_streamed_slices_store_what_the_per_slice_path_stores(runner, release, tmp_path, judge):
    """The campaign scheduler through the real hf engine: both seeds stream through one engine ahead of the
    tests; the stored rows (responses, request hashes, token counts) equal the per-slice path's byte for byte."""
    import dataclasses
    from pathlib import Path

    from trace_lib.generation.store import response_path

    for slice_ in runner.plan.slices:
        runner.run(slice_)
    same_data = tiny_slice_runner(release, runner.data_root.parent, Path(runner.plan.models[0].local_path),
                                  backend="hf", judge_url=judge.url, canonical=tiny_canonical(release, 50.0, rows=ROWS))
    streamed = dataclasses.replace(same_data, campaign_root=tmp_path / "campaign")  # same prompts, fresh stores
    streamed.stream_ahead(streamed.plan.slices)
    outcomes = [streamed.run(s) for s in reversed(streamed.plan.slices)]
    streamed.close()
    assert [o.generation.generated for o in outcomes] == [ROWS, ROWS] and streamed.engines.loads == [TINY_SLUG]
    for slice_ in runner.plan.slices:
        files = [response_path(r.campaign_root, model=TINY_SLUG, seed=slice_.seed, benchmark=slice_.benchmark)
                 for r in (runner, streamed)]
        assert files[0].read_bytes().partition(b"\n")[2] == files[1].read_bytes().partition(b"\n")[2]
