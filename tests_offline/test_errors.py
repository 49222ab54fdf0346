"""trace_lib.errors: what one rendered error line holds."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.offline


def test_a_path_with_a_newline_stays_one_line():
    from trace_lib.errors import InputError

    line = InputError("not a directory", file="/tmp/nl\ndir/x", field="--data-root\t").render()
    assert line == "/tmp/nl\\ndir/x: --data-root\\t: not a directory" and "\n" not in line
    assert InputError("ok", file="/tmp/é²").render() == "/tmp/é²: ok"  # printable text is left as it is
