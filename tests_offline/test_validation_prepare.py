"""``validation prepare``: the download (``download_parquet``) against a loopback Hub, where a refused endpoint
is one line naming it at once and leaves nothing, a copy with the pinned sha256 is kept with no request, offline
mode keeps its one line and connects to nothing, and a working endpoint is reached once; and a parquet it
refuses, or a disk that fills, leaves the work directory as it found it (the images of the rows before the
refused one, the directories made for them and the work directory itself are taken away again); a declared
image size that is not two integers is one line, where ``int(None)`` was a traceback."""

from __future__ import annotations

import copy
import errno
import hashlib
import os
import time
from pathlib import Path

import pytest

from trace_lib.data.hub_access import ENDPOINT_HINT, NO_HUB_HINT, EndpointCheck
from trace_lib.errors import InputError
from trace_lib.testing.cli_runner import run_cli
from trace_lib.testing.hub_server import LoopbackHub, refused_url
from trace_lib.validation.pins import DatasetIdentity
from trace_lib.validation.prepare import download_parquet
from trace_lib.validation.tiny import build_tiny_parquet

pytestmark = pytest.mark.offline

PAYLOAD = b"PAR1 not really a parquet, but pinned by its sha256 PAR1"
IDENTITY = DatasetIdentity(repo_id="owner/validation", revision="f" * 40, file="data/validation.parquet",
                           file_sha256=hashlib.sha256(PAYLOAD).hexdigest(), file_size_bytes=len(PAYLOAD), row_count=1,
                           manifest_sha256=None)


@pytest.fixture
def served(tmp_path: Path) -> Path:
    """The repository directory a LoopbackHub serves at IDENTITY's revision."""
    root = tmp_path / "hub"
    (root / "data").mkdir(parents=True)
    (root / "data" / "validation.parquet").write_bytes(PAYLOAD)
    return root


def test_a_refused_endpoint_is_one_line_at_once_and_leaves_nothing(tmp_path, hf_cache):
    url = refused_url()
    start = time.monotonic()
    with pytest.raises(InputError) as refused:
        download_parquet(tmp_path / "work" / "inputs", expected=IDENTITY, check=EndpointCheck(url))
    assert time.monotonic() - start < 5
    assert str(refused.value).startswith(f"{url}: cannot connect to the Hugging Face Hub endpoint (")
    assert str(refused.value).endswith(ENDPOINT_HINT) and "\n" not in str(refused.value)
    assert not (tmp_path / "work").exists()


def test_the_pinned_file_is_downloaded_once_and_a_complete_copy_needs_no_request(tmp_path, served, hf_cache):
    dest = tmp_path / "inputs"
    with LoopbackHub({(IDENTITY.repo_id, IDENTITY.revision): served}) as hub:
        path = download_parquet(dest, expected=IDENTITY, check=EndpointCheck(hub.url))
        assert path == dest / IDENTITY.file and path.read_bytes() == PAYLOAD
        assert hub.requests[0] == "HEAD /"
        assert any(r.startswith("GET /datasets/owner/validation/resolve/") for r in hub.requests)
        seen = list(hub.requests)
        assert download_parquet(dest, expected=IDENTITY, check=EndpointCheck(hub.url)) == path
        assert hub.requests == seen  # kept: nothing asked of the Hub
    assert download_parquet(dest, expected=IDENTITY, check=EndpointCheck(refused_url())) == path


def test_offline_mode_keeps_its_one_line_and_connects_to_nothing(tmp_path, served, hf_cache, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with LoopbackHub({(IDENTITY.repo_id, IDENTITY.revision): served}) as hub:
        with pytest.raises(InputError) as offline:
            download_parquet(tmp_path / "inputs", expected=IDENTITY, check=EndpointCheck(hub.url))
    assert hub.requests == []
    text = str(offline.value)
    assert text.startswith(f"{IDENTITY.repo_id}@{IDENTITY.revision}:{IDENTITY.file}: Hugging Face Hub download "
                           "failed: LocalEntryNotFoundError: ")  # hf_hub_download's own offline line
    assert text.endswith(NO_HUB_HINT) and not (tmp_path / "inputs").exists()


def _parquet(release, tmp_path: Path, change=None, *, keep_schema: bool = True) -> Path:  # noqa: ANN001
    """The tiny validation parquet, its rows passed through ``change(rows)`` (keeping the schema, or inferring the
    changed rows' types)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path, _ = build_tiny_parquet(release, Path(tmp_path) / "tiny.parquet")
    if change is not None:
        table = pq.read_table(path)
        rows = copy.deepcopy(table.to_pylist())
        change(rows)
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema if keep_schema else None), path)
    return path


def _prepare(release, parquet: Path, work: Path):  # noqa: ANN001, ANN202
    return run_cli(["validation", "prepare", "--trace-root", str(release.path), "--unpinned", "--parquet",
                    str(parquet), "--work-dir", str(work)])


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("existing", [False, True], ids=["new-work-dir", "prepared-before"])
def test_a_refused_row_leaves_no_image_of_the_rows_before_it(release, tmp_path, existing):
    work = tmp_path / "work"
    bad = _parquet(release, tmp_path / "in", lambda rows: rows[3].__setitem__("task", None))
    if existing:  # a work directory holding another dataset's images (other sizes): they stay, nothing is added
        other, _ = build_tiny_parquet(release, tmp_path / "other.parquet", size=(64, 48))
        assert _prepare(release, other, work).returncode == 0
    before = _tree(tmp_path)
    done = _prepare(release, bad, work)
    assert (done.returncode, done.stderr) == (2, f"error: {bad}: row 3.task: missing or empty\n")
    assert _tree(tmp_path) == before


def test_a_full_disk_while_the_images_are_written_leaves_nothing(release, tmp_path, monkeypatch):
    import trace_lib.validation.prepare as prepare

    parquet = _parquet(release, tmp_path)
    before = _tree(tmp_path)
    real, written = prepare.write_bytes, []

    def write_bytes(path, payload):  # noqa: ANN001, ANN202
        if len(written) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        written.append(path)
        return real(path, payload)

    monkeypatch.setattr(prepare, "write_bytes", write_bytes)
    done = _prepare(release, parquet, tmp_path / "work")
    assert done.returncode == 3 and "No space left on device (ENOSPC)" in done.stderr, done.stderr
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("size", [{"width": None, "height": 42}, {"width": "56", "height": 42}])
def test_a_declared_image_size_that_is_not_two_integers_is_one_line(release, tmp_path, size):
    def change(rows):  # noqa: ANN001, ANN202 - every row's, so that the column has one type
        for row in rows:
            row["image_sizes"] = [size]

    bad = _parquet(release, tmp_path, change, keep_schema=False)
    done = _prepare(release, bad, tmp_path / "work")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"error: {bad}: row 0.image_sizes[0]: declared image size is not two integers "
                           f"(width, height) (found {(size['width'], size['height'])!r})\n")
    assert not (tmp_path / "work").exists()


def test_an_answer_nested_too_deeply_is_one_line(release, tmp_path):
    bad = _parquet(release, tmp_path, lambda rows: rows[0].__setitem__("answer_gt", "[" * 100_000))
    done = _prepare(release, bad, tmp_path / "work")
    assert (done.returncode, done.stderr) == (
        2, f"error: {bad}: row 0.answer_gt: answer_gt is not valid JSON (not strict JSON (arrays or objects nested "
           "too deeply))\n")
