"""Lenient shared views of release files that several check groups build on (no findings recorded here).

A view is None when its file is too broken to use; the group that owns the file reports why, and dependent
groups record ``not checked`` against their own file instead of repeating the owner's findings.
"""

from __future__ import annotations

from typing import Any

from trace_lib.aggregation import ScoreKey
from trace_lib.errors import ReleaseFileError
from trace_lib.preflight.context import CheckContext, GroupOutcome
from trace_lib.preflight.fields import MISSING, Kind, is_kind
from trace_lib.release import identity
from trace_lib.release.suite import Suite, load_suite


def suite_view(ctx: CheckContext) -> Suite | None:
    """The suite when its benchmarks, categories and routes are well-typed enough to build on, else None."""
    try:
        suite = load_suite(ctx.release)
    except (ReleaseFileError, AttributeError, TypeError, ValueError):
        return None
    keys = suite.keys
    if not all(is_kind(k, Kind.TEXT) for k in keys) or len(set(keys)) != len(keys):
        return None
    if not all(is_kind(b.rows, Kind.COUNT) for b in suite.benchmarks):
        return None
    members = [m for group in suite.categories.values() for m in group]
    if sorted(members, key=str) != sorted(keys):
        return None
    return suite


def require_suite(ctx: CheckContext, out: GroupOutcome, file: str) -> Suite | None:
    """:func:`suite_view`, recording ``not checked`` against ``file`` when the suite is unusable."""
    suite = suite_view(ctx)
    if suite is None:
        out.not_checked(file, f"{identity.SUITE} is unusable (see group 'suite')")
    return suite


def document(ctx: CheckContext, rel: str) -> dict[str, Any] | None:
    """Release file ``rel`` as a JSON (or, for ``.yaml``, YAML) object, or None (its owning group reports why)."""
    try:
        doc = ctx.release.read_yaml(rel) if rel.endswith(".yaml") else ctx.release.read_json(rel)
    except ReleaseFileError:
        return None
    return doc if isinstance(doc, dict) else None


def results_doc(ctx: CheckContext) -> dict[str, Any] | None:
    """``results.json`` as an object, or None."""
    return document(ctx, identity.RESULTS)


def model_ids(results: dict[str, Any]) -> list[str]:
    """Model ids of ``results.json`` in file order (malformed entries left out)."""
    models = results.get("models")
    if not isinstance(models, list):
        return []
    return [m["model_id"] for m in models if isinstance(m, dict) and is_kind(m.get("model_id"), Kind.TEXT)]


def seeds(results: dict[str, Any]) -> list[int]:
    """Decoding seeds of ``results.json`` (malformed entries left out)."""
    raw = results.get("seeds")
    if not isinstance(raw, list):
        return []
    return [s for s in raw if is_kind(s, Kind.NONNEG)]


def rows_of(results: dict[str, Any], collection: str) -> list[dict[str, Any]]:
    """The object rows of ``results.scores.<collection>`` (non-objects left out)."""
    scores = results.get("scores")
    rows = scores.get(collection) if isinstance(scores, dict) else None
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def score_table(results: dict[str, Any]) -> dict[ScoreKey, float]:
    """``{(model, seed, benchmark): score}`` of the well-formed, first-seen benchmark score rows."""
    table: dict[ScoreKey, float] = {}
    for row in rows_of(results, "benchmark_scores"):
        key = (row.get("model_id"), row.get("seed"), row.get("benchmark_id"))
        if not (is_kind(key[0], Kind.TEXT) and is_kind(key[1], Kind.NONNEG) and is_kind(key[2], Kind.TEXT)):
            continue
        if is_kind(row.get("score"), Kind.NUMBER) and key not in table:
            table[key] = float(row["score"])  # type: ignore[index]
    return table


def score_label(model: str, seed: int | None = None, *names: str) -> str:
    """The identity part of a field path: ``model, seed 42, mathvista``."""
    parts = [model] + ([f"seed {seed}"] if seed is not None else []) + list(names)
    return ", ".join(str(p) for p in parts)


#: The two training profiles of the release (paths are identity facts; the content is read at run time).
PROFILE_FILES: tuple[str, ...] = (identity.PROFILE_3B, identity.PROFILE_7B)


def profiles(ctx: CheckContext) -> dict[str, dict[str, Any]]:
    """``{profile path: parsed YAML}`` of the training profiles that parse as mappings."""
    found = {}
    for rel in PROFILE_FILES:
        doc = document(ctx, rel)
        if doc is not None:
            found[rel] = doc
    return found


def dig(doc: Any, dotted: str) -> Any:
    """``doc[a][b][c]`` for ``"a.b.c"``, or :data:`~trace_lib.preflight.fields.MISSING` where the path does not
    exist (including when ``doc`` itself is None: an unreadable document)."""
    for part in dotted.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return MISSING
        doc = doc[part]
    return doc


def digest(ctx: CheckContext, rel: str) -> Any:
    """SHA-256 of release file ``rel``, or MISSING when it does not exist (for cross-file expectations)."""
    sha = ctx.sha256(rel)
    return MISSING if sha is None else sha


def count(value: Any) -> Any:
    """``len(value)`` of an array, else MISSING."""
    return len(value) if isinstance(value, list) else MISSING


def tree_files(ctx: CheckContext) -> tuple[list[str], list[str]]:
    """``(release files, ignored files)`` under ``rlvr/`` as sorted release-relative paths.

    Ignored (never part of a release, never a failure): byte-code (``__pycache__``, ``*.pyc``, ``*.pyo``) and
    anything inside a hidden directory or hidden file, e.g. the documented work directory
    ``rlvr/evaluation/.work/`` (upstream's inventory checks fail on it).
    """
    root = ctx.release.file("rlvr")
    kept, ignored = [], []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(ctx.release.path).as_posix()
        parts = rel.split("/")[1:]
        if any(p.startswith(".") or p == "__pycache__" for p in parts) or rel.endswith((".pyc", ".pyo")):
            ignored.append(rel)
        else:
            kept.append(rel)
    return kept, ignored
