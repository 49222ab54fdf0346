"""Ground-truth-blind judge fallback (``trace-validation-qwen3-answer-extractor-v2``).

``run_judge(pending, suite_judge, template, endpoints, output_dir)`` takes the rows the deterministic extractor left
``missing``/``ambiguous`` (exactly eight GT-blind fields each), renders one prompt per row client side with the judge
tokenizer's template (system prompt + canonical ``{"answer_type", "model_response"}``, thinking off), and asks the
judge's ``/v1/completions`` in batches of 32 over a max-token ladder read from the suite (``judge.max_token_retries``).
A row leaves the ladder at its first output that validates (an answer, or an abstention); after the last rung it is
``failed``. Each row gets a receipt ``receipts/<request_hash>.json`` (request hash = H0 of its request contract), a
later run reuses valid non-failed receipts, and ``judge_results.jsonl`` holds every receipt sorted by
``(model_slug, row_index)``. An unreachable judge is an error before any receipt is written, never a fallback.
"""

from __future__ import annotations

import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from trace_lib.errors import InputError, JudgeError
from trace_lib.filelock import locked_directory
from trace_lib.jsonio import canonical_json_utf8
from trace_lib.scoring.judge import (
    JudgeReply,
    StackPolicy,
    climb_ladder,
    completions_body,
    first_round_failed,
    post_completions,
    register_stack,
)
from trace_lib.scoring.judge_http import CallFailed, probe
from trace_lib.validation import pins
from trace_lib.validation.canonical import (
    h0,
    read_json,
    read_jsonl,
    sha256_text,
    write_json,
    write_jsonl,
)
from trace_lib.validation.chat_template import ChatTemplate
from trace_lib.validation.extraction import ANSWER_TYPES, EXTRACTION_VERSION, extract
from trace_lib.validation.judge_output import JudgeOutputError, validate_judge_output
from trace_lib.release.validation_suite import JudgeContract

PENDING_FIELDS = frozenset(
    {
        "model_slug", "row_index", "instance_id", "answer_type", "raw_response", "raw_response_sha256",
        "deterministic_status", "deterministic_extraction_version",
    }
)
RECEIPT_FIELDS = frozenset(
    {
        "schema_version", "contract_version", "request_hash", "request_contract", "raw_response_sha256",
        "rendered_prompt_sha256", "system_prompt_sha256", "tokenizer_template_sha256", "tokenizer_model",
        "judge_revision", "judge_model", "model_slug", "row_index", "instance_id", "answer_type",
        "deterministic_status", "deterministic_extraction_version", "judge_status", "answer", "evidence", "attempts",
    }
)
ATTEMPT_FIELDS = frozenset(
    {"retry_number", "max_tokens", "endpoint", "raw_output", "finish_reason", "elapsed_seconds", "validation_error"}
)
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: The lock file of a judge directory while a run writes it (one writer per model).
LOCK_FILE = ".judge.lock"


# -- pending rows ---------------------------------------------------------------------------------------------------
def check_pending_row(row: Mapping[str, Any], *, where: str) -> None:
    """A pending row has exactly the eight GT-blind fields, intact hashes and a status the extractor agrees with.

    Raises:
        InputError: naming ``where`` and the violated rule.
    """
    missing, extra = sorted(PENDING_FIELDS - set(row)), sorted(set(row) - PENDING_FIELDS)
    if missing or extra:
        raise InputError("pending row fields differ from the GT-blind contract", field=where,
                         found=f"missing={missing} extra={extra}")
    if not isinstance(row["model_slug"], str) or not row["model_slug"]:
        raise InputError("invalid model_slug", field=where)
    if isinstance(row["row_index"], bool) or not isinstance(row["row_index"], int) or row["row_index"] < 0:
        raise InputError("invalid row_index", field=where)
    if not isinstance(row["instance_id"], str) or not row["instance_id"]:
        raise InputError("invalid instance_id", field=where)
    if row["answer_type"] not in ANSWER_TYPES:
        raise InputError("invalid answer_type", field=where, found=row["answer_type"])
    if not isinstance(row["raw_response"], str):
        raise InputError("raw_response is not a string", field=where)
    if row["raw_response_sha256"] != sha256_text(row["raw_response"]):
        raise InputError("raw_response_sha256 differs from the response", field=where)
    if row["deterministic_extraction_version"] != EXTRACTION_VERSION:
        raise InputError("deterministic extractor version differs", field=where, expected=EXTRACTION_VERSION,
                         found=row["deterministic_extraction_version"])
    if row["deterministic_status"] not in ("missing", "ambiguous"):
        raise InputError("row is not eligible for the judge", field=where, found=row["deterministic_status"])
    again = extract(row["raw_response"], row["answer_type"]).status.upstream
    if again != row["deterministic_status"]:
        raise InputError("deterministic status differs from a fresh extraction", field=where,
                         expected=again, found=row["deterministic_status"])


# -- request identity -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JudgeRequest:
    """One pending row's judge request: the rendered prompt and the contract its receipt is bound to."""

    row: Mapping[str, Any]
    rendered: str
    contract: Mapping[str, Any]

    @property
    def request_hash(self) -> str:
        return h0(dict(self.contract))

    @property
    def key(self) -> tuple[str, int]:
        return (str(self.row["model_slug"]), int(self.row["row_index"]))


def render_prompt(template: ChatTemplate, raw_response: str, answer_type: str) -> str:
    """The judge prompt: system prompt + canonical ``{"answer_type", "model_response"}``, generation prompt on,
    thinking off."""
    user = canonical_json_utf8({"answer_type": answer_type, "model_response": raw_response})
    messages = [{"role": "system", "content": pins.JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]
    return template.render(messages, add_generation_prompt=True, enable_thinking=False)


def request_contract(
    row: Mapping[str, Any], *, rendered_sha256: str, template_sha256: str, judge: JudgeContract
) -> dict[str, Any]:
    """What a judge receipt is bound to (its H0 is the request hash)."""
    return {
        "contract_version": pins.JUDGE_CONTRACT_VERSION,
        "model_slug": str(row["model_slug"]),
        "row_index": int(row["row_index"]),
        "instance_id": str(row["instance_id"]),
        "raw_response_sha256": sha256_text(str(row["raw_response"])),
        "answer_type": str(row["answer_type"]),
        "deterministic_status": str(row["deterministic_status"]),
        "deterministic_extraction_version": str(row["deterministic_extraction_version"]),
        "judge_model": judge.served_model_name,
        "judge_revision": judge.revision,
        "tokenizer_model": judge.repo_id,
        "system_prompt_sha256": pins.JUDGE_SYSTEM_PROMPT_SHA256,
        "rendered_prompt_sha256": rendered_sha256,
        "tokenizer_template_sha256": template_sha256,
        "temperature": judge.temperature,
        "top_p": judge.top_p,
        "seed": pins.JUDGE_SEED,
        "retry_token_limits": list(judge.max_token_retries),
    }


def build_request(row: Mapping[str, Any], template: ChatTemplate, judge: JudgeContract) -> JudgeRequest:
    rendered = render_prompt(template, str(row["raw_response"]), str(row["answer_type"]))
    contract = request_contract(row, rendered_sha256=sha256_text(rendered), template_sha256=template.sha256,
                                judge=judge)
    return JudgeRequest(row=row, rendered=rendered, contract=contract)


# -- receipt validation ---------------------------------------------------------------------------------------------
def check_receipt(receipt: Mapping[str, Any], *, row: Mapping[str, Any], contract: Mapping[str, Any],
                  allow_failed: bool) -> None:
    """A judge receipt is exactly bound to ``row`` and ``contract`` and its attempts justify its result.

    Raises:
        JudgeOutputError: the first violated rule (upstream's ``_validate_receipt`` rules).
    """
    if set(receipt) != RECEIPT_FIELDS:
        raise JudgeOutputError("receipt fields differ from the frozen schema")
    expected = {
        "schema_version": pins.JUDGE_RECEIPT_SCHEMA,
        "contract_version": pins.JUDGE_CONTRACT_VERSION,
        "request_hash": h0(dict(contract)),
        "request_contract": dict(contract),
        "raw_response_sha256": contract["raw_response_sha256"],
        "rendered_prompt_sha256": contract["rendered_prompt_sha256"],
        "system_prompt_sha256": pins.JUDGE_SYSTEM_PROMPT_SHA256,
        "tokenizer_template_sha256": contract["tokenizer_template_sha256"],
        "tokenizer_model": contract["tokenizer_model"],
        "judge_revision": contract["judge_revision"],
        "judge_model": contract["judge_model"],
        "model_slug": row["model_slug"],
        "row_index": row["row_index"],
        "instance_id": row["instance_id"],
        "answer_type": row["answer_type"],
        "deterministic_status": row["deterministic_status"],
        "deterministic_extraction_version": row["deterministic_extraction_version"],
    }
    for key, value in expected.items():
        if receipt.get(key) != value:
            raise JudgeOutputError(f"receipt {key} identity mismatch")
    if h0(receipt["request_contract"]) != receipt["request_hash"]:
        raise JudgeOutputError("receipt request contract hash mismatch")
    attempts = receipt.get("attempts")
    if not isinstance(attempts, list) or not attempts:
        raise JudgeOutputError("receipt has no attempts")
    ladder = contract["retry_token_limits"]
    if len(attempts) > len(ladder):
        raise JudgeOutputError("receipt has too many attempts")
    valid: list[dict[str, Any]] = []
    for number, attempt in enumerate(attempts):
        if not isinstance(attempt, dict) or set(attempt) != ATTEMPT_FIELDS:
            raise JudgeOutputError("receipt attempt fields differ from the frozen schema")
        if attempt.get("retry_number") != number:
            raise JudgeOutputError("receipt attempt retry number mismatch")
        if attempt.get("max_tokens") != ladder[number]:
            raise JudgeOutputError("receipt attempt token limit mismatch")
        if not isinstance(attempt.get("endpoint"), str) or not attempt["endpoint"]:
            raise JudgeOutputError("receipt attempt has invalid endpoint")
        if not isinstance(attempt.get("raw_output"), str):
            raise JudgeOutputError("receipt attempt has invalid raw output")
        if not isinstance(attempt.get("finish_reason"), str):
            raise JudgeOutputError("receipt attempt has invalid finish reason")
        elapsed = attempt.get("elapsed_seconds")
        if isinstance(elapsed, bool) or not isinstance(elapsed, (int, float)) or not math.isfinite(float(elapsed)) \
                or elapsed < 0:
            raise JudgeOutputError("receipt attempt has invalid elapsed time")
        error = attempt.get("validation_error")
        if error is not None and not isinstance(error, str):
            raise JudgeOutputError("receipt attempt has invalid validation error")
        try:
            parsed = validate_judge_output(attempt["raw_output"], raw_response=str(row["raw_response"]),
                                           answer_type=str(row["answer_type"]))
        except JudgeOutputError:
            if error is None:
                raise JudgeOutputError("receipt marks an invalid attempt as successfully validated") from None
        else:
            if error is not None:
                raise JudgeOutputError("receipt marks a valid attempt as a validation failure")
            valid.append(parsed)
    status = receipt.get("judge_status")
    if status == "failed":
        if not allow_failed:
            raise JudgeOutputError("failed receipts are not reusable")
        if receipt.get("answer") is not None or receipt.get("evidence") != "":
            raise JudgeOutputError("failed receipt must have null answer and empty evidence")
        if valid or len(attempts) != len(ladder):
            raise JudgeOutputError("failed receipt does not exhaust only invalid attempts")
        return
    if status not in ("ok", "missing", "ambiguous"):
        raise JudgeOutputError("receipt has invalid judge_status")
    stored = {"status": status, "answer": receipt.get("answer"), "evidence": receipt.get("evidence")}
    again = validate_judge_output(canonical_json_utf8(stored), raw_response=str(row["raw_response"]),
                                  answer_type=str(row["answer_type"]))
    if again != stored:
        raise JudgeOutputError("receipt answer is not canonical")
    if valid != [again] or attempts[-1]["validation_error"] is not None:
        raise JudgeOutputError("receipt result does not match its successful final attempt")


# -- transport ------------------------------------------------------------------------------------------------
#: Upstream's ``judge_extract._call_batch`` body on the shared completions client: ``prompt`` always a list, the
#: pinned ``seed`` last (:func:`trace_lib.scoring.judge.completions_body`).
STACK = register_stack(StackPolicy("trace-validation", prompt_as_list=True, seed=pins.JUDGE_SEED))


def probe_endpoints(endpoints: Sequence[str], served_model: str, *, timeout_s: float = 10.0) -> None:
    """Every endpoint answers ``GET /v1/models`` and serves ``served_model``.

    Raises:
        JudgeError: an endpoint is unreachable or serves another model.
    """
    for endpoint in endpoints:
        probe(endpoint, served_model, timeout_s=timeout_s,
              hint="start the judge ('trace-repro judge serve', see the README's validation section)")


# -- the ladder -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JudgeReport:
    """Outcome of one judge run over a pending file."""

    results_path: Path
    rows: int
    reused: int
    judged: int
    by_status: Mapping[str, int]
    transport_failed_attempts: int  # attempts lost to HTTP/transport errors (their rows may end "failed")

    def to_dict(self) -> dict[str, Any]:
        return {
            "by_status": dict(sorted(self.by_status.items())),
            "judged": self.judged,
            "results_path": str(self.results_path),
            "reused": self.reused,
            "rows": self.rows,
            "transport_failed_attempts": self.transport_failed_attempts,
        }


def _receipt_path(output_dir: Path, request_hash: str) -> Path:
    return output_dir / "receipts" / f"{request_hash}.json"


def _reusable(path: Path, request: JudgeRequest) -> bool:
    if not path.is_file():
        return False
    try:
        check_receipt(read_json(path), row=request.row, contract=request.contract, allow_failed=False)
    except (JudgeOutputError, InputError):
        return False
    return True


def run_judge(
    pending: Sequence[Mapping[str, Any]],
    *,
    judge: JudgeContract,
    template: ChatTemplate | None,
    endpoints: Sequence[str],
    output_dir: Path,
    timeout_s: float = 300.0,
    batch_size: int = pins.JUDGE_BATCH_SIZE,
    workers: int = pins.JUDGE_WORKERS,
    probe: bool = True,
) -> JudgeReport:
    """Judge every pending row (reusing valid receipts) and write ``judge_results.jsonl`` (module docstring).

    Raises:
        InputError: a pending row violates the GT-blind contract or repeats a (model_slug, row_index) key.
        JudgeError: rows need judging but no endpoint is given, or an endpoint is unreachable.
    """
    output_dir = Path(output_dir).expanduser().resolve()
    with locked_directory(output_dir, LOCK_FILE, busy=lambda: InputError(
            "another process is judging into this directory", file=str(output_dir),
            hint="wait for it to finish, or use another --work-dir")):
        return _run_judge(pending, judge=judge, template=template, endpoints=endpoints, output_dir=output_dir,
                          timeout_s=timeout_s, batch_size=batch_size, workers=workers, probe=probe)


def _run_judge(
    pending: Sequence[Mapping[str, Any]], *, judge: JudgeContract, template: ChatTemplate | None,
    endpoints: Sequence[str], output_dir: Path, timeout_s: float, batch_size: int, workers: int, probe: bool,
) -> JudgeReport:
    """:func:`run_judge` under the directory's lock."""
    # ``template`` may be None only when nothing is pending (an empty results file is still written).
    for position, row in enumerate(pending):
        check_pending_row(row, where=f"pending row {position}")
    keys = [(str(r["model_slug"]), int(r["row_index"])) for r in pending]
    if len(set(keys)) != len(keys):
        raise InputError("pending rows repeat a (model_slug, row_index) key")
    if pending and template is None:
        raise InputError("rows need the judge but no judge tokenizer is given", field="--judge-tokenizer",
                         hint="pass the local Qwen3-32B checkpoint directory (its chat template renders the prompt)")
    requests = [build_request(row, template, judge) for row in pending] if template is not None else []
    todo = [r for r in requests if not _reusable(_receipt_path(output_dir, r.request_hash), r)]
    if todo:
        if not endpoints:
            raise JudgeError("rows need the judge but no endpoint is given", field="--judge-url",
                             hint="start the Qwen3-32B judge and pass its base URL")
        if probe:
            probe_endpoints(endpoints, judge.served_model_name)

    parsed: dict[int, dict[str, Any]] = {}
    sent: dict[tuple[int, int], tuple[str, float, str | None]] = {}  # (rung, index) -> endpoint, seconds, error

    def ask(rung: int, limit: int, indices: Sequence[int]) -> list[JudgeReply]:
        """One rung: batches of ``batch_size`` round-robin over the endpoints, one exchange each; a failed batch
        costs each of its rows this rung (upstream)."""
        batches = [list(indices[i : i + batch_size]) for i in range(0, len(indices), batch_size)]

        def one(numbered: tuple[int, list[int]]) -> tuple[list[JudgeReply], float, str | None, str]:
            number, batch = numbered
            endpoint = endpoints[number % len(endpoints)]
            body = completions_body(judge.served_model_name, [todo[i].rendered for i in batch], max_tokens=limit,
                                    temperature=judge.temperature, top_p=judge.top_p, stack=STACK.name)
            try:
                replies, seconds = post_completions(endpoint, body, count=len(batch), timeout_s=timeout_s)
                return replies, seconds, None, endpoint
            except JudgeError:
                raise  # configuration: no rung can fix it
            except Exception as exc:  # noqa: BLE001 - a failed batch costs every row one rung, as upstream
                kind = exc.kind if isinstance(exc, CallFailed) else "garbled"
                failed = [JudgeReply("", "", ok=False, max_tokens=limit, failure=kind) for _ in batch]
                return failed, 0.0, f"{type(exc).__name__}: {exc}", endpoint

        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(batches)))) as pool:
            answered = list(pool.map(one, enumerate(batches)))
        replies = [reply for batch_replies, *_ in answered for reply in batch_replies]
        if rung == 0 and first_round_failed(replies):
            raise JudgeError(f"every judge request of the first round failed ({answered[0][2]})",
                             field=f"--judge-url {','.join(endpoints)}",
                             hint="the judge answers 5xx, times out or went away; check its log")
        for batch, (_, seconds, error, endpoint) in zip(batches, answered):
            for index in batch:
                sent[(rung, index)] = (endpoint, seconds, error)
        return replies

    def check(rung: int, index: int, reply: JudgeReply) -> str | None:
        """None when the reply is a valid judge output (kept in ``parsed``), else why not."""
        error = sent[(rung, index)][2]
        if error is not None:
            return error
        row = todo[index].row
        try:
            parsed[index] = validate_judge_output(reply.text, raw_response=str(row["raw_response"]),
                                                  answer_type=str(row["answer_type"]))
        except Exception as exc:  # noqa: BLE001 - any invalid output climbs a rung
            return f"{type(exc).__name__}: {exc}"
        return None

    ladders = climb_ladder(ask, len(todo), judge.max_token_retries, check=check) if todo else []
    transport_failures = sum(1 for _, _, error in sent.values() if error is not None)
    attempts = {
        todo[index].request_hash: [
            {"retry_number": r.number, "max_tokens": r.budget, "endpoint": sent[(r.number, index)][0],
             "raw_output": r.reply.text, "finish_reason": r.reply.finish_reason or "",
             "elapsed_seconds": sent[(r.number, index)][1], "validation_error": r.problem}
            for r in rungs
        ]
        for index, rungs in enumerate(ladders)
    }
    parsed = {todo[index].request_hash: result for index, result in parsed.items()}

    for request in todo:
        result = parsed.get(request.request_hash)
        receipt = {
            "schema_version": pins.JUDGE_RECEIPT_SCHEMA,
            "contract_version": pins.JUDGE_CONTRACT_VERSION,
            "request_hash": request.request_hash,
            "request_contract": dict(request.contract),
            "raw_response_sha256": request.contract["raw_response_sha256"],
            "rendered_prompt_sha256": request.contract["rendered_prompt_sha256"],
            "system_prompt_sha256": pins.JUDGE_SYSTEM_PROMPT_SHA256,
            "tokenizer_template_sha256": request.contract["tokenizer_template_sha256"],
            "tokenizer_model": judge.repo_id,
            "judge_revision": judge.revision,
            "judge_model": judge.served_model_name,
            "model_slug": request.row["model_slug"],
            "row_index": int(request.row["row_index"]),
            "instance_id": request.row["instance_id"],
            "answer_type": request.row["answer_type"],
            "deterministic_status": request.row["deterministic_status"],
            "deterministic_extraction_version": request.row["deterministic_extraction_version"],
            "judge_status": result["status"] if result is not None else "failed",
            "answer": result["answer"] if result is not None else None,
            "evidence": result["evidence"] if result is not None else "",
            "attempts": attempts[request.request_hash],
        }
        write_json(_receipt_path(output_dir, request.request_hash), receipt)

    results = []
    for request in requests:
        receipt = read_json(_receipt_path(output_dir, request.request_hash))
        check_receipt(receipt, row=request.row, contract=request.contract, allow_failed=True)
        results.append(receipt)
    results.sort(key=lambda r: (str(r["model_slug"]), int(r["row_index"])))
    results_path = output_dir / "judge_results.jsonl"
    write_jsonl(results_path, results)
    counts: dict[str, int] = {}
    for receipt in results:
        counts[receipt["judge_status"]] = counts.get(receipt["judge_status"], 0) + 1
    return JudgeReport(results_path=results_path, rows=len(results), reused=len(requests) - len(todo),
                       judged=len(todo), by_status=counts, transport_failed_attempts=transport_failures)


def load_pending(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``judge_pending.jsonl`` (strict JSON objects; checked by :func:`run_judge`)."""
    return read_jsonl(path)
