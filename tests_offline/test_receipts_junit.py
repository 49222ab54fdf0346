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
    assert summary.release["release_root"] == [release.label]
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


MIXED = """<testsuites><testsuite name="pytest">
<testcase classname="t" name="test_ok"><properties><property name="markers" value="offline,slow"/>
<property name="release_commit" value="abc"/><property name="sha256:a.json" value="1"/>
<property name="verdict" value="differs"/><property name="verdict" value="reproduced"/></properties></testcase>
<testcase name="test_bare"><properties><property name="markers" value=""/><property name="release_commit" value="def"/>
<property name="sha256:a.json" value="2"/><property name="sha256:b.json" value="3"/>
<property name="verdict" value="maybe"/></properties></testcase>
<testcase classname="t" name="test_err"><error>first line

second line</error></testcase>
<testcase classname="t" name="test_skip"><skipped message="no GPU"/><properties><property name="markers" value="gpu"/>
<property name="verdict" value="inconclusive"/></properties></testcase>
</testsuite></testsuites>"""


def test_a_receipt_reports_verdicts_markers_errors_and_a_mixed_release_identity(tmp_path):
    """The last valid ``verdict`` of a test counts (an unknown one is ignored); an empty markers property is
    ``(none)``, a missing one ``(unrecorded)``; an error's message is the first line of its text; a test without a
    classname is named alone; release properties with several values are MIXED and differing hashes are named."""
    path = tmp_path / "r.xml"
    path.write_text(MIXED)
    summary = load_junit(path)
    assert summary.to_json() == {
        "file": str(path), "status": "failed", "tests": 4,
        "counts": {"passed": 2, "failed": 0, "error": 1, "skipped": 1},
        "verdicts": {"reproduced": 1, "differs": 0, "inconclusive": 1},
        "by_marker": {"(none)": {"passed": 1}, "(unrecorded)": {"error": 1}, "gpu": {"skipped": 1},
                      "offline": {"passed": 1}, "slow": {"passed": 1}},
        "release": {"release_commit": ["abc", "def"], "file_hashes": {"a.json": ["1", "2"], "b.json": ["3"]}},
        "failures": [{"test": "t::test_err", "outcome": "error", "message": "first line"}]}
    assert [(c.test_id, c.message, c.markers) for c in summary.cases] == [
        ("t::test_ok", "", ("offline", "slow")), ("test_bare", "", ()), ("t::test_err", "first line", None),
        ("t::test_skip", "no GPU", ("gpu",))]
    assert summary.render_text().splitlines() == [
        f"trace-repro receipt {path}: 4 tests: 2 passed, 0 failed, 1 error, 1 skipped",
        "  verdicts: 1 reproduced, 0 differs, 1 inconclusive",
        "  release_commit: MIXED ['abc', 'def']",
        "  release files hashed: 2; differing between tests: a.json",
        "by marker:",
        "  (none)        1 passed",
        "  (unrecorded)  1 error",
        "  gpu           1 skipped",
        "  offline       1 passed",
        "  slow          1 passed",
        "ERROR t::test_err: first line",
        "status: failed"]
    assert not summary.ok


def _one_suite(tmp_path, cases: str) -> Path:
    path = tmp_path / "r.xml"
    path.write_text(f'<testsuite name="pytest">{cases}</testsuite>')
    return path


def test_an_inconclusive_verdict_is_not_a_pass_even_when_pytest_passed_it(tmp_path, capsys):
    """Status ``inconclusive``, exit 1, and the line says how many verdicts could not tell; a release property
    with one value is printed as it is, and no verdict line appears without verdicts."""
    path = _one_suite(tmp_path, '<testcase classname="t" name="test_a"><properties>'
                                '<property name="verdict" value="inconclusive"/>'
                                '<property name="release_commit" value="abc"/></properties></testcase>')
    summary = load_junit(path)
    assert (summary.status, summary.ok) == ("inconclusive", False)
    code, out, _ = receipt_in_process(capsys, str(path))
    assert code == 1
    assert out.splitlines()[1:3] == ["  verdicts: 0 reproduced, 0 differs, 1 inconclusive", "  release_commit: abc"]
    assert out.splitlines()[-1] == "status: inconclusive (1 verdict(s) could not tell; not a pass)"
    passed = load_junit(_one_suite(tmp_path, '<testcase name="test_a"/>'))
    assert (passed.status, passed.ok) == ("ok", True)
    assert "verdicts:" not in passed.render_text()


def test_a_run_where_every_test_skipped_verified_nothing(tmp_path, capsys):
    """No test passed: ``nothing verified`` with the number skipped, exit 1; no release identity recorded is said."""
    path = _one_suite(tmp_path, '<testcase name="test_a"><skipped message="no GPU"/></testcase>'
                                '<testcase name="test_b"><skipped>  </skipped></testcase>')
    summary = load_junit(path)
    assert (summary.status, summary.ok, [c.message for c in summary.cases]) == ("nothing verified", False,
                                                                                ["no GPU", ""])
    code, out, _ = receipt_in_process(capsys, str(path))
    assert code == 1 and "  release identity: not recorded by any test" in out.splitlines()
    assert out.splitlines()[-1] == "status: nothing verified (no test passed: 2 skipped)"


def test_a_failure_beats_an_inconclusive_verdict_and_its_message_attribute_beats_its_text(tmp_path):
    path = _one_suite(tmp_path, '<testcase classname="t" name="test_a"><failure message="short">long text'
                                '</failure><properties><property name="verdict" value="inconclusive"/></properties>'
                                '</testcase><testcase name="test_b"/>')
    summary = load_junit(path)
    assert summary.status == "failed"
    assert [(c.outcome, c.message) for c in summary.failures] == [("failed", "short")]


def test_a_receipt_path_under_a_file_is_one_error_line(tmp_path, capsys):
    """An OS error reading the file is named with its reason, not a traceback."""
    (tmp_path / "file").write_text("")
    path = tmp_path / "file" / "r.xml"
    code, _, err = receipt_in_process(capsys, str(path))
    assert (code, err) == (2, f"error: {path}: cannot read file: Not a directory\n")


def test_a_failure_and_a_teardown_error_count_as_failed_and_only_verdict_properties_are_verdicts(tmp_path):
    """The first of failure, error, skipped decides the outcome; a property of another name whose value looks like
    a verdict is not one; the summary and its cases cannot be changed."""
    import dataclasses

    path = _one_suite(tmp_path, '<testcase name="test_a"><failure message="call"/><error message="teardown"/>'
                                '<properties><property name="verdict" value="reproduced"/>'
                                '<property name="note" value="differs"/></properties></testcase>')
    summary = load_junit(path)
    assert [(c.outcome, c.message) for c in summary.cases] == [("failed", "call")]
    assert summary.verdicts == {"reproduced": 1, "differs": 0, "inconclusive": 0}
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.cases[0].outcome = "passed"
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.file = "other"
