"""The CLI's one OS-error handler: one ``error:`` line with the path and the errno text; exit 2 for a bad path,
3 when the machine failed (disk full, file too large, I/O error), nothing half-written."""

from __future__ import annotations

import errno
import os

import pytest

from trace_lib.exitcodes import ExitCode, SYSTEM_ERRNOS, USER_ERRNOS, exit_code_for
from trace_lib.testing.cli_runner import run_cli

pytestmark = pytest.mark.offline


@pytest.mark.parametrize(("code", "exit_code", "words"), [
    (errno.ENOSPC, 3, "No space left on device (ENOSPC)"),
    (errno.EFBIG, 3, "File too large (EFBIG)"),
    (errno.EIO, 3, "Input/output error (EIO)"),
    (errno.EDQUOT, 3, "(EDQUOT)"),
    (errno.EACCES, 2, "Permission denied (EACCES)"),
    (errno.EROFS, 2, "Read-only file system (EROFS)"),
])
def test_a_failed_write_is_one_line_naming_the_path_with_its_own_exit_code(tmp_path, monkeypatch, code, exit_code,
                                                                            words):
    out = tmp_path / "constraints.txt"
    out.write_text("old\n")

    def fail(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", fail)
    result = run_cli(["env", "constraints", "--out", str(out)])
    assert result.returncode == exit_code
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip()
    assert line.startswith("error: ") and str(out) in line and words in line
    assert ("the machine failed" in line) == (exit_code == 3)
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["constraints.txt"]


def test_every_errno_has_one_class():
    assert not USER_ERRNOS & SYSTEM_ERRNOS
    assert exit_code_for(OSError(errno.ENOENT, "x")) == ExitCode.USAGE
    assert exit_code_for(OSError(errno.ENOSPC, "x")) == ExitCode.SYSTEM
    assert exit_code_for(OSError("no errno")) == ExitCode.SYSTEM


def test_help_documents_the_exit_codes():
    result = run_cli(["--help"])
    assert result.returncode == 0
    for line in ("  2    usage:", "  3    system: the machine failed (ENOSPC", "130  interrupted"):
        assert line in result.stdout
