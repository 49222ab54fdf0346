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


# In-process runs work in a directory beside other tests' (tmp_path_factory): release discovery would take a
# release copy one of them left there, so each run below names the session's release.
def test_an_os_error_in_a_lane_test_is_one_line_naming_the_path(pytester, monkeypatch, release):
    monkeypatch.delenv("TRACE_REPRO_DEBUG", raising=False)
    monkeypatch.setenv("TRACE_ROOT", str(release.path))
    pytester.makepyfile(test_lane=LANE_TEST)
    result = pytester.runpytest_inprocess("-p", "trace_lib.pytest_plugin", "-q",
                                          "-W", "ignore::pytest.PytestUnknownMarkWarning")
    out = result.stdout.str()
    assert result.parseoutcomes().get("failed") == 1 and result.parseoutcomes().get("errors") == 1, out
    assert "the machine failed: /campaign/responses.jsonl: No space left on device (ENOSPC)" in out
    assert "/campaign/root: Permission denied (EACCES)" in out
    assert "raise OSError" not in out  # no traceback of the test's own code
    assert "During handling" not in out


BAD_OPTIONS = {
    "gpu groups": (["--gpu-groups", "garbage"], "--gpu-groups"),
    "empty gpu groups": (["--gpu-groups", " "], "--gpu-groups"),
    "seeds": (["--seeds", "abc"], "--seeds"),
    "benchmark": (["--benchmark", "bogus"], "--benchmark"),
    "model id": (["--model-id", "nope"], "--model-id"),
    "trace root": (["--trace-root", "/nonexistent/trace"], "/nonexistent/trace"),
    "backend": (["--backend", "bogus"], "--backend"),
    "schedule": (["--schedule", "sometimes"], "--schedule"),
    "model verify": (["--model-verify", "maybe"], "--model-verify"),
    "campaign root file": (["--campaign-root", "FILE"], "--campaign-root"),
    "archive root file": (["--archive-root", "FILE"], "--archive-root"),
    "trace root link loop": (["--trace-root", "LOOP"], "(ELOOP)"),
    "campaign root link loop": (["--campaign-root", "LOOP"], "--campaign-root"),
    "print config link loop": (["--print-config", "--trace-root", "LOOP"], "(ELOOP)"),
}


@pytest.mark.parametrize(("argv", "needle"), BAD_OPTIONS.values(), ids=BAD_OPTIONS.keys())
def test_a_bad_option_is_one_line_at_configure_time_with_exit_4(pytester, monkeypatch, release, argv, needle):
    for name in ("TRACE_CAMPAIGN_ROOT", "TRACE_ARCHIVE_ROOT", "TRACE_BACKEND", "TRACE_SCHEDULE",
                 "TRACE_MODEL_VERIFY", "TRACE_GPU_GROUPS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRACE_ROOT", str(release.path))
    blocker = pytester.path / "a_file"
    blocker.write_text("x")
    (pytester.path / "loop_a").symlink_to("loop_b")
    (pytester.path / "loop_b").symlink_to("loop_a")
    given = {"FILE": str(blocker), "LOOP": str(pytester.path / "loop_a")}
    argv = [given.get(a, a) for a in argv]
    pytester.makepyfile(test_one="def test_one(): pass", test_two="def test_two(): pass")
    result = pytester.runpytest_inprocess("-p", "trace_lib.pytest_plugin", *argv)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines + result.stdout.lines if line.startswith("ERROR")]
    assert len(errors) == 1 and needle in errors[0], result.stderr.lines + result.stdout.lines
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert "did you mean" not in errors[0] or needle != "--benchmark"  # 'bogus' is close to no benchmark
