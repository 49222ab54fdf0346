"""Generate one model's validation responses through an evaluation-engine backend; durable and resumable.

``generate_validation_responses(release, manifest_path, output_dir, target, ...)`` builds every row's request
(:mod:`trace_lib.validation.request`), sends the rows without a finished receipt to the backend (``vllm``, ``hf`` or
``openai``, via :func:`trace_lib.generation.backends.base.create_backend`), and writes, per row, a receipt
``receipts/<row:06d>.json`` as soon as its result is final; at the end ``responses.jsonl`` (the receipts in row
order, canonical bytes) and ``run_metadata.json``. Every receipt carries the run identity (H1 of the
run contract: dataset, prompt, model, revision, backend, decoding, pixel bounds), so a resumed run reuses exactly
the rows of the same run and refuses a directory that belongs to another. An empty or failed response becomes an
``error`` row: the run ends ``incomplete`` and scoring refuses it until a rerun regenerates those rows. One run
writes a directory at a time (``.generation.lock``, :func:`trace_lib.filelock.locked_directory`).

Not the evaluation slices' generation (:func:`trace_lib.generation.run.run_generation` into a ``SliceStore``): the
validation run keeps upstream's per-row receipt files, which upstream's verifier and
:func:`trace_lib.validation.verify.verify_generation_model` check one by one against ``responses.jsonl``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from trace_lib.environment.engine import generation_engine, refuse_engine_change
from trace_lib.errors import BackendError, InputError
from trace_lib.filelock import locked_directory
from trace_lib.release.load import sha256_file
from trace_lib.release.locate import ReleaseRoot
from trace_lib.validation import pins
from trace_lib.validation.canonical import (
    canonical_bytes, h1, read_json, read_json_object, sha256_text, write_bytes, write_json,
)
from trace_lib.validation.manifest import ValidationManifest, load_validation_manifest
from trace_lib.validation.request import DATA_URL, build_request, request_summary
from trace_lib.release.validation_suite import ValidationModel, load_system_prompt, load_validation_suite

#: The lock file of a generation directory while a run writes it (one writer per model).
LOCK_FILE = ".generation.lock"
#: A model directory may carry upstream's model-preparation marker; when present it must name this model.
MODEL_MARKER = ".trace_model_revision.json"


@dataclass(frozen=True)
class GenerationTarget:
    """What a generation run binds: the suite model, its local weights and how they are served."""

    model: ValidationModel
    model_path: Path
    backend: str  # vllm | hf | openai
    served_model: str  # must equal the slug for the canonical run
    endpoint_url: str | None = None  # openai backend: the server's base URL
    media_transport: str = DATA_URL
    backend_options: Mapping[str, Any] = field(default_factory=dict)  # engine knobs, recorded but not identity


@dataclass(frozen=True)
class GenerationReport:
    """Outcome of one invocation: complete iff every row has a non-empty response."""

    status: str  # complete | incomplete
    model_slug: str
    responses_path: Path
    responses_sha256: str
    completed_rows: int
    error_rows: int
    generated_rows: int  # rows sent to the backend by this invocation
    reused_rows: int  # rows whose durable receipt was reused
    engine: Mapping[str, Any] | None = None  # the engine record of run_metadata.json (environment.engine)

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def to_dict(self) -> dict[str, Any]:
        return {
            "completed_rows": self.completed_rows,
            "error_rows": self.error_rows,
            "generated_rows": self.generated_rows,
            "model_slug": self.model_slug,
            "responses_path": str(self.responses_path),
            "responses_sha256": self.responses_sha256,
            "reused_rows": self.reused_rows,
            "status": self.status,
        }


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def check_model_marker(model_path: Path, model: ValidationModel) -> str:
    """``verified`` when the directory's preparation marker names this model and revision, ``absent`` without one.

    Raises:
        InputError: the marker exists but names another model or revision.
    """
    marker = model_path / MODEL_MARKER
    if not marker.is_file():
        return "absent"
    doc = read_json_object(marker)
    checks = {"slug": model.slug, "inference_revision": model.inference_revision}
    for key, expected in checks.items():
        if key in doc and doc[key] != expected:
            raise InputError("model directory belongs to another model or revision", file=str(marker), field=key,
                             expected=expected, found=doc[key])
    return "verified"


def default_backend_options(backend: str, generation: Mapping[str, Any]) -> dict[str, Any]:
    """The paper run's server settings for an in-process engine (``vllm``): context, image limit, memory, TP 1 and
    ``generation_config`` from the suite (``vllm``: the checkpoint's generation_config.json is not applied)."""
    if backend != "vllm":
        return {}
    return {
        "max_model_len": pins.SERVER_MAX_MODEL_LEN,
        "limit_mm_per_prompt": dict(pins.SERVER_LIMIT_MM_PER_PROMPT),
        "gpu_memory_utilization": pins.SERVER_GPU_MEMORY_UTILIZATION,
        "tensor_parallel_size": pins.SERVER_TENSOR_PARALLEL_SIZE,
        "llm_kwargs": {"generation_config": generation["server_generation_config"]},
    }


def run_contract(
    manifest: ValidationManifest, *, system_prompt: str, prompt_file_sha256: str, target: GenerationTarget,
    decoding: Mapping[str, Any], mm_processor_kwargs: Mapping[str, int],
) -> dict[str, Any]:
    """The fields a run identity hashes: upstream's contract with the backend name in place of the endpoint URL.

    The endpoint (a server's host and port) is recorded in the metadata but not hashed, so a restarted server on
    another port resumes the same run; what is generated is fixed by model, revision, path, prompt and decoding.
    """
    return {
        "allowed_local_media_root": None,
        "backend": target.backend,
        "dataset_file_sha256": manifest.dataset["file_sha256"],
        "dataset_manifest_sha256": manifest.sha256,
        "dataset_repo_id": manifest.dataset["repo_id"],
        "dataset_revision": manifest.dataset["revision"],
        "decoding": dict(decoding),
        "media_transport": target.media_transport,
        "mm_processor_kwargs": dict(mm_processor_kwargs),
        "model_path": str(Path(target.model_path).expanduser().resolve()),
        "model_revision": target.model.inference_revision,
        "model_slug": target.model.slug,
        "served_model": target.served_model,
        "shard_count": 1,
        "shard_index": 0,
        "system_prompt_file_sha256": prompt_file_sha256,
        "system_prompt_sha256": sha256_text(system_prompt),
    }


def _receipt_path(output_dir: Path, row_index: int) -> Path:
    return output_dir / "receipts" / f"{row_index:06d}.json"


def _reusable(receipt: Mapping[str, Any], expected: Mapping[str, Any], path: Path) -> bool:
    """True for an intact complete receipt of this request; False for an error receipt (regenerate)."""
    for key, value in expected.items():
        if receipt.get(key) != value:
            raise InputError("existing receipt belongs to a different request", file=str(path), field=key,
                             expected=value, found=receipt.get(key), hint="use a fresh --work-dir for a new run")
    if receipt.get("status") == "error":
        return False
    if receipt.get("status") != "complete":
        raise InputError("existing receipt has an invalid status", file=str(path), field="status")
    raw, backend_response = receipt.get("raw_response"), receipt.get("backend_response")
    if not isinstance(raw, str) or not raw or not isinstance(backend_response, dict):
        raise InputError("existing completed receipt is incomplete", file=str(path))
    if sha256_text(raw) != receipt.get("raw_response_sha256"):
        raise InputError("existing receipt's raw response hash differs", file=str(path), field="raw_response_sha256")
    if h1(backend_response) != receipt.get("response_sha256"):
        raise InputError("existing receipt's response hash differs", file=str(path), field="response_sha256")
    return True


def _base(row: Mapping[str, Any], slug: str, identity_sha: str, req_hash: str) -> dict[str, Any]:
    return {
        "schema_version": pins.GENERATION_RECEIPT_SCHEMA,
        "run_identity_sha256": identity_sha,
        "row_index": row["row_index"],
        "instance_id": row["instance_id"],
        "task": row["task"],
        "domain": row["domain"],
        "answer_type": row["answer_type"],
        "model_slug": slug,
        "request_hash": req_hash,
        "request": request_summary(row),
    }


def _chunks(items: list[Any], size: int) -> Iterable[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def generate_validation_responses(
    release: ReleaseRoot,
    manifest_path: Path,
    output_dir: Path,
    target: GenerationTarget,
    *,
    expected: pins.DatasetIdentity = pins.REPRODUCTION_DATASET,
    backend: Any = None,
    chunk_size: int = 256,
    progress: Callable[[int, int], None] | None = None,
) -> GenerationReport:
    """Run or resume one model's generation into ``output_dir`` (see module docstring).

    ``backend`` may be an already-created backend object (it is not closed here); otherwise one is created from
    ``target`` only if some row still needs a response, and closed at the end.

    Raises:
        InputError: invalid manifest/model directory/served name, an output directory of another run, or one
            another process is generating into.
        BackendError: the backend could not be created.
    """
    output_dir = Path(output_dir).expanduser().resolve()
    with locked_directory(output_dir, LOCK_FILE, busy=lambda: InputError(
            "another process is generating into this directory", file=str(output_dir),
            hint="wait for it to finish, or use another --work-dir")):
        return _generate(release, manifest_path, output_dir, target, expected=expected, backend=backend,
                         chunk_size=chunk_size, progress=progress)


def _generate(
    release: ReleaseRoot, manifest_path: Path, output_dir: Path, target: GenerationTarget, *,
    expected: pins.DatasetIdentity, backend: Any, chunk_size: int, progress: Callable[[int, int], None] | None,
) -> GenerationReport:
    """:func:`generate_validation_responses` under the directory's lock."""
    if chunk_size < 1:
        raise InputError("chunk size must be positive", field="--chunk-size", found=chunk_size)
    model_path = Path(target.model_path).expanduser().resolve()
    if not model_path.is_dir():
        raise InputError("model directory is missing", file=str(model_path), field=target.model.slug)
    if not target.served_model.strip():
        raise InputError("served model name is empty", field="--served-model")
    marker = check_model_marker(model_path, target.model)
    suite = load_validation_suite(release)
    system_prompt, prompt_sha = load_system_prompt(release, suite)
    manifest = load_validation_manifest(manifest_path, expected=expected, verify_media=True)
    contract = run_contract(
        manifest, system_prompt=system_prompt, prompt_file_sha256=prompt_sha, target=target,
        decoding=suite.decoding(), mm_processor_kwargs=suite.mm_processor_kwargs(),
    )
    identity_sha = h1(contract)
    metadata_path = output_dir / "run_metadata.json"
    responses_path = output_dir / "responses.jsonl"
    created_at = _now()
    if metadata_path.exists():
        existing = read_json(metadata_path)
        if not isinstance(existing, dict) or existing.get("run_identity_sha256") != identity_sha:
            raise InputError(
                "output directory belongs to a different run", file=str(metadata_path), field="run_identity_sha256",
                expected=identity_sha, found=existing.get("run_identity_sha256") if isinstance(existing, dict) else None,
                hint="choose another --work-dir or delete that directory",
            )
        created_at = str(existing.get("created_at") or created_at)
    engine = generation_engine(release, target.backend, base_url=target.endpoint_url)
    if metadata_path.exists():
        refuse_engine_change(existing.get("engine"), engine, file=str(metadata_path), field="engine",
                             hint="finish the run on the engine it was started with, or use another --work-dir")
    metadata: dict[str, Any] = {
        "schema_version": pins.GENERATION_RUN_SCHEMA,
        "status": "running",
        "run_identity_sha256": identity_sha,
        "run_contract": contract,
        "created_at": created_at,
        "updated_at": _now(),
        "manifest_path": str(manifest.path),
        "manifest_sha256": manifest.sha256,
        "dataset_repo_id": manifest.dataset["repo_id"],
        "dataset_revision": manifest.dataset["revision"],
        "dataset_file": manifest.dataset["file"],
        "dataset_file_sha256": manifest.dataset["file_sha256"],
        "dataset_rows": len(manifest.rows),
        "model_slug": target.model.slug,
        "served_model": target.served_model,
        "model_path": contract["model_path"],
        "model_revision": target.model.inference_revision,
        "model_revision_marker": marker,
        "backend": target.backend,
        "backend_options": {**default_backend_options(target.backend, suite.generation), **target.backend_options},
        "endpoint_url": target.endpoint_url,
        "system_prompt_path": suite.prompt["system_prompt_file"],
        "system_prompt_file_sha256": prompt_sha,
        "decoding": suite.decoding(),
        "mm_processor_kwargs": suite.mm_processor_kwargs(),
        "media_transport": target.media_transport,
        "allowed_local_media_root": None,
        "shard_index": 0,
        "shard_count": 1,
        "selected_rows": len(manifest.rows),
        "responses_path": str(responses_path),
        "receipts_path": str(output_dir / "receipts"),
        "completed_rows": 0,
        "error_rows": 0,
        "engine": engine,
    }
    fresh = not metadata_path.exists()  # this run starts the directory: a backend that will not start undoes it
    write_json(metadata_path, metadata)

    def build(row: Mapping[str, Any]) -> tuple[Any, str]:
        request = build_request(row, manifest, system_prompt=system_prompt, suite=suite,
                                served_model=target.served_model, media_transport=target.media_transport)
        return request.chat, request.request_hash

    receipts: dict[int, dict[str, Any]] = {}
    pending: list[tuple[Mapping[str, Any], dict[str, Any] | None]] = []
    for row in manifest.rows:
        path = _receipt_path(output_dir, row["row_index"])
        if not path.exists():
            pending.append((row, None))
            continue
        _, req_hash = build(row)
        existing = read_json_object(path)
        identity_keys = {
            "schema_version": pins.GENERATION_RECEIPT_SCHEMA,
            "run_identity_sha256": identity_sha,
            "row_index": row["row_index"],
            "instance_id": row["instance_id"],
            "model_slug": target.model.slug,
            "request_hash": req_hash,
        }
        if _reusable(existing, identity_keys, path):
            receipts[row["row_index"]] = existing
        else:
            pending.append((row, existing))

    generated = 0
    owned = backend is None and bool(pending)
    if owned:
        from trace_lib.generation.backends.base import create_backend

        options = {**default_backend_options(target.backend, suite.generation), **target.backend_options}
        if target.endpoint_url is not None:
            options.setdefault("base_url", target.endpoint_url)
        try:
            backend = create_backend(target.backend, model_path=str(model_path), served_name=target.served_model,
                                     **options)
        except BaseException:
            if fresh and not receipts:  # nothing ran: a corrected command is the same run, not "a different" one
                metadata_path.unlink(missing_ok=True)
            raise
    try:
        for chunk in _chunks(pending, chunk_size):
            started = _now()
            by_id: dict[str, tuple[Mapping[str, Any], dict[str, Any] | None, str]] = {}
            requests = []
            for row, previous in chunk:
                request, req_hash = build(row)
                by_id[request.request_id] = (row, previous, req_hash)
                requests.append(request)
            failure: str | None = None
            try:
                for result in backend.generate(requests):
                    row, previous, req_hash = by_id.pop(result.request_id)
                    receipts[row["row_index"]] = _finish(output_dir, row, previous, req_hash, result, target,
                                                         identity_sha, started)
                    generated += 1
                    if progress is not None:
                        progress(len(receipts), len(manifest.rows))
            except BackendError as exc:
                failure = exc.render()
            for row, previous, req_hash in by_id.values():  # unanswered rows of this chunk
                receipts[row["row_index"]] = _error_receipt(
                    output_dir, row, previous, req_hash, target, identity_sha, started,
                    failure or "backend returned no result for this request",
                )
    finally:
        if owned and backend is not None:
            backend.close()

    ordered = [receipts[row["row_index"]] for row in manifest.rows]
    write_bytes(responses_path, b"".join(canonical_bytes(r) for r in ordered))
    completed = sum(r["status"] == "complete" for r in ordered)
    errors = len(ordered) - completed
    final = {
        **metadata,
        "status": "complete" if errors == 0 else "incomplete",
        "updated_at": _now(),
        "completed_at": _now(),
        "completed_rows": completed,
        "error_rows": errors,
        "responses_sha256": sha256_file(responses_path),
    }
    write_json(metadata_path, final)
    return GenerationReport(
        status=final["status"], model_slug=target.model.slug, responses_path=responses_path,
        responses_sha256=final["responses_sha256"], completed_rows=completed, error_rows=errors,
        generated_rows=generated, reused_rows=len(manifest.rows) - len(pending), engine=engine,
    )


def _history(previous: Mapping[str, Any] | None) -> tuple[int, list[dict[str, Any]]]:
    if previous is None:
        return 0, []
    return int(previous.get("attempt_count") or 0), list(previous.get("attempt_history") or [])


def _finish(
    output_dir: Path, row: Mapping[str, Any], previous: Mapping[str, Any] | None, req_hash: str, result: Any,
    target: GenerationTarget, identity_sha: str, started: str,
) -> dict[str, Any]:
    if not isinstance(result.text, str) or not result.text:
        return _error_receipt(output_dir, row, previous, req_hash, target, identity_sha, started,
                              "backend returned an empty response (an empty completion can never be scored)")
    attempts, history = _history(previous)
    backend_response = {
        "backend": target.backend,
        "served_model": target.served_model,
        "text": result.text,
        "finish_reason": result.finish_reason,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
    }
    receipt = {
        **_base(row, target.model.slug, identity_sha, req_hash),
        "status": "complete",
        "raw_response": result.text,
        "raw_response_sha256": sha256_text(result.text),
        "finish_reason": result.finish_reason,
        "response_sha256": h1(backend_response),
        "backend_response": backend_response,
        "attempt_count": attempts + 1,
        "attempt_history": history,
        "error": None,
        "started_at": started,
        "completed_at": _now(),
    }
    write_json(_receipt_path(output_dir, row["row_index"]), receipt)
    return receipt


def _error_receipt(
    output_dir: Path, row: Mapping[str, Any], previous: Mapping[str, Any] | None, req_hash: str,
    target: GenerationTarget, identity_sha: str, started: str, error: str,
) -> dict[str, Any]:
    attempts, history = _history(previous)
    history.append({"attempt": attempts + 1, "error": error, "retryable": True, "status_code": None})
    receipt = {
        **_base(row, target.model.slug, identity_sha, req_hash),
        "status": "error",
        "raw_response": None,
        "raw_response_sha256": None,
        "finish_reason": None,
        "response_sha256": None,
        "backend_response": None,
        "attempt_count": attempts + 1,
        "attempt_history": history,
        "error": error,
        "started_at": started,
        "completed_at": _now(),
    }
    write_json(_receipt_path(output_dir, row["row_index"]), receipt)
    return receipt
