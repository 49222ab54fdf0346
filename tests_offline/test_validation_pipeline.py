"""The validation pipeline end to end on a tiny dataset in the real schema, over loopback HTTP stubs.

Generation goes through the engine's real ``openai`` backend to an OpenAI-compatible stub; the judge through the
completions transport to a second stub. Nothing here claims to run a model: the CPU and GPU lanes do that.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trace_lib.errors import InputError
from trace_lib.testing.openai_server import OpenAIStubServer
from trace_lib.testing.validation_bytes import RESPONSES, SLUG, prepare_stub_work, row_of
from trace_lib.validation.canonical import h1, read_jsonl
from trace_lib.validation.chat_template import ChatTemplate
from trace_lib.validation.generate import GenerationTarget, generate_validation_responses
from trace_lib.validation.layout import ValidationLayout
from trace_lib.validation.pipeline import SliceSettings, plan_validation, run_validation_slice
from trace_lib.validation.prepare import prepare_dataset
from trace_lib.validation.score import run_score
from trace_lib.validation.tiny import build_tiny_parquet
from trace_lib.validation.verify import VerificationError, verify_full


def generator(route: str, body: dict[str, Any]) -> str:
    return RESPONSES[row_of(body)]


def judge_abstains(route: str, body: dict[str, Any]) -> str:
    return '{"status":"ambiguous","answer":null,"evidence":""}'


@pytest.fixture
def work(release, tmp_path: Path) -> tuple[ValidationLayout, Any, Path, ChatTemplate]:
    return prepare_stub_work(release, tmp_path)


def test_slice_end_to_end_and_resume(release, work) -> None:
    layout, ident, model_dir, template = work
    (slice_,) = plan_validation(release, [SLUG])
    assert slice_.id == f"{SLUG}-validation"
    with OpenAIStubServer(generator, model=SLUG) as gen, \
            OpenAIStubServer(judge_abstains, model=release.read_json(
                "rlvr/evaluation/trace_validation/suite.v1.json")["judge"]["served_model_name"]) as judge:
        settings = SliceSettings(backend="openai", endpoint_url=gen.url, judge_urls=(judge.url,),
                                 judge_template=template, expected=ident)
        outcome = run_validation_slice(release, slice_, layout, model_dir, settings)
        assert (outcome.score.rows, outcome.score.correct, outcome.score.deterministic_found) == (6, 2, 3)
        assert (outcome.score.judge_requested, outcome.score.unresolved) == (3, 3)
        assert outcome.first_score.judge_finalized is False and outcome.score.judge_finalized is True
        sent = [body for route, body in gen.requests if route == "chat/completions"]
        assert len(sent) == 6 and all("answer_gt" not in json.dumps(b) for b in sent)
        assert all(b["messages"][0]["role"] == "system" and b["seed"] == 42 and b["top_p"] == 0.95 for b in sent)
        receipts = read_jsonl(layout.responses(SLUG))
        for body, receipt in zip(sorted(sent, key=row_of), receipts):
            assert receipt["request_hash"] == h1({**body, "n": 1})
        again = run_validation_slice(release, slice_, layout, model_dir, settings)
        assert (again.generation.generated_rows, again.generation.reused_rows) == (0, 6)
        assert len(gen.requests) == 6
    assert not outcome.verdict.ok and "row count differs" in outcome.verdict.explain()
    report = verify_full(release, layout, parquet=None, expected=ident, models=[SLUG])
    assert report["status"] == "failed" and report["generation_rows"] == 6 and report["unresolved_rows"] == 3

    scored = layout.scoring_dir(SLUG) / "scored_rows.jsonl"
    lines = scored.read_text().splitlines()
    lines[0] = lines[0].replace('"combined_semantic_correct":1', '"combined_semantic_correct":0')
    scored.write_text("\n".join(lines) + "\n")
    with pytest.raises(VerificationError, match="scored row differs from its recomputation"):
        verify_full(release, layout, parquet=None, expected=ident, models=[SLUG])


def test_incomplete_generation_blocks_scoring_until_regenerated(release, work) -> None:
    layout, ident, model_dir, _ = work
    model = plan_validation(release, [SLUG])[0].model

    def flaky(route: str, body: dict[str, Any]) -> str:
        return "" if row_of(body) == 2 else generator(route, body)

    with OpenAIStubServer(flaky, model=SLUG) as server:
        target = GenerationTarget(model=model, model_path=model_dir, backend="openai", served_model=SLUG,
                                  endpoint_url=server.url)
        report = generate_validation_responses(release, layout.manifest, layout.generation_dir(SLUG), target,
                                               expected=ident)
    assert (report.status, report.error_rows) == ("incomplete", 1)
    with pytest.raises(InputError, match="generation run is not complete"):
        run_score(release, layout.manifest, layout.generation_dir(SLUG), layout.scoring_dir(SLUG), model_slug=SLUG,
                  expected=ident)
    with OpenAIStubServer(generator, model=SLUG) as server:
        target = GenerationTarget(model=model, model_path=model_dir, backend="openai", served_model=SLUG,
                                  endpoint_url=server.url)
        report = generate_validation_responses(release, layout.manifest, layout.generation_dir(SLUG), target,
                                               expected=ident)
        assert (report.status, report.generated_rows, report.reused_rows) == ("complete", 1, 5)
    receipt = read_jsonl(layout.responses(SLUG))[2]
    assert receipt["attempt_count"] == 2 and "empty response" in receipt["attempt_history"][0]["error"]


def test_an_output_directory_of_another_run_is_refused(release, work, tmp_path: Path) -> None:
    layout, ident, model_dir, _ = work
    model = plan_validation(release, [SLUG])[0].model
    with OpenAIStubServer(generator, model=SLUG) as server:
        target = GenerationTarget(model=model, model_path=model_dir, backend="openai", served_model=SLUG,
                                  endpoint_url=server.url)
        generate_validation_responses(release, layout.manifest, layout.generation_dir(SLUG), target, expected=ident)
        other = tmp_path / "other-model"
        other.mkdir()
        moved = GenerationTarget(model=model, model_path=other, backend="openai", served_model=SLUG,
                                 endpoint_url=server.url)
        with pytest.raises(InputError, match="output directory belongs to a different run"):
            generate_validation_responses(release, layout.manifest, layout.generation_dir(SLUG), moved, expected=ident)


def _generated(release, work):  # noqa: ANN001, ANN202
    """The stub model's responses generated into ``work``'s layout: ``(layout, ident)``."""
    layout, ident, model_dir, _ = work
    model = plan_validation(release, [SLUG])[0].model
    with OpenAIStubServer(generator, model=SLUG) as server:
        target = GenerationTarget(model=model, model_path=model_dir, backend="openai", served_model=SLUG,
                                  endpoint_url=server.url)
        generate_validation_responses(release, layout.manifest, layout.generation_dir(SLUG), target, expected=ident)
    return layout, ident


def test_scoring_rejects_an_edited_response(release, work) -> None:
    layout, ident = _generated(release, work)
    path = layout.responses(SLUG)
    path.write_text(path.read_text().replace('Final answer: 13', 'Final answer: 12'))
    with pytest.raises(InputError, match="responses.jsonl changed after the run"):
        run_score(release, layout.manifest, layout.generation_dir(SLUG), layout.scoring_dir(SLUG), model_slug=SLUG,
                  expected=ident)


def test_prepare_checks_the_parquet_hash_before_writing(release, tmp_path: Path) -> None:
    parquet, ident = build_tiny_parquet(release, tmp_path / "tiny.parquet")
    wrong = type(ident)(**{**ident.__dict__, "file_sha256": "0" * 64})
    with pytest.raises(InputError, match="parquet differs from the pinned dataset"):
        prepare_dataset(parquet, tmp_path / "out", expected=wrong)
    assert not (tmp_path / "out").exists()
    first = prepare_dataset(parquet, tmp_path / "a", expected=ident)
    second = prepare_dataset(parquet, tmp_path / "b", expected=ident)
    assert first.manifest_sha256 == second.manifest_sha256 and first.rows == 6


def test_cli_surface(release, tmp_path: Path) -> None:
    parquet, _ = build_tiny_parquet(release, tmp_path / "tiny.parquet")
    root = str(release.path)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "trace_lib", "validation", *args, "--trace-root", root,
                               "--work-dir", str(tmp_path / "work")], capture_output=True, text=True, timeout=120)

    done = cli("prepare", "--unpinned", "--parquet", str(parquet))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == 6
    done = cli("verify", "release")
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "ok"
    done = cli("prepare", "--verify-only")  # pinned: the tiny manifest is not the pinned one
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "dataset identity differs" in done.stderr
    done = cli("score", "--unpinned")
    assert done.returncode == 2 and "no generated model to score" in done.stderr
    shutil.rmtree(tmp_path / "work")


def _refused_while_held(directory: Path, lock_name: str, message: str, run: Any) -> None:
    from trace_lib.filelock import FileLock

    directory.mkdir(parents=True, exist_ok=True)
    with FileLock(directory / lock_name, busy=lambda: AssertionError("held")):
        with pytest.raises(InputError, match=message):
            run()
        assert [p.name for p in directory.iterdir()] == [lock_name]  # nothing written beside the holder's lock


def test_one_writer_per_stage_directory(release, work) -> None:
    from trace_lib.release.validation_suite import load_validation_suite
    from trace_lib.validation import generate, judge
    from trace_lib.validation.judge import run_judge

    layout, ident, model_dir, template = work
    model = plan_validation(release, [SLUG])[0].model
    out = layout.generation_dir(SLUG)
    with OpenAIStubServer(generator, model=SLUG) as server:
        target = GenerationTarget(model=model, model_path=model_dir, backend="openai", served_model=SLUG,
                                  endpoint_url=server.url)
        _refused_while_held(out, generate.LOCK_FILE, "another process is generating into this directory",
                            lambda: generate_validation_responses(release, layout.manifest, out, target, expected=ident))
        assert not server.requests
        generate_validation_responses(release, layout.manifest, out, target, expected=ident)
    assert not (out / generate.LOCK_FILE).exists()  # a clean run leaves no lock file behind
    _refused_while_held(layout.judge_dir(SLUG), judge.LOCK_FILE, "another process is judging into this directory",
                        lambda: run_judge([], judge=load_validation_suite(release).judge, template=template,
                                          endpoints=[], output_dir=layout.judge_dir(SLUG)))
    _refused_while_held(layout.scoring_dir(SLUG), ".scoring.lock", "another process is scoring into this directory",
                        lambda: run_score(release, layout.manifest, out, layout.scoring_dir(SLUG), model_slug=SLUG,
                                          expected=ident))


def test_a_rescore_whose_summary_cannot_be_written_leaves_every_old_file(release, work) -> None:
    """The five scoring files go in as one set: a FIFO where summary.json belongs is refused before any of them,
    so the old scored rows are not replaced beside the old summary."""
    import os

    layout, ident = _generated(release, work)
    out = layout.scoring_dir(SLUG)
    run_score(release, layout.manifest, layout.generation_dir(SLUG), out, model_slug=SLUG, expected=ident)
    for path in out.iterdir():
        if path.is_file() and not path.name.startswith("."):
            path.write_bytes(b"an earlier score's " + path.name.encode())
    (out / "summary.json").unlink()
    os.mkfifo(out / "summary.json")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with pytest.raises(Exception, match="FIFO"):
        run_score(release, layout.manifest, layout.generation_dir(SLUG), out, model_slug=SLUG, expected=ident)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert not [p for p in out.iterdir() if p.name.endswith(".incomplete")]


def test_validation_judge_exits_1_when_judge_rows_fail(release, work, tmp_path, capsys) -> None:
    """The module's contract: failed judge rows (every attempt's output invalid) are findings, exit 1, not 0."""
    from trace_lib.cli.main import main
    from trace_lib.release.validation_suite import load_validation_suite

    layout, ident = _generated(release, work)
    run_score(release, layout.manifest, layout.generation_dir(SLUG), layout.scoring_dir(SLUG), model_slug=SLUG,
              expected=ident)
    assert read_jsonl(layout.scoring_dir(SLUG) / "judge_pending.jsonl")  # rows the judge is asked about
    served = load_validation_suite(release).judge.served_model_name
    with OpenAIStubServer(lambda route, body: "not the judge JSON", model=served) as judge:
        code = main(["validation", "judge", "--work-dir", str(layout.root), "--model", SLUG, "--judge-url", judge.url,
                     "--judge-tokenizer", str(tmp_path / "judge")])
    err = capsys.readouterr().err
    assert code == 1 and "judge rows failed every attempt's output was invalid" in err, err
