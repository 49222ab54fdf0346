"""The three outcomes as pytest reports them (``--inconclusive fail|skip|xfail``) and as the receipt counts them."""

from __future__ import annotations

import numpy  # noqa: F401 - imported before pytester's in-process runs (a C extension loads once per process)
import pytest
import scipy.stats  # noqa: F401

import trace_lib.aggregation.verdict  # noqa: F401
import trace_lib.testing.synthetic_credits  # noqa: F401
from trace_lib.cli.main import main
from trace_lib.receipts.junit import load_junit

pytestmark = pytest.mark.offline

OUTCOME_TESTS = '''
import numpy as np
import pytest

from trace_lib.aggregation.canonical import load_canonical
from trace_lib.aggregation.verdict import judge_credits
from trace_lib.pytest_plugin import assert_verdict, inconclusive_mode
from trace_lib.testing.synthetic_credits import synthetic_credits

CELL = ("trace-qwen2.5-vl-3b", "erqa")


@pytest.fixture(scope="module")
def verdicts(release):
    canonical = load_canonical(release)
    out = {}
    for name, means, margin in (("reproduced", None, 15.0), ("inconclusive", None, 0.5), ("differs", {CELL: 0}, 2.0)):
        credits = synthetic_credits(canonical, [CELL], rng=np.random.default_rng(4), means=means)
        result = judge_credits(credits, release, canonical=canonical, margin=margin)
        out[name] = result.by_id()["trace-qwen2.5-vl-3b-erqa"]
    return out


@pytest.mark.parametrize("name", ["reproduced", "inconclusive", "differs"])
def test_outcome(name, verdicts, receipt, pytestconfig):
    verdict = verdicts[name]
    assert verdict.outcome == name
    for key, value in verdict.properties():
        receipt(key, value)
    assert_verdict(verdict, inconclusive_mode(pytestconfig))


def test_blocked():
    pytest.skip("no GPU")
'''


@pytest.fixture
def project(pytester, release, monkeypatch):
    pytester.makepyfile(test_outcomes=OUTCOME_TESTS)
    monkeypatch.setenv("TRACE_ROOT", str(release.path))  # the session's release, whatever another test left set
    return pytester


def _run(project, *args):
    junit = project.path / "junit.xml"
    result = project.runpytest_inprocess("-p", "trace_lib.pytest_plugin", "-p", "no:cacheprovider",
                                         f"--junitxml={junit}", *args)
    return result, load_junit(junit)


@pytest.mark.parametrize(("mode", "counts", "message"), [
    ("fail", {"passed": 1, "failed": 2, "skipped": 1}, "Failed: INCONCLUSIVE"),
    ("skip", {"passed": 1, "failed": 1, "skipped": 2}, ": INCONCLUSIVE"),
    ("xfail", {"passed": 1, "failed": 1, "skipped": 1, "xfailed": 1}, "INCONCLUSIVE"),
])
def test_inconclusive_is_never_a_pass(project, mode, counts, message):
    result, summary = _run(project, "--inconclusive", mode, "-rA")
    result.assert_outcomes(**counts)
    assert message in result.stdout.str() and "DIFFERS trace-qwen2.5-vl-3b-erqa" in result.stdout.str()
    assert summary.verdicts == {"reproduced": 1, "differs": 1, "inconclusive": 1}
    assert summary.status == "failed" and not summary.ok


def test_the_default_mode_fails_an_inconclusive_verdict(project):
    result, _ = _run(project, "-k", "inconclusive")
    result.assert_outcomes(failed=1)


def test_a_receipt_with_a_skipped_inconclusive_verdict_is_not_ok(project, capsys):
    result, summary = _run(project, "--inconclusive", "skip", "-k", "reproduced or inconclusive")
    result.assert_outcomes(passed=1, skipped=1)
    assert summary.status == "inconclusive"
    code = main(["receipt", str(project.path / "junit.xml")])
    out = capsys.readouterr().out
    assert code == 1 and "  verdicts: 1 reproduced, 0 differs, 1 inconclusive" in out
    assert out.splitlines()[-1] == "status: inconclusive (1 verdict(s) could not tell; not a pass)"


def test_a_receipt_where_every_test_skipped_verified_nothing(project, capsys):
    result, summary = _run(project, "-k", "blocked")
    result.assert_outcomes(skipped=1)
    code = main(["receipt", str(project.path / "junit.xml")])
    out = capsys.readouterr().out
    assert code == 1 and summary.status == "nothing verified"
    assert out.splitlines()[-1] == "status: nothing verified (no test passed: 1 skipped)"


def test_an_unknown_inconclusive_mode_is_a_usage_error(project):
    result, _ = _run(project, "--inconclusive", "pass", "-k", "reproduced")
    assert result.ret != 0 and "--inconclusive: must be one of fail, skip, xfail (found 'pass')" in (
        result.stdout.str() + result.stderr.str())
