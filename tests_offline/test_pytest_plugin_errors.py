"""The pytest plugin's error policy, run in-process by pytester: an OS error in a lane test is one line with the
path and errno text; bad options are one usage line at configure time (exit 4), never a stack per test file."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.offline

LANE_TEST = """
import errno, pytest

@pytest.fixture
def campaign():
    raise OSError(errno.EACCES, "Permission denied", "/campaign/root")

@pytest.mark.gpu
def test_disk_full():
    raise OSError(errno.ENOSPC, "No space left on device", "/campaign/responses.jsonl")

@pytest.mark.gpu
def test_unwritable(campaign):
    pass
"""


def test_an_os_error_in_a_lane_test_is_one_line_naming_the_path(pytester, monkeypatch):
    monkeypatch.delenv("TRACE_REPRO_DEBUG", raising=False)
    pytester.makepyfile(test_lane=LANE_TEST)
    result = pytester.runpytest_inprocess("-p", "trace_lib.pytest_plugin", "-q",
                                          "-W", "ignore::pytest.PytestUnknownMarkWarning")
    out = result.stdout.str()
    assert result.parseoutcomes().get("failed") == 1 and result.parseoutcomes().get("errors") == 1, out
    assert "the machine failed: /campaign/responses.jsonl: No space left on device (ENOSPC)" in out
    assert "/campaign/root: Permission denied (EACCES)" in out
    assert "raise OSError" not in out  # no traceback of the test's own code
    assert "During handling" not in out
