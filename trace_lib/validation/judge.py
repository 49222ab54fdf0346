"""Ground-truth-blind judge fallback (``trace-validation-qwen3-answer-extractor-v2``, spec §A7).

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
from typing import Any, Callable, Mapping, Sequence

from trace_lib.errors import InputError, JudgeError
from trace_lib.scoring.judge_http import PER_REQUEST_KINDS, CallFailed, probe, shared_transport
from trace_lib.validation import pins
from trace_lib.validation.canonical import (
    canonical_json,
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
from trace_lib.validation.suite import JudgeContract

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
    user = canonical_json({"answer_type": answer_type, "model_response": raw_response})
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
        JudgeOutputError: the first violated rule (upstream's ``_validate_receipt`` rules, spec §A7.4).
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
    again = validate_judge_output(canonical_json(stored), raw_response=str(row["raw_response"]),
                                  answer_type=str(row["answer_type"]))
    if again != stored:
        raise JudgeOutputError("receipt answer is not canonical")
    if valid != [again] or attempts[-1]["validation_error"] is not None:
        raise JudgeOutputError("receipt result does not match its successful final attempt")


# -- transport --------------------------------------------------------------------------------------------------
def completion_url(endpoint: str) -> str:
    """``<base>/v1/completions`` from a base URL (``.../v1`` or already ``.../v1/completions`` accepted)."""
    base = endpoint.rstrip("/")
    if base.endswith("/v1/completions"):
        return base
    if base.endswith("/v1"):
        return f"{base}/completions"
    return f"{base}/v1/completions"


def probe_endpoints(endpoints: Sequence[str], served_model: str, *, timeout_s: float = 10.0) -> None:
    """Every endpoint answers ``GET /v1/models`` and serves ``served_model``.

    Raises:
        JudgeError: an endpoint is unreachable or serves another model.
    """
    for endpoint in endpoints:
        probe(endpoint, served_model, timeout_s=timeout_s,
              hint="start the judge ('trace-repro judge serve', see the README's validation section)")


def validation_body(model: str, prompts: Sequence[str], *, max_tokens: int, temperature: float,
                    top_p: float) -> dict[str, Any]:
    """Upstream's ``judge_extract._call_batch`` body: ``model, prompt`` (always a list), ``temperature, top_p,
    max_tokens, seed``."""
    return {"model": model, "prompt": list(prompts), "temperature": temperature, "top_p": top_p,
            "max_tokens": max_tokens, "seed": pins.JUDGE_SEED}


def post_completions(endpoint: str, *, model: str, prompts: Sequence[str], max_tokens: int, temperature: float,
                     top_p: float, timeout_s: float) -> list[dict[str, Any]]:
    """One batched ``/v1/completions`` call -> ``[{"output", "finish_reason", "elapsed_seconds"}]`` in prompt order.

    Raises:
        CallFailed: a per-request HTTP/transport failure (the batch costs each row one rung, as upstream).
        JudgeError: a configuration failure (model not served, credentials refused).
        RuntimeError: a response outside the completions schema.
    """
    body = validation_body(model, prompts, max_tokens=max_tokens, temperature=temperature, top_p=top_p)
    answer = shared_transport().post(completion_url(endpoint), body, timeout_s=timeout_s, model=model)
    data = answer.data
    if not isinstance(data, dict):
        raise RuntimeError("endpoint response is not an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or len(choices) != len(prompts):
        found = len(choices) if isinstance(choices, list) else "invalid"
        raise RuntimeError(f"endpoint returned {found} choices for batch of {len(prompts)}")
    by_index: dict[int, dict[str, Any]] = {}
    for position, choice in enumerate(choices):
        if not isinstance(choice, dict):
            raise RuntimeError(f"endpoint choice {position} is not an object")
        index = choice.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int):
            raise RuntimeError(f"endpoint choice {position} has invalid index")
        if index in by_index:
            raise RuntimeError(f"endpoint returned duplicate choice index {index}")
        text, finish = choice.get("text"), choice.get("finish_reason")
        if not isinstance(text, str):
            raise RuntimeError(f"endpoint choice {position} has non-string text")
        if finish is not None and not isinstance(finish, str):
            raise RuntimeError(f"endpoint choice {position} has invalid finish_reason")
        by_index[index] = {"output": text.strip(), "finish_reason": finish or ""}
    if set(by_index) != set(range(len(prompts))):
        raise RuntimeError(f"endpoint returned indices {sorted(by_index)} for batch of {len(prompts)}")
    return [{**by_index[i], "elapsed_seconds": answer.elapsed_s} for i in range(len(prompts))]


Transport = Callable[..., list[dict[str, Any]]]


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
    transport: Transport = post_completions,
    probe: bool = True,
) -> JudgeReport:
    """Judge every pending row (reusing valid receipts) and write ``judge_results.jsonl`` (module docstring).

    Raises:
        InputError: a pending row violates the GT-blind contract or repeats a (model_slug, row_index) key.
        JudgeError: rows need judging but no endpoint is given, or an endpoint is unreachable.
    """
    # ``template`` may be None only when nothing is pending (an empty results file is still written).
    for position, row in enumerate(pending):
        check_pending_row(row, where=f"pending row {position}")
    keys = [(str(r["model_slug"]), int(r["row_index"])) for r in pending]
    if len(set(keys)) != len(keys):
        raise InputError("pending rows repeat a (model_slug, row_index) key")
    output_dir = Path(output_dir).expanduser().resolve()
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

    attempts: dict[str, list[dict[str, Any]]] = {r.request_hash: [] for r in todo}
    parsed: dict[str, dict[str, Any]] = {}
    transport_failures = 0
    unresolved = list(todo)
    for retry_number, limit in enumerate(judge.max_token_retries):
        if not unresolved:
            break
        batches = [unresolved[i : i + batch_size] for i in range(0, len(unresolved), batch_size)]

        def ask(numbered: tuple[int, list[JudgeRequest]]) -> tuple[list[JudgeRequest], list[dict[str, Any]], str | None, str]:
            number, batch = numbered
            endpoint = endpoints[number % len(endpoints)]
            try:
                outputs = transport(endpoint, model=judge.served_model_name, prompts=[r.rendered for r in batch],
                                    max_tokens=limit, temperature=judge.temperature, top_p=judge.top_p,
                                    timeout_s=timeout_s)
                return batch, outputs, None, endpoint
            except JudgeError:
                raise  # configuration: no rung can fix it
            except Exception as exc:  # a failed batch costs every row one rung, as upstream
                empty = [{"output": "", "finish_reason": "", "elapsed_seconds": 0.0} for _ in batch]
                kinds.append(exc.kind if isinstance(exc, CallFailed) else "garbled")
                return batch, empty, f"{type(exc).__name__}: {exc}", endpoint

        still: list[JudgeRequest] = []
        kinds: list[str] = []
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(batches)))) as pool:
            answered = list(pool.map(ask, enumerate(batches)))
        if retry_number == 0 and len(kinds) == len(batches) and not PER_REQUEST_KINDS.intersection(kinds):
            raise JudgeError(f"every judge request of the first round failed ({answered[0][2]})",
                             field=f"--judge-url {','.join(endpoints)}",
                             hint="the judge answers 5xx, times out or went away; check its log")
        for batch, outputs, error, endpoint in answered:
            if error is not None:
                transport_failures += len(batch)
            for request, output in zip(batch, outputs):
                problem = error
                if problem is None:
                    try:
                        parsed[request.request_hash] = validate_judge_output(
                            output["output"], raw_response=str(request.row["raw_response"]),
                            answer_type=str(request.row["answer_type"]))
                    except Exception as exc:
                        problem = f"{type(exc).__name__}: {exc}"
                attempts[request.request_hash].append({
                    "retry_number": retry_number, "max_tokens": limit, "endpoint": endpoint,
                    "raw_output": output["output"], "finish_reason": output["finish_reason"],
                    "elapsed_seconds": output["elapsed_seconds"], "validation_error": problem,
                })
                if problem is not None:
                    still.append(request)
        unresolved = still

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
