"""``validation prepare --download`` (``download_parquet``) against a loopback Hub: a refused endpoint is one line
naming it at once and leaves nothing; a copy with the pinned sha256 is kept with no request; offline mode keeps its
one line and connects to nothing; a working endpoint is reached once, then the file is downloaded and checked."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from trace_lib.data.hub_access import ENDPOINT_HINT, NO_HUB_HINT, EndpointCheck
from trace_lib.errors import InputError
from trace_lib.testing.hub_server import LoopbackHub, refused_url
from trace_lib.validation.pins import DatasetIdentity
from trace_lib.validation.prepare import download_parquet

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
