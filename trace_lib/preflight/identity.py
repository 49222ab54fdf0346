"""Group ``identity``: the release is the paper release, file for file (pinned mode only).

Every canonical data file must be present with the SHA-256 recorded in :mod:`trace_lib.release.identity` (the
rlvr branch at the pinned commit). Because the hash fixes a file's bytes, this one group carries every literal
upstream's validators hard-code (24 benchmarks, 32,805 rows, the model roster, revisions, hyperparameters); the
other groups check structure and cross-file agreement, so they also hold for an ``--unpinned`` release.
"""

from __future__ import annotations

from trace_lib.preflight.context import CheckContext, GroupOutcome
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity


def check_identity(ctx: CheckContext, out: GroupOutcome) -> None:
    if not ctx.pinned:
        out.not_checked(f"{identity.REPOSITORY}@{identity.COMMIT[:12]}", "--unpinned (paper identity not asserted)")
        return
    matched = 0
    for rel, pinned in identity.CANONICAL_SHA256.items():
        actual = ctx.sha256(rel)
        if actual is None:
            out.fail(rel, "canonical file of the paper release is missing")
        elif actual != pinned:
            out.fail(rel, f"differs from the paper release ({identity.REPOSITORY}@{identity.COMMIT[:12]})",
                     field="sha256", expected=pinned, found=actual)
        else:
            matched += 1
    out.count("files_matching", matched)
    out.count("files_pinned", len(identity.CANONICAL_SHA256))
    out.count("commit", identity.COMMIT)


GROUP = CheckGroup(
    "identity",
    "pinned mode: every canonical file has the paper release's SHA-256 (skipped with --unpinned)",
    check_identity,
)
