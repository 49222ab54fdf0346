"""Which of trace-repro's extras are installed, at versions inside the ranges its own metadata declares.

The ranges are read from the installed ``trace-repro`` distribution (``Requires-Dist: ...; extra == "hf"``),
never restated here; a self-reference (``trace-repro[math]``) expands to that extra's requirements. One check per
extra: ``missing`` names the first package absent or outside its range, ``fix`` is the pip command.
"""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path

from trace_lib.doctor.context import CheckResult, DoctorContext, Status

PROJECT = "trace-repro"
EXTRAS = ("test", "hf", "eval", "train")


def project_distribution() -> metadata.Distribution | None:
    try:
        return metadata.distribution(PROJECT)
    except metadata.PackageNotFoundError:
        return None


def installed_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (None when absent)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def install_command(extra: str | None = None) -> str:
    """``pip install -e '<checkout>[extra]'`` when trace_lib runs from a checkout, else ``pip install 'trace-repro[extra]'``.

    The checkout is spelled ``.`` when it is the working directory.
    """
    suffix = f"[{extra}]" if extra else ""
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file():
        where = "." if Path.cwd().resolve() == checkout else str(checkout)
        return f"pip install -e '{where}{suffix}'"
    return f"pip install '{PROJECT}{suffix}'"


def extra_requirements(extra: str) -> list:
    """The requirements (``packaging.requirements.Requirement``) the installed trace-repro declares for ``extra``."""
    from packaging.requirements import Requirement

    dist = project_distribution()
    out, pending, seen = [], [extra], set()
    while pending:
        name = pending.pop(0)
        if name in seen or dist is None:
            continue
        seen.add(name)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or not req.marker.evaluate({"extra": name}):
                continue
            if req.name.lower().replace("_", "-") == PROJECT:
                pending.extend(sorted(req.extras))
            elif all(r.name != req.name for r in out):
                out.append(req)
    return out


def check_extra(extra: str, ctx: DoctorContext) -> CheckResult:
    name = f"extra:{extra}"
    if project_distribution() is None:
        return CheckResult(name, Status.MISSING, "trace-repro is not installed (no distribution metadata)",
                           missing="trace-repro is not installed", fix=f"pip install -e '.[{extra}]'")
    requirements = extra_requirements(extra)
    found = []
    for req in requirements:
        wanted = f"{req.name}{req.specifier}"
        version = installed_version(req.name)
        if version is None:
            return CheckResult(name, Status.MISSING, f"{req.name} is not installed (extra '{extra}' needs {wanted})",
                               missing=f"{req.name} not installed", fix=install_command(extra))
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            return CheckResult(name, Status.MISSING,
                               f"{req.name} {version} is outside the supported range {req.specifier}",
                               missing=f"{req.name} {version} (supported {req.specifier})",
                               fix=f"pip install '{wanted}'")
        found.append(f"{req.name} {version}")
    return CheckResult(name, Status.OK, ", ".join(found) or "(no requirements)")


def _checker(extra: str):
    return lambda ctx: check_extra(extra, ctx)


def _make_checks():
    from trace_lib.doctor.registry import Check

    return tuple(Check(f"extra:{e}", f"the '{e}' extra installed within its declared ranges", _checker(e))
                 for e in EXTRAS)


CHECKS = _make_checks()
