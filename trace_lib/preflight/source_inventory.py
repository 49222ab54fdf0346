"""Group ``source_inventory``: the release-file manifest and the vendored EasyR1 manifest match the tree.

Upstream ``train.py check``: ``release_files.v1.json`` schema, dataset-release and TRACE-validation
identities, a file list equal to every file under ``rlvr/`` with matching hashes; ``VENDOR_MANIFEST.v1.json``
schema, revisions, 64 ``verl/`` files with matching hashes equal to the vendored ``*.py`` set, disposition counts.
Here the identity blocks must equal what they describe (actual hashes, the equivalence receipt, the validation
files, release receipts, profiles, the source map's training receipts and vendored runtime), the listed files
must equal the source map's destinations + public-authored files, and listed data files are always hashed.
Source files (and the vendor manifest, which lives beside the vendored code) are checked only in a checkout;
byte-code and hidden work directories (``rlvr/evaluation/.work/``) are ignored, unlike upstream.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from trace_lib.preflight import views
from trace_lib.preflight.context import DATA_PATHS, CheckContext, GroupOutcome
from trace_lib.preflight.fields import Fields, Kind, hashable, is_kind
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity

FILE = identity.RELEASE_FILES
SCHEMA = "trace-rlvr-release-files-v1"
VENDOR = "rlvr/easyr1_backend/VENDOR_MANIFEST.v1.json"
VENDOR_ROOT = "rlvr/easyr1_backend"
VENDOR_SCHEMA = "trace-easyr1-vendor-manifest-v1"
DISPOSITIONS = frozenset({"upstream_exact", "internal_runtime_patch", "public_answer_only_adaptation"})
UPSTREAM_EXACT = "upstream_exact"


def check_source_inventory(ctx: CheckContext, out: GroupOutcome) -> None:
    doc = ctx.read_object(FILE, out)
    if doc is not None:
        _check_release_files(ctx, Fields(out, FILE), doc)
    _check_vendor(ctx, out)


def _check_release_files(ctx: CheckContext, f: Fields, doc: dict[str, Any]) -> None:
    f.expect("schema_version", SCHEMA, doc.get("schema_version"), "unexpected release-file manifest schema")
    f.expect("policy", "default_deny", doc.get("policy"), "the release-file allowlist must be default-deny")
    _check_identities(ctx, f, doc)
    listed: dict[str, Any] = {}
    for i, entry in f.items(doc, "files"):
        path = entry.get("path")
        unsafe = not is_kind(path, Kind.TEXT) or path.startswith(("/", "rlvr/")) or ".." in path.split("/")
        if unsafe:
            f.fail(f"files[{i}].path", "must be a path relative to rlvr/", found=path)
            continue
        if path in listed:
            f.fail(f"files[{path}]", "duplicate file")
            continue
        listed[path] = entry
        f.get(entry, "sha256", f"files[{path}]", Kind.SHA256)
    release_paths = {f"rlvr/{p}" for p in listed}
    if FILE in release_paths:
        f.fail(f"files[{FILE.removeprefix('rlvr/')}]", "the manifest cannot list itself")
    source_map = views.document(ctx, identity.SOURCE_MAP)
    if source_map is not None:
        f.expect("public_release_base", source_map.get("public_base"), doc.get("public_release_base"),
                 f"differs from {identity.SOURCE_MAP} public_base")
        mapped = {hashable(e.get("destination_path")) for e in _list(source_map, "files") if isinstance(e, dict)} | \
                 {hashable(e.get("path")) for e in _list(source_map, "public_authored_files") if isinstance(e, dict)}
        mapped.discard(FILE)
        for path in sorted(p for p in mapped - release_paths if isinstance(p, str)):
            f.fail("files", f"file of {identity.SOURCE_MAP} is not listed", expected=path.removeprefix("rlvr/"))
        for path in sorted(release_paths - mapped):
            f.fail("files", f"listed file is not in {identity.SOURCE_MAP}", found=path.removeprefix("rlvr/"))
    for path in sorted(DATA_PATHS - release_paths - {FILE}):
        f.fail("files", "release data file is not listed", expected=path.removeprefix("rlvr/"))
    hashed = 0
    for path, entry in listed.items():
        if f"rlvr/{path}" in DATA_PATHS:
            hashed += _check_hash(ctx, f, path, entry)
    f.out.count("files_listed", len(listed))
    if not ctx.needs_source(f.out, FILE, field="files[*].sha256 (source files)"):
        f.out.count("files_hashed", hashed)
        return
    for path, entry in listed.items():
        if f"rlvr/{path}" not in DATA_PATHS:
            hashed += _check_hash(ctx, f, path, entry)
    tree, ignored = views.tree_files(ctx)
    for path in sorted(set(tree) - release_paths - {FILE}):
        f.fail("files", "file under rlvr/ is not in the release-file manifest", found=path)
    f.out.count("files_hashed", hashed)
    f.out.count("ignored_work_files", len(ignored))


def _list(doc: dict[str, Any], key: str) -> list[Any]:
    value = doc.get(key)
    return value if isinstance(value, list) else []


def _check_hash(ctx: CheckContext, f: Fields, path: str, entry: dict[str, Any]) -> int:
    actual = ctx.sha256(f"rlvr/{path}")
    if actual is None:
        f.fail(f"files[{path}]", "listed release file is missing")
        return 0
    f.expect(f"files[{path}].sha256", actual, entry.get("sha256"), f"differs from the SHA-256 of rlvr/{path}")
    return 1


def _check_identities(ctx: CheckContext, f: Fields, doc: dict[str, Any]) -> None:
    equivalence = views.document(ctx, identity.DATASET_EQUIVALENCE)
    profile = next(iter(views.profiles(ctx).values()), None)
    dataset = f.get(doc, "dataset_release", kind=Kind.OBJECT)
    if dataset is not None:
        expected = {
            "equivalence_receipt": {"path": identity.DATASET_EQUIVALENCE,
                                    "sha256": views.digest(ctx, identity.DATASET_EQUIVALENCE)},
            "historical_training_revision": views.dig(equivalence, "original_training_revision"),
            "reproduction_dataset_revision": views.dig(profile, "release.dataset.revision"),
            "repository_id": views.dig(profile, "release.dataset.repo_id"),
        }
        for name, value in expected.items():
            f.expect(f"dataset_release.{name}", value, dataset.get(name), "dataset release identity is stale")
        f.get(dataset, "release_tag", "dataset_release", Kind.TEXT)
    suite = views.document(ctx, identity.VALIDATION_SUITE)
    results = views.document(ctx, identity.VALIDATION_RESULTS)
    receipt = views.document(ctx, identity.VALIDATION_RECEIPT)
    _expect_block(f, doc, "canonical_trace_validation", {
        "evaluation_harness_revision": views.dig(receipt, "source_execution.evaluation_harness_revision"),
        "results_sha256": views.digest(ctx, identity.VALIDATION_RESULTS),
        "source_revision": views.dig(results, "source.dataset_revision"),
        "suite_id": views.dig(suite, "suite_id"),
        "suite_sha256": views.digest(ctx, identity.VALIDATION_SUITE),
    })
    receipts = views.document(ctx, identity.RELEASE_RECEIPTS)
    _expect_block(f, doc, "canonical_evaluation", {
        "producer_revision": views.dig(receipts, "code_revisions.producer"),
        "release_freeze_revision": views.dig(receipts, "code_revisions.release_freeze"),
        "results_consolidation_revision": views.dig(receipts, "code_revisions.results_consolidation"),
        "results_sha256": views.digest(ctx, identity.RESULTS),
        "source_map_sha256": views.digest(ctx, identity.SOURCE_MAP),
        "suite_id": views.dig(views.document(ctx, identity.SUITE), "suite_id"),
    })
    training = views.dig(views.document(ctx, identity.SOURCE_MAP), "release_inputs.training_receipts")
    _expect_block(f, doc, "internal_freeze_receipts", {
        "configs_sha256": views.dig(training, "resolved_configs.sha256"),
        "environments_sha256": views.dig(training, "environments.sha256"),
    })


def _expect_block(f: Fields, doc: dict[str, Any], name: str, expected: dict[str, Any]) -> None:
    block = f.get(doc, name, kind=Kind.OBJECT)
    if block is None:
        return
    for key, value in expected.items():
        f.expect(f"{name}.{key}", value, block.get(key), f"{name} is stale")


def _check_vendor(ctx: CheckContext, out: GroupOutcome) -> None:
    if not ctx.exists(VENDOR):
        if ctx.source_present:
            out.fail(VENDOR, "file is missing")
        else:
            ctx.needs_source(out, VENDOR)
        return
    doc = ctx.read_object(VENDOR, out)
    if doc is None:
        return
    f = Fields(out, VENDOR)
    f.expect("schema_version", VENDOR_SCHEMA, doc.get("schema_version"), "unexpected EasyR1 vendor manifest schema")
    runtime = views.dig(views.document(ctx, identity.SOURCE_MAP), "release_inputs.vendored_runtime")
    for mine, theirs in (("upstream_revision", "upstream_revision"), ("upstream_repository", "upstream_repository"),
                         ("internal_source_revision", "internal_source_revision"), ("license", "license")):
        f.expect(mine, views.dig(runtime, theirs), doc.get(mine),
                 f"differs from {identity.SOURCE_MAP} release_inputs.vendored_runtime.{theirs}")
    f.get(doc, "upstream_revision", kind=Kind.COMMIT)
    revisions = {str(views.dig(p, "release.source_revision")) for p in views.profiles(ctx).values()}
    if revisions and hashable(doc.get("internal_source_revision")) not in revisions:
        f.fail("internal_source_revision", "is not a training profile's source revision",
               expected=sorted(revisions), found=doc.get("internal_source_revision"))
    license_path = doc.get("license_path")
    if not (isinstance(license_path, str) and ctx.exists(license_path)):
        f.fail("license_path", "vendored license file is missing", found=license_path)
    paths: list[str] = []
    dispositions: Counter[str] = Counter()
    for i, entry in f.items(doc, "files"):
        path = entry.get("path")
        if not (is_kind(path, Kind.TEXT) and path.startswith("verl/") and ".." not in path.split("/")):
            f.fail(f"files[{i}].path", "invalid vendored path", expected="verl/...", found=path)
            continue
        where = f"files[{path}]"
        if path in paths:
            f.fail(where, "duplicate vendored file")
            continue
        paths.append(path)
        disposition = entry.get("disposition")
        dispositions[str(disposition)] += 1
        if hashable(disposition) not in DISPOSITIONS:
            f.fail(f"{where}.disposition", "unknown disposition", expected=sorted(DISPOSITIONS), found=disposition)
        public = f.get(entry, "public_sha256", where, Kind.SHA256)
        if disposition == UPSTREAM_EXACT:
            f.expect(f"{where}.source_sha256", public, entry.get("source_sha256"),
                     "an upstream-exact file must keep its upstream hash")
        actual = ctx.sha256(f"{VENDOR_ROOT}/{path}")
        if actual is None:
            f.fail(where, "vendored file is missing")
        elif public is not None:
            f.expect(f"{where}.public_sha256", actual, public, f"differs from the SHA-256 of {VENDOR_ROOT}/{path}")
    f.expect("files", views.dig(runtime, "verl_file_count"), len(paths),
             f"file count differs from {identity.SOURCE_MAP} vendored_runtime.verl_file_count")
    on_disk = sorted(p.relative_to(ctx.release.file(VENDOR_ROOT)).as_posix()
                     for p in ctx.release.file(f"{VENDOR_ROOT}/verl").rglob("*.py") if "__pycache__" not in p.parts)
    f.expect_keys("files[*].path", paths, on_disk, "vendored verl/*.py file")
    out.count("vendored_files", len(paths))
    out.count("dispositions", dict(sorted(dispositions.items())))


GROUP = CheckGroup(
    "source_inventory",
    "release-file manifest = source map = tree with matching hashes; vendored EasyR1 manifest (needs source)",
    check_source_inventory,
)
