"""Run the ``trace-repro`` command in this process, as a test would run it in a child: argv in, exit code and the
captured stdout/stderr out (``subprocess.CompletedProcess``), without a new interpreter importing the suite again."""

from __future__ import annotations

import contextlib
import io
import subprocess
from typing import Sequence


def run_cli(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """``trace-repro ARGV``; argparse's own exits (usage errors, ``--help``) become the return code."""
    from trace_lib.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return subprocess.CompletedProcess(["trace-repro", *argv], code, out.getvalue(), err.getvalue())
