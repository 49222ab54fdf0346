"""``validation verify release`` (spec §A9.1-A9.2), the suite views and the dataset-equivalence bridge (§A2)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot, locate_release
from trace_lib.validation import pins
from trace_lib.validation.equivalence import EquivalenceError, check_equivalence_bridge
from trace_lib.release.validation_suite import load_release_scores, load_system_prompt, load_validation_suite
from trace_lib.validation.verify import VerificationError, verify_release

pytestmark = pytest.mark.offline

_FILES = (identity.SUITE, identity.VALIDATION_SUITE, identity.VALIDATION_RESULTS, identity.VALIDATION_RECEIPT,
          identity.DATASET_EQUIVALENCE, identity.SYSTEM_PROMPT, identity.VALIDATION_PATCHES, identity.RELEASE_RECEIPTS,
          identity.RESULTS)


def _copy(release: ReleaseRoot, tmp_path: Path) -> ReleaseRoot:
    dest = tmp_path / "release"  # below the test's directory: in it, discovery from a sibling test could find it
    for rel in _FILES:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(release.file(rel), target)
    return locate_release(dest)


def _edit(root: ReleaseRoot, rel: str, change) -> None:
    doc = json.loads(root.file(rel).read_text())
    change(doc)
    root.file(rel).write_text(json.dumps(doc, indent=2))


def test_release_phase_report(release: ReleaseRoot) -> None:
    receipt = release.read_json(identity.VALIDATION_RECEIPT)
    report = verify_release(release)
    assert report == {
        "models": len(load_validation_suite(release).models),
        "phase": "release",
        "results_sha256": release.sha256(identity.VALIDATION_RESULTS),
        "rows_per_model": load_validation_suite(release).rows,
        "source_revision": receipt["immutable_source"]["dataset_revision"],
        "status": "ok",
    }


def test_an_edited_score_breaks_the_receipt(release: ReleaseRoot, tmp_path: Path) -> None:
    copy = _copy(release, tmp_path)
    _edit(copy, identity.VALIDATION_RESULTS, lambda d: d["results"][1].__setitem__("score", 41.1))
    with pytest.raises(VerificationError, match=r"public_release\.results_sha256: differs from the SHA-256"):
        verify_release(copy)


def test_unpinned_mode_still_recomputes(release: ReleaseRoot, tmp_path: Path) -> None:
    copy = _copy(release, tmp_path)
    _edit(copy, identity.VALIDATION_RESULTS, lambda d: d["results"][0].__setitem__("score", 24.47))
    with pytest.raises(VerificationError, match=r"(is not a whole number of correct rows|results_sha256: differs)"):
        verify_release(copy, pinned=False)


def test_suite_contract_changes_are_found(release: ReleaseRoot, tmp_path: Path) -> None:
    copy = _copy(release, tmp_path)
    _edit(copy, identity.VALIDATION_SUITE, lambda d: d["scoring"].__setitem__("unresolved_rows_score", 0.5))
    with pytest.raises(VerificationError, match="suite SHA-256 mismatch"):
        verify_release(copy)
    with pytest.raises(VerificationError, match="scoring policy differs"):
        verify_release(copy, pinned=False)


def test_suite_views_come_from_the_release(release: ReleaseRoot) -> None:
    suite = load_validation_suite(release)
    scores = load_release_scores(release)
    assert list(scores) == list(suite.slugs)
    assert suite.decoding()["n"] == suite.generation["responses_per_prompt"] and suite.decoding()["stream"] is False
    text, digest = load_system_prompt(release, suite)
    assert digest == suite.prompt["system_prompt_sha256"]
    assert hashlib.sha256(text.encode()).hexdigest() == pins.SYSTEM_PROMPT_STRIPPED_SHA256


def test_equivalence_bridge(release: ReleaseRoot, tmp_path: Path) -> None:
    suite = load_validation_suite(release)
    provenance = check_equivalence_bridge(release, suite, pins.REPRODUCTION_DATASET.manifest_sha256)
    assert provenance["reproduction_dataset"] == pins.REPRODUCTION_DATASET.normalized()
    assert provenance["historical_dataset"]["file_sha256"] == suite.dataset["sha256"]
    copy = _copy(release, tmp_path)
    _edit(copy, identity.DATASET_EQUIVALENCE, lambda d: d["aggregate"].__setitem__("row_order_equal", False))
    with pytest.raises(EquivalenceError, match="receipt SHA-256 mismatch"):
        check_equivalence_bridge(copy, load_validation_suite(copy), pins.REPRODUCTION_DATASET.manifest_sha256)


def _verify_cli(release: ReleaseRoot, work: Path, *extra: str):  # noqa: ANN202
    from trace_lib.testing.cli_runner import run_cli

    return run_cli(["validation", "verify", "generation-only", "--trace-root", str(release.path),
                    "--work-dir", str(work), *extra])


def test_generation_only_with_a_missing_parquet_is_a_usage_error(release: ReleaseRoot, tmp_path: Path) -> None:
    """The parquet ``--parquet`` names (or the default under inputs/) is an input: missing, it is one line naming
    it and exit 2, before anything is verified, as 'validation prepare' and 'score' refuse a missing input."""
    from trace_lib.testing.validation_bytes import prepare_stub_work

    layout = prepare_stub_work(release, tmp_path)[0]
    hint = "download it with 'trace-repro validation prepare --download'"
    for extra, parquet in (([], layout.parquet), (["--parquet", str(tmp_path / "absent.parquet")], None),
                           (["--unpinned", "--parquet", str(tmp_path / "absent.parquet")], None)):
        done = _verify_cli(release, layout.root, *extra)
        named = parquet or tmp_path / "absent.parquet"
        assert (done.returncode, done.stdout) == (2, ""), (extra, done.stdout, done.stderr)
        assert done.stderr == f"error: {named}: --parquet: validation parquet is missing; {hint}\n"


def test_generation_only_with_no_prepared_manifest_is_a_usage_error(release: ReleaseRoot, tmp_path: Path) -> None:
    """A work directory never prepared has no manifest to verify: one line naming it, exit 2 (not a finding)."""
    from trace_lib.validation.tiny import build_tiny_parquet

    parquet, _ = build_tiny_parquet(release, tmp_path / "tiny.parquet")
    done = _verify_cli(release, tmp_path / "work", "--parquet", str(parquet))
    assert (done.returncode, done.stdout) == (2, ""), done.stdout
    assert done.stderr == (f"error: {tmp_path / 'work' / 'dataset' / 'manifest.json'}: prepared manifest is missing; "
                           "run 'trace-repro validation prepare' first\n")
