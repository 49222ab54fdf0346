"""Strict reading of the release's pip requirement files: pins, markers, hashes, index options, ``-r`` includes.

A line is one of: blank/comment; an option line (``--extra-index-url URL``, ``--index-url URL``, ``-f``/
``--find-links URL``, ``-r``/``--requirement FILE``); or a requirement ``name[extras] <specifiers> [; marker]
[--hash=sha256:HEX ...]`` (PEP 508, parsed with ``packaging``). Anything else (editable installs, URLs, unknown
options) is an error naming the release file and line: a constraints file derived from it would be a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from trace_lib.decoding import decode
from trace_lib.errors import ReleaseFileError
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot

#: Options that name a package source; they are carried into a derived constraints file (or dropped on request).
INDEX_OPTIONS = {"--extra-index-url": "--extra-index-url", "--index-url": "--index-url", "-i": "--index-url",
                 "-f": "--find-links", "--find-links": "--find-links"}
_INCLUDE_OPTIONS = ("-r", "--requirement")


@dataclass(frozen=True)
class Pin:
    """One requirement line of a release file (``where`` is ``FILE:LINE``)."""

    name: str  # normalised (PEP 503)
    specifier: str  # e.g. "==2.8.0+cu128"; "" when the line pins nothing
    marker: str  # "" when unconditional
    extras: tuple[str, ...]
    hashes: tuple[str, ...]
    where: str

    @property
    def exact_version(self) -> str | None:
        """The version of an ``==`` pin (local label included), else None."""
        spec = self.specifier
        if spec.startswith("==") and "," not in spec and "*" not in spec:
            return spec[2:]
        return None


@dataclass(frozen=True)
class IndexOption:
    """A package-source option line (``--extra-index-url URL`` and the like)."""

    option: str  # the long spelling
    value: str
    where: str


@dataclass
class RequirementSet:
    """Everything one requirement file says, with ``-r`` includes expanded in order."""

    files: list[str] = field(default_factory=list)  # release-relative paths read, top file first
    pins: list[Pin] = field(default_factory=list)
    options: list[IndexOption] = field(default_factory=list)


def normalize_name(name: str) -> str:
    """PEP 503 normalised project name."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) with comments stripped and backslash continuations joined."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw
        if line.lstrip().startswith("#"):
            line = ""
        elif " #" in line or "\t#" in line:
            line = line.split(" #", 1)[0].split("\t#", 1)[0]
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        if full:
            out.append((start, full))
    if pending.strip():
        out.append((start, pending.strip()))
    return out


def _parse_requirement(text: str, file: str, number: int) -> Pin:
    from packaging.requirements import InvalidRequirement, Requirement

    words = text.split()
    hashes = tuple(w.split("=", 1)[1] for w in words if w.startswith("--hash="))
    others = [w for w in words if w.startswith("-") and not w.startswith("--hash=")]
    if others:
        raise ReleaseFileError("per-requirement option not supported in a pinned environment file",
                               file=file, field=f"line {number}", found=others[0],
                               hint="only --hash=... may follow a requirement")
    body = " ".join(w for w in words if not w.startswith("--hash="))
    try:
        req = Requirement(body)
    except InvalidRequirement as exc:
        raise ReleaseFileError(f"not a requirement ({exc})", file=file, field=f"line {number}",
                               found=body) from None
    if req.url:
        raise ReleaseFileError("URL requirements cannot be pinned by version", file=file,
                               field=f"line {number}", found=body)
    return Pin(
        name=normalize_name(req.name),
        specifier=str(req.specifier),
        marker=str(req.marker) if req.marker else "",
        extras=tuple(sorted(req.extras)),
        hashes=hashes,
        where=f"{file}:{number}",
    )


def _resolve(base: PurePosixPath, target: str) -> str:
    parts: list[str] = []
    for part in (base / target).parts:
        if part == "..":
            parts = parts[:-1]
        elif part != ".":
            parts.append(part)
    return "/".join(parts)


def read_requirements(release: ReleaseRoot, rel: str, *, _seen: tuple[str, ...] = ()) -> RequirementSet:
    """Parse release file ``rel`` and its ``-r`` includes (each read once, in order).

    Raises:
        ReleaseFileError: missing file, include cycle, a file with no line at all besides comments, or a line that
            is not a plain pinned requirement or a package-source option (names the file and line).
    """
    if rel in _seen:
        raise ReleaseFileError("requirements include cycle", file=_seen[-1], found=rel)
    text = decode(release.read_bytes(rel), file=rel, error=ReleaseFileError)
    result = RequirementSet(files=[rel])
    base = PurePosixPath(rel).parent
    for number, line in _logical_lines(text):
        where = f"{rel}:{number}"
        head, _, rest = line.partition(" ")
        if "=" in head and head.startswith("--"):
            head, _, rest = line.partition("=")
        rest = rest.strip()
        if head in _INCLUDE_OPTIONS:
            included = read_requirements(release, _resolve(base, rest), _seen=(*_seen, rel))
            result.files += [f for f in included.files if f not in result.files]
            result.pins += included.pins
            result.options += included.options
        elif head in INDEX_OPTIONS:
            if not rest:
                raise ReleaseFileError("option without a value", file=rel, field=f"line {number}", found=head)
            result.options.append(IndexOption(INDEX_OPTIONS[head], rest, where))
        elif line.startswith("-"):
            raise ReleaseFileError("option not supported in a pinned environment file", file=rel,
                                   field=f"line {number}", found=head,
                                   hint="expected requirements, -r, --extra-index-url, --index-url or -f")
        else:
            result.pins.append(_parse_requirement(line, rel, number))
    if len(result.files) == 1 and not result.pins and not result.options:
        # an emptied or truncated release file: constraints of comments only would constrain nothing
        raise ReleaseFileError("requirement file holds no requirement", file=rel,
                               hint="the release file is empty or truncated; fetch the release again")
    return result


#: The packages of upstream's prediction-workbook round trip and the release file that pins each.
WORKBOOK_PIN_FILES = {
    "pandas": identity.REQUIREMENTS_CU128,
    "xlsxwriter": identity.EVAL_REQUIREMENTS,
    "openpyxl": identity.EVAL_REQUIREMENTS_RUNTIME,
}


def workbook_pins(release: ReleaseRoot) -> dict[str, str]:
    """The paper's pandas / XlsxWriter / openpyxl versions (``==`` pins of the release's requirement files).

    Raises:
        ReleaseFileError: a file does not pin one of them exactly.
    """
    pins = {}
    for name, rel in WORKBOOK_PIN_FILES.items():
        version = next((p.exact_version for p in read_requirements(release, rel).pins
                        if p.name == name and p.exact_version), None)
        if version is None:
            raise ReleaseFileError(f"the release does not pin {name} exactly", file=rel, field=name)
        pins[name] = version
    return pins
