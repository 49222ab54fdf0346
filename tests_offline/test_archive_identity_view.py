"""The dataset view of an archive run (trace_lib.archive.identity, trace_lib.data.manifest): a run over 4 of the
suite's 24 benchmarks, at other row counts than the suite's, gets ``dataset_sha256`` and ``prompt_contract_sha256``
recomputed from trace-repro's own requests, equal to upstream's definitions (the GOLDEN values were computed with
upstream's ``trace_eval_media_contract.manifest_snapshot_sha256`` and ``trace_eval_public_export`` helpers, run
outside the repository on this very fixture), and the lane asserts all eight hash fields over the view."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest
from slice_support import write_tsv

from trace_lib.archive import hashes
from trace_lib.archive.identity import HASH_FIELDS, benchmark_snapshot, dataset_view, our_identity
from trace_lib.archive.lane import ArchiveLane
from trace_lib.slices import Slice
from trace_lib.data.manifest import view_snapshot_sha256
from trace_lib.data.prepare import load_artifact_sources
from trace_lib.generation.run import prepare_rows
from trace_lib.benchmarks.registry import get_protocol
from trace_lib.release.load import sha256_file
from trace_lib.release.suite import load_suite
from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
pytest.importorskip("pandas", reason="the TSV fixtures are written with pandas")
MODEL = "trace-qwen2.5-vl-3b"
VIEW = ("mmstar", "realworldqa", "countbenchqa", "erqa")
#: Three 4x3 PNGs as literal bytes (base64), so the fixture's image hashes do not depend on an encoder version.
PNGS = ("iVBORw0KGgoAAAANSUhEUgAAAAQAAAADCAIAAAA7ljmRAAAAFElEQVR4nGNkYGVmgAEmBiSAwgEAAcEADiKUhfYAAAAASUVORK5CYII=",
        "iVBORw0KGgoAAAANSUhEUgAAAAQAAAADCAIAAAA7ljmRAAAAFElEQVR4nGNkZGVmgAEmBiSAwgEAAecAD71iw7UAAAAASUVORK5CYII=",
        "iVBORw0KGgoAAAANSUhEUgAAAAQAAAADCAIAAAA7ljmRAAAAFElEQVR4nGNkYmVmgAEmBiSAwgEAAg0AENU7XTwAAAAASUVORK5CYII=")
#: Upstream's values for this fixture (see the module docstring): the view's dataset_sha256, and the SHA-256 of
#: every row's prompt_contract_sha256 (benchmark order of VIEW, then row order), joined by newlines.
GOLDEN_DATASET_SHA256 = "76533b15f092fac8c75966ec246e799ebd1b9388161b543912f61580e3ee8921"
GOLDEN_CONTRACTS_SHA256 = "7be80c8e1bc72bfdb75fd208ae2723570ec6426df6804a3f02a15e185c37a8b1"


def four_benchmark_data(root: Path, release, *, rows: int = 3,  # noqa: ANN001
                        only: tuple[str, ...] = VIEW) -> dict[str, list]:
    """Write the 4-benchmark data root (``rows`` rows each, not the suite's counts; ``only`` these benchmarks) and
    return each benchmark's prepared requests (seed 42)."""
    sources = load_artifact_sources(release)
    generation = load_suite(release).generation
    prepared = {}
    for b, benchmark in enumerate(VIEW):
        if benchmark not in only:
            continue
        path = sources[benchmark].local_path(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_tsv(path, [{"index": 10 * b + i, "question": f"{benchmark}: which one {i}?", "A": "cat", "B": "dog",
                          "C": "bird", "D": "fish", "answer": "ABCD"[(b + i) % 4], "category": "c",
                          "l2-category": "l2", "image": PNGS[(b + i) % len(PNGS)]} for i in range(rows)])
        protocol = get_protocol(benchmark)
        prepared[benchmark] = prepare_rows(protocol.load(path), protocol, sources[benchmark].image_dir(root),
                                           served_name=MODEL, generation=generation, seed=42)
    return prepared


def _view(release, prepared):  # noqa: ANN001, ANN202
    return dataset_view(load_suite(release), {b: benchmark_snapshot(p) for b, p in prepared.items()},
                        {b: len(p) for b, p in prepared.items()})


def _contracts_digest(prepared, dataset_sha256: str) -> str:  # noqa: ANN001
    lines = [our_identity(p, model_id=MODEL, dataset_sha256=dataset_sha256).prompt_contract_sha256
             for benchmark in VIEW for p in prepared[benchmark]]
    return hashlib.sha256("\n".join(lines).encode("ascii")).hexdigest()


def test_a_four_benchmark_view_hashes_as_upstream_defines_it(tmp_path, release):
    prepared = four_benchmark_data(tmp_path / "data", release)
    view = _view(release, prepared)
    assert view.dataset_sha256 == GOLDEN_DATASET_SHA256
    assert _contracts_digest(prepared, view.dataset_sha256) == GOLDEN_CONTRACTS_SHA256
    assert view.notes == tuple(f"{b}: 3 rows in the data root, the suite lists {load_suite(release).benchmark(b).rows}"
                               "; hashed as found" for b in sorted(VIEW))


def test_the_view_snapshot_depends_on_every_benchmark_and_no_order():
    snaps = {b: hashes.text_sha256(b) for b in VIEW}
    base = view_snapshot_sha256(suite_sha256="s" * 64, vlmevalkit_commit="c" * 40, snapshots=snaps)
    assert base == view_snapshot_sha256(suite_sha256="s" * 64, vlmevalkit_commit="c" * 40,
                                        snapshots=dict(reversed(list(snaps.items()))))
    assert base != view_snapshot_sha256(suite_sha256="s" * 64, vlmevalkit_commit="c" * 40,
                                        snapshots={**snaps, "erqa": "0" * 64})
    assert base != view_snapshot_sha256(suite_sha256="s" * 64, vlmevalkit_commit="c" * 40,
                                        snapshots={b: s for b, s in snaps.items() if b != "erqa"})


def _archive(tmp_path: Path, prepared, dataset_sha256: str, *, view=VIEW):  # noqa: ANN001, ANN202
    slices = [SliceSpec(MODEL, 42, b, tuple(SampleSpec(p.index, p.ordinal, p.source_row_hash, p.prompt, "A",
                                                       tuple(sha256_file(x) for x in p.request.image_paths()))
                                            for p in prepared[b]), 0.0, dataset_sha256=dataset_sha256)
              for b in VIEW]
    write_archive_run(tmp_path / "archive" / "runs" / "heldout-4", "heldout-4", slices, view=view)
    return tmp_path / "archive"


def test_the_lane_asserts_all_eight_fields_over_the_runs_view(tmp_path, release):
    prepared = four_benchmark_data(tmp_path / "data", release)
    archive = _archive(tmp_path, prepared, GOLDEN_DATASET_SHA256)
    lane = ArchiveLane.create(release, data_root=tmp_path / "data", archive_root=str(archive))
    for benchmark in VIEW:
        identity = lane.run(Slice(MODEL, 42, benchmark)).identity
        assert identity.ok and identity.fields == HASH_FIELDS and identity.compared == 3, identity.explain()


def test_another_view_benchmark_edited_in_the_data_root_is_a_dataset_view_difference(tmp_path, release):
    prepared = four_benchmark_data(tmp_path / "data", release)
    archive = _archive(tmp_path, prepared, _view(release, prepared).dataset_sha256)
    four_benchmark_data(tmp_path / "data", release, rows=2, only=("erqa",))  # another benchmark of the view
    lane = ArchiveLane.create(release, data_root=tmp_path / "data", archive_root=str(archive))
    identity = lane.run(Slice(MODEL, 42, "mmstar")).identity
    assert identity.identical == 0 and identity.reasons == {"dataset view": 3}, identity.explain()
    assert "erqa: 2 rows in the data root" in " ".join(identity.notes)


def test_a_view_benchmark_missing_from_the_data_root_says_which_and_checks_the_other_six(tmp_path, release):
    prepared = four_benchmark_data(tmp_path / "data", release)
    archive = _archive(tmp_path, prepared, GOLDEN_DATASET_SHA256, view=(*VIEW, "blink"))
    lane = ArchiveLane.create(release, data_root=tmp_path / "data", archive_root=str(archive))
    identity = lane.run(Slice(MODEL, 42, "erqa")).identity
    assert identity.ok and set(identity.not_compared) == {"dataset_sha256", "prompt_contract_sha256"}
    assert identity.not_compared["dataset_sha256"] == (
        f"the run's dataset view is not all here (blink: {lane.dataset_path('blink')}: not in the data root)")
    assert len(identity.fields) == 6


def test_every_hash_field_is_compared_on_its_own(tmp_path, release):
    """A row whose archived value differs in one hash field alone is a difference (each field is compared)."""
    from trace_lib.archive.identity import difference
    from trace_lib.archive.reader import open_archive

    prepared = four_benchmark_data(tmp_path / "data", release)
    dataset = _view(release, prepared).dataset_sha256
    archive = open_archive(_archive(tmp_path, prepared, dataset))
    key = archive.find(MODEL, 42, "mmstar")
    row = next(iter(archive.iter_slice(key)))
    ours = our_identity(prepared["mmstar"][0], model_id=MODEL, dataset_sha256=dataset)
    assert difference(row, ours) is None
    from trace_lib.archive.schema import COMMON_SAMPLE_COLUMNS

    schema_hashes = [c for c in COMMON_SAMPLE_COLUMNS if c.endswith("_sha256") and c != "response_sha256"]
    assert len(schema_hashes) == 8
    for name in schema_hashes:  # the public schema's list, not the module's own
        other = ("f" * 64,) if name == "ordered_media_sha256" else "f" * 64
        diff = difference(replace(row, **{name: other}), ours)
        assert diff is not None and name in diff.fields, name
