"""``train prepare``'s Hub downloads (``training/prepare.download``) against a loopback Hub: the endpoint is reached
once, before the first request (the revision check), then exactly the profile's files are fetched; a refused endpoint
is one line naming it at once and leaves nothing; inputs that are refused ask nothing of the Hub; offline mode keeps its
one line and connects to nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trace_lib.data.hub_access import ENDPOINT_HINT, NO_HUB_HINT, EndpointCheck
from trace_lib.errors import InputError
from trace_lib.testing.hub_server import LoopbackHub, refused_url
from trace_lib.training.prepare import BASE_MODEL_DIR, DATASET_DIR, download, run_prepare
from trace_lib.training.profiles import load_profile

pytestmark = pytest.mark.offline


@pytest.fixture
def profile(release):  # noqa: ANN001, ANN201
    return load_profile(release, "trace-qwen2.5-vl-3b")


@pytest.fixture
def repos(tmp_path: Path, profile) -> dict[tuple[str, str], Path]:  # noqa: ANN001
    """The dataset and base-model repositories at the profile's revisions, each file a few bytes, plus one file of
    each that the profile does not ask for."""
    d, base = profile.dataset, profile.base_model
    dataset, model = tmp_path / "hub" / "dataset", tmp_path / "hub" / "model"
    for root, files in ((dataset, (*d.parquet_files, *d.manifests)), (model, base.required_files)):
        for rel in (*files, "README.md"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(rel)
    return {(d.repo_id, d.revision): dataset, (base.repo_id, base.revision): model}


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and ".cache" not in p.parts)


def test_the_endpoint_is_reached_once_first_then_exactly_the_pinned_files_come(tmp_path, profile, repos, hf_cache):
    with LoopbackHub(repos) as hub:
        download(profile, tmp_path / "inputs", None, check=EndpointCheck(hub.url))
    d, base = profile.dataset, profile.base_model
    assert hub.requests[0] == "HEAD /" and hub.requests.count("HEAD /") == 1
    assert hub.requests[1] == f"GET /api/datasets/{d.repo_id}/revision/{d.revision}"
    assert _files(tmp_path / "inputs" / DATASET_DIR) == sorted((*d.parquet_files, *d.manifests))
    assert _files(tmp_path / "inputs" / BASE_MODEL_DIR) == sorted(base.required_files)


def test_a_refused_endpoint_is_one_line_at_once_and_leaves_nothing(tmp_path, release, profile, hf_cache):
    url = refused_url()
    start = time.monotonic()
    with pytest.raises(InputError) as refused:
        run_prepare(release, profile, tmp_path / "inputs", check=EndpointCheck(url))
    assert time.monotonic() - start < 5
    assert str(refused.value).startswith(f"{url}: cannot connect to the Hugging Face Hub endpoint (")
    assert str(refused.value).endswith(ENDPOINT_HINT) and not (tmp_path / "inputs").exists()


def test_refused_inputs_ask_nothing_of_the_hub(tmp_path, release, profile, repos):
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "old.parquet").write_text("x")  # every prepare starts from an empty directory
    with LoopbackHub(repos) as hub:
        with pytest.raises(InputError, match="must be an empty directory"):
            run_prepare(release, profile, tmp_path / "inputs", check=EndpointCheck(hub.url))
    assert hub.requests == []


def test_offline_mode_keeps_its_one_line_and_connects_to_nothing(tmp_path, profile, repos, hf_cache, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with LoopbackHub(repos) as hub:
        with pytest.raises(InputError) as offline:
            download(profile, tmp_path / "inputs", None, check=EndpointCheck(hub.url))
    assert hub.requests == []
    text = str(offline.value)
    assert text.startswith(f"{profile.dataset.repo_id}@{profile.dataset.revision}: Hugging Face Hub download failed: ")
    assert text.endswith(NO_HUB_HINT)
