"""Group ``patches``: post-run patches are reviewed and never rewrite the canonical results.

Upstream ``validate_post_run_patches``: schema, the producer revision kept (the ledger must not claim the
post-run revision produced the results), ``canonical_results_recomputed`` false, unique patch ids each with a
post-run source revision, a reviewed status, ``changes_canonical_results`` false, source paths and a rationale.
The exact patch ids and statuses are pinned by the file hash (group ``identity``); here the producer revision must
equal ``release_receipts.v1.json``'s, every patch's revision differ from it, and no patch may await review.
The TRACE-validation ledger (``reproducibility_patches.v1.json``) is checked by ``validation_release``.
"""

from __future__ import annotations

from collections import Counter

from trace_lib.preflight import views
from trace_lib.preflight.context import CheckContext, GroupOutcome
from trace_lib.preflight.fields import Fields, Kind, is_kind
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity

FILE = identity.POST_RUN_PATCHES
SCHEMA = "trace_eval_post_run_patches_v1"
APPROVED = "approved_for_public_application"
PENDING = "pending_public_runtime_review"
EXCLUDED_PREFIX = "excluded"


def check_patches(ctx: CheckContext, out: GroupOutcome) -> None:
    doc = ctx.read_object(FILE, out)
    if doc is None:
        return
    f = Fields(out, FILE)
    f.expect("schema_version", SCHEMA, doc.get("schema_version"), "unexpected post-run patch ledger schema")
    producer = f.get(doc, "producer_revision", kind=Kind.COMMIT)
    receipts = views.document(ctx, identity.RELEASE_RECEIPTS)
    if producer is not None and receipts is not None:
        code = receipts.get("code_revisions") if isinstance(receipts.get("code_revisions"), dict) else {}
        f.expect("producer_revision", code.get("producer"), producer,
                 f"differs from {identity.RELEASE_RECEIPTS} code_revisions.producer")
    f.expect("canonical_results_recomputed", False, doc.get("canonical_results_recomputed"),
             "post-run patches must not rewrite canonical result provenance")
    statuses: Counter[str] = Counter()
    seen: list[str] = []
    for i, patch in f.items(doc, "patches"):
        patch_id = patch.get("patch_id")
        if not is_kind(patch_id, Kind.TEXT):
            f.fail(f"patches[{i}].patch_id", "must be a non-empty string", found=patch_id)
            continue
        where = f"patches[{patch_id}]"
        if patch_id in seen:
            f.fail(where, "duplicate post-run patch")
            continue
        seen.append(patch_id)
        revision = f.get(patch, "source_revision", where, Kind.COMMIT)
        if revision is not None and revision == producer:
            f.fail(f"{where}.source_revision", "a post-run patch cannot come from the producer revision",
                   found=revision)
        status = f.get(patch, "review_status", where, Kind.TEXT)
        if status is not None:
            statuses[status] += 1
            if status == PENDING:
                f.fail(f"{where}.review_status", "post-run patch still awaits review", found=status)
            elif status != APPROVED and not status.startswith(EXCLUDED_PREFIX):
                f.fail(f"{where}.review_status", "unknown review status",
                       expected=f"{APPROVED}, {PENDING} or {EXCLUDED_PREFIX}_*", found=status)
        f.expect(f"{where}.changes_canonical_results", False, patch.get("changes_canonical_results"),
                 "post-run patch rewrites canonical results")
        paths = f.get(patch, "source_paths", where, Kind.LIST)
        if paths is not None and (not paths or not all(is_kind(p, Kind.TEXT) for p in paths)):
            f.fail(f"{where}.source_paths", "post-run patch must name its source paths", found=paths)
        f.get(patch, "rationale", where, Kind.TEXT)
    out.count("patches", len(seen))
    out.count("approved", statuses[APPROVED])
    out.count("pending", statuses[PENDING])
    out.count("excluded", sum(n for s, n in statuses.items() if s.startswith(EXCLUDED_PREFIX)))


GROUP = CheckGroup(
    "patches",
    "post-run patch ledger: producer revision kept, every patch reviewed, none rewrites canonical results",
    check_patches,
)
