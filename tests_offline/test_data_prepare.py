"""Pinned data: sources from the release, atomic checksum-verified downloads, the content-bound manifest; Hub
sources against a loopback Hub (the endpoint reached once before the first request, never for what the HF cache or a
kept snapshot serves, a refused one one line at once)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import MappingProxyType, SimpleNamespace

import pytest

from trace_lib.data.manifest import (
    build_dataset_entry, check_manifest, load_manifest, manifest_path, new_manifest, with_entry, write_manifest,
)
from trace_lib.data.hub_access import ENDPOINT_HINT, EndpointCheck
from trace_lib.data.prepare import ArtifactSource, fetch_artifact, load_artifact_sources
from trace_lib.errors import InputError
from trace_lib.release.suite import Benchmark, Suite, load_suite
from trace_lib.testing.hub_server import LoopbackHub, refused_url
from trace_lib.testing.loopback_http import serving
from trace_lib.testing.tiny_bench import build_tiny_tsv, tiny_tsv_protocol


@pytest.fixture
def served(tmp_path):
    """A loopback HTTP server for files under tmp_path/www; yields (base_url, www_dir)."""
    www = tmp_path / "www"
    www.mkdir()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            target = www / self.path.lstrip("/")
            if not target.is_file():
                self.send_response(404)
                self.end_headers()
                return
            data = target.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with serving(Handler) as url:
        yield url, www


def test_every_suite_benchmark_has_a_pinned_source(release):
    sources = load_artifact_sources(release)
    suite = load_suite(release)
    assert list(sources) == list(suite.keys)
    for key, source in sources.items():
        assert source.alias == suite.benchmark(key).official_alias
        if source.kind == "url":
            assert source.url.startswith(("http://", "https://")) and "huggingface.co" not in source.url
        else:
            assert len(source.revision) == 40 and source.repo_id.count("/") == 1
        assert source.kind != "hf_snapshot" or source.md5 is None


def test_hugging_face_resolve_urls_become_pinned_hub_files(release):
    doc = release.read_json("rlvr/evaluation/trace_eval/benchmark_provenance.v1.json")
    sources = load_artifact_sources(release)
    for entry in doc["benchmarks"]:
        url = entry["evaluation_artifact"].get("url", "")
        source = sources[entry["benchmark_id"]]
        if "/resolve/" in url:
            assert source.kind == "hf_file" and url.endswith(f"/resolve/{source.revision}/{source.filename}")
        if "/tree/" in url:
            assert source.kind == "hf_snapshot" and url.endswith(f"/tree/{source.revision}")


def test_url_download_verifies_md5_and_installs_atomically(served, tmp_path):
    base, www = served
    payload = b"index\tquestion\n0\thello\n"
    (www / "MMStar.tsv").write_bytes(payload)
    source = ArtifactSource("mmstar", "MMStar", "url", url=f"{base}/MMStar.tsv",
                            md5=hashlib.md5(payload).hexdigest())
    fetched = fetch_artifact(source, tmp_path / "data", progress=False)
    assert fetched.downloaded and fetched.path == tmp_path / "data" / "MMStar.tsv"
    assert fetched.path.read_bytes() == payload
    again = fetch_artifact(source, tmp_path / "data", progress=False)
    assert not again.downloaded  # verified copy kept


def test_checksum_mismatch_keeps_nothing(served, tmp_path):
    base, www = served
    (www / "x.tsv").write_bytes(b"tampered")
    source = ArtifactSource("mmstar", "MMStar", "url", url=f"{base}/x.tsv", md5="0" * 32)
    with pytest.raises(InputError, match=r"mmstar\.md5: checksum mismatch"):
        fetch_artifact(source, tmp_path / "data", progress=False)
    assert list((tmp_path / "data").iterdir()) == []


def test_http_error_keeps_nothing(served, tmp_path):
    base, _ = served
    source = ArtifactSource("mmstar", "MMStar", "url", url=f"{base}/missing.tsv", md5="0" * 32)
    with pytest.raises(OSError):
        fetch_artifact(source, tmp_path / "data", progress=False)
    assert list((tmp_path / "data").iterdir()) == []


def test_hub_sources_call_huggingface_hub_with_the_pinned_revision(tmp_path):
    cached = tmp_path / "cache" / "ERQA.tsv"
    cached.parent.mkdir()
    cached.write_bytes(b"data")
    calls = []

    def hf_hub_download(**kwargs):
        calls.append(kwargs)
        return str(cached)

    source = ArtifactSource("erqa", "ERQA", "hf_file", repo_id="org/data", revision="a" * 40, filename="ERQA.tsv",
                            md5=hashlib.md5(b"data").hexdigest())
    fetched = fetch_artifact(source, tmp_path / "data", hub=SimpleNamespace(hf_hub_download=hf_hub_download))
    assert calls == [{"repo_id": "org/data", "filename": "ERQA.tsv", "repo_type": "dataset", "revision": "a" * 40}]
    assert fetched.path.read_bytes() == b"data"


HUB_REPO, HUB_REVISION = "owner/bench", "a" * 40
TABLE = b"index\tquestion\n0\thello\n"
HUB_FILE = ArtifactSource("erqa", "ERQA", "hf_file", repo_id=HUB_REPO, revision=HUB_REVISION, filename="ERQA.tsv",
                          md5=hashlib.md5(TABLE).hexdigest())
HUB_SNAPSHOT = ArtifactSource("evochart", "EvoChart", "hf_snapshot", repo_id=HUB_REPO, revision=HUB_REVISION,
                              split="train")


@pytest.fixture
def hub_repo(tmp_path):
    """The dataset repository a LoopbackHub serves at HUB_REVISION: one table and one snapshot part."""
    root = tmp_path / "hub-repo"
    (root / "data").mkdir(parents=True)
    (root / "ERQA.tsv").write_bytes(TABLE)
    (root / "data" / "train-00000-of-00001.parquet").write_bytes(b"snapshot part")
    return root


def test_a_hub_file_is_downloaded_after_one_check_and_then_served_by_the_hf_cache(tmp_path, hub_repo, hf_cache):
    data_root = tmp_path / "data"
    with LoopbackHub({(HUB_REPO, HUB_REVISION): hub_repo}) as hub:
        fetched = fetch_artifact(HUB_FILE, data_root, progress=False, check=EndpointCheck(hub.url))
    assert fetched.downloaded and fetched.path.read_bytes() == TABLE
    assert hub.requests[0] == "HEAD /" and hub.requests.count("HEAD /") == 1
    fetched.path.unlink()  # the table is gone; the HF cache still holds the pinned file
    again = fetch_artifact(HUB_FILE, data_root, progress=False, check=EndpointCheck(refused_url()))
    assert again.path.read_bytes() == TABLE


def test_a_refused_endpoint_fails_every_hub_source_at_once_and_keeps_nothing(tmp_path, hf_cache):
    url = refused_url()
    check = EndpointCheck(url)  # one per command: the second source is refused without connecting again
    data_root = tmp_path / "data"
    for source in (HUB_FILE, HUB_SNAPSHOT):
        start = time.monotonic()
        with pytest.raises(InputError) as refused:
            fetch_artifact(source, data_root, progress=False, check=check)
        assert time.monotonic() - start < 5, source.key
        assert str(refused.value).startswith(f"{url}: cannot connect to the Hugging Face Hub endpoint (")
        assert str(refused.value).endswith(ENDPOINT_HINT)
    assert list(data_root.iterdir()) == []


def test_a_snapshot_is_downloaded_after_the_check_and_a_kept_one_needs_no_request(tmp_path, hub_repo, monkeypatch):
    built = []

    def build_table(key, snapshot, split, table, images):
        built.append(sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file()))
        table.write_text("index\n")

    monkeypatch.setattr("trace_lib.data.hf_tables.build_table", build_table)
    data_root = tmp_path / "data"
    with LoopbackHub({(HUB_REPO, HUB_REVISION): hub_repo}) as hub:
        fetched = fetch_artifact(HUB_SNAPSHOT, data_root, progress=False, check=EndpointCheck(hub.url))
    assert fetched.downloaded and built == [["ERQA.tsv", "data/train-00000-of-00001.parquet"]]
    assert hub.requests[0] == "HEAD /" and hub.requests.count("HEAD /") == 1
    kept = fetch_artifact(HUB_SNAPSHOT, data_root, progress=False, check=EndpointCheck(refused_url()))
    assert not kept.downloaded and kept.path == fetched.path


def _tiny_suite(rows: int) -> Suite:
    bench = Benchmark("tiny", "Tiny", "Tiny", "Cat", "official_vlmevalkit", rows, "a", "s")
    return Suite("trace_eval_v1", (bench,), MappingProxyType({"Cat": ("tiny",)}),
                 MappingProxyType({"official_vlmevalkit": ("tiny",)}), MappingProxyType({}), "f" * 40, "e" * 64)


@pytest.fixture
def prepared(tmp_path):
    data_root = tmp_path / "data"
    build_tiny_tsv(data_root / "Tiny.tsv", style="multi_image_mcq", rows=6)
    source = ArtifactSource("tiny", "Tiny", "url", url="http://unused/Tiny.tsv")
    suite = _tiny_suite(6)
    entry = build_dataset_entry(source, data_root, tiny_tsv_protocol("tiny"), suite, workers=2)
    manifest = with_entry(new_manifest(suite, data_root), entry)
    write_manifest(manifest_path(data_root), manifest)
    return data_root, suite, manifest


def test_manifest_records_rows_files_and_images(prepared):
    data_root, suite, manifest = prepared
    entry = manifest.datasets["tiny"]
    assert entry.rows == 6 and len(entry.row_media) == 6
    assert all(len(r.media) == 2 for r in entry.row_media)
    assert {f.path for f in entry.files} == {"Tiny.tsv"}
    assert len(entry.media_files) == 12 and all(m.format == "PNG" for m in entry.media_files)
    assert manifest.dataset_revision.startswith("trace-final25-datasets-v2:")
    assert check_manifest(load_manifest(manifest_path(data_root)), suite) == []


def test_manifest_round_trip_re_derives_hashes(prepared):
    data_root, _, manifest = prepared
    assert load_manifest(manifest_path(data_root)) == manifest
    path = manifest_path(data_root)
    path.write_text(path.read_text().replace(manifest.datasets["tiny"].row_media[0].source_row_hash, "0" * 64))
    with pytest.raises(InputError, match="do not re-derive"):
        load_manifest(path)


@pytest.mark.parametrize(("damage", "field", "what"), [
    (lambda doc: doc.update(datasets=[]), "datasets", "wrong type"),
    (lambda doc: doc["datasets"]["tiny"]["row_media"][2].pop("media_sha256"), "datasets.tiny.row_media[2]",
     "missing field 'media_sha256'"),
    (lambda doc: doc["datasets"]["tiny"].pop("alias"), "datasets.tiny", "missing field 'alias'"),
    (lambda doc: doc["datasets"]["tiny"]["files"][0].update(extra=1), "datasets.tiny", "wrong type"),
    (lambda doc: doc.pop("suite_sha256"), "suite_sha256, vlmevalkit_commit, data_root", "missing field"),
    (lambda doc: doc.update(schema_version="trace-repro-datasets-v0"), "schema_version", "unknown manifest schema"),
    (lambda doc: doc.update(view_snapshot_sha256="0" * 64), "view_snapshot_sha256",
     "view snapshot does not re-derive"),
    (lambda doc: doc["datasets"]["tiny"].update(dataset_snapshot_sha256="0" * 64),
     "datasets.tiny.dataset_snapshot_sha256", "dataset snapshot does not re-derive"),
    (lambda doc: doc["datasets"]["tiny"]["row_media"][1].update(media_set_sha256="0" * 64),
     "datasets.tiny.row_media[1]", "row hashes do not re-derive"),
])
def test_a_damaged_manifest_is_one_line_naming_where(prepared, damage, field, what):
    import json

    data_root, _, _ = prepared
    path = manifest_path(data_root)
    doc = json.loads(path.read_text())
    damage(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as refused:
        load_manifest(path)
    assert refused.value.file == str(path) and refused.value.field == field and what in str(refused.value)


def test_changed_image_is_found(prepared):
    data_root, suite, manifest = prepared
    image = data_root / manifest.datasets["tiny"].media_files[0].path
    image.write_bytes(image.read_bytes()[:-1] + b"\x00")
    problems = check_manifest(manifest, suite)
    assert problems == [f"datasets.tiny: {manifest.datasets['tiny'].media_files[0].path}: content changed (sha256 differs)"]
    assert check_manifest(manifest, suite, rehash=False) == []  # the quick check (doctor) compares sizes only


def test_every_problem_of_a_manifest_against_the_suite_and_the_disk_is_listed(prepared):
    data_root, suite, manifest = prepared
    entry = manifest.datasets["tiny"]
    (data_root / "Tiny.tsv").write_bytes((data_root / "Tiny.tsv").read_bytes() + b"\n")
    gone = data_root / entry.media_files[0].path
    gone.unlink()
    gone.mkdir()  # a directory where the image was
    other = Suite(suite.suite_id, (*suite.benchmarks, replace(suite.benchmarks[0], key="other")), suite.categories,
                  suite.routes, suite.generation, suite.vlmevalkit_commit, "d" * 64)
    size = (data_root / "Tiny.tsv").stat().st_size
    assert check_manifest(manifest, other, keys=["tiny", "other"]) == [
        f"suite_sha256: manifest built for another suite (expected {'d' * 64}, found {suite.sha256})",
        f"datasets.tiny: Tiny.tsv: size changed (expected {size - 1}, found {size})",
        f"datasets.tiny: {entry.media_files[0].path}: file is missing",
        "datasets.other: not prepared"]
    assert check_manifest(manifest, other, keys=["tiny"])[-1].endswith(": file is missing")  # "other" not asked
    short = with_entry(manifest, replace(entry, row_media=entry.row_media[:5]))
    assert check_manifest(short, suite)[0] == ("datasets.tiny.row_media: differs from the suite (expected 6 rows, "
                                               "found 5)")


def test_a_manifest_of_part_of_the_suite_has_no_dataset_revision(tmp_path):
    """The view snapshot (and ``dataset_revision``) covers the whole suite: with a benchmark still to prepare there
    is none, and the manifest still reads back."""
    data_root = tmp_path / "data"
    build_tiny_tsv(data_root / "Tiny.tsv", style="multi_image_mcq", rows=6)
    two = _tiny_suite(6)
    two = Suite(two.suite_id, (*two.benchmarks, replace(two.benchmarks[0], key="later")), two.categories, two.routes,
                two.generation, two.vlmevalkit_commit, two.sha256)
    source = ArtifactSource("tiny", "Tiny", "url", url="http://unused/Tiny.tsv")
    partial = with_entry(new_manifest(two, data_root), build_dataset_entry(source, data_root, tiny_tsv_protocol("tiny"),
                                                                           two))
    assert not partial.complete and partial.view_snapshot_sha256 is None and partial.dataset_revision is None
    write_manifest(manifest_path(data_root), partial)
    assert load_manifest(manifest_path(data_root)).datasets.keys() == {"tiny"}


def test_the_manifest_file_is_canonical_json_and_a_newline_and_keeps_its_creation_time(prepared):
    import json

    from trace_lib.jsonio import canonical_json_ascii

    data_root, _, manifest = prepared
    text = manifest_path(data_root).read_text()
    assert text == canonical_json_ascii(json.loads(text)) + "\n"
    again = with_entry(replace(manifest, created_at="2020-01-01T00:00:00+00:00"), manifest.datasets["tiny"])
    assert again.created_at == "2020-01-01T00:00:00+00:00" and again.updated_at > again.created_at


def test_a_row_count_note_needs_a_suite_count_to_differ_from():
    from trace_lib.data.manifest import row_count_note

    assert row_count_note("tiny", 5, None) is None and row_count_note("tiny", 6, 6) is None
    assert row_count_note("tiny", 5, 6) == "tiny: 5 rows in the data root, the suite lists 6; hashed as found"


def test_a_row_whose_prompt_has_no_image_is_refused(tmp_path):
    from trace_lib.protocol import PromptItem

    data_root = tmp_path / "data"
    build_tiny_tsv(data_root / "Tiny.tsv", rows=6)
    protocol = replace(tiny_tsv_protocol("tiny"), build_prompt=lambda row, image_dir: [PromptItem("text", "Q?")])
    source = ArtifactSource("tiny", "Tiny", "url", url="http://unused/Tiny.tsv")
    with pytest.raises(InputError) as refused:
        build_dataset_entry(source, data_root, protocol, _tiny_suite(6))
    assert refused.value.render() == f"{data_root / 'Tiny.tsv'}: tiny[0]: row has no image"


def test_a_refused_row_leaves_no_image_materialised_before_it(tmp_path):
    """Rows 0-2 materialise their images, row 3 is refused: the images of rows 0-2 go again (with the image
    directory made for them); one that was there before stays, and so does the data file."""
    data_root = tmp_path / "data"
    build_tiny_tsv(data_root / "Tiny.tsv", style="multi_image_mcq", rows=6)
    tiny = tiny_tsv_protocol("tiny")
    rows = tiny.load(data_root / "Tiny.tsv")

    def refuses_row_3(row, image_dir):
        if str(row["index"]) == str(rows[3]["index"]):
            raise InputError("cell is not a list literal", field="rows[3].image")
        return tiny.build_prompt(row, image_dir)

    source = ArtifactSource("tiny", "Tiny", "url", url="http://unused/Tiny.tsv")
    with pytest.raises(InputError, match=r"rows\[3\]\.image: cell is not a list literal"):
        build_dataset_entry(source, data_root, replace(tiny, build_prompt=refuses_row_3), _tiny_suite(6))
    assert sorted(p.relative_to(data_root).as_posix() for p in data_root.rglob("*")) == ["Tiny.tsv"]
    kept = source.image_dir(data_root) / f"{rows[0]['index']}_0.png"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"there before")
    with pytest.raises(InputError):
        build_dataset_entry(source, data_root, replace(tiny, build_prompt=refuses_row_3), _tiny_suite(6))
    assert list(kept.parent.iterdir()) == [kept] and kept.read_bytes() == b"there before"
    kept.unlink()  # not an image
    entry = build_dataset_entry(source, data_root, tiny, _tiny_suite(6))  # a run that succeeds keeps its images
    assert len(list(kept.parent.iterdir())) == 12 and len(entry.media_files) == 12


def test_a_snapshot_s_download_cache_is_not_part_of_the_dataset(tmp_path):
    """huggingface_hub keeps ``.cache`` metadata in a local_dir download: not the benchmark's bytes."""
    data_root = tmp_path / "data"
    build_tiny_tsv(data_root / "Tiny.tsv", style="multi_image_mcq", rows=6)
    snapshot = data_root / "hf" / "Tiny"
    (snapshot / "data").mkdir(parents=True)
    (snapshot / "data" / "train.parquet").write_bytes(b"PAR1")
    (snapshot / ".cache" / "huggingface").mkdir(parents=True)
    (snapshot / ".cache" / "huggingface" / "train.parquet.metadata").write_text("etag\n")
    source = ArtifactSource("tiny", "Tiny", "hf_snapshot", repo_id="org/tiny", revision="a" * 40, split="train")
    counted = []
    entry = build_dataset_entry(source, data_root, tiny_tsv_protocol("tiny"), _tiny_suite(6), progress=counted.append)
    assert [f.path for f in entry.files] == ["Tiny.tsv", "hf/Tiny/data/train.parquet"]
    assert sum(counted) == 6  # progress counts rows


def test_a_data_root_reached_through_a_link_records_the_same_paths(prepared, tmp_path):
    data_root, suite, manifest = prepared
    (tmp_path / "alias").symlink_to(data_root)
    source = ArtifactSource("tiny", "Tiny", "url", url="http://unused/Tiny.tsv")
    entry = build_dataset_entry(source, tmp_path / "alias", tiny_tsv_protocol("tiny"), suite)
    assert entry == manifest.datasets["tiny"]


def test_row_count_must_equal_the_suite(tmp_path):
    data_root = tmp_path / "data"
    build_tiny_tsv(data_root / "Tiny.tsv", rows=5)
    source = ArtifactSource("tiny", "Tiny", "url", url="http://unused/Tiny.tsv")
    with pytest.raises(InputError, match=r"tiny: row count differs from the suite \(expected 6, found 5\)"):
        build_dataset_entry(source, data_root, tiny_tsv_protocol("tiny"), _tiny_suite(6))


def test_generation_refuses_rows_that_differ_from_the_manifest(prepared, release):
    from trace_lib.generation.run import check_against_manifest, prepare_rows

    data_root, _, manifest = prepared
    protocol = tiny_tsv_protocol("tiny")
    rows = protocol.load(data_root / "Tiny.tsv")
    generation = load_suite(release).generation
    prepared_rows = prepare_rows(rows, protocol, data_root / "images" / "Tiny", served_name="m",
                                 generation=generation, seed=42)
    check_against_manifest(prepared_rows, manifest.datasets["tiny"], data_root)  # unchanged: fine
    rows[2] = {**rows[2], "question": "changed"}
    changed = prepare_rows(rows, protocol, data_root / "images" / "Tiny", served_name="m", generation=generation,
                           seed=42)
    with pytest.raises(InputError, match=r"tiny\[2\]: row differs from the dataset manifest"):
        check_against_manifest(changed, replace(manifest.datasets["tiny"]), data_root)


def _pil(seed: int):
    import io

    from PIL import Image

    from trace_lib.testing.tiny_bench import tiny_png

    return Image.open(io.BytesIO(tiny_png(seed, mode="RGBA")))


def test_countqa_table_expands_questions_and_saves_jpegs(tmp_path):
    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.data.hf_tables import build_table

    examples = [
        {"image": _pil(0), "questions": ["How many cups?", " How many chairs? "], "answers": [3, " 4 "],
         "objects": ["cup", "chair"], "categories": "indoor", "is_focused": True, "full_config": {"a": 1}},
        {"image": _pil(1), "questions": ["How many birds?"], "answers": [12]},
    ]
    table = tmp_path / "CountQA.tsv"
    assert build_table("countqa", tmp_path, "test", table, tmp_path / "images" / "CountQA", examples=examples) == 3
    rows = get_protocol("countqa").load(table)
    assert [r["index"] for r in rows] == ["0_0", "0_1", "1_0"]
    assert [r["answer"] for r in rows] == ["3", "4", "12"]
    assert sorted(p.name for p in (tmp_path / "images" / "CountQA").iterdir()) == ["0.jpg", "1.jpg"]
    assert table.read_text().startswith('"index"\t"question"\t"answer"\t"image_path"')


def test_evochart_snapshot_is_downloaded_then_tabled(tmp_path):
    datasets = pytest.importorskip("datasets", reason="building EvoChart from a snapshot needs the datasets library")
    from trace_lib.benchmarks.registry import get_protocol

    def snapshot_download(repo_id, repo_type, revision, local_dir):
        frame = datasets.Dataset.from_dict({
            "image": [_pil(i) for i in range(3)], "question": [" Q0 ", "Q1", "Q2"], "answer": ["1", " 2.5", "x"],
            "attribute": ["a", "b", "c"], "is_clear": [True, False, True], "chart_type": ["bar", "line", "pie"],
        }).cast_column("image", datasets.Image())
        (Path(local_dir) / "data").mkdir()
        frame.to_parquet(str(Path(local_dir) / "data" / "train-00000-of-00001.parquet"))

    source = ArtifactSource("evochart", "EvoChart", "hf_snapshot", repo_id="org/evo", revision="a" * 40,
                            split="train")
    data_root = tmp_path / "data"
    fetched = fetch_artifact(source, data_root, hub=SimpleNamespace(snapshot_download=snapshot_download))
    assert fetched.path == data_root / "EvoChart.tsv"
    rows = get_protocol("evochart").load(fetched.path)
    assert [(r["index"], r["question"]) for r in rows] == [(0, "Q0"), (1, "Q1"), (2, "Q2")]
    assert (data_root / "images" / "EvoChart" / "2.png").is_file()
    suite = _tiny_suite(3)
    suite = Suite(suite.suite_id, (replace(suite.benchmarks[0], key="evochart"),), suite.categories, suite.routes,
                  suite.generation, suite.vlmevalkit_commit, suite.sha256)
    entry = build_dataset_entry(source, data_root, get_protocol("evochart"), suite)
    assert any(f.path.startswith("hf/EvoChart/") for f in entry.files) and len(entry.media_files) == 3


def test_streamed_seeds_check_each_manifest_image_once(prepared, release, tmp_path, monkeypatch):
    import trace_lib.release.load as release_load
    from trace_lib.slices import ModelDescriptor
    from trace_lib.slices import Slice
    from trace_lib.campaign.scheduler import CampaignScheduler, SliceJob
    from trace_lib.generation.run import open_slice_store
    from trace_lib.testing.fake_backend import FakeStreamBackend

    data_root, _, manifest = prepared
    hashed: list[Path] = []
    real = release_load.sha256_file
    monkeypatch.setattr(release_load, "sha256_file", lambda path: hashed.append(Path(path)) or real(path))
    generation = load_suite(release).generation
    model = ModelDescriptor("m", "/nonexistent", "c" * 40, f"org/m@{'c' * 40}", "M")
    protocol = tiny_tsv_protocol("tiny")
    jobs = [SliceJob(slice=Slice("m", seed, "tiny"), protocol=protocol,
                     load_rows=lambda: protocol.load(data_root / "Tiny.tsv"), image_dir=data_root / "images" / "Tiny",
                     generation=generation, dataset=manifest.datasets["tiny"], data_root=data_root,
                     open_store=lambda seed=seed: open_slice_store(tmp_path / "c", Slice("m", seed, "tiny"), model,
                                                                   generation))
            for seed in (42, 43, 44)]
    results = CampaignScheduler(FakeStreamBackend(), chunk_rows=4).run(jobs)
    assert all(r.ok for r in results) and [r.run.generated for r in results] == [6, 6, 6]
    assert len(hashed) == len(set(hashed)) == 12  # 6 rows x 2 images, hashed once for the three seeds


def test_a_forced_snapshot_that_fails_to_go_in_leaves_the_old_one_whole(tmp_path, monkeypatch):
    import errno
    import os

    from trace_lib.data.prepare import _replace_directory

    old, new = tmp_path / "EvoChart", tmp_path / ".EvoChart.x.incomplete"
    (old / "data").mkdir(parents=True)
    (old / "data" / "train.parquet").write_bytes(b"old")
    (new / "data").mkdir(parents=True)
    (new / "data" / "train.parquet").write_bytes(b"new")
    real = os.replace

    def failing(src, dst):
        if str(src) == str(new):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(src, dst)

    monkeypatch.setattr("trace_lib.data.prepare.os.replace", failing)
    with pytest.raises(OSError):
        _replace_directory(new, old)
    monkeypatch.undo()
    assert (old / "data" / "train.parquet").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".EvoChart.x.incomplete", "EvoChart"]  # no aside left
    _replace_directory(new, old)
    assert (old / "data" / "train.parquet").read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == [
        "EvoChart"]


def test_a_datasets_variable_it_cannot_parse_at_import_is_one_line(tmp_path):
    """datasets reads HF_DATASETS_IN_MEMORY_MAX_SIZE with float() when it is imported: 'abc' was a traceback."""
    import os
    import subprocess
    import sys

    pytest.importorskip("datasets", reason="the table builders read Hugging Face datasets")
    code = ("from pathlib import Path; from trace_lib.data.hf_tables import build_table; from trace_lib.errors "
            "import InputError\ntry:\n    build_table('countqa', Path('s'), 'test', Path('t.tsv'), Path('i'))\n"
            "except InputError as exc:\n    print(exc.render())")
    env = {**os.environ, "HF_DATASETS_IN_MEMORY_MAX_SIZE": "abc",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                       os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.startswith("countqa: the datasets library cannot be imported in this environment ("), done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []
