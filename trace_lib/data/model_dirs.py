"""Model directories: pinned snapshot downloads, local registration, and the revision marker that binds them.

A prepared directory holds the checkpoint files plus ``.trace_model_revision.json`` in upstream's marker format
(eval-campaign spec §1.3: canonical JSON with ``schema_version "trace-model-revision-v1"``, ``slug``,
``source``, ``immutable_revision``, ``model_origin``, ``file_count``, ``file_sha256``, ``registered_at`` and, for
downloads, ``resolved_commit``) and our ``content_revision`` (``sha256set:<hex>`` = SHA-256 of the canonical
JSON of the ``{relative path: sha256}`` map; excluded: the marker, ``.trace_model_revision.*`` files and any
``.cache`` path component). ``verify_model_dir`` re-checks shape, marker identity and (deep) every file hash.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_lib.atomic import write_text_atomic
from trace_lib.data.hub_access import EndpointCheck, hub_access, hub_client
from trace_lib.data.rowhash import canonical_sha256
from trace_lib.decoding import read_text
from trace_lib.errors import InputError
from trace_lib.jsonio import canonical_json_ascii
from trace_lib.outputs import not_regular
from trace_lib.release.load import sha256_file

if TYPE_CHECKING:
    from trace_lib.slices import ModelDescriptor

MARKER_NAME = ".trace_model_revision.json"
MARKER_SCHEMA = "trace-model-revision-v1"


def _is_excluded(rel: Path) -> bool:
    return rel.name == MARKER_NAME or rel.name.startswith(".trace_model_revision.") or ".cache" in rel.parts


def file_hashes(directory: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every file of ``directory`` (marker and ``.cache`` excluded)."""
    directory = Path(directory)
    out = {}
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        if path.is_file() and not _is_excluded(rel):
            out[rel.as_posix()] = sha256_file(path)
    return out


def content_revision(hashes: dict[str, str]) -> str:
    """``sha256set:<hex>`` of a ``{relative path: sha256}`` map."""
    return f"sha256set:{canonical_sha256(hashes)}"


@dataclass(frozen=True)
class ModelDirReport:
    """Everything wrong with a model directory for a descriptor (``ok`` when nothing is)."""

    path: Path
    problems: tuple[str, ...]
    content_revision: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def _write_marker(directory: Path, marker: dict[str, Any]) -> None:
    # the temp name (.trace_model_revision.json.<random>.incomplete) is excluded from hashing like the marker
    write_text_atomic(directory / MARKER_NAME, canonical_json_ascii(marker), encoding="ascii")


def _marker(slug: str, source: str, immutable: str, origin: str, hashes: dict[str, str],
            resolved_commit: str | None) -> dict[str, Any]:
    marker: dict[str, Any] = {
        "schema_version": MARKER_SCHEMA, "slug": slug, "source": source, "immutable_revision": immutable,
        "model_origin": origin, "file_count": len(hashes), "file_sha256": hashes,
        "registered_at": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "content_revision": content_revision(hashes),
    }
    if resolved_commit:
        marker["resolved_commit"] = resolved_commit
    return marker


def local_model_problems(directory: Path) -> list[str]:
    """What keeps ``directory`` from being loaded as a local checkpoint without reaching a hub or blocking: it is a
    directory, its ``config.json`` a regular file (a missing one sends transformers to the Hub) and so is every other
    file in it (a FIFO, a tokenizer file say, would block the loader for ever; a dangling link would fail it; a
    registered revision would leave it out). Checked even under ``--model-verify none``."""
    if not directory.is_dir():
        return [f"{directory}: model directory is missing (run 'trace-repro prepare-models' or pass --model with "
                "the right LOCAL_PATH)"]
    config = directory / "config.json"
    if not config.is_file():
        problem = not_regular(config)
        return [f"{config}: {problem}" if problem else f"{directory}: config.json is missing"]
    return [f"{path}: {problem}" for path in sorted(directory.rglob("*"))
            if not path.is_dir() and not _is_excluded(path.relative_to(directory))
            and (problem := not_regular(path)) is not None]


def _check_shape(directory: Path) -> list[str]:
    problems = local_model_problems(directory)
    weights = [p for p in directory.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file()]
    if not weights:
        problems.append(f"{directory}: no top-level *.safetensors or *.bin file")
    problems += [f"{p}: empty weight file" for p in weights if p.stat().st_size == 0]
    return problems


def download_model(descriptor: ModelDescriptor, *, hub: Any = None, token: str | None = None,
                   check: EndpointCheck | None = None) -> ModelDirReport:
    """Download ``descriptor.source`` at its commit into ``descriptor.local_path`` and write the marker.

    The commit must resolve to itself (``model_info(repo, revision).sha``); the local file set must equal the
    repository's; every file is hashed. The directory is filled in a sibling ``.incomplete`` directory and moved
    into place at the end. ``token`` defaults to huggingface_hub's standard resolution (``HF_TOKEN``, login).
    ``hub`` defaults to ``huggingface_hub``'s client for ``check``'s endpoint, reached before the first request
    (:func:`~trace_lib.data.hub_access.hub_client`; pass one check for a whole command).

    Raises:
        InputError: the endpoint refused or accepted no connection, the revision does not resolve to itself, the
            file set differs, or the target exists.
    """
    hub, check = hub_client(hub, check)
    dest = Path(descriptor.local_path)
    repo, revision = descriptor.repository, descriptor.repository_revision

    with hub_access(descriptor.source):
        check.ensure()
        info = hub.model_info(repo, revision=revision, token=token, files_metadata=False)
    if info.sha != revision:
        raise InputError("revision does not resolve to itself", field=f"{descriptor.slug}.source",
                         expected=revision, found=info.sha)
    expected_files = sorted(s.rfilename for s in info.siblings)
    if dest.exists() and any(dest.iterdir()):
        raise InputError("model directory is not empty", file=str(dest),
                         hint="verify it with 'trace-repro prepare-models --verify-only' or remove it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".incomplete", dir=dest.parent))
    try:
        with hub_access(descriptor.source):
            hub.snapshot_download(repo_id=repo, revision=revision, local_dir=str(staging), token=token)
        hashes = file_hashes(staging)
        if sorted(hashes) != expected_files:
            missing = sorted(set(expected_files) - set(hashes))
            extra = sorted(set(hashes) - set(expected_files))
            raise InputError("downloaded file set differs from the repository", field=f"{descriptor.slug}",
                             expected="missing none, extra none", found=f"missing {missing}, extra {extra}")
        _write_marker(staging, _marker(descriptor.slug, descriptor.source, revision, "public_download", hashes,
                                       revision))
        if dest.exists():
            dest.rmdir()
        os.replace(staging, dest)
    except BaseException:
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ModelDirReport(dest, (), content_revision(hashes))


def register_local(directory: Path, *, slug: str, source: str) -> str:
    """Hash a local checkpoint directory (e.g. a merged TRACE checkpoint), write its marker, return its
    ``sha256set:`` revision -- the ``IMMUTABLE_REVISION`` to pass in ``--model``.

    Raises:
        InputError: not a model directory (no config.json or weights).
    """
    directory = Path(directory)
    problems = _check_shape(directory) if directory.is_dir() else [f"{directory}: no such directory"]
    if problems:
        raise InputError(problems[0])
    hashes = file_hashes(directory)
    revision = content_revision(hashes)
    _write_marker(directory, _marker(slug, source, revision, "local_registration", hashes, None))
    return revision


def verify_model_dir(descriptor: ModelDescriptor, *, deep: bool = True) -> ModelDirReport:
    """Check a model directory against its descriptor; returns every problem (never raises for bad content)."""
    directory = Path(descriptor.local_path)
    if not directory.is_dir():
        return ModelDirReport(directory, tuple(local_model_problems(directory)))
    problems = _check_shape(directory)
    marker_path = directory / MARKER_NAME
    try:
        marker = json.loads(read_text(marker_path))
    except FileNotFoundError:
        return ModelDirReport(directory, (*problems, f"{marker_path}: revision marker is missing"))
    except InputError as exc:  # not UTF-8 (byte offset named)
        return ModelDirReport(directory, (*problems, exc.render()))
    except ValueError:
        return ModelDirReport(directory, (*problems, f"{marker_path}: marker is not JSON"))
    if not isinstance(marker, dict):
        return ModelDirReport(directory, (*problems, f"{marker_path}: marker is not a JSON object"))
    if marker.get("schema_version") != MARKER_SCHEMA:
        problems.append(f"{marker_path}: schema_version (expected {MARKER_SCHEMA!r}, found "
                        f"{marker.get('schema_version')!r})")
    if marker.get("slug") != descriptor.slug:
        problems.append(f"{marker_path}: slug (expected {descriptor.slug!r}, found {marker.get('slug')!r})")
    if marker.get("immutable_revision") != descriptor.revision:
        problems.append(f"{marker_path}: immutable_revision (expected {descriptor.revision!r}, found "
                        f"{marker.get('immutable_revision')!r})")
    resolved = marker.get("resolved_commit")
    if (marker.get("model_origin") == "public_download" or resolved) and resolved != descriptor.revision:
        problems.append(f"{marker_path}: resolved_commit (expected {descriptor.revision!r}, found {resolved!r})")
    current = None
    if deep:
        hashes = file_hashes(directory)
        current = content_revision(hashes)
        recorded = marker.get("file_sha256") or {}
        if not isinstance(recorded, dict):
            return ModelDirReport(directory, (*problems, f"{marker_path}: file_sha256 is not an object"), current)
        if sorted(hashes) != sorted(recorded):
            problems.append(f"{directory}: file set changed (missing {sorted(set(recorded) - set(hashes))}, "
                            f"extra {sorted(set(hashes) - set(recorded))})")
        changed = sorted(p for p in hashes if p in recorded and recorded[p] != hashes[p])
        if changed:
            problems.append(f"{directory}: content changed: {', '.join(changed[:5])}")
        if marker.get("file_count") != len(recorded):
            problems.append(f"{marker_path}: file_count differs from file_sha256")
    return ModelDirReport(directory, tuple(problems), current)
