"""Group ``equivalence``: the dataset-equivalence receipt proves the reproduction dataset equals the historical one.

Upstream B6.1 (``validate_dataset_equivalence``) and B6.2 (``train.py check``): no machine paths, strict JSON,
the exact top-level field set, receipt version, identity fields, both schemas (the current one adds only the
advisory column), per-file flags, column equality, supervision-mode counts and LFS hashes, split summaries,
the passing aggregate and the comparison inventory. Upstream pins counts (17 files, 4000/2000 rows, 64000/2000
splits) and names as literals; here they must agree with the training profiles that consume the data: the Parquet
inventory is exactly the profiles' ``train_files`` + ``validation_file``, rows per split sum to the profiles'
``train_rows``/``validation_rows`` = ``task_count`` x rows per task, the compared columns are the profiles'
``required_columns``, the receipt hash is the one the profiles pin, and the TRACE-validation suite's dataset
block names the receipt's historical validation file, hash and row count.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from trace_lib.preflight import views
from trace_lib.preflight.context import CheckContext, GroupOutcome
from trace_lib.preflight.fields import MISSING, Fields, Kind, is_kind, json_equal
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity

FILE = identity.DATASET_EQUIVALENCE
RECEIPT_VERSION = "trace-dataset-equivalence-v1"
TOP_LEVEL_KEYS = frozenset({
    "added_advisory_column", "aggregate", "compared_columns", "compared_current_inventory",
    "compared_current_revision", "comparison_program", "comparison_runtime", "current_schema", "original_schema",
    "original_training_revision", "parquet_files", "receipt_version", "repository", "splits",
})
MACHINE_PATH_MARKERS = ("/home/", "/dev/shm", ".tmp/")
FILE_FLAGS = ("compared_columns_equal_in_row_order", "existing_field_schemas_equal",
              "image_bytes_equal_in_row_order", "schema_metadata_only_adds_trace_supervision_mode",
              "task_distribution_equal")
AGGREGATE_FLAGS = ("current_differs_only_by_added_trace_supervision_mode", "existing_columns_value_equal",
                   "existing_field_schemas_equal", "image_bytes_equal", "instance_ids_equal_and_unique",
                   "row_counts_equal", "row_order_equal", "schema_metadata_only_adds_trace_supervision_mode",
                   "task_distributions_equal", "train_validation_instance_ids_disjoint")
SPLIT_FLAGS = ("task_distribution_equal", "instance_ids_equal")
SUPERVISION_MODES = frozenset({"answer", "answer_and_annotation"})
PASS = "pass"
SPLITS = ("train", "validation")


def check_equivalence(ctx: CheckContext, out: GroupOutcome) -> None:
    f = Fields(out, FILE)
    raw = ctx.release.read_bytes(FILE).decode("utf-8", "replace") if ctx.exists(FILE) else ""
    for marker in MACHINE_PATH_MARKERS:
        if marker in raw:
            f.fail(None, "receipt contains a machine path", found=marker)
    doc = ctx.read_object(FILE, out)
    profiles = views.profiles(ctx)
    _check_profile_pins(ctx, out, profiles)
    if doc is None:
        return
    f.expect_keys("(top level)", TOP_LEVEL_KEYS, doc, "receipt field")
    f.expect("receipt_version", RECEIPT_VERSION, doc.get("receipt_version"), "unexpected receipt version")
    f.get(doc, "repository", kind=Kind.TEXT)
    historical = f.get(doc, "original_training_revision", kind=Kind.COMMIT)
    compared = f.get(doc, "compared_current_revision", kind=Kind.COMMIT)
    if historical is not None and historical == compared:
        f.fail("compared_current_revision", "must differ from the historical revision it is compared with")
    advisory = f.get(doc, "added_advisory_column", kind=Kind.TEXT)
    columns = f.get(doc, "compared_columns", kind=Kind.LIST)
    program = f.get(doc, "comparison_program", kind=Kind.OBJECT)
    if program is not None:
        f.get(program, "name", "comparison_program", Kind.TEXT)
        f.get(program, "sha256", "comparison_program", Kind.SHA256)
    for path, profile in profiles.items():
        for mine, theirs in (("repository", "repo_id"), ("original_training_revision", "historical_training_revision"),
                             ("compared_columns", "required_columns")):
            f.expect(mine, views.dig(profile, f"release.dataset.{theirs}"), views.dig(doc, mine),
                     f"differs from {path} release.dataset.{theirs}")
    if columns is not None:
        _check_schemas(f, doc, columns, advisory)
    files = _check_parquet_files(f, doc, columns or [], profiles)
    split_rows = _check_splits(f, doc, files, profiles)
    _check_aggregate(f, doc, files, split_rows)
    _check_inventory(f, doc, files, compared)
    _check_validation_suite(ctx, f, doc, files, split_rows)
    out.count("parquet_files", len(files))
    out.count("rows", sum(split_rows.values()))


def _check_profile_pins(ctx: CheckContext, out: GroupOutcome, profiles: dict[str, dict[str, Any]]) -> None:
    actual = ctx.sha256(FILE)
    for path, profile in profiles.items():
        pf = Fields(out, path)
        pf.expect("release.dataset.equivalence_receipt_path", FILE,
                  views.dig(profile, "release.dataset.equivalence_receipt_path"),
                  "does not name the release's dataset-equivalence receipt")
        if actual is not None:
            pf.expect("release.dataset.equivalence_receipt_sha256", actual,
                      views.dig(profile, "release.dataset.equivalence_receipt_sha256"),
                      f"differs from the SHA-256 of {FILE}")


def _check_schemas(f: Fields, doc: dict[str, Any], columns: list[Any], advisory: str | None) -> None:
    original = f.get(doc, "original_schema", kind=Kind.LIST)
    current = f.get(doc, "current_schema", kind=Kind.LIST)
    if original is None or current is None:
        return
    names = [field.get("name") if isinstance(field, dict) else None for field in original]
    f.expect("original_schema[*].name", columns, names, "historical schema differs from compared_columns")
    if not current or not json_equal(current[:-1], original):
        f.fail("current_schema", "reproduction schema changes an existing field", expected=original,
               found=current[:-1])
    elif advisory is not None:
        added = {"metadata": {}, "name": advisory, "nullable": True, "type": "string"}
        f.expect("current_schema[-1]", added, current[-1], "reproduction schema adds more than the advisory column")


def _check_parquet_files(
    f: Fields, doc: dict[str, Any], columns: list[Any], profiles: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = {}
    for i, entry in f.items(doc, "parquet_files"):
        path = entry.get("path")
        if not is_kind(path, Kind.TEXT):
            f.fail(f"parquet_files[{i}].path", "must be a non-empty string", found=path)
            continue
        where = f"parquet_files[{path}]"
        if path in files:
            f.fail(where, "duplicate Parquet file")
            continue
        files[path] = entry
        if entry.get("split") not in SPLITS:
            f.fail(f"{where}.split", "unknown split", expected=list(SPLITS), found=entry.get("split"))
        rows = f.get(entry, "rows", where, Kind.COUNT)
        for flag in FILE_FLAGS:
            f.expect(f"{where}.{flag}", True, entry.get(flag), "file comparison did not pass")
        f.expect(f"{where}.column_equality", {c: True for c in columns if isinstance(c, str)},
                 entry.get("column_equality"), "column comparison did not pass")
        counts = f.get(entry, "trace_supervision_mode_counts", where, Kind.OBJECT)
        if counts is not None:
            f.expect_keys(f"{where}.trace_supervision_mode_counts", SUPERVISION_MODES, counts, "supervision mode")
            values = list(counts.values())
            if rows is not None and all(is_kind(v, Kind.NONNEG) for v in values) and sum(values) != rows:
                f.fail(f"{where}.trace_supervision_mode_counts", "counts do not sum to the file's rows",
                       expected=rows, found=sum(values))
        for side in ("original", "current"):
            block = f.get(entry, side, where, Kind.OBJECT)
            if block is None:
                continue
            here = f"{where}.{side}"
            f.get(block, "bytes", here, Kind.COUNT)
            sha = f.get(block, "sha256", here, Kind.SHA256)
            f.expect(f"{here}.lfs_sha256", sha, block.get("lfs_sha256"), "LFS object id differs from the SHA-256")
            f.expect(f"{here}.lfs_oid_matches_sha256", True, block.get("lfs_oid_matches_sha256"),
                     "LFS object id does not match the SHA-256")
    for path, profile in profiles.items():
        dataset = views.dig(profile, "release.dataset") or {}
        train, validation = dataset.get("train_files"), dataset.get("validation_file")
        if isinstance(train, list) and isinstance(validation, str):
            expected = [*train, validation]
            if sorted(map(str, expected)) != sorted(files) or len(expected) != len(files):
                f.expect_keys("parquet_files[*].path", expected, files,
                              f"Parquet file of {path} train_files/validation_file")
            elif list(files) != expected:
                f.fail("parquet_files", f"order differs from {path} train_files + validation_file",
                       expected=expected, found=list(files))
            for name in files:
                split = "validation" if name == validation else "train"
                f.expect(f"parquet_files[{name}].split", split, files[name].get("split"),
                         f"split disagrees with {path}")
    return files


def _check_splits(
    f: Fields, doc: dict[str, Any], files: dict[str, dict[str, Any]], profiles: dict[str, dict[str, Any]]
) -> dict[str, int]:
    splits = f.get(doc, "splits", kind=Kind.OBJECT)
    rows_of: dict[str, int] = {}
    modes_of: dict[str, Counter[str]] = {s: Counter() for s in SPLITS}
    for entry in files.values():
        if entry.get("split") in SPLITS and is_kind(entry.get("rows"), Kind.COUNT):
            rows_of[entry["split"]] = rows_of.get(entry["split"], 0) + entry["rows"]
            counts = entry.get("trace_supervision_mode_counts")
            if isinstance(counts, dict):
                modes_of[entry["split"]].update({k: v for k, v in counts.items() if is_kind(v, Kind.NONNEG)})
    if splits is None:
        return rows_of
    f.expect_keys("splits", SPLITS, splits, "split")
    profile_fields = {"train": ("train_rows", "train_rows_per_task"),
                      "validation": ("validation_rows", "validation_rows_per_task")}
    for split in SPLITS:
        summary = splits.get(split)
        where = f"splits.{split}"
        if not isinstance(summary, dict):
            continue
        rows = f.get(summary, "rows", where, Kind.COUNT)
        tasks = f.get(summary, "task_count", where, Kind.COUNT)
        per_task = f.get(summary, "rows_per_task", where, Kind.COUNT)
        f.expect(f"{where}.rows", rows_of.get(split, 0), rows, "differs from the sum of its Parquet files' rows")
        if rows is not None and tasks is not None and per_task is not None and rows != tasks * per_task:
            f.fail(f"{where}.rows", "differs from task_count x rows_per_task", expected=tasks * per_task, found=rows)
        f.expect(f"{where}.unique_instance_ids", rows, summary.get("unique_instance_ids"),
                 "instance ids are not unique per row")
        for flag in SPLIT_FLAGS:
            f.expect(f"{where}.{flag}", True, summary.get(flag), "split comparison did not pass")
        original = f.get(summary, "original_task_distribution_sha256", where, Kind.SHA256)
        f.expect(f"{where}.current_task_distribution_sha256", original,
                 summary.get("current_task_distribution_sha256"), "task distribution changed")
        f.expect(f"{where}.trace_supervision_mode_counts", dict(modes_of[split]),
                 summary.get("trace_supervision_mode_counts"), "differs from the sum over its Parquet files")
        for path, profile in profiles.items():
            rows_key, per_task_key = profile_fields[split]
            for mine, value, theirs in (("rows", rows, rows_key), ("task_count", tasks, "task_count"),
                                        ("rows_per_task", per_task, per_task_key)):
                if value is not None:
                    f.expect(f"{where}.{mine}", views.dig(profile, f"release.dataset.{theirs}"), value,
                             f"differs from {path} release.dataset.{theirs}")
    return rows_of


def _check_aggregate(f: Fields, doc: dict[str, Any], files: dict[str, Any], split_rows: dict[str, int]) -> None:
    aggregate = f.get(doc, "aggregate", kind=Kind.OBJECT)
    if aggregate is None:
        return
    expected = {flag: True for flag in AGGREGATE_FLAGS}
    expected.update(outcome=PASS, parquet_file_count=len(files), row_count=sum(split_rows.values()))
    f.expect_keys("aggregate", expected, aggregate, "aggregate field")
    for key, value in expected.items():
        if key in aggregate:
            f.expect(f"aggregate.{key}", value, aggregate[key], "aggregate comparison did not pass")


def _check_inventory(f: Fields, doc: dict[str, Any], files: dict[str, dict[str, Any]], compared: str | None) -> None:
    inventory = f.get(doc, "compared_current_inventory", kind=Kind.OBJECT)
    if inventory is None:
        return
    f.expect("compared_current_inventory.revision", MISSING if compared is None else compared,
             inventory.get("revision"), "inventory is not of the compared revision")
    entries: dict[str, dict[str, Any]] = {}
    for i, entry in f.items(inventory, "files", "compared_current_inventory"):
        path = entry.get("path")
        unsafe = not is_kind(path, Kind.TEXT) or path.startswith("/") or ".." in path.split("/")
        if unsafe:
            f.fail(f"compared_current_inventory.files[{i}].path", "unsafe inventory path", found=path)
        elif path in entries:
            f.fail(f"compared_current_inventory.files[{path}]", "duplicate inventory path")
        else:
            entries[path] = entry
    for path, entry in files.items():
        listed = entries.get(path)
        where = f"compared_current_inventory.files[{path}]"
        if listed is None:
            if isinstance(inventory.get("files"), list):
                f.fail(where, "compared Parquet file is not in the inventory")
            continue
        f.expect(f"{where}.size", views.dig(entry, "current.bytes"), listed.get("size"),
                 "differs from the receipt's current bytes")
        f.expect(f"{where}.lfs_sha256", views.dig(entry, "current.sha256"), listed.get("lfs_sha256"),
                 "differs from the receipt's current SHA-256")


def _check_validation_suite(
    ctx: CheckContext, f: Fields, doc: dict[str, Any], files: dict[str, dict[str, Any]], split_rows: dict[str, int]
) -> None:
    """The TRACE-validation suite evaluates the historical validation file this receipt describes."""
    suite = views.document(ctx, identity.VALIDATION_SUITE)
    dataset = suite.get("dataset") if suite is not None else None
    if not isinstance(dataset, dict):
        return
    sf = Fields(f.out, identity.VALIDATION_SUITE)
    validation = [p for p, e in files.items() if e.get("split") == "validation"]
    sf.expect("dataset.repo_id", views.dig(doc, "repository"), views.dig(dataset, "repo_id"),
              f"differs from {FILE} repository")
    sf.expect("dataset.revision", views.dig(doc, "original_training_revision"), views.dig(dataset, "revision"),
              f"differs from {FILE} original_training_revision")
    if len(validation) == 1:
        entry = files[validation[0]]
        sf.expect("dataset.file", validation[0], views.dig(dataset, "file"), f"differs from {FILE}'s validation file")
        sf.expect("dataset.sha256", views.dig(entry, "original.sha256"), views.dig(dataset, "sha256"),
                  f"differs from {FILE} parquet_files[{validation[0]}].original.sha256")
    sf.expect("dataset.rows", split_rows.get("validation", MISSING), views.dig(dataset, "rows"),
              f"differs from {FILE} validation rows")
    sf.expect("dataset.tasks", views.dig(doc, "splits.validation.task_count"), views.dig(dataset, "tasks"),
              f"differs from {FILE} splits.validation.task_count")
    sf.expect("dataset.samples_per_task", views.dig(doc, "splits.validation.rows_per_task"),
              views.dig(dataset, "samples_per_task"), f"differs from {FILE} splits.validation.rows_per_task")


GROUP = CheckGroup(
    "equivalence",
    "dataset-equivalence receipt: reproduction = historical dataset; files, rows, columns = training profiles",
    check_equivalence,
)
