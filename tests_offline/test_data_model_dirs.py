"""Model directories: local registration (sha256set), marker checks, deep verification, pinned download (through a
loopback Hub: the endpoint reached once before the first request, a refused one one line at once, a model already in
place needing none)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from trace_lib.slices import ModelDescriptor
from trace_lib.data.hub_access import ENDPOINT_HINT, EndpointCheck
from trace_lib.data.model_dirs import MARKER_NAME, download_model, register_local, verify_model_dir
from trace_lib.errors import InputError
from trace_lib.testing.hub_server import REFUSED_REASON, LoopbackHub, refused_url

COMMIT = "b" * 40


def _fake_checkpoint(path):
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    (path / "model.safetensors").write_bytes(b"\x01" * 64)
    (path / "tokenizer.json").write_text("{}")
    return path


def test_register_local_then_verify(tmp_path):
    directory = _fake_checkpoint(tmp_path / "merged")
    revision = register_local(directory, slug="merged", source=f"org/repo@{COMMIT}")
    assert revision.startswith("sha256set:") and len(revision) == len("sha256set:") + 64
    marker = json.loads((directory / MARKER_NAME).read_text())
    assert marker["immutable_revision"] == revision and marker["file_count"] == 3
    desc = ModelDescriptor("merged", str(directory), revision, f"org/repo@{COMMIT}", "Merged")
    report = verify_model_dir(desc)
    assert report.ok and report.content_revision == revision
    assert register_local(directory, slug="merged", source=f"org/repo@{COMMIT}") == revision  # marker excluded


def test_changed_or_extra_file_fails_deep_verification(tmp_path):
    directory = _fake_checkpoint(tmp_path / "merged")
    revision = register_local(directory, slug="merged", source=f"org/repo@{COMMIT}")
    desc = ModelDescriptor("merged", str(directory), revision, f"org/repo@{COMMIT}", "Merged")
    (directory / "model.safetensors").write_bytes(b"\x02" * 64)
    (directory / "README.md").write_text("x")
    problems = verify_model_dir(desc).problems
    assert any("file set changed" in p and "README.md" in p for p in problems)
    assert any("content changed: model.safetensors" in p for p in problems)
    assert verify_model_dir(desc, deep=False).ok  # the shallow check only reads the marker


def test_wrong_slug_or_revision_is_reported(tmp_path):
    directory = _fake_checkpoint(tmp_path / "m")
    revision = register_local(directory, slug="m", source=f"org/repo@{COMMIT}")
    other = ModelDescriptor("other", str(directory), "sha256set:" + "0" * 64, f"org/repo@{COMMIT}", "M")
    problems = verify_model_dir(other, deep=False).problems
    assert any("slug (expected 'other', found 'm')" in p for p in problems)
    assert any(f"immutable_revision (expected 'sha256set:{'0' * 64}', found '{revision}')" in p for p in problems)


def test_missing_directory_says_how_to_fix(tmp_path):
    desc = ModelDescriptor("m", str(tmp_path / "absent"), COMMIT, f"org/repo@{COMMIT}", "M")
    assert "prepare-models" in verify_model_dir(desc).problems[0]


def test_download_requires_the_commit_to_resolve_to_itself_and_the_full_file_set(tmp_path):
    def snapshot_download(repo_id, revision, local_dir, token):
        _fake_checkpoint_files(local_dir)

    hub = SimpleNamespace(
        model_info=lambda repo, revision, token, files_metadata: SimpleNamespace(
            sha=revision, siblings=[SimpleNamespace(rfilename=n) for n in
                                    ("config.json", "model.safetensors", "tokenizer.json")]),
        snapshot_download=snapshot_download,
    )
    desc = ModelDescriptor("m", str(tmp_path / "models" / "m"), COMMIT, f"org/repo@{COMMIT}", "M")
    report = download_model(desc, hub=hub)
    assert report.ok and verify_model_dir(desc).ok
    assert json.loads((tmp_path / "models" / "m" / MARKER_NAME).read_text())["resolved_commit"] == COMMIT

    moved = SimpleNamespace(**{**hub.__dict__, "model_info": lambda repo, revision, token, files_metadata:
                               SimpleNamespace(sha="c" * 40, siblings=[])})
    other = ModelDescriptor("n", str(tmp_path / "models" / "n"), COMMIT, f"org/repo@{COMMIT}", "N")
    with pytest.raises(InputError, match="revision does not resolve to itself"):
        download_model(other, hub=moved)
    assert not (tmp_path / "models" / "n").exists()


def _fake_checkpoint_files(local_dir):
    from pathlib import Path

    path = Path(local_dir)
    (path / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    (path / "model.safetensors").write_bytes(b"\x01" * 64)
    (path / "tokenizer.json").write_text("{}")


@pytest.mark.parametrize(("marker", "deep", "problem"), [
    ([], False, "marker is not a JSON object"),
    ("str", False, "marker is not a JSON object"),
    ("FILE_SHA256", True, "file_sha256 is not an object"),
])
def test_a_revision_marker_of_the_wrong_shape_is_a_problem_not_a_traceback(tmp_path, marker, deep, problem):
    directory = _fake_checkpoint(tmp_path / "m")
    revision = register_local(directory, slug="m", source=f"org/repo@{COMMIT}")
    if marker == "FILE_SHA256":
        marker = {**json.loads((directory / MARKER_NAME).read_text()), "file_sha256": "x"}
    (directory / MARKER_NAME).write_text(json.dumps(marker))
    desc = ModelDescriptor("m", str(directory), revision, f"org/repo@{COMMIT}", "M")
    assert any(problem in p for p in verify_model_dir(desc, deep=deep).problems)


def test_a_local_checkpoint_is_checked_under_verify_none_too(tmp_path):
    import os

    from trace_lib.data.model_dirs import local_model_problems

    assert "model directory is missing" in local_model_problems(tmp_path / "absent")[0]
    directory = tmp_path / "m"
    directory.mkdir()
    assert local_model_problems(directory) == [f"{directory}: config.json is missing"]  # transformers would go to a hub
    os.mkfifo(directory / "config.json")  # the loader would block on it
    assert local_model_problems(directory) == [f"{directory / 'config.json'}: is a FIFO, not a regular file"]
    (directory / "config.json").unlink()
    (directory / "config.json").write_text("{}")
    assert local_model_problems(directory) == []


def test_download_through_the_hub_reaches_the_endpoint_once_first(tmp_path):
    repo = _fake_checkpoint(tmp_path / "hub" / "m")
    desc = ModelDescriptor("m", str(tmp_path / "models" / "m"), COMMIT, f"org/repo@{COMMIT}", "M")
    with LoopbackHub({("org/repo", COMMIT): repo}) as hub:
        report = download_model(desc, check=EndpointCheck(hub.url))
    assert report.ok and verify_model_dir(desc).ok
    assert hub.requests[0] == "HEAD /" and hub.requests.count("HEAD /") == 1
    assert hub.requests[1] == f"GET /api/models/org/repo/revision/{COMMIT}"


def test_a_refused_endpoint_is_one_line_at_once_and_leaves_nothing(tmp_path):
    url = refused_url()
    desc = ModelDescriptor("m", str(tmp_path / "models" / "m"), COMMIT, f"org/repo@{COMMIT}", "M")
    start = time.monotonic()
    with pytest.raises(InputError) as refused:
        download_model(desc, check=EndpointCheck(url))
    assert time.monotonic() - start < 5
    assert str(refused.value).startswith(f"{url}: cannot connect to the Hugging Face Hub endpoint (")
    assert str(refused.value).endswith(ENDPOINT_HINT) and not (tmp_path / "models").exists()


def test_cli_prepare_models_needs_no_endpoint_for_a_model_in_place(tmp_path, release):
    repo = _fake_checkpoint(tmp_path / "hub" / "m")
    with LoopbackHub({("org/repo", COMMIT): repo}) as hub:
        download_model(ModelDescriptor("m", str(tmp_path / "models" / "m"), COMMIT, f"org/repo@{COMMIT}", "M"),
                       check=EndpointCheck(hub.url))
    url = refused_url()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_ENDPOINT": url,
           "HF_HUB_DISABLE_TELEMETRY": "1", "TRACE_ROOT": str(release.path)}
    env.pop("TRACE_REPRO_DEBUG", None)

    def prepare(slug: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "trace_lib", "prepare-models", "--model", slug,
                               str(tmp_path / "models" / slug), COMMIT, f"org/repo@{COMMIT}", "M"], env=env,
                              capture_output=True, text=True, timeout=120)

    present = prepare("m")
    assert present.returncode == 0 and "m: present at" in present.stdout, present.stderr
    start = time.monotonic()
    missing = prepare("n")
    assert time.monotonic() - start < 10
    assert missing.returncode == 1 and missing.stderr == (
        f"[prepare-models] n: error: HF_ENDPOINT {url}: cannot connect to the Hugging Face Hub endpoint "
        f"({REFUSED_REASON}); {ENDPOINT_HINT}\n")


def test_a_fifo_anywhere_in_a_local_checkpoint_is_named_before_a_loader_or_a_registration_opens_it(tmp_path):
    """A FIFO where a tokenizer file belongs would block the engine's loader for ever, and ``--register-local``
    left it out of the revision it registered (exit 0): it is a problem of the directory, as one at config.json."""
    import os

    from trace_lib.data.model_dirs import local_model_problems

    directory = tmp_path / "m"
    (directory / "sub").mkdir(parents=True)
    (directory / "config.json").write_text("{}")
    (directory / "model.safetensors").write_bytes(b"w")
    os.mkfifo(directory / "tokenizer.json")
    (directory / "sub" / "gone.json").symlink_to(tmp_path / "absent")
    assert local_model_problems(directory) == [f"{directory / 'sub' / 'gone.json'}: is a symbolic link, not a regular "
                                               "file", f"{directory / 'tokenizer.json'}: is a FIFO, not a regular file"]
    with pytest.raises(InputError, match="sub/gone.json: is a symbolic link"):
        register_local(directory, slug="m", source=f"org/m@{'0' * 40}")
    assert not (directory / MARKER_NAME).exists()
