"""``trace-repro receipt FILE``: what a JUnit XML receipt of a trace-repro run says, in a few lines.

``load_junit(path)`` reads a pytest JUnit file (any ``junit_family``) into a frozen :class:`JUnitSummary`:
outcome counts, counts per marker (from the ``markers`` property the pytest plugin records on every test),
each failure with its message, and the release identity the tests recorded (``release_commit``,
``release_root``, ``sha256:<file>`` properties), and the verdicts the tests recorded (``verdict`` property:
reproduced, differs or inconclusive). A malformed or empty-of-tests file is an error, never a pass; a run in
which nothing passed (every test skipped) verified nothing, and an inconclusive verdict is never ok, however
pytest reported it (``--inconclusive skip|xfail``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_lib.errors import InputError

#: property name under which the pytest plugin records a test's markers (comma-separated, sorted)
MARKERS_PROPERTY = "markers"
UNRECORDED = "(unrecorded)"
OUTCOMES = ("passed", "failed", "error", "skipped")
RELEASE_PROPERTIES = ("release_commit", "release_root", "env_vllm", "env_torch", "env_transformers",
                      "env_matches_paper")
HASH_PREFIX = "sha256:"
VERDICT_PROPERTY = "verdict"
VERDICT_OUTCOMES = ("reproduced", "differs", "inconclusive")


@dataclass(frozen=True)
class CaseResult:
    """One ``<testcase>``: its id, outcome, first message line and recorded properties."""

    test_id: str
    outcome: str
    message: str
    markers: tuple[str, ...] | None
    properties: tuple[tuple[str, str], ...] = field(repr=False)


@dataclass(frozen=True)
class JUnitSummary:
    """Everything ``trace-repro receipt`` reports about one JUnit file."""

    file: str
    cases: tuple[CaseResult, ...]

    @property
    def counts(self) -> dict[str, int]:
        counts = Counter(c.outcome for c in self.cases)
        return {outcome: counts[outcome] for outcome in OUTCOMES}

    @property
    def verdicts(self) -> dict[str, int]:
        """How many tests recorded each verdict outcome (the last ``verdict`` property of a test)."""
        found = Counter()
        for case in self.cases:
            recorded = [v for n, v in case.properties if n == VERDICT_PROPERTY and v in VERDICT_OUTCOMES]
            if recorded:
                found[recorded[-1]] += 1
        return {o: found[o] for o in VERDICT_OUTCOMES}

    @property
    def status(self) -> str:
        """``ok``; ``failed`` (a failure or error); ``inconclusive`` (a verdict could not tell, even when pytest
        skipped or xfailed it); ``nothing verified`` (no test passed: no tests, or every one skipped)."""
        counts = self.counts
        if counts["failed"] or counts["error"]:
            return "failed"
        if self.verdicts["inconclusive"]:
            return "inconclusive"
        if not counts["passed"]:
            return "nothing verified"
        return "ok"

    @property
    def ok(self) -> bool:
        """At least one test passed, none failed or errored, and no verdict is inconclusive."""
        return self.status == "ok"

    @property
    def by_marker(self) -> dict[str, dict[str, int]]:
        """``marker -> outcome -> count``; tests that recorded no markers property count as ``(unrecorded)``."""
        table: dict[str, Counter[str]] = {}
        for case in self.cases:
            names = case.markers if case.markers is not None else (UNRECORDED,)
            for name in names or ("(none)",):
                table.setdefault(name, Counter())[case.outcome] += 1
        return {name: {o: table[name][o] for o in OUTCOMES if table[name][o]} for name in sorted(table)}

    @property
    def failures(self) -> list[CaseResult]:
        return [c for c in self.cases if c.outcome in ("failed", "error")]

    @property
    def release(self) -> dict[str, Any]:
        """The release identity recorded by the tests: each property's distinct values, and the file hashes."""
        values: dict[str, set[str]] = {}
        hashes: dict[str, set[str]] = {}
        for case in self.cases:
            for name, value in case.properties:
                if name in RELEASE_PROPERTIES:
                    values.setdefault(name, set()).add(value)
                elif name.startswith(HASH_PREFIX):
                    hashes.setdefault(name[len(HASH_PREFIX):], set()).add(value)
        out: dict[str, Any] = {name: sorted(found) for name, found in sorted(values.items())}
        out["file_hashes"] = {path: sorted(found) for path, found in sorted(hashes.items())}
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "status": self.status,
            "tests": len(self.cases),
            "counts": self.counts,
            "verdicts": self.verdicts,
            "by_marker": self.by_marker,
            "release": self.release,
            "failures": [{"test": c.test_id, "outcome": c.outcome, "message": c.message} for c in self.failures],
        }

    def render_text(self) -> str:
        counts = self.counts
        lines = [f"trace-repro receipt {self.file}: {len(self.cases)} tests: "
                 + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES)]
        verdicts = self.verdicts
        if any(verdicts.values()):
            lines.append("  verdicts: " + ", ".join(f"{verdicts[o]} {o}" for o in VERDICT_OUTCOMES))
        release = self.release
        for name in RELEASE_PROPERTIES:
            found = release.get(name)
            if found:
                lines.append(f"  {name}: {found[0]}" if len(found) == 1 else f"  {name}: MIXED {found}")
        conflicting = [p for p, v in release["file_hashes"].items() if len(v) > 1]
        if release["file_hashes"]:
            lines.append(f"  release files hashed: {len(release['file_hashes'])}"
                         + (f"; differing between tests: {', '.join(conflicting)}" if conflicting else ""))
        if not any(release.get(n) for n in RELEASE_PROPERTIES):
            lines.append("  release identity: not recorded by any test")
        lines.append("by marker:")
        width = max((len(m) for m in self.by_marker), default=0)
        for marker, per_outcome in self.by_marker.items():
            lines.append(f"  {marker:<{width}}  " + ", ".join(f"{n} {o}" for o, n in per_outcome.items()))
        for case in self.failures:
            lines.append(f"{case.outcome.upper()} {case.test_id}: {case.message}")
        if not self.cases:
            lines.append("status: nothing verified (the file holds no test cases)")
        elif self.status == "nothing verified":
            lines.append(f"status: nothing verified (no test passed: {counts['skipped']} skipped)")
        elif self.status == "inconclusive":
            lines.append(f"status: inconclusive ({verdicts['inconclusive']} verdict(s) could not tell; not a pass)")
        else:
            lines.append(f"status: {self.status}")
        return "\n".join(lines)


def load_junit(path: str | Path) -> JUnitSummary:
    """Parse a JUnit XML file written by pytest.

    Raises:
        InputError: the file is missing, unreadable, not UTF-8 XML, or not a JUnit ``testsuites``/``testsuite`` file.
    """
    label = str(path)
    from trace_lib.decoding import read_text

    try:  # UTF-8 as every text input (a declared encoding is not followed: 'bogus' was a LookupError traceback)
        root = ET.fromstring(read_text(path, name=label))
    except FileNotFoundError:
        raise InputError("file is missing", file=label) from None
    except ET.ParseError as exc:
        line, column = exc.position
        raise InputError(f"malformed XML at line {line} column {column + 1}", file=label) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", file=label) from None
    if root.tag not in ("testsuites", "testsuite"):
        raise InputError("not a JUnit report", file=label, expected="<testsuites> or <testsuite>",
                         found=f"<{root.tag}>")
    cases = []
    for number, element in enumerate(root.iter("testcase")):
        if not element.get("name"):  # pytest names every test: a nameless one is no receipt of a test
            raise InputError("a <testcase> without a name", file=label, field=f"testcase[{number}]")
        cases.append(_case(element))
    return JUnitSummary(label, tuple(cases))


def _case(element: ET.Element) -> CaseResult:
    classname, name = element.get("classname", ""), element.get("name", "")
    test_id = f"{classname}::{name}" if classname else name
    outcome, message = "passed", ""
    for tag, label in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        child = element.find(tag)
        if child is not None:
            outcome = label
            text = child.get("message") or (child.text or "")
            message = text.strip().splitlines()[0] if text.strip() else ""
            break
    properties = tuple(
        (p.get("name", ""), p.get("value", "")) for p in element.iter("property")
    )
    recorded = [v for n, v in properties if n == MARKERS_PROPERTY]
    markers = tuple(m for m in recorded[-1].split(",") if m) if recorded else None
    return CaseResult(test_id, outcome, message, markers, properties)
