"""Hostile argument sets, each run in process against one small world (trace_lib.testing.cli_runner): every one
exits with its documented code, prints exactly one ``error:`` line naming the flag or file, never a traceback, and
leaves no new file anywhere in the world (outputs are checked before any work or network)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import types
from pathlib import Path

import pytest

from trace_lib.benchmarks import registry
from trace_lib.generation.store import response_path
from trace_lib.testing.cli_runner import run_cli
from trace_lib.testing.synthetic_campaign import (
    build_toy_campaign,
    toy_mcq_protocol,
    toy_responses,
    toy_rows,
    write_response_file,
    write_toy_dataset,
)

pytestmark = pytest.mark.offline

MODEL = "trace-qwen2.5-vl-3b"
ENV = ("TRACE_ROOT", "TRACE_CAMPAIGN_ROOT", "TRACE_ARCHIVE_ROOT", "TRACE_JUDGE_URL", "TRACE_GPU_GROUPS",
       "TRACE_DATA_ROOT", "TRACE_MODEL_ROOT", "TRACE_JUDGE_LOG_DIR", "TRACE_BACKEND", "TRACE_REPRO_DEBUG")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A toy erqa dataset and response files (good, swapped seed, corrupt), a campaign, a file and a FIFO."""
    root = tmp_path_factory.mktemp("world")
    with pytest.MonkeyPatch.context() as patch:
        module = types.ModuleType("toy_bad_input_erqa")
        module.PROTOCOL = toy_mcq_protocol("erqa")
        patch.setitem(sys.modules, module.__name__, module)
        patch.setitem(registry.PROTOCOLS, "erqa", f"{module.__name__}:PROTOCOL")
        rows = toy_rows(20, seed=3)
        write_toy_dataset(root / "erqa.jsonl", 20, seed=3)
        good = write_response_file(root / "r42.jsonl", model=MODEL, seed=42, benchmark="erqa", rows=rows,
                                   texts=toy_responses(rows, 0.5))
        header, rest = good.read_bytes().split(b"\n", 1)
        (root / "schema.jsonl").write_bytes(header.replace(b"trace-repro-responses-v1", b"v9") + b"\n" + rest)
        (root / "cut_header.jsonl").write_bytes(header[: len(header) // 2] + b"\n" + rest)
        (root / "latin1.jsonl").write_bytes(b'{"index": 0, "response": "caf\xe9"}\n')
        (root / "both.jsonl").write_text(json.dumps({"index": 0, "response": "A", "prediction": "B"}) + "\n")
        campaign = root / "campaign"
        build_toy_campaign(campaign, root / "toy_data", model=MODEL, accuracy={(42, "erqa"): 0.5}, rows={"erqa": 20})
        shutil.copy(root / "erqa.jsonl", root / "toy_data" / "ERQA.tsv")  # where the release's provenance puts it
        swapped = response_path(root / "swapped", model=MODEL, seed=43, benchmark="erqa")
        swapped.parent.mkdir(parents=True)
        shutil.copy(good, swapped)
        (root / "a_file").write_text("x\n")
        os.mkfifo(root / "fifo")
        (root / "pids").mkdir()
        (root / "pids" / "pids.txt").write_bytes(b"12\xff 18100 0 log\n")
        yield root


def _world_state(root: Path) -> dict:
    return {str(p.relative_to(root)): (os.lstat(p).st_mode, os.lstat(p).st_size) for p in root.rglob("*")}


def _score(*argv):
    return ["score", "--benchmark", "erqa", "--dataset", "W/erqa.jsonl", *argv]


# (argv with W = the world, exit code, text the one error line must hold)
CASES = {
    # output paths that are files, under a file, or special: one line, before any work
    "score --out file": (_score("--responses", "W/r42.jsonl", "--out", "W/a_file"), 2, "--out"),
    "score --out under a file": (_score("--responses", "W/r42.jsonl", "--out", "W/a_file/x"), 2, "not a directory"),
    "summarize --out file": (["summarize", "--campaign-root", "W/campaign", "--out", "W/a_file"], 2, "--out"),
    "summarize --stem escapes": (["summarize", "--campaign-root", "W/campaign", "--stem", "../../x"], 2, "--stem"),
    "summarize --stem empty": (["summarize", "--campaign-root", "W/campaign", "--stem", ""], 2, "--stem"),
    "summarize --stem newline": (["summarize", "--campaign-root", "W/campaign", "--stem", "a\nb"], 2, "--stem"),
    "diagnose --out file": (["diagnose", "--campaign-root", "W/campaign", "--against", "W/campaign", "--out",
                             "W/a_file"], 2, "--out"),
    "diagnose without root": (["diagnose", "--against", "W/campaign"], 2, "no candidate run given"),
    "generate --campaign-root file": (["generate", "--campaign-root", "W/a_file", "--benchmark", "erqa"], 2,
                                      "--campaign-root"),
    "judge serve --log-dir file": (["judge", "serve", "--log-dir", "W/a_file"], 2, "--log-dir"),
    "judge serve bad host": (["judge", "serve", "--log-dir", "W/j", "--host", "192.0.2.1"], 2, "--host"),
    "fetch-release --dest file": (["fetch-release", "--dest", "W/a_file"], 2, "--dest"),
    "fetch-runs --dest under file": (["fetch-runs", "--dest", "W/a_file/runs"], 2, "--dest"),
    "fetch-runs unknown seed": (["fetch-runs", "--dest", "W/runs", "--seeds", "45"], 2, "unknown seed 45"),
    "env constraints --out fifo": (["env", "constraints", "--out", "W/fifo"], 2, "a FIFO"),
    "prepare-data --data-root file": (["prepare-data", "--data-root", "W/a_file", "--benchmark", "erqa"], 2,
                                      "--data-root"),
    # a directory option naming a file is refused even where the command would write nothing
    "plan --campaign-root file": (["plan", "--campaign-root", "W/a_file"], 2, "--campaign-root"),
    "plan --model-root file": (["plan", "--model-root", "W/a_file"], 2, "--model-root"),
    "validation plan --work-dir file": (["validation", "plan", "--work-dir", "W/a_file"], 2, "--work-dir"),
    "score --data-root file": (["score", "--campaign-root", "W/campaign", "--data-root", "W/a_file"], 2,
                               "--data-root"),
    "benchmarks --trace-root file": (["benchmarks", "--trace-root", "W/a_file"], 2, "--trace-root"),
    # input that is not UTF-8, or corrupt, or of an unknown schema
    "plain file not UTF-8": (_score("--responses", "W/latin1.jsonl", "--out", "W/o", "--seed", "42"), 2,
                             "byte offset 29"),
    "score --responses fifo": (_score("--responses", "W/fifo", "--out", "W/o"), 2, "a FIFO, not a regular file"),
    "receipt on a fifo": (["receipt", "W/fifo"], 2, "a FIFO"),
    "pids.txt not UTF-8": (["judge", "stop", "--log-dir", "W/pids"], 2, "byte offset 2"),
    "unknown schema version": (_score("--responses", "W/schema.jsonl", "--out", "W/o"), 2, "schema version"),
    "corrupt header": (_score("--responses", "W/cut_header.jsonl", "--out", "W/o"), 2, "line 1 is not a JSON"),
    # contradictions
    "both response and prediction": (_score("--responses", "W/both.jsonl", "--out", "W/o", "--seed", "42"), 2,
                                     "both response and prediction"),
    "--responses with --campaign-root": (_score("--responses", "W/r42.jsonl", "--out", "W/o", "--campaign-root",
                                                "W/campaign"), 2, "contradict"),
    "--seed disagrees with header": (_score("--responses", "W/r42.jsonl", "--out", "W/o", "--seed", "43"), 2,
                                     "header.seed"),
    "--model-id disagrees with header": (_score("--responses", "W/r42.jsonl", "--out", "W/o", "--model-id", "m2"),
                                         2, "header.model"),
    "seed 42 filed under seed_43": (["score", "--campaign-root", "W/swapped", "--data-root", "W/toy_data",
                                     "--benchmark", "erqa"], 1, "header.seed"),
    # numeric ranges (argparse types, one place)
    "--batch-size 0": (["generate", "--batch-size", "0"], 2, "--batch-size: must be an integer >= 1"),
    "--concurrency 0": (["generate", "--concurrency", "0"], 2, "--concurrency: must be an integer >= 1"),
    "--grace -1": (["judge", "stop", "--grace", "-1"], 2, "--grace: must be a number of seconds >= 0"),
    "--seed -1": (_score("--seed", "-1"), 2, "--seed: must be an integer >= 0"),
    "--port-start 0": (["judge", "serve", "--port-start", "0"], 2, "--port-start: must be a port number"),
    "--watch 0": (["status", "--watch", "0"], 2, "--watch: must be a number of seconds > 0"),
    "--request-timeout 1e10": (["generate", "--request-timeout", "1e10"], 2,  # overflowed a time_t deadline
                               "--request-timeout: must be a number of seconds > 0 and at most 10,000,000"),
    "fetch-release --timeout 1e10": (["fetch-release", "W/rel", "--timeout", "1e10"], 2, "--timeout: must be"),
    "fetch-runs --timeout 0": (["fetch-runs", "--dest", "W/archive", "--timeout", "0"], 2, "--timeout: must be"),
    "--gpu-memory-utilization 2": (["generate", "--gpu-memory-utilization", "2"], 2, "--gpu-memory-utilization"),
    "empty --gpu-groups": (["plan", "--gpu-groups", " "], 2, "--gpu-groups"),
    "--gpu-groups garbage": (["plan", "--gpu-groups", "a;b"], 2, "--gpu-groups"),
    "--seeds abc": (["plan", "--seeds", "abc"], 2, "--seeds"),
    "--benchmark bogus": (["plan", "--benchmark", "bogus"], 2, "known:"),
}


@pytest.mark.parametrize(("argv", "code", "needle"), CASES.values(), ids=CASES.keys())
def test_hostile_arguments_get_one_line_and_leave_nothing(world, monkeypatch, argv, code, needle):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(world)  # default work directories land inside the world, where new files are noticed
    module = types.ModuleType("toy_bad_input_erqa")
    module.PROTOCOL = toy_mcq_protocol("erqa")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(registry.PROTOCOLS, "erqa", f"{module.__name__}:PROTOCOL")
    before = _world_state(world)
    result = run_cli([re.sub(r"^W(?=/|$)", str(world), a) for a in argv])
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert result.returncode == code, result.stderr
    assert len(errors) == 1, result.stderr
    assert needle in errors[0], errors[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert "(found None)" not in errors[0] and "did you mean" not in errors[0] or "bogus" not in argv
    assert _world_state(world) == before


@pytest.mark.parametrize(("variable", "argv", "target"), [
    ("TRACE_ROOT", ["check"], "W/a_file"), ("TRACE_ROOT", ["check"], "W/missing_dir"),
    ("TRACE_ROOT", ["benchmarks"], "W/a_file"), ("TRACE_CAMPAIGN_ROOT", ["plan"], "W/a_file"),
    ("TRACE_MODEL_ROOT", ["plan"], "W/a_file"), ("TRACE_DATA_ROOT", ["score", "--campaign-root", "W/campaign"],
                                                 "W/a_file"),
    ("TRACE_VALIDATION_DIR", ["validation", "plan"], "W/a_file"),
])
def test_a_directory_from_the_environment_is_named_by_its_variable(world, monkeypatch, variable, argv, target):
    """The error names where the value came from: TRACE_ROOT=FILE used to be reported as --trace-root."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(world)
    monkeypatch.setenv(variable, target.replace("W", str(world), 1))
    before = _world_state(world)
    result = run_cli([a.replace("W", str(world), 1) if a.startswith("W/") else a for a in argv])
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert result.returncode == 2 and len(errors) == 1, result.stderr
    assert errors[0].split(":")[1].split()[0] == variable, errors[0]
    assert "Traceback" not in result.stderr and _world_state(world) == before


def test_every_hint_names_a_command_that_exists():
    from trace_lib.cli.main import COMMANDS

    named = set()
    for path in Path(__file__).resolve().parents[1].joinpath("trace_lib").rglob("*.py"):
        named |= {(m, path.name) for m in re.findall(r"'trace-repro ([a-z][a-z-]*)", path.read_text())}
    assert {pair for pair in named if pair[0] not in COMMANDS} == set()


def test_a_failed_start_leaves_no_header_only_response_file(tmp_path):
    from trace_lib.generation.store import SliceIdentity, SliceStore

    path = tmp_path / "generation" / "r.jsonl"
    identity = SliceIdentity(slice="m-seed42-erqa", model="m", model_revision="r", seed=42, benchmark="erqa",
                             contract={"x": 1})
    with pytest.raises(RuntimeError):
        with SliceStore.open(path, identity):
            raise RuntimeError("the dataset could not be read")  # after the store was opened, before any row
    assert not path.exists()


def test_diagnose_notices_a_response_file_filed_under_another_seed(world, monkeypatch):
    from trace_lib.diagnose.campaign_view import load_campaign_slice
    from trace_lib.errors import InputError
    from trace_lib.reports.collect import SliceKey

    with pytest.raises(InputError, match=r"header.seed: .*expected 43, found 42"):
        load_campaign_slice(world / "swapped", SliceKey(MODEL, 43, "erqa"))
