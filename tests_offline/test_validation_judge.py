"""Judge fallback (spec §A7): output validation vectors (§A10.2), prompt rendering, receipts and the retry ladder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from trace_lib.errors import InputError, JudgeError
from trace_lib.scoring.judge import render_qwen3_no_think
from trace_lib.testing.openai_server import OpenAIStubServer
from trace_lib.validation import pins
from trace_lib.jsonio import canonical_json_utf8
from trace_lib.validation.canonical import read_json
from trace_lib.validation.chat_template import ChatTemplate
from trace_lib.validation.judge import check_receipt, render_prompt, run_judge
from trace_lib.validation.judge_output import JudgeOutputError, validate_judge_output
from trace_lib.validation.score import pending_row
from trace_lib.release.validation_suite import load_validation_suite

VECTORS = [json.loads(line) for line in
           (Path(__file__).parent / "data" / "validation_judge_output_vectors.jsonl").read_text().splitlines()]
#: A Qwen3-style template (thinking off -> empty think block), for tests; the real one comes from the checkpoint.
QWEN3_LIKE = (
    "{%- for message in messages %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_judge_output_vector(vector: dict) -> None:
    kwargs = {"raw_response": vector["raw_response"], "answer_type": vector["answer_type"]}
    if "error" in vector:
        with pytest.raises(JudgeOutputError) as caught:
            validate_judge_output(vector["judge_output"], **kwargs)
        assert f"JudgeOutputError: {caught.value}" == vector["error"]
    else:
        result = validate_judge_output(vector["judge_output"], **kwargs)
        assert result == vector["result"]
        assert type(result["answer"]) is type(vector["result"]["answer"])


def test_judge_system_prompt_is_the_pinned_text() -> None:
    assert hashlib.sha256(pins.JUDGE_SYSTEM_PROMPT.encode("utf-8")).hexdigest() == pins.JUDGE_SYSTEM_PROMPT_SHA256
    assert len(pins.JUDGE_SYSTEM_PROMPT) == 995


@pytest.fixture
def template(tmp_path: Path) -> ChatTemplate:
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": QWEN3_LIKE, "eos_token": "<|im_end|>"}))
    return ChatTemplate.from_tokenizer_dir(tmp_path)


def test_prompt_is_system_plus_canonical_user_payload_without_thinking(template: ChatTemplate) -> None:
    rendered = render_prompt(template, 'Résumé: "B"', "option_letter")
    user = canonical_json_utf8({"answer_type": "option_letter", "model_response": 'Résumé: "B"'})
    assert user == '{"answer_type":"option_letter","model_response":"Résumé: \\"B\\""}'
    assert rendered == render_qwen3_no_think(user, system=pins.JUDGE_SYSTEM_PROMPT)


def _pending(slug: str, index: int, raw: str, answer_type: str, status: str) -> dict[str, Any]:
    data = {"row_index": index, "instance_id": f"i{index}", "answer_type": answer_type}
    return pending_row(slug, data, raw, status)


ROWS = [
    ("I considered B, but the final answer is C.", "option_letter", "missing"),
    ("Answer: 4\n\\boxed{5}", "integer", "ambiguous"),
    ("The value is 12.5 units", "number", "missing"),
]


def _responder(route: str, body: dict) -> str:
    (prompt,) = body["prompt"]  # batch size 1 in these tests
    if "final answer is C" in prompt:
        return '{"status":"ok","answer":"C","evidence":"the final answer is C."}'
    if "12.5" in prompt:  # invalid at 128 tokens, valid after
        return 'Sure! {"status":"ok"}' if body["max_tokens"] == 128 else '```json\n{"status":"ok","answer":12.5,"evidence":"12.5"}\n```'
    return '{"status":"ambiguous","answer":null,"evidence":""}'


def test_ladder_receipts_and_reuse(release, template: ChatTemplate, tmp_path: Path) -> None:
    judge = load_validation_suite(release).judge
    pending = [_pending("m", i, *row) for i, row in enumerate(ROWS)]
    with OpenAIStubServer(_responder, model=judge.served_model_name) as server:
        report = run_judge(pending, judge=judge, template=template, endpoints=[server.url], output_dir=tmp_path,
                           batch_size=1)
        assert dict(report.by_status) == {"ok": 2, "ambiguous": 1} and report.judged == 3
        bodies = [b for r, b in server.requests if r == "completions"]
        assert {b["max_tokens"] for b in bodies} == set(judge.max_token_retries[:2])
        assert all(b["temperature"] == judge.temperature and b["top_p"] == judge.top_p and b["seed"] == 0
                   for b in bodies)
        again = run_judge(pending, judge=judge, template=template, endpoints=[server.url], output_dir=tmp_path,
                          batch_size=1)
        assert again.reused == 3 and len([r for r, _ in server.requests if r == "completions"]) == len(bodies)
    results = [json.loads(line) for line in report.results_path.read_text().splitlines()]
    number = next(r for r in results if r["answer_type"] == "number")
    assert [a["max_tokens"] for a in number["attempts"]] == list(judge.max_token_retries[:2])
    assert number["attempts"][0]["validation_error"].startswith("JudgeOutputError: judge output: invalid JSON")
    assert (number["judge_status"], number["answer"]) == ("ok", 12.5)
    for receipt in results:
        assert read_json(tmp_path / "receipts" / f"{receipt['request_hash']}.json") == receipt
        assert "answer_gt" not in json.dumps(receipt)


def test_receipt_tampering_is_detected(release, template: ChatTemplate, tmp_path: Path) -> None:
    from trace_lib.validation.judge import build_request

    judge = load_validation_suite(release).judge
    row = _pending("m", 0, *ROWS[0])
    with OpenAIStubServer(_responder, model=judge.served_model_name) as server:
        report = run_judge([row], judge=judge, template=template, endpoints=[server.url], output_dir=tmp_path)
    receipt = json.loads(report.results_path.read_text())
    contract = build_request(row, template, judge).contract
    check_receipt(receipt, row=row, contract=contract, allow_failed=False)
    with pytest.raises(JudgeOutputError, match="does not contain the extracted answer|not canonical|does not match"):
        check_receipt({**receipt, "answer": "B"}, row=row, contract=contract, allow_failed=False)


def test_unreachable_judge_is_an_error_before_any_receipt(release, template: ChatTemplate, tmp_path: Path) -> None:
    judge = load_validation_suite(release).judge
    with pytest.raises(JudgeError, match="judge unreachable"):
        run_judge([_pending("m", 0, *ROWS[0])], judge=judge, template=template,
                  endpoints=["http://127.0.0.1:9/v1"], output_dir=tmp_path)
    assert not (tmp_path / "receipts").exists()


def test_judge_serving_another_model_is_refused(release, template: ChatTemplate, tmp_path: Path) -> None:
    judge = load_validation_suite(release).judge
    with OpenAIStubServer(_responder, model="some-other-model") as server:
        with pytest.raises(JudgeError, match="endpoint does not serve the judge"):
            run_judge([_pending("m", 0, *ROWS[0])], judge=judge, template=template, endpoints=[server.url],
                      output_dir=tmp_path)


def test_pending_rows_must_be_ground_truth_blind(release, template: ChatTemplate, tmp_path: Path) -> None:
    judge = load_validation_suite(release).judge
    row = {**_pending("m", 0, *ROWS[0]), "answer_gt": {"type": "option_letter", "value": "C"}}
    with pytest.raises(InputError, match="GT-blind contract"):
        run_judge([row], judge=judge, template=template, endpoints=[], output_dir=tmp_path)
    found = _pending("m", 0, '{"answer": "C"}', "option_letter", "missing")
    with pytest.raises(InputError, match="differs from a fresh extraction"):
        run_judge([found], judge=judge, template=template, endpoints=[], output_dir=tmp_path)
