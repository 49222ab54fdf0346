"""``trace-repro score``: one responses file or a campaign, scored without a GPU; errors are one line, exit 2."""

from __future__ import annotations

import json
import sys
import types

import pytest

from trace_lib.benchmarks import registry
from trace_lib.benchmarks.protocol import Protocol
from trace_lib.cli.main import main
from trace_lib.generation.store import response_path
from trace_lib.scoring.judge import OpenAIJudge
from trace_lib.testing.openai_server import OpenAIStubServer
from trace_lib.testing.synthetic_campaign import (
    build_toy_campaign,
    toy_mcq_protocol,
    toy_responses,
    toy_rows,
    write_response_file,
    write_toy_dataset,
)

MODEL = "trace-qwen2.5-vl-3b"
ERQA_ROWS = 400  # the toy file's size; the suite's erqa has as many rows, so the verdict's row check passes


def _register(monkeypatch, protocol: Protocol) -> None:
    module = types.ModuleType(f"toy_cli_{protocol.key}")
    module.PROTOCOL = protocol
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(registry.PROTOCOLS, protocol.key, f"{module.__name__}:PROTOCOL")


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A toy erqa dataset and a seed-42 response file hitting 36 % of it (canonical mean 36.42)."""
    _register(monkeypatch, toy_mcq_protocol("erqa"))
    dataset = write_toy_dataset(tmp_path / "erqa.jsonl", ERQA_ROWS, seed=3)
    rows = toy_rows(ERQA_ROWS, seed=3)
    responses = write_response_file(tmp_path / "responses.jsonl", model=MODEL, seed=42, benchmark="erqa", rows=rows,
                                    texts=toy_responses(rows, 0.36))
    return dataset, responses, tmp_path / "out"


def _score(capsys, release, *argv):
    code = main(["score", "--trace-root", str(release.path), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _file_args(dataset, responses, out, benchmark="erqa"):
    return ["--benchmark", benchmark, "--dataset", str(dataset), "--responses", str(responses), "--out", str(out)]


def test_scores_a_file_and_prints_the_verdict(capsys, release, files):
    """One seed of 400 rows cannot show a +-2-point reproduction (binomial bound): inconclusive, exit 1."""
    code, out, err = _score(capsys, release, *_file_args(*files))
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0] == f"{MODEL}-seed42-erqa: score 36.000 over 400 rows"
    assert lines[1].startswith(f"{MODEL}-seed42-erqa: seed score 36.000 vs canonical 36.417: difference -0.417 pp")
    assert "[binomial bound (one reproduced seed)]" in lines[1] and lines[1].endswith(": INCONCLUSIVE")
    summary = json.loads((files[2] / "scores.json").read_text())
    assert (summary["score"], summary["rows"], summary["counts"], summary["seed"]) == (36.0, 400, {"correct": 144}, 42)
    records = (files[2] / "records.jsonl").read_text().splitlines()
    assert len(records) == 400 and set(json.loads(records[0])) == {"index", "extracted", "score", "judge_calls",
                                                                   "fallback", "detail"}


def test_json_output_and_the_margin(capsys, release, files):
    code, out, _ = _score(capsys, release, *_file_args(*files), "--json", "--margin", "10")
    document = json.loads(out)
    assert code == 0 and document["verdict"]["outcome"] == "reproduced" and document["verdict"]["margin"] == 10.0
    assert document["verdict"]["components"]["variance_source"] == "binomial bound (one reproduced seed)"


def test_a_zeroed_slice_differs(capsys, release, files, tmp_path):
    dataset, _, _ = files
    rows = toy_rows(ERQA_ROWS, seed=3)
    zero = write_response_file(tmp_path / "zero.jsonl", model=MODEL, seed=42, benchmark="erqa", rows=rows,
                               texts=toy_responses(rows, 0.0))
    code, out, _ = _score(capsys, release, *_file_args(dataset, zero, tmp_path / "zero_out"))
    assert code == 1 and out.splitlines()[1].endswith(": DIFFERS")


def test_tolerance_z_is_gone_with_a_pointer(capsys, release, files):
    code, out, err = _score(capsys, release, *_file_args(*files), "--tolerance-z", "3")
    assert (code, out) == (2, "")
    assert err.splitlines()[0] == ("error: --tolerance-z: --tolerance-z no longer applies to evaluation verdicts; the "
                                   "family-wise budget is --alpha and the equivalence margin --margin "
                                   "(docs/tolerance.md)")


def test_missing_file_is_one_line_exit_2(capsys, release, files, tmp_path):
    code, out, err = _score(capsys, release, *_file_args(files[0], tmp_path / "nope.jsonl", files[2]))
    assert code == 2 and out == ""
    assert err.splitlines()[0] == f"error: --responses {tmp_path / 'nope.jsonl'}: no such file"


def test_bad_jsonl_line_names_file_and_line(capsys, release, files):
    dataset, responses, out_dir = files
    lines = responses.read_text().splitlines(keepends=True)
    lines[3] = '{"kind": "row", broken\n'
    responses.write_text("".join(lines))
    code, out, err = _score(capsys, release, *_file_args(dataset, responses, out_dir))
    assert code == 2
    assert err.splitlines()[0] == (f"error: {responses}: line 4 is not a JSON object; "
                                   "the file is corrupt; move it away to regenerate the slice")
    assert not out_dir.exists()  # nothing half-written


def test_responses_must_cover_the_dataset(capsys, release, files, tmp_path):
    bigger = write_toy_dataset(tmp_path / "bigger.jsonl", ERQA_ROWS + 1, seed=3)
    code, _, err = _score(capsys, release, *_file_args(bigger, files[1], files[2]))
    assert code == 2
    assert err.startswith(f"error: {files[1]}: responses do not cover the dataset (expected 401 rows, found 400); "
                          "first missing row 00000400:400:")


def test_responses_of_another_benchmark_are_refused(capsys, release, files, monkeypatch):
    _register(monkeypatch, toy_mcq_protocol("treebench"))
    code, _, err = _score(capsys, release, *_file_args(*files, benchmark="treebench"))
    assert code == 2
    assert err.splitlines()[0] == (f"error: {files[1]}: header.benchmark: responses belong to another benchmark "
                                   "(expected 'treebench', found 'erqa')")


def test_unimplemented_protocol_fails_loudly(capsys, release, files, monkeypatch):
    monkeypatch.setitem(registry.PROTOCOLS, "erqa", "trace_lib.benchmarks._not_written_yet:PROTOCOL")
    code, _, err = _score(capsys, release, *_file_args(*files))
    assert code == 2
    assert err.splitlines()[0] == "error: erqa: evaluation protocol not implemented; this slice cannot be scored by trace-repro yet"


def test_judge_route_without_judge_url_is_refused(capsys, release, files, monkeypatch):
    _register(monkeypatch, toy_mcq_protocol("erqa", judge="always"))
    monkeypatch.delenv("TRACE_JUDGE_URL", raising=False)
    code, _, err = _score(capsys, release, *_file_args(*files))
    assert code == 2
    assert err.splitlines()[0] == ("error: judge URL not set (--judge-url / TRACE_JUDGE_URL) for judge route erqa; "
                                   "serve Qwen3-32B (see README) and pass its URL")
    assert not files[2].exists()


def _judging_protocol() -> Protocol:
    """The toy erqa protocol whose every row asks the judge to confirm the extracted letter."""
    toy = toy_mcq_protocol("erqa", judge="always")

    def score(rows, responses, ctx):
        replies = ctx.judge.complete([f"Extract the letter: {r}" for r in responses], max_tokens=16)
        return toy.score(rows, [f"answer {reply.text}" for reply in replies], ctx)

    return Protocol(key="erqa", upstream=toy.upstream, version="toy-judged-1", load=toy.load,
                    build_prompt=toy.build_prompt, score=score, judge="always")


def test_judge_url_is_used_and_an_unreachable_judge_is_an_error(capsys, release, files, monkeypatch):
    _register(monkeypatch, _judging_protocol())
    monkeypatch.setattr(OpenAIJudge, "_sleep", lambda self, seconds: None)  # no backoff pauses in a unit test
    with OpenAIStubServer(lambda route, body: "B", model="qwen3-32b-judge") as server:
        code, out, _ = _score(capsys, release, *_file_args(*files), "--judge-url", server.url)
        assert code in (0, 1) and out.startswith(f"{MODEL}-seed42-erqa: score ")
        assert {route for route, _ in server.requests} == {"completions"}
        assert json.loads((files[2] / "scores.json").read_text())["judge_url"] == server.url
    code, _, err = _score(capsys, release, *_file_args(files[0], files[1], files[2].with_name("out2")),
                          "--judge-url", "http://127.0.0.1:9/v1")
    assert code == 2
    assert err.splitlines()[0].startswith("error: --judge-url http://127.0.0.1:9/v1: judge unreachable (")


def test_a_failing_protocol_leaves_no_scores_behind(capsys, release, files, monkeypatch):
    toy = toy_mcq_protocol("erqa")

    def broken(rows, responses, ctx):
        raise RuntimeError("protocol bug")

    _register(monkeypatch, Protocol(key="erqa", upstream="x", version="x", load=toy.load,
                                    build_prompt=toy.build_prompt, score=broken))
    with pytest.raises(RuntimeError, match="protocol bug"):
        _score(capsys, release, *_file_args(*files))
    assert not (files[2] / "scores.json").exists()


def test_campaign_mode_scores_every_generated_slice(capsys, release, tmp_path, monkeypatch):
    _register(monkeypatch, toy_mcq_protocol("erqa"))
    root = tmp_path / "campaign"
    datasets = build_toy_campaign(root, tmp_path / "data", model=MODEL, rows={"erqa": ERQA_ROWS},
                                  accuracy={(42, "erqa"): 0.36, (43, "erqa"): 0.37})
    # the campaign mode finds data through the release's provenance: point the data root at a matching name
    monkeypatch.setattr("trace_lib.data.prepare.ArtifactSource.local_path", lambda self, data_root: datasets[self.key])
    code, out, _ = _score(capsys, release, "--campaign-root", str(root), "--model-id", MODEL, "--seeds", "42", "43",
                          "44", "--benchmark", "erqa")
    assert code == 1  # seed 44 has no responses
    assert f"{MODEL}-seed43-erqa: score 37.000 over 400 rows" in out
    last = out.splitlines()[-1]
    assert last.startswith("[score] 2/3 slice(s) scored; 3 test(s): ") and last.endswith(
        f"not scored: {MODEL}-seed44-erqa")
    # the family is the plan's (--model-id x the 3 planned seeds x erqa), never what is on disk (2 seeds)
    assert "over 4 tests (3 slices + 1 means)" in last
    assert f"{MODEL}-erqa: mean of 2 seeds" in out
    assert response_path(root, model=MODEL, seed=42, benchmark="erqa").is_file()
    assert (root / "scoring" / "seed_43" / MODEL / "erqa" / "scores.json").is_file()


def test_campaign_jobs_score_the_same_and_report_benchmark_major(capsys, release, tmp_path, monkeypatch):
    """--jobs N scores slices side by side (a benchmark's seeds together); every scores.json equals the one of
    --jobs 1, and the lines come in model, benchmark, seed order."""
    for key in ("erqa", "logicvista"):
        _register(monkeypatch, toy_mcq_protocol(key))
    accuracy = {(s, k): 0.36 + 0.01 * (s - 42) for s in (42, 43) for k in ("erqa", "logicvista")}
    outputs = {}
    for jobs in ("1", "3"):
        root = tmp_path / f"campaign{jobs}"
        datasets = build_toy_campaign(root, tmp_path / "data", model=MODEL, accuracy=accuracy,
                                      rows={"erqa": ERQA_ROWS, "logicvista": 447})
        monkeypatch.setattr("trace_lib.data.prepare.ArtifactSource.local_path",
                            lambda self, data_root, d=datasets: d[self.key])
        code, out, _ = _score(capsys, release, "--campaign-root", str(root), "--model-id", MODEL, "--seeds", "42",
                              "43", "--benchmark", "erqa", "--benchmark", "logicvista", "--jobs", jobs)
        assert "[score] 4/4 slice(s) scored" in out
        order = [line.split(":")[0] for line in out.splitlines() if ": score " in line]
        assert order == [f"{MODEL}-seed{s}-{k}" for k in ("erqa", "logicvista") for s in (42, 43)]
        outputs[jobs] = {path.relative_to(root): {k: v for k, v in json.loads(path.read_text()).items()
                                                  if k not in ("created_at", "inputs")}
                         for path in sorted((root / "scoring").rglob("scores.json"))}
    assert len(outputs["1"]) == 4 and outputs["1"] == outputs["3"]
    code, _, err = _score(capsys, release, "--campaign-root", str(tmp_path / "campaign1"), "--jobs", "0")
    assert code == 2 and "--jobs" in err
    code, _, err = _score(capsys, release, "--campaign-root", str(tmp_path / "campaign1"), "--max-jobs", "0")
    assert code == 2 and err.startswith("error: --max-jobs: must be at least 1")


def _plain(path, rows, texts, *, field="response"):
    with open(path, "w", encoding="utf-8") as handle:
        for row, text in reversed(list(zip(rows, texts))):  # any order
            handle.write(json.dumps({"index": row["index"], field: text}) + "\n")
    return path


def test_a_plain_index_response_file_scores_like_the_store_file(capsys, release, files, tmp_path):
    """Responses from elsewhere ({index, response} per line, any order) score exactly as trace-repro's own file."""
    dataset, responses, out = files
    rows = toy_rows(ERQA_ROWS, seed=3)
    plain = _plain(tmp_path / "plain.jsonl", rows, toy_responses(rows, 0.36), field="prediction")
    assert _score(capsys, release, *_file_args(dataset, responses, out))[0] == 1  # one seed: inconclusive
    stored = json.loads((out / "scores.json").read_text())
    code, _, err = _score(capsys, release, *_file_args(dataset, plain, tmp_path / "plain_out"), "--seed", "42")
    assert (code, err) == (0, "")  # a plain file names no model: scored, nothing to judge
    scored = json.loads((tmp_path / "plain_out" / "scores.json").read_text())
    assert scored["score"] == stored["score"]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"index": 0}'], "line 1: each line needs one of response, prediction"),
        (['{"response": "A"}'], "line 1: each line needs an 'index'"),
        (['{"index": "nope", "response": "A"}'], "line 1.index: index not in the dataset"),
        (['[1, 2]'], "line 1: each line needs an 'index'"),
        (['{"index": 0, "response": 5}'], "line 1.response: response must be a string or null"),
    ],
)
def test_plain_file_errors_name_file_and_line(capsys, release, files, tmp_path, lines, message):
    dataset, _, out = files
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    code, _, err = _score(capsys, release, *_file_args(dataset, bad, out), "--seed", "42")
    assert code == 2
    assert f"{bad}: {message}" in err
    assert not out.exists() or not any(out.iterdir())


def test_plain_file_needs_the_seed(capsys, release, files, tmp_path):
    dataset, _, out = files
    rows = toy_rows(ERQA_ROWS, seed=3)
    plain = _plain(tmp_path / "plain.jsonl", rows, toy_responses(rows, 0.36))
    code, _, err = _score(capsys, release, *_file_args(dataset, plain, out))
    assert code == 2 and "needs the decoding seed" in err and "--seed" in err
