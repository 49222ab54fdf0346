"""The release gate every ``train`` subcommand runs first: the preflight groups that cover it.

The checks themselves live in :mod:`trace_lib.preflight` (one implementation for ``trace-repro check`` and
``train``); this module runs the groups of upstream's training gate -- profile pair and frozen values, system
prompt hash, dataset-equivalence receipt, release-file inventory -- and turns failures into one error.
``check_summary`` is the JSON line ``train check`` prints (upstream's fields).
"""

from __future__ import annotations

import importlib
from typing import Any

from trace_lib.errors import ReleaseFileError
from trace_lib.release.locate import ReleaseRoot
from trace_lib.training.profiles import TrainingProfile

#: Preflight group modules that make up upstream's training gate (A profiles, D prompt, E equivalence, C inventory).
GATE_MODULES: tuple[str, ...] = (
    "trace_lib.preflight.profiles",
    "trace_lib.preflight.prompt_hash",
    "trace_lib.preflight.equivalence",
    "trace_lib.preflight.source_inventory",
)


def gate_groups() -> list[Any]:
    """The preflight ``CheckGroup`` objects of the gate.

    Raises:
        ReleaseFileError: a gate group is not available in this trace-repro build.
    """
    groups = []
    for name in GATE_MODULES:
        try:
            groups.append(importlib.import_module(name).GROUP)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            raise ReleaseFileError(f"preflight group module {name} is not available; the training gate cannot run") from None
    return groups


def run_gate(release: ReleaseRoot) -> list[Any]:
    """Run the gate's groups (pinned mode); return their outcomes (``GroupOutcome``)."""
    from trace_lib.preflight.context import CheckContext
    from trace_lib.preflight.registry import run_group

    ctx = CheckContext(release, pinned=True)
    return [run_group(group, ctx) for group in gate_groups()]


def require_gate(release: ReleaseRoot) -> list[Any]:
    """Run the gate; raise one error listing every failure (``not checked`` parts do not fail it).

    Raises:
        ReleaseFileError: any gate group failed (message: every finding line, ``; ``-joined).
    """
    outcomes = run_gate(release)
    failures = [finding.line() for outcome in outcomes for finding in outcome.failures]
    if failures:
        raise ReleaseFileError(f"training gate failed ({len(failures)} findings): " + "; ".join(failures))
    return outcomes


def check_summary(release: ReleaseRoot, profile: TrainingProfile) -> dict[str, Any]:
    """The ``train check`` line: config id and hash, dataset revision, prompt hash, selected step, status."""
    return {
        "config_id": profile.config_id,
        "config_sha256": profile.sha256,
        "dataset_revision": profile.dataset.revision,
        "prompt_sha256": release.sha256(profile.prompt_path),
        "selected_checkpoint_step": profile.selected_checkpoint_step,
        "status": "ok",
    }
