"""Group ``suite``: the ``trace_eval_v1`` suite file is well formed and says the same thing everywhere.

Upstream ``validate_suite``: schema, canonical status, immutable VLMEvalKit
commit, unique non-empty benchmark keys with non-empty contract fields and positive row counts, categories that
partition the benchmarks in suite order, routes that cover each benchmark once and agree with its ``route``.
Upstream's literal counts (24 benchmarks, 6 x 4, 32,805 rows) are asserted by the pinned file hash (group
``identity``); here the suite's own ``aggregation`` declaration ("..._of_<n>_benchmarks") must match its content,
and each benchmark's ``category`` must name the category that lists it (upstream does not check this).
"""

from __future__ import annotations

import re
from collections import Counter

from trace_lib.preflight.context import CheckContext, GroupOutcome
from trace_lib.preflight.fields import Fields, Kind, is_kind, join
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity

SCHEMA = "trace-eval-suite-v1"
STATUS = "canonical"
BENCHMARK_TEXT_FIELDS = ("display", "official_alias", "category", "route", "answer_contract", "score_contract")
_DECLARED = re.compile(r"unweighted_macro_average_of_(\d+)_benchmarks")
FILE = identity.SUITE


def check_suite(ctx: CheckContext, out: GroupOutcome) -> None:
    doc = ctx.read_object(FILE, out)
    if doc is None:
        return
    f = Fields(out, FILE)
    f.expect("schema_version", SCHEMA, doc.get("schema_version"), "unexpected suite schema")
    f.get(doc, "suite_id", kind=Kind.TEXT)
    f.expect("status", STATUS, doc.get("status"), "suite is not canonical")
    vlm = f.get(doc, "vlmevalkit", kind=Kind.OBJECT)
    if vlm is not None:
        f.get(vlm, "repository", "vlmevalkit", Kind.URL)
        f.get(vlm, "commit", "vlmevalkit", Kind.COMMIT)

    keys: list[str] = []
    rows_total = 0
    declared_category: dict[str, str] = {}
    declared_route: dict[str, str] = {}
    for i, bench in f.items(doc, "benchmarks"):
        key = bench.get("key")
        if not is_kind(key, Kind.TEXT):
            f.fail(f"benchmarks[{i}].key", "benchmark key must be a non-empty string", found=key)
            continue
        where = f"benchmarks[{key}]"
        if key in keys:
            f.fail(where, "duplicate benchmark key", found=key)
            continue
        keys.append(key)
        for name in BENCHMARK_TEXT_FIELDS:
            f.get(bench, name, where, Kind.TEXT)
        rows = f.get(bench, "rows", where, Kind.COUNT)
        rows_total += rows or 0
        if is_kind(bench.get("category"), Kind.TEXT):
            declared_category[key] = bench["category"]
        if is_kind(bench.get("route"), Kind.TEXT):
            declared_route[key] = bench["route"]

    _check_partition(f, doc, "categories", keys, declared_category, ordered=True)
    _check_partition(f, doc, "routes", keys, declared_route, ordered=False)
    _check_aggregation(f, doc, keys)
    generation = f.get(doc, "generation", kind=Kind.OBJECT)
    if generation is not None:
        for name in ("temperature", "top_p"):
            f.get(generation, name, "generation", Kind.NUMBER)
        f.get(generation, "max_tokens", "generation", Kind.COUNT)
    categories = doc.get("categories") if isinstance(doc.get("categories"), dict) else {}
    out.count("benchmarks", len(keys))
    out.count("categories", len(categories))
    out.count("rows_per_model_seed", rows_total)


def _check_partition(
    f: Fields, doc: dict, name: str, keys: list[str], declared: dict[str, str], *, ordered: bool
) -> None:
    """``doc[name]`` maps group -> benchmark keys; every key in exactly one group, the one its field names."""
    table = f.get(doc, name, kind=Kind.OBJECT)
    if table is None:
        return
    listed: list[str] = []
    for group, members in table.items():
        where = join(name, group)
        if not isinstance(members, list) or not members or not all(is_kind(m, Kind.TEXT) for m in members):
            f.fail(where, "must be a non-empty array of benchmark keys", found=members)
            continue
        for member in members:
            listed.append(member)
            owner = declared.get(member)
            if owner is not None and owner != group:
                field = "category" if name == "categories" else "route"
                f.fail(f"benchmarks[{member}].{field}", f"disagrees with {name}", expected=group, found=owner)
    counts = Counter(listed)
    for member, n in sorted(counts.items()):
        if n > 1:
            f.fail(f"{name}[*]", f"benchmark listed {n} times", found=member)
        if member not in keys:
            f.fail(f"{name}[*]", "lists a benchmark the suite does not define", found=member)
    for key in keys:
        if key not in counts:
            f.fail(name, "does not list a suite benchmark", expected=key)
    if ordered and set(listed) == set(keys) and len(listed) == len(keys) and listed != keys:
        f.fail(name, "category members in category order must equal the benchmark order", expected=keys, found=listed)


def _check_aggregation(f: Fields, doc: dict, keys: list[str]) -> None:
    aggregation = f.get(doc, "aggregation", kind=Kind.OBJECT)
    categories = doc.get("categories")
    if aggregation is None:
        return
    overall = f.get(aggregation, "overall", "aggregation", Kind.TEXT)
    if overall is not None:
        match = _DECLARED.fullmatch(overall)
        if match is None:
            f.fail("aggregation.overall", "unknown aggregation", found=overall)
        elif int(match.group(1)) != len(keys):
            f.fail("aggregation.overall", "declared benchmark count differs from the suite",
                   expected=int(match.group(1)), found=len(keys))
    per_category = f.get(aggregation, "category", "aggregation", Kind.TEXT)
    if per_category is not None:
        match = _DECLARED.fullmatch(per_category)
        if match is None:
            f.fail("aggregation.category", "unknown aggregation", found=per_category)
        elif isinstance(categories, dict):
            size = int(match.group(1))
            for name, members in categories.items():
                if isinstance(members, list) and len(members) != size:
                    f.fail(join("categories", name), "category size differs from aggregation.category",
                           expected=size, found=len(members))
    f.get(aggregation, "average_category_means_for_overall", "aggregation", Kind.BOOL)


GROUP = CheckGroup(
    "suite",
    "trace_eval_v1 suite: schema, unique keys, rows, categories and routes partition the benchmarks",
    check_suite,
)
