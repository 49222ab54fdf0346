"""Group ``provenance``: every suite benchmark has complete, reviewed, immutable provenance.

Upstream ``validate_provenance``: schema, suite binding, review status, VLMEvalKit revision equal to the suite's,
one entry per suite benchmark in suite order with the suite's name, alias, category and row count, an HTTP(S)
source with an immutable revision and split, an evaluation artifact, a declared (or explicitly undeclared)
license with evidence, citations, prompt route, scorer and a reviewed adapter status. Stricter than upstream:
a revision whose ``revision_kind`` names a commit must be a full 40-hex commit.
"""

from __future__ import annotations

from collections import Counter

from trace_lib.preflight import views
from trace_lib.preflight.context import CheckContext, GroupOutcome
from trace_lib.preflight.fields import Fields, Kind, hashable, is_kind
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity

FILE = identity.PROVENANCE
SCHEMA = "trace_eval_benchmark_provenance_v1"
STATUS = "reviewed_release_input"
ADAPTER_STATUSES = frozenset({"none", "approved", "approved_required"})
CHECKSUM_ALGORITHMS = frozenset({"md5", "sha256"})
UNDECLARED = "not_declared"
_COMMIT_KINDS = frozenset({"hugging_face_commit", "git_commit"})


def check_provenance(ctx: CheckContext, out: GroupOutcome) -> None:
    doc = ctx.read_object(FILE, out)
    suite = views.require_suite(ctx, out, FILE)
    if doc is None:
        return
    f = Fields(out, FILE)
    f.expect("schema_version", SCHEMA, doc.get("schema_version"), "unexpected provenance schema")
    f.expect("status", STATUS, doc.get("status"), "benchmark provenance has not been reviewed")
    vlm = f.get(doc, "vlmevalkit", kind=Kind.OBJECT)
    suite_doc = ctx.release.read_json(identity.SUITE) if suite is not None else None
    if suite_doc is not None:
        f.expect("suite_id", views.dig(suite_doc, "suite_id"), doc.get("suite_id"), "provenance is for another suite")
        if vlm is not None:
            f.expect("vlmevalkit.revision", views.dig(suite_doc, "vlmevalkit.commit"), vlm.get("revision"),
                     "VLMEvalKit revision differs from the suite's")

    entries = f.items(doc, "benchmarks")
    ids = [hashable(e.get("benchmark_id")) for _, e in entries]
    for bench_id, n in Counter(ids).items():
        if n > 1:
            f.fail(f"benchmarks[{bench_id}]", f"duplicate benchmark provenance ({n} entries)")
    statuses: Counter[str] = Counter()
    if suite is not None:
        f.expect_keys("benchmarks[*].benchmark_id", suite.keys, [i for i in ids if isinstance(i, str)], "benchmark")
        if set(ids) == set(suite.keys) and len(ids) == len(suite.keys) and tuple(ids) != suite.keys:
            f.fail("benchmarks", "benchmark order differs from suite.v1.json", expected=list(suite.keys), found=ids)
    for i, entry in entries:
        bench_id = entry.get("benchmark_id")
        where = f"benchmarks[{bench_id if is_kind(bench_id, Kind.TEXT) else i}]"
        if suite is not None and bench_id in suite.keys:
            bench = suite.benchmark(bench_id)
            for name, expected in (("public_name", bench.display), ("official_alias", bench.official_alias),
                                   ("category", bench.category), ("row_count", bench.rows)):
                f.expect(f"{where}.{name}", expected, entry.get(name), f"differs from suite.v1.json {name}")
        _check_entry(f, entry, where)
        licence = entry.get("license_or_terms")
        if isinstance(licence, dict) and is_kind(licence.get("status"), Kind.TEXT):
            statuses[licence["status"]] += 1
    out.count("benchmarks", len(entries))
    out.count("license_statuses", dict(sorted(statuses.items())))


def _check_entry(f: Fields, entry: dict, where: str) -> None:
    source = f.get(entry, "source", where, Kind.OBJECT)
    if source is not None:
        here = f"{where}.source"
        f.get(source, "repository", here, Kind.URL)
        kind = f.get(source, "revision_kind", here, Kind.TEXT)
        revision = f.get(source, "revision", here, Kind.TEXT)
        if revision is not None:
            if len(revision) < 7:
                f.fail(f"{here}.revision", "revision is not immutable enough", found=revision)
            elif kind in _COMMIT_KINDS and not is_kind(revision, Kind.COMMIT):
                f.fail(f"{here}.revision", f"a {kind} must be a full commit", expected=Kind.COMMIT.value,
                       found=revision)
        f.get(source, "split", here, Kind.TEXT)
        f.get(source, "source_row_count", here, Kind.COUNT)
    artifact = f.get(entry, "evaluation_artifact", where, Kind.OBJECT)
    if artifact is not None:
        here = f"{where}.evaluation_artifact"
        if "url" in artifact:
            f.get(artifact, "url", here, Kind.URL)
        else:
            f.get(artifact, "repository", here, Kind.URL)
            f.get(artifact, "repository_revision", here, Kind.TEXT)
            f.get(artifact, "path", here, Kind.TEXT)
        if artifact.get("checksum") is not None:  # optional: absent or null when upstream ships no checksum
            checksum = f.get(artifact, "checksum", here, Kind.OBJECT)
            if checksum is not None:
                if hashable(checksum.get("algorithm")) not in CHECKSUM_ALGORITHMS:
                    f.fail(f"{here}.checksum.algorithm", "unsupported artifact checksum",
                           expected=sorted(CHECKSUM_ALGORITHMS), found=checksum.get("algorithm"))
                f.get(checksum, "value", f"{here}.checksum", Kind.TEXT)
    licence = f.get(entry, "license_or_terms", where, Kind.OBJECT)
    if licence is not None:
        here = f"{where}.license_or_terms"
        status = f.get(licence, "status", here, Kind.TEXT)
        if status == UNDECLARED:
            if licence.get("expression") is not None:
                f.fail(f"{here}.expression", "must be null when no license is declared (never invented)",
                       found=licence.get("expression"))
        elif status is not None:
            f.get(licence, "expression", here, Kind.TEXT)
        f.get(licence, "evidence", here, Kind.URL)
    citations = f.items(entry, "citations", where)
    if isinstance(entry.get("citations"), list) and not entry["citations"]:
        f.fail(f"{where}.citations", "must have at least one citation")
    for j, citation in citations:
        f.get(citation, "title", f"{where}.citations[{j}]", Kind.TEXT)
        f.get(citation, "url", f"{where}.citations[{j}]", Kind.URL)
    f.get(entry, "prompt_route", where, Kind.TEXT)
    f.get(entry, "official_scorer", where, Kind.TEXT)
    adapter = f.get(entry, "adapter", where, Kind.OBJECT)
    if adapter is not None:
        if hashable(adapter.get("status")) not in ADAPTER_STATUSES:
            f.fail(f"{where}.adapter.status", "adapter has an unreviewed status", expected=sorted(ADAPTER_STATUSES),
                   found=adapter.get("status"))
        f.get(adapter, "description", f"{where}.adapter", Kind.TEXT)


GROUP = CheckGroup(
    "provenance",
    "benchmark provenance: one reviewed entry per suite benchmark, immutable sources, licenses, citations",
    check_provenance,
)
