"""The CLI's one OS-error handler: one ``error:`` line with the path and the errno text; exit 2 for a bad path,
3 when the machine failed (disk full, file too large, I/O error), nothing half-written."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.parametrize("argv", [
    ["check", "--trace-root", "LOOP"], ["plan", "--trace-root", "LOOP"], ["status", "--campaign-root", "LOOP"],
    ["verify", "--phase", "score", "--campaign-root", "LOOP"], ["receipt", "LOOP"], ["verdict", "--credits", "LOOP"],
], ids=["check", "plan", "status", "verify", "receipt", "verdict"])
def test_a_symbolic_link_loop_is_one_line_naming_it_with_exit_2(tmp_path, monkeypatch, argv):
    """A path that is a loop of symbolic links (pathlib's RuntimeError before Python 3.13, ELOOP after) is a bad
    path: one line naming it, exit 2, nothing written."""
    monkeypatch.delenv("TRACE_ROOT", raising=False)
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    monkeypatch.chdir(tmp_path)
    result = run_cli([str(tmp_path / "a") if a == "LOOP" else a for a in argv])
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert str(tmp_path / "a") in result.stderr or "--campaign-root" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_trace_root_naming_a_symbolic_link_loop_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    monkeypatch.setenv("TRACE_ROOT", str(tmp_path / "a"))
    result = run_cli(["plan"])
    assert result.returncode == ExitCode.USAGE and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: TRACE_ROOT {tmp_path / 'a'}: ") and "(ELOOP)" in result.stderr


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


def _with_stdout(stdout: int, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("TRACE_REPRO_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "trace_lib", *argv], stdout=stdout, stderr=subprocess.PIPE,
                          env=env, text=True, timeout=60)


def test_a_reader_that_left_is_exit_141_never_a_silent_pass():
    """``trace-repro ... | head`` under ``set -o pipefail``: the command never finished its output, so its exit
    says so (141, as a shell reports SIGPIPE), where 0 passed a ``verify`` whose findings nobody saw."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line is written
    try:
        done = _with_stdout(write, "benchmarks")
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (ExitCode.READER_LEFT, "")
    assert ExitCode.READER_LEFT == 141


def test_a_broken_pipe_that_is_not_stdout_is_the_machines_error(monkeypatch, capsys):
    """A ``BrokenPipeError`` of a pipe the command writes itself (a child's stdin, a socket) is one error line,
    exit 3: only a reader of stdout leaving is 141."""
    import argparse

    from trace_lib.cli import main as cli_main

    def run(args):
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    parser = argparse.ArgumentParser()
    parser.set_defaults(run=run)
    monkeypatch.setattr(cli_main, "build_parser", lambda argv: parser)
    assert cli_main.main([]) == ExitCode.SYSTEM
    assert capsys.readouterr().err == "error: the machine failed: Broken pipe (EPIPE)\n"


def test_stdout_to_a_file_or_a_pipe_still_read_has_no_reader_that_left(tmp_path):
    with open(tmp_path / "out.txt", "w") as handle:
        assert _with_stdout(handle.fileno(), "benchmarks").returncode == 0
    assert "mmstar" in (tmp_path / "out.txt").read_text()
    assert _with_stdout(subprocess.PIPE, "benchmarks").returncode == 0
