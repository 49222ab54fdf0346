"""Bad input on the CLI: one ``error:`` line naming file and field, exit 2 (or 1 for findings), no traceback,
nothing half-written. Regression cases from the CLI audit (each used to end in a Python traceback)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trace_lib.slices import ModelDescriptor
from trace_lib.cli.main import main
from trace_lib.data.model_dirs import download_model
from trace_lib.errors import InputError
from trace_lib.release import identity
from trace_lib.testing.synthetic_campaign import build_toy_campaign

MODEL = "trace-qwen2.5-vl-3b"
REPO_ROOT = Path(__file__).resolve().parents[1]


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _release_copy(release, dest: Path, rel: str, text: str) -> Path:
    """A copy of the release's ``rlvr/`` tree under ``dest`` with ``rel`` replaced by ``text``."""
    shutil.copytree(release.file("rlvr"), dest / "rlvr")
    (dest / rel).write_text(text)
    return dest


def test_results_json_that_is_not_an_object_is_one_line(capsys, tmp_path, release):
    root = _release_copy(release, tmp_path / "rel", identity.RESULTS, "[]")
    code, _, err = _cli(capsys, "plan", "--trace-root", str(root))
    assert code == 2
    assert identity.RESULTS in _one_error_line(err)


def test_validation_results_that_are_not_an_object_are_a_finding(capsys, tmp_path, release):
    root = _release_copy(release, tmp_path / "rel", identity.VALIDATION_RESULTS, "[1]")
    code, out, err = _cli(capsys, "validation", "verify", "--trace-root", str(root), "release")
    assert code == 1 and "Traceback" not in err
    assert f"{identity.VALIDATION_RESULTS}: document must be a JSON object" in out + err  # the preflight's message


def test_summarize_out_below_a_file_is_a_usage_error(capsys, tmp_path, release):
    campaign = tmp_path / "campaign"
    build_toy_campaign(campaign, tmp_path / "data", model=MODEL, accuracy={(42, "erqa"): 0.4}, rows={"erqa": 10})
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    code, _, err = _cli(capsys, "summarize", "--trace-root", str(release.path), "--campaign-root", str(campaign),
                        "--out", str(blocker / "sub"))
    assert code == 2
    assert f"{blocker}: --out: is a regular file, not a directory" in _one_error_line(err)
    assert blocker.read_text() == "x"


def test_fetch_release_bad_url_or_timeout_writes_nothing(capsys, tmp_path):
    dest = tmp_path / "dest"
    code, _, err = _cli(capsys, "fetch-release", "--dest", str(dest), "--base-url", "notaurl")
    assert code == 2
    assert _one_error_line(err).startswith("error: --base-url: ")
    for timeout in ("0", "1e10"):  # a huge timeout overflows the socket's deadline: a range, like every timeout
        with pytest.raises(SystemExit) as exit_:
            _cli(capsys, "fetch-release", "--dest", str(dest), "--base-url", "http://127.0.0.1:9",
                 "--timeout", timeout)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and "argument --timeout: must be a number of seconds > 0" in err
    assert not dest.exists()


def test_train_prepare_cache_dir_that_is_a_file(capsys, tmp_path, release):
    blocker = tmp_path / "cache"
    blocker.write_text("x")
    code, _, err = _cli(capsys, "train", "prepare", "--trace-root", str(release.path), "--config", MODEL,
                        "--input-dir", str(tmp_path / "inputs"), "--cache-dir", str(blocker))
    assert code == 2
    assert "--cache-dir: must be a directory" in _one_error_line(err)
    assert not (tmp_path / "inputs").exists()


def _offline_cli(release, cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    """The CLI in a child process with the Hub switched off (HF_HUB_OFFLINE=1: no connection is attempted)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRACE_ROOT": str(release.path),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("TRACE_REPRO_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "trace_lib", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_train_prepare_without_the_hub_is_one_line_and_leaves_nothing(tmp_path, release):
    pytest.importorskip("huggingface_hub", reason="train prepare downloads with huggingface_hub")
    proc = _offline_cli(release, tmp_path, "train", "prepare", "--config", MODEL, "--input-dir", "inputs",
                        "--cache-dir", "cache")
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc.stderr)
    assert "maveryn/trace@" in line and "Hugging Face Hub download failed" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(("variables", "line"), [
    ({"HF_ENDPOINT": "http://[::1"}, "error: HF_ENDPOINT http://[::1: not a Hugging Face Hub endpoint"),
    ({"HF_ENDPOINT": "http://127.0.0.1:9", "HTTPS_PROXY": "http://[::1", "HTTP_PROXY": "http://[::1"},
     "error: HF_ENDPOINT http://127.0.0.1:9: the Hugging Face Hub client cannot be made from this environment"),
], ids=["endpoint", "proxy"])
def test_a_malformed_hub_variable_is_one_line_and_leaves_nothing(tmp_path, release, variables, line):
    """Tracebacks before: huggingface_hub's import parsing HF_ENDPOINT (ValueError), its httpx client parsing a
    proxy variable (InvalidURL)."""
    env = {**os.environ, **variables, "TRACE_ROOT": str(release.path),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    for name in ("HF_HUB_OFFLINE", "NO_PROXY", "no_proxy"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "trace_lib", "train", "prepare", "--config", MODEL, "--input-dir",
                           "inputs", "--cache-dir", "cache"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert _one_error_line(proc.stderr).startswith(line)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_validation_prepare_download_without_the_hub_leaves_nothing(tmp_path, release):
    pytest.importorskip("huggingface_hub", reason="validation prepare --download uses huggingface_hub")
    proc = _offline_cli(release, tmp_path, "validation", "prepare", "--download", "--work-dir", "work")
    assert proc.returncode == 2, proc.stderr
    assert "Hugging Face Hub download failed" in _one_error_line(proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


class _UnreachableHub:
    """A huggingface_hub stand-in whose every call fails the way the offline client does (an OSError)."""

    @staticmethod
    def model_info(*_args, **_kwargs):
        raise ConnectionError("Cannot reach https://huggingface.co/api/models/x: offline mode is enabled.")

    snapshot_download = model_info


def test_model_download_without_the_hub_is_an_input_error(tmp_path):
    source = "owner/repo@" + "a" * 40
    descriptor = ModelDescriptor(slug="m", local_path=str(tmp_path / "models" / "m"), revision="a" * 40,
                                 source=source, label="M")
    with pytest.raises(InputError) as caught:
        download_model(descriptor, hub=_UnreachableHub())
    assert caught.value.field == source
    assert "Hugging Face Hub download failed: ConnectionError" in caught.value.render()
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "--tolerance-z", "inf"], "argument --tolerance-z: must be a finite number > 0 (found 'inf')"),
        (["plan", "--tolerance-z", "0"], "argument --tolerance-z: must be a finite number > 0 (found '0')"),
        (["train", "print-config", "--config", "trace-qwen2.5-vl-3b", "--gpus", "0"],
         "argument --gpus: must be an integer >= 1 (found '0')"),
    ],
)
def test_out_of_range_numbers_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
