"""``trace-repro receipt``: summarize a JUnit XML produced by pytest (with the trace-repro plugin) over a tiny
throwaway test directory, pytester-style in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trace_lib.cli.main import main
from trace_lib.receipts.junit import load_junit
from trace_lib.testing.child_pytest import child_pytest_argv, child_pytest_env

THROWAWAY_TESTS = '''
import pytest

def test_reads_release(release, receipt):
    receipt("suite_keys", 24)
    release.read_json("rlvr/evaluation/trace_eval/suite.v1.json")

def test_fails():
    assert 1 == 2, "numbers differ"

@pytest.mark.gpu
def test_needs_gpu():
    pytest.skip("no GPU")

@pytest.mark.slow
def test_slow_but_fine():
    pass
'''

INI = """[pytest]
addopts = -p trace_lib.pytest_plugin -p no:cacheprovider -p no:xdist -p no:hypothesispytest -p no:anyio
junit_family = xunit2
markers =
    offline: offline lane
    gpu: needs a GPU
    slow: slow
"""

CONFTEST = '''
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if not item.get_closest_marker("gpu"):
            item.add_marker(pytest.mark.offline)
'''


def _env(release) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["TRACE_ROOT"] = str(release.path)
    return env


@pytest.fixture(scope="module")
def junit_file(release, tmp_path_factory) -> Path:
    project = tmp_path_factory.mktemp("throwaway")
    (project / "pytest.ini").write_text(INI)
    (project / "conftest.py").write_text(CONFTEST)
    (project / "test_throwaway.py").write_text(THROWAWAY_TESTS)
    out = project / "junit.xml"
    subprocess.run(child_pytest_argv("-q", f"--junitxml={out}", "test_throwaway.py"), cwd=project,
                   env=child_pytest_env(_env(release)), capture_output=True, text=True, timeout=300)
    return out


def receipt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trace_lib", "receipt", *args], capture_output=True, text=True,
                          timeout=120)


def receipt_in_process(capsys, *args: str) -> tuple[int, str, str]:
    """The same entry point as ``trace-repro receipt`` without a new interpreter (for the cheap cases)."""
    code = main(["receipt", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_summary_counts_outcomes_markers_and_release(junit_file, release):
    summary = load_junit(junit_file)
    assert summary.counts == {"passed": 2, "failed": 1, "error": 0, "skipped": 1}
    assert summary.by_marker == {"gpu": {"skipped": 1}, "offline": {"passed": 2, "failed": 1},
                                 "slow": {"passed": 1}}
    assert [(c.test_id.split("::")[-1], c.message) for c in summary.failures] == [
        ("test_fails", "AssertionError: numbers differ")]
    assert summary.release["release_root"] == [str(release.path)]
    assert "rlvr/evaluation/trace_eval/suite.v1.json" in summary.release["file_hashes"]
    assert not summary.ok


def test_cli_exits_1_on_failures_and_prints_markers(junit_file):
    done = receipt(str(junit_file))
    assert done.returncode == 1
    assert "4 tests: 2 passed, 1 failed, 0 error, 1 skipped" in done.stdout
    assert "  gpu      1 skipped" in done.stdout
    assert "FAILED test_throwaway::test_fails: AssertionError: numbers differ" in done.stdout


def test_cli_exits_0_when_everything_passed(tmp_path, capsys):
    path = tmp_path / "ok.xml"
    path.write_text('<testsuites><testsuite name="pytest" tests="1"><testcase classname="t" name="test_a">'
                    '<properties><property name="markers" value="offline"/></properties></testcase>'
                    "</testsuite></testsuites>")
    code, out, _ = receipt_in_process(capsys, str(path), "--json")
    assert code == 0, out
    assert '"status": "ok"' in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("<testsuites><testsuite>", "malformed XML at line 1 column 24"),
        ("<html></html>", "not a JUnit report (expected '<testsuites> or <testsuite>', found '<html>')"),
        (None, "file is missing"),
        ('<testsuites><testsuite><testcase classname="x"/></testsuite></testsuites>',
         "testcase[0]: a <testcase> without a name"),  # was counted as a passed test
    ],
    ids=["truncated", "not-junit", "missing", "nameless-testcase"],
)
def test_bad_file_is_one_error_line_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "r.xml"
    if content is not None:
        path.write_text(content)
    code, _, err = receipt_in_process(capsys, str(path))
    assert code == 2
    assert err.splitlines()[0] == f"error: {path}: {message}"


def test_a_file_without_tests_is_not_a_pass(tmp_path, capsys):
    path = tmp_path / "empty.xml"
    path.write_text('<testsuites><testsuite name="pytest" tests="0"/></testsuites>')
    code, out, _ = receipt_in_process(capsys, str(path))
    assert code == 1 and "status: nothing verified (the file holds no test cases)" in out


@pytest.mark.parametrize("encoding", ["bogus", "shift_jis", "rot13", "idna", "latin-1"])
def test_a_declared_encoding_is_not_followed_the_receipt_is_utf8(tmp_path, capsys, encoding):
    """Every text input is UTF-8 (``decoding``): an encoding the XML declares was handed to expat, so an unknown
    one was a LookupError traceback (exit 1), a multi-byte one a ValueError, ``idna`` a UnicodeError."""
    path = tmp_path / "r.xml"
    path.write_text(f'<?xml version="1.0" encoding="{encoding}"?><testsuites><testsuite><testcase classname="t" '
                    'name="test_\u00e9"/></testsuite></testsuites>', encoding="utf-8")
    code, out, err = receipt_in_process(capsys, str(path))
    assert (code, err) == (0, ""), err
    assert "status: ok" in out


def test_a_receipt_that_is_not_utf8_names_the_byte(tmp_path, capsys):
    path = tmp_path / "r.xml"
    path.write_bytes(b'<?xml version="1.0" encoding="latin-1"?><testsuites><testcase name="\xe9"/></testsuites>')
    code, out, err = receipt_in_process(capsys, str(path))
    assert (code, out) == (2, "")
    assert err == f"error: {path}: not UTF-8 text at byte offset 68 (bytes e9); save it as UTF-8\n"
