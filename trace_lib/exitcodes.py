"""Process exit codes shared by every ``trace-repro`` subcommand, and which OS errors are the user's."""

from __future__ import annotations

import enum
import errno


class ExitCode(enum.IntEnum):
    """What a ``trace-repro`` process returns (:data:`EXIT_CODES_HELP` is the table ``--help`` and README show).

    OK: the command did what was asked and found nothing wrong.
    FINDINGS: the command ran and found problems (failed checks, failed slices, incomplete work).
    USAGE: the command could not run: bad flags, missing, malformed or unwritable input/output paths (one
        ``error:`` line; nothing written).
    SYSTEM: the machine failed under the command: disk full, quota, file too large, I/O error, out of memory or
        file handles, an engine that found its GPU's memory taken or died generating (one ``error:`` line naming
        the path, the GiB or the engine's line; what was written before stays consistent).
    INTERRUPTED: Ctrl-C (SIGINT).  TERMINATED: SIGTERM.
    READER_LEFT: stdout was a pipe whose reader left before the command finished (``... | head``): its outcome is
        unknown, so never OK; 128 + SIGPIPE, what a shell reports for a process that SIGPIPE ended.
    """

    OK = 0
    FINDINGS = 1
    USAGE = 2
    SYSTEM = 3
    INTERRUPTED = 130
    READER_LEFT = 141
    TERMINATED = 143


#: OS errors that say the user named a bad path (exit USAGE); every other OS error is the machine's (SYSTEM).
USER_ERRNOS = frozenset({
    errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.EROFS,
    errno.ENAMETOOLONG, errno.ELOOP, errno.ENOTEMPTY, errno.EXDEV, errno.ETXTBSY, errno.ENXIO, errno.ENODEV,
    errno.EINVAL,
})
#: OS errors that say the machine failed (listed for the docs; :func:`exit_code_for` treats any unlisted one so).
SYSTEM_ERRNOS = frozenset({
    errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.ENOMEM, errno.EMFILE, errno.ENFILE, errno.ESTALE,
})

EXIT_CODES_HELP = """exit codes:
  0    done, nothing wrong found
  1    findings: the command ran and found problems (failed checks or slices, incomplete work)
  2    usage: bad flags, or an input/output path that is missing, malformed, not a regular file or unwritable
       (ENOENT, EACCES, EPERM, EISDIR, ENOTDIR, EEXIST, EROFS, ...); one 'error:' line, nothing written
  3    system: the machine failed (ENOSPC disk full, EDQUOT, EFBIG, EIO, ENOMEM, EMFILE, ...; a GPU whose memory
       another process holds, an engine that died generating); one 'error:' line
  130  interrupted (Ctrl-C)    141  stdout's reader left first (... | head)    143  terminated (SIGTERM)"""


def exit_code_for(exc: OSError) -> ExitCode:
    """USAGE for an OS error that names a bad path (:data:`USER_ERRNOS`), SYSTEM for every other one."""
    return ExitCode.USAGE if exc.errno in USER_ERRNOS else ExitCode.SYSTEM
