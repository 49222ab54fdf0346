"""``trace-repro fetch-runs`` through real ``huggingface_hub`` against a loopback stand-in for the Hub: exactly the
selected parts are downloaded and verified; a tampered part or manifest is refused naming the file and both hashes
(nothing from it is placed); unknown ids get one line with close matches; a second fetch downloads nothing; an
endpoint that refuses connections is one line naming it at once (reached once per fetch, never for files the HF cache
holds), while a transient 503 is still retried; --timeout bounds the endpoint check and each body read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest

from trace_lib.archive import hashes
from trace_lib.archive.fetch import Selection, fetch_runs, hub_downloader, release_pins
from trace_lib.archive.reader import PartDigestError, open_archive
from trace_lib.data.hub_access import ENDPOINT_HINT, hub_timeouts
from trace_lib.errors import InputError, UsageError
from trace_lib.release.identity import RESULTS
from trace_lib.release.locate import locate_release
from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run
from trace_lib.testing.hub_server import REFUSED_REASON, LoopbackHub, refused_url

pytestmark = pytest.mark.offline

REF = Path(os.environ.get("TRACE_ROOT", "/work/shared/reference/trace-rlvr"))
REPO = "maveryn/trace-eval-runs"
REVISION = "c" * 40
RUN = "qwen2.5-vl-3b-comparison-temp06-seeds42-44-v1"
MODEL = "trace-qwen2.5-vl-3b"


def _samples(n: int) -> tuple[SampleSpec, ...]:
    return tuple(SampleSpec(str(i), i, hashes.text_sha256(f"r{i}"), f"q{i}", f"a{i}", score=float(i % 2))
                 for i in range(n))


@pytest.fixture
def world(tmp_path: Path):
    """A Hub repository directory with one run, and a release copy whose first source artifact pins it."""
    hub_dir = tmp_path / "hub"
    written = write_archive_run(hub_dir / "runs" / RUN, RUN, [
        SliceSpec(MODEL, 42, "mmstar", _samples(4), 50.0), SliceSpec(MODEL, 43, "mmstar", _samples(4), 50.0),
        SliceSpec(MODEL, 42, "erqa", _samples(2), 50.0),
    ])
    release_dir = tmp_path / "release"
    shutil.copytree(REF, release_dir)
    results_path = release_dir / RESULTS
    doc = json.loads(results_path.read_text())
    art = doc["source_artifacts"][0]
    assert art["run_id"] == RUN
    art.update(repository_revision=REVISION, manifest_sha256=written.manifest_sha256,
               result_sha256=written.result_sha256)
    results_path.write_text(json.dumps(doc))
    return locate_release(release_dir), hub_dir, written


def _fetch(release, hub, tmp_path, selection, *, endpoint=None, timeout=None, **kw):
    download = hub_downloader(endpoint=endpoint or hub.url, cache_dir=str(tmp_path / "cache"), timeout=timeout)
    return fetch_runs(release, tmp_path / "dest", selection, progress=False, download=download, **kw)


def test_pins_come_from_the_release():
    pins = release_pins(locate_release(REF))
    assert [p.run_id for p in pins][-1] == "trace-iid-validation-2000-answer-seed42-8models-v1"
    assert pins[-1].validation and pins[-1].manifest_sha256 and pins[-1].result_path.startswith("metadata/")
    assert {p.revision[:8] for p in pins} == {"4178a839", "4ca25af7", "cf0d14ae"}


def test_fetch_downloads_exactly_the_selected_slice(world, tmp_path):
    release, hub_dir, _ = world
    with LoopbackHub({(REPO, REVISION): hub_dir}) as hub:
        report = _fetch(release, hub, tmp_path, Selection(model_ids=(MODEL,), seeds=(42,), benchmarks=("mmstar",)))
        gets = [r for r in hub.requests if r.startswith("GET")]
        again = _fetch(release, hub, tmp_path, Selection(model_ids=(MODEL,), seeds=(42,), benchmarks=("mmstar",)))
        assert len([r for r in hub.requests if r.startswith("GET")]) == len(gets)  # nothing downloaded twice
    assert hub.requests.count("HEAD /") == 1 and hub.requests[0] == "HEAD /"  # reached once, before the first file
    assert report.runs == [RUN] and again.reused == len(report.files)
    assert all("seed=42/benchmark=mmstar" in unquote(g) for g in gets if "/data/" in g)
    assert len([f for f in report.files if f.endswith(".parquet")]) == 3
    archive = open_archive(tmp_path / "dest")
    assert [r.response_text for r in archive.iter_slice(archive.find(MODEL, 42, "mmstar"))] == ["a0", "a1", "a2", "a3"]


def test_tampered_part_is_refused_and_not_placed(world, tmp_path):
    release, hub_dir, _ = world
    manifest = json.loads((hub_dir / "runs" / RUN / "metadata/manifest.json").read_text())
    part = next(a for a in manifest["artifacts"] if a["config_name"] == "responses" and a["seed"] == 43)
    with LoopbackHub({(REPO, REVISION): hub_dir}) as hub:
        hub.tamper.add(f"runs/{RUN}/{part['parquet_path']}")
        with pytest.raises(PartDigestError) as info:
            _fetch(release, hub, tmp_path, Selection(seeds=(43,)))
    text = info.value.render()
    assert part["parquet_path"] in text and part["parquet_sha256"] in text and "found '" in text
    assert not (tmp_path / "dest" / "runs" / RUN / part["parquet_path"]).exists()
    assert not (tmp_path / "dest" / "runs" / RUN / "metadata/manifest.json").exists()


def test_manifest_differing_from_the_release_pin_is_refused(world, tmp_path):
    release, hub_dir, written = world
    with LoopbackHub({(REPO, REVISION): hub_dir}) as hub:
        hub.tamper.add(f"runs/{RUN}/metadata/manifest.json")
        with pytest.raises(PartDigestError, match=written.manifest_sha256):
            _fetch(release, hub, tmp_path, Selection())


def test_unknown_ids_are_one_line_with_close_matches(world, tmp_path):
    release, hub_dir, _ = world
    with LoopbackHub({(REPO, REVISION): hub_dir}) as hub:
        with pytest.raises(UsageError, match="did you mean: trace-qwen2.5-vl-3b"):
            _fetch(release, hub, tmp_path, Selection(model_ids=("trace-qwen2.5-vl3b",)))
        with pytest.raises(UsageError, match="did you mean: mmstar"):
            _fetch(release, hub, tmp_path, Selection(benchmarks=("mmstr",)), benchmark_ids=["mmstar", "erqa"])
        assert hub.requests == []


def test_cli_fetch_runs_through_hf_endpoint(world, tmp_path):
    release, hub_dir, _ = world
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_CACHE": str(tmp_path / "c"),
           "HF_HUB_DISABLE_TELEMETRY": "1", "TRACE_ROOT": str(release.path)}
    with LoopbackHub({(REPO, REVISION): hub_dir}) as hub:
        env["HF_ENDPOINT"] = hub.url
        ok = subprocess.run([sys.executable, "-m", "trace_lib", "fetch-runs", "--dest", str(tmp_path / "d"),
                             "--model-id", MODEL, "--benchmark", "erqa", "--timeout", "30"], env=env,
                            capture_output=True, text=True)
        bad = subprocess.run([sys.executable, "-m", "trace_lib", "fetch-runs", "--dest", str(tmp_path / "d"),
                              "--benchmark", "erqaa"], env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "verified and placed" in ok.stdout
    assert open_archive(tmp_path / "d").find(MODEL, 42, "erqa")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --benchmark: unknown benchmark") and "did you mean: erqa" in bad.stderr.splitlines()[0]


def test_cli_fetch_runs_from_a_refused_endpoint_fails_at_once_naming_it(world, tmp_path):
    release, _, _ = world
    url = refused_url()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_CACHE": str(tmp_path / "c"),
           "HF_HUB_DISABLE_TELEMETRY": "1", "TRACE_ROOT": str(release.path), "HF_ENDPOINT": url}
    start = time.monotonic()
    bad = subprocess.run([sys.executable, "-m", "trace_lib", "fetch-runs", "--dest", str(tmp_path / "d"),
                          "--model-id", MODEL, "--benchmark", "erqa"], env=env, capture_output=True, text=True,
                         timeout=120)
    took = time.monotonic() - start
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == (f"error: HF_ENDPOINT {url}: cannot connect to the Hugging Face Hub endpoint "
                          f"({REFUSED_REASON}); {ENDPOINT_HINT}\n")
    assert took < 10, f"{took:.1f} s: the Hub's retries of a refused connection (about 24 s) are back"
    assert not (tmp_path / "d").exists()  # nothing half-written


def test_a_refused_endpoint_given_to_the_downloader_is_named_at_once(world, tmp_path):
    release, _, _ = world
    url = refused_url()
    start = time.monotonic()
    with pytest.raises(InputError) as refused:
        fetch_runs(release, tmp_path / "dest", Selection(seeds=(42,)), progress=False,
                   download=hub_downloader(endpoint=url, cache_dir=str(tmp_path / "cache")))
    assert time.monotonic() - start < 10
    assert str(refused.value) == (f"{url}: cannot connect to the Hugging Face Hub endpoint ({REFUSED_REASON}); "
                                  f"{ENDPOINT_HINT}")


def test_files_the_hf_cache_holds_need_no_endpoint(world, tmp_path):
    release, hub_dir, _ = world
    selection = Selection(model_ids=(MODEL,), seeds=(42,), benchmarks=("erqa",))
    with LoopbackHub({(REPO, REVISION): hub_dir}) as hub:
        first = _fetch(release, hub, tmp_path, selection)
    shutil.rmtree(tmp_path / "dest")
    start = time.monotonic()
    again = _fetch(release, hub, tmp_path, selection, endpoint=refused_url())  # placed again from the HF cache
    assert time.monotonic() - start < 5 and sorted(again.files) == sorted(first.files)
    (tmp_path / "dest" / first.files[0]).unlink()
    shutil.rmtree(tmp_path / "cache")
    with pytest.raises(InputError, match="cannot connect to the Hugging Face Hub endpoint"):
        _fetch(release, hub, tmp_path, selection, endpoint=refused_url())


def test_timeout_bounds_the_endpoint_check_and_each_body_read(world, tmp_path, monkeypatch):
    from huggingface_hub import constants

    release, hub_dir, _ = world
    selection = Selection(model_ids=(MODEL,), seeds=(42,), benchmarks=("erqa",))
    before = constants.HF_HUB_DOWNLOAD_TIMEOUT
    with LoopbackHub({(REPO, REVISION): hub_dir}) as hub:
        hub.slow, hub.slow_seconds = 1, 4.0  # the manifest's body: answered after 4 s
        start = time.monotonic()
        with hub_timeouts(0.5):
            report = _fetch(release, hub, tmp_path, selection, timeout=0.5)
        took = time.monotonic() - start
        gets = [r for r in hub.requests if r.startswith("GET") and r.endswith("metadata/manifest.json")]
    assert report.runs == [RUN] and constants.HF_HUB_DOWNLOAD_TIMEOUT == before
    assert len(gets) == 2 and took < 4, f"{took:.1f} s, {len(gets)} GETs: the body read waited past --timeout"

    class Unanswered:  # a host that accepts no connection within the timeout
        def head(self, url, *, timeout, follow_redirects):
            raise httpx.ConnectTimeout("timed out")

    monkeypatch.setattr("huggingface_hub.get_session", Unanswered)
    shutil.rmtree(tmp_path / "cache")
    with pytest.raises(InputError, match=r"accepted no connection within 0\.5 s \(--timeout\)"):
        _fetch(release, hub, tmp_path, selection, endpoint="http://127.0.0.1:9", timeout=0.5)


def test_a_transient_503_is_still_retried_by_the_hub(world, tmp_path):
    release, hub_dir, _ = world
    selection = Selection(model_ids=(MODEL,), seeds=(42,), benchmarks=("erqa",))
    with LoopbackHub({(REPO, REVISION): hub_dir}) as hub:
        hub.unavailable = 1  # the manifest's first request: 503, then it answers
        report = _fetch(release, hub, tmp_path, selection)
        heads = [r for r in hub.requests if r.startswith("HEAD") and r.endswith("metadata/manifest.json")]
    assert len(heads) == 2 and report.runs == [RUN]


def test_a_file_in_place_with_other_bytes_is_fetched_again_and_part_manifests_are_placed(world, tmp_path):
    release, hub_dir, _ = world
    selection = Selection(model_ids=(MODEL,), seeds=(42,), benchmarks=("erqa",))
    with LoopbackHub({(REPO, REVISION): hub_dir}) as hub:
        report = _fetch(release, hub, tmp_path, selection)
        manifests = [f for f in report.files if f.endswith(".manifest.json")]
        assert len(manifests) == 3 and all((tmp_path / "dest" / f).is_file() for f in manifests)
        part = next(f for f in report.files if f.endswith(".parquet"))
        (tmp_path / "dest" / part).unlink()  # placed as a hard link of the HF cache: replace, not edit in place
        (tmp_path / "dest" / part).write_bytes(b"not the part")
        again = _fetch(release, hub, tmp_path, selection)
    assert part in again.files and again.reused == len(report.files) - 1
    assert (tmp_path / "dest" / part).read_bytes() == (hub_dir / part).read_bytes()


def test_placing_a_file_refuses_a_special_target_and_a_failed_copy_leaves_nothing(tmp_path, monkeypatch):
    import errno
    import os

    from trace_lib.archive.fetch import _place
    from trace_lib.errors import UsageError

    source = tmp_path / "cache" / "benchmark_scores.json"
    source.parent.mkdir()
    source.write_text('{"a": 1}')
    out = tmp_path / "out"
    out.mkdir()
    fifo, link = out / "fifo.json", out / "link.json"
    os.mkfifo(fifo)
    link.symlink_to(tmp_path / "mine.json")
    for target in (fifo, link):
        with pytest.raises(UsageError):
            _place(source, target)
    monkeypatch.setattr("trace_lib.archive.fetch.os.link", lambda *a: (_ for _ in ()).throw(OSError(errno.EXDEV, "")))
    monkeypatch.setattr("trace_lib.archive.fetch.shutil.copyfileobj", lambda *a: (_ for _ in ()).throw(
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
    target = out / "benchmark_scores.json"
    target.write_text("old")
    with pytest.raises(OSError):
        _place(source, target)
    assert target.read_text() == "old" and sorted(p.name for p in out.iterdir()) == [
        "benchmark_scores.json", "fifo.json", "link.json"]
    monkeypatch.undo()
    _place(source, target)
    assert target.read_text() == '{"a": 1}'


def test_a_cache_dir_that_is_a_file_is_refused_before_any_request(tmp_path, capsys):
    from trace_lib.cli.main import main

    blocker = tmp_path / "cache"
    blocker.write_text("x")
    code = main(["fetch-runs", "--dest", str(tmp_path / "d"), "--cache-dir", str(blocker)])
    assert code == 2 and "--cache-dir: is a regular file, not a directory" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
