"""Which of trace-repro's extras are installed, at versions inside the ranges the project itself declares.

The ranges are never restated here: they come from the ``pyproject.toml`` of the checkout trace_lib runs from
(what this code declares), else from the installed ``trace-repro`` distribution (``Requires-Dist: ...; extra ==
"hf"``); a self-reference (``trace-repro[math]``) expands to that extra's requirements. One check per extra:
``missing`` names the first package absent or outside its range, ``fix`` is the pip command.
"""

from __future__ import annotations

import importlib.metadata as metadata
from dataclasses import dataclass
from pathlib import Path

from trace_lib.doctor.context import CheckResult, Status
from trace_lib.environment.engine import installed_version

PROJECT = "trace-repro"
EXTRAS = ("test", "hf", "eval", "train")


CHECKOUT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ProjectMetadata:
    """trace-repro's declared version, Python range and requirements (``name spec; extra == "x"`` strings)."""

    origin: str
    version: str
    requires_python: str
    requires: tuple[str, ...]


def project_distribution() -> metadata.Distribution | None:
    try:
        return metadata.distribution(PROJECT)
    except metadata.PackageNotFoundError:
        return None


def _from_pyproject(path: Path) -> ProjectMetadata | None:
    try:
        import tomllib
    except ImportError:  # Python 3.10: the installed metadata is the only source
        return None
    from trace_lib import __version__

    project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    requires = [*project.get("dependencies", [])]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        requires += [f'{req}; extra == "{extra}"' for req in reqs]
    return ProjectMetadata(f"{path}", __version__, project.get("requires-python", ""), tuple(requires))


def project_metadata() -> ProjectMetadata | None:
    """The checkout's ``pyproject.toml`` when trace_lib runs from one, else the installed distribution's metadata."""
    pyproject = CHECKOUT / "pyproject.toml"
    if pyproject.is_file():
        found = _from_pyproject(pyproject)
        if found is not None:
            return found
    dist = project_distribution()
    if dist is None:
        return None
    return ProjectMetadata(f"installed {PROJECT} {dist.version}", dist.version,
                           dist.metadata.get("Requires-Python") or "", tuple(dist.requires or ()))


def install_command(extra: str | None = None) -> str:
    """``pip install -e '<checkout>[extra]'`` when trace_lib runs from a checkout, else ``pip install 'trace-repro[extra]'``.

    The checkout is spelled ``.`` when it is the working directory.
    """
    suffix = f"[{extra}]" if extra else ""
    if (CHECKOUT / "pyproject.toml").is_file():
        where = "." if Path.cwd().resolve() == CHECKOUT else str(CHECKOUT)
        return f"pip install -e '{where}{suffix}'"
    return f"pip install '{PROJECT}{suffix}'"


def extra_requirements(extra: str) -> list:
    """The requirements (``packaging.requirements.Requirement``) trace-repro declares for ``extra``."""
    from packaging.requirements import Requirement

    meta = project_metadata()
    out, pending, seen = [], [extra], set()
    while pending:
        name = pending.pop(0)
        if name in seen or meta is None:
            continue
        seen.add(name)
        for text in meta.requires:
            req = Requirement(text)
            if req.marker is None or not req.marker.evaluate({"extra": name}):
                continue
            if req.name.lower().replace("_", "-") == PROJECT:
                pending.extend(sorted(req.extras))
            elif all(r.name != req.name for r in out):
                out.append(req)
    return out


def check_extra(extra: str) -> CheckResult:
    name = f"extra:{extra}"
    if project_metadata() is None:
        return CheckResult(name, Status.MISSING, "trace-repro is not installed (no distribution metadata)",
                           missing="trace-repro is not installed", fix=install_command(extra))
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
    return lambda ctx: check_extra(extra)


def _make_checks():
    from trace_lib.doctor.registry import Check

    return tuple(Check(f"extra:{e}", f"the '{e}' extra installed within its declared ranges", _checker(e))
                 for e in EXTRAS)


CHECKS = _make_checks()
