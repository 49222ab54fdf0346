"""``train prepare``: download the pinned dataset revision and base model, verify them, write the input receipt.

``run_prepare(release, profile, input_dir)`` follows upstream's ``rlvr/train.py prepare``: an empty
input directory; the Hub must resolve the requested revisions to themselves; ``snapshot_download`` of exactly
the profile's 16 train shards, validation file and two manifests into ``<input>/dataset`` and the base model's
``required_files`` into ``<input>/base_model``; then :func:`verify_dataset` (schema, row counts, task
cardinalities and SHA-256s against the dataset-equivalence receipt, all read from the release) and
:func:`verify_base_model`, and ``<input>/input_receipt.json`` in upstream's format.
``verify_input_receipt`` re-hashes every recorded file before each run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from trace_lib.data.hub_access import EndpointCheck, hub_access
from trace_lib.errors import InputError, ReleaseFileError
from trace_lib.release.load import load_json, sha256_file
from trace_lib.release.locate import ReleaseRoot
from trace_lib.training.profiles import TrainingProfile, equivalence_file_hashes
from trace_lib.training.receipts import INPUT_RECEIPT, INPUT_SCHEMA, read_receipt, write_receipt

DATASET_DIR = "dataset"
BASE_MODEL_DIR = "base_model"


@dataclass(frozen=True)
class DatasetExpectations:
    """What the prepared Parquet files must be (everything read from the release)."""

    columns: tuple[str, ...]  # exact schema names, in order
    train_files: tuple[str, ...]
    validation_file: str
    manifests: tuple[str, ...]
    train_rows: int
    validation_rows: int
    task_count: int
    train_rows_per_task: int
    validation_rows_per_task: int
    sha256: dict[str, str]  # path -> required SHA-256


def dataset_expectations(release: ReleaseRoot, profile: TrainingProfile) -> DatasetExpectations:
    """The checks ``prepare`` applies, from the profile and the dataset-equivalence receipt."""
    d = profile.dataset
    receipt = release.read_json(d.equivalence_receipt_path)
    advisory = receipt.get("added_advisory_column") if isinstance(receipt, dict) else None
    if not isinstance(advisory, str):
        raise ReleaseFileError("missing added_advisory_column", file=d.equivalence_receipt_path)
    return DatasetExpectations(
        columns=(*d.required_columns, advisory),
        train_files=d.train_files,
        validation_file=d.validation_file,
        manifests=d.manifests,
        train_rows=d.train_rows,
        validation_rows=d.validation_rows,
        task_count=d.task_count,
        train_rows_per_task=d.train_rows_per_task,
        validation_rows_per_task=d.validation_rows_per_task,
        sha256=equivalence_file_hashes(release, profile),
    )


def empty_directory(path: Path, flag: str) -> Path:
    """``path`` resolved and usable as an empty directory (created when absent).

    Raises:
        InputError: it is a symlink, a file, or a non-empty directory.
    """
    if path.is_symlink():
        raise InputError("must not be a symlink", field=flag, found=str(path))
    resolved = path.resolve()
    if resolved.exists():
        if not resolved.is_dir():
            raise InputError("must be a directory", field=flag, found=str(resolved))
        if any(resolved.iterdir()):
            raise InputError("must be an empty directory", field=flag, found=str(resolved),
                             hint="use a new directory; trace-repro never reuses or resumes old outputs")
    else:
        resolved.mkdir(parents=True)
    return resolved


def _parquet_record(root: Path, rel: str, expect: DatasetExpectations, tasks: Counter) -> dict[str, Any]:
    import pyarrow.parquet as pq

    path = root / rel
    if not path.is_file():
        raise InputError("dataset file is missing", file=str(path))
    handle = pq.ParquetFile(path)
    names = tuple(handle.schema_arrow.names)
    if names != expect.columns:
        raise InputError("unexpected Parquet columns", file=str(path), expected=list(expect.columns), found=list(names))
    for batch in handle.iter_batches(columns=["task"], batch_size=65536):
        tasks.update(batch.column(0).to_pylist())
    digest = sha256_file(path)
    if digest != expect.sha256[rel]:
        raise InputError("SHA-256 differs from the dataset-equivalence receipt", file=str(path),
                         expected=expect.sha256[rel], found=digest)
    return {"path": rel, "rows": handle.metadata.num_rows, "sha256": digest, "size": path.stat().st_size}


def _check_tasks(label: str, tasks: Counter, count: int, per_task: int) -> None:
    if len(tasks) != count:
        raise InputError("distinct task count differs from the profile", file=label, expected=count, found=len(tasks))
    wrong = sorted((t, n) for t, n in tasks.items() if n != per_task)
    if wrong:
        raise InputError("rows per task differ from the profile", file=label, expected=per_task, found=wrong[:5])


def verify_dataset(dataset_dir: Path, expect: DatasetExpectations) -> list[dict[str, Any]]:
    """File records (path, size, sha256, rows) of the 17 Parquet files and the 2 manifests, sorted by path.

    Raises:
        InputError: a file is missing; schema, row count, task cardinality or SHA-256 differs from the release.
    """
    records = []
    train_tasks: Counter = Counter()
    for rel in expect.train_files:
        records.append(_parquet_record(dataset_dir, rel, expect, train_tasks))
    train_rows = sum(r["rows"] for r in records)
    if train_rows != expect.train_rows:
        raise InputError("train row count differs from the profile", file=str(dataset_dir),
                         expected=expect.train_rows, found=train_rows)
    _check_tasks(f"{dataset_dir}: train", train_tasks, expect.task_count, expect.train_rows_per_task)
    val_tasks: Counter = Counter()
    val = _parquet_record(dataset_dir, expect.validation_file, expect, val_tasks)
    if val["rows"] != expect.validation_rows:
        raise InputError("validation row count differs from the profile", file=str(dataset_dir / expect.validation_file),
                         expected=expect.validation_rows, found=val["rows"])
    _check_tasks(f"{dataset_dir}: validation", val_tasks, expect.task_count, expect.validation_rows_per_task)
    records.append(val)
    for rel in expect.manifests:
        path = dataset_dir / rel
        try:
            doc = load_json(path)
        except ReleaseFileError as exc:
            raise InputError(f"cannot read JSON file: {exc.message}", file=str(path)) from None
        if not isinstance(doc, dict) or not doc:
            raise InputError("manifest must be a non-empty JSON object", file=str(path))
        records.append({"path": rel, "sha256": sha256_file(path), "size": path.stat().st_size})
    return sorted(records, key=lambda r: r["path"])


def verify_base_model(model_dir: Path, required_files: tuple[str, ...]) -> list[dict[str, Any]]:
    """File records of the base model's required files (each present and non-empty; config.json has a
    model_type; at least one safetensors file), sorted by path."""
    records = []
    for rel in required_files:
        path = model_dir / rel
        if not path.is_file() or path.stat().st_size == 0:
            raise InputError("base-model file is missing or empty", file=str(path))
        records.append({"path": rel, "sha256": sha256_file(path), "size": path.stat().st_size})
    config = load_json(model_dir / "config.json") if "config.json" in required_files else None
    if not isinstance(config, dict) or not config.get("model_type"):
        raise InputError("config.json must be an object with a model_type", file=str(model_dir / "config.json"))
    if not any(rel.endswith(".safetensors") for rel in required_files):
        raise InputError("no safetensors weights among the required files", file=str(model_dir))
    return sorted(records, key=lambda r: r["path"])


def input_receipt(release: ReleaseRoot, profile: TrainingProfile, dataset_files: list, model_files: list) -> dict:
    """The input receipt (upstream's ``trace-rlvr-input-receipt-v1`` fields)."""
    d = profile.dataset
    return {
        "schema_version": INPUT_SCHEMA,
        "config_id": profile.config_id,
        "config_sha256": profile.sha256,
        "prompt_sha256": release.sha256(profile.prompt_path),
        "dataset": {
            "repo_id": d.repo_id,
            "revision": d.revision,
            "historical_training_revision": d.historical_training_revision,
            "reproduction_dataset_revision": d.revision,
            "equivalence_receipt": {"path": d.equivalence_receipt_path, "sha256": d.equivalence_receipt_sha256},
            "files": dataset_files,
        },
        "base_model": {"repo_id": profile.base_model.repo_id, "revision": profile.base_model.revision, "files": model_files},
    }


def download(profile: TrainingProfile, input_dir: Path, cache_dir: Path | None, *,
             check: EndpointCheck | None = None) -> None:
    """Fetch the pinned dataset files and base model with huggingface_hub (revisions checked first), after ``check``
    (default: a new :class:`~trace_lib.data.hub_access.EndpointCheck`) has reached the endpoint: every step here is
    a request (the revisions are resolved online, the files go into an empty directory).

    Raises:
        InputError: huggingface_hub is missing, the endpoint refused or accepted no connection, a Hub call failed
            (one line), or the Hub resolves a revision to a different commit.
    """
    check = check or EndpointCheck()
    try:
        api = check.api()
    except ImportError:
        raise InputError("'trace-repro train prepare' requires huggingface_hub",
                         hint="pip install 'trace-repro[train]'") from None
    d, base = profile.dataset, profile.base_model
    with hub_access(f"{d.repo_id}@{d.revision}"):
        check.ensure()
        found = api.dataset_info(d.repo_id, revision=d.revision).sha
    if found != d.revision:
        raise InputError("Hugging Face resolved a different dataset revision", field=d.repo_id, expected=d.revision, found=found)
    with hub_access(f"{base.repo_id}@{base.revision}"):
        found = api.model_info(base.repo_id, revision=base.revision).sha
    if found != base.revision:
        raise InputError("Hugging Face resolved a different base-model revision", field=base.repo_id,
                         expected=base.revision, found=found)
    cache = str(cache_dir) if cache_dir else None
    with hub_access(f"{d.repo_id}@{d.revision}"):
        api.snapshot_download(d.repo_id, repo_type="dataset", revision=d.revision,
                              local_dir=str(input_dir / DATASET_DIR), cache_dir=cache,
                              allow_patterns=[*d.parquet_files, *d.manifests])
    with hub_access(f"{base.repo_id}@{base.revision}"):
        api.snapshot_download(base.repo_id, revision=base.revision, local_dir=str(input_dir / BASE_MODEL_DIR),
                              cache_dir=cache, allow_patterns=list(base.required_files))


def run_prepare(
    release: ReleaseRoot, profile: TrainingProfile, input_dir: Path, *, cache_dir: Path | None = None,
    check: EndpointCheck | None = None,
) -> dict[str, Any]:
    """Download (:func:`download`, with ``check``), verify and write ``<input>/input_receipt.json``; return the
    receipt. The release and the directories are checked before any request."""
    expect = dataset_expectations(release, profile)  # release-side checks before any download
    if cache_dir is not None:
        cache_dir = cache_dir.resolve()
        if cache_dir.exists() and not cache_dir.is_dir():
            raise InputError("must be a directory", field="--cache-dir", found=str(cache_dir))
    input_existed = input_dir.resolve().exists()
    cache_existed = cache_dir is None or cache_dir.exists()
    target = empty_directory(input_dir, "--input-dir")
    try:
        if cache_dir is not None:
            cache_dir.mkdir(parents=True, exist_ok=True)
        download(profile, target, cache_dir, check=check)
        dataset_files = verify_dataset(target / DATASET_DIR, expect)
        model_files = verify_base_model(target / BASE_MODEL_DIR, profile.base_model.required_files)
        receipt = input_receipt(release, profile, dataset_files, model_files)
        write_receipt(target / INPUT_RECEIPT, receipt)
    except BaseException:  # nothing half-written: a failed prepare leaves no directory it created
        import shutil

        if not input_existed:
            shutil.rmtree(target, ignore_errors=True)
        if not cache_existed:
            shutil.rmtree(cache_dir, ignore_errors=True)
        raise
    return receipt


def _check_files(root: Path, group: str, files: Any, expected_paths: set[str], receipt_path: Path) -> None:
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        raise InputError("files must be a list of objects", file=str(receipt_path), field=f"{group}.files")
    paths = [f.get("path") for f in files]
    if len(set(paths)) != len(paths) or set(paths) != expected_paths:
        raise InputError("recorded file set differs from the profile's", file=str(receipt_path), field=f"{group}.files",
                         expected=sorted(expected_paths), found=sorted(map(str, paths)))
    for entry in files:
        rel = PurePosixPath(entry["path"])
        if rel.is_absolute() or ".." in rel.parts:
            raise InputError("path must be relative without '..'", file=str(receipt_path), field=f"{group}.files", found=str(rel))
        path = root / rel
        if not path.is_file() or path.stat().st_size != entry.get("size"):
            raise InputError("file missing or size changed since prepare", file=str(path), expected=entry.get("size"))
        digest = sha256_file(path)
        if digest != entry.get("sha256"):
            raise InputError("file changed since prepare", file=str(path), expected=entry.get("sha256"), found=digest)


def verify_input_receipt(release: ReleaseRoot, profile: TrainingProfile, input_dir: Path) -> dict[str, Any]:
    """Re-verify ``<input>/input_receipt.json`` against the profile and re-hash every file it lists.

    Raises:
        InputError: the receipt is missing or for another profile/revision, or any file changed.
    """
    path = input_dir / INPUT_RECEIPT
    receipt = read_receipt(path, INPUT_SCHEMA)
    expected = input_receipt(release, profile, [], [])
    for key in ("config_id", "config_sha256", "prompt_sha256"):
        if receipt.get(key) != expected[key]:
            raise InputError("receipt is for another profile", file=str(path), field=key, expected=expected[key],
                             found=receipt.get(key))
    for group in ("dataset", "base_model"):
        got = receipt.get(group) if isinstance(receipt.get(group), dict) else {}
        for key, value in expected[group].items():
            if key != "files" and got.get(key) != value:
                raise InputError("receipt identity differs from the profile", file=str(path), field=f"{group}.{key}",
                                 expected=value, found=got.get(key))
    d = profile.dataset
    _check_files(input_dir / DATASET_DIR, "dataset", receipt["dataset"].get("files"),
                 {*d.parquet_files, *d.manifests}, path)
    _check_files(input_dir / BASE_MODEL_DIR, "base_model", receipt["base_model"].get("files"),
                 set(profile.base_model.required_files), path)
    return receipt
