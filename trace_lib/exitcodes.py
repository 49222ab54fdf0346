"""Process exit codes shared by every ``trace-repro`` subcommand."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """What a ``trace-repro`` process returns.

    OK: the command did what was asked and found nothing wrong.
    FINDINGS: the command ran and found problems (failed checks, failed slices, incomplete work).
    USAGE: the command could not run: bad flags, missing or malformed input (one ``error:`` line).
    """

    OK = 0
    FINDINGS = 1
    USAGE = 2
