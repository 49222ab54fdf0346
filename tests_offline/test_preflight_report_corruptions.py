"""Corrupted copies of the release: every single-field corruption is reported, in one line naming the file and
the identity involved. Targeted cases mirror upstream's release-input tests (spec B14); a hypothesis property
corrupts random score, summary and delta fields; a synthetic full checkout exercises the source-file checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from preflight_support import build_synthetic_checkout, copy_data_files, edit_json, edit_yaml

from trace_lib.preflight.report import check_release
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot

TRACE_EVAL = "rlvr/evaluation/trace_eval"


def _first(doc: dict, collection: str) -> dict:
    return doc["scores"][collection][0]


def suite_duplicate_key(root: Path) -> str:
    def change(doc):
        change.key = doc["benchmarks"][0]["key"]
        doc["benchmarks"][1]["key"] = change.key
    edit_json(root, identity.SUITE, change)
    return f"{identity.SUITE}: benchmarks[{change.key}]: duplicate benchmark key"


def suite_route_disagrees(root: Path) -> str:
    def change(doc):
        bench = doc["benchmarks"][0]
        change.key, change.route = bench["key"], bench["route"]
        bench["route"] = next(r for r in doc["routes"] if r != bench["route"])
    edit_json(root, identity.SUITE, change)
    return f"benchmarks[{change.key}].route: disagrees with routes (expected '{change.route}'"


def provenance_missing_split(root: Path) -> str:
    def change(doc):
        change.key = doc["benchmarks"][0]["benchmark_id"]
        del doc["benchmarks"][0]["source"]["split"]
    edit_json(root, identity.PROVENANCE, change)
    return f"{identity.PROVENANCE}: benchmarks[{change.key}].source.split: required field is missing"


def results_missing_score(root: Path) -> str:
    def change(doc):
        row = doc["scores"]["benchmark_scores"].pop(0)
        change.label = f"{row['model_id']}, seed {row['seed']}, {row['benchmark_id']}"
    edit_json(root, identity.RESULTS, change)
    return f"scores.benchmark_scores[{change.label}]: benchmark score missing"


def results_suite_block(root: Path) -> str:
    edit_json(root, identity.RESULTS, lambda d: d["suite"].update(rows_per_model_seed=-1))
    return f"{identity.RESULTS}: suite.rows_per_model_seed: differs from {identity.SUITE}"


def recompute_overall(root: Path) -> str:
    def change(doc):
        row = _first(doc, "overall_scores")
        row["score"] += 0.01
        change.label = f"{row['model_id']}, seed {row['seed']}"
    edit_json(root, identity.RESULTS, change)
    return f"scores.overall_scores[{change.label}].score: differs from the value recomputed from the seed scores"


def recompute_seed_count(root: Path) -> str:
    def change(doc):
        row = _first(doc, "benchmark_summaries")
        row["seed_count"] += 1
        change.label = f"{row['model_id']}, {row['benchmark_id']}"
    edit_json(root, identity.RESULTS, change)
    return f"scores.benchmark_summaries[{change.label}].seed_count: differs from what the suite and the release seeds"


def recompute_self_comparison(root: Path) -> str:
    def change(doc):
        pair = doc["comparisons"][0]
        pair["base_model_id"] = pair["model_id"]
        change.model = pair["model_id"]
    edit_json(root, identity.RESULTS, change)
    return f"comparisons[{change.model} vs {change.model}]: must compare two different models"


def receipts_archive_url(root: Path) -> str:
    def change(doc):
        archive = doc["hugging_face_source_archives"][0]
        archive["immutable_tree_url"] = archive["immutable_tree_url"].replace(archive["revision"], "main")
        change.run = archive["run_id"]
    edit_json(root, identity.RELEASE_RECEIPTS, change)
    return f"hugging_face_source_archives[{change.run}].immutable_tree_url: archive URL is not the revision-pinned"


def receipts_excluded_file_present(root: Path) -> str:
    path = json.loads((root / identity.RELEASE_RECEIPTS).read_text())["historical_exclusions"][0]["path"]
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text("{}\n")
    return f"historical_exclusions[{path}]: excluded historical file is present in the release"


def patches_producer_is_post_run(root: Path) -> str:
    """Upstream test_receipts_keep_producer_and_post_run_revision_distinct (ledger half)."""
    def change(doc):
        doc["producer_revision"] = doc["patches"][0]["source_revision"]
        change.patch = doc["patches"][0]["patch_id"]
    edit_json(root, identity.POST_RUN_PATCHES, change)
    return f"patches[{change.patch}].source_revision: a post-run patch cannot come from the producer revision"


def receipts_producer_changed(root: Path) -> str:
    """Upstream test_receipts_keep_producer_and_post_run_revision_distinct (receipt half)."""
    post_run = json.loads((root / identity.POST_RUN_PATCHES).read_text())["patches"][0]["source_revision"]
    edit_json(root, identity.RELEASE_RECEIPTS, lambda d: d["code_revisions"].update(producer=post_run))
    return f"{identity.POST_RUN_PATCHES}: producer_revision: differs from {identity.RELEASE_RECEIPTS}"


def equivalence_flag(root: Path) -> str:
    """Upstream test_dataset_equivalence_receipt_is_hash_and_contract_bound."""
    edit_json(root, identity.DATASET_EQUIVALENCE, lambda d: d["aggregate"].update(row_order_equal=False))
    return f"{identity.DATASET_EQUIVALENCE}: aggregate.row_order_equal: aggregate comparison did not pass"


def equivalence_unsafe_path(root: Path) -> str:
    """Upstream test_dataset_equivalence_rejects_unsafe_inventory_path."""
    edit_json(root, identity.DATASET_EQUIVALENCE,
              lambda d: d["compared_current_inventory"]["files"][0].update(path="../outside"))
    return "compared_current_inventory.files[0].path: unsafe inventory path (found '../outside')"


def equivalence_split_rows(root: Path) -> str:
    edit_json(root, identity.DATASET_EQUIVALENCE, lambda d: d["splits"]["train"].update(rows=1))
    return "splits.train.rows: differs from the sum of its Parquet files' rows"


def validation_score_multiple(root: Path) -> str:
    """Upstream release-metadata test: an edited score breaks the receipt's results hash."""
    def change(doc):
        doc["results"][0]["score"] += 0.05
    edit_json(root, identity.VALIDATION_RESULTS, change)
    return f"public_release.results_sha256: differs from the SHA-256 of {identity.VALIDATION_RESULTS}"


def validation_score_fraction(root: Path) -> str:
    def change(doc):
        doc["results"][0]["score"] += 0.013
        change.model = doc["results"][0]["model_id"]
    edit_json(root, identity.VALIDATION_RESULTS, change)
    return f"results[{change.model}].score: is not a whole number of correct rows"


def source_map_dataset_drift(root: Path) -> str:
    """Upstream test_source_map_rejects_reproduction_dataset_drift."""
    edit_json(root, identity.SOURCE_MAP, lambda d: d["release_inputs"]["trace_dataset"].update(
        reproduction_dataset_revision="0" * 40))
    return f"release_inputs.trace_dataset: differs from {identity.RELEASE_FILES} dataset_release"


def source_map_review_count(root: Path) -> str:
    """Upstream test_trace_validation_review_receipt_is_required."""
    edit_json(root, identity.SOURCE_MAP, lambda d: d["trace_validation_review_receipt"].update(
        reviewed_destination_count=d["trace_validation_review_receipt"]["reviewed_destination_count"] - 1))
    return "trace_validation_review_receipt.reviewed_destination_count: differs from the reviewed destinations"


def profiles_pair(root: Path) -> str:
    edit_yaml(root, identity.PROFILE_7B, lambda d: d["easyr1"]["worker"]["actor"]["optim"].update(lr=2.0e-6))
    return f"{identity.PROFILE_7B}: easyr1.worker.actor.optim.lr: differs from {identity.PROFILE_3B} outside"


def profiles_forbidden_key(root: Path) -> str:
    edit_yaml(root, identity.PROFILE_3B, lambda d: d["easyr1"]["data"].update(annotation_key="annotation_gt"))
    return f"{identity.PROFILE_3B}: easyr1.data.annotation_key: non-answer training configuration key"


def prompt_bytes(root: Path) -> str:
    with open(root / identity.SYSTEM_PROMPT, "ab") as handle:
        handle.write(b" ")
    return f"{identity.PROFILE_3B}: release.prompt.sha256: differs from the SHA-256 of {identity.SYSTEM_PROMPT}"


def inventory_data_hash(root: Path) -> str:
    with open(root / identity.REQUIREMENTS_CU128, "a") as handle:
        handle.write("extra==1.0\n")
    rel = identity.REQUIREMENTS_CU128.removeprefix("rlvr/")
    return f"{identity.RELEASE_FILES}: files[{rel}].sha256: differs from the SHA-256 of {identity.REQUIREMENTS_CU128}"


def malformed_truncated(root: Path) -> str:
    path = root / identity.RESULTS
    path.write_text(path.read_text()[:5000])
    return f"{identity.RESULTS}: malformed JSON at line"


def malformed_nan(root: Path) -> str:
    path = root / identity.VALIDATION_RESULTS
    text = path.read_text()
    path.write_text(text.replace('"score": ', '"score": NaN, "x": ', 1))
    return f"{identity.VALIDATION_RESULTS}: non-finite number NaN at line"


def malformed_duplicate_key(root: Path) -> str:
    path = root / identity.PROVENANCE
    path.write_text(path.read_text().replace('"status"', '"status": "x", "status"', 1))
    return f"{identity.PROVENANCE}: duplicate key 'status'"


def malformed_yaml_duplicate(root: Path) -> str:
    path = root / identity.PROFILE_7B
    path.write_text(path.read_text().replace("config_id:", "config_id: x\nconfig_id:", 1))
    return f"{identity.PROFILE_7B}: duplicate key 'config_id' at line"


def missing_file(root: Path) -> str:
    (root / identity.POST_RUN_PATCHES).unlink()
    return f"{identity.POST_RUN_PATCHES}: file is missing"


CASES: list[Callable[[Path], str]] = [
    suite_duplicate_key, suite_route_disagrees, provenance_missing_split, results_missing_score, results_suite_block,
    recompute_overall, recompute_seed_count, recompute_self_comparison, receipts_archive_url,
    receipts_excluded_file_present, patches_producer_is_post_run, receipts_producer_changed, equivalence_flag,
    equivalence_unsafe_path, equivalence_split_rows, validation_score_multiple, validation_score_fraction,
    source_map_dataset_drift, source_map_review_count, profiles_pair, profiles_forbidden_key, prompt_bytes,
    inventory_data_hash, malformed_truncated, malformed_nan, malformed_duplicate_key, malformed_yaml_duplicate,
    missing_file,
]


@pytest.fixture
def data_copy(release, tmp_path) -> Path:
    return copy_data_files(release, tmp_path / "release")


@pytest.mark.parametrize("corrupt", CASES, ids=[c.__name__ for c in CASES])
def test_corruption_is_reported_in_one_line(data_copy, corrupt):
    expected = corrupt(data_copy)
    report = check_release(ReleaseRoot(data_copy), pinned=False)
    lines = [f.line() for f in report.failures]
    assert any(expected in line for line in lines), "\n".join([f"wanted: {expected}", *lines])
    assert all("\n" not in line for line in lines)


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("policy", None, "rlvr/release_files.v1.json: policy: the release-file allowlist must be default-deny"),
    ("public_release_base", None, "rlvr/release_files.v1.json: public_release_base: differs from "
                                  "rlvr/source_map.v1.json public_base"),
    ("files", None, "rlvr/release_files.v1.json: files"),
])
def test_release_file_manifest_fields_found_by_the_random_corruptions(data_copy, key, value, expected):
    """Regressions from the random structural corruption test below: each was silent (or, for ``files: null``,
    a crash) before."""
    edit_json(data_copy, identity.RELEASE_FILES, lambda doc: doc.__setitem__(key, value))
    lines = [f.line() for f in check_release(ReleaseRoot(data_copy), pinned=False).failures]
    assert any(line.startswith(expected) for line in lines), "\n".join(lines)


def test_pinned_mode_names_every_changed_canonical_file(data_copy):
    validation_score_multiple(data_copy)
    report = check_release(ReleaseRoot(data_copy), pinned=True)
    lines = [f.line() for f in report.outcome("identity").failures]
    assert lines == [line for line in lines if line.startswith(f"{identity.VALIDATION_RESULTS}: sha256: differs "
                                                               "from the paper release")] and len(lines) == 1


# -- random single-field corruptions -----------------------------------------------------------------------------

def _score_leaves(doc: dict[str, Any]) -> list[tuple[tuple[Any, ...], list[str]]]:
    """(path into results.json, identity labels the finding must name) for every numeric score/summary/delta."""
    leaves = []
    for collection, rows in doc["scores"].items():
        for i, row in enumerate(rows):
            labels = [row["model_id"]] + ([f"seed {row['seed']}"] if "seed" in row else [])
            labels += [row[k] for k in ("benchmark_id", "category_name") if k in row]
            for name in ("score", "mean", "stddev", "seed", "model_id", "evaluated_rows", "seed_count",
                         "benchmark_count"):
                if name in row:
                    leaves.append((("scores", collection, i, name), labels))
    for c, pair in enumerate(doc["comparisons"]):
        head = [pair["model_id"], pair["base_model_id"]]
        delta = pair["overall_delta"]
        leaves += [(("comparisons", c, "overall_delta", name), head) for name in ("mean", "stddev")]
        leaves += [(("comparisons", c, "overall_delta", "seed_values", s, "delta"), head + [f"seed {v['seed']}"])
                   for s, v in enumerate(delta["seed_values"])]
        for b, entry in enumerate(pair["benchmark_deltas"]):
            labels = head + [entry["benchmark_id"]]
            leaves += [(("comparisons", c, "benchmark_deltas", b, name), labels) for name in ("mean", "stddev")]
            leaves += [(("comparisons", c, "benchmark_deltas", b, "seed_values", s, "delta"),
                        labels + [f"seed {v['seed']}"]) for s, v in enumerate(entry["seed_values"])]
    return leaves


def _corrupt(value: Any, delta: float) -> Any:
    if isinstance(value, str):
        return value + "-x"
    if isinstance(value, int):
        return value + (1 if delta > 0 else -1)
    return value + delta


@pytest.fixture(scope="module")
def fuzz_copy(release, tmp_path_factory):
    root = copy_data_files(release, tmp_path_factory.mktemp("fuzz") / "release")
    original = json.loads((root / identity.RESULTS).read_text())
    return root, original, _score_leaves(original)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pick=st.integers(min_value=0), delta=st.one_of(st.floats(1e-6, 5.0), st.floats(-5.0, -1e-6)))
def test_any_single_score_field_corruption_names_its_identity(fuzz_copy, pick, delta):
    root, doc, leaves = fuzz_copy
    path, labels = leaves[pick % len(leaves)]
    node = doc
    for key in path[:-1]:
        node = node[key]
    kept = node[path[-1]]
    node[path[-1]] = _corrupt(kept, delta)
    try:
        (root / identity.RESULTS).write_text(json.dumps(doc))
        report = check_release(ReleaseRoot(root), pinned=False, only=["results", "recompute"])
    finally:
        node[path[-1]] = kept
    lines = [f.line() for f in report.failures]
    assert any(all(label in line for label in labels) for line in lines), "\n".join(
        [f"corrupted {path} -> {_corrupt(kept, delta)!r}; wanted a line naming {labels}", *lines])


# -- source files present: a synthetic full checkout -----------------------------------------------------------

@pytest.fixture
def checkout(data_copy) -> Path:
    return build_synthetic_checkout(data_copy)


def test_synthetic_checkout_passes_with_source_checks(checkout):
    report = check_release(ReleaseRoot(checkout), pinned=False, require_source=True)
    assert report.ok, "\n".join(f.line() for f in report.failures)
    assert report.source_present
    assert report.outcome("source_inventory").counts["vendored_files"] > 0


def test_work_directory_and_bytecode_do_not_break_the_check(checkout):
    """Upstream fails here (spec B15 #1): its inventory and coverage checks count rlvr/evaluation/.work/."""
    (checkout / "rlvr/evaluation/.work/trace_validation/campaign").mkdir(parents=True)
    (checkout / "rlvr/evaluation/.work/trace_validation/campaign/junk.jsonl").write_text("{}\n")
    (checkout / "rlvr/__pycache__").mkdir()
    (checkout / "rlvr/__pycache__/train.cpython-311.pyc").write_bytes(b"\0")
    report = check_release(ReleaseRoot(checkout), pinned=False)
    assert report.ok, "\n".join(f.line() for f in report.failures)
    assert report.outcome("source_inventory").counts["ignored_work_files"] == 2


def test_stray_and_missing_source_files_are_named(checkout):
    (checkout / "rlvr/notes.txt").write_text("stray\n")
    listed = json.loads((checkout / identity.RELEASE_FILES).read_text())["files"]
    victim = next(e["path"] for e in listed if e["path"].endswith(".py"))
    (checkout / "rlvr" / victim).unlink()
    lines = [f.line() for f in check_release(ReleaseRoot(checkout), pinned=False).failures]
    assert f"{identity.SOURCE_MAP}: files + public_authored_files: file under rlvr/ is neither mapped nor " \
           "public-authored (found 'rlvr/notes.txt')" in lines
    assert f"{identity.RELEASE_FILES}: files: file under rlvr/ is not in the release-file manifest " \
           "(found 'rlvr/notes.txt')" in lines
    assert f"{identity.RELEASE_FILES}: files[{victim}]: listed release file is missing" in lines


def test_vendored_file_change_is_named(checkout):
    manifest = json.loads((checkout / "rlvr/easyr1_backend/VENDOR_MANIFEST.v1.json").read_text())
    victim = manifest["files"][0]["path"]
    with open(checkout / "rlvr/easyr1_backend" / victim, "a") as handle:
        handle.write("# edited\n")
    lines = [f.line() for f in check_release(ReleaseRoot(checkout), pinned=False).failures]
    assert any(line.startswith(f"rlvr/easyr1_backend/VENDOR_MANIFEST.v1.json: files[{victim}].public_sha256: "
                               "differs from the SHA-256") for line in lines), "\n".join(lines)


def test_data_only_copy_of_a_checkout_is_detected(checkout, tmp_path):
    """Deleting every source file turns the checkout back into a data-only copy (not checked, not failed)."""
    shutil.rmtree(checkout / "rlvr/easyr1_backend")
    report = check_release(ReleaseRoot(checkout), pinned=False)
    assert report.source_present  # other source files remain: a partial checkout is a broken checkout
    assert not report.ok


# -- random structural corruption anywhere: never a crash, never silent ----------------------------------------

_REPLACEMENTS = [None, True, 0, -1, 1.5, "", "x", [], {}, [1], {"a": 1}, [[]]]


def _node_paths(doc: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _node_paths(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += _node_paths(value, (*path, i))
    return out


@pytest.fixture(scope="module")
def structure_copy(release, tmp_path_factory):
    root = copy_data_files(release, tmp_path_factory.mktemp("structure") / "release")
    texts = {rel: (root / rel).read_text() for rel in sorted(identity.CANONICAL_SHA256) if rel.endswith(".json")}
    return root, texts, {rel: _node_paths(json.loads(text))[1:] for rel, text in texts.items()}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(file_pick=st.integers(min_value=0), node_pick=st.integers(min_value=0),
       replacement=st.sampled_from(_REPLACEMENTS + ["<delete>"]))
def test_any_structural_corruption_is_reported_without_stopping_a_group(structure_copy, file_pick, node_pick,
                                                                        replacement):
    root, texts, paths = structure_copy
    rel = sorted(texts)[file_pick % len(texts)]
    path = paths[rel][node_pick % len(paths[rel])]
    doc = json.loads(texts[rel])
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if replacement == "<delete>" and isinstance(parent, dict):
        del parent[path[-1]]
    elif json.dumps(parent[path[-1]]) != json.dumps(replacement):
        parent[path[-1]] = None if replacement == "<delete>" else replacement
    else:
        return
    try:
        (root / rel).write_text(json.dumps(doc))
        report = check_release(ReleaseRoot(root), pinned=False)
    finally:
        (root / rel).write_text(texts[rel])
    lines = [f.line() for f in report.failures]
    assert lines, f"{rel} {path} corrupted but nothing reported"
    assert not [line for line in lines if "stopped on unexpected release structure" in line], "\n".join(lines)
