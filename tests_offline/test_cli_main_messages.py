"""Newcomer frictions from issue 25: what a first run prints must be true and say what to do."""

from __future__ import annotations

import json
import sys
import types

import pytest

from trace_lib.benchmarks import registry
from trace_lib.testing.cli_runner import run_cli
from trace_lib.testing.synthetic_campaign import (
    build_toy_campaign,
    toy_mcq_protocol,
    toy_responses,
    toy_rows,
    write_toy_dataset,
)

pytestmark = pytest.mark.offline
MODEL = "trace-qwen2.5-vl-3b"


@pytest.fixture
def erqa(monkeypatch):
    module = types.ModuleType("toy_newcomer_erqa")
    module.PROTOCOL = toy_mcq_protocol("erqa")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(registry.PROTOCOLS, "erqa", f"{module.__name__}:PROTOCOL")


def _plain(path, rows, texts):
    path.write_text("".join(json.dumps({"index": r["index"], "response": t}) + "\n" for r, t in zip(rows, texts)))
    return path


def test_score_on_a_plain_file_gives_its_verdict_with_model_id_and_says_how_without(tmp_path, erqa):
    dataset = write_toy_dataset(tmp_path / "erqa.jsonl", 400, seed=3)
    rows = toy_rows(400, seed=3)
    plain = _plain(tmp_path / "plain.jsonl", rows, toy_responses(rows, 0.36))
    base = ["score", "--benchmark", "erqa", "--dataset", str(dataset), "--responses", str(plain), "--seed", "42"]
    result = run_cli([*base, "--out", str(tmp_path / "a"), "--model-id", MODEL])
    # one seed of one slice: a verdict is printed; inconclusive is not a pass, so it exits 1 (findings)
    outcome = next(word for word in ("REPRODUCED", "DIFFERS", "INCONCLUSIVE") if word in result.stdout)
    assert result.returncode == (0 if outcome == "REPRODUCED" else 1), result.stderr
    assert "vs canonical" in result.stdout
    assert json.loads((tmp_path / "a" / "scores.json").read_text())["model"] == MODEL
    result = run_cli([*base, "--out", str(tmp_path / "b")])
    assert result.returncode == 0 and "pass --model-id SLUG" in result.stdout  # scored, no verdict to give


def test_score_campaign_after_one_benchmark_is_one_line_for_the_rest(tmp_path, erqa):
    root = tmp_path / "campaign"
    build_toy_campaign(root, tmp_path / "data", model=MODEL, accuracy={(42, "erqa"): 0.4}, rows={"erqa": 10})
    result = run_cli(["score", "--campaign-root", str(root), "--data-root", str(tmp_path / "data")])
    assert result.returncode == 1
    pending = [line for line in result.stderr.splitlines() if "not generated yet" in line]
    assert len(pending) == 1 and "23 of 24 slice(s)" in pending[0], result.stderr
    assert "no responses (found" not in result.stderr


def test_status_counts_existing_scores(tmp_path, erqa):
    root = tmp_path / "campaign"
    build_toy_campaign(root, tmp_path / "data", model=MODEL, accuracy={(42, "erqa"): 0.4}, rows={"erqa": 10},
                       scored={(42, "erqa")})  # 10 toy rows: not the suite's row count, still a scores.json
    result = run_cli(["status", "--campaign-root", str(root), "--model-id", MODEL, "--seeds", "42"])
    assert "(1 scores.json present)" in result.stdout, result.stdout


def test_validation_help_promises_what_plan_prints():
    help_text = run_cli(["validation", "--help"]).stdout
    plan = run_cli(["validation", "plan"]).stdout
    assert "``plan`` prints one line per" in help_text and not plan.lstrip().startswith("{")


def test_train_print_config_composed_without_the_train_extra_is_one_line():
    import importlib.util

    if all(importlib.util.find_spec(name) for name in ("omegaconf", "hydra", "verl")):
        pytest.skip("the train extra is installed here: --composed works")
    result = run_cli(["train", "print-config", "--config", MODEL, "--composed"])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "pip install -e '.[train]'" in result.stderr


@pytest.mark.parametrize("command", sorted(__import__("trace_lib.cli.main", fromlist=["COMMANDS"]).COMMANDS))
def test_every_command_renders_its_help(command):
    """``trace-repro COMMAND --help`` prints, for every command (argparse %-formats help texts: a ``90%`` in a
    shared option's help once made ``score --help`` a traceback)."""
    from trace_lib.cli.main import build_parser

    parser = build_parser([command])
    subparser = parser._subparsers._group_actions[0].choices[command]  # noqa: SLF001 - the built command's parser
    assert f"usage: trace-repro {command}" in subparser.format_help()


def test_pytest_help_renders_with_the_plugin_options(pytester):
    """``pytest --help`` with the trace-repro plugin lists its options (pytest %-formats help texts too)."""
    pytester.makeconftest('pytest_plugins = ["trace_lib.pytest_plugin"]\n')
    result = pytester.runpytest_inprocess("--help")
    assert result.ret == 0 and "--margin" in result.stdout.str()
