"""A pip constraints file for the paper's environment, derived from the release's requirement files at run time.

Profiles: ``eval`` is ``rlvr/evaluation/requirements-runtime.txt`` (it composes the CUDA/training base
``rlvr/requirements-cu128.txt`` with the CPU-side benchmark dependencies); ``train`` is the base alone. Pins are
merged across files: the same pin twice is written once; two different pins of one package under one marker are
an error naming both files and lines. pip refuses extras in constraints, so ``ray[default]==X`` becomes
``ray==X`` (said in the header). ``pypi_only`` drops the release's package-index options and the local version
labels (``+cu128``) that only those indexes serve: on PyPI, ``torch==2.8.0`` is the Linux x86_64 wheel built
for CUDA 12.8, the build ``+cu128`` names; the engine record (``trace-repro env show``) says which one ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from trace_lib.environment.requirements import IndexOption, Pin, RequirementSet, read_requirements
from trace_lib.errors import ReleaseFileError, UsageError
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot

#: Profile -> the release requirement file it is derived from.
PROFILES = MappingProxyType({
    "eval": identity.EVAL_REQUIREMENTS_RUNTIME,
    "train": identity.REQUIREMENTS_CU128,
})


@dataclass
class Constraints:
    """The merged pins of a profile, ready to be written as a pip constraints file."""

    profile: str
    source: RequirementSet
    pins: list[Pin]
    options: list[IndexOption]
    changes: list[str] = field(default_factory=list)  # what differs from the release's lines, one sentence each

    def lines(self) -> list[str]:
        """The requirement/option lines (no header), each followed by the release line it comes from."""
        out = [f"{o.option} {o.value}  # {o.where}" for o in self.options]
        for pin in self.pins:
            text = pin.name + pin.specifier
            if pin.marker:
                text += f"; {pin.marker}"
            text += "".join(f" --hash={h}" for h in pin.hashes)
            out.append(f"{text}  # {pin.where}")
        return out


def _strip_local(specifier: str) -> str:
    if specifier.startswith("==") and "+" in specifier and "," not in specifier:
        return specifier.split("+", 1)[0]
    return specifier


def build_constraints(release: ReleaseRoot, profile: str, *, pypi_only: bool = False) -> Constraints:
    """Merge the pins of ``profile``'s release requirement files into constraints.

    Raises:
        UsageError: unknown profile.
        ReleaseFileError: a file is missing or malformed, or two files pin one package differently (names both
            files and lines).
    """
    if profile not in PROFILES:
        raise UsageError("unknown profile", field="--profile", expected=sorted(PROFILES), found=profile)
    source = read_requirements(release, PROFILES[profile])
    merged: dict[tuple[str, str], Pin] = {}
    changes: list[str] = []
    for pin in source.pins:
        key = (pin.name, pin.marker)
        first = merged.get(key)
        if first is None:
            merged[key] = pin
            continue
        if first.specifier != pin.specifier:
            file, line = pin.where.rsplit(":", 1)
            raise ReleaseFileError(f"{pin.name} is pinned twice with different versions", file=file,
                                   field=f"line {line}", expected=f"{first.specifier} ({first.where})",
                                   found=pin.specifier, hint="the release's requirement files contradict each other")
        if pin.hashes and set(pin.hashes) != set(first.hashes):
            merged[key] = Pin(first.name, first.specifier, first.marker, first.extras,
                              tuple(dict.fromkeys(first.hashes + pin.hashes)), first.where)
    pins: list[Pin] = []
    for pin in merged.values():
        if pin.extras:
            changes.append(f"{pin.name}[{','.join(pin.extras)}] written as {pin.name} (pip constraints take no "
                           f"extras; {pin.where})")
        specifier = pin.specifier
        if pypi_only and _strip_local(specifier) != specifier:
            changes.append(f"{pin.name}{specifier} written as {pin.name}{_strip_local(specifier)} (--pypi-only: "
                           f"local builds are served by the dropped index; {pin.where})")
            specifier = _strip_local(specifier)
        pins.append(Pin(pin.name, specifier, pin.marker, (), pin.hashes, pin.where))
    options = list(dict.fromkeys(source.options))
    if pypi_only and options:
        changes += [f"dropped {o.option} {o.value} (--pypi-only; {o.where})" for o in options]
        options = []
    return Constraints(profile, source, sorted(pins, key=lambda p: (p.name, p.marker)), options, changes)


def render_constraints(release: ReleaseRoot, constraints: Constraints, *, command: str) -> str:
    """The constraints file's text: a header (provenance, use, deviations), then one line per pin."""
    commit = identity.COMMIT if release.is_pinned_release() else "unpinned"
    header = [
        f"# {command}",
        "# pip constraints for the TRACE paper's environment, derived from the release's requirement files",
        f"# (release {release.path}, rlvr commit {commit}):",
    ]
    header += [f"#   {rel}  sha256:{release.sha256(rel)}" for rel in constraints.source.files]
    platform = _reference_platform(release)
    if platform:
        header.append(f"# The paper's platform ({identity.ENVIRONMENT_RECEIPT}): {platform}")
    if constraints.profile == "eval":
        header += [
            "# Use: pip install -c THIS_FILE -e '.[eval]'   (also '.[eval,hf]' and '.[test]'): evaluation, TRACE",
            "# validation generation, scoring and judging on the paper's engine.",
        ]
    else:
        header += ["# Use: pip install -c THIS_FILE -r rlvr/requirements-cu128.txt  (the paper's training base)."]
    header += [
        "# Not for trace-repro's 'train' extra: the paper trained with its vendored EasyR1 on these pins, while",
        "# trace-repro's training lane runs verl, which keeps its own transformers range (pyproject.toml);",
        "# install '.[train]' in a separate environment, without this file.",
    ]
    if constraints.changes:
        header.append("# Written differently from the release:")
        header += [f"#   {change}" for change in constraints.changes]
    return "\n".join(header + constraints.lines()) + "\n"


def _reference_platform(release: ReleaseRoot) -> str:
    try:
        doc = release.read_json(identity.ENVIRONMENT_RECEIPT)
    except ReleaseFileError:
        return ""
    ref = doc.get("reference_platform") if isinstance(doc, dict) else None
    if not isinstance(ref, dict):
        return ""
    parts = [str(ref[k]) for k in ("python", "os") if ref.get(k)]
    if ref.get("cuda"):
        parts.append(f"CUDA {ref['cuda']}")
    if ref.get("gpu"):
        parts.append(f"{ref.get('gpu_count', 1)}x {ref['gpu']}")
    return ", ".join(parts)
