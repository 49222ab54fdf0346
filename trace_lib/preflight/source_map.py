"""Group ``source_map``: the reviewed source map covers the release and its release inputs are current.

Upstream ``validate_source_map``: schema, reviewed status, default-deny policy, review receipt, unique
``rlvr/`` destinations with reviewed statuses and immutable source revisions and hashes, mapped files present
with exact copies byte-identical, the runtime-closure and TRACE-validation mappings, the validation review
receipt, counts, the dataset, training and validation release inputs, the public-authored boundary and tree
coverage. Upstream pins the receipt, counts and inputs as literals (here: group ``identity``); here they are
recomputed or cross-checked: counts from the rows, the review receipt's set and projection hashes from the
rows, every release input against the file it describes (actual hashes, the dataset receipt, the validation
suite/results/receipt, release receipts, training profiles). File existence, exact-copy hashes and tree
coverage need source files (``not checked`` on a data-only copy); files in hidden work directories are ignored.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from trace_lib.preflight import views
from trace_lib.preflight.context import DATA_PATHS, CheckContext, GroupOutcome
from trace_lib.preflight.fields import Fields, Kind, hashable, is_kind
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity

FILE = identity.SOURCE_MAP
SCHEMA = "trace-rlvr-public-file-manifest-v1"
STATUS = "reviewed_public_curation"
EXACT = "approved_exact_copy"
ADAPTED = "approved_for_public_adaptation"
REVIEW_STATUSES = (EXACT, ADAPTED)
CLOSURE_COMPONENT = "trace_eval_v1_runtime_closure"
VALIDATION_DIR = "rlvr/evaluation/trace_validation/"
#: reviewed together with the TRACE-validation destinations (upstream validate_release_inputs.py)
VALIDATION_REVIEW_EXTRA = (
    "rlvr/evaluation/scripts/prepare_trace_eval_models.py",
    "rlvr/evaluation/scripts/validate_release_inputs.py",
    "rlvr/evaluation/tests/test_release_inputs.py",
    "rlvr/train.py",
)
PROJECTION_FIELDS = ("destination_path", "source_path", "source_revision", "source_sha256", "review_status")
VALIDATION_REVIEW_STATUS = "reviewed_public_adaptation"


def check_source_map(ctx: CheckContext, out: GroupOutcome) -> None:
    doc = ctx.read_object(FILE, out)
    if doc is None:
        return
    f = Fields(out, FILE)
    f.expect("schema_version", SCHEMA, doc.get("schema_version"), "unexpected source-map schema")
    f.expect("status", STATUS, doc.get("status"), "source map is not a reviewed public curation")
    f.expect("review_policy.default", "deny", views.dig(doc, "review_policy.default"),
             "review policy must default to deny")
    receipts = views.document(ctx, identity.RELEASE_RECEIPTS) or {}
    review = f.get(doc, "source_review_receipt", kind=Kind.OBJECT)
    if review is not None:
        revision = f.get(review, "internal_manifest_revision", "source_review_receipt", Kind.COMMIT)
        f.get(review, "internal_manifest_sha256", "source_review_receipt", Kind.SHA256)
        freeze = views.dig(receipts, "code_revisions.release_freeze")
        if revision is not None and freeze is not None:
            f.expect("source_review_receipt.internal_manifest_revision", freeze, revision,
                     f"differs from {identity.RELEASE_RECEIPTS} code_revisions.release_freeze")
    rows = _check_rows(ctx, f, doc, receipts)
    statuses = Counter(hashable(r.get("review_status")) for r in rows.values())
    counts = {"exact_copy": statuses[EXACT], "files": len(rows), "public_adaptation": statuses[ADAPTED]}
    f.expect("counts", counts, doc.get("counts"), "differs from the counts of the mapping rows")
    _check_validation_review(ctx, f, doc, rows)
    authored = _check_public_authored(f, doc, rows)
    _check_release_inputs(ctx, f, doc, receipts)
    _check_tree(ctx, f, set(rows) | authored, rows)
    out.count("files", len(rows))
    out.count("exact_copy", counts["exact_copy"])
    out.count("public_adaptation", counts["public_adaptation"])
    out.count("public_authored", len(authored))


def _check_rows(ctx: CheckContext, f: Fields, doc: dict[str, Any], receipts: dict[str, Any]) -> dict[str, dict]:
    rows: dict[str, dict[str, Any]] = {}
    producer = views.dig(receipts, "code_revisions.producer")
    closure = 0
    for i, entry in f.items(doc, "files"):
        dest = entry.get("destination_path")
        if not (is_kind(dest, Kind.TEXT) and dest.startswith("rlvr/")):
            f.fail(f"files[{i}].destination_path", "must be a release path under rlvr/", found=dest)
            continue
        where = f"files[{dest}]"
        if dest in rows:
            f.fail(where, "duplicate destination")
            continue
        rows[dest] = entry
        if entry.get("review_status") not in REVIEW_STATUSES:
            f.fail(f"{where}.review_status", "unreviewed source-map entry", expected=list(REVIEW_STATUSES),
                   found=entry.get("review_status"))
        f.get(entry, "source_path", where, Kind.TEXT)
        f.get(entry, "source_revision", where, Kind.COMMIT)
        f.get(entry, "source_sha256", where, Kind.SHA256)
        if dest.startswith(VALIDATION_DIR) and entry.get("review_status") != ADAPTED:
            f.fail(f"{where}.review_status", "TRACE-validation files must be reviewed public adaptations",
                   expected=ADAPTED, found=entry.get("review_status"))
        if entry.get("component") == CLOSURE_COMPONENT:
            closure += 1
            if producer is not None:
                f.expect(f"{where}.source_revision", producer, entry.get("source_revision"),
                         "runtime closure is not bound to the producer revision")
    if rows and not closure:
        f.fail("files", "no entry binds the evaluation runtime closure", expected=f"component {CLOSURE_COMPONENT!r}")
    for path in (identity.VALIDATION_SUITE, identity.VALIDATION_RESULTS, identity.VALIDATION_RECEIPT):
        if rows and path not in rows:
            f.fail("files", "TRACE-validation release file is not mapped", expected=path)
    return rows


def _check_validation_review(ctx: CheckContext, f: Fields, doc: dict[str, Any], rows: dict[str, dict]) -> None:
    receipt = f.get(doc, "trace_validation_review_receipt", kind=Kind.OBJECT)
    if receipt is None:
        return
    where = "trace_validation_review_receipt"
    f.expect(f"{where}.status", VALIDATION_REVIEW_STATUS, receipt.get("status"), "validation review is not complete")
    f.get(receipt, "documentation_review_revision", where, Kind.COMMIT)
    validation_receipt = views.document(ctx, identity.VALIDATION_RECEIPT) or {}
    validation_results = views.document(ctx, identity.VALIDATION_RESULTS) or {}
    f.expect(f"{where}.evaluation_harness_revision",
             views.dig(validation_receipt, "source_execution.evaluation_harness_revision"),
             receipt.get("evaluation_harness_revision"), f"differs from {identity.VALIDATION_RECEIPT}")
    f.expect(f"{where}.immutable_archive_revision", views.dig(validation_results, "source.dataset_revision"),
             receipt.get("immutable_archive_revision"), f"differs from {identity.VALIDATION_RESULTS} source")
    destinations = sorted({d for d in rows if d.startswith(VALIDATION_DIR)} | set(VALIDATION_REVIEW_EXTRA))
    missing = [d for d in VALIDATION_REVIEW_EXTRA if d not in rows]
    for dest in missing:
        f.fail("files", "reviewed TRACE-validation destination is not mapped", expected=dest)
    f.expect(f"{where}.reviewed_destination_count", len(destinations), receipt.get("reviewed_destination_count"),
             "differs from the reviewed destinations in the map")
    f.expect(f"{where}.reviewed_destination_set_sha256", _compact_sha256(destinations),
             receipt.get("reviewed_destination_set_sha256"), "differs from the hash of the reviewed destinations")
    projection = [{k: rows[d].get(k) for k in PROJECTION_FIELDS} for d in destinations if d in rows]
    f.expect(f"{where}.reviewed_mapping_projection_sha256", _compact_sha256(projection),
             receipt.get("reviewed_mapping_projection_sha256"), "differs from the hash of the reviewed mappings")


def _compact_sha256(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_public_authored(f: Fields, doc: dict[str, Any], rows: dict[str, dict]) -> set[str]:
    authored: set[str] = set()
    for i, entry in f.items(doc, "public_authored_files"):
        path = entry.get("path")
        if not (is_kind(path, Kind.TEXT) and path.startswith("rlvr/")):
            f.fail(f"public_authored_files[{i}].path", "must be a release path under rlvr/", found=path)
        elif path in authored:
            f.fail(f"public_authored_files[{path}]", "duplicate public-authored file")
        elif path in rows:
            f.fail(f"public_authored_files[{path}]", "is also a mapped destination")
        else:
            authored.add(path)
    if isinstance(doc.get("public_authored_files"), list):
        for path in sorted(DATA_PATHS - authored - set(rows)):
            f.fail("public_authored_files", "release data file is neither mapped nor public-authored", expected=path)
    return authored


def _check_release_inputs(ctx: CheckContext, f: Fields, doc: dict[str, Any], receipts: dict[str, Any]) -> None:
    inputs = f.get(doc, "release_inputs", kind=Kind.OBJECT)
    if inputs is None:
        return
    w = "release_inputs"
    files = views.document(ctx, identity.RELEASE_FILES) or {}
    equivalence = views.document(ctx, identity.DATASET_EQUIVALENCE)
    dataset = inputs.get("trace_dataset")
    if files.get("dataset_release") is not None:
        f.expect(f"{w}.trace_dataset", files.get("dataset_release"), dataset,
                 f"differs from {identity.RELEASE_FILES} dataset_release")
    if isinstance(dataset, dict):
        f.expect(f"{w}.trace_dataset.equivalence_receipt", {"path": identity.DATASET_EQUIVALENCE,
                 "sha256": views.digest(ctx, identity.DATASET_EQUIVALENCE)}, views.dig(dataset, "equivalence_receipt"),
                 "does not pin the release's dataset-equivalence receipt")
        f.expect(f"{w}.trace_dataset.historical_training_revision",
                 views.dig(equivalence, "original_training_revision"),
                 views.dig(dataset, "historical_training_revision"), f"differs from {identity.DATASET_EQUIVALENCE}")
        f.expect(f"{w}.trace_dataset.repository_id", views.dig(equivalence, "repository"),
                 views.dig(dataset, "repository_id"), f"differs from {identity.DATASET_EQUIVALENCE}")
        f.get(dataset, "reproduction_dataset_revision", f"{w}.trace_dataset", Kind.COMMIT)
        f.get(dataset, "release_tag", f"{w}.trace_dataset", Kind.TEXT)
    contract = inputs.get("training_contract") if isinstance(inputs.get("training_contract"), dict) else {}
    reproduction = views.dig(dataset, "reproduction_dataset_revision")
    for name, expected in (("dataset_revision", views.dig(equivalence, "original_training_revision")),
                           ("reproduction_dataset_revision", reproduction),
                           ("dataset_equivalence_receipt_sha256", views.digest(ctx, identity.DATASET_EQUIVALENCE))):
        f.expect(f"{w}.training_contract.{name}", expected, views.dig(contract, name),
                 "training dataset provenance is stale")
    _check_validation_inputs(ctx, f, inputs.get("trace_validation"))
    judge = views.dig(receipts, "evaluation_environment.judge")
    if isinstance(judge, dict):
        f.expect(f"{w}.judge", {"repository_id": judge.get("model_id"), "revision": judge.get("revision")},
                 inputs.get("judge"), f"differs from {identity.RELEASE_RECEIPTS} evaluation_environment.judge")
    vlm = views.dig(views.document(ctx, identity.SUITE), "vlmevalkit")
    if isinstance(vlm, dict):
        f.expect(f"{w}.vlmevalkit", {"repository": vlm.get("repository"), "revision": vlm.get("commit")},
                 inputs.get("vlmevalkit"), f"differs from {identity.SUITE} vlmevalkit")
    for name, key in (("evaluation_source_revision", "producer"),
                      ("release_metadata_source_revision", "results_consolidation")):
        if views.dig(receipts, f"code_revisions.{key}") is not None:
            f.expect(f"{w}.{name}", views.dig(receipts, f"code_revisions.{key}"), inputs.get(name),
                     f"differs from {identity.RELEASE_RECEIPTS} code_revisions.{key}")
    _check_result_artifacts(ctx, f, inputs.get("canonical_result_artifacts"))


def _check_validation_inputs(ctx: CheckContext, f: Fields, block: Any) -> None:
    suite = views.document(ctx, identity.VALIDATION_SUITE)
    results = views.document(ctx, identity.VALIDATION_RESULTS)
    receipt = views.document(ctx, identity.VALIDATION_RECEIPT)
    expected = {
        "evaluation_harness_revision": views.dig(receipt, "source_execution.evaluation_harness_revision"),
        "models": views.count(views.dig(suite, "models")),
        "result_rows": views.count(views.dig(results, "results")),
        "results_sha256": views.digest(ctx, identity.VALIDATION_RESULTS),
        "rows_per_model": views.dig(suite, "dataset.rows"),
        "seed": views.dig(suite, "generation.seed"),
        "source_revision": views.dig(results, "source.dataset_revision"),
        "suite_sha256": views.digest(ctx, identity.VALIDATION_SUITE),
    }
    if not isinstance(block, dict):
        f.fail("release_inputs.trace_validation", "must be an object", found=block)
        return
    f.expect_keys("release_inputs.trace_validation", expected, block, "field")
    for name, value in expected.items():
        if name in block:
            f.expect(f"release_inputs.trace_validation.{name}", value, block[name],
                     "TRACE-validation release input is stale")


def _check_result_artifacts(ctx: CheckContext, f: Fields, listed: Any) -> None:
    artifacts = views.dig(views.results_doc(ctx), "source_artifacts")
    validation = views.dig(views.document(ctx, identity.VALIDATION_RESULTS), "source")
    if not (isinstance(artifacts, list) and isinstance(validation, dict)):
        return
    expected = {f"{a.get('repository_id')}@{a.get('repository_revision')}" for a in artifacts if isinstance(a, dict)}
    expected.add(f"{validation.get('dataset_repo_id')}@{validation.get('dataset_revision')}")
    if not isinstance(listed, list):
        f.fail("release_inputs.canonical_result_artifacts", "must be an array", found=listed)
        return
    f.expect_keys("release_inputs.canonical_result_artifacts", expected, listed,
                  "archive revision of results.json or results.v1.json")


def _check_tree(ctx: CheckContext, f: Fields, covered: set[str], rows: dict[str, dict]) -> None:
    """Mapped files exist, exact copies are byte-identical, and the tree holds nothing unmapped."""
    for dest, entry in sorted(rows.items()):
        if dest in DATA_PATHS and entry.get("review_status") == EXACT:
            _check_copy(ctx, f, dest, entry)
    if not ctx.needs_source(f.out, FILE, field="files[*].destination_path"):
        return
    for dest, entry in sorted(rows.items()):
        if not ctx.exists(dest):
            f.fail(f"files[{dest}]", "mapped release file is missing")
        elif entry.get("review_status") == EXACT and dest not in DATA_PATHS:
            _check_copy(ctx, f, dest, entry)
    tree, _ = views.tree_files(ctx)
    for path in sorted(set(tree) - covered):
        f.fail("files + public_authored_files", "file under rlvr/ is neither mapped nor public-authored", found=path)


def _check_copy(ctx: CheckContext, f: Fields, dest: str, entry: dict[str, Any]) -> None:
    actual = ctx.sha256(dest)
    if actual is not None:
        f.expect(f"files[{dest}].source_sha256", actual, entry.get("source_sha256"),
                 f"exact copy differs from its source (SHA-256 of {dest})")


GROUP = CheckGroup(
    "source_map",
    "source map: reviewed default-deny mappings, recomputed counts and review hashes, release inputs current",
    check_source_map,
)
