"""Package pins the release's requirements files state (``name==version`` lines), read at run time."""

from __future__ import annotations

import re

from trace_lib.errors import InputError
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot

#: The packages of upstream's prediction-workbook round trip and the release file that pins each.
WORKBOOK_PIN_FILES = {
    "pandas": identity.REQUIREMENTS_CU128,
    "xlsxwriter": identity.EVAL_REQUIREMENTS,
    "openpyxl": identity.EVAL_REQUIREMENTS_RUNTIME,
}
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)")


def requirement_pins(release: ReleaseRoot, rel: str) -> dict[str, str]:
    """``{lower-case name: version}`` for every ``name==version`` line of the release file ``rel``."""
    text = release.read_bytes(rel).decode("utf-8")
    return {m.group(1).lower().replace("_", "-"): m.group(2) for m in map(_PIN.match, text.splitlines()) if m}


def workbook_pins(release: ReleaseRoot) -> dict[str, str]:
    """The paper's pandas / XlsxWriter / openpyxl versions, as the release pins them."""
    pins = {}
    for name, rel in WORKBOOK_PIN_FILES.items():
        found = requirement_pins(release, rel).get(name)
        if found is None:
            raise InputError(f"the release does not pin {name}", file=rel, field=name)
        pins[name] = found
    return pins
