"""The two exemplar protocols end to end through ``trace-repro score``: MMStar (MCQ, judge only when the prefetch
fails, chat transport) and MathVista (judge route: extraction through the completions transport).

Tiny TSVs in VLMEvalKit format, hand-written responses and a loopback judge; the expected scores are worked out
from the rows here, independently of the protocols.
"""

from __future__ import annotations

import base64
import json
import math

import pytest

from trace_lib.cli.main import main
from trace_lib.testing.openai_server import OpenAIStubServer
from trace_lib.testing.synthetic_campaign import write_response_file
from trace_lib.testing.tiny_bench import build_tiny_tsv, tiny_png

MODEL = "tiny-model"  # no canonical scores: the score is printed without a verdict


@pytest.fixture(scope="module")
def judge():
    """A loopback judge whose answer the test sets (``judge.answer``)."""
    with OpenAIStubServer(lambda route, body: server.answer, model="qwen3-32b-judge") as server:
        server.answer = "A"
        yield server


def _score(capsys, release, key, dataset, responses, out, judge_url):
    code = main(["score", "--trace-root", str(release.path), "--benchmark", key, "--dataset", str(dataset),
                 "--responses", str(responses), "--out", str(out), "--judge-url", judge_url])
    captured = capsys.readouterr()
    assert captured.err == ""
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    return code, captured.out.splitlines(), json.loads((out / "scores.json").read_text()), records


def test_mmstar_prefetch_then_judge(capsys, release, tmp_path, judge):
    pytest.importorskip("PIL", reason="tiny TSV images need pillow")
    from trace_lib.benchmarks.registry import get_protocol

    dataset = build_tiny_tsv(tmp_path / "MMStar.tsv", style="mcq", rows=8, seed=0)
    rows = get_protocol("mmstar").load(dataset)
    answers = [r["answer"] for r in rows]
    # rows 0-3: the right bare letter; 4-5: a wrong bare letter; 6-7: no letter at all -> the judge answers "A"
    texts = [a for a in answers[:4]] + ["ABC"[("ABC".index(a) + 1) % 3] for a in answers[4:6]]
    texts += ["Hmm, maybe the second one or the third one."] * 2
    responses = write_response_file(tmp_path / "r.jsonl", model=MODEL, seed=42, benchmark="mmstar", rows=rows,
                                    texts=texts)
    judge.answer, judge.requests[:] = "A", []
    code, out, summary, records = _score(capsys, release, "mmstar", dataset, responses, tmp_path / "out", judge.url)
    expected = 100.0 * (4 + sum(a == "A" for a in answers[6:])) / len(rows)
    assert code == 0
    assert out == [f"{MODEL}-seed42-mmstar: score {expected:.3f} over 8 rows, 2 judge calls",
                   f"{MODEL}-seed42-mmstar: no canonical score for model '{MODEL}'; nothing to compare"]
    assert summary["score"] == expected and summary["protocol"]["key"] == "mmstar"
    assert [r["judge_calls"] for r in records] == [0] * 6 + [1, 1]
    assert [r["extracted"] for r in records[6:]] == ["A", "A"]
    assert {route for route, _ in judge.requests} == {"chat/completions"}


def test_mathvista_prefetch_then_judge_extraction(capsys, release, tmp_path, judge):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("PIL", reason="tiny TSV images need pillow")
    from trace_lib.benchmarks.registry import get_protocol

    image = base64.b64encode(tiny_png(1)).decode("ascii")

    def row(i, question_type, answer_type, answer, choices="[]", option=math.nan):
        return {"index": 100 + i, "image": image, "question": f"Hint: answer.\nQuestion: q{i}?", "answer": answer,
                "question_type": question_type, "answer_type": answer_type, "precision": math.nan, "choices": choices,
                "answer_option": option, "unit": math.nan, "task": "figure question answering",
                "skills": "['arithmetic reasoning']"}

    choices = "['3', '4', '5', '6']"
    table = [row(0, "multi_choice", "text", "4", choices, "B"), row(1, "multi_choice", "text", "5", choices, "C"),
             row(2, "free_form", "integer", "7"), row(3, "free_form", "integer", "12"),
             row(4, "free_form", "integer", "5")]
    dataset = tmp_path / "MathVista_MINI.tsv"
    pd.DataFrame(table).to_csv(dataset, sep="\t", index=False)
    rows = get_protocol("mathvista").load(dataset)
    # prefetch: (B) right, B wrong, 7 right; rows 3-4 have no parsable number -> the judge extracts "12"
    texts = ["The answer is (B).", "B", "7", "There are twelve.", "five I think"]
    responses = write_response_file(tmp_path / "r.jsonl", model=MODEL, seed=42, benchmark="mathvista", rows=rows,
                                    texts=texts)
    judge.answer, judge.requests[:] = "12", []
    code, out, summary, records = _score(capsys, release, "mathvista", dataset, responses, tmp_path / "out", judge.url)
    assert code == 0
    assert out[0] == f"{MODEL}-seed42-mathvista: score 60.000 over 5 rows, 2 judge calls"
    assert summary["counts"] == {"hit": 3, "total": 5, "prefetched": 3, "judged": 2}
    assert [r["score"] for r in records] == [1.0, 0.0, 1.0, 1.0, 0.0]
    assert [route for route, _ in judge.requests] == ["completions"]  # both judged rows in one batch
    body = judge.requests[0][1]
    assert body["max_tokens"] == 128 and len(body["prompt"]) == 2
    assert body["prompt"][0].endswith("Model respone: There are twelve.Extracted answer:<|im_end|>\n"
                                      "<|im_start|>assistant\n<think>\n\n</think>\n\n")
