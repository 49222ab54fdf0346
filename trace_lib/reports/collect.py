"""Read a campaign directory slice by slice: generation coverage and scored-slice receipts, never raising for
bad data (each problem becomes the slice's ``detail``).

Layout (``trace_lib.generation.store`` and ``trace_lib.scoring.score``)::

    <campaign>/generation/seed_<S>/<model>/<benchmark>.jsonl       responses (header + one line per row)
    <campaign>/scoring/seed_<S>/<model>/<benchmark>/scores.json    the scored slice (written last)
    <campaign>/scoring/seed_<S>/<model>/<benchmark>/records.jsonl  per-row records

Expected rows come from the suite. ``FileHashes`` caches SHA-256 by (size, mtime) so a ``--watch`` loop does not
re-hash unchanged files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from trace_lib.decoding import ascii_digits
from trace_lib.slices import Slice
from trace_lib.errors import TraceReproError
from trace_lib.outputs import not_regular
from trace_lib.release.load import load_json, sha256_file


#: (model, seed, benchmark); ``id`` is the test id ``MODEL-seedSEED-BENCHMARK``: the campaign plan's slice.
SliceKey = Slice


@dataclass(frozen=True)
class SliceState:
    """One slice's state for one phase: complete or not, why, and where."""

    key: SliceKey
    phase: str  # "generation" | "score"
    complete: bool
    detail: str
    path: str
    rows: int = 0  # rows present (generation: stored responses; score: scored rows)
    expected_rows: int = 0
    score: float | None = None  # score phase, when readable

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.key.seed, "model_slug": self.key.model, "benchmark_key": self.key.benchmark,
                "slice": self.key.id, "phase": self.phase, "complete": self.complete, "detail": self.detail,
                "path": self.path, "rows": self.rows, "expected_rows": self.expected_rows, "score": self.score}


@dataclass
class FileHashes:
    """SHA-256 of files, cached by (size, mtime_ns)."""

    _cache: dict[Path, tuple[int, int, str]] = field(default_factory=dict)

    def sha256(self, path: Path) -> str:
        stat = path.stat()
        cached = self._cache.get(path)
        if cached and cached[:2] == (stat.st_size, stat.st_mtime_ns):
            return cached[2]
        digest = sha256_file(path)
        self._cache[path] = (stat.st_size, stat.st_mtime_ns, digest)
        return digest


@dataclass
class _LineCounts:
    _cache: dict[Path, tuple[int, int, int]] = field(default_factory=dict)

    def count(self, path: Path) -> int:
        """Complete lines after the header (a torn last line does not count)."""
        stat = path.stat()
        cached = self._cache.get(path)
        if cached and cached[:2] == (stat.st_size, stat.st_mtime_ns):
            return cached[2]
        lines = 0
        with open(path, "rb") as handle:
            while block := handle.read(1 << 22):
                lines += block.count(b"\n")
        rows = max(0, lines - 1)
        self._cache[path] = (stat.st_size, stat.st_mtime_ns, rows)
        return rows


def expected_slices(models: Sequence[str], seeds: Sequence[int], benchmarks: Sequence[str]) -> list[SliceKey]:
    """Model-major, then seed, then benchmark (the plan's order)."""
    return [SliceKey(m, s, b) for m in models for s in seeds for b in benchmarks]


def response_file(root: Path, key: SliceKey) -> Path:
    from trace_lib.generation.store import response_path

    return response_path(root, model=key.model, seed=key.seed, benchmark=key.benchmark)


def scores_file(root: Path, key: SliceKey) -> Path:
    from trace_lib.scoring.score import SCORES_FILE, scores_dir

    return scores_dir(root, model=key.model, seed=key.seed, benchmark=key.benchmark) / SCORES_FILE


@dataclass
class CampaignReader:
    """Checks slices of one campaign directory; ``rows`` maps benchmark -> suite rows."""

    root: Path
    rows: Mapping[str, int]
    hashes: FileHashes = field(default_factory=FileHashes)
    check_responses_hash: bool = True  # bind scores.json to the current responses file (costs a hash per slice)
    _lines: _LineCounts = field(default_factory=_LineCounts)

    # -- generation ------------------------------------------------------------------------------------------
    def generation(self, key: SliceKey) -> SliceState:
        """Whether the slice's response file exists, names this slice, and holds every suite row (rows as the
        readers parse them: a repeated row is a corrupt file, a torn last line no row)."""
        from trace_lib.generation.store import read_response_file

        path = response_file(self.root, key)
        expected = self.rows[key.benchmark]

        def state(complete: bool, detail: str, rows: int = 0) -> SliceState:
            return SliceState(key, "generation", complete, detail, str(path), rows, expected)

        if not path.is_file():
            return state(False, not_regular(path) or "responses missing")
        try:
            header, stored = read_response_file(path)
        except TraceReproError as exc:
            return state(False, f"unreadable responses: {exc.render()}")
        for name, want in (("slice", key.id), ("model", key.model), ("seed", key.seed), ("benchmark", key.benchmark)):
            if header.get(name) != want:
                return state(False, f"header.{name} is {header.get(name)!r}, expected {want!r}")
        rows = min(len(stored), expected)
        if rows < expected:
            return state(False, f"{rows}/{expected} rows generated", rows)
        return state(True, f"{expected}/{expected} rows generated", rows)

    def odd_files(self, key: SliceKey) -> list[str]:
        """The slice's response and scores paths that exist but are not regular files (a FIFO, a directory, a
        dangling link ...), in words: status counts such a slice as absent and says why, without opening them."""
        paths = (response_file(self.root, key), scores_file(self.root, key))
        return [f"{path}: {problem}" for path in paths if (problem := not_regular(path))]

    def durable_rows(self, key: SliceKey) -> int:
        """Rows stored for the slice (0 without a file), capped at the suite rows; no parsing (status)."""
        path = response_file(self.root, key)
        return min(self._lines.count(path), self.rows[key.benchmark]) if path.is_file() else 0

    # -- scores ----------------------------------------------------------------------------------------------
    def score(self, key: SliceKey, *, protocol_versions: Mapping[str, str] | None = None) -> SliceState:
        """Whether the slice's ``scores.json`` is a valid receipt for this slice and for the files it names."""
        from trace_lib.scoring.score import SCORES_SCHEMA

        path = scores_file(self.root, key)
        expected = self.rows[key.benchmark]

        def state(complete: bool, detail: str, doc: Mapping[str, Any] | None = None) -> SliceState:
            rows = doc.get("rows") if doc else 0
            score = doc.get("score") if doc else None
            return SliceState(key, "score", complete, detail, str(path), rows if isinstance(rows, int) else 0,
                              expected, score if _finite(score) else None)

        if not path.is_file():
            return state(False, not_regular(path) or "scores missing")
        try:
            doc = load_json(path)
        except TraceReproError as exc:
            return state(False, f"unreadable scores: {exc.render()}")
        if not isinstance(doc, dict) or doc.get("schema_version") != SCORES_SCHEMA:
            return state(False, f"scores.json schema_version is not {SCORES_SCHEMA!r}")
        for name, want in (("slice", key.id), ("model", key.model), ("seed", key.seed), ("benchmark", key.benchmark)):
            if doc.get(name) != want:
                return state(False, f"scores.json {name} is {doc.get(name)!r}, expected {want!r}", doc)
        if not _finite(doc.get("score")):
            return state(False, f"score is not a finite number ({doc.get('score')!r})", doc)
        if doc.get("rows") != expected:
            return state(False, f"scored {doc.get('rows')!r} rows, the suite has {expected}", doc)
        protocol = _object(doc, "protocol")
        if protocol is None:
            return state(False, "scores.json protocol is not an object", doc)
        version = protocol.get("version")
        if protocol_versions and key.benchmark in protocol_versions and version != protocol_versions[key.benchmark]:
            return state(False, f"scored with protocol {version!r}, current is {protocol_versions[key.benchmark]!r}",
                         doc)
        problem = self._receipt_problem(path.parent, doc, key)
        if problem:
            return state(False, problem, doc)
        return state(True, f"score {doc['score']:.3f} over {expected} rows", doc)

    def _receipt_problem(self, directory: Path, doc: Mapping[str, Any], key: SliceKey) -> str | None:
        records = _object(doc, "records")
        if records is None:
            return "scores.json records is not an object"
        name = records.get("path")
        if not isinstance(name, str) or not name or Path(name).name != name or name in (".", ".."):
            return f"scores.json records.path is not a file name beside it ({name!r})"
        records_path = directory / name
        if not records_path.is_file():
            return "records.jsonl missing"
        if self.hashes.sha256(records_path) != records.get("sha256"):
            return "records.jsonl differs from the sha256 in scores.json"
        if self.check_responses_hash:
            responses = _object(doc, "inputs", "responses")
            if responses is None:
                return "scores.json inputs.responses is not an object"
            current = response_file(self.root, key)
            if not current.is_file():
                return "responses missing (scores have no current input)"
            if self.hashes.sha256(current) != responses.get("sha256"):
                return "responses changed since scoring (re-run 'trace-repro score')"
        return None

    def scores(self, key: SliceKey) -> Mapping[str, Any] | None:
        """The parsed ``scores.json`` of a slice, or None when missing or unreadable."""
        path = scores_file(self.root, key)
        try:
            doc = load_json(path)
        except TraceReproError:
            return None
        return doc if isinstance(doc, dict) else None


def _finite(value: Any) -> bool:
    """A JSON number a float holds (an integer too large for one is not)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _object(doc: Mapping[str, Any], *names: str) -> Mapping[str, Any] | None:
    """``doc[names[0]][names[1]]...`` when each is a JSON object, else None."""
    value: Any = doc
    for name in names:
        value = value.get(name) if isinstance(value, Mapping) else None
    return value if isinstance(value, Mapping) else None


def discover(root: Path) -> tuple[list[str], list[int]]:
    """Models and seeds present under ``<root>/generation`` and ``<root>/scoring`` (sorted)."""
    models: set[str] = set()
    seeds: set[int] = set()
    for phase in ("generation", "scoring"):
        base = Path(root) / phase
        if not base.is_dir():
            continue
        for seed_dir in base.iterdir():
            if seed_dir.is_dir() and seed_dir.name.startswith("seed_") and ascii_digits(seed_dir.name[5:]):
                seeds.add(int(seed_dir.name[5:]))
                models.update(p.name for p in seed_dir.iterdir() if p.is_dir())
    return sorted(models), sorted(seeds)


def current_protocol_versions(benchmarks: Sequence[str]) -> dict[str, str]:
    """Benchmark -> version of the implemented protocols (unimplemented ones are left out)."""
    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.errors import ProtocolNotImplementedError

    out = {}
    for key in benchmarks:
        try:
            out[key] = get_protocol(key).version
        except ProtocolNotImplementedError:
            continue
    return out


def resolve_selection(
    root: Path, suite_keys: Sequence[str], *, models: Sequence[str] | None, seeds: Sequence[int] | None,
    benchmarks: Sequence[str] | None,
) -> tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...]]:
    """The slices to report on: the models and seeds given, else those present under ``root``; the benchmarks
    given (suite order), else the whole suite."""
    found_models, found_seeds = discover(root)
    chosen_benchmarks = tuple(k for k in suite_keys if not benchmarks or k in set(benchmarks))
    return tuple(models or found_models), tuple(int(s) for s in (seeds or found_seeds)), chosen_benchmarks
