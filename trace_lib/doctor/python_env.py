"""The running Python against trace-repro's ``Requires-Python``."""

from __future__ import annotations

import platform
import sys

from trace_lib.doctor.context import CheckResult, DoctorContext, Status
from trace_lib.doctor.extras import install_command, project_distribution, project_metadata


def check_python(ctx: DoctorContext) -> CheckResult:
    from packaging.specifiers import SpecifierSet

    version = platform.python_version()
    meta = project_metadata()
    if meta is None:
        return CheckResult("python", Status.MISSING, f"Python {version} ({sys.executable}); trace-repro not installed",
                           missing="trace-repro is not installed in this Python", fix=install_command("test"))
    required = meta.requires_python
    if required and not SpecifierSet(required).contains(version, prereleases=True):
        return CheckResult("python", Status.MISSING, f"Python {version} (trace-repro {meta.version} requires "
                           f"{required})", missing=f"Python {version} (requires {required})",
                           fix=f"use a Python {required}, then {install_command('test')}")
    installed = "installed" if project_distribution() is not None else f"not installed: run {install_command('test')}"
    return CheckResult("python", Status.OK, f"Python {version} ({sys.executable}); trace-repro {meta.version} "
                       f"({installed}), requires {required or 'any'} (from {meta.origin})")


def _checks():
    from trace_lib.doctor.registry import Check

    return (Check("python", "the interpreter and trace-repro's installed version", check_python),)


CHECKS = _checks()
