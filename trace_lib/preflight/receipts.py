"""Group ``receipts``: ``release_receipts.v1.json`` binds the canonical files, code revisions and source runs.

Upstream ``validate_release_receipts``: schema, release id, review status, immutable code revisions,
canonical-file receipts whose recorded and actual hashes agree, the Hugging Face archives that ``results.json``
names (revision, manifest and result hashes, revision-pinned tree URL), the runtime requirements receipt, the
VLMEvalKit and judge revisions, the historical-manifest exclusion and no credential references. Stricter than
upstream: the release id equals ``results.json``'s; exact copies record ``source_sha256 == sha256``; the runtime
requirements file's ``-r`` includes are exactly ``composes``; the judge equals the judge every source run recorded;
excluded historical inputs are absent from the release.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

from trace_lib.preflight import views
from trace_lib.preflight.context import DATA_PATHS, CheckContext, GroupOutcome
from trace_lib.preflight.fields import Fields, Kind, hashable, is_kind
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity

FILE = identity.RELEASE_RECEIPTS
SCHEMA = "trace_eval_release_receipts_v1"
STATUS = "reviewed_release_input_freeze"
CODE_REVISION_KEYS = ("producer", "results_consolidation", "release_freeze")
#: canonical files a receipt must bind: the inputs every reported number is computed from
REQUIRED_CANONICAL = (identity.SUITE, identity.RESULTS, identity.PROVENANCE)
EXACT_COPY = "exact"
CREDENTIAL_MARKERS = ("hf-token", "github_pat_")
ARCHIVE_TREE_URL = "https://huggingface.co/datasets/{repository}/tree/{revision}/runs/{run_id}"


def check_receipts(ctx: CheckContext, out: GroupOutcome) -> None:
    doc = ctx.read_object(FILE, out)
    if doc is None:
        return
    f = Fields(out, FILE)
    results = views.results_doc(ctx) or {}
    f.expect("schema_version", SCHEMA, doc.get("schema_version"), "unexpected release receipt schema")
    f.expect("status", STATUS, doc.get("status"), "release receipts have not been reviewed")
    release_id = f.get(doc, "release_id", kind=Kind.TEXT)
    if release_id is not None:
        f.expect("release_id", views.dig(results, "release_id"), release_id, f"differs from {identity.RESULTS}")
    revisions = _check_code_revisions(f, doc)
    n_files = _check_canonical_files(ctx, f, doc, revisions)
    n_archives = _check_archives(f, doc, results)
    _check_environment(ctx, f, doc, results)
    _check_exclusions(ctx, f, doc)
    text = json.dumps(doc, sort_keys=True).lower()
    for marker in CREDENTIAL_MARKERS:
        if marker in text:
            f.fail(None, "release receipts must not reference local credential files", found=marker)
    out.count("canonical_files", n_files)
    out.count("source_archives", n_archives)
    out.count("producer_revision", revisions.get("producer"))


def _check_code_revisions(f: Fields, doc: dict[str, Any]) -> dict[str, str]:
    block = f.get(doc, "code_revisions", kind=Kind.OBJECT)
    if block is None:
        return {}
    f.expect_keys("code_revisions", CODE_REVISION_KEYS, block, "code revision")
    revisions = {}
    for key in CODE_REVISION_KEYS:
        if key in block:
            value = f.get(block, key, "code_revisions", Kind.COMMIT)
            if value is not None:
                revisions[key] = value
    if len(set(revisions.values())) != len(revisions):
        f.fail("code_revisions", "producer, consolidation and freeze revisions must be distinct", found=revisions)
    return revisions


def _check_canonical_files(ctx: CheckContext, f: Fields, doc: dict[str, Any], revisions: dict[str, str]) -> int:
    paths: list[str] = []
    allowed_sources = {revisions.get("producer"), revisions.get("results_consolidation")} - {None}
    for i, entry in f.items(doc, "canonical_files"):
        path = entry.get("path")
        if not is_kind(path, Kind.TEXT) or not path.startswith("rlvr/"):
            f.fail(f"canonical_files[{i}].path", "must be a release path under rlvr/", found=path)
            continue
        where = f"canonical_files[{path}]"
        if path in paths:
            f.fail(where, "duplicate canonical file receipt")
            continue
        paths.append(path)
        recorded = f.get(entry, "sha256", where, Kind.SHA256)
        f.get(entry, "source_path", where, Kind.TEXT)
        source_sha = f.get(entry, "source_sha256", where, Kind.SHA256)
        if allowed_sources and hashable(entry.get("source_revision")) not in allowed_sources:
            f.fail(f"{where}.source_revision", "must be the producer or consolidation revision",
                   expected=sorted(allowed_sources), found=entry.get("source_revision"))
        if entry.get("copy_policy") == EXACT_COPY and recorded is not None and source_sha is not None:
            f.expect(f"{where}.source_sha256", recorded, source_sha, "an exact copy must keep its source hash")
        if recorded is None:
            continue
        if path not in DATA_PATHS and not ctx.exists(path):
            if ctx.needs_source(f.out, FILE, field=f"{where}.sha256"):
                f.fail(f"{where}.sha256", "canonical file is missing from the release")
            continue
        actual = ctx.sha256(path)
        if actual is None:
            f.fail(f"{where}.sha256", "canonical file is missing from the release")
        else:
            f.expect(f"{where}.sha256", actual, recorded, f"differs from the SHA-256 of {path}")
    for path in REQUIRED_CANONICAL:
        if isinstance(doc.get("canonical_files"), list) and path not in paths:
            f.fail("canonical_files", "must bind this release input", expected=path)
    return len(paths)


def _check_archives(f: Fields, doc: dict[str, Any], results: dict[str, Any]) -> int:
    artifacts = {hashable(a.get("run_id")): a for a in results.get("source_artifacts", []) if isinstance(a, dict)} \
        if isinstance(results.get("source_artifacts"), list) else {}
    seen: list[str] = []
    for i, archive in f.items(doc, "hugging_face_source_archives"):
        run_id = archive.get("run_id")
        if not is_kind(run_id, Kind.TEXT):
            f.fail(f"hugging_face_source_archives[{i}].run_id", "must be a non-empty string", found=run_id)
            continue
        where = f"hugging_face_source_archives[{run_id}]"
        if run_id in seen:
            f.fail(where, "duplicate archive")
            continue
        seen.append(run_id)
        repository = f.get(archive, "repository_id", where, Kind.TEXT)
        revision = f.get(archive, "revision", where, Kind.COMMIT)
        f.get(archive, "manifest_sha256", where, Kind.SHA256)
        f.get(archive, "result_sha256", where, Kind.SHA256)
        if repository is not None and revision is not None:
            url = ARCHIVE_TREE_URL.format(repository=repository, revision=revision, run_id=run_id)
            f.expect(f"{where}.immutable_tree_url", url, archive.get("immutable_tree_url"),
                     "archive URL is not the revision-pinned tree of this run")
        artifact = artifacts.get(run_id)
        if artifact is None:
            continue
        for mine, theirs in (("repository_id", "repository_id"), ("revision", "repository_revision"),
                             ("manifest_sha256", "manifest_sha256"), ("result_sha256", "result_sha256")):
            f.expect(f"{where}.{mine}", artifact.get(theirs), archive.get(mine),
                     f"differs from {identity.RESULTS} source_artifacts[{run_id}].{theirs}")
    if artifacts and isinstance(doc.get("hugging_face_source_archives"), list):
        f.expect_keys("hugging_face_source_archives[*].run_id", [k for k in artifacts if isinstance(k, str)], seen,
                      f"archive of a {identity.RESULTS} source run")
    return len(seen)


def _check_environment(ctx: CheckContext, f: Fields, doc: dict[str, Any], results: dict[str, Any]) -> None:
    env = f.get(doc, "evaluation_environment", kind=Kind.OBJECT)
    if env is None:
        return
    where = "evaluation_environment"
    path = f.get(env, "requirements_path", where, Kind.TEXT)
    recorded = f.get(env, "requirements_sha256", where, Kind.SHA256)
    composes = f.get(env, "composes", where, Kind.LIST)
    if path is not None:
        actual = ctx.sha256(path)
        if actual is None:
            f.fail(f"{where}.requirements_path", "runtime requirements file is missing", found=path)
        elif recorded is not None:
            f.expect(f"{where}.requirements_sha256", actual, recorded, f"differs from the SHA-256 of {path}")
        if actual is not None and composes is not None:
            includes = _requirement_includes(ctx, path)
            f.expect(f"{where}.composes", sorted(includes), sorted(c for c in composes if isinstance(c, str)),
                     f"differs from the -r includes of {path}")
    for item in composes or []:
        if not (isinstance(item, str) and ctx.exists(item)):
            f.fail(f"{where}.composes", "composed requirements file is missing", found=item)
    suite_doc = _suite(ctx)
    vlm = f.get(env, "vlmevalkit", where, Kind.OBJECT)
    if vlm is not None:
        for mine, theirs in (("revision", "commit"), ("repository", "repository")):
            f.expect(f"{where}.vlmevalkit.{mine}", views.dig(suite_doc, f"vlmevalkit.{theirs}"), vlm.get(mine),
                     f"differs from {identity.SUITE} vlmevalkit.{theirs}")
    judge = f.get(env, "judge", where, Kind.OBJECT)
    if judge is None:
        return
    model_id = f.get(judge, "model_id", f"{where}.judge", Kind.TEXT)
    revision = f.get(judge, "revision", f"{where}.judge", Kind.COMMIT)
    if model_id is None or revision is None:
        return
    for artifact in results.get("source_artifacts", []) if isinstance(results.get("source_artifacts"), list) else []:
        meta = artifact.get("run_metadata") if isinstance(artifact, dict) else None
        run_judge = meta.get("judge_model") if isinstance(meta, dict) else None
        if isinstance(run_judge, dict):
            found = [run_judge.get("model_id"), run_judge.get("model_revision")]
            f.expect(f"{where}.judge", [model_id, revision], found,
                     f"differs from the judge source run {artifact.get('run_id')} recorded")


def _requirement_includes(ctx: CheckContext, path: str) -> list[str]:
    """Release paths a requirements file includes with ``-r`` (resolved against its directory)."""
    base = PurePosixPath(path).parent
    includes = []
    for line in ctx.release.read_bytes(path).decode("utf-8", "replace").splitlines():
        parts = line.split("#", 1)[0].split()
        if len(parts) == 2 and parts[0] in ("-r", "--requirement"):
            resolved: list[str] = []
            for part in (base / parts[1]).parts:
                if part == "..":
                    resolved = resolved[:-1]
                elif part != ".":
                    resolved.append(part)
            includes.append("/".join(resolved))
    return includes


def _check_exclusions(ctx: CheckContext, f: Fields, doc: dict[str, Any]) -> None:
    entries = f.items(doc, "historical_exclusions")
    if isinstance(doc.get("historical_exclusions"), list) and not entries:
        f.fail("historical_exclusions", "must record the historical inputs excluded from the release")
    for i, entry in entries:
        path = f.get(entry, "path", f"historical_exclusions[{i}]", Kind.TEXT)
        where = f"historical_exclusions[{path}]" if path else f"historical_exclusions[{i}]"
        f.expect(f"{where}.is_release_input", False, entry.get("is_release_input"),
                 "an excluded historical file must not be a release input")
        if path is not None and ctx.exists(path):
            f.fail(where, "excluded historical file is present in the release")


def _suite(ctx: CheckContext) -> dict[str, Any] | None:
    suite = views.suite_view(ctx)
    return ctx.release.read_json(identity.SUITE) if suite is not None else None


GROUP = CheckGroup(
    "receipts",
    "release receipts: canonical-file hashes, code revisions, source archives = results.json, environment",
    check_receipts,
)
