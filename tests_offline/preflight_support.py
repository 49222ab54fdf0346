"""Helpers the preflight tests share: writable data-only copies of the release under test, in-place edits, and a
synthetic full checkout (placeholder source files, manifests re-hashed) for the source-dependent checks.

Everything is built at test time from the release the session points at; nothing here stores release content.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Callable

import yaml

from trace_lib.preflight.context import DATA_PATHS
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot


def copy_data_files(release: ReleaseRoot, dest: Path) -> Path:
    """Copy the release's canonical data files into ``dest`` (a data-only release root) and return ``dest``."""
    for rel in sorted(DATA_PATHS):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(release.file(rel), target)
    return dest


def edit_json(root: Path, rel: str, change: Callable[[Any], Any]) -> None:
    """Apply ``change`` to the parsed JSON of ``root/rel`` (in place, or its return value) and write it back."""
    path = root / rel
    doc = json.loads(path.read_text(encoding="utf-8"))
    result = change(doc)
    path.write_text(json.dumps(doc if result is None else result, indent=2) + "\n", encoding="utf-8")


def edit_yaml(root: Path, rel: str, change: Callable[[Any], Any]) -> None:
    path = root / rel
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


VENDOR = "rlvr/easyr1_backend/VENDOR_MANIFEST.v1.json"


def build_synthetic_checkout(root: Path) -> Path:
    """Turn a data-only copy into a consistent *unpinned* full checkout: every source file the manifests list is
    written as a placeholder, and every hash that binds it (release files, exact copies, canonical receipts, vendor
    manifest) is re-recorded. The result passes ``check --unpinned`` with source files present."""
    listed = json.loads((root / identity.RELEASE_FILES).read_text())["files"]
    sources = [f"rlvr/{e['path']}" for e in listed if f"rlvr/{e['path']}" not in DATA_PATHS and
               f"rlvr/{e['path']}" != VENDOR]
    for rel in sources:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"placeholder for {rel}\n", encoding="utf-8")
    source_map = json.loads((root / identity.SOURCE_MAP).read_text())
    runtime = source_map["release_inputs"]["vendored_runtime"]
    profile = yaml.safe_load((root / identity.PROFILE_3B).read_text())
    verl = sorted(r.removeprefix("rlvr/easyr1_backend/") for r in sources if r.startswith("rlvr/easyr1_backend/verl/"))
    vendor = {
        "schema_version": "trace-easyr1-vendor-manifest-v1",
        "upstream_repository": runtime["upstream_repository"],
        "upstream_revision": runtime["upstream_revision"],
        "internal_source_revision": profile["release"]["source_revision"],
        "license": runtime["license"],
        "license_path": "rlvr/easyr1_backend/LICENSE",
        "files": [{"path": p, "disposition": "public_answer_only_adaptation",
                   "public_sha256": _sha(root / "rlvr/easyr1_backend" / p), "source_sha256": "0" * 64} for p in verl],
    }
    runtime["verl_file_count"] = len(verl)
    (root / VENDOR).write_text(json.dumps(vendor, indent=2) + "\n", encoding="utf-8")

    def receipts(doc: dict) -> None:
        for entry in doc["canonical_files"]:
            entry["sha256"] = _sha(root / entry["path"])

    edit_json(root, identity.RELEASE_RECEIPTS, receipts)
    for entry in source_map["files"]:
        if entry["review_status"] == "approved_exact_copy":
            entry["source_sha256"] = _sha(root / entry["destination_path"])
    (root / identity.SOURCE_MAP).write_text(json.dumps(source_map, indent=2) + "\n", encoding="utf-8")

    def release_files(doc: dict) -> None:
        for entry in doc["files"]:
            entry["sha256"] = _sha(root / "rlvr" / entry["path"])
        doc["canonical_evaluation"]["source_map_sha256"] = _sha(root / identity.SOURCE_MAP)

    edit_json(root, identity.RELEASE_FILES, release_files)
    return root


def rehash_listed(root: Path, rel: str) -> None:
    """Re-record ``rel``'s SHA-256 in ``release_files.v1.json`` (a consistent edit of an unpinned release)."""
    def change(doc: dict) -> None:
        for entry in doc["files"]:
            if f"rlvr/{entry['path']}" == rel:
                entry["sha256"] = _sha(root / rel)

    edit_json(root, identity.RELEASE_FILES, change)
