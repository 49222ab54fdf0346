"""The release's training profiles (``rlvr/configs/<config_id>.yaml``) as typed, read-only views.

``profile_ids(release)`` lists the ids of the profile files present; ``load_profile(release, config_id)``
returns a :class:`TrainingProfile` whose data contract (dataset revision, shard names, columns, row counts,
base model) and ``easyr1`` block come from the file. Nothing here restates a number of the release.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from trace_lib.errors import ReleaseFileError, UsageError
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot

#: Release-relative directory holding the training profiles.
CONFIG_DIR = posixpath.dirname(identity.PROFILE_3B)


@dataclass(frozen=True)
class BaseModel:
    """The pinned initial policy: Hugging Face model repo, immutable revision, files ``prepare`` downloads."""

    repo_id: str
    revision: str
    required_files: tuple[str, ...]


@dataclass(frozen=True)
class DatasetContract:
    """The pinned training data: revisions, the 17 Parquet files, required columns and row counts."""

    repo_id: str
    revision: str
    historical_training_revision: str
    equivalence_receipt_path: str
    equivalence_receipt_sha256: str
    train_files: tuple[str, ...]
    validation_file: str
    train_manifest: str
    validation_manifest: str
    required_columns: tuple[str, ...]
    train_rows: int
    validation_rows: int
    task_count: int
    train_rows_per_task: int
    validation_rows_per_task: int

    @property
    def parquet_files(self) -> tuple[str, ...]:
        """Train shards (profile order) then the validation file."""
        return (*self.train_files, self.validation_file)

    @property
    def manifests(self) -> tuple[str, ...]:
        return (self.train_manifest, self.validation_manifest)


@dataclass(frozen=True)
class TrainingProfile:
    """One training profile: identity, data contract, prompt, hardware and the EasyR1 trainer block."""

    config_id: str
    path: str  # release-relative
    sha256: str
    selected_checkpoint_step: int
    base_model: BaseModel
    released_model: tuple[str, str]  # (repo_id, revision)
    dataset: DatasetContract
    prompt_path: str
    prompt_sha256: str
    gpu_count: int
    easyr1: Mapping[str, Any]

    def easyr1_value(self, dotted: str) -> Any:
        """The value at ``dotted`` (e.g. ``worker.rollout.n``) of the ``easyr1`` block.

        Raises:
            ReleaseFileError: the key is missing.
        """
        node: Any = self.easyr1
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise ReleaseFileError("configuration is missing a field", file=self.path, field=f"easyr1.{dotted}")
            node = node[part]
        return node


def profile_path(config_id: str) -> str:
    return f"{CONFIG_DIR}/{config_id}.yaml"


def profile_ids(release: ReleaseRoot) -> tuple[str, ...]:
    """Ids of the profile files in the release (file stems of ``rlvr/configs/*.yaml``, sorted)."""
    directory = release.file(CONFIG_DIR)
    if not directory.is_dir():
        raise ReleaseFileError("directory is missing", file=CONFIG_DIR)
    return tuple(sorted(p.stem for p in directory.glob("*.yaml") if p.is_file()))


class _Reader:
    """Typed field reads from one YAML document; a missing or mistyped field raises one clear error."""

    def __init__(self, doc: Any, file: str) -> None:
        self.doc, self.file = doc, file

    def get(self, dotted: str, kind: type | tuple[type, ...]) -> Any:
        node = self.doc
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                raise ReleaseFileError("configuration is missing a field", file=self.file, field=dotted)
            node = node[part]
        if isinstance(node, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise ReleaseFileError("wrong type", file=self.file, field=dotted, expected=_kind_name(kind), found=node)
        if not isinstance(node, kind):
            raise ReleaseFileError("wrong type", file=self.file, field=dotted, expected=_kind_name(kind), found=node)
        return node

    def strings(self, dotted: str) -> tuple[str, ...]:
        values = self.get(dotted, list)
        if not values or not all(isinstance(v, str) and v for v in values):
            raise ReleaseFileError("must be a non-empty list of strings", file=self.file, field=dotted)
        return tuple(values)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def load_profile(release: ReleaseRoot, config_id: str) -> TrainingProfile:
    """The profile ``config_id`` of ``release``.

    Raises:
        UsageError: no profile file has that id (the message lists the ids present).
        ReleaseFileError: the file is malformed or lacks a field the training workflow reads.
    """
    ids = profile_ids(release)
    if config_id not in ids:
        raise UsageError(f"unknown training profile {config_id!r}", field="--config", hint=f"choose one of: {', '.join(ids)}")
    rel = profile_path(config_id)
    doc = release.read_yaml(rel)
    if not isinstance(doc, dict):
        raise ReleaseFileError("profile must be a mapping", file=rel)
    r = _Reader(doc, rel)
    if r.get("config_id", str) != config_id:
        raise ReleaseFileError("config_id differs from the file name", file=rel, field="config_id",
                               expected=config_id, found=doc.get("config_id"))
    d = "release.dataset"
    dataset = DatasetContract(
        repo_id=r.get(f"{d}.repo_id", str),
        revision=r.get(f"{d}.revision", str),
        historical_training_revision=r.get(f"{d}.historical_training_revision", str),
        equivalence_receipt_path=r.get(f"{d}.equivalence_receipt_path", str),
        equivalence_receipt_sha256=r.get(f"{d}.equivalence_receipt_sha256", str),
        train_files=r.strings(f"{d}.train_files"),
        validation_file=r.get(f"{d}.validation_file", str),
        train_manifest=r.get(f"{d}.train_manifest", str),
        validation_manifest=r.get(f"{d}.validation_manifest", str),
        required_columns=r.strings(f"{d}.required_columns"),
        train_rows=r.get(f"{d}.train_rows", int),
        validation_rows=r.get(f"{d}.validation_rows", int),
        task_count=r.get(f"{d}.task_count", int),
        train_rows_per_task=r.get(f"{d}.train_rows_per_task", int),
        validation_rows_per_task=r.get(f"{d}.validation_rows_per_task", int),
    )
    base = BaseModel(
        repo_id=r.get("release.base_model.repo_id", str),
        revision=r.get("release.base_model.revision", str),
        required_files=r.strings("release.base_model.required_files"),
    )
    return TrainingProfile(
        config_id=config_id,
        path=rel,
        sha256=release.sha256(rel),
        selected_checkpoint_step=r.get("release.selected_checkpoint_step", int),
        base_model=base,
        released_model=(r.get("release.released_model.repo_id", str), r.get("release.released_model.revision", str)),
        dataset=dataset,
        prompt_path=r.get("release.prompt.path", str),
        prompt_sha256=r.get("release.prompt.sha256", str),
        gpu_count=r.get("release.reference_hardware.gpu_count", int),
        easyr1=_freeze(r.get("easyr1", dict)),
    )


def equivalence_file_hashes(release: ReleaseRoot, profile: TrainingProfile) -> dict[str, str]:
    """Dataset path -> the SHA-256 the reproduction files must have (the receipt's ``current.sha256``).

    Raises:
        ReleaseFileError: the receipt's hash differs from the profile's, or it lacks an entry for a profile file.
    """
    rel = profile.dataset.equivalence_receipt_path
    found = release.sha256(rel)
    if found != profile.dataset.equivalence_receipt_sha256:
        raise ReleaseFileError("dataset-equivalence receipt hash differs from the profile's", file=rel,
                               expected=profile.dataset.equivalence_receipt_sha256, found=found)
    doc = release.read_json(rel)
    hashes: dict[str, str] = {}
    for i, entry in enumerate(doc.get("parquet_files", []) if isinstance(doc, dict) else []):
        current = entry.get("current") if isinstance(entry, dict) else None
        if isinstance(current, dict) and isinstance(entry.get("path"), str) and isinstance(current.get("sha256"), str):
            hashes[entry["path"]] = current["sha256"]
        else:
            raise ReleaseFileError("entry lacks path or current.sha256", file=rel, field=f"parquet_files[{i}]")
    missing = [p for p in profile.dataset.parquet_files if p not in hashes]
    if missing:
        raise ReleaseFileError("profile files missing from the receipt", file=rel, field="parquet_files", found=missing)
    return {p: hashes[p] for p in profile.dataset.parquet_files}
