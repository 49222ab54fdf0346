"""trace_lib.errors: what one rendered error line holds."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.offline


def test_a_path_with_a_newline_stays_one_line():
    from trace_lib.errors import InputError

    line = InputError("not a directory", file="/tmp/nl\ndir/x", field="--data-root\t").render()
    assert line == "/tmp/nl\\ndir/x: --data-root\\t: not a directory" and "\n" not in line
    assert InputError("ok", file="/tmp/é²").render() == "/tmp/é²: ok"  # printable text is left as it is


def test_pathlibs_symlink_loop_runtime_error_reads_as_eloop_and_no_other_runtime_error_does(tmp_path):
    import errno

    from trace_lib.errors import os_error_line, symlink_loop_error

    loop = symlink_loop_error(RuntimeError(f"Symlink loop from {str(tmp_path / 'a')!r}"))
    assert (loop.errno, loop.filename) == (errno.ELOOP, str(tmp_path / "a"))
    assert os_error_line(loop) == f"{tmp_path / 'a'}: Too many levels of symbolic links (ELOOP)"
    assert symlink_loop_error(RuntimeError("Symlink loop from unquoted")).filename == "unquoted"
    assert symlink_loop_error(RuntimeError("dictionary changed size during iteration")) is None
    assert symlink_loop_error(RecursionError("Symlink loop from 'x'")) is None  # a subclass is another error
