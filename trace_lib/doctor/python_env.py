"""The running Python against trace-repro's ``Requires-Python``."""

from __future__ import annotations

import platform
import sys

from trace_lib.doctor.context import CheckResult, DoctorContext, Status
from trace_lib.doctor.extras import install_command, project_distribution


def check_python(ctx: DoctorContext) -> CheckResult:
    from packaging.specifiers import SpecifierSet

    version = platform.python_version()
    dist = project_distribution()
    if dist is None:
        return CheckResult("python", Status.MISSING, f"Python {version} ({sys.executable}); trace-repro not installed",
                           missing="trace-repro is not installed in this Python", fix="pip install -e '.[test]'")
    required = dist.metadata.get("Requires-Python") or ""
    if required and not SpecifierSet(required).contains(version, prereleases=True):
        return CheckResult("python", Status.MISSING, f"Python {version} (trace-repro {dist.version} requires "
                           f"{required})", missing=f"Python {version} (requires {required})",
                           fix=f"use a Python {required}, then {install_command('test')}")
    return CheckResult("python", Status.OK, f"Python {version} ({sys.executable}); trace-repro {dist.version}, "
                       f"requires {required or 'any'}")


def _checks():
    from trace_lib.doctor.registry import Check

    return (Check("python", "the interpreter and trace-repro's installed version", check_python),)


CHECKS = _checks()
